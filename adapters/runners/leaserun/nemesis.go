package leaserun

import (
	"sync"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
)

// Timeline is a lease plan's faults in the order they strike
// (run.Timeline), every one at its time: timing says of a fault its name,
// when it strikes (ms into the run) and how long it lasts (0: until the
// run's end, or it does not end). A restart-broker's For is how long its
// server is down, not a fault that ends later: the server comes back by
// itself, and the nemesis waits for it as it strikes.
func Timeline[F any](faults []F, timing func(F) (name string, at, lasts int)) []run.Timed {
	return run.Timeline(len(faults), func(i int) (int, int, bool) {
		name, at, lasts := timing(faults[i])
		if name == histories.RestartBroker {
			return at, 0, true // the server comes back by itself
		}
		return at, lasts, true
	})
}

// RunConfig is the run.Config of a lease family's runner on lock and the
// clock now: Await looks every 10 ms, and at the quiescent end a client's
// partition ends before its pause, as the lease families' histories have
// always shown.
func RunConfig(lock sync.Locker, now func() int64) run.Config {
	return run.Config{Lock: lock, Now: now, Poll: run.Poll{First: 10 * time.Millisecond, Max: 10 * time.Millisecond},
		Ends: []string{histories.Partition, histories.Pause}}
}
