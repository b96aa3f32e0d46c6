package amqpserve

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/internal/amqpwire"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// frameMax is what the served broker offers in connection.tune:
// RabbitMQ's default.
const frameMax = 131072

// A wireConn is one TCP connection of a process: read by its own
// goroutine (the handshake up to connection.open, then frames into
// commands), written by the process's coroutine and by its heartbeats.
type wireConn struct {
	p  *Process
	i  int // its place among the process's connections, from 1
	nc net.Conn
	r  *amqpwire.Reader

	wmu sync.Mutex
	w   *amqpwire.Writer

	hb time.Duration // negotiated in tune-ok
	// name is the World's name for the connection: the process's, then
	// the client's connection_name (c1#lockprover-c1), so that a
	// connection a client names can be aimed at; "" for none (the World
	// names it c1#N).
	name string
	// node is the node the connection was made to through its port, on a
	// cluster, where it is not the process's own; "" for its own.
	node     string
	stop     chan struct{} // closed when the connection ends (halt)
	stopOnce sync.Once

	// The coroutine's own: the World's connection once opened, its
	// channels by number, and whether the broker closed it and waits for
	// close-ok (closing) or it is gone (dead).
	conn    broker.Conn
	chans   map[uint16]*wireChan
	closing bool
	dead    bool
	exit    *channelExit // a connection error pending the frames read with it

	// The reader's own: methods with content awaiting their frames, by
	// channel (read).
	assembling map[uint16]*assembly
}

func newWireConn(p *Process, i int, nc net.Conn) *wireConn {
	return &wireConn{p: p, i: i, nc: nc, r: amqpwire.NewReader(nc, amqpwire.FrameMinSize),
		w: amqpwire.NewWriter(nc, frameMax), stop: make(chan struct{}), chans: map[uint16]*wireChan{}}
}

func (c *wireConn) String() string { return fmt.Sprintf("%s's connection %d", c.p.name, c.i) }

// serve reads the connection: the handshake, then commands, until it ends.
func (c *wireConn) serve() {
	defer c.p.wg.Done()
	if err := c.handshake(); err != nil {
		c.p.s.Refuse("%s: %v", c, err)
		c.nc.Close()
		return
	}
	c.p.put(event{c: c, kind: evOpen})
	if c.hb > 0 {
		c.p.wg.Add(1)
		go c.heartbeats()
	}
	for {
		cmd, err := c.read()
		if err != nil {
			c.p.put(event{c: c, kind: evGone, err: err})
			return
		}
		c.p.put(event{c: c, kind: evCommand, cmd: cmd})
	}
}

// heartbeats writes one every half heartbeat until the connection ends:
// the client's clock never sees the broker silent, whatever the World's
// clock does (doc.go).
func (c *wireConn) heartbeats() {
	defer c.p.wg.Done()
	t := time.NewTicker(c.hb / 2)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.wmu.Lock()
			err := c.w.WriteFrame(amqpwire.Frame{Type: amqpwire.FrameHeartbeat})
			if err == nil {
				err = c.w.Flush()
			}
			c.wmu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

// A command is a method with its content, if it has one.
type command struct {
	ch    uint16
	id    amqpwire.MethodID
	m     amqpwire.Method
	props amqpwire.Properties
	body  []byte
	// more says the next command's frame had come with this one (in the
	// same read from the socket) when it was read.
	more bool
}

// read reads the next command, skipping heartbeats. A method with
// content is assembled on its channel from the frames that follow there,
// as RabbitMQ assembles each channel's apart: another channel's frames
// may come between them (amqp091-go's reader answers the broker's
// connection.close with close-ok on channel 0 while a publish on channel
// 1 has sent its method and not yet its header), and are read meanwhile.
func (c *wireConn) read() (command, error) {
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			return command{}, err
		}
		a := c.assembling[f.Channel]
		switch {
		case f.Type == amqpwire.FrameHeartbeat:
			continue
		case a != nil:
			cmd, done, err := a.take(f)
			if err != nil || !done {
				if err != nil {
					return command{}, err
				}
				continue
			}
			delete(c.assembling, f.Channel)
			cmd.more = c.r.Buffered()
			return cmd, nil
		case f.Type != amqpwire.FrameMethod:
			return command{}, fmt.Errorf("a frame of type %d on channel %d where a method was due", f.Type, f.Channel)
		}
		m, err := amqpwire.DecodeMethod(f.Payload)
		if err != nil {
			return command{}, err
		}
		cmd := command{ch: f.Channel, id: amqpwire.IDOf(m), m: m}
		if info, _ := amqpwire.Lookup(cmd.id); info.Content {
			if c.assembling == nil {
				c.assembling = map[uint16]*assembly{}
			}
			c.assembling[f.Channel] = &assembly{cmd: cmd}
			continue
		}
		cmd.more = c.r.Buffered()
		return cmd, nil
	}
}

// An assembly is a method with content on one channel, awaiting its
// header and body frames.
type assembly struct {
	cmd    command
	header bool   // its header came
	size   uint64 // the body's size, as the header said
}

// take takes the channel's next frame into a: its command, once whole
// (done).
func (a *assembly) take(f amqpwire.Frame) (cmd command, done bool, err error) {
	switch {
	case !a.header && f.Type != amqpwire.FrameHeader:
		return command{}, false, fmt.Errorf("%v on channel %d: a frame of type %d where its content header was due", a.cmd.id, a.cmd.ch, f.Type)
	case !a.header:
		h, err := amqpwire.DecodeHeader(f.Payload)
		if err != nil {
			return command{}, false, err
		}
		a.header, a.size, a.cmd.props = true, h.BodySize, h.Properties
	case f.Type != amqpwire.FrameBody:
		return command{}, false, fmt.Errorf("%v on channel %d: a frame of type %d where body was due", a.cmd.id, a.cmd.ch, f.Type)
	default:
		a.cmd.body = append(a.cmd.body, f.Payload...)
		if uint64(len(a.cmd.body)) > a.size {
			return command{}, false, fmt.Errorf("%v on channel %d: a body of %d bytes, its header said %d", a.cmd.id, a.cmd.ch, len(a.cmd.body), a.size)
		}
	}
	return a.cmd, uint64(len(a.cmd.body)) == a.size, nil
}

// send writes methods (and content, for a return) and flushes.
func (c *wireConn) send(ch uint16, ms ...amqpwire.Method) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for _, m := range ms {
		if err := c.w.WriteMethod(ch, m); err != nil {
			return err
		}
	}
	return c.w.Flush()
}

func (c *wireConn) sendContent(ch uint16, m amqpwire.Method, props amqpwire.Properties, body []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.w.WriteContent(ch, m, props, body); err != nil {
		return err
	}
	return c.w.Flush()
}

// end closes the connection on the wire: with a FIN, or a reset where
// the client is to see its connection broken.
func (c *wireConn) end(reset bool) {
	if c.dead {
		return
	}
	c.retire()
	if tc, ok := c.nc.(*net.TCPConn); ok && reset {
		tc.SetLinger(0)
	}
	c.halt()
}

// retire ends the connection for the World, leaving its socket for the
// client to close, as RabbitMQ does after connection.close-ok (closed
// first, the socket's end would reach a client such as amqp091-go as the
// reason its connection ended: 501 EOF, where RabbitMQ gives 504).
func (c *wireConn) retire() {
	c.dead = true
	c.stopOnce.Do(func() { close(c.stop) })
}

// halt closes the socket and stops the heartbeats; any goroutine may.
func (c *wireConn) halt() {
	c.nc.Close()
	c.stopOnce.Do(func() { close(c.stop) })
}

// gone says whether err is only the connection ending (the client closed
// it, or the served broker did), not something it sent wrong.
func gone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection reset")
}
