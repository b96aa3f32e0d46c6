package amqprun

import (
	"strconv"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// groundTruth is what a place that sees inside the broker offers: the
// queues each process's methods created or deleted since a time, and
// whether nothing of the process's is still on its way.
type groundTruth interface {
	effects(name string, since int64) ([]rabbitmqsim.Effect, bool)
}

func (e simPlace) effects(name string, since int64) ([]rabbitmqsim.Effect, bool) {
	return e.w.Effects(name, since)
}

// patch settles from ground truth an acquire or release that process name
// invoked with inv and saw end with an unknown outcome, the way etcd's
// robustness tests patch from the WAL: the checker then need not try every
// way it might have landed. An acquire that left a holder queue it created
// took that slot; one that left none took nothing. A release that deleted
// its holder queue released; one that did not, did not. It returns nil when
// the place cannot tell or a request of the process may still land.
func (r *runner) patch(name string, inv histories.Event) *histories.Event {
	gt, ok := r.eng.(groundTruth)
	if !ok || (inv.F != histories.Acquire && inv.F != histories.Release) {
		return nil
	}
	fx, final := gt.effects(name, inv.Time)
	if !final {
		return nil
	}
	done := &histories.Event{Process: name, F: inv.F, Lock: inv.Lock, Kind: inv.Kind, Type: histories.Fail,
		Value: &amqpcheck.Value{Reason: histories.NotApplied, Patched: true}}
	switch inv.F {
	case histories.Acquire:
		left := map[string]bool{} // holder queues created and still there
		for _, e := range fx {
			if _, ok := r.holderSlot(e.Queue); ok {
				left[e.Queue] = e.Created
			}
		}
		var taken []int
		for q, there := range left {
			if there {
				s, _ := r.holderSlot(q)
				taken = append(taken, s)
			}
		}
		switch {
		case len(taken) > 1:
			return nil // not what an acquire does: leave it to the checker
		case len(taken) == 1:
			v := &amqpcheck.Value{Patched: true}
			if r.p.Kind != histories.Mutex {
				v.Slot = histories.Int(taken[0])
			}
			done.Type, done.Value = histories.Ok, v
		}
	case histories.Release:
		arg := amqpcheck.ValueOf(&inv)
		for _, e := range fx {
			if s, ok := r.holderSlot(e.Queue); ok && !e.Created && (arg == nil || s == *arg.Slot) {
				v := &amqpcheck.Value{Patched: true}
				if arg != nil {
					v.Slot = arg.Slot
				}
				done.Type, done.Value = histories.Ok, v
				break
			}
		}
	}
	return done
}

// holderSlot parses a holder queue of the run's lock: B[k] of a semaphore,
// or the true mutex's queue (slot 0).
func (r *runner) holderSlot(q string) (int, bool) {
	if r.p.Kind == histories.Mutex {
		return 0, q == r.lock
	}
	rest, ok := strings.CutPrefix(q, r.lock+"-")
	if !ok {
		return 0, false
	}
	if rest, ok = strings.CutSuffix(rest, "-B"); !ok {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	return k, err == nil && k >= 1
}
