package amqpwire_test

// amqp091-go against a tiny broker built on the codec: the handshake, a
// channel, a queue.declare, a publish under confirms, a basic.get. Every
// frame the client sends must decode and encode again to its own bytes.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/internal/amqpwire"
)

// rabbit3108 is connection.start as RabbitMQ 3.10.8 on Erlang/OTP 25.2.3
// sends it (node rabbit@vm), field for field and in its order.
func rabbit3108() *amqpwire.ConnectionStart {
	return &amqpwire.ConnectionStart{VersionMajor: 0, VersionMinor: 9, ServerProperties: amqpwire.Table{
		{Name: "capabilities", Value: amqpwire.Capabilities()},
		{Name: "cluster_name", Value: "rabbit@vm"},
		{Name: "copyright", Value: "Copyright (c) 2007-2022 VMware, Inc. or its affiliates."},
		{Name: "information", Value: "Licensed under the MPL 2.0. Website: https://rabbitmq.com"},
		{Name: "platform", Value: "Erlang/OTP 25.2.3"},
		{Name: "product", Value: "RabbitMQ"},
		{Name: "version", Value: "3.10.8"},
	}, Mechanisms: "PLAIN AMQPLAIN", Locales: "en_US"}
}

// tinyBroker serves one connection with the codec: just what clientScript
// does, as RabbitMQ would answer it.
type tinyBroker struct {
	r     *amqpwire.Reader
	w     *amqpwire.Writer
	msg   []byte              // the message published, for basic.get
	props amqpwire.Properties // its properties
	tags  uint64              // publishes confirmed
	seen  []string            // the methods the client sent, in order
}

// next reads the client's next frame but heartbeats, checking that a
// method or content header decodes and encodes again to its own bytes.
func (b *tinyBroker) next() (amqpwire.Frame, amqpwire.Method, error) {
	for {
		f, err := b.r.ReadFrame()
		if err != nil || f.Type == amqpwire.FrameHeartbeat {
			if err != nil {
				return f, nil, err
			}
			continue
		}
		m, err := reencode(f)
		if err != nil {
			return f, nil, err
		}
		if m != nil {
			b.seen = append(b.seen, amqpwire.IDOf(m).String())
		}
		return f, m, nil
	}
}

// reencode decodes a method or content header frame and encodes it again,
// failing unless the bytes are the same; it returns the method.
func reencode(f amqpwire.Frame) (amqpwire.Method, error) {
	var again []byte
	var m amqpwire.Method
	var err error
	switch f.Type {
	case amqpwire.FrameMethod:
		if m, err = amqpwire.DecodeMethod(f.Payload); err == nil {
			again, err = amqpwire.AppendMethod(nil, m)
		}
	case amqpwire.FrameHeader:
		var h amqpwire.Header
		if h, err = amqpwire.DecodeHeader(f.Payload); err == nil {
			again, err = amqpwire.AppendHeader(nil, h)
		}
	default:
		return nil, nil
	}
	if err == nil && !bytes.Equal(again, f.Payload) {
		err = fmt.Errorf("frame type %d on channel %d: decoded and encoded again as\n% x\nwas\n% x", f.Type, f.Channel, again, f.Payload)
	}
	return m, err
}

// expect reads the next method and fails unless it is a T.
func expect[T amqpwire.Method](b *tinyBroker) (T, error) {
	_, m, err := b.next()
	v, ok := m.(T)
	if err == nil && !ok {
		err = fmt.Errorf("got %v, want %T", amqpwire.IDOf(m), v)
	}
	return v, err
}

func (b *tinyBroker) send(ch uint16, m amqpwire.Method) error {
	if err := b.w.WriteMethod(ch, m); err != nil {
		return err
	}
	return b.w.Flush()
}

// handshake is connection.start to open-ok, with frame_max 4096 so that
// a body of some kilobytes is cut into frames both ways.
func (b *tinyBroker) handshake() error {
	if err := b.r.ReadProtocolHeader(); err != nil {
		return err
	}
	if err := b.send(0, rabbit3108()); err != nil {
		return err
	}
	ok, err := expect[*amqpwire.ConnectionStartOK](b)
	if err != nil {
		return err
	}
	if ok.Mechanism != "PLAIN" || ok.Response != "\x00guest\x00guest" {
		return fmt.Errorf("start-ok: mechanism %q, response %q", ok.Mechanism, ok.Response)
	}
	if err := b.send(0, &amqpwire.ConnectionTune{ChannelMax: 2047, FrameMax: 4096, Heartbeat: 60}); err != nil {
		return err
	}
	tune, err := expect[*amqpwire.ConnectionTuneOK](b)
	if err != nil {
		return err
	}
	b.r.SetFrameMax(tune.FrameMax)
	b.w.SetFrameMax(tune.FrameMax)
	if open, err := expect[*amqpwire.ConnectionOpen](b); err != nil || open.VirtualHost != "/" {
		return fmt.Errorf("open: %+v, %v", open, err)
	}
	return b.send(0, &amqpwire.ConnectionOpenOK{})
}

// serve answers the client's methods until it closes the connection.
func (b *tinyBroker) serve() error {
	for {
		f, m, err := b.next()
		if err != nil {
			return err
		}
		ch := f.Channel
		switch m := m.(type) {
		case *amqpwire.ChannelOpen:
			err = b.send(ch, &amqpwire.ChannelOpenOK{})
		case *amqpwire.QueueDeclare:
			err = b.send(ch, &amqpwire.QueueDeclareOK{Queue: "amq.gen-tiny"})
		case *amqpwire.ConfirmSelect:
			err = b.send(ch, &amqpwire.ConfirmSelectOK{})
		case *amqpwire.BasicPublish:
			if err = b.content(); err == nil {
				b.tags++
				err = b.send(ch, &amqpwire.BasicAck{DeliveryTag: b.tags})
			}
		case *amqpwire.BasicGet:
			get := &amqpwire.BasicGetOK{DeliveryTag: 1, RoutingKey: m.Queue}
			if err = b.w.WriteContent(ch, get, b.props, b.msg); err == nil {
				err = b.w.Flush()
			}
		case *amqpwire.ChannelClose:
			err = b.send(ch, &amqpwire.ChannelCloseOK{})
		case *amqpwire.ConnectionClose:
			return b.send(0, &amqpwire.ConnectionCloseOK{})
		default:
			return fmt.Errorf("the tiny broker does not serve %v", amqpwire.IDOf(m))
		}
		if err != nil {
			return err
		}
	}
}

// content reads a publish's content header and body frames.
func (b *tinyBroker) content() error {
	f, _, err := b.next()
	if err != nil {
		return err
	}
	h, err := amqpwire.DecodeHeader(f.Payload)
	if err != nil || f.Type != amqpwire.FrameHeader {
		return fmt.Errorf("content header: type %d, %v", f.Type, err)
	}
	b.props, b.msg = h.Properties, nil
	for uint64(len(b.msg)) < h.BodySize {
		if f, _, err = b.next(); err != nil || f.Type != amqpwire.FrameBody {
			return fmt.Errorf("body: type %d, %v", f.Type, err)
		}
		b.msg = append(b.msg, f.Payload...)
	}
	return nil
}

// TestAmqp091GoOnTheCodec runs clientScript against the tiny broker.
func TestAmqp091GoOnTheCodec(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	var b *tinyBroker
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		b = &tinyBroker{r: amqpwire.NewReader(c, amqpwire.FrameMinSize), w: amqpwire.NewWriter(c, 0)}
		if err = b.handshake(); err == nil {
			err = b.serve()
		}
		done <- err
	}()
	clientScript(t, "amqp://guest:guest@"+l.Addr().String()+"/")
	if err := <-done; err != nil {
		t.Fatalf("tiny broker: %v", err)
	}
	want := "connection.start-ok connection.tune-ok connection.open channel.open queue.declare confirm.select basic.publish basic.get channel.close connection.close"
	if got := strings.Join(b.seen, " "); got != want {
		t.Errorf("the client sent %s\nwant %s", got, want)
	}
}

// TestWrongProtocolHeader: a server on the codec answers a header that is
// not 0-9-1's as RabbitMQ does, with its own, then closes.
func TestWrongProtocolHeader(t *testing.T) {
	server, client := net.Pipe()
	go func() {
		defer server.Close()
		if err := amqpwire.NewReader(server, 0).ReadProtocolHeader(); err != nil {
			io.WriteString(server, amqpwire.ProtocolHeader)
		}
	}()
	io.WriteString(client, "AMQP\x01\x01\x00\x0a")
	got, err := io.ReadAll(client)
	if string(got) != amqpwire.ProtocolHeader || err != nil {
		t.Errorf("answered %q, %v", got, err)
	}
}

// clientScript is what both brokers are given: amqp091-go with frame_max
// 4096 declares a server-named exclusive queue, publishes a message of
// 10000 bytes (three body frames) under confirms, waits for its ack, and
// gets it back.
func clientScript(t *testing.T, url string) {
	conn, err := amqp.DialConfig(url, amqp.Config{FrameSize: 4096, Heartbeat: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, amqp.Table{"x-max-length": int32(10), "x-overflow": "reject-publish"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	pub := amqp.Publishing{ContentType: "application/octet-stream", DeliveryMode: 2, Priority: 3,
		Headers: amqp.Table{"lp": "amqpwire", "n": int64(7)}, MessageId: "m-1", Timestamp: time.Unix(1700000000, 0),
		AppId: "amqpwire-test", Body: bytes.Repeat([]byte("0123456789"), 1000)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.Name, true, false, pub)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("confirm: %v, %v", ok, err)
	}
	msg, ok, err := ch.Get(q.Name, true)
	if err != nil || !ok {
		t.Fatalf("get: %v, %v", ok, err)
	}
	if !bytes.Equal(msg.Body, pub.Body) || msg.MessageId != pub.MessageId || !reflect.DeepEqual(msg.Headers, pub.Headers) || !msg.Timestamp.Equal(pub.Timestamp) {
		t.Errorf("got back %q %+v\nwant %+v", msg.Body[:20], msg, pub)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		t.Fatal(err)
	}
}
