package amqpcheck

// An arena hands out pointers to values of T allocated a chunk at a time:
// a check builds many small objects (operations, porcupine inputs) that
// live and die together, and one allocation for a chunk of them costs
// less than one each. A chunk is never reallocated once a pointer into it
// is out: a full arena starts a new one. The zero arena is ready to use.
type arena[T any] struct{ chunk []T }

// new returns a pointer to a copy of v.
func (a *arena[T]) new(v T) *T {
	if len(a.chunk) == cap(a.chunk) {
		a.chunk = make([]T, 0, min(max(8, 2*cap(a.chunk)), 256))
	}
	a.chunk = append(a.chunk, v)
	return &a.chunk[len(a.chunk)-1]
}

// slotCalls makes the inputs of slot operations, each a slotCall and the
// slotOp it points to in one arena.
type slotCalls struct{ a arena[slotCallOf] }

type slotCallOf struct {
	call slotCall
	op   slotOp
}

// new returns the input of so invoked at call.
func (s *slotCalls) new(so slotOp, call int64) *slotCall {
	b := s.a.new(slotCallOf{op: so})
	b.call = slotCall{&b.op, call}
	return &b.call
}
