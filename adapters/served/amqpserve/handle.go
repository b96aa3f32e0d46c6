package amqpserve

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/lockprover/lockprover/internal/amqpwire"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// A wireChan is one channel of a connection as the coroutine serves it.
type wireChan struct {
	ch      broker.Channel
	confirm bool
	tag     uint64 // publishes confirmed so far: the next ack's delivery tag
	closing bool   // the broker closed it and waits for close-ok
}

// The World's calls the served broker needs beyond broker.Conn and
// broker.Channel: rabbitmqsim's.
type (
	dropper interface{ Drop() error }
	sender  interface {
		Send(ctx context.Context, pb broker.Publishing) (broker.Confirmation, error)
	}
	taker interface {
		Take(ctx context.Context, queue string) (rabbitmqsim.Got, bool, error)
		Ack(ctx context.Context, tag uint64, multiple bool) error
		Nack(ctx context.Context, tag uint64, multiple, requeue bool) error
		Reject(ctx context.Context, tag uint64, requeue bool) error
	}
)

var bg = context.Background()

// handle takes one event of the connection into the World, in the
// process's coroutine, and answers it on the wire.
func (c *wireConn) handle(e event) {
	switch {
	case c.dead:
		return
	case e.kind == evOpen:
		c.open()
	case e.kind == evGone:
		c.lost(e.err)
	case c.closing:
		// After the broker's connection.close, RabbitMQ reads only close-ok.
		if e.cmd.id == amqpwire.IDOf(&amqpwire.ConnectionCloseOK{}) {
			c.end(false)
		}
	case e.cmd.ch == 0:
		c.connMethod(e.cmd)
	default:
		c.chanMethod(e.cmd)
	}
}

// open takes connection.open: the World dials.
func (c *wireConn) open() {
	conn, err := c.p.Dial(bg, broker.Config{Heartbeat: c.hb})
	if err != nil {
		// The broker is down (a restart): as a refused connection, reset.
		c.end(true)
		return
	}
	c.conn = conn
	if c.send(0, &amqpwire.ConnectionOpenOK{}) != nil {
		c.lost(nil)
	}
}

// lost is the socket gone from the client's side: the World sees it close
// with no AMQP close. err is why, if the client sent something that could
// not be read, which is named.
func (c *wireConn) lost(err error) {
	if err != nil && !gone(err) {
		c.p.s.refuse("%s: %v: the connection was closed (RabbitMQ answers an unreadable frame with 501 FRAME_ERROR)", c, err)
		c.send(0, &amqpwire.ConnectionClose{ReplyCode: 501, ReplyText: "FRAME_ERROR - " + err.Error()})
	}
	if c.conn != nil && c.conn.Err() == nil {
		c.conn.(dropper).Drop()
	}
	c.end(false)
}

// connMethod serves a method of channel 0.
func (c *wireConn) connMethod(cmd command) {
	switch cmd.m.(type) {
	case *amqpwire.ConnectionClose:
		c.conn.Close()
		c.send(0, &amqpwire.ConnectionCloseOK{})
		c.end(false)
	case *amqpwire.ConnectionCloseOK:
		c.end(false)
	default:
		c.unserved(cmd)
	}
}

// chanMethod serves a method of a channel.
func (c *wireConn) chanMethod(cmd command) {
	ch := c.chans[cmd.ch]
	_, opening := cmd.m.(*amqpwire.ChannelOpen)
	switch {
	case opening && ch != nil:
		c.connError(cmd, 504, "CHANNEL_ERROR - second 'channel.open' seen")
		return
	case opening:
		c.openChannel(cmd.ch)
		return
	case ch == nil:
		c.connError(cmd, 504, "CHANNEL_ERROR - expected 'channel.open'")
		return
	case ch.closing:
		// RabbitMQ drops all but close-ok (and answers a close crossing its own).
		switch cmd.m.(type) {
		case *amqpwire.ChannelCloseOK:
			delete(c.chans, cmd.ch)
		case *amqpwire.ChannelClose:
			c.send(cmd.ch, &amqpwire.ChannelCloseOK{})
		}
		return
	}
	reply, err := c.apply(ch, cmd)
	if err != nil {
		c.fail(cmd, err)
		return
	}
	if reply != nil {
		c.send(cmd.ch, reply)
	}
}

func (c *wireConn) openChannel(n uint16) {
	ch, err := c.conn.Channel(bg)
	if err != nil {
		c.fail(command{ch: n, id: amqpwire.IDOf(&amqpwire.ChannelOpen{})}, err)
		return
	}
	c.chans[n] = &wireChan{ch: ch}
	c.send(n, &amqpwire.ChannelOpenOK{})
}

// apply has the World apply a channel's method, and returns its reply
// (nil for none, or where apply wrote it).
func (c *wireConn) apply(ch *wireChan, cmd command) (amqpwire.Method, error) {
	switch m := cmd.m.(type) {
	case *amqpwire.ChannelClose:
		err := ch.ch.Close()
		delete(c.chans, cmd.ch)
		return &amqpwire.ChannelCloseOK{}, err
	case *amqpwire.ConfirmSelect:
		err := ch.ch.Confirm(bg)
		ch.confirm = err == nil
		return noWait(m.NoWait, &amqpwire.ConfirmSelectOK{}), err
	case *amqpwire.QueueDeclare:
		q, err := ch.ch.Declare(bg, m.Queue, broker.DeclareOptions{Passive: m.Passive, Durable: m.Durable,
			Exclusive: m.Exclusive, AutoDelete: m.AutoDelete, Args: args(m.Arguments)})
		return noWait(m.NoWait, &amqpwire.QueueDeclareOK{Queue: q.Name, MessageCount: uint32(q.Messages), ConsumerCount: uint32(q.Consumers)}), err
	case *amqpwire.QueueDelete:
		n, err := ch.ch.Delete(bg, m.Queue, broker.DeleteOptions{IfUnused: m.IfUnused, IfEmpty: m.IfEmpty})
		return noWait(m.NoWait, &amqpwire.QueueDeleteOK{MessageCount: uint32(n)}), err
	case *amqpwire.QueuePurge:
		n, err := ch.ch.Purge(bg, m.Queue)
		return noWait(m.NoWait, &amqpwire.QueuePurgeOK{MessageCount: uint32(n)}), err
	case *amqpwire.QueueBind:
		err := ch.ch.Bind(bg, m.Queue, m.Exchange, m.RoutingKey)
		return noWait(m.NoWait, &amqpwire.QueueBindOK{}), err
	case *amqpwire.BasicPublish:
		return nil, c.publish(ch, cmd, m)
	case *amqpwire.BasicGet:
		return nil, c.get(ch, cmd, m)
	case *amqpwire.BasicAck:
		return nil, ch.ch.(taker).Ack(bg, m.DeliveryTag, m.Multiple)
	case *amqpwire.BasicNack:
		return nil, ch.ch.(taker).Nack(bg, m.DeliveryTag, m.Multiple, m.Requeue)
	case *amqpwire.BasicReject:
		return nil, ch.ch.(taker).Reject(bg, m.DeliveryTag, m.Requeue)
	case *amqpwire.BasicQos:
		// Prefetch bounds a consumer's deliveries, which the served broker
		// does not make (basic.consume is not served): nothing to apply.
		return &amqpwire.BasicQosOK{}, nil
	}
	c.unserved(cmd)
	return nil, nil
}

func noWait(set bool, reply amqpwire.Method) amqpwire.Method {
	if set {
		return nil
	}
	return reply
}

// publish has the World take a basic.publish, and writes what follows
// it: a basic.return if it was returned, then, in confirm mode, its ack or
// nack.
func (c *wireConn) publish(ch *wireChan, cmd command, m *amqpwire.BasicPublish) error {
	pb := broker.Publishing{Exchange: m.Exchange, Key: m.RoutingKey, Mandatory: m.Mandatory, Immediate: m.Immediate,
		Persistent: cmd.props.DeliveryMode == 2, Body: cmd.body}
	conf, err := ch.ch.(sender).Send(bg, pb)
	if err != nil {
		return err
	}
	if conf.Returned {
		ret := &amqpwire.BasicReturn{ReplyCode: broker.NoRoute, ReplyText: "NO_ROUTE", Exchange: m.Exchange, RoutingKey: m.RoutingKey}
		c.sendContent(cmd.ch, ret, cmd.props, cmd.body)
	}
	if !ch.confirm {
		return nil
	}
	ch.tag++
	if conf.Acked {
		return c.send(cmd.ch, &amqpwire.BasicAck{DeliveryTag: ch.tag})
	}
	return c.send(cmd.ch, &amqpwire.BasicNack{DeliveryTag: ch.tag})
}

// get has the World take basic.get and writes get-ok with the message, or
// get-empty. The message's properties are not kept but its delivery mode;
// its exchange is the default one, its routing key the queue.
func (c *wireConn) get(ch *wireChan, cmd command, m *amqpwire.BasicGet) error {
	got, ok, err := ch.ch.(taker).Take(bg, m.Queue)
	switch {
	case err != nil:
		return err
	case !ok:
		return c.send(cmd.ch, &amqpwire.BasicGetEmpty{})
	}
	props := amqpwire.Properties{DeliveryMode: 1}
	if got.Persistent {
		props.DeliveryMode = 2
	}
	getOK := &amqpwire.BasicGetOK{DeliveryTag: got.Tag, Redelivered: got.Redelivered, RoutingKey: m.Queue, MessageCount: uint32(got.Left)}
	return c.sendContent(cmd.ch, getOK, props, got.Body)
}

// args are a declare's x-arguments as the World takes them.
func args(t amqpwire.Table) map[string]any {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]any, len(t))
	for _, f := range t {
		switch v := f.Value.(type) {
		case int8:
			out[f.Name] = int(v)
		case int16:
			out[f.Name] = int(v)
		case uint8:
			out[f.Name] = int(v)
		case uint16:
			out[f.Name] = int(v)
		case uint32:
			out[f.Name] = int64(v)
		default:
			out[f.Name] = v
		}
	}
	return out
}

// fail answers a method the World refused (err), as the broker or the
// client's socket did.
func (c *wireConn) fail(cmd command, err error) {
	var be *broker.Error
	if !errors.As(err, &be) || !be.Server {
		// The client's side broke (a reset, a heartbeat timeout): on the
		// wire, the socket goes.
		c.end(true)
		return
	}
	if be.Connection {
		c.closeConn(be.Code, be.Reason, cmd.id)
		return
	}
	if ch := c.chans[cmd.ch]; ch != nil {
		ch.closing = true
	}
	c.send(cmd.ch, &amqpwire.ChannelClose{ReplyCode: uint16(be.Code), ReplyText: be.Reason, ClassID: cmd.id.Class(), MethodID: cmd.id.Method()})
}

// connError is a connection error the served broker finds on the wire
// (before the World): the World's connection closes as the broker's.
func (c *wireConn) connError(cmd command, code int, text string) {
	if c.conn != nil {
		c.conn.Close()
	}
	c.closeConn(code, text, cmd.id)
}

func (c *wireConn) closeConn(code int, text string, id amqpwire.MethodID) {
	c.closing = true
	c.send(0, &amqpwire.ConnectionClose{ReplyCode: uint16(code), ReplyText: text, ClassID: id.Class(), MethodID: id.Method()})
}

// unserved answers a method the served broker does not serve as RabbitMQ
// answers one it has no handler for, and names it.
func (c *wireConn) unserved(cmd command) {
	c.p.s.unserve(cmd.id.String())
	c.connError(cmd, 503, "COMMAND_INVALID - unimplemented method")
}

// flush writes what the broker did to the process's connections since it
// last looked: a close it sent (connection.close), or the end its client
// noticed (a reset).
func (p *Process) flush() {
	p.mu.Lock()
	conns := p.conns
	p.mu.Unlock()
	for _, c := range conns {
		if c.dead || c.closing || c.conn == nil {
			continue
		}
		if err := c.conn.Err(); err != nil {
			c.fail(command{}, err)
		}
	}
}

// fingerprint is what the log says of an event: the connection, the
// channel, the method and its arguments, with what differs from run to
// run (names the server made) left out.
func (e event) fingerprint() string {
	switch e.kind {
	case evOpen:
		return fmt.Sprintf("c%d open", e.c.i)
	case evGone:
		return fmt.Sprintf("c%d gone", e.c.i)
	}
	s := fmt.Sprintf("c%d ch%d %v", e.c.i, e.cmd.ch, e.cmd.id)
	switch m := e.cmd.m.(type) {
	case *amqpwire.QueueDeclare:
		s += fmt.Sprintf(" %s%s", serverNamed(m.Queue), flags(m.Passive, "passive", m.Durable, "durable", m.Exclusive, "exclusive", m.AutoDelete, "auto-delete"))
	case *amqpwire.QueueDelete:
		s += " " + serverNamed(m.Queue)
	case *amqpwire.QueuePurge:
		s += " " + serverNamed(m.Queue)
	case *amqpwire.BasicGet:
		s += " " + serverNamed(m.Queue)
	case *amqpwire.BasicPublish:
		s += fmt.Sprintf(" %s/%s%s", m.Exchange, serverNamed(m.RoutingKey), flags(m.Mandatory, "mandatory"))
	}
	return s
}

// serverNamed is a queue name with a name the server made (amq.gen-...)
// reduced to its prefix: it differs from run to run.
func serverNamed(q string) string {
	if strings.HasPrefix(q, "amq.gen-") {
		return "amq.gen-*"
	}
	return q
}

// flags lists the names of the set flags of pairs (bool, name, ...).
func flags(pairs ...any) string {
	var s string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i].(bool) {
			s += " " + pairs[i+1].(string)
		}
	}
	return s
}
