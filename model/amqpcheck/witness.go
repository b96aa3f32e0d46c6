package amqpcheck

import (
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// witnessed reports whether it finds, for every partition, an order of its
// operations that m accepts and that respects real time: a linearization.
// When it does, the partitions are linearizable and porcupine would say
// Ok; so linearize asks porcupine only when it does not (a violation, or
// a history its short search could not order), and never allocates
// porcupine's entries, linked lists and caches for the histories that
// hold, which are nearly all of them.
//
// It is held to the check's time budget as porcupine is: past deadline
// (unless zero) it gives up, and porcupine, given its own budget, decides
// (a check that runs out of time is verdict.Inconclusive, never verdict.Pass). Partitions
// of more than witnessMax operations go to porcupine at once: the search
// scans every operation at every step, which is cheap only for short ones.
func witnessed(m porcupine.Model, list [][]porcupine.Operation, deadline time.Time) bool {
	s := searches.Get().(*witnessSearch)
	defer func() {
		clear(s.states[:cap(s.states)]) // no state outlives the check
		searches.Put(s)
	}()
	s.deadline, s.steps = deadline, 0
	for _, ops := range list {
		if len(ops) > witnessMax || !s.find(m, ops) {
			return false
		}
	}
	return true
}

// searches keeps witnessSearches, buffers and all, from one check to the
// next.
var searches = sync.Pool{New: func() any { return new(witnessSearch) }}

// witnessMax is the longest partition witnessed searches.
const witnessMax = 256

// witnessSearch is a depth-first search for a linearization of one
// partition, its buffers used again from one partition to the next.
type witnessSearch struct {
	order  []int  // the operations by return time, then call time, then index
	placed []bool // placed[i]: operation i is in the order found so far
	seq    []int  // the operations placed, in order
	states []any  // states[d]: m's state after the first d operations of seq
	next   []int  // next[d]: where in order the search at depth d goes on
	budget int    // model steps left
	// deadline, if not zero, ends the search (looked at every
	// deadlineEvery steps).
	deadline time.Time
	steps    int
}

const deadlineEvery = 64

// find reports whether it finds a linearization of ops under m within a
// budget of model steps proportional to len(ops). It defines real time as
// porcupine does (its entries sort by time, a call before a return at the
// same time): an operation must come before another exactly when it
// returned strictly before the other was called. So an operation may go
// next exactly when it was called no later than the earliest return among
// the operations not yet placed. Operations that must return soonest are
// tried first. false means only that none was found.
func (s *witnessSearch) find(m porcupine.Model, ops []porcupine.Operation) bool {
	n := len(ops)
	s.order = s.order[:0]
	for i := range ops {
		if ops[i].Return < ops[i].Call {
			return false // not a history porcupine orders as we do: leave it to porcupine
		}
		s.order = append(s.order, i)
	}
	slices.SortStableFunc(s.order, func(a, b int) int {
		oa, ob := &ops[a], &ops[b]
		switch {
		case oa.Return != ob.Return:
			return cmpInt64(oa.Return, ob.Return)
		default:
			return cmpInt64(oa.Call, ob.Call)
		}
	})
	s.placed = slices.Grow(s.placed[:0], n)[:n]
	clear(s.placed)
	s.seq = s.seq[:0]
	s.states = append(s.states[:0], m.Init())
	s.next = append(s.next[:0], 0)
	s.budget = 4*n + 16
	for len(s.seq) < n {
		if !s.advance(m, ops) && !s.backtrack() {
			return false
		}
	}
	return true
}

// advance places the next operation at the current depth that may go next
// and that m accepts, and reports whether there was one.
func (s *witnessSearch) advance(m porcupine.Model, ops []porcupine.Operation) bool {
	d := len(s.seq)
	earliest := int64(never)
	for _, i := range s.order {
		if !s.placed[i] {
			earliest = ops[i].Return // order is by return time
			break
		}
	}
	for k := s.next[d]; k < len(s.order); k++ {
		i := s.order[k]
		if s.placed[i] || ops[i].Call > earliest {
			continue
		}
		if s.budget--; s.budget < 0 || s.late() {
			s.budget = -1
			return false
		}
		ok, state := m.Step(s.states[d], ops[i].Input, ops[i].Output)
		if !ok {
			continue
		}
		s.next[d] = k + 1
		s.placed[i] = true
		s.seq = append(s.seq, i)
		s.states = append(s.states, state)
		s.next = append(s.next, 0)
		return true
	}
	return false
}

// backtrack takes back the last operation placed, so that the search goes
// on with the next candidate in its place; it reports false when there is
// none to take back (the search is over) or the budget is spent.
func (s *witnessSearch) backtrack() bool {
	if len(s.seq) == 0 || s.budget < 0 {
		return false
	}
	last := len(s.seq) - 1
	s.placed[s.seq[last]] = false
	s.seq = s.seq[:last]
	s.states = s.states[:last+1]
	s.next = s.next[:last+1]
	return true
}

// late reports, every deadlineEvery calls (the first included), whether
// the deadline has passed.
func (s *witnessSearch) late() bool {
	s.steps++
	if s.deadline.IsZero() || (s.steps-1)%deadlineEvery != 0 {
		return false
	}
	return !time.Now().Before(s.deadline)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
