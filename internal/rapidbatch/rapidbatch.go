// Package rapidbatch runs rapid properties outside a test's own rapid.Check
// loop: in batches of a chosen size, each seeded from a base seed, with
// failures kept quiet (the caller records what failed) and no fail files.
// rapid's settings are process-wide flags, so one session runs at a time;
// Case needs none, and draws beside one.
package rapidbatch

import (
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var mu sync.Mutex

// flags guards rapid's flags from being changed (by a session, with set)
// while Case draws: rapid's Example reads the seed flag (and discards it)
// even when given a seed, and a search's workers draw while another search
// holds a session.
var flags sync.RWMutex

// set sets one of rapid's flags.
func set(name, v string) error {
	flags.Lock()
	defer flags.Unlock()
	return flag.Set(name, v)
}

// Begin starts a session: it waits for any other to end, then sets rapid's
// flags (no fail file, shrink for at most shrink). The returned end restores
// them. Outside go test it first registers the testing flags and parses the
// global flag set, which rapid's flags and testing.Short need.
func Begin(shrink time.Duration) (end func(), err error) {
	mu.Lock()
	if !flag.Parsed() {
		testing.Init()
		flag.CommandLine.Parse(nil)
	}
	old := map[string]string{}
	restore := func() {
		for name, v := range old {
			set(name, v)
		}
		mu.Unlock()
	}
	for name, v := range map[string]string{"rapid.nofailfile": "true", "rapid.shrinktime": shrink.String(), "rapid.checks": "1", "rapid.seed": "1"} {
		f := flag.Lookup(name)
		if f == nil {
			restore()
			return nil, fmt.Errorf("rapid has no flag %s: call testing.Init and flag.Parse first", name)
		}
		old[name] = f.Value.String()
		if err := set(name, v); err != nil {
			restore()
			return nil, err
		}
	}
	return restore, nil
}

// Batch runs prop on n drawn cases, batch b of the base seed, and reports
// whether it failed (rapid has then shrunk the failure). Under go test
// -short rapid runs a fifth of its checks; Batch makes up for it, so that n
// cases run either way.
func Batch(seed uint64, b, n int, prop func(*rapid.T)) (failed bool) {
	if testing.Short() {
		n *= 5
	}
	set("rapid.checks", fmt.Sprint(n))
	set("rapid.seed", fmt.Sprint(mix(seed, uint64(b))))
	t := &quietTB{}
	rapid.Check(t, prop)
	return t.failed
}

// Shrink runs prop on case i of batch b of the base seed alone, as
// Batch would draw it, and if it fails lets rapid shrink it; it reports
// whether it failed. Case and Shrink together find and shrink what Batch
// finds and shrinks, without running the cases before i again.
func Shrink(seed uint64, b, i int, prop func(*rapid.T)) (failed bool) {
	n := 1
	if testing.Short() {
		n = 5 // rapid runs a fifth of its checks under -short
	}
	set("rapid.checks", fmt.Sprint(n))
	set("rapid.seed", fmt.Sprint(caseSeed(seed, b, i)))
	t := &quietTB{}
	rapid.Check(t, prop)
	return t.failed
}

// caseSeed is the seed rapid's check loop starts case i of batch b from:
// it adds the number of the case to the seed before each case, so case i
// starts from the batch's seed plus 0+1+...+i.
func caseSeed(seed uint64, b, i int) uint64 {
	return mix(seed, uint64(b)) + uint64(i)*uint64(i+1)/2
}

// Case draws case i (from 0) of batch b of the base seed with draw, as
// Batch runs it: the same bits, so the same value. It needs no session and
// is safe to call from many goroutines at once, and while another
// goroutine holds a session, so that a batch's cases can be drawn and run
// in parallel, and searches run beside each other. ok is false when rapid
// rejected the draw (invalid data: t.Skip, a filter or an assumption that
// failed), where Batch would have moved on to the next seed: only Batch
// can say then which cases the batch runs.
func Case[V any](seed uint64, b, i int, draw func(*rapid.T) V) (v V, ok bool) {
	tries := 0
	g := rapid.Custom(func(t *rapid.T) V {
		tries++ // rapid calls again what it rejected
		return draw(t)
	})
	flags.RLock()
	defer func() {
		flags.RUnlock()
		if r := recover(); r != nil {
			ok = false // rapid gave up after many rejections
		}
	}()
	v = g.Example(int(caseSeed(seed, b, i)))
	return v, tries == 1
}

// Cases calls check on the cases Batch would run from seed in batches of
// size (the last one cut short), n cases in all, in that order, drawing
// each with Case, until check returns true; it returns where it stopped
// (batch b, case i) and whether check stopped it. Like Case it needs no
// session, so that several searches can run at once, and only the
// shrinking of what one finds (Shrink, in a session) waits for the
// others. A draw rapid rejects is an error: Case cannot say then which
// cases Batch runs.
func Cases[V any](seed uint64, n, size int, draw func(*rapid.T) V, check func(V) bool) (b, i int, stopped bool, err error) {
	if size <= 0 {
		return 0, 0, false, fmt.Errorf("batches of %d cases", size)
	}
	for k := range n {
		b, i = k/size, k%size
		v, ok := Case(seed, b, i, draw)
		if !ok {
			return b, i, false, fmt.Errorf("rapid rejected the draw of case %d of batch %d (seed %d)", i, b, seed)
		}
		if check(v) {
			return b, i, true, nil
		}
	}
	return b, i, false, nil
}

// ShrinkAlone is Shrink in a session of its own (which waits for any
// other to end), rapid shrinking for at most shrink: for a search that
// found case i of batch b with Cases, without a session.
func ShrinkAlone(seed uint64, b, i int, shrink time.Duration, prop func(*rapid.T)) (failed bool, err error) {
	end, err := Begin(shrink)
	if err != nil {
		return false, err
	}
	defer end()
	return Shrink(seed, b, i, prop), nil
}

// mix derives batch seeds from a base seed (splitmix64); never zero, which
// rapid would take for "random".
func mix(seed, b uint64) uint64 {
	z := seed + (b+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	if z == 0 {
		z = 1
	}
	return z
}

// quietTB is the rapid.TB of a batch: it keeps rapid's failure to itself.
type quietTB struct{ failed bool }

func (*quietTB) Helper()                 {}
func (*quietTB) Name() string            { return "lockprover" }
func (*quietTB) Logf(string, ...any)     {}
func (*quietTB) Log(...any)              {}
func (*quietTB) Skipf(string, ...any)    {}
func (*quietTB) Skip(...any)             {}
func (*quietTB) SkipNow()                {}
func (t *quietTB) Errorf(string, ...any) { t.failed = true }
func (t *quietTB) Error(...any)          { t.failed = true }
func (t *quietTB) Fatalf(string, ...any) { t.failed = true }
func (t *quietTB) Fatal(...any)          { t.failed = true }
func (t *quietTB) FailNow()              { t.failed = true }
func (t *quietTB) Fail()                 { t.failed = true }
func (t *quietTB) Failed() bool          { return t.failed }
