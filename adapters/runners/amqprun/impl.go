package amqprun

import (
	"context"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"syscall"

	"github.com/lockprover/lockprover/histories"

	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// An Impl is an implementation under test. Each process of a plan gets its
// own client of the plan's lock from it. Connect's error is a
// *prover.ImplementationError when the implementation itself failed (its
// process did not start, say): the runner does not try again and reports
// it; any other error (the broker out of reach, a fault) may pass if the
// runner tries again.
type Impl interface {
	Connect(ctx context.Context, b broker.Broker, p *Plan, process string) (Client, error)
}

// A Foreign implementation is one whose queue names lockprover does not
// know (the spec lets them be "some equivalent of N-1-A"): one in
// processes (package protocol). On a real broker its lock's queues are
// found by listing every queue under the run's unique lock name, for
// no-leak, the wait for the broker to notice dead clients, and the
// clean-up.
type Foreign interface {
	Impl
	// NamesItsQueues marks the implementation as Foreign.
	NamesItsQueues()
}

// A Client is one process's handle on the lock: its operations, as the
// history records them. An error that is (or wraps) a *Failure means the
// operation certainly did not take effect (the history says fail); any other
// error means its outcome is unknown (info).
type Client interface {
	Acquire(ctx context.Context) (slot int, err error) // slot is 0 for a mutex
	Verify(ctx context.Context, slot int) (held bool, err error)
	Release(ctx context.Context, slot int) error
	Create(ctx context.Context, slots int) error
	Change(ctx context.Context, delta int) (from, to int, err error)
	Destroy(ctx context.Context) (from int, err error)
	Count(ctx context.Context) (int, error)
	Wait(ctx context.Context, slot int) error
	// Broken reports that the connection is gone: the process connects
	// again before its next operation.
	Broken() bool
	Close() error
}

// A ProcessClient is a client that runs in a process of its own (an
// implementation under test, in any language). The runner signals it for
// the faults a process feels (SIGKILL, SIGSTOP, SIGCONT), and asks it after
// an operation of unknown outcome whether the process is gone.
type ProcessClient interface {
	Client
	Signal(sig syscall.Signal)
	// Crashed says why the process is gone or was given up on (it exited,
	// wrote garbage, answered the wrong id, timed out), or "" while it
	// serves. A process the runner killed has not crashed.
	Crashed() string
}

// Failure is a definite failure, with the reason the history records
// (full, absent, contended, held, ...).
type Failure struct{ Reason string }

func (f *Failure) Error() string { return "failed: " + f.Reason }

// Reference is the reference implementation (package amqplocks) with the
// plan's options.
var Reference Impl = reference{}

type reference struct{}

func (reference) Connect(ctx context.Context, b broker.Broker, p *Plan, process string) (Client, error) {
	o := p.Options.Reference()
	// Jitter and random scan starts draw from a source fixed by the plan
	// and the process's name, so runs repeat exactly.
	h := fnv.New64a()
	h.Write([]byte(process))
	o.Rand = rand.New(rand.NewPCG(h.Sum64(), p.ScheduleSeed))
	c, err := amqplocks.Dial(ctx, b, o)
	if err != nil {
		return nil, err
	}
	return &refClient{c: c, kind: p.Kind, lock: p.Lock, reconnects: o.Reconnect}, nil
}

// refClient adapts amqplocks to Client.
type refClient struct {
	c          *amqplocks.Client
	kind, lock string
	reconnects bool
}

// outcome maps the reference's errors onto the history's outcomes.
func outcome(err error) error {
	for _, f := range []struct {
		err    error
		reason string
	}{
		{amqplocks.ErrFull, "full"}, {amqplocks.ErrAbsent, "absent"}, {amqplocks.ErrContended, "contended"},
		{amqplocks.ErrHeld, "held"}, {amqplocks.ErrExists, "exists"}, {amqplocks.ErrUnavailable, "unavailable"},
	} {
		if errors.Is(err, f.err) {
			return &Failure{f.reason}
		}
	}
	return err
}

func (r *refClient) Acquire(ctx context.Context) (int, error) {
	if r.kind == histories.Mutex {
		return 0, outcome(r.c.Mutex(r.lock).Acquire(ctx))
	}
	s, err := r.c.Semaphore(r.lock).Acquire(ctx)
	return s, outcome(err)
}

func (r *refClient) Verify(ctx context.Context, slot int) (bool, error) {
	var err error
	if r.kind == histories.Mutex {
		err = r.c.Mutex(r.lock).Verify(ctx)
	} else {
		err = r.c.Semaphore(r.lock).Verify(ctx, slot)
	}
	if errors.Is(err, amqplocks.ErrLost) {
		return false, nil
	}
	return err == nil, err
}

func (r *refClient) Release(ctx context.Context, slot int) error {
	var err error
	if r.kind == histories.Mutex {
		err = r.c.Mutex(r.lock).Release(ctx)
	} else {
		err = r.c.Semaphore(r.lock).Release(ctx, slot)
	}
	if errors.Is(err, amqplocks.ErrLost) {
		return &Failure{"not held"} // nothing was sent: the client holds nothing to delete
	}
	return err
}

func (r *refClient) Create(ctx context.Context, n int) error {
	return outcome(r.c.Admin(r.lock).Create(ctx, n))
}

func (r *refClient) Change(ctx context.Context, delta int) (int, int, error) {
	from, to, err := r.c.Admin(r.lock).Change(ctx, delta)
	return from, to, outcome(err)
}

func (r *refClient) Destroy(ctx context.Context) (int, error) {
	from, err := r.c.Admin(r.lock).Destroy(ctx)
	return from, outcome(err)
}

func (r *refClient) Count(ctx context.Context) (int, error) {
	n, err := r.c.Admin(r.lock).Count(ctx)
	return n, outcome(err)
}

func (r *refClient) Wait(ctx context.Context, slot int) error {
	return outcome(r.c.Admin(r.lock).Wait(ctx, slot))
}

// Broken: a reference that reconnects by itself (Options.Reconnect) is
// never broken for the runner.
func (r *refClient) Broken() bool { return !r.reconnects && r.c.Err() != nil }
func (r *refClient) Close() error { return r.c.Close() }
