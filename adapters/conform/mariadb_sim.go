package conform

import (
	"context"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/sim/mariadbsim"
)

// The sequence on mariadbsim: a process per connection, each with one
// connection of its own, and a process "steps" that hands them their
// steps. Virtual time is what settles: an idle connection looks for its
// next step every dbSimPoll, a statement takes 100 µs, a lock granted
// lets its statement go on at once, so after dbSimSettle every
// connection that is not waiting for a lock has ended its statement.
const (
	dbSimPoll   = time.Millisecond
	dbSimSettle = 5 * time.Millisecond
)

// RunSimDB runs seq on a fresh mariadbsim World, its tables prefixed prefix
// (error messages name them), and returns the steps as run.
func RunSimDB(seq DBSeq, prefix string) ([]DBStep, error) { return runSimDB(seq, prefix, "", nil, nil) }

// runSimDB is RunSimDB on mariadbsim as the MariaDB version model
// (mariadbsim.Options.Version); mutant, if not nil, is the statement mariadbsim is
// sent in place of each op: a deliberately wrong simulator, which a
// differential must catch (set by tests, through
// MariaDBOptions.simMutant). The step is recorded as drawn.
func runSimDB(seq DBSeq, prefix, model string, mutant func(op DBOp) DBOp, wake func(n int) int) ([]DBStep, error) {
	if err := seq.check(); err != nil {
		return nil, err
	}
	// Purge held off, as the read view MariaDB's run holds open holds it
	// off there.
	w := mariadbsim.New(mariadbsim.Options{LockWaitTimeout: dbLockWait, HoldPurge: true, Version: model, Wake: wake})
	r := newSeqRun(seq, prefix)
	d := &simDriver{r: r, task: make([]int, seq.Conns)}
	ctx := context.Background()
	var driveErr error
	for c := range seq.Conns {
		d.task[c] = -1
		w.Go(fmt.Sprintf("c%d", c), func(p *mariadbsim.Process) {
			conn, err := p.DB().Conn(ctx)
			if err != nil {
				panic(fmt.Sprintf("c%d: connect: %v", c, err))
			}
			defer conn.Close()
			for {
				for d.task[c] < 0 && !d.done {
					p.Sleep(dbSimPoll)
				}
				i := d.task[c]
				if i < 0 {
					return
				}
				d.task[c] = -1
				op := r.steps[i].Op
				if mutant != nil {
					op = mutant(op)
				}
				r.complete(i, execStep(ctx, conn, op, prefix, seq.ClientClock))
			}
		})
	}
	w.Go("steps", func(p *mariadbsim.Process) {
		d.p = p
		driveErr = r.drive(d)
		d.done = true
	})
	if err := w.Run(); err != nil {
		return r.steps, err
	}
	return r.steps, driveErr
}

// simDriver is the runDriver of mariadbsim. Its fields are shared by the
// World's processes, which run one at a time.
type simDriver struct {
	r    *seqRun
	p    *mariadbsim.Process // "steps"
	task []int               // the step each connection is to run next, or -1
	done bool                // no more steps
}

func (d *simDriver) start(i int) {
	// The connection is idle (seqRun checked), so its process is polling.
	d.task[d.r.steps[i].Op.Conn] = i
}

func (d *simDriver) settle() error {
	d.p.Sleep(dbSimSettle)
	return nil
}
