package mariadbsim

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/dbsem"
)

// Every statement of dbsem's sql.go is one of the server's, word for word.
func TestStatementsAreDbsems(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../model/dbsem/sql.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]*template{}
	for _, tpl := range templates {
		mine[tpl.name] = tpl
	}
	n := 0
	ast.Inspect(f, func(x ast.Node) bool {
		spec, ok := x.(*ast.ValueSpec)
		if !ok || len(spec.Values) != 1 {
			return true
		}
		text, ok := constString(spec.Values[0])
		if !ok || spec.Names[0].Name == "slotValuesMore" {
			return true
		}
		name := spec.Names[0].Name
		n++
		tpl := mine[name]
		switch {
		case tpl == nil:
			t.Errorf("dbsem's %s is not modelled: %s", name, text)
		case tpl.multi && normalize(tpl.text)+" (?, 0)" != normalize(text):
			t.Errorf("%s: dbsem sends %q, the server knows %q (?, n), ...", name, text, tpl.text)
		case !tpl.multi && normalize(tpl.text) != normalize(text):
			t.Errorf("%s: dbsem sends\n\t%s\nthe server knows\n\t%s", name, text, tpl.text)
		}
		return true
	})
	if n < 25 {
		t.Fatalf("found only %d statements in model/dbsem/sql.go", n)
	}
}

// constString evaluates a string constant made of literals and +.
func constString(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		a, ok1 := constString(e.X)
		b, ok2 := constString(e.Y)
		return a + b, ok1 && ok2 && e.Op == token.ADD
	case *ast.ParenExpr:
		return constString(e.X)
	}
	return "", false
}

// An unknown statement is an error that names it, and fails the run.
func TestUnknownStatement(t *testing.T) {
	w := New(Options{})
	w.Go("a", func(p *Process) {
		_, err := p.DB().ExecContext(bg, "SELECT 1")
		if err == nil || !strings.Contains(err.Error(), `unknown statement "SELECT 1"`) {
			panic(fmt.Sprint("SELECT 1: ", err))
		}
	})
	err := w.Run()
	if err == nil || !strings.Contains(err.Error(), "SELECT 1") {
		t.Fatalf("Run: %v, want the unknown statement", err)
	}
}

// The reference's behaviours, on the simulator: up to max then full,
// release frees, refresh extends, expiry after ttl in virtual time,
// refresh and release of an expired lease fail, fences increase, the max
// is agreed.
func TestSemaphore(t *testing.T) {
	for _, d := range designs {
		for _, fencing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/fencing=%v", d, fencing), func(t *testing.T) {
				w := New(Options{})
				w.Go("a", func(p *Process) {
					s := open(p, dbsem.Options{Design: d, Fencing: fencing})
					fence := func(l dbsem.Lease, want int64) {
						if !fencing {
							want = 0
						}
						if l.Fence != want {
							panic(fmt.Sprintf("lease %+v: fence %d, want %d", l, l.Fence, want))
						}
					}
					l1 := acquire(s, "k", time.Second, 2)
					l2 := acquire(s, "k", time.Second, 2)
					fence(l1, 1)
					fence(l2, 2)
					_, err := s.Acquire(bg, "k", time.Second, 2)
					must("third acquire", err, dbsem.ErrFull)
					acquire(s, "other", time.Second, 1) // keys are independent

					must("release", s.Release(bg, "k", l1.Token), nil)
					must("second release", s.Release(bg, "k", l1.Token), dbsem.ErrExpired)
					l3 := acquire(s, "k", time.Second, 2)
					fence(l3, 3)

					// Refresh extends: past l2's first deadline it is
					// still live, and holds its slot.
					p.Sleep(600 * time.Millisecond)
					must("refresh", s.Refresh(bg, "k", l2.Token, time.Second), nil)
					p.Sleep(600 * time.Millisecond) // l3 has expired, l2 not
					must("refresh after the first deadline", s.Refresh(bg, "k", l2.Token, time.Second), nil)
					must("refresh of an expired lease", s.Refresh(bg, "k", l3.Token, time.Second), dbsem.ErrExpired)
					must("release of an expired lease", s.Release(bg, "k", l3.Token), dbsem.ErrExpired)
					l4 := acquire(s, "k", time.Second, 2)
					fence(l4, 4)
					_, err = s.Acquire(bg, "k", time.Second, 2)
					must("acquire with l2 and l4 live", err, dbsem.ErrFull)

					// Expiry in virtual time: every lease gone after ttl.
					p.Sleep(time.Second + time.Millisecond)
					must("refresh after expiry", s.Refresh(bg, "k", l2.Token, time.Second), dbsem.ErrExpired)
					must("release after expiry", s.Release(bg, "k", l4.Token), dbsem.ErrExpired)
					fence(acquire(s, "k", time.Second, 2), 5)
					fence(acquire(s, "k", time.Second, 2), 6)

					// The max is agreed, and so is the design.
					_, err = s.Acquire(bg, "k", time.Second, 3)
					must("acquire with another max", err, dbsem.ErrMismatch)
					other := dbsem.RowPerSlot
					if d == dbsem.RowPerSlot {
						other = dbsem.MasterRow
					}
					_, err = open(p, dbsem.Options{Design: other}).Acquire(bg, "k", time.Second, 2)
					must("acquire with another design", err, dbsem.ErrMismatch)
				})
				run(t, w)
				if n := live(w, d, "k"); n != 2 {
					t.Fatalf("%d live leases at the end, want 2", n)
				}
			})
		}
	}
}

// Several clients acquire, refresh and release under schedules drawn from
// many seeds, with (odd seeds) a nemesis striking kills, pauses, KILL
// CONNECTION, lost COMMIT replies and restarts at random: the server never
// holds more than max live leases of a key, fences never repeat, and
// without faults every acquire ends in a lease or ErrFull.
func TestNeverMoreThanMax(t *testing.T) {
	const max, clients, seeds = 2, 4, 150
	for _, d := range designs {
		t.Run(d.String(), func(t *testing.T) {
			grants := 0
			for seed := uint64(0); seed < seeds; seed++ {
				w := New(Options{Decide: seeded(seed)})
				worst := 0
				w.afterStep = func() {
					if n := live(w, d, "k"); n > worst {
						worst = n
					}
				}
				fences := map[int64]string{}
				for c := 0; c < clients; c++ {
					name := fmt.Sprintf("c%d", c)
					w.Go(name, func(p *Process) {
						s, err := tryOpen(p, dbsem.Options{Design: d, Fencing: true})
						if err != nil && seed%2 == 1 {
							return
						}
						must("open", err, nil)
						rng := rand.New(rand.NewPCG(seed, uint64(c)))
						for range 4 {
							l, err := s.Acquire(bg, "k", 30*time.Millisecond, max)
							if errors.Is(err, dbsem.ErrFull) || err != nil && seed%2 == 1 {
								p.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
								continue
							}
							must("acquire", err, nil)
							grants++
							if fences[l.Fence] != "" {
								panic(fmt.Sprintf("fence %d twice: %s and %s", l.Fence, fences[l.Fence], l.Token))
							}
							fences[l.Fence] = l.Token
							p.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
							if rng.IntN(2) == 0 {
								err := s.Refresh(bg, "k", l.Token, 30*time.Millisecond)
								if err != nil && !errors.Is(err, dbsem.ErrExpired) && seed%2 == 0 {
									panic(err)
								}
								p.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
							}
							if err := s.Release(bg, "k", l.Token); err != nil && !errors.Is(err, dbsem.ErrExpired) && seed%2 == 0 {
								panic(err)
							}
						}
					})
				}
				if seed%2 == 1 {
					w.Go("nemesis", func(p *Process) {
						rng := rand.New(rand.NewPCG(seed, 99))
						for range 4 {
							p.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
							target := fmt.Sprintf("c%d", rng.IntN(clients))
							switch rng.IntN(5) {
							case 0:
								w.Kill(target)
							case 1:
								w.Pause(target)
								w.After(time.Duration(rng.IntN(60))*time.Millisecond, func() { w.Resume(target) })
							case 2:
								w.KillConnections(target)
							case 3:
								w.DropCommitReply(target)
							case 4:
								w.Restart(time.Duration(rng.IntN(10)) * time.Millisecond)
							}
						}
					})
				}
				run(t, w)
				if worst > max {
					t.Fatalf("seed %d: %d live leases at once, max %d", seed, worst, max)
				}
			}
			if grants < seeds*clients {
				t.Fatalf("only %d grants in %d runs: the workload hardly contends", grants, seeds)
			}
		})
	}
}
