// Package bench measures what a family's operations cost on a real
// backend beside their floor: the same requests sent raw, with no lock
// library. A family's bench (`lockprover bench`) runs its operations and
// floors one at a time through a counting proxy, in a fresh random order
// each iteration, and reports latency percentiles and what each operation
// sent; this package keeps the series and the statistics.
package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config is what every family's bench takes.
type Config struct {
	N, Warmup int       // measured iterations, and unmeasured ones before them
	Seed      uint64    // seed of the per-iteration order
	Log       io.Writer // hears each phase begin; nil for nothing
}

// A Series is the measurements of one operation: its latency and what it
// sent (AMQP methods, SQL statements, ...) in each measured iteration.
type Series struct {
	Lat  []time.Duration
	Sent []map[string]int
}

// A Run is one bench: the series so far, and whether the iteration under
// way is measured.
type Run struct {
	Config
	Series map[string]*Series
	rnd    *rand.Rand
	record bool
}

// New starts a run.
func New(c Config) *Run {
	return &Run{Config: c, Series: map[string]*Series{}, rnd: rand.New(rand.NewPCG(c.Seed, 0))}
}

// Time runs f as one operation of series key: its latency and, from sent
// (read right after it), what it sent; recorded only in a measured
// iteration.
func (r *Run) Time(key string, f func() error, sent func() map[string]int) error {
	t0 := time.Now()
	err := f()
	d := time.Since(t0)
	what := sent()
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if r.record {
		s := r.Series[key]
		if s == nil {
			s = &Series{}
			r.Series[key] = s
		}
		s.Lat = append(s.Lat, d)
		s.Sent = append(s.Sent, what)
	}
	return nil
}

// Loop runs Warmup+N iterations of steps, in a fresh random order each
// iteration so that neither the library nor the floor always runs first;
// it stops at ctx's end.
func (r *Run) Loop(ctx context.Context, phase string, steps ...func() error) error {
	if r.Log != nil {
		fmt.Fprintf(r.Log, "bench: %s (%d + %d iterations)\n", phase, r.Warmup, r.N)
	}
	defer func() { r.record = false }()
	for i := range r.Warmup + r.N {
		r.record = i >= r.Warmup
		for _, j := range r.rnd.Perm(len(steps)) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := steps[j](); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stats summarises a series.
type Stats struct {
	P50, P99, Mean time.Duration
	Sent           string  // what it sent per operation, e.g. "4 (3 basic.publish, 1 queue.declare)"
	Total          float64 // requests sent per operation, on average
	OK             bool    // the series has measurements
}

// Stats are the latency percentiles (nearest rank) of series key, and
// what it sent per operation.
func (r *Run) Stats(key string) Stats { return StatsOf(r.Series[key]) }

// StatsOf summarises s.
func StatsOf(s *Series) Stats {
	if s == nil || len(s.Lat) == 0 {
		return Stats{}
	}
	lat := slices.Clone(s.Lat)
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	rank := func(p float64) time.Duration { // nearest rank
		i := int(float64(len(lat))*p+0.999999) - 1
		return lat[max(0, min(i, len(lat)-1))]
	}
	st := Stats{P50: rank(0.50), P99: rank(0.99), Mean: sum / time.Duration(len(lat)), OK: true}
	st.Sent, st.Total = PerOp(s.Sent)
	return st
}

// PerOp formats what was sent per operation: exact counts when every
// iteration sent the same, means marked "varies" otherwise.
func PerOp(sent []map[string]int) (string, float64) {
	totals := map[string]int{}
	uniform := true
	for i, m := range sent {
		for name, k := range m {
			totals[name] += k
		}
		if i > 0 && !mapsEqual(m, sent[0]) {
			uniform = false
		}
	}
	names := make([]string, 0, len(totals))
	all := 0
	for name, k := range totals {
		names = append(names, name)
		all += k
	}
	sort.Slice(names, func(i, j int) bool {
		if totals[names[i]] != totals[names[j]] {
			return totals[names[i]] > totals[names[j]]
		}
		return names[i] < names[j]
	})
	n := float64(len(sent))
	num := func(k int) string {
		if uniform {
			return fmt.Sprint(k / len(sent))
		}
		return fmt.Sprintf("%.2f", float64(k)/n)
	}
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = num(totals[name]) + " " + name
	}
	s := fmt.Sprintf("%s (%s)", num(all), strings.Join(parts, ", "))
	if !uniform {
		s += ", varies"
	}
	return s, float64(all) / n
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// US says a duration in whole microseconds.
func US(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }

// Ratio is a/b, 0 when b is not positive.
func Ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Beyond names what an operation's series sent per operation beyond its
// floor's, by name ("+1 GET /v1/kv?recurse"; "-1 X" for what it sent
// less of), from the mean counts: "none" when they match, so that a
// reference that needs more requests than the floor says which.
func Beyond(s, floor *Series) string {
	mean := func(s *Series) map[string]float64 {
		m := map[string]float64{}
		if s == nil || len(s.Sent) == 0 {
			return m
		}
		for _, sent := range s.Sent {
			for name, k := range sent {
				m[name] += float64(k)
			}
		}
		for name := range m {
			m[name] /= float64(len(s.Sent))
		}
		return m
	}
	a, b := mean(s), mean(floor)
	names := map[string]bool{}
	for name := range a {
		names[name] = true
	}
	for name := range b {
		names[name] = true
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		d := a[name] - b[name]
		if math.Abs(d) < 0.005 {
			continue
		}
		num := strconv.FormatFloat(d, 'f', 2, 64)
		if math.Abs(d-math.Round(d)) < 0.005 {
			num = strconv.FormatFloat(math.Round(d), 'f', 0, 64)
		}
		if d > 0 {
			num = "+" + num
		}
		parts = append(parts, num+" "+name)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
