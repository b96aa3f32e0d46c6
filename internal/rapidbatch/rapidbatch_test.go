package rapidbatch

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func draws(t *testing.T, seed uint64, b, n int) []int {
	var got []int
	if Batch(seed, b, n, func(rt *rapid.T) { got = append(got, rapid.IntRange(0, 1<<30).Draw(rt, "x")) }) {
		t.Fatal("a property that cannot fail failed")
	}
	return got
}

// A batch runs n cases, even under -short, and the same seed and batch
// number draw the same cases.
func TestBatch(t *testing.T) {
	end, err := Begin(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	a, again, next := draws(t, 7, 0, 20), draws(t, 7, 0, 20), draws(t, 7, 1, 20)
	if len(a) != 20 {
		t.Fatalf("ran %d cases, want 20", len(a))
	}
	if !slices.Equal(a, again) {
		t.Errorf("same seed and batch, different draws:\n%v\n%v", a, again)
	}
	if slices.Equal(a, next) {
		t.Errorf("batches 0 and 1 drew the same cases: %v", a)
	}
	last := -1
	failed := Batch(7, 0, 100, func(rt *rapid.T) {
		if x := rapid.IntRange(0, 1000).Draw(rt, "x"); x >= 10 {
			last = x
			rt.Fatalf("%d", x)
		}
	})
	if !failed || last != 10 {
		t.Errorf("failed %v, last failing case %d: want a failure shrunk to 10", failed, last)
	}
}

// Case draws what Batch draws, case by case, for a generator of some
// shape (nested, sliced, sampled, one of several).
func TestCase(t *testing.T) {
	type plan struct {
		N     int
		Steps []string
		Pick  uint64
	}
	g := rapid.Custom(func(t *rapid.T) plan {
		p := plan{N: rapid.IntRange(1, 3).Draw(t, "n")}
		step := rapid.OneOf(rapid.Just("a"), rapid.SampledFrom([]string{"b", "c", "d"}),
			rapid.Custom(func(t *rapid.T) string { return fmt.Sprint(rapid.IntRange(0, 99).Draw(t, "ms")) }))
		p.Steps = rapid.SliceOfN(step, 0, 12).Draw(t, "steps")
		p.Pick = rapid.Uint64().Draw(t, "pick")
		return p
	})
	end, err := Begin(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var want []plan
	Batch(11, 3, 200, func(rt *rapid.T) { want = append(want, g.Draw(rt, "plan")) })
	end()
	for i, w := range want {
		got, ok := Case(11, 3, i, func(t *rapid.T) plan { return g.Draw(t, "plan") })
		if !ok || !reflect.DeepEqual(got, w) {
			t.Fatalf("case %d: Case drew %+v (ok %v), Batch drew %+v", i, got, ok, w)
		}
	}
	if got, _ := Case(11, 4, 0, func(t *rapid.T) plan { return g.Draw(t, "plan") }); reflect.DeepEqual(got, want[0]) {
		t.Errorf("batches 3 and 4 begin with the same case")
	}
	// A rejected draw says so: one rapid gives up on, and one it draws
	// again.
	if _, ok := Case(11, 0, 0, func(t *rapid.T) int {
		return rapid.IntRange(0, 9).Filter(func(x int) bool { return x > 100 }).Draw(t, "x")
	}); ok {
		t.Errorf("a draw rapid must give up on was ok")
	}
	skipped := 0
	for i := 0; i < 20; i++ {
		if _, ok := Case(11, 0, i, func(t *rapid.T) int {
			x := rapid.IntRange(0, 9).Draw(t, "x")
			if x%2 == 0 {
				t.Skip("even")
			}
			return x
		}); !ok {
			skipped++
		}
	}
	if skipped == 0 || skipped == 20 {
		t.Errorf("%d of 20 draws that skip even numbers were rejected", skipped)
	}
}

// Shrink starts from the case Case drew and shrinks it as Batch does.
func TestShrink(t *testing.T) {
	end, err := Begin(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	g := rapid.IntRange(0, 1000)
	var first []int
	Batch(5, 2, 40, func(rt *rapid.T) { first = append(first, g.Draw(rt, "x")) })
	i := slices.IndexFunc(first, func(x int) bool { return x >= 10 })
	if i < 0 {
		t.Fatal("no case of at least 10 in the batch")
	}
	var seen []int
	failed := Shrink(5, 2, i, func(rt *rapid.T) {
		x := g.Draw(rt, "x")
		seen = append(seen, x)
		if x >= 10 {
			rt.Fatalf("%d", x)
		}
	})
	if !failed || seen[0] != first[i] || seen[len(seen)-1] != 10 {
		t.Errorf("failed %v, cases %v: want case %d (%d) first, shrunk to 10 last", failed, seen, i, first[i])
	}
}

// Cases checks what Batch would run, in its order, without a session;
// it stops where check says and names the case; a rejected draw is an
// error.
func TestCases(t *testing.T) {
	end, err := Begin(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := append(draws(t, 9, 0, 4), draws(t, 9, 1, 4)...)
	want = append(want, draws(t, 9, 2, 2)...)
	end()
	x := func(rt *rapid.T) int { return rapid.IntRange(0, 1<<30).Draw(rt, "x") }
	var got []int
	b, i, stopped, err := Cases(9, 10, 4, x, func(v int) bool { got = append(got, v); return false })
	if err != nil || stopped || b != 2 || i != 1 || !slices.Equal(got, want) {
		t.Errorf("Cases = %d, %d, %v, %v, checked %v; want 2, 1, false, nil, checked %v", b, i, stopped, err, got, want)
	}
	got = nil
	b, i, stopped, err = Cases(9, 10, 4, x, func(v int) bool { got = append(got, v); return v == want[5] })
	if err != nil || !stopped || b != 1 || i != 1 || !slices.Equal(got, want[:6]) {
		t.Errorf("stopped at the sixth: Cases = %d, %d, %v, %v, checked %v", b, i, stopped, err, got)
	}
	if _, _, _, err := Cases(9, 10, 0, x, func(int) bool { return false }); err == nil {
		t.Error("batches of 0 cases: no error")
	}
	reject := func(rt *rapid.T) int {
		v := x(rt)
		if v%2 == 1 {
			rt.Skip("odd")
		}
		return v
	}
	got = nil
	_, _, stopped, err = Cases(9, 10, 4, reject, func(v int) bool { got = append(got, v); return false })
	if err == nil || stopped || !strings.Contains(err.Error(), "rejected") {
		t.Errorf("a rejected draw: stopped %v, err %v, checked %v", stopped, err, got)
	}
}

// Case draws the same while a session changes rapid's flags, whose seed
// rapid's Example reads: the flags are a session's, not Case's (and under
// go test -race, Case may run beside a session).
func TestCaseBesideASession(t *testing.T) {
	draw := func(t *rapid.T) int { return rapid.IntRange(0, 1<<30).Draw(t, "x") }
	var want []int
	for i := 0; i < 200; i++ {
		v, _ := Case(3, 1, i, draw)
		want = append(want, v)
	}
	done := make(chan []int)
	go func() {
		var got []int
		for i := range want {
			v, _ := Case(3, 1, i, draw)
			got = append(got, v)
		}
		done <- got
	}()
	for b := 0; b < 20; b++ {
		end, err := Begin(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		Batch(uint64(b), b, 10, func(rt *rapid.T) { draw(rt) })
		end()
	}
	if got := <-done; !slices.Equal(got, want) {
		t.Errorf("Case drew differently beside a session:\n%v\n%v", got, want)
	}
}

// ShrinkAlone shrinks what Cases found, from that case, in a session of
// its own.
func TestShrinkAlone(t *testing.T) {
	g := func(rt *rapid.T) int { return rapid.IntRange(0, 1000).Draw(rt, "x") }
	var found int
	b, i, stopped, err := Cases(5, 80, 40, g, func(x int) bool { found = x; return x >= 10 })
	if err != nil || !stopped {
		t.Fatalf("Cases: stopped %v, %v", stopped, err)
	}
	var seen []int
	failed, err := ShrinkAlone(5, b, i, time.Second, func(rt *rapid.T) {
		x := g(rt)
		seen = append(seen, x)
		if x >= 10 {
			rt.Fatalf("%d", x)
		}
	})
	if err != nil || !failed || seen[0] != found || seen[len(seen)-1] != 10 {
		t.Errorf("failed %v, %v, cases %v: want %d first, shrunk to 10 last", failed, err, seen, found)
	}
}
