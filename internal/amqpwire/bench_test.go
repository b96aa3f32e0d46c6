package amqpwire

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// publishFrames are a basic.publish as amqp-locks sends one: a mandatory
// publish to a queue, a persistent message with a few properties and a
// small body.
func publishFrames(b *testing.B) (*BasicPublish, Properties, []byte, []byte) {
	m := &BasicPublish{RoutingKey: "lp-lock-semaphore-3", Mandatory: true}
	props := Properties{ContentType: "text/plain", DeliveryMode: 2, MessageID: "m-42",
		Timestamp: time.Unix(1700000000, 0), Headers: Table{{"holder", "c1"}, {"epoch", int64(7)}}}
	body := bytes.Repeat([]byte("x"), 64)
	var out bytes.Buffer
	w := NewWriter(&out, 131072)
	if err := w.WriteContent(1, m, props, body); err != nil {
		b.Fatal(err)
	}
	w.Flush()
	return m, props, body, out.Bytes()
}

// BenchmarkEncodePublish writes a publish's three frames.
func BenchmarkEncodePublish(b *testing.B) {
	m, props, body, wire := publishFrames(b)
	w := NewWriter(io.Discard, 131072)
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.WriteContent(1, m, props, body); err != nil {
			b.Fatal(err)
		}
	}
	w.Flush()
}

// BenchmarkDecodePublish reads a publish's three frames and decodes its
// method and content header.
func BenchmarkDecodePublish(b *testing.B) {
	_, _, _, wire := publishFrames(b)
	src := bytes.NewReader(wire)
	r := NewReader(src, 131072)
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(wire)
		r.r.Reset(src)
		f, err := r.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeMethod(f.Payload); err != nil {
			b.Fatal(err)
		}
		if f, err = r.ReadFrame(); err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeHeader(f.Payload); err != nil {
			b.Fatal(err)
		}
		if _, err = r.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}
