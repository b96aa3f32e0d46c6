// Package amqpprotocol is amqp-locks' side of the process protocol
// (docs/protocol-amqp-locks.md): Processes starts one process of an
// implementation under test per client and admin of a run (NewProcesses)
// and speaks to it; Serve serves the reference (or a mutant) as such a
// process (serve-reference); Validate checks an implementation's plainest
// promises one request at a time (validate-impl). The processes are
// launched, read, timed out, signalled and ended by the generic launcher
// (adapters/process).
package amqpprotocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// This file is amqp-locks' side of the process protocol (docs/protocol.md)
// as the harness speaks it: the init a client's process gets, and what the
// replies to its operations mean, in amqp-locks' terms (Client). The
// processes are launched, read, timed out, signalled and ended by the
// generic launcher (adapters/process).

// Processes is an implementation under test that runs as processes: the
// Launcher's Command is started for each client and admin of a plan, and
// spoken to over the protocol. Make one with NewProcesses.
type Processes struct{ process.Launcher }

// NewProcesses is the implementation that command starts, one process per
// client and admin.
// NamesItsQueues marks the implementation as one whose queues are found on
// the broker by their lock's unique name (amqprun.Foreign).
func (*Processes) NamesItsQueues() {}

func NewProcesses(command string) *Processes {
	// A definite refusal of init is reported by its code alone, as the
	// launcher of amqp-locks always did.
	return &Processes{process.Launcher{Command: command, Refusal: func(e *process.ErrorReply) string { return e.Code }, CheckInit: checkInit}}
}

// checkInit faults what an amqp-locks init_ok declares, if anything:
// "abrupt_close" takes one value, "heartbeat"; a typo or a boolean there
// is refused, not taken as no declaration.
func checkInit(r process.Reply) string {
	raw, ok := r.Fields["abrupt_close"]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || s != "heartbeat" {
		return fmt.Sprintf(`whose "abrupt_close" is %s: the one value it takes is "heartbeat" (docs/protocol-amqp-locks.md#init)`, raw)
	}
	return ""
}

// Connect starts a process for the client name of plan p and shakes hands.
// The broker must give each process its own URL: a real one (the RabbitMQ
// target's fault proxy) or the simulator served on the wire (Wire), whose
// process the client then waits through. The implementation failing to start (it
// exited, hung, wrote garbage or refused before init_ok) is a
// *prover.ImplementationError; after two in a run (p.Lock names it: unique
// per run on a real broker), no more of its processes start and its every
// Connect fails with one. Any other error (the broker out of reach,
// as the process said with a *process.ErrorReply without Definite; ctx
// done) may pass if tried again.
func (i *Processes) Connect(ctx context.Context, b broker.Broker, p *amqprun.Plan, name string) (amqprun.Client, error) {
	u, ok := b.(interface{ URL() string })
	if !ok {
		return nil, &prover.ImplementationError{Msg: "an implementation in processes needs a broker served on the wire (amqprun.Simulator.Wire) or a real one"}
	}
	if e, ok := b.(interface{ Err() error }); ok && e.Err() != nil {
		return nil, e.Err() // the simulator could not be served to it
	}
	run := p.Lock
	if wt, ok := b.(process.Waiter); ok {
		ctx = process.WithWaiter(ctx, wt)
	}
	if r, ok := b.(interface{ Run() string }); ok {
		run = r.Run() // served: plans on the simulator share their lock's name
	}
	init := initRequest(name, p.Kind, p.Lock, u.URL(), int(p.Options.Heartbeat().Milliseconds()))
	if n, ok := b.(interface{ URLs() []string }); ok && len(n.URLs()) > 1 {
		init["urls"] = n.URLs() // served cluster: a port per node, the process's own first
	}
	c, err := i.Launcher.Connect(ctx, run, name, init)
	if err != nil {
		return nil, err
	}
	return &procClient{Client: c, kind: p.Kind}, nil
}

// initRequest is the init of client name of the lock (kind, lock) on the
// broker at url.
func initRequest(name, kind, lock, url string, heartbeatMs int) process.Request {
	return process.Request{"type": "init", "client": name, "lock": kind, "name": lock, "url": url, "heartbeat_ms": heartbeatMs}
}

// Preflight starts one process as the probe of a throwaway lock of the
// given kind on the broker at url, shakes hands and ends it: an
// implementation that cannot start fails here at once, with its stderr,
// rather than in every plan of a run.
func (i *Processes) Preflight(ctx context.Context, url, kind string) error {
	return i.preflight(ctx, url, kind)
}

// PreflightServed is Preflight on a simulated broker of its own, served on
// the wire (Wire): for a run on the simulator, which needs no broker.
func (i *Processes) PreflightServed(ctx context.Context, kind string) error {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	s := amqpserve.New(w, amqpserve.Options{})
	defer s.Close()
	var err error
	w.Go("probe", func(b broker.Broker) {
		p, perr := s.Process("probe", b)
		if perr != nil {
			err = perr
			return
		}
		err = i.preflight(process.WithWaiter(ctx, p), p.URL(), kind)
	})
	if rerr := w.Run(); rerr != nil {
		return rerr
	}
	return err
}

func (i *Processes) preflight(ctx context.Context, url, kind string) error {
	c, err := i.Launch(ctx, "probe", initRequest("probe", kind, rabbitmq.UniqueName("lp-preflight-"), url, 1000))
	var re *process.ErrorReply
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("probe could not reach the broker: %v", re)
	case err != nil:
		return err
	}
	return c.Close()
}

// procClient is one process of an implementation, as a ProcessClient.
type procClient struct {
	*process.Client
	kind string // semaphore or mutex
}

// call is the client's Call in amqp-locks' terms: a definite error reply
// is a *Failure with its code as the reason; any other error (a
// *process.ErrorReply without Definite among them) means the outcome is
// unknown.
func (c *procClient) call(ctx context.Context, d time.Duration, req process.Request, wants ...string) (process.Reply, error) {
	r, err := c.Call(ctx, d, req, wants...)
	var e *process.ErrorReply
	if errors.As(err, &e) && e.Definite {
		return process.Reply{}, &amqprun.Failure{Reason: e.Code}
	}
	return r, err
}

// op sends one operation, within the operation timeout, and checks its
// reply's type.
func (c *procClient) op(ctx context.Context, req process.Request, wants ...string) (process.Reply, error) {
	return c.call(ctx, c.Timeout(), req, wants...)
}

// ClosesOnlyOnHeartbeat says whether the process declared, in its
// init_ok, "abrupt_close": "heartbeat": its client library ends a
// connection's socket without a connection.close only when its heartbeat
// read deadline passes (docs/protocol-amqp-locks.md).
func (c *procClient) ClosesOnlyOnHeartbeat() bool {
	var s string
	return json.Unmarshal(c.InitOK().Fields["abrupt_close"], &s) == nil && s == "heartbeat"
}

// intField reads a reply's integer field, at least min.
func (c *procClient) intField(f map[string]json.RawMessage, name string, min int) (int, error) {
	var n int
	if err := json.Unmarshal(f[name], &n); err != nil || f[name] == nil || n < min {
		return 0, c.GiveUp(fmt.Sprintf("sent a reply whose %q is not an integer >= %d: %s", name, min, f[name]))
	}
	return n, nil
}

func (c *procClient) Acquire(ctx context.Context) (int, error) {
	r, err := c.op(ctx, process.Request{"type": "acquire"}, "acquire_ok", "acquire_fail")
	if err != nil {
		return 0, err
	}
	f := r.Fields
	if r.Type == "acquire_fail" {
		var reason string
		if err := json.Unmarshal(f["reason"], &reason); err != nil || reason == "" {
			return 0, c.GiveUp(fmt.Sprintf("sent an acquire_fail without a \"reason\" string (%s): want full, absent, unavailable, contended or held", f["reason"]))
		}
		return 0, &amqprun.Failure{Reason: reason}
	}
	if c.kind == "mutex" {
		return 0, nil
	}
	return c.intField(f, "slot", 1)
}

func (c *procClient) Verify(ctx context.Context, slot int) (bool, error) {
	req := process.Request{"type": "verify"}
	if c.kind != "mutex" {
		req["slot"] = slot
	}
	r, err := c.op(ctx, req, "verify_ok")
	if err != nil {
		return false, err
	}
	var held *bool
	if err := json.Unmarshal(r.Fields["held"], &held); err != nil || held == nil {
		return false, c.GiveUp(fmt.Sprintf("sent a verify_ok whose %q is not true or false: %s", "held", r.Fields["held"]))
	}
	return *held, nil
}

func (c *procClient) Release(ctx context.Context, slot int) error {
	req := process.Request{"type": "release"}
	if c.kind != "mutex" {
		req["slot"] = slot
	}
	_, err := c.op(ctx, req, "release_ok")
	return err
}

func (c *procClient) Create(ctx context.Context, slots int) error {
	_, err := c.op(ctx, process.Request{"type": "create", "slots": slots}, "create_ok")
	return err
}

func (c *procClient) Change(ctx context.Context, delta int) (int, int, error) {
	r, err := c.op(ctx, process.Request{"type": "change", "delta": delta}, "change_ok")
	if err != nil {
		return 0, 0, err
	}
	from, err := c.intField(r.Fields, "from", 0)
	if err != nil {
		return 0, 0, err
	}
	to, err := c.intField(r.Fields, "to", 0)
	return from, to, err
}

func (c *procClient) Destroy(ctx context.Context) (int, error) {
	r, err := c.op(ctx, process.Request{"type": "destroy"}, "destroy_ok")
	if err != nil {
		return 0, err
	}
	return c.intField(r.Fields, "from", 0)
}

func (c *procClient) Count(ctx context.Context) (int, error) {
	r, err := c.op(ctx, process.Request{"type": "count"}, "count_ok")
	if err != nil {
		return 0, err
	}
	return c.intField(r.Fields, "slots", 0)
}

func (c *procClient) Wait(ctx context.Context, slot int) error {
	_, err := c.call(ctx, 3*c.Timeout(), process.Request{"type": "wait", "slot": slot}, "wait_ok") // a holder may take heartbeats to go
	return err
}
