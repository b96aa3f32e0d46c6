package consulsemrun

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/lease"
)

// server is how a history names the simulated server: no client is
// called so, so the lease checker takes a fault aimed at it for one of
// the backend.
const server = "server"

// nemesis starts the nemesis's process (run.Runner.Nemesis): it strikes
// the plan's faults at their times, ends those that last until the end
// once every client is done, waits out every session, and probes.
func (r *runner) nemesis() {
	timeline := leaserun.Timeline(r.p.Nemesis, Fault.timing)
	r.w.Go("nemesis", func(p proc) {
		if s, ok := r.nodes.(*simNodes); ok {
			s.sleep = p.Sleep
		}
		r.Nemesis(timeline, run.Nemesis{
			Sleep: run.Sleeper(r.ctx, p.Sleep),
			Strike: func(t run.Timed) {
				f := r.p.Nemesis[t.Fault]
				switch {
				case f.onCluster():
					r.strikeNode(t.Fault, t.End)
					return
				case f.Fault == histories.RestartBroker:
					r.restartServer(p, time.Duration(f.For)*time.Millisecond)
					return
				}
				r.Locked(func() { r.strike(r.p.Nemesis[t.Fault], t.End) })
			},
			EndFaults: func() {
				r.endNodeFaults()
				r.Locked(r.endFaults)
			},
			// Every session has been invalidated (or destroyed) once k
			// TTLs, the sweep and a margin have passed since the last
			// grant: a probe must find a slot free. A cluster first
			// agrees again, and elects, after its faults.
			Settle: func() {
				r.awaitCluster()
				p.Sleep(r.settle())
			},
			Probe:    func() { r.Locked(r.probe) },
			Abandon:  r.Abandon(func(name string) { r.w.Strike(run.Aim{Fault: histories.Kill, Process: name}) }),
			Patience: r.patience(),
		})
	})
}

// settle is how long the nemesis waits, once the clients are done, before
// the probe: two TTLs and lease.Margin, past every session's life (k is 2
// at most). On a real server, judged with realDrift, the TTLs are
// stretched by it as recovers stretches them: a probe refused sooner than
// k·ttl(1+drift) and the margin after the last grant's return is judged
// by nothing (a holder may still be valid then), and consul-no-prune,
// whose dead holder only the probe meets in most plans, went uncaught on
// Consul (its probe ran 300 ms inside the allowance).
func (r *runner) settle() time.Duration {
	ttl := 2 * time.Duration(r.p.TTLMs) * time.Millisecond
	if r.sim == nil {
		ttl = time.Duration(float64(ttl) * (1 + realDrift))
	}
	if r.nodes != nil {
		ttl += clusterGrace
	}
	return ttl + lease.Margin
}

// patience is how long the nemesis waits for the clients: on the
// simulator, virtual time is free; a real run that has not ended two
// minutes after its faults is stuck.
func (r *runner) patience() time.Duration {
	if r.sim != nil {
		return time.Hour
	}
	return 2 * time.Minute
}

// probe starts the quiescent probe: a client that acquires once, with
// the plan's limit, or, where the lock key has another (clients of their
// own limits), with each of theirs until one agrees. On a real server it
// then releases, so that the run leaves nothing behind.
func (r *runner) probe() {
	script := []Step{{Op: histories.Acquire}}
	if r.sim == nil {
		script = append(script, Step{Op: histories.Release})
	}
	st := r.add("probe1", script, r.p.Limit)
	for _, l := range r.p.Limits {
		if l != r.p.Limit && !slices.Contains(st.others, l) {
			st.others = append(st.others, l)
		}
	}
	r.start(st)
}

// strike applies a fault aimed at a client (or, with end, ends it:
// resume, heal), with the runner's lock held, and records it once in
// place. A fault that cannot strike (its client is done, a second pause
// of a paused client, a force-close of a client with no connection open)
// is neither applied nor recorded; a drop-reply is recorded when it
// strikes.
func (r *runner) strike(f Fault, end bool) {
	st := r.clients[f.Target]
	live := st != nil && !st.Done
	switch f.Fault {
	case histories.Kill:
		if live {
			at := r.from()
			r.w.Strike(run.Aim{Fault: histories.Kill, Process: st.Process})
			r.recordFrom(histories.Kill, f.Target, at)
			r.restart(st)
		}
	case histories.Pause:
		r.hold(st, live, end, histories.Pause, histories.Resume)
	case histories.Partition:
		r.hold(st, live, end, histories.Partition, histories.Heal)
	case histories.DropReply:
		switch {
		case live && r.impl != nil && r.sim != nil:
			// The served agent loses its next answer to the process,
			// whichever request it answers.
			r.sim.DropReply(st.Process)
		case live:
			r.armed[f.Target] = true
		}
	case histories.ForceClose:
		if at := r.from(); live && r.w.Strike(run.Aim{Fault: histories.ForceClose, Process: st.Process}) == nil {
			r.recordFrom(histories.ForceClose, f.Target, at)
		}
	}
}

// hold strikes a fault that holds st until it ends (name: pause or
// partition), or ends it (over: resume or heal).
func (r *runner) hold(st *client, live, end bool, name, over string) {
	switch {
	case end && st != nil && r.Held(name, st.Name):
		r.Unhold(name, st.Name)
		r.w.End(run.Aim{Fault: name, Process: st.Process})
		r.record(over, st.Name)
	case !end && live && !r.Held(name, st.Name):
		at := r.from()
		r.w.Strike(run.Aim{Fault: name, Process: st.Process})
		r.Hold(name, st.Name)
		r.recordFrom(name, st.Name, at)
	}
}

// endFaults ends the faults meant to last until the end: pauses and
// partitions.
func (r *runner) endFaults() {
	for _, h := range r.Holds() {
		st := r.clients[h.Target]
		if h.Fault == histories.Pause {
			r.hold(st, true, true, histories.Pause, histories.Resume)
		} else {
			r.hold(st, true, true, histories.Partition, histories.Heal)
		}
	}
}

// restartServer restarts the server, down for down, as the nemesis's
// process p: recorded in force from the crash until it is up again, so
// that it excuses what fails meanwhile. A real server is recorded down
// from before its stop until it answers again; a restart that failed
// ends the run with an error, no history (whether it went down is not
// known).
func (r *runner) restartServer(p proc, down time.Duration) {
	v := &histories.Fault{Process: server}
	struck := false
	err := r.w.Strike(run.Aim{Fault: histories.RestartBroker, Down: down, Wait: p.Sleep, Struck: func() {
		struck = true
		r.Began(histories.RestartBroker, v)
	}})
	if !struck {
		return // it never went down: nothing to record
	}
	if err != nil {
		r.w.Lock()
		r.failed = append(r.failed, fmt.Errorf("restart-broker: %w", err))
		r.w.Unlock()
	}
	r.Ended(histories.RestartBroker, v, nil)
}

// record records fault name, aimed at target, as nemesis events.
func (r *runner) record(name, target string) { r.recordFrom(name, target, math.MaxInt64) }

// recordFrom is record of a fault applied from at (run.Runner.StruckFrom).
func (r *runner) recordFrom(name, target string, at int64) {
	r.StruckFrom(name, &histories.Fault{Process: target}, at)
}

// from is the reading a fault about to be applied is recorded from
// (run.Runner.StruckFrom): the clock's now on a real server, where it
// strikes at once and a loaded machine may run others before the nemesis
// records it; on the simulator none (math.MaxInt64), where it is applied
// when the scheduler serves it and recorded then.
func (r *runner) from() int64 {
	if r.sim != nil {
		return math.MaxInt64
	}
	return r.Now()
}

// dropped records a lost reply when it is lost (consulsim.Options.OnDrop):
// to the current incarnation of a client only.
func (r *runner) dropped(proc string) {
	if p := r.Current(proc); p != nil {
		r.record(histories.DropReply, p.Name)
	}
}

// restart starts a killed client again: its operation in flight ends
// unknown, and it holds nothing. A new incarnation runs unpaused, with
// connections of its own (recorded as the hold's end).
func (r *runner) restart(st *client) {
	if _, ok := r.InFlight(&st.Proc); ok {
		r.complete(st, histories.Info, nil, errors.New("killed"))
	}
	st.token, st.acquiring = "", false
	delete(r.armed, st.Name)
	for _, h := range []string{histories.Pause, histories.Partition} {
		if r.Held(h, st.Name) {
			r.Unhold(h, st.Name)
			over := histories.Resume
			if h == histories.Partition {
				over = histories.Heal
			}
			r.record(over, st.Name)
		}
	}
	r.start(st)
}
