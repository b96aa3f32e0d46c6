package amqpcheck

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
	"github.com/lockprover/lockprover/histories"
)

// The number of slots is a register that only admins write. count-exact
// checks admin operations and quiescent counts against it; persistent checks
// them against a weaker register whose value may also drop (slots vanishing
// without an admin) before any admin operation that ran alone: a history
// that fails the first but passes the second lost slots, one that fails both
// miscounts. Losses are not allowed to explain admin operations that
// overlapped each other, so admins racing without the mutex are miscounts.

// countRange is what the number of slots may be: [lo, hi].
type countRange struct{ lo, hi int }

const unbounded = math.MaxInt32

type countCall struct {
	o *op
	// loose: the relaxed register of persistent, for an operation no other
	// admin operation overlapped: it may find fewer slots than expected.
	loose bool
}

func stepCount(s countRange, c *countCall) (bool, countRange) {
	o := c.o
	in := func(v int) bool { return (c.loose || s.lo <= v) && v <= s.hi }
	if o.unknown() {
		switch {
		case o.f == histories.Create:
			return true, countRange{s.lo, max(s.hi, *o.arg.Slots)}
		case o.f == histories.Change && *o.arg.Delta > 0:
			return true, countRange{s.lo, min(unbounded, s.hi+*o.arg.Delta)}
		case o.f == histories.Change:
			return true, countRange{max(0, s.lo+*o.arg.Delta), s.hi}
		}
		return true, countRange{0, s.hi} // destroy
	}
	switch o.f {
	case histories.Create:
		// It succeeded, so the semaphore did not exist (no slots), and now
		// it has exactly n.
		if !in(0) {
			return false, s
		}
		n := *o.arg.Slots
		return true, countRange{n, n}
	case histories.Change:
		if !in(*o.res.From) {
			return false, s
		}
		return true, countRange{*o.res.To, *o.res.To}
	case histories.Destroy:
		if !in(*o.res.From) {
			return false, s
		}
		return true, countRange{0, 0}
	case histories.Count:
		if !in(*o.res.Slots) {
			return false, s
		}
		return true, countRange{*o.res.Slots, *o.res.Slots}
	}
	return true, s
}

var countModel = porcupine.Model{
	Init: func() any { return countRange{0, unbounded} },
	Step: func(s, in, _ any) (bool, any) {
		r := s.(countRange)
		ok, next := stepCount(r, in.(*countCall))
		if next == r {
			return ok, s // the same state, without boxing it again
		}
		return ok, next
	},
	Hash: func(s any) uint64 {
		r := s.(countRange)
		return uint64(r.lo)<<32 | uint64(uint32(r.hi))
	},
	DescribeOperation: func(in, _ any) string { return describeOp(in.(*countCall).o) },
	DescribeState: func(s any) string {
		r := s.(countRange)
		switch {
		case r.lo == r.hi:
			return fmt.Sprintf("%d slots", r.lo)
		case r.hi == unbounded:
			return fmt.Sprintf("at least %d slots", r.lo)
		}
		return fmt.Sprintf("%d to %d slots", r.lo, r.hi)
	},
}

// countOps are the admin operations that write the register and the
// counts that read it while no other admin operation, and no broker
// restart, was in flight.
func countOps(lh *lockHistory, relaxed bool) ([]porcupine.Operation, int) {
	var admin []*op
	for _, o := range lh.ops {
		switch o.f {
		case histories.Create, histories.Change, histories.Destroy, histories.Count:
			if o.typ != histories.Fail {
				admin = append(admin, o)
			}
		}
	}
	ops := make([]porcupine.Operation, 0, len(admin))
	calls := make([]countCall, 0, len(admin)) // the inputs, in one allocation
	judged := 0
	for _, o := range admin {
		if o.f == histories.Count {
			if o.typ != histories.Ok || !countQuiescent(lh, admin, o) {
				continue
			}
			judged++
		} else if o.typ == histories.Ok {
			judged++
		}
		loose := relaxed && alone(admin, o)
		calls = append(calls, countCall{o, loose}) // never beyond its capacity: no pointer taken moves
		ops = append(ops, porcupine.Operation{ClientId: o.client, Call: o.call, Return: o.ret, Input: &calls[len(calls)-1]})
	}
	return ops, judged
}

// alone reports whether no operation of ops but c overlaps c.
func alone(ops []*op, c *op) bool {
	for _, o := range ops {
		if o != c && o.overlaps(c.call, c.ret) {
			return false
		}
	}
	return true
}

func countQuiescent(lh *lockHistory, admin []*op, c *op) bool {
	if !alone(admin, c) {
		return false
	}
	for _, f := range lh.faults {
		if f.f == histories.RestartBroker && f.call <= c.ret && c.call <= f.end {
			return false
		}
	}
	return true
}
