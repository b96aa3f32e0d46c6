package prover

import (
	"context"
	"errors"
	"slices"
)

// A Detection is how a search fared against a mutant from seeds 1..n: on
// how many seeds its property broke, and after how many plans and seconds
// each time.
type Detection struct {
	Seeds, Caught int
	Ran           int // the seeds whose search ended (fewer once interrupted)
	// Inconclusive counts the seeds that missed only because checks ran
	// out of time.
	Inconclusive int
	Plans        []int     // per seed that caught it
	Seconds      []float64 // per seed that caught it
}

// ErrInterrupted is Detect's error when its context ended.
var ErrInterrupted = errors.New("interrupted")

// Detect proves f from seeds 1..n, each for at most budget plans,
// counting a seed as caught when property (the mutant's own) breaks.
// Shrinking is skipped: only finding counts.
func Detect(ctx context.Context, f Subject, property string, n, budget int) (Detection, error) {
	d := Detection{Seeds: n}
	for seed := 1; seed <= n; seed++ {
		c := Config{Subject: f, Properties: []string{property}}
		o, err := Search{Config: c, Seed: uint64(seed), Plans: budget, Shrink: 1, Context: ctx}.Run()
		if err != nil {
			return d, err
		}
		if o.Interrupted {
			return d, ErrInterrupted
		}
		d.Ran++
		switch {
		case o.Found != nil:
			d.Caught++
			d.Plans = append(d.Plans, o.Plans)
			d.Seconds = append(d.Seconds, o.Elapsed.Seconds())
		case o.Inconclusive > 0:
			d.Inconclusive++
		}
	}
	return d, nil
}

// Missed says whether a seed missed the mutant for another reason than
// checks running out of time.
func (d Detection) Missed() bool { return d.Seeds-d.Caught > d.Inconclusive }

// MedianPlans and MedianSeconds are the medians over the seeds that caught
// the mutant (the upper one of an even count); ok false if none did.
func (d Detection) MedianPlans() (int, bool) {
	if len(d.Plans) == 0 {
		return 0, false
	}
	s := slices.Sorted(slices.Values(d.Plans))
	return s[len(s)/2], true
}

func (d Detection) MedianSeconds() (float64, bool) {
	if len(d.Seconds) == 0 {
		return 0, false
	}
	s := slices.Sorted(slices.Values(d.Seconds))
	return s[len(s)/2], true
}
