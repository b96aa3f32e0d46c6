package consulsim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// Two clients of the reference semaphore (limit 1) on a simulated Consul
// agent. a takes the slot and is paused (a long GC pause) past twice its
// TTL: Consul invalidates its session, b takes the slot, and a, resumed,
// finds its lease gone. In virtual time, the same every run.
func Example() {
	w, err := consulsim.New(consulsim.Options{Kind: consulsim.Consul})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	w.Go("a", func(p *consulsim.Process) {
		s, _ := p.Semaphore(consulsem.Options{})
		l, err := s.Acquire(ctx, "jobs", 1, 2*time.Second)
		fmt.Printf("a at %v: fence %d, %v\n", time.Duration(p.Now()), l.Fence, err)
		w.Pause("a")
		p.Sleep(0) // paused here until b resumes it
		fmt.Printf("a at %v: refresh: %v\n", time.Duration(p.Now()), s.Refresh(ctx, "jobs", l.Token))
	})
	w.Go("b", func(p *consulsim.Process) {
		s, _ := p.Semaphore(consulsem.Options{})
		p.Sleep(time.Second)
		_, err := s.Acquire(ctx, "jobs", 1, 2*time.Second)
		fmt.Printf("b at %v: %v\n", time.Duration(p.Now()), err)
		p.Sleep(4 * time.Second)
		l, err := s.Acquire(ctx, "jobs", 1, 2*time.Second)
		fmt.Printf("b at %v: fence %d, %v\n", time.Duration(p.Now()), l.Fence, err)
		w.Resume("a")
	})
	if err := w.Run(); err != nil {
		panic(err)
	}
	// Output:
	// a at 4ms: fence 15, <nil>
	// b at 1.005s: consulsem: every slot is held: 1 holders alive, limit 1
	// b at 5.009s: fence 23, <nil>
	// a at 5.009s: refresh: consulsem: the lease has expired: session 5692161d-100b-45e5-8000-000000000001 is gone
}
