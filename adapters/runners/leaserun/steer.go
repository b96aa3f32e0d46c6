package leaserun

import (
	"slices"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// Steering is what the lease families' steering (prover.Steerable) needs
// to know of a family's plans: the operations their scripts hold, the
// faults they strike, how many clients they have, and whether two
// clients may hold at once. Goals and Toward are the same for every lease
// family; where a family's plans differ (its fault type, its limit), the
// family finishes the plan Toward leaned.
type Steering struct {
	// Ops are the operations a script may hold, sleep aside (Steps.Ops).
	Ops []string
	// Faults are the faults a plan may strike at a client, or at the
	// server (every client), by the names histories give them; not a
	// cluster's nodes.
	Faults []string
	// Only lists the faults that strike inside some operations only (a
	// lost reply to a granting write: an acquire's), and which.
	Only map[string][]string
	// Clients is the most clients a plan may have.
	Clients int
	// Semaphore: a plan may let two clients hold at once (its limit 2).
	Semaphore bool
	// OpMs is about how long one operation takes where the plans run, in
	// milliseconds (at least 1), and Took, where known, how long each
	// does (an acquire takes longer than a refresh: on a real etcd about
	// 35 ms against 2); StartMs is when a client's first operation
	// begins. Where a fault is placed to strike inside an operation.
	OpMs    int
	Took    map[string]int
	StartMs int
}

// took is about how long op takes, in ms (at least 1).
func (s Steering) took(op string) int {
	if ms, ok := s.Took[op]; ok {
		return max(1, ms)
	}
	return max(1, s.OpMs)
}

// holding says whether a client does op only while it holds a lease
// (the runners skip it otherwise).
func holding(op string) bool { return op != histories.Acquire }

// Goals are the interleavings s's plans can reach (prover.Steerable),
// the most wanted first: two clients' operations at once, one after the
// other's, a client's two in a row, and every fault struck inside every
// operation. Left out are those no plan can show: an acquire after the
// client's own acquire, refresh or verify (it holds: the runner skips
// it), an operation on a lease right after the client's own release (it
// holds none), and, where only one client holds at a time, two clients
// both holding (an operation on a lease during or after another's, or
// after another's ok acquire, refresh or verify): those need a lease to
// expire under a holder first, which plans do, but not by design.
func (s Steering) Goals() []prover.Interleaving {
	var out []prover.Interleaving
	if s.Clients > 1 {
		for _, how := range []prover.How{prover.During, prover.After} {
			for _, x := range s.Ops {
				for _, y := range s.Ops {
					if !s.Semaphore && holding(x) && (holding(y) || how == prover.After) {
						continue // both would hold
					}
					out = append(out, prover.Interleaving{X: x, Y: y, How: how, Who: "client/client"})
				}
			}
		}
	}
	for _, x := range s.Ops {
		for _, y := range s.Ops {
			if x == histories.Acquire && y != histories.Release || holding(x) && y == histories.Release {
				continue
			}
			out = append(out, prover.Interleaving{X: x, Y: y, How: prover.AfterOwn, Who: "client/client"})
		}
	}
	for _, f := range s.Faults {
		for _, x := range s.Ops {
			if only, ok := s.Only[f]; ok && !slices.Contains(only, x) {
				continue
			}
			out = append(out, prover.Interleaving{X: x, Y: f, How: prover.Struck, Who: "client"})
		}
	}
	return out
}

// A Meeting is a plan's scripts leaned toward a goal by Toward, and what
// the family must still do to the plan.
type Meeting struct {
	// Scripts are the clients' scripts, the goal's operations first.
	Scripts [][]lease.Step
	// Met are the clients whose scripts the goal's operations lead (one
	// or two, by index): the family leaves out the faults it drew at
	// them, which would mostly stop the meeting, unless it strikes one.
	Met []int
	// Names are the Met clients' process names, in the same order.
	Names []string
	// BothHold: the goal needs two clients to hold at once; the family
	// gives the plan a limit of 2.
	BothHold bool
	// StrikeAt, for a fault struck during an operation, is when (ms from
	// the plan's start) the fault must strike Met[0]'s client, which does
	// that operation several times from the start.
	StrikeAt int
}

// Toward leans scripts (as drawn) toward g, one of s's goals: it puts g's
// operations first in two clients' scripts (one's, for a client's two in
// a row or a fault), spaced as g needs: Y first, then after a pause of
// tens of milliseconds X, for X after another's Y; three of each, up to two
// operations' time apart, for X during another's Y; for a fault, the
// operation four times in a row (an acquire and a release in turn), and a
// time within them. An operation on
// a lease comes after an acquire, so that its client holds one.
func (s Steering) Toward(t *rapid.T, scripts [][]lease.Step, g prover.Interleaving) Meeting {
	scripts = slices.Clone(scripts)
	for len(scripts) < 2 && (g.How == prover.During || g.How == prover.After) {
		scripts = append(scripts, nil)
	}
	if len(scripts) == 0 {
		scripts = append(scripts, nil)
	}
	m := Meeting{Scripts: scripts}
	lead := func(i int, steps []lease.Step) {
		scripts[i] = append(steps, scripts[i]...)
	}
	switch g.How {
	case prover.After:
		m.Met = []int{1, 0}
		m.BothHold = holding(g.X) // its acquire came before Y's end
		lead(1, steps(g.Y))
		pause := rapid.IntRange(20, 200).Draw(t, "steer_pause_ms")
		x := steps(g.X)
		lead(0, append(x[:len(x)-1:len(x)-1], lease.Step{Op: lease.Sleep, Ms: pause}, x[len(x)-1]))
	case prover.During:
		m.Met = []int{0, 1}
		m.BothHold = holding(g.X) && holding(g.Y)
		var xs, ys []lease.Step
		for range 3 {
			xs, ys = append(xs, steps(g.X)...), append(ys, steps(g.Y)...)
		}
		lead(1, s.pausedFor(t, ys, "steer_y_pause_ms"))
		lead(0, s.pausedFor(t, xs, "steer_pause_ms"))
	case prover.AfterOwn:
		m.Met = []int{0}
		lead(0, append(steps(g.Y), lease.Step{Op: g.X}))
	case prover.Struck:
		m.Met = []int{0}
		var x []lease.Step
		switch g.X {
		case histories.Acquire, histories.Release:
			// An acquire is skipped while its client holds, a release
			// while it does not: each needs the other between.
			for range 4 {
				x = append(x, lease.Step{Op: histories.Acquire}, lease.Step{Op: histories.Release})
			}
		default:
			x = append(x, lease.Step{Op: histories.Acquire})
			for range 4 {
				x = append(x, lease.Step{Op: g.X})
			}
		}
		lead(0, x)
		// When one of the four is in flight, by the operations' times:
		// one of the refreshes (verifies) after the acquire, or the
		// acquire or release of one of the four cycles.
		a, r, at := s.took(histories.Acquire), s.took(histories.Release), s.StartMs
		switch g.X {
		case histories.Acquire, histories.Release:
			at += rapid.IntRange(0, 3).Draw(t, "steer_cycle") * (a + r)
			if g.X == histories.Release {
				at += a
				a = r
			}
			at += rapid.IntRange(0, a).Draw(t, "steer_at_ms")
		default:
			at += a + rapid.IntRange(0, 4*s.took(g.X)).Draw(t, "steer_at_ms")
		}
		m.StrikeAt = at
	}
	for _, k := range m.Met {
		m.Names = append(m.Names, ClientName(k))
	}
	// The other clients come later, so that the meeting's hold their
	// leases (a limit or a mutex taken by a third would skip them).
	for i := range scripts {
		if !slices.Contains(m.Met, i) {
			scripts[i] = append([]lease.Step{{Op: lease.Sleep, Ms: 12 * max(1, s.OpMs)}}, scripts[i]...)
		}
	}
	return m
}

// steps are the steps that do op: an acquire first for an operation on a
// lease, so that the client holds what it refreshes, verifies or lets go.
func steps(op string) []lease.Step {
	if holding(op) {
		return []lease.Step{{Op: histories.Acquire}, {Op: op}}
	}
	return []lease.Step{{Op: op}}
}

// pausedFor puts a pause of up to two operations' time (none if 0),
// drawn as name, before steps: two clients that start together then
// mostly meet inside an operation.
func (s Steering) pausedFor(t *rapid.T, steps []lease.Step, name string) []lease.Step {
	if ms := rapid.IntRange(0, 2*max(1, s.OpMs)).Draw(t, name); ms > 0 {
		return append([]lease.Step{{Op: lease.Sleep, Ms: ms}}, steps...)
	}
	return steps
}

// Strike puts f, the fault a goal strikes, first among a plan's drawn
// faults, leaving out the first of them when the plan already holds
// maxFaults.
func Strike[F any](nemesis []F, f F, maxFaults int) []F {
	if len(nemesis) >= maxFaults && len(nemesis) > 0 {
		nemesis = nemesis[1:]
	}
	return append([]F{f}, nemesis...)
}
