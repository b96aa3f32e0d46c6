package amqpserve

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Its consumers: the client's tag for each of the World's, and the
	// last delivery tag sent to them.
	consumers map[string]string
	sent      uint64
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
		Delivered(after uint64) []rabbitmqsim.Got
		Consumers() []string
		Cancel(ctx context.Context, tag string) error
		Ack(ctx context.Context, tag uint64, multiple bool) error
		Nack(ctx context.Context, tag uint64, multiple, requeue bool) error
		Reject(ctx context.Context, tag uint64, requeue bool) error
	}
)

var bg = context.Background()

// handle takes one event of the connection into the World, in the
// process's coroutine, and answers it on the wire; then, if a channel's
// error is to close the connection (channelExit) and no frame came with
// this one, it closes it.
func (c *wireConn) handle(e event) {
	c.take(e)
	if x := c.exit; x != nil && !(e.kind == evCommand && e.cmd.more) {
		c.exit = nil
		if !c.dead && !c.closing {
			c.connError(x.cmd, x.code, x.text)
		}
	}
}

// take takes one event of the connection into the World.
func (c *wireConn) take(e event) {
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
	hb := c.hb
	if hb == 0 {
		hb = -1 // the client's tune-ok said 0: heartbeats off, whatever the broker proposed
	}
	conn, err := c.p.Dial(bg, broker.Config{Heartbeat: hb, Name: c.name, Node: c.node})
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
		c.p.s.Refuse("%s: %v: the connection was closed (RabbitMQ answers an unreadable frame with 501 FRAME_ERROR)", c, err)
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
		c.retire() // the client closes the socket
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
		c.channelExits(cmd, 504, "CHANNEL_ERROR - second 'channel.open' seen")
		return
	case opening:
		c.openChannel(cmd.ch)
		return
	case ch == nil:
		c.channelExits(cmd, 504, "CHANNEL_ERROR - expected 'channel.open'")
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
	case *amqpwire.BasicConsume:
		if m.NoAck || len(m.Arguments) > 0 {
			break // deliveries acknowledged as sent, or a consumer's arguments: not served
		}
		return c.consume(ch, m)
	case *amqpwire.BasicCancel:
		return c.cancel(ch, m)
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

// consume has the World start a consumer, under the client's tag or one
// the served broker makes as RabbitMQ does (amq.ctag-...); its deliveries
// go out as basic.deliver when the process's connections are next flushed.
func (c *wireConn) consume(ch *wireChan, m *amqpwire.BasicConsume) (amqpwire.Method, error) {
	tag, err := ch.ch.Consume(bg, m.Queue, m.Exclusive)
	if err != nil {
		return nil, err
	}
	client := m.ConsumerTag
	if client == "" {
		client = "amq.ctag-" + tag
	}
	if ch.consumers == nil {
		ch.consumers = map[string]string{}
	}
	ch.consumers[tag] = client
	return noWait(m.NoWait, &amqpwire.BasicConsumeOK{ConsumerTag: client}), nil
}

// cancel has the World end the consumer the client tags m.ConsumerTag.
func (c *wireConn) cancel(ch *wireChan, m *amqpwire.BasicCancel) (amqpwire.Method, error) {
	for tag, client := range ch.consumers {
		if client == m.ConsumerTag {
			delete(ch.consumers, tag)
			if err := ch.ch.(taker).Cancel(bg, tag); err != nil {
				return nil, err
			}
		}
	}
	return noWait(m.NoWait, &amqpwire.BasicCancelOK{ConsumerTag: m.ConsumerTag}), nil
}

// deliver writes what the World gave the channel's consumers since it
// last looked, and a basic.cancel for each consumer the broker ended (its
// queue deleted), as RabbitMQ tells a client with consumer_cancel_notify.
func (c *wireConn) deliver(n uint16, ch *wireChan) {
	if len(ch.consumers) == 0 {
		return
	}
	t := ch.ch.(taker)
	for _, g := range t.Delivered(ch.sent) {
		props := amqpwire.Properties{DeliveryMode: 1}
		if g.Persistent {
			props.DeliveryMode = 2
		}
		d := &amqpwire.BasicDeliver{ConsumerTag: ch.consumers[g.Consumer], DeliveryTag: g.Tag, Redelivered: g.Redelivered, RoutingKey: g.Queue}
		c.sendContent(n, d, props, g.Body)
		ch.sent = g.Tag
	}
	live := t.Consumers()
	for tag, client := range ch.consumers {
		if !slices.Contains(live, tag) {
			delete(ch.consumers, tag)
			c.send(n, &amqpwire.BasicCancel{ConsumerTag: client, NoWait: true})
		}
	}
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

// A channelExit is a connection error that, on RabbitMQ, a channel's own
// process raises (a method on a channel not open, a second channel.open):
// the channel process tells the reader, which takes it only once it has
// passed on the frames already read with the offending one, in the same
// read from the socket. Methods on other channels sent with it are served,
// and then the connection closes: pika's basic.get on a channel it has
// closed (which pika sends), sent with a basic.get on an open channel,
// gets the latter's get-empty, then connection.close 504 (10 of 10 on
// RabbitMQ 3.10.8; docs/served.md, the wire differential).
type channelExit struct {
	cmd  command
	code int
	text string
}

// channelExits notes a channelExit, which handle carries out once the
// frames read with cmd are taken.
func (c *wireConn) channelExits(cmd command, code int, text string) {
	if c.exit == nil {
		c.exit = &channelExit{cmd: cmd, code: code, text: text}
	}
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
	c.p.s.Unserve(cmd.id.String())
	c.connError(cmd, 503, "COMMAND_INVALID - unimplemented method")
}

// flush writes what the broker did to the process's connections since it
// last looked: a close it sent (connection.close), or the end its client
// noticed (a reset).
func (p *Process) flush() {
	p.listen()
	p.mu.Lock()
	conns := p.conns
	p.mu.Unlock()
	for _, c := range conns {
		if c.dead || c.closing || c.conn == nil {
			continue
		}
		if err := c.conn.Err(); err != nil {
			c.fail(command{}, err)
			continue
		}
		for n, ch := range c.chans {
			if !ch.closing {
				c.deliver(n, ch)
			}
		}
	}
}

// fingerprint is what the log says of an event: the connection, the
// channel, the method and its arguments, with what differs from run to
// run (names the server made) left out.
func (e event) fingerprint() string {
	switch e.kind {
	case evCall:
		return "call"
	case evOpen:
		if e.c.node != "" {
			return fmt.Sprintf("c%d open at %s", e.c.i, e.c.node) // not the process's own node
		}
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
	case *amqpwire.BasicConsume:
		s += " " + serverNamed(m.Queue) + flags(m.Exclusive, "exclusive")
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
