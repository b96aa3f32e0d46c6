package rabbitmqsim

import "math/rand/v2"

// A Decider makes every choice the simulation leaves open: which runnable
// process moves next, and how long the broker takes to notice a closed
// socket. The same sequence of answers gives the same run, byte for byte.
type Decider interface {
	// Pick returns a number in [0, n); n is at least 2.
	Pick(n int) int
}

// Seeded returns a Decider driven by a PCG generator seeded with seed.
func Seeded(seed uint64) Decider {
	return &seeded{rand.NewPCG(seed, 0x6c6f636b70726f76)}
}

type seeded struct{ src *rand.PCG }

func (s *seeded) Pick(n int) int { return int(s.src.Uint64() % uint64(n)) }

// Script returns a Decider that answers from picks in order (each reduced
// modulo n) and then from then, or with 0 (the first choice) if then is
// nil. Plans that carry their scheduling decisions replay through it.
func Script(picks []int, then Decider) Decider { return &script{picks: picks, then: then} }

type script struct {
	picks []int
	next  int
	then  Decider
}

func (s *script) Pick(n int) int {
	if s.next >= len(s.picks) {
		if s.then != nil {
			return s.then.Pick(n)
		}
		return 0
	}
	p := s.picks[s.next]
	s.next++
	if p < 0 {
		p = -p
	}
	return p % n
}
