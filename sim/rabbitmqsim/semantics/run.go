// Package semantics is broker-semantics.md as data: each measured RabbitMQ
// behaviour is a Case of steps and the observation each step must give, so
// that the same table runs on the simulator and on a real broker, and the two
// can be compared step by step.
package semantics

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// A Case is one row (or a group of rows) of broker-semantics.md.
type Case struct {
	ID    string // the row number(s) in broker-semantics.md
	Title string
	Steps []Step
	// SimOnly marks cases that cannot run on a shared real broker: they
	// restart it, reconfigure heartbeats or wait for minutes.
	SimOnly bool
	// ServerHeartbeat overrides the broker's heartbeat proposal (negative:
	// none); simulator only.
	ServerHeartbeat time.Duration
}

// A Step is one action on a connection's channel (On: "A" is connection A's
// first channel, "A.2" its second) or on the broker, and the observation it
// must give.
type Step struct {
	On   string
	Do   Action
	Want string // the observation; alternatives separated by "|"
	// Within bounds the time from the last Mark to the end of this step.
	// The upper bound stretches by Slack times the slowest round trip to
	// the broker of the case so far (a declare, a dial, ...): a loaded broker does what it does later
	// (RabbitMQ released an exclusive queue 250-1000 ms after its socket
	// closed, not a few ms, while the suite ran beside it), and the table
	// states what it does, not how fast a machine is. Result.Notes says
	// when a step needed the stretch.
	Within [2]time.Duration
}

// An Env is a broker a Case runs against, with the controls the table
// needs. Connection names are the table's ("A", "B", ...).
type Env interface {
	broker.Broker
	// Now is the time on the broker's clock.
	Now() time.Duration
	// Inspect describes a queue as rabbitmqctl list_queues would.
	Inspect(queue string) (QueueState, bool, error)
	// Fault injects a connection fault: "partition", "heal", "close-socket"
	// or "force-close", on the connection dialled with that name.
	Fault(kind, conn string) error
	StopBroker() error
	StartBroker() error
}

// QueueState is what Inspect reports.
type QueueState struct {
	Durable, AutoDelete bool
	Owner               string // the owning connection's name when exclusive
	Messages, Consumers int
}

// An Action is one thing a step does.
type Action struct {
	op        string
	queue     string
	declare   broker.DeclareOptions
	delete    broker.DeleteOptions
	publish   broker.Publishing
	exclusive bool
	exchange  string
	d         time.Duration
}

// Result is what a Case gave: one observation per step, and the
// differences from what the table wants.
type Result struct {
	Observed   []string
	Mismatches []string
	Notes      []string // steps that met their bounds only with the slack
}

// roundTrip says whether the action is one request to the broker and its
// answer, whose time measures the broker's latency: not a wait, a fault,
// a rabbitmqctl command or a wait for the broker to act.
func (a Action) roundTrip() bool {
	switch a.op {
	case "declare", "delete", "bind", "purge", "get", "publish", "consume", "dial", "redial", "reopen", "close-channel", "close-conn":
		return true
	}
	return false
}

// How a bounded step's time met its bounds.
const (
	inside    = iota
	stretched // only with the slack
	outside
)

// window judges a change seen between seen and now (after the Mark)
// against bounds w, stretched by Slack times the slowest round trip.
func window(w [2]time.Duration, seen, now, slowest time.Duration) int {
	switch {
	case now < w[0] || seen > w[1]+Slack*slowest:
		return outside
	case seen > w[1]:
		return stretched
	}
	return inside
}

// Slack is how many times the slowest round trip of a case a bounded
// step's upper bound stretches (Step.Within).
const Slack = 10

// Run runs c against env. Queue names are prefixed with prefix so that runs
// on a shared broker do not collide; connections are dialled with the
// table's names.
func Run(ctx context.Context, env Env, c Case, prefix string) Result {
	r := &runner{env: env, prefix: prefix, conns: map[string]broker.Conn{}, chans: map[string]broker.Channel{}}
	defer r.closeAll()
	var res Result
	var slowest time.Duration // the slowest round trip so far
	for i, s := range c.Steps {
		r.seen = -1
		began := env.Now()
		got := r.step(ctx, s)
		if s.Within == [2]time.Duration{} {
			if s.Do.roundTrip() {
				slowest = max(slowest, env.Now()-began)
			}
		} else {
			// An await knows only that the change happened after it last saw
			// the old state: the window (seen, now] must meet the bounds.
			seen, now := r.seen-r.mark, env.Now()-r.mark
			if r.seen < 0 {
				seen = now
			}
			switch window(s.Within, seen, now, slowest) {
			case outside:
				got += fmt.Sprintf(" after %v (want %v..%v)", now.Round(time.Millisecond), s.Within[0], s.Within[1])
			case stretched:
				res.Notes = append(res.Notes, fmt.Sprintf("step %d (%s %s): after %v, beyond %v..%v but within %d times the case's slowest round trip (%v): a slow broker",
					i+1, s.On, s.Do, now.Round(time.Millisecond), s.Within[0], s.Within[1], Slack, slowest.Round(time.Millisecond)))
			}
		}
		res.Observed = append(res.Observed, got)
		if !matches(s.Want, got) {
			res.Mismatches = append(res.Mismatches, fmt.Sprintf("step %d (%s %s): got %q, want %q", i+1, s.On, s.Do, got, s.Want))
		}
	}
	return res
}

func matches(want, got string) bool {
	for _, w := range strings.Split(want, "|") {
		if w == got {
			return true
		}
	}
	return false
}

type runner struct {
	env    Env
	prefix string
	conns  map[string]broker.Conn
	chans  map[string]broker.Channel
	hb     map[string]time.Duration
	mark   time.Duration
	seen   time.Duration // when an await last saw the old state, or -1
}

func (r *runner) closeAll() {
	for _, ch := range r.chans {
		ch.Close()
	}
	for _, c := range r.conns {
		if c.Err() == nil {
			c.Close()
		}
	}
}

// name maps a table name to a real queue name.
func (r *runner) name(q string) string {
	switch {
	case q == "", strings.HasPrefix(q, "amq."):
		return q
	case q == "LONG":
		return strings.Repeat("x", 256)
	}
	return r.prefix + q
}

func connOf(on string) string {
	c, _, _ := strings.Cut(on, ".")
	return c
}

// channel returns the step's channel, dialling its connection and opening
// the channel (in confirm mode) the first time.
func (r *runner) channel(ctx context.Context, on string) (broker.Channel, error) {
	if ch := r.chans[on]; ch != nil {
		return ch, nil
	}
	cn := connOf(on)
	c := r.conns[cn]
	if c == nil {
		var err error
		c, err = r.env.Dial(ctx, broker.Config{Name: cn, Heartbeat: r.hb[cn]})
		if err != nil {
			return nil, err
		}
		r.conns[cn] = c
	}
	ch, err := c.Channel(ctx)
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(ctx); err != nil {
		return nil, err
	}
	r.chans[on] = ch
	return ch, nil
}

func (r *runner) step(ctx context.Context, s Step) string {
	if obs, ok := r.harnessStep(ctx, s); ok {
		return obs
	}
	ch, err := r.channel(ctx, s.On)
	if err != nil {
		return "setup: " + observe(err)
	}
	if s.Do.op == "reopen" {
		delete(r.chans, s.On)
		_, err := r.channel(ctx, s.On)
		return observe(err)
	}
	return channelStep(ctx, ch, r.name(s.Do.queue), s.Do)
}

// harnessStep performs the steps that are not a channel's methods: marks
// and waits, the broker's state, faults and connections. ok is false for a
// channel method.
func (r *runner) harnessStep(ctx context.Context, s Step) (obs string, ok bool) {
	a := s.Do
	switch a.op {
	case "mark":
		r.mark = r.env.Now()
		return "ok", true
	case "wait":
		return observe(r.env.Sleep(ctx, a.d)), true
	case "heartbeat":
		if r.hb == nil {
			r.hb = map[string]time.Duration{}
		}
		r.hb[connOf(s.On)] = a.d
		return "ok", true
	case "inspect":
		st, ok, err := r.env.Inspect(r.name(a.queue))
		switch {
		case err != nil:
			return "inspect failed: " + err.Error(), true
		case !ok:
			return "gone", true
		}
		return describeQueue(st), true
	case "await-gone":
		return r.awaitGone(ctx, r.name(a.queue)), true
	case "stop":
		return observe(r.env.StopBroker()), true
	case "start":
		return observe(r.env.StartBroker()), true
	case "partition", "heal", "close-socket", "force-close":
		return observe(r.env.Fault(a.op, connOf(s.On))), true
	case "conn-error", "close-conn":
		c := r.conns[connOf(s.On)]
		switch {
		case c == nil:
			return "no connection", true
		case a.op == "conn-error":
			return observe(c.Err()), true
		}
		return observe(c.Close()), true
	case "redial":
		cn := connOf(s.On)
		for k := range r.chans {
			if connOf(k) == cn {
				delete(r.chans, k)
			}
		}
		delete(r.conns, cn)
		_, err := r.channel(ctx, s.On)
		return observe(err), true
	case "dial":
		_, err := r.channel(ctx, s.On)
		return observe(err), true
	}
	return "", false
}

// awaitGone polls queue q until it is gone: every millisecond at first,
// then at 1% of the time waited so far, as the bounds being checked scale
// with the wait.
func (r *runner) awaitGone(ctx context.Context, q string) string {
	began := r.env.Now()
	for {
		_, ok, err := r.env.Inspect(q)
		if err != nil {
			return "inspect failed: " + err.Error()
		}
		if !ok {
			return "gone"
		}
		r.seen = r.env.Now()
		if err := r.env.Sleep(ctx, max(time.Millisecond, (r.env.Now()-began)/100)); err != nil {
			return observe(err)
		}
	}
}

// channelStep performs action a, one of a channel's methods, on queue q.
func channelStep(ctx context.Context, ch broker.Channel, q string, a Action) string {
	switch a.op {
	case "declare":
		got, err := ch.Declare(ctx, q, a.declare)
		if err == nil && q == "" {
			if serverNamed.MatchString(got.Name) {
				return "ok server-named"
			}
			return "ok named " + got.Name
		}
		return observe(err)
	case "delete":
		n, err := ch.Delete(ctx, q, a.delete)
		if err != nil {
			return observe(err)
		}
		return fmt.Sprintf("ok n=%d", n)
	case "publish":
		p := a.publish
		p.Key = q
		conf, err := ch.Publish(ctx, p)
		switch {
		case err != nil:
			return observe(err)
		case conf.Returned && conf.Acked:
			return "return+ack"
		case conf.Returned:
			return "return+nack"
		case conf.Acked:
			return "ack"
		}
		return "nack"
	case "consume":
		_, err := ch.Consume(ctx, q, a.exclusive)
		return observe(err)
	case "get":
		ok, err := ch.Get(ctx, q)
		if err == nil && !ok {
			return "empty"
		}
		return observe(err)
	case "purge":
		n, err := ch.Purge(ctx, q)
		if err != nil {
			return observe(err)
		}
		return fmt.Sprintf("ok n=%d", n)
	case "bind":
		return observe(ch.Bind(ctx, q, a.exchange, q))
	case "close-channel":
		return observe(ch.Close())
	}
	panic("semantics: unknown action " + a.op)
}

var serverNamed = regexp.MustCompile(`^amq\.gen-[A-Za-z0-9_-]{22}$`)

// observe renders an outcome: "ok", "<code> channel", "<code> connection",
// "refused", or the error text for anything else.
func observe(err error) string {
	var e *broker.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &e) && e.Connection:
		return fmt.Sprintf("%d connection", e.Code)
	case errors.As(err, &e):
		return fmt.Sprintf("%d channel", e.Code)
	case errors.Is(err, broker.ErrRefused):
		return "refused"
	}
	return "error: " + err.Error()
}

func describeQueue(s QueueState) string {
	var b strings.Builder
	b.WriteString("exists")
	if s.Durable {
		b.WriteString(" durable")
	}
	if s.AutoDelete {
		b.WriteString(" auto-delete")
	}
	if s.Owner != "" {
		b.WriteString(" exclusive=" + s.Owner)
	}
	fmt.Fprintf(&b, " messages=%d consumers=%d", s.Messages, s.Consumers)
	return b.String()
}

func (a Action) String() string {
	if a.queue != "" {
		return a.op + " " + a.queue
	}
	return a.op
}
