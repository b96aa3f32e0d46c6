package amqpwire

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzFrames reads any bytes as a client's stream (a protocol header
// first when it starts with "AMQP") and decodes every method and content
// header in it. Whatever the bytes, nothing panics, and what decodes
// encodes to bytes that decode to the same and encode the same again
// (decoding drops what carries no meaning: unused bits, an 'L' that is
// written back as 'l'). The corpus in testdata/fuzz/FuzzFrames holds the
// two directions of clientScript on RabbitMQ 3.10.8.
func FuzzFrames(f *testing.F) {
	publish, _ := AppendMethod(nil, &BasicPublish{RoutingKey: "q", Mandatory: true})
	header, _ := AppendHeader(nil, Header{Class: 60, BodySize: 3, Properties: Properties{Headers: Table{{"a", []any{int64(1), Table{{"b", nil}}}}}}})
	f.Add(AppendFrame(AppendFrame(AppendFrame([]byte(ProtocolHeader), Frame{Type: FrameMethod, Channel: 1, Payload: publish}),
		Frame{Type: FrameHeader, Channel: 1, Payload: header}), Frame{Type: FrameBody, Channel: 1, Payload: []byte("abc")}))
	f.Add(AppendFrame(nil, Frame{Type: FrameHeartbeat}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), 0)
		if bytes.HasPrefix(data, []byte("AMQP")) && r.ReadProtocolHeader() != nil {
			return
		}
		for {
			fr, err := r.ReadFrame()
			if err != nil {
				return
			}
			switch fr.Type {
			case FrameMethod:
				fixpoint(t, fr.Payload, func(b []byte) ([]byte, bool, error) {
					m, err := DecodeMethod(b)
					if err != nil {
						return nil, false, nil
					}
					again, err := AppendMethod(nil, m)
					return again, true, err
				})
				if len(fr.Payload) >= 4 {
					if m, ok := Lookup(MethodID(binary.BigEndian.Uint32(fr.Payload))); ok {
						m.NoWaitSet(fr.Payload[4:])
					}
				}
			case FrameHeader:
				fixpoint(t, fr.Payload, func(b []byte) ([]byte, bool, error) {
					h, err := DecodeHeader(b)
					if err != nil {
						return nil, false, nil
					}
					again, err := AppendHeader(nil, h)
					return again, true, err
				})
			}
		}
	})
}

// fixpoint checks that what decodes from payload encodes, and that its
// encoding decodes and encodes to itself. reencode decodes and encodes
// again, saying whether the bytes decoded.
func fixpoint(t *testing.T, payload []byte, reencode func([]byte) ([]byte, bool, error)) {
	once, decoded, err := reencode(payload)
	if !decoded {
		return // refused: fine
	}
	if err != nil {
		t.Fatalf("% x decodes but does not encode: %v", payload, err)
	}
	twice, decoded, err := reencode(once)
	if !decoded || err != nil || !bytes.Equal(once, twice) {
		t.Fatalf("% x encodes as % x, which gives % x (decoded %v, %v)", payload, once, twice, decoded, err)
	}
}
