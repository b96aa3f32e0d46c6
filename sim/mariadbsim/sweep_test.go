package mariadbsim

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/dbsem"
)

// Every fault, aimed after every statement of a client's acquire,
// refresh and release (with fencing, so that every statement is sent):
// the run ends (a killed process never leaves database/sql locked, and
// nothing waits forever), no other client is ever over the max, and no
// goroutine outlives its World.
func TestFaultAfterEveryStatement(t *testing.T) {
	faults := map[string]func(w *World){
		"kill":              func(w *World) { w.Kill("a") },
		"kill connections":  func(w *World) { w.KillConnections("a") },
		"drop commit reply": func(w *World) { w.DropCommitReply("a") },
		"restart":           func(w *World) { w.Restart(50 * time.Millisecond) },
		"pause":             func(w *World) { w.Pause("a"); w.After(3*time.Second, func() { w.Resume("a") }) },
	}
	names := []string{"kill", "kill connections", "drop commit reply", "restart", "pause"}
	before := runtime.NumGoroutine()
	for _, d := range designs {
		for _, name := range names {
			for n := 1; n <= 20; n++ {
				w := New(Options{LockWaitTimeout: time.Second})
				worst := 0
				w.afterStep = func() { worst = max(worst, live(w, d, "k")) }
				o := dbsem.Options{Design: d, Fencing: true}
				w.Go("a", func(p *Process) {
					s, err := tryOpen(p, o)
					if err != nil {
						return
					}
					l, err := s.Acquire(bg, "k", time.Second, 1)
					if err != nil {
						return
					}
					s.Refresh(bg, "k", l.Token, time.Second)
					s.Release(bg, "k", l.Token)
				})
				w.AfterStatements("a", n, func() { faults[name](w) })
				var got error
				w.Go("b", func(p *Process) {
					p.Sleep(5 * time.Second) // every lease of a's has expired
					s := open(p, o)
					_, got = s.Acquire(bg, "k", time.Second, 1)
				})
				if err := w.Run(); err != nil {
					t.Fatalf("%v, %s after statement %d: %v", d, name, n, err)
				}
				if got != nil && !(name == "kill" && errors.Is(got, dbsem.ErrFull)) {
					t.Fatalf("%v, %s after statement %d: b's acquire: %v", d, name, n, got)
				}
				if sent := w.Counters("a").Statements(); name == "kill" && sent > n {
					t.Fatalf("%v: a, killed after statement %d, sent %d", d, n, sent)
				}
				if worst > 1 {
					t.Fatalf("%v, %s after statement %d: %d live leases", d, name, n, worst)
				}
			}
		}
	}
	for i := 0; i < 50 && runtime.NumGoroutine() > before+5; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
