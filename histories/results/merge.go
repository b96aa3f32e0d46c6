package results

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// A Named summary is one read from File.
type Named struct {
	File    string
	Summary *Summary
}

// Merge combines the summaries of prove's shards of one search (the same
// seed and configuration, shards 1..n of n, each once) into the summary
// one run of all their plans gives: the plans, operations and verdicts
// added up, the worst result, and of the shards' counterexamples the one
// drawn first (the lowest batch, then index), which is what a single run
// stops at. On the simulator it also checks that the shards covered the
// seed's plans exactly: no batch twice, none missing, each as large as one
// run makes it (up to the first counterexample). Any mismatch is an error
// that names the file and the field.
func Merge(in []Named) (*Summary, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("no results to merge")
	}
	if err := checkOneSearch(in); err != nil {
		return nil, err
	}
	byIndex, err := byShard(in)
	if err != nil {
		return nil, err
	}
	g := newMerger(in[0].Summary)
	count := len(byIndex) - 1
	for i := 1; i <= count; i++ {
		if err := g.add(byIndex[i], i, count); err != nil {
			return nil, err
		}
	}
	return g.finish(byIndex)
}

// checkOneSearch checks that every summary is a shard of the same search
// as the first (prove's, with the same seed, flags and number of shards)
// and that each ran, since summaries of different searches add up to
// nothing meaningful.
func checkOneSearch(in []Named) error {
	first := in[0]
	for _, n := range in {
		s := n.Summary
		if s.Verb != "prove" {
			return fmt.Errorf("%s: verb is %q: merge combines prove's shards", n.File, s.Verb)
		}
		if s.Seed != first.Summary.Seed {
			return fmt.Errorf("%s: seed %s, but %s ran seed %s: shards of one search share a seed", n.File, s.Seed, first.File, first.Summary.Seed)
		}
		if d := configDiff(first.Summary.Config, s.Config); d != "" {
			return fmt.Errorf("%s: config %s, but %s ran %s: shards of one search share their flags", n.File, d, first.File, configDiff(s.Config, first.Summary.Config))
		}
		if (s.Shard == nil) != (first.Summary.Shard == nil) || s.Shard != nil && s.Shard.Count != first.Summary.Shard.Count {
			return fmt.Errorf("%s: shard %s, but %s is shard %s", n.File, shardName(s), first.File, shardName(first.Summary))
		}
		if s.Result == Failed {
			return fmt.Errorf("%s: shard %s did not run: %s", n.File, shardName(s), s.Error)
		}
	}
	return nil
}

// byShard indexes the summaries by shard number (1..n; an unsharded
// summary is shard 1 of 1), checking that each shard appears exactly once,
// so that the merge adds them up in shard order and none is counted twice
// or left out.
func byShard(in []Named) ([]*Named, error) {
	count := 1
	if in[0].Summary.Shard != nil {
		count = in[0].Summary.Shard.Count
	}
	byIndex := make([]*Named, count+1)
	for i := range in {
		n := &in[i]
		idx := 1
		if n.Summary.Shard != nil {
			idx = n.Summary.Shard.Index
		}
		if byIndex[idx] != nil {
			return nil, fmt.Errorf("shard %d/%d appears twice: %s and %s", idx, count, byIndex[idx].File, n.File)
		}
		byIndex[idx] = n
	}
	for i := 1; i <= count; i++ {
		if byIndex[i] == nil {
			return nil, fmt.Errorf("shard %d/%d is missing: no summary of it among the results given", i, count)
		}
	}
	return byIndex, nil
}

// A merger adds shards' summaries up, one shard at a time in shard order,
// into the summary of one run of all their plans.
type merger struct {
	m      *Summary
	props  map[string]*Property     // the properties added up, by name
	order  []string                 // their names, in the order first met
	orders map[string]*Interleaving // the interleavings added up, by order
	end    time.Time                // when the last shard to finish finished
	result string                   // the worst result so far
}

// newMerger starts a merge with what every shard shares with first: the
// target, seed, configuration and the size of the search.
func newMerger(first *Summary) *merger {
	m := &Summary{Schema: Schema, Verb: "merge", Target: first.Target, Implementation: first.Implementation,
		Seed: first.Seed, Config: first.Config, RequestedPlans: first.RequestedPlans, BatchSize: first.BatchSize}
	return &merger{m: m, props: map[string]*Property{}, result: Held}
}

// add adds shard i of count, n, to the merge: its counts, batches,
// properties, counterexample, result and timings, and a line of its own
// in Shards. A batch that is not the shard's (numbers modulo count) is an
// error, as the shards would then not be of one search.
func (g *merger) add(n *Named, i, count int) error {
	m, s := g.m, n.Summary
	m.Plans += s.Plans
	m.Operations += s.Operations
	m.Verdicts += s.Verdicts
	m.InconclusivePlans += s.InconclusivePlans
	m.SteeredPlans += s.SteeredPlans
	for _, b := range s.Batches {
		if count > 1 && b.Number%count != i-1 {
			return fmt.Errorf("%s: batch %d is not shard %d/%d's (its batches are %d modulo %d)", n.File, b.Number, i, count, i-1, count)
		}
	}
	m.Batches = append(m.Batches, s.Batches...)
	g.addProperties(s.Properties)
	g.addInterleavings(s.Interleavings)
	g.addCounterexample(s)
	g.result = worse(g.result, s.Result)
	g.addTimings(s)
	sh := Shard{Index: 1, Count: 1}
	if s.Shard != nil {
		sh = *s.Shard
	}
	m.Shards = append(m.Shards, ShardRun{Shard: sh, File: n.File, Result: s.Result, Plans: s.Plans, Seconds: s.Timings.ElapsedSeconds})
	return nil
}

// addProperties adds a shard's counts to the properties' and keeps the
// first explanation met (with where it comes from), as one run would have
// only one.
func (g *merger) addProperties(ps []Property) {
	for _, p := range ps {
		q := g.props[p.Name]
		if q == nil {
			q = &Property{Name: p.Name, Counted: p.Counted}
			g.props[p.Name] = q
			g.order = append(g.order, p.Name)
		}
		q.Pass += p.Pass
		q.Fail += p.Fail
		q.Inconclusive += p.Inconclusive
		q.NotJudged += p.NotJudged
		q.Excused += p.Excused
		if q.FirstExcuse == "" {
			q.FirstExcuse = p.FirstExcuse
		}
		if q.Explanation == "" && p.Explanation != "" {
			q.Explanation, q.Where = p.Explanation, p.Where
		}
	}
}

// addInterleavings adds a shard's interleavings' plans, and the plans
// aimed at them; one that is a goal in a shard is one in the merge.
func (g *merger) addInterleavings(is []Interleaving) {
	if g.orders == nil && len(is) > 0 {
		g.orders = map[string]*Interleaving{}
	}
	for _, i := range is {
		m := g.orders[i.Order]
		if m == nil {
			m = &Interleaving{Order: i.Order}
			g.orders[i.Order] = m
		}
		m.Plans += i.Plans
		m.Aimed += i.Aimed
		m.Goal = m.Goal || i.Goal
	}
}

// addCounterexample keeps, of a shard's counterexample and the one kept so
// far, the one a single run stops at: a violation drawn first (the lowest
// batch, then index) beats any other; without violations, the first one
// met is kept. The copy kept names the shard it comes from.
func (g *merger) addCounterexample(s *Summary) {
	m := g.m
	if cx := s.Counterexample; cx != nil && s.Result == Violated {
		if m.Counterexample == nil || m.Counterexample.Inconclusive || cx.Batch < m.Counterexample.Batch || cx.Batch == m.Counterexample.Batch && cx.Index < m.Counterexample.Index {
			c := *cx
			c.Shard = s.Shard
			m.Counterexample = &c
		}
	} else if cx != nil && m.Counterexample == nil {
		c := *cx
		c.Shard = s.Shard
		m.Counterexample = &c
	}
}

// addTimings widens the merge's span of time to cover a shard's: the
// earliest start, and in g.end the latest end, from which finish works out
// the elapsed time of the shards run side by side.
func (g *merger) addTimings(s *Summary) {
	m := g.m
	if m.Timings.Started.IsZero() || s.Timings.Started.Before(m.Timings.Started) {
		m.Timings.Started = s.Timings.Started
	}
	if e := s.Timings.Started.Add(time.Duration(s.Timings.ElapsedSeconds * float64(time.Second))); e.After(g.end) {
		g.end = e
	}
}

// finish orders the merged batches and checks that none ran twice and,
// unless the run was interrupted, that they cover the search as one run
// would; then it sets the result, the properties and the timings, and
// returns the merged summary.
func (g *merger) finish(byIndex []*Named) (*Summary, error) {
	m := g.m
	sort.Slice(m.Batches, func(a, b int) bool { return m.Batches[a].Number < m.Batches[b].Number })
	for i := 1; i < len(m.Batches); i++ {
		if m.Batches[i].Number == m.Batches[i-1].Number {
			return nil, fmt.Errorf("batch %d ran twice", m.Batches[i].Number)
		}
	}
	m.Result, m.ExitCode = g.result, ExitCode(g.result)
	if g.result != Interrupted {
		if err := m.checkCoverage(byIndex); err != nil {
			return nil, err
		}
	}
	for _, name := range g.order {
		p := g.props[name]
		p.Status = propertyStatus(p)
		m.Properties = append(m.Properties, *p)
	}
	for _, i := range g.orders {
		m.Interleavings = append(m.Interleavings, *i)
	}
	SortInterleavings(m.Interleavings)
	m.Timings.ElapsedSeconds = g.end.Sub(m.Timings.Started).Seconds()
	if m.Timings.ElapsedSeconds > 0 {
		m.Timings.PlansPerSecond = float64(m.Plans) / m.Timings.ElapsedSeconds
	}
	return m, nil
}

// checkCoverage checks, where batches have a fixed size (the simulator)
// and a number of plans was asked for, that the batches run are those of
// one run: all of them, each whole, except that nothing past the first
// counterexample needs to have run.
func (m *Summary) checkCoverage(byIndex []*Named) error {
	size, total := m.BatchSize, m.RequestedPlans
	if size <= 0 || total <= 0 {
		return nil
	}
	ran := map[int]int{}
	for _, b := range m.Batches {
		ran[b.Number] = b.Plans
	}
	owner := func(b int) string {
		n := byIndex[b%(len(byIndex)-1)+1]
		return fmt.Sprintf("shard %s (%s)", shardName(n.Summary), n.File)
	}
	last := (total + size - 1) / size // batches 0..last-1
	for b := 0; b < last; b++ {
		want := min(size, total-b*size)
		if cx := m.Counterexample; cx != nil && m.Result == Violated {
			switch {
			case b > cx.Batch:
				continue // a single run stops at the counterexample
			case b == cx.Batch:
				want = cx.Index + 1
			}
		}
		got, ok := ran[b]
		switch {
		case !ok:
			return fmt.Errorf("batch %d (plans %d to %d of seed %s) is missing: %s did not run it", b, b*size, b*size+want-1, m.Seed, owner(b))
		case got < want || (got > want && (m.Counterexample == nil || b != m.Counterexample.Batch)):
			return fmt.Errorf("batch %d ran %d plans in %s, want %d of %d", b, got, owner(b), want, total)
		}
	}
	for _, b := range m.Batches {
		if b.Number >= last {
			return fmt.Errorf("batch %d is past the %d plans asked for (%s)", b.Number, total, owner(b.Number))
		}
	}
	return nil
}

// worse is the result of two runs together: a violation anywhere is one;
// then an interrupt (the plans were not all run), then inconclusive.
func worse(a, b string) string {
	rank := map[string]int{Held: 0, Inconclusive: 1, Interrupted: 2, Violated: 3, Failed: 4}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// propertyStatus is a property's status over a run, from its counts.
func propertyStatus(p *Property) string {
	switch {
	case p.Fail > 0:
		return Fail
	case p.Inconclusive > 0:
		return Undecided
	case p.Pass > 0:
		return Pass
	}
	return NotJudged
}

// SetStatus sets p.Status from its counts: Fail if any failed, else
// Undecided if any was inconclusive, else Pass if any passed, else
// NotJudged.
func (p *Property) SetStatus() { p.Status = propertyStatus(p) }

func shardName(s *Summary) string {
	if s.Shard == nil {
		return "none (not sharded)"
	}
	return s.Shard.String()
}

// configDiff names the first flag on which b differs from a, with b's
// value: `runs=2000`; "" if they agree.
func configDiff(a, b map[string]string) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		if a[k] != b[k] {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names[:1] {
		v, ok := b[k]
		if !ok {
			v = "(not set)"
		}
		parts = append(parts, fmt.Sprintf("--%s=%s", k, v))
	}
	return strings.Join(parts, ", ")
}

// SortInterleavings orders interleavings most often reached first, then
// by name.
func SortInterleavings(is []Interleaving) {
	sort.Slice(is, func(a, b int) bool {
		if is[a].Plans != is[b].Plans {
			return is[a].Plans > is[b].Plans
		}
		return is[a].Order < is[b].Order
	})
}
