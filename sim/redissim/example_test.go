package redissim_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
	"github.com/lockprover/lockprover/sim/redissim"
)

// Two clients of the reference Redlock on three simulated servers. a,
// partitioned from the third server, takes the lock on exactly a
// majority (the third times out); one of them restarts without
// persistence, and b gets a majority of its own while a's lease is still
// valid, with the same fence: Kleppmann's restart (redsync#186), in
// virtual time, the same every run. (a's acquire took two rounds that
// waited out the third server's timeout, a tenth of the ttl.)
func Example() {
	w, err := redissim.New(redissim.Options{Servers: 3})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	newLock := func(p *redissim.Process) *redlock.Redlock {
		r, err := redlock.NewOn(p.Env(), redlock.Options{Random: rand.NewChaCha8([32]byte{p.Name()[0]})})
		if err != nil {
			panic(err)
		}
		return r
	}
	var a redlock.Lease
	w.Go("a", func(p *redissim.Process) {
		w.Partition("a", 2)
		var err error
		a, err = newLock(p).Acquire(ctx, "report", time.Second)
		fmt.Printf("a at %v: fence %d, valid until %v, %v\n", time.Duration(p.Now()), a.Fence, time.Duration(a.ValidUntil), err)
	})
	w.Go("b", func(p *redissim.Process) {
		p.Sleep(200 * time.Millisecond)
		w.Restart(0, time.Millisecond)
		p.Sleep(10 * time.Millisecond)
		l, err := newLock(p).Acquire(ctx, "report", time.Second)
		fmt.Printf("b at %v: fence %d, %v; a still valid: %v\n", time.Duration(p.Now()), l.Fence, err, p.Now() < a.ValidUntil)
	})
	if err := w.Run(); err != nil {
		panic(err)
	}
	// Output:
	// a at 200ms: fence 1, valid until 988ms, <nil>
	// b at 211ms: fence 1, <nil>; a still valid: true
}
