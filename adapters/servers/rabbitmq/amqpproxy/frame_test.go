package amqpproxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"maps"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
)

// Frame builders for tests.

var protocolHeader = []byte("AMQP\x00\x00\x09\x01")

func rawFrame(typ byte, ch uint16, payload []byte) []byte {
	b := []byte{typ, byte(ch >> 8), byte(ch), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[3:], uint32(len(payload)))
	b = append(b, payload...)
	return append(b, frameEnd)
}

// method builds a method frame; args are concatenated after the ids.
func method(ch uint16, name string, args ...[]byte) []byte {
	i, ok := methodByName[name]
	if !ok {
		panic("unknown method " + name)
	}
	return rawFrame(frameMethod, ch, methodPayload(methods[i].id, args...))
}

func methodPayload(id methodID, args ...[]byte) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(id))
	for _, a := range args {
		p = append(p, a...)
	}
	return p
}

func short(v uint16) []byte    { return binary.BigEndian.AppendUint16(nil, v) }
func long(v uint32) []byte     { return binary.BigEndian.AppendUint32(nil, v) }
func octet(v byte) []byte      { return []byte{v} }
func shortstr(s string) []byte { return append([]byte{byte(len(s))}, s...) }
func emptyTable() []byte       { return long(0) }

func ack(ch uint16, name string, tag uint64, multiple bool) []byte {
	bits := byte(0)
	if multiple {
		bits = 1
	}
	return method(ch, name, binary.BigEndian.AppendUint64(nil, tag), octet(bits))
}

func queueDeclare(ch uint16, q string, noWait bool) []byte {
	bits := byte(0)
	if noWait {
		bits = 1 << 4
	}
	return method(ch, "queue.declare", short(0), shortstr(q), octet(bits), emptyTable())
}

func publish(ch uint16, rk string) []byte {
	return bytes.Join([][]byte{
		method(ch, "basic.publish", short(0), shortstr(""), shortstr(rk), octet(1)),
		rawFrame(frameHeader, ch, make([]byte, 14)),
		rawFrame(frameBody, ch, []byte("hello")),
	}, nil)
}

func returnFrames(ch uint16, rk string) []byte {
	return bytes.Join([][]byte{
		method(ch, "basic.return", short(312), shortstr("NO_ROUTE"), shortstr(""), shortstr(rk)),
		rawFrame(frameHeader, ch, make([]byte, 14)),
		rawFrame(frameBody, ch, []byte("hello")),
	}, nil)
}

func channelCloseFrame(ch uint16, code uint16, class, meth uint16) []byte {
	return method(ch, "channel.close", short(code), shortstr("NOT_FOUND - no queue"), short(class), short(meth))
}

func heartbeat() []byte { return rawFrame(frameHeartbeat, 0, nil) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// script is an io.Reader that returns its steps' data one Read at a time
// (data larger than the buffer takes several), running a step's hook just
// before its first byte is read; then io.EOF.
type script []step

type step struct {
	before func()
	data   []byte
}

func (s *script) Read(b []byte) (int, error) {
	for len(*s) > 0 && len((*s)[0].data) == 0 {
		if h := (*s)[0].before; h != nil {
			h()
		}
		*s = (*s)[1:]
	}
	if len(*s) == 0 {
		return 0, io.EOF
	}
	st := &(*s)[0]
	if st.before != nil {
		st.before()
		st.before = nil
	}
	n := copy(b, st.data)
	st.data = st.data[n:]
	return n, nil
}

// splitAt cuts b at the given offsets (ascending, within b).
func splitAt(b []byte, offs ...int) [][]byte {
	var out [][]byte
	last := 0
	for _, o := range offs {
		out = append(out, b[last:o])
		last = o
	}
	return append(out, b[last:])
}

// result is what one direction of a connection did with its input.
type result struct {
	out    []byte // bytes forwarded, in order
	eof    bool   // then the destination was half-closed (the source ended)
	killed bool   // the connection was killed
}

// sink is a destination that keeps what is written to it.
type sink struct {
	mu  sync.Mutex
	buf []byte
	eof bool
}

func (s *sink) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, b...)
	return len(b), nil
}

func (s *sink) CloseWrite() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eof = true
	return nil
}

// runDir drives the real reader and writer of one direction over the given
// reads and returns what they forwarded.
func runDir(t testing.TB, p *Proxy, sess *session, dir int, reads [][]byte) result {
	t.Helper()
	steps := make(script, len(reads))
	for i, r := range reads {
		steps[i].data = r
	}
	return runScript(t, p, sess, dir, steps)
}

func runScript(t testing.TB, p *Proxy, sess *session, dir int, steps script) result {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	c := p.fn.NewConn(a)
	defer c.Kill()
	dst := &sink{}
	st := newStream(dir, sess, p.counts, p.take, make([]byte, bufSize))
	// Run ends with the reader's last word, or the kill.
	c.Pipe(&steps, dst).Run(func(pp *faultnet.Pipe) { read(pp, st) })
	killed := false
	select {
	case <-c.Done():
		killed = true
	default:
	}
	dst.mu.Lock()
	defer dst.mu.Unlock()
	return result{out: dst.buf, eof: dst.eof, killed: killed}
}

// clientStream is a typical client's side of a connection.
func clientStream() []byte {
	return cat(protocolHeader,
		method(0, "connection.start-ok", emptyTable(), shortstr("PLAIN"), long(0), shortstr("en_US")),
		method(0, "connection.tune-ok", short(2047), long(131072), short(10)),
		method(0, "connection.open", shortstr("/"), shortstr(""), octet(0)),
		method(1, "channel.open", shortstr("")),
		method(1, "confirm.select", octet(0)),
		queueDeclare(1, "q", false),
		publish(1, "q"),
		heartbeat(),
		rawFrame(frameMethod, 1, methodPayload(mid(60, 99))), // not in the protocol
		method(1, "channel.close", short(200), shortstr("bye"), short(0), short(0)),
		method(0, "connection.close", short(200), shortstr("bye"), short(0), short(0)),
	)
}

var clientStreamSent = map[string]int{
	"connection.start-ok": 1, "connection.tune-ok": 1, "connection.open": 1, "channel.open": 1,
	"confirm.select": 1, "queue.declare": 1, "basic.publish": 1, "class.method(60,99)": 1,
	"channel.close": 1, "connection.close": 1,
}

func TestParserWholeStreamInOneRead(t *testing.T) {
	p := newProxy("")
	in := clientStream()
	r := runDir(t, p, newSession(), toBroker, [][]byte{in})
	if !bytes.Equal(r.out, in) || !r.eof {
		t.Fatalf("forwarded %d of %d bytes, eof %v; want all, then EOF", len(r.out), len(in), r.eof)
	}
	c := p.Counts()
	if !maps.Equal(c.Sent.Methods, clientStreamSent) || c.HeartbeatsSent != 1 || c.Sent.Channels != 1 || len(c.Received) != 0 {
		t.Fatalf("counts %+v, want Sent %v and one heartbeat", c, clientStreamSent)
	}
}

// Every way of splitting the stream in two reads, and one byte per read,
// forwards the same bytes and counts the same methods.
func TestParserFramesSplitAcrossReads(t *testing.T) {
	in := clientStream()
	check := func(name string, reads [][]byte) {
		t.Helper()
		p := newProxy("")
		r := runDir(t, p, newSession(), toBroker, reads)
		c := p.Counts()
		if !bytes.Equal(r.out, in) || !r.eof || !maps.Equal(c.Sent.Methods, clientStreamSent) || c.HeartbeatsSent != 1 {
			t.Fatalf("%s: forwarded %d of %d bytes, eof %v, sent %v", name, len(r.out), len(in), r.eof, c.Sent.Methods)
		}
	}
	for i := 1; i < len(in); i++ {
		check("split at "+strconv.Itoa(i), splitAt(in, i))
	}
	bytewise := make([][]byte, len(in))
	for i := range in {
		bytewise[i] = in[i : i+1]
	}
	check("one byte per read", bytewise)
}

// A frame bigger than the read buffer streams through.
func TestParserLargeBodyFrame(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 3*bufSize+5)
	in := cat(protocolHeader, method(1, "basic.publish", short(0), shortstr(""), shortstr("q"), octet(0)),
		rawFrame(frameHeader, 1, make([]byte, 14)), rawFrame(frameBody, 1, body), heartbeat())
	p := newProxy("")
	r := runDir(t, p, newSession(), toBroker, [][]byte{in})
	if !bytes.Equal(r.out, in) || !r.eof || p.Counts().Sent.Methods["basic.publish"] != 1 || p.Counts().HeartbeatsSent != 1 {
		t.Fatalf("forwarded %d of %d bytes, eof %v, counts %+v", len(r.out), len(in), r.eof, p.Counts())
	}
}

func TestParserMalformed(t *testing.T) {
	good := method(1, "channel.open", shortstr(""))
	badEnd := bytes.Clone(good)
	badEnd[len(badEnd)-1] = 0xCD
	oversize := []byte{frameBody, 0, 1, 0x08, 0, 0, 1} // 128 MiB + 1
	tooShort := rawFrame(frameMethod, 1, []byte{0, 20})
	cases := []struct {
		name string
		dir  int
		in   []byte
	}{
		{"bad frame-end", toBroker, cat(protocolHeader, good, badEnd, good)},
		{"bad frame-end split", toBroker, cat(protocolHeader, badEnd)},
		{"size over 128 MiB", toBroker, cat(protocolHeader, good, oversize, make([]byte, 100))},
		{"method frame without ids", toClient, cat(good, tooShort)},
		{"no protocol header", toBroker, good},
		{"HTTP", toBroker, []byte("GET / HTTP/1.1\r\n\r\n")},
		{"broker header not AMQP", toClient, []byte("AMQx\x00\x00\x09\x01")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, reads := range [][][]byte{{tc.in}, splitAt(tc.in, len(tc.in)-1), splitAt(tc.in, 3)} {
				p := newProxy("")
				r := runDir(t, p, newSession(), tc.dir, reads)
				if !r.killed || r.eof || p.Counts().Malformed != 1 {
					t.Fatalf("eof %v, killed %v, Malformed %d; want the connection killed and counted", r.eof, r.killed, p.Counts().Malformed)
				}
				if len(r.out) > len(tc.in) || !bytes.Equal(r.out, tc.in[:len(r.out)]) {
					t.Fatalf("forwarded bytes are not a prefix of the input")
				}
			}
		})
	}
}

// A broker refusing the protocol version answers with its own header.
func TestParserBrokerProtocolHeader(t *testing.T) {
	p := newProxy("")
	r := runDir(t, p, newSession(), toClient, [][]byte{protocolHeader})
	if !bytes.Equal(r.out, protocolHeader) || !r.eof || p.Counts().Malformed != 0 {
		t.Fatalf("got %q eof %v", r.out, r.eof)
	}
}

func TestNoWait(t *testing.T) {
	cases := []struct {
		name string
		args []byte
		want bool
	}{
		{"queue.declare", cat(short(0), shortstr("q"), octet(1<<4)), true},
		{"queue.declare", cat(short(0), shortstr("q"), octet(0x0F)), false},
		{"queue.delete", cat(short(0), shortstr("q"), octet(1<<2)), true},
		{"queue.delete", cat(short(0), shortstr("q"), octet(3)), false},
		{"queue.bind", cat(short(0), shortstr("q"), shortstr("x"), shortstr("rk"), octet(1)), true},
		{"queue.purge", cat(short(0), shortstr("q"), octet(1)), true},
		{"exchange.declare", cat(short(0), shortstr("x"), shortstr("direct"), octet(1<<4)), true},
		{"exchange.declare", cat(short(0), shortstr("x"), shortstr("direct"), octet(0x0F)), false},
		{"exchange.delete", cat(short(0), shortstr("x"), octet(2)), true},
		{"exchange.bind", cat(short(0), shortstr("a"), shortstr("b"), shortstr("c"), octet(1)), true},
		{"exchange.unbind", cat(short(0), shortstr("a"), shortstr("b"), shortstr("c"), octet(0)), false},
		{"basic.consume", cat(short(0), shortstr("q"), shortstr("tag"), octet(1<<3)), true},
		{"basic.consume", cat(short(0), shortstr("q"), shortstr("tag"), octet(7)), false},
		{"basic.cancel", cat(shortstr("tag"), octet(1)), true},
		{"confirm.select", octet(1), true},
		{"confirm.select", octet(0), false},
		{"confirm.select", nil, false},                                   // truncated: waits
		{"queue.declare", cat(short(0), shortstr("a long name")), false}, // truncated
		{"queue.declare", cat(short(0), []byte{200}), false},             // string runs off the end
		{"basic.get", cat(short(0), shortstr("q"), octet(0xFF)), false},  // always waits
	}
	for _, tc := range cases {
		if got := isNoWait(&methods[methodByName[tc.name]], tc.args); got != tc.want {
			t.Errorf("isNoWait(%s, % x) = %v, want %v", tc.name, tc.args, got, tc.want)
		}
	}
}

func TestMethodTable(t *testing.T) {
	if len(methods) != len(methodIndex) || len(methods) != len(methodByName) {
		t.Fatalf("duplicate ids or names in the method table")
	}
	for _, m := range methods {
		for _, r := range m.replies {
			if _, ok := methodIndex[r]; !ok {
				t.Errorf("%s: reply %d,%d is not in the table", m.name, r.class(), r.method())
			}
		}
	}
	if got := methodName(mid(60, 120)); got != "basic.nack" {
		t.Errorf("60,120 is %q", got)
	}
	if got := methodName(mid(85, 11)); got != "confirm.select-ok" {
		t.Errorf("85,11 is %q", got)
	}
	if got := methodName(mid(7, 8)); got != "class.method(7,8)" {
		t.Errorf("7,8 is %q", got)
	}
}
