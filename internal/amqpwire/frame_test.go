package amqpwire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestReadFrames reads frames back whole, however the stream cuts them.
func TestReadFrames(t *testing.T) {
	frames := []Frame{
		{Type: FrameMethod, Channel: 1, Payload: bytesOf(uint32(60<<16|80), uint64(1), byte(0))},
		{Type: FrameHeader, Channel: 1, Payload: bytes.Repeat([]byte{7}, 14)},
		{Type: FrameBody, Channel: 1, Payload: bytes.Repeat([]byte("x"), 100000)},
		{Type: FrameHeartbeat, Payload: []byte{}},
	}
	var stream []byte
	for _, f := range frames {
		stream = AppendFrame(stream, f)
	}
	for _, r := range []io.Reader{bytes.NewReader(stream), iotest.OneByteReader(bytes.NewReader(stream)), iotest.HalfReader(bytes.NewReader(stream))} {
		fr := NewReader(r, 0)
		for i, want := range frames {
			got, err := fr.ReadFrame()
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("frame %d: %v (type %d, %d bytes), want type %d, %d bytes", i, err, got.Type, len(got.Payload), want.Type, len(want.Payload))
			}
		}
		if _, err := fr.ReadFrame(); err != io.EOF {
			t.Errorf("after the last frame: %v, want io.EOF", err)
		}
	}
}

// TestBuffered: after a frame, Buffered says whether a whole frame other
// than a heartbeat came with it in the same read.
func TestBuffered(t *testing.T) {
	method := AppendFrame(nil, Frame{Type: FrameMethod, Channel: 1, Payload: bytesOf(uint32(60<<16|70), uint16(0), "q", byte(0))})
	beat := AppendFrame(nil, Frame{Type: FrameHeartbeat, Payload: []byte{}})
	for _, c := range []struct {
		name  string
		after []byte // what follows the first method frame in the read
		want  bool
	}{
		{"nothing", nil, false},
		{"a method", method, true},
		{"a heartbeat", beat, false},
		{"a heartbeat then a method", append(slices.Clone(beat), method...), true},
		{"part of a method", method[:len(method)-1], false},
	} {
		r := NewReader(bytes.NewReader(append(slices.Clone(method), c.after...)), 0)
		if _, err := r.ReadFrame(); err != nil {
			t.Fatal(err)
		}
		if got := r.Buffered(); got != c.want {
			t.Errorf("%s after the frame: Buffered() = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestFrameErrors: each frame the Reader refuses, and what it says.
func TestFrameErrors(t *testing.T) {
	method := AppendFrame(nil, Frame{Type: FrameMethod, Channel: 3, Payload: make([]byte, 5000)})
	badEnd := append(method[:len(method)-1:len(method)-1], 0xCD)
	cases := []struct {
		name     string
		stream   []byte
		frameMax uint32
		want     string
		eof      bool
	}{
		{"over frame_max", method, 4096, "frame of type 1 (method) on channel 3, payload 5000 bytes: over frame_max 4096", false},
		{"frame_max exactly", method, 5000, "", false},
		{"no frame-end", badEnd, 0, "frame-end is 0xCD, not 0xCE", false},
		{"unknown type", AppendFrame(nil, Frame{Type: 4, Payload: []byte{1}}), 0, "type 4 (no frame type)", false},
		{"heartbeat payload", AppendFrame(nil, Frame{Type: FrameHeartbeat, Payload: []byte{1}}), 0, "a heartbeat has no payload", false},
		{"short payload", method[:100], 0, "the stream broke after 93 payload bytes", true},
		{"no frame-end at all", method[:len(method)-1], 0, "the stream broke before the frame-end", true},
		{"short header", method[:3], 0, "frame header of 3 bytes", true},
	}
	for _, c := range cases {
		_, err := NewReader(bytes.NewReader(c.stream), c.frameMax).ReadFrame()
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) != c.eof {
			t.Errorf("%s: %v: io.ErrUnexpectedEOF %v, want %v", c.name, err, !c.eof, c.eof)
		}
	}
}

// TestProtocolHeader: the header a client sends, and what is said of
// another.
func TestProtocolHeader(t *testing.T) {
	if err := NewReader(strings.NewReader(ProtocolHeader), 0).ReadProtocolHeader(); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"AMQP\x00\x00\x09\x02": `protocol header "AMQP\x00\x00\t\x02", not AMQP 0-9-1's`,
		"GET / HTTP/1.1\r\n":   `protocol header "GET / HT"`,
		"AMQ":                  `protocol header: "AMQ", then unexpected EOF`,
	} {
		err := NewReader(strings.NewReader(in), 0).ReadProtocolHeader()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// TestProperties: each property alone, all of them, and none, round trip
// through a content header; a property present with its zero value stays
// present.
func TestProperties(t *testing.T) {
	all := Properties{ContentType: "text/plain", ContentEncoding: "gzip", Headers: Table{{"h", "v"}},
		DeliveryMode: 2, Priority: 9, CorrelationID: "c", ReplyTo: "r", Expiration: "60000",
		MessageID: "m", Timestamp: time.Unix(1700000000, 0).UTC(), Type: "t", UserID: "guest", AppID: "a", ClusterID: "k"}
	sets := []Properties{{}, all, {Flags: flagDeliveryMode | flagHeaders}}
	v := reflect.ValueOf(all)
	for i := 1; i < v.NumField(); i++ {
		var p Properties
		reflect.ValueOf(&p).Elem().Field(i).Set(v.Field(i))
		sets = append(sets, p)
	}
	for _, p := range sets {
		h := Header{Class: 60, BodySize: 12345, Properties: p}
		b, err := AppendHeader(nil, h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeHeader(b)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		h.Properties.Flags |= p.present()
		if !reflect.DeepEqual(got, h) {
			t.Errorf("decoded %+v, want %+v", got, h)
		}
		if again, _ := AppendHeader(nil, got); !bytes.Equal(again, b) {
			t.Errorf("%+v: encodes again as % x, first % x", p, again, b)
		}
	}
	b, _ := AppendHeader(nil, Header{Class: 60, Properties: Properties{Flags: flagDeliveryMode}})
	if want := bytesOf(uint16(60), uint16(0), uint64(0), uint16(flagDeliveryMode), byte(0)); !bytes.Equal(b, want) {
		t.Errorf("a zero delivery-mode, flagged: % x, want % x", b, want)
	}
}

// TestHeaderErrors: what DecodeHeader refuses.
func TestHeaderErrors(t *testing.T) {
	for payload, want := range map[string]string{
		string(bytesOf(uint16(60), uint16(0), uint64(5))):                            "property-flags: a short takes 2 bytes, 0 left",
		string(bytesOf(uint16(60), uint16(0), uint64(5), uint16(flagContentType))):   "content-type: a short string's length takes 1 bytes, 0 left",
		string(bytesOf(uint16(60), uint16(0), uint64(5), uint16(0), byte(1))):        "1 bytes after the last property",
		string(bytesOf(uint16(60), uint16(0), uint64(5), uint16(flagContinued))):     "continues (bit 0)",
		string(bytesOf(uint16(60), uint16(0), uint64(5), uint16(flagHeaders), "ab")): "headers: the table's length takes 4 bytes, 3 left",
	} {
		_, err := DecodeHeader([]byte(payload))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("% x: %v, want %q", payload, err, want)
		}
	}
}

// TestWriteContent splits a body by frame_max, frame and all, and writes
// no body frame for an empty body.
func TestWriteContent(t *testing.T) {
	for _, c := range []struct {
		frameMax uint32
		body     int
		sizes    []int
	}{
		{4096, 10000, []int{4088, 4088, 1824}},
		{4096, 4088, []int{4088}},
		{0, 10000, []int{10000}},
		{4096, 0, nil},
	} {
		var out bytes.Buffer
		w := NewWriter(&out, c.frameMax)
		body := bytes.Repeat([]byte{'b'}, c.body)
		if err := w.WriteContent(1, &BasicPublish{RoutingKey: "q"}, Properties{DeliveryMode: 2}, body); err != nil {
			t.Fatal(err)
		}
		if out.Len() != 0 {
			t.Errorf("wrote before Flush")
		}
		w.Flush()
		r := NewReader(&out, c.frameMax)
		types := []byte{FrameMethod, FrameHeader}
		var sizes []int
		var got []byte
		for {
			f, err := r.ReadFrame()
			if err == io.EOF {
				break
			}
			if len(types) > 0 {
				if f.Type != types[0] {
					t.Fatalf("frame type %d, want %d", f.Type, types[0])
				}
				types = types[1:]
				continue
			}
			sizes = append(sizes, len(f.Payload))
			got = append(got, f.Payload...)
		}
		if !reflect.DeepEqual(sizes, c.sizes) || !bytes.Equal(got, body) {
			t.Errorf("frame_max %d, body %d: body frames %v, want %v", c.frameMax, c.body, sizes, c.sizes)
		}
	}
}
