package amqpproxy

import (
	"bytes"
	"maps"
	"testing"
)

// armable are the DropReply arms the fuzz target picks from ("" is none).
var armable = []string{"", "queue.declare", "basic.publish", "channel.open", "confirm.select", "basic.get", "queue.delete", "connection.open", "channel.close"}

// brokerStream answers clientStream.
func brokerStream() []byte {
	return cat(
		method(0, "connection.start", octet(0), octet(9), emptyTable(), long(5), []byte("PLAIN"), long(5), []byte("en_US")),
		method(0, "connection.tune", short(2047), long(131072), short(60)),
		method(0, "connection.open-ok", shortstr("")),
		method(1, "channel.open-ok", long(0)),
		method(1, "confirm.select-ok"),
		method(1, "queue.declare-ok", shortstr("q"), long(0), long(0)),
		returnFrames(1, "q"),
		ack(1, "basic.ack", 1, false),
		heartbeat(),
		method(1, "channel.close-ok"),
		method(0, "connection.close-ok"),
	)
}

// FuzzStreams feeds a client stream and a broker stream through the two
// readers of one connection, with a DropReply arm. Whatever the bytes, the
// proxy must not panic, must forward a prefix of what it read, and must do
// the same whether the bytes come in one read, two, or one byte at a time.
func FuzzStreams(f *testing.F) {
	f.Add(clientStream(), brokerStream(), uint8(0), uint16(100))
	f.Add(clientStream(), brokerStream(), uint8(1), uint16(7))
	f.Add(clientStream(), brokerStream(), uint8(2), uint16(300))
	f.Fuzz(func(t *testing.T, client, broker []byte, armIdx uint8, cut uint16) {
		type outcome struct {
			c, b   result
			counts Counts
		}
		run := func(split func([]byte) [][]byte) outcome {
			p := newProxy("")
			if err := p.DropReply(armable[int(armIdx)%len(armable)]); err != nil {
				t.Fatal(err)
			}
			s := newSession()
			cr := runDir(t, p, s, toBroker, split(client))
			br := runDir(t, p, s, toClient, split(broker))
			return outcome{cr, br, p.Counts()}
		}
		whole := run(func(b []byte) [][]byte { return [][]byte{b} })
		for _, x := range []struct {
			in []byte
			r  result
		}{{client, whole.c}, {broker, whole.b}} {
			if len(x.r.out) > len(x.in) || !bytes.Equal(x.r.out, x.in[:len(x.r.out)]) {
				t.Fatalf("forwarded bytes are not a prefix of the input")
			}
		}
		splits := []func([]byte) [][]byte{func(b []byte) [][]byte {
			if len(b) == 0 {
				return [][]byte{b}
			}
			return splitAt(b, int(cut)%len(b))
		}}
		if len(client)+len(broker) <= 4096 {
			splits = append(splits, func(b []byte) [][]byte {
				out := make([][]byte, len(b))
				for i := range b {
					out[i] = b[i : i+1]
				}
				return out
			})
		}
		for _, split := range splits {
			o := run(split)
			same := func(a, b result) bool {
				return a.killed == b.killed && a.eof == b.eof && (whole.counts.Malformed > 0 || bytes.Equal(a.out, b.out))
			}
			if !same(o.c, whole.c) || !same(o.b, whole.b) || !sameCounts(o.counts, whole.counts) {
				t.Fatalf("split reads gave another outcome:\nwhole %+v\nsplit %+v", whole, o)
			}
		}
	})
}

func sameCounts(a, b Counts) bool {
	return maps.Equal(a.Sent.Methods, b.Sent.Methods) && maps.Equal(a.Received, b.Received) &&
		a.HeartbeatsSent == b.HeartbeatsSent && a.HeartbeatsReceived == b.HeartbeatsReceived &&
		a.Sent.Connections == b.Sent.Connections && a.Sent.Channels == b.Sent.Channels &&
		a.Malformed == b.Malformed && a.Dropped == b.Dropped
}
