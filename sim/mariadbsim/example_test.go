package mariadbsim_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockprover/lockprover/model/dbsem"
	"github.com/lockprover/lockprover/sim/mariadbsim"
)

// Two clients of the reference semaphore race for one slot under a
// seeded schedule. The winner is killed right after the server applied
// its refresh, before it heard the reply; its lease expires a second
// later, and the other client takes the slot.
func Example() {
	rng := rand.New(rand.NewPCG(1, 2))
	w := mariadbsim.New(mariadbsim.Options{Decide: func(n int) int { return rng.IntN(n) }})
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		w.Go(name, func(p *mariadbsim.Process) {
			s, err := dbsem.Open(ctx, p.DB(), dbsem.Options{
				Random: rand.NewChaCha8([32]byte{name[0]}), // the same tokens every run
			})
			if err != nil {
				panic(err)
			}
			l, err := s.Acquire(ctx, "jobs", time.Second, 1)
			fmt.Printf("%s at %v: acquire: %v\n", name, time.Duration(w.Now()), err)
			if err != nil {
				p.Sleep(2 * time.Second)
				_, err = s.Acquire(ctx, "jobs", time.Second, 1)
				fmt.Printf("%s at %v: acquire: %v\n", name, time.Duration(w.Now()), err)
				return
			}
			w.AfterStatements(name, w.Counters(name).Statements()+1, func() { w.Kill(name) })
			s.Refresh(ctx, "jobs", l.Token, time.Second)
			fmt.Println("not reached")
		})
	}
	if err := w.Run(); err != nil {
		panic(err)
	}
	fmt.Println(w.Rows("dbsem_"))
	// Output:
	// a at 3.8ms: acquire: <nil>
	// b at 4.2ms: acquire: dbsem: every slot is held
	// b at 2.005s: acquire: <nil>
	// map[dbsem_keys:1 dbsem_tokens:1]
}
