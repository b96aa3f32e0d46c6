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
func goals(f Family) []Interleaving {
	if s, ok := f.(Steerable); ok {
		return s.Goals()
	}
	return nil
}

// aim says which goal plan k is drawn toward, from what the plans before
// it reached and were aimed at: every other plan (odd k) aims at the goal
// reached by the fewest, of those the fewest aimed at, the first in the
// family's order; the others (and every plan of a family with no goals)
// are drawn freely (nil), as without steering, so that what random draws
// find they still find.
func aim(goals []Interleaving, reached, aimed map[Interleaving]int, k int) *Interleaving {
	if len(goals) == 0 || k%2 == 0 {
		return nil
	}
	// Each goal's counts are looked up once, the best's kept: the keys
	// are strings, and this runs for every other plan over every goal.
	best, bestReached, bestAimed := 0, reached[goals[0]], aimed[goals[0]]
	for i, g := range goals[1:] {
		r := reached[g]
		if r > bestReached {
			continue
		}
		if a := aimed[g]; r < bestReached || a < bestAimed {
			best, bestReached, bestAimed = i+1, r, a
		}
	}
	g := goals[best]
	return &g
}

// draw draws a plan, toward goal if there is one.
func (c Config) draw(t *rapid.T, goal *Interleaving) Plan {
	if s, ok := c.Family.(Steerable); ok && goal != nil {
		return s.DrawToward(t, *goal)
	}
	return c.Family.Draw(t)
}
