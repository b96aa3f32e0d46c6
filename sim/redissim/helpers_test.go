package redissim

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
)

var bg = context.Background()

// seeded is a Decide drawing from a PCG seeded with seed.
func seeded(seed uint64) func(n int) int {
	r := rand.New(rand.NewPCG(seed, 0x72656469))
	return func(n int) int { return r.IntN(n) }
}

// world is a World of o, failing t on bad options.
func world(t testing.TB, o Options) *World {
	t.Helper()
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// lock is the reference Redlock on p's view of the World, its tokens
// drawn from a source seeded with p's name (so that runs repeat).
func lock(p *Process, o redlock.Options) *redlock.Redlock {
	if o.Random == nil {
		var seed [32]byte
		copy(seed[:], p.Name())
		o.Random = rand.NewChaCha8(seed)
	}
	r, err := redlock.NewOn(p.Env(), o)
	if err != nil {
		panic(err)
	}
	return r
}

// run runs w, failing t on a process's panic or a command not modelled.
func run(t testing.TB, w *World) {
	t.Helper()
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
}

const ms = time.Millisecond

// scriptNamed is the script of that name, or nil.
func scriptNamed(name string) *script {
	for _, sc := range scripts {
		if sc.name == name {
			return sc
		}
	}
	return nil
}
