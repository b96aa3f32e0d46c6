package mariadbsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/dbsem"
)

var bg = context.Background()

var designs = []dbsem.Design{dbsem.MasterRow, dbsem.RowPerSlot}

const prefix = "t_"

// seeded is a Decide drawing from a PCG seeded with seed.
func seeded(seed uint64) func(n int) int {
	r := rand.New(rand.NewPCG(seed, 0x73716c73))
	return func(n int) int { return r.IntN(n) }
}

// tryOpen opens the semaphore on p's pool, with tables prefixed "t_" and
// tokens drawn from a source seeded with p's name (so that runs repeat).
func tryOpen(p *Process, o dbsem.Options) (*dbsem.Semaphore, error) {
	if o.Prefix == "" {
		o.Prefix = prefix
	}
	if o.Random == nil {
		var seed [32]byte
		copy(seed[:], p.Name())
		o.Random = rand.NewChaCha8(seed)
	}
	return dbsem.Open(bg, p.DB(), o)
}

// open is tryOpen that panics (failing Run) on an error.
func open(p *Process, o dbsem.Options) *dbsem.Semaphore {
	s, err := tryOpen(p, o)
	if err != nil {
		panic(fmt.Sprintf("%s: open: %v", p.Name(), err))
	}
	return s
}

// must panics (failing Run, and so the test) unless err is want.
func must(what string, err, want error) {
	if !errors.Is(err, want) || (want == nil) != (err == nil) {
		panic(fmt.Sprintf("%s: got %v, want %v", what, err, want))
	}
}

// acquire acquires or panics.
func acquire(s *dbsem.Semaphore, key string, ttl time.Duration, max int) dbsem.Lease {
	l, err := s.Acquire(bg, key, ttl, max)
	must("acquire "+key, err, nil)
	return l
}

// run runs w, failing t on a process's panic.
func run(t testing.TB, w *World) {
	t.Helper()
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
}

// live counts the leases of key the server's true clock sees live, in
// committed rows: what the semaphore promises about.
func live(w *World, d dbsem.Design, key string) int {
	now := epoch.UnixMicro() + floorDiv(w.now+int64(w.serverSkew), 1000)
	n := 0
	switch d {
	case dbsem.MasterRow:
		tb := w.tables[prefix+"tokens"]
		if tb == nil {
			return 0
		}
		for _, r := range tb.rows {
			if r.k.key == key && r.cur != nil && r.cur.expires > now {
				n++
			}
		}
	default:
		tb := w.tables[prefix+"slots"]
		if tb == nil {
			return 0
		}
		for _, r := range tb.rows {
			if r.k.key == key && r.cur != nil && r.cur.hasToken && r.cur.expires > now {
				n++
			}
		}
	}
	return n
}

// tableName names a dbsem table for the tests' prefix.
func tableName(suffix string) string { return "`" + prefix + suffix + "`" }
