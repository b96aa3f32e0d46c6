package faultnet

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Traced is one line of a proxy's trace: what it saw, and when.
type Traced struct {
	At   time.Time
	What string
}

// A Tracer keeps a proxy's trace, for a counterexample's reader (which
// side did what, when); its zero value is ready, and it is safe for
// concurrent use.
type Tracer struct {
	mu    sync.Mutex
	lines []Traced
}

// Note adds a line, stamped now.
func (t *Tracer) Note(format string, args ...any) {
	l := Traced{At: time.Now(), What: fmt.Sprintf(format, args...)}
	t.mu.Lock()
	t.lines = append(t.lines, l)
	t.mu.Unlock()
}

// Trace is every line noted, in order.
func (t *Tracer) Trace() []Traced {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lines)
}

// A NamedTrace is one proxy's trace under the name a run gives it
// ("c1", "c1->redis2").
type NamedTrace struct {
	Name  string
	Lines []Traced
}

// Merge is the lines of several proxies' traces in time order, each
// stamped with its time since start and its proxy's name: a run's trace
// (model.Evidence.Trace).
func Merge(start time.Time, traces []NamedTrace) []string {
	type line struct {
		at   time.Duration
		text string
	}
	var lines []line
	for _, nt := range traces {
		for _, t := range nt.Lines {
			at := t.At.Sub(start)
			lines = append(lines, line{at, fmt.Sprintf("%9.4fs %s: %s", at.Seconds(), nt.Name, t.What)})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.at, b.at) })
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}
