package amqp

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockprover/lockprover/prover"

	"github.com/lockprover/lockprover/amqplocks/broker"
	"github.com/lockprover/lockprover/sim"
)

// Simulator runs plans on the simulated broker: deterministic, the same
// plan always gives the same history.
type Simulator struct {
	// Trace, if set, receives the simulator's event trace.
	Trace io.Writer
}

// Run executes p against impl on a fresh simulated broker.
func (s Simulator) Run(ctx context.Context, p *Plan, impl Impl) (*prover.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(p.Cluster) > 0 {
		return nil, fmt.Errorf("the plan runs on a cluster of %d nodes, which the simulated broker is not: run it on one (--target rabbitmq-cluster)", len(p.Cluster))
	}
	o := sim.Options{Decider: sim.Script(p.Schedule, sim.Seeded(p.ScheduleSeed)), Trace: s.Trace}
	if p.Options.NoHeartbeat() {
		o.ServerHeartbeat = -1 // heartbeats off on both sides
	}
	w := sim.New(o)
	r := newRunner(p, impl, simEngine{w}, p.Lock)
	r.begin()
	if err := w.Run(); err != nil {
		return nil, err
	}
	return r.result()
}

type simEngine struct{ w *sim.World }

func (e simEngine) Go(name string, fn func(broker.Broker)) { e.w.Go(name, fn) }
func (e simEngine) Now() int64                             { return e.w.Tick() }
func (e simEngine) After(d time.Duration, f func())        { e.w.After(d, f) }
func (e simEngine) Hold(broker.Broker, string)             {} // the simulator freezes paused processes itself
func (e simEngine) Notice(b broker.Broker, _ string, limit time.Duration) {
	b.Sleep(context.Background(), limit)
}

func (e simEngine) AfterMethods(name string, n int, f func()) { e.w.AfterMethods(name, n, f) }

func (e simEngine) Fault(fault, target string) error { return e.w.Strike(fault, target) }

// BrokerUp reports whether the simulated broker is up (a restart struck
// from outside any process leaves it down for the restart's downtime).
func (e simEngine) BrokerUp() bool { return e.w.Up() }

func (e simEngine) Cost(name string) broker.Cost { return e.w.Cost(name) }

func (e simEngine) ReadCounts(name string, c *sim.Counts) { e.w.ReadCounts(name, c) }

// waitTimeout bounds an admin's wait in the simulator: only a holder that
// is never released (heartbeats off and the holder killed) makes it run out.
const waitTimeout = 10 * time.Minute

// OpContext bounds a wait by virtual time. Any other operation gets
// context.Background and a cancel that does nothing: on the simulator a
// context cancelled once its operation returned is one no call sees (the
// reference, its mutants and the runner keep none), and a process the
// runner cancels mid-Connect (restart) has already been stopped by its
// kill; so context.WithCancel's two allocations per operation bought
// nothing.
func (e simEngine) OpContext(wait bool) (context.Context, context.CancelFunc) {
	if wait {
		return e.w.WithTimeout(context.Background(), waitTimeout)
	}
	return context.Background(), noCancel
}

func noCancel() {}

func (e simEngine) Queues(prefix string) ([]queueOwner, error) {
	var out []queueOwner
	for _, q := range e.w.Queues() {
		if strings.HasPrefix(q.Name, prefix) {
			owner, _, _ := strings.Cut(q.Owner, "#") // connections are named process#id
			out = append(out, queueOwner{q.Name, owner})
		}
	}
	return out, nil
}
