package redissim

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
)

// Pub/sub, as the priority lock's PubSubNotify defect uses it: a
// subscription is a connection of its own to one server, registered there
// once its SUBSCRIBE arrives (Subscribe does not wait for it, as go-redis
// does not); PUBLISH reaches the subscriptions registered then, through
// the client's partitions (held while cut), and no other: a message
// published while nobody is subscribed is lost. A crash, a lost reply or
// the client's end closes the connection: Receive answers the error once,
// and the next Receive subscribes again (go-redis reconnects).

// A subscription is one client's subscription to a channel of a server.
type subscription struct {
	e       penv
	p       *Process // the task that subscribed
	server  int
	channel string
	queue   []subItem
	more    *signal // fires when an item is queued, or it closes
	on      bool    // registered on its server
	broken  bool    // its connection failed: the next Receive subscribes again
	closed  bool
	// got, for a subscription of the wire (Process.Subscribe), is told
	// each item instead of queueing it.
	got func(subItem)
}

// A subItem is what the connection receives: a message (a publication's
// payload, or a confirmation), or an error.
type subItem struct {
	payload string
	err     error
}

var errClosed = errors.New("redis: client is closed")

// Subscribe sends SUBSCRIBE to server i on a new connection, without
// waiting for it.
func (e penv) Subscribe(ctx context.Context, i int, channel string) redlock.Subscription {
	p := e.cur()
	sb := &subscription{e: e, p: p, server: i, channel: channel, more: &signal{}}
	p.subs = append(p.subs, sb)
	sb.send()
	return sb
}

// send posts the SUBSCRIBE, as a round the process does not wait for.
func (sb *subscription) send() {
	rd := &round{p: sb.p, async: true, slots: []slot{{server: sb.server, sub: sb}}}
	sb.p.call(request{kind: reqPost, round: rd})
}

// push queues it and wakes the receiver.
func (sb *subscription) push(it subItem) {
	if sb.closed {
		return
	}
	if sb.got != nil {
		sb.got(it)
		return
	}
	sb.queue = append(sb.queue, it)
	more := sb.more
	sb.more = &signal{}
	more.Fire()
}

// Receive takes what came first, waiting at most d for it.
func (sb *subscription) Receive(ctx context.Context, d time.Duration) (string, error) {
	if sb.closed {
		return "", errClosed
	}
	if sb.broken {
		sb.broken = false
		sb.send()
	}
	deadline := sb.e.Now() + int64(max(d, 0))
	for {
		if sb.closed {
			return "", errClosed
		}
		if len(sb.queue) > 0 {
			it := sb.queue[0]
			sb.queue = sb.queue[1:]
			if it.err != nil {
				sb.broken = true
				sb.off()
			}
			return it.payload, it.err
		}
		if sb.e.Await(ctx, deadline, sb.more) < 0 {
			return "", errTimeout
		}
	}
}

func (sb *subscription) Close() error {
	if sb.closed {
		return errClosed
	}
	sb.end()
	return nil
}

// end closes the subscription: the server forgets it, a Receive waiting
// returns.
func (sb *subscription) end() {
	sb.closed = true
	sb.off()
	sb.more.Fire()
}

// off unregisters the subscription from its server.
func (sb *subscription) off() {
	if !sb.on {
		return
	}
	sb.on = false
	s := sb.p.w.servers[sb.server]
	s.subs = slices.DeleteFunc(s.subs, func(x *subscription) bool { return x == sb })
}

// subscribe is the server's SUBSCRIBE of sb: its confirmation.
func (s *server) subscribe(sb *subscription) Result {
	if sb.closed {
		return Result{Err: errReset}
	}
	if !sb.on {
		sb.on = true
		s.subs = append(s.subs, sb)
	}
	return Result{Val: []any{"subscribe", sb.channel, int64(1)}}
}

// subscribed is the round's end for a SUBSCRIBE: the confirmation, or the
// connection's failure, is what the subscription receives first.
func (w *World) subscribed(rd *round) {
	for _, sl := range rd.slots {
		if sl.sub == nil {
			continue
		}
		if sl.res.Err != nil {
			sl.sub.push(subItem{err: sl.res.Err})
		} else {
			sl.sub.push(subItem{})
		}
	}
}

// publish delivers message to the subscriptions to channel: how many.
func (s *server) publish(channel, message string) int {
	n := 0
	for _, sb := range s.subs {
		if sb.channel != channel {
			continue
		}
		n++
		s.w.toClient(sb.p, s.id, func() { sb.push(subItem{payload: message}) })
	}
	return n
}

// resetSubs closes the server's subscriptions' connections (a crash).
func (s *server) resetSubs() {
	subs := s.subs
	s.subs = nil
	for _, sb := range subs {
		sb.on = false
		s.w.toClient(sb.p, s.id, func() { sb.push(subItem{err: errReset}) })
	}
}

// toClient runs f, what server i sends to p, once the partition between
// them lets it through.
func (w *World) toClient(p *Process, i int, f func()) {
	if c := p.client(); c.cut[i] {
		c.held = append(c.held, held{server: i, f: f})
		return
	}
	f()
}
