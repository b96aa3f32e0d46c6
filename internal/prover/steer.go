package prover

import "pgregory.net/rapid"

// Steerable is a family whose draws can lean toward an interleaving, so
// that a search reaches by design what random plans reach rarely: a
// search counts the interleavings its plans reach and draws every other
// plan toward the goal reached least so far (see Search). Check, under
// rapid's own loop, draws every plan freely.
type Steerable interface {
	// Goals are the interleavings the family's plans can reach and
	// DrawToward can aim at, the most wanted first: a search aims at them
	// in this order while they are reached as often, and reports those no
	// plan reached.
	Goals() []Interleaving
	// DrawToward draws a plan, as Draw does, that leans toward g: one
	// that mostly reaches it, on the simulator and on a real server. It
	// draws with rapid too, so that a failing plan shrinks.
	DrawToward(t *rapid.T, g Interleaving) Plan
}

// goals are f's steering goals, nil if it cannot be steered.
func goals(f Subject) []Interleaving {
	if s, ok := f.(Steerable); ok {
		return s.Goals()
	}
	return nil
}

// aim says which goal plan k is drawn toward, from what the plans before
// it reached and were aimed at (reached and aimed count them, goal by
// goal, in goals' order): every other plan (odd k) aims at the goal
// reached by the fewest, of those the fewest aimed at, the first in the
// family's order; the others (and every plan of a family with no goals)
// are drawn freely (nil), as without steering, so that what random draws
// find they still find.
func aim(goals []Interleaving, reached, aimed []int, k int) *Interleaving {
	if len(goals) == 0 || k%2 == 0 {
		return nil
	}
	best, bestReached, bestAimed := 0, reached[0], aimed[0]
	for i := 1; i < len(goals); i++ {
		r := reached[i]
		if r > bestReached {
			continue
		}
		if a := aimed[i]; r < bestReached || a < bestAimed {
			best, bestReached, bestAimed = i, r, a
		}
	}
	g := goals[best]
	return &g
}

// aimFrom is aim with the counts in maps (a real target's search, where a
// plan takes far longer than looking its goals up).
func aimFrom(goals []Interleaving, reached, aimed map[Interleaving]int, k int) *Interleaving {
	if len(goals) == 0 || k%2 == 0 {
		return nil
	}
	r, a := make([]int, len(goals)), make([]int, len(goals))
	for i, g := range goals {
		r[i], a[i] = reached[g], aimed[g]
	}
	return aim(goals, r, a, k)
}

// steering is a search's goals as a tally counts them: by their places
// in goals, so that aim, every other plan, reads two slices instead of
// looking each goal up in two maps keyed by its strings.
type steering struct {
	goals  []Interleaving
	places map[Interleaving][]int // each goal's places in goals (one, unless a family lists a goal twice)
}

// newSteering numbers goals; nil for none.
func newSteering(goals []Interleaving) *steering {
	if len(goals) == 0 {
		return nil
	}
	s := &steering{goals: goals, places: make(map[Interleaving][]int, len(goals))}
	for i, g := range goals {
		s.places[g] = append(s.places[g], i)
	}
	return s
}

// draw draws a plan, toward goal if there is one.
func (c Config) draw(t *rapid.T, goal *Interleaving) Plan {
	if s, ok := c.Subject.(Steerable); ok && goal != nil {
		return s.DrawToward(t, *goal)
	}
	return c.Subject.Draw(t)
}
