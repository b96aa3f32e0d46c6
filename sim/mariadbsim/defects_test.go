package mariadbsim

import (
	"errors"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/dbsem"
)

// Each of dbsem's defects shows its effect on the simulator, next to the
// correct code in the same situation.

// race sets key up with max 1, then lets a and b acquire it at once under
// the schedule seed draws; it returns how many won and the most leases
// the server held live at once.
func race(t *testing.T, o dbsem.Options, seed uint64) (winners, worst int) {
	w := New(Options{Decide: seeded(seed)})
	w.afterStep = func() { worst = max(worst, live(w, o.Design, "k")) }
	w.Go("setup", func(p *Process) {
		s := open(p, o)
		must("release", s.Release(bg, "k", acquire(s, "k", time.Second, 1).Token), nil)
		for _, name := range []string{"a", "b"} {
			w.Go(name, func(p *Process) {
				_, err := open(p, o).Acquire(bg, "k", time.Second, 1)
				if err == nil {
					winners++
				} else if !errors.Is(err, dbsem.ErrFull) {
					panic(err)
				}
			})
		}
	})
	run(t, w)
	return winners, worst
}

// twoWinners looks for a schedule under which both racers win, and checks
// that the server then held rows live leases at once at most.
func twoWinners(t *testing.T, o dbsem.Options, rows int) (seed uint64, found bool) {
	for seed := uint64(0); seed < 200; seed++ {
		if n, worst := race(t, o, seed); n == 2 {
			if worst != rows {
				t.Fatalf("seed %d: two winners, and at most %d live leases, want %d", seed, worst, rows)
			}
			return seed, true
		}
	}
	return 0, false
}

// Both racers win the one slot; the later's token overwrites the
// earlier's, which holds a lease the server no longer has.
func TestDefectNoSkipLocked(t *testing.T) {
	o := dbsem.Options{Design: dbsem.RowPerSlot}
	if seed, found := twoWinners(t, o, 1); found {
		t.Fatalf("correct code: two winners of one slot under seed %d", seed)
	}
	o.Defects.NoSkipLocked = true
	if _, found := twoWinners(t, o, 1); !found {
		t.Fatal("mutant: never two winners of one slot")
	}
}

func TestDefectCountWithoutLock(t *testing.T) {
	o := dbsem.Options{Design: dbsem.MasterRow}
	if seed, found := twoWinners(t, o, 2); found {
		t.Fatalf("correct code: two winners with max 1 under seed %d", seed)
	}
	o.Defects.CountWithoutLock = true
	if _, found := twoWinners(t, o, 2); !found {
		t.Fatal("mutant: never two winners with max 1")
	}
}

func TestDefectRefreshRevivesExpired(t *testing.T) {
	for _, d := range designs {
		w := New(Options{})
		w.Go("a", func(p *Process) {
			s := open(p, dbsem.Options{Design: d, Defects: dbsem.Defects{RefreshRevivesExpired: true}})
			l := acquire(s, "k", 200*time.Millisecond, 1)
			p.Sleep(300 * time.Millisecond)
			must("refresh after expiry", s.Refresh(bg, "k", l.Token, 10*time.Second), nil)
			_, err := s.Acquire(bg, "k", time.Second, 1)
			must("acquire after the revival", err, dbsem.ErrFull)
		})
		run(t, w)
	}
}

func TestDefectReleaseAfterExpirySucceeds(t *testing.T) {
	for _, d := range designs {
		w := New(Options{})
		w.Go("a", func(p *Process) {
			s := open(p, dbsem.Options{Design: d, Defects: dbsem.Defects{ReleaseAfterExpirySucceeds: true}})
			l := acquire(s, "k", 200*time.Millisecond, 1)
			p.Sleep(300 * time.Millisecond)
			must("release after expiry", s.Release(bg, "k", l.Token), nil)
		})
		run(t, w)
	}
}

// The server's clock runs an hour ahead of the clients' (Process.Now):
// the correct code, which reads only the server's, does not care; the
// mutant writes deadlines by its own clock, which the server's already
// sees passed, so a second client takes the slot of a live lease.
func TestDefectClientClockExpiry(t *testing.T) {
	for _, d := range designs {
		for _, mutant := range []bool{false, true} {
			w := New(Options{})
			w.SkewClock("", time.Hour)
			w.Go("a", func(p *Process) {
				if got := p.Now().Sub(epoch); got != time.Duration(w.Now()) {
					panic("Process.Now follows the server's offset")
				}
				o := dbsem.Options{Design: d}
				if mutant {
					o.Defects = dbsem.Defects{ClientClockExpiry: true, Now: p.Now}
				}
				acquire(open(p, o), "k", 10*time.Second, 1)
				w.Go("b", func(p *Process) {
					_, err := open(p, dbsem.Options{Design: d}).Acquire(bg, "k", 10*time.Second, 1)
					if mutant {
						must("mutant: acquire of a live lease's slot", err, nil)
					} else {
						must("correct code: acquire of a live lease's slot", err, dbsem.ErrFull)
					}
				})
			})
			run(t, w)
		}
	}
	// A process's offset moves its Process.Now.
	w := New(Options{})
	w.Go("a", func(p *Process) {
		p.Sleep(time.Second)
		w.SkewClock("a", -time.Minute)
		if got := p.Now().Sub(epoch); got != time.Duration(w.Now())-time.Minute {
			panic("Process.Now does not follow the process's offset")
		}
	})
	run(t, w)
}

func TestDefectMixedMax(t *testing.T) {
	for _, d := range designs {
		for _, mutant := range []bool{false, true} {
			w := New(Options{})
			w.Go("a", func(p *Process) {
				s := open(p, dbsem.Options{Design: d, Defects: dbsem.Defects{MixedMax: mutant}})
				acquire(s, "k", 10*time.Second, 1)
				_, err := s.Acquire(bg, "k", 10*time.Second, 2)
				if mutant {
					must("mutant: acquire with max 2 of a key set up with 1", err, nil)
				} else {
					must("correct code: acquire with max 2 of a key set up with 1", err, dbsem.ErrMismatch)
				}
			})
			run(t, w)
			if want := map[bool]int{false: 1, true: 2}[mutant]; live(w, d, "k") != want {
				t.Fatalf("%v mutant=%v: %d live leases, want %d", d, mutant, live(w, d, "k"), want)
			}
		}
	}
}

func TestDefectFenceFromUUID(t *testing.T) {
	for _, d := range designs {
		var fences []int64
		w := New(Options{})
		w.Go("a", func(p *Process) {
			s := open(p, dbsem.Options{Design: d, Fencing: true, Defects: dbsem.Defects{FenceFromUUID: true}})
			for range 12 {
				l := acquire(s, "k", time.Second, 1)
				must("release", s.Release(bg, "k", l.Token), nil)
				fences = append(fences, l.Fence)
			}
		})
		run(t, w)
		increasing := true
		for i := 1; i < len(fences); i++ {
			increasing = increasing && fences[i] > fences[i-1]
		}
		if increasing {
			t.Fatalf("%v: fences %v increase", d, fences)
		}
	}
}

// A COMMIT's reply is lost: the correct code reports an unknown outcome
// with the lease that is in place; the mutant tries again and holds two
// slots for one acquire.
func TestDefectAmbiguousCommitRetry(t *testing.T) {
	for _, d := range designs {
		for _, mutant := range []bool{false, true} {
			w := New(Options{})
			w.Go("a", func(p *Process) {
				s := open(p, dbsem.Options{Design: d, Defects: dbsem.Defects{AmbiguousCommitRetry: mutant}})
				must("release", s.Release(bg, "k", acquire(s, "k", time.Second, 2).Token), nil)
				w.DropCommitReply("a")
				l, err := s.Acquire(bg, "k", 10*time.Second, 2)
				if mutant {
					must("mutant: acquire", err, nil)
				} else {
					must("correct code: acquire", err, dbsem.ErrUnknownOutcome)
				}
				must("refresh of the lease returned", s.Refresh(bg, "k", l.Token, 10*time.Second), nil)
			})
			run(t, w)
			if want := map[bool]int{false: 1, true: 2}[mutant]; live(w, d, "k") != want {
				t.Fatalf("%v mutant=%v: %d live leases after one acquire, want %d", d, mutant, live(w, d, "k"), want)
			}
		}
	}
}
