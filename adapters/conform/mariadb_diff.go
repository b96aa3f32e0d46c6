package conform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/internal/rapidbatch"
	"github.com/lockprover/lockprover/sim/mariadbsim"
)

// MariaDBOptions configure MariaDBDifferential.
type MariaDBOptions struct {
	// DSN is the MariaDB, as go-sql-driver/mysql reads it; "" means
	// $LOCKPROVER_MYSQL_DSN, or adapters/servers/mariadb's DefaultDSN without it.
	// Its user needs CREATE and DROP in the database, and PROCESS (SHOW ENGINE
	// INNODB STATUS).
	DSN string
	// Runs is how many sequences to draw; 0 means 100.
	Runs int
	// Seed: the same seed draws the same sequences.
	Seed uint64
	// MaxSteps bounds the drawn steps of a sequence (besides setting its
	// tables and keys up); 0 means 40.
	MaxSteps int
	// Shrink is the time rapid is given to shrink a divergence's draws; 0
	// means 15 s. Steps are then taken out of the sequence itself until
	// none can go (at most TrimRuns more runs on MariaDB, 0 meaning 1000):
	// the result is minimal in steps however loaded the machine, which a
	// time bound alone cannot promise.
	Shrink   time.Duration
	TrimRuns int
	// Replays is how many times the minimal divergence runs again on
	// MariaDB; 0 means 3.
	Replays int
	// Progress, if set, is called after every sequence (not while
	// shrinking).
	Progress func(r MariaDBReport)

	// Model is the MariaDB version mariadbsim models
	// (mariadbsim.Options.Version); "" takes it from the server's
	// VERSION() (mariadbsim.ModelOf): 11.8's lock bypass for 11.8 and
	// later, 10.11's behaviour for older servers.
	Model string

	simMutant func(op DBOp) DBOp // see runSimDB
}

func (o MariaDBOptions) withDefaults() MariaDBOptions {
	o.DSN = mariaDSN(o.DSN)
	if o.Runs <= 0 {
		o.Runs = 100
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = 40
	}
	if o.Shrink <= 0 {
		o.Shrink = 15 * time.Second
	}
	if o.TrimRuns <= 0 {
		o.TrimRuns = 1000
	}
	if o.Replays <= 0 {
		o.Replays = 3
	}
	return o
}

// MariaDBReport is what a differential run found.
type MariaDBReport struct {
	Server string // MariaDB's VERSION()
	// Model is the version mariadbsim modelled ("" its default, 10.11).
	Model string
	Seed  uint64
	// Prefix starts the name of every table the run created
	// ("lpdb_<8 hex>_"); none is left once it returns.
	Prefix string
	// Runs counts the sequences run (up to and including the first
	// divergence), Steps the statements they sent, Waits those that
	// waited for a row lock, Deadlocks those that ended in error 1213,
	// Skipped the steps not sent (see DBSeq). Racy counts the sequences
	// whose first run on MariaDB came out otherwise than on mariadbsim where
	// the outcome depended on the order in which MariaDB ran statements
	// that went on at once, and a run again came out as on mariadbsim.
	Runs, Steps, Waits, Deadlocks, Skipped, Racy int
	Elapsed                                      time.Duration
	// Found is the minimal divergence, or nil.
	Found *DBDivergence
}

func (r MariaDBReport) String() string {
	s := fmt.Sprintf("%d sequences, %d statements (%d lock waits, %d deadlocks), %d steps skipped, %v",
		r.Runs, r.Steps, r.Waits, r.Deadlocks, r.Skipped, r.Elapsed.Round(time.Millisecond))
	if r.Racy > 0 {
		s += fmt.Sprintf(", %d racy on MariaDB (agreeing on a run again, or in the other order of statements that went on at once)", r.Racy)
	}
	if r.Found == nil {
		return s + ": no divergence"
	}
	return s + ": a divergence"
}

// A DBDivergence is a sequence whose steps came out differently.
type DBDivergence struct {
	Seq       DBSeq
	Real, Sim []DBStep
	First     int // the first step that differs (0-based)
	// Reproduced counts how many of Replays re-runs on MariaDB differed
	// again at the same step.
	Reproduced, Replays int
}

func (d *DBDivergence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%d steps; step %d (%s) differs", d.Seq, len(d.Real), d.First+1, stepAt(d.Real, d.First).Label)
	if d.Replays > 0 {
		fmt.Fprintf(&b, " (reproduced in %d of %d replays on MariaDB)", d.Reproduced, d.Replays)
	}
	b.WriteString("\n")
	// Every step, also those after the divergence that agree: a lock wait
	// ends at a later step, so the whole sequence is what reproduces it.
	for i := 0; i < max(len(d.Real), len(d.Sim)); i++ {
		r, s := stepAt(d.Real, i), stepAt(d.Sim, i)
		if sameStep(r, s) {
			fmt.Fprintf(&b, "   %-5s %-58s -> %s\n", r.Label, r.Op, r.Outcome)
			continue
		}
		fmt.Fprintf(&b, "!! %-5s %-58s -> MariaDB: %s\n", r.Label, r.Op, r.Outcome)
		if s.Label != r.Label || s.Op.String() != r.Op.String() {
			fmt.Fprintf(&b, "   %-5s %-58s    sqlsim:  %s\n", s.Label, s.Op, s.Outcome)
		} else {
			fmt.Fprintf(&b, "   %-5s %-58s    sqlsim:  %s\n", "", "", s.Outcome)
		}
	}
	return b.String()
}

func sameStep(r, s DBStep) bool {
	return r.Label == s.Label && r.Op.String() == s.Op.String() && r.Outcome == s.Outcome
}

func stepAt(steps []DBStep, i int) DBStep {
	if i < len(steps) {
		return steps[i]
	}
	return DBStep{Label: "-", Outcome: "(not run)"}
}

// firstDBDifference is the first step that differs, or -1.
func firstDBDifference(real, sim []DBStep) int {
	for i := 0; i < max(len(real), len(sim)); i++ {
		if !sameStep(stepAt(real, i), stepAt(sim, i)) {
			return i
		}
	}
	return -1
}

// MariaDBDifferential draws o.Runs sequences from o.Seed, runs each on
// mariadbsim and on MariaDB, and returns the first divergence, shrunk by
// rapid and replayed on MariaDB. Every table it creates starts with a
// prefix of the run's own ("lpdb_<8 hex>_"), and is dropped after its
// sequence, and again at the end if anything is left; the error says if
// a table remains. An error wrapping ErrNoMariaDB means MariaDB could not
// be used; one wrapping ErrHarness, that the harness failed (the run
// proves nothing either way). rapid's settings are process-wide flags:
// outside a test, call testing.Init and parse the global flag set first
// (see internal/rapidbatch). Sequences are drawn without them
// (rapidbatch.Cases), so several differentials may run at once; their
// shrinking takes turns.
func MariaDBDifferential(ctx context.Context, o MariaDBOptions) (rep *MariaDBReport, err error) {
	o = o.withDefaults()
	t, err := openMaria(ctx, o.DSN)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, t.close()) }()
	if o.Model == "" {
		o.Model = mariadbsim.ModelOf(t.version)
	}
	if !mariadbsim.KnownVersion(o.Model) {
		return nil, fmt.Errorf("conform: mariadbsim models no MariaDB %s (it models %s)", o.Model, strings.Join(mariadbsim.Versions, ", "))
	}
	if o.Model == mariadbsim.Versions[0] {
		o.Model = ""
	}
	r := &mariaRun{t: t, ctx: ctx, o: o, out: &MariaDBReport{Server: t.version, Model: o.Model, Seed: o.Seed, Prefix: t.prefix}}
	start := time.Now()
	draw := func(rt *rapid.T) DBSeq { return DrawDBSeq(rt, o.MaxSteps) }
	b, i, _, err := rapidbatch.Cases(o.Seed, o.Runs, diffBatch, draw, func(seq DBSeq) bool {
		r.run(seq)
		return r.found != nil || r.err != nil || ctx.Err() != nil
	})
	if err != nil {
		return r.out, fmt.Errorf("conform: %w", err)
	}
	if r.found != nil && r.err == nil {
		// rapid shrinks the draws; trim then takes steps out of the
		// sequence itself (a draw that rapid changes reshapes every step
		// drawn after it).
		if _, err := rapidbatch.ShrinkAlone(o.Seed, b, i, o.Shrink, func(rt *rapid.T) {
			if r.run(draw(rt)) {
				rt.Fatalf("a step differs")
			}
		}); err != nil {
			return r.out, fmt.Errorf("conform: %w", err)
		}
	}
	if r.found != nil && r.err == nil {
		r.trim(o.TrimRuns)
		r.replay()
		r.out.Found = r.found
	}
	r.out.Elapsed = time.Since(start)
	if r.err != nil {
		return r.out, r.err
	}
	return r.out, ctx.Err()
}

// mariaRun is the state of one MariaDBDifferential, shared by its search
// and its shrinking.
type mariaRun struct {
	t   *mariaServer
	ctx context.Context
	o   MariaDBOptions
	out *MariaDBReport

	found *DBDivergence // the smallest divergence so far; set, rapid is shrinking
	err   error         // a failure of mariadbsim or of the harness: the run stops
	// shrunk holds how each sequence run while rapid shrinks came out
	// (nil: alike on both sides): rapid draws most of its candidates
	// again and again, and only the first of them needs MariaDB.
	shrunk map[string]*DBDivergence
}

// raceRuns is how many more times a sequence whose outcome on MariaDB
// may have depended on timing (see mariaServer.runRacy) and differs from
// mariadbsim's runs there, looking for mariadbsim's outcome.
const raceRuns = 5

// lastFirst is mariadbsim's Wake that runs the statements one event
// granted their locks in the reverse of InnoDB's grant order.
func lastFirst(n int) int { return n - 1 }

// compare runs seq on both sides, and returns MariaDB's steps and how the
// sides differ (nil: they agree). When MariaDB's outcome may have
// depended on the order in which it ran statements that went on at once
// and differs, it is held to mariadbsim's run in the other order too
// (lastFirst), and seq runs again, up to raceRuns times: the sides agree
// if MariaDB comes out as mariadbsim, in either order, once (racy). An error is mariadbsim's, or the
// harness's (wrapping ErrHarness).
func (r *mariaRun) compare(seq DBSeq) (real []DBStep, d *DBDivergence, racy bool, err error) {
	racySeen := false
	for try := 0; ; try++ {
		prefix := r.t.nextPrefix()
		sim, err := runSimDB(seq, prefix, r.o.Model, r.o.simMutant, nil)
		if err != nil {
			return real, nil, false, fmt.Errorf("conform: sqlsim: %w", err)
		}
		steps, racyRun, err := r.t.runRacy(r.ctx, seq, prefix)
		if err != nil {
			return real, nil, false, fmt.Errorf("conform: MariaDB: %w", err)
		}
		if try == 0 {
			real = steps
		}
		racySeen = racySeen || racyRun
		i := firstDBDifference(steps, sim)
		if i >= 0 && racyRun {
			// Statements that went on at once may have finished the
			// other way round: mariadbsim's other order, the last
			// granted first.
			alt, err := runSimDB(seq, prefix, r.o.Model, r.o.simMutant, lastFirst)
			if err != nil {
				return real, nil, false, fmt.Errorf("conform: sqlsim: %w", err)
			}
			if firstDBDifference(steps, alt) < 0 {
				return real, nil, true, nil
			}
		}
		if i < 0 {
			return real, nil, try > 0, nil
		}
		if d == nil {
			d = &DBDivergence{Seq: seq, Real: steps, Sim: sim, First: i}
		}
		if !racySeen || try >= raceRuns || r.ctx.Err() != nil {
			return real, d, false, nil
		}
	}
}

// run runs seq on mariadbsim and on MariaDB and reports whether they differ
// (keeping the difference if it is the smallest yet). Sequences run while
// shrinking are not counted, and a harness failure while shrinking only
// rejects the candidate; after a failure, or once ctx ends, it runs
// nothing.
func (r *mariaRun) run(seq DBSeq) (differs bool) {
	if r.err != nil || r.ctx.Err() != nil {
		return false
	}
	var d *DBDivergence
	if r.found != nil { // shrinking
		key := fmt.Sprintf("%#v", seq)
		var seen bool
		if d, seen = r.shrunk[key]; !seen {
			var err error
			if _, d, _, err = r.compare(seq); err != nil {
				if r.ctx.Err() == nil && !errors.Is(err, ErrHarness) {
					r.err = err
				}
				return false
			}
			if r.shrunk == nil {
				r.shrunk = map[string]*DBDivergence{}
			}
			r.shrunk[key] = d
		}
	} else {
		real, diff, racy, err := r.compare(seq)
		if err != nil {
			if r.ctx.Err() == nil {
				r.err = err
			}
			return false
		}
		r.count(real)
		if racy {
			r.out.Racy++
		}
		if r.o.Progress != nil {
			r.o.Progress(*r.out)
		}
		d = diff
	}
	if d == nil {
		return false
	}
	if r.found == nil || len(d.Real) < len(r.found.Real) || len(d.Real) == len(r.found.Real) && d.First <= r.found.First {
		r.found = d
	}
	return true
}

func (r *mariaRun) count(steps []DBStep) {
	r.out.Runs++
	for _, s := range steps {
		switch {
		case strings.HasPrefix(s.Outcome, "skipped"):
			r.out.Skipped++
			continue
		case strings.HasPrefix(s.Outcome, "waits"):
			r.out.Waits++
		}
		if strings.Contains(s.Outcome, "error 1213 ") {
			r.out.Deadlocks++
		}
		r.out.Steps++
	}
}

// diverges runs seq on both sides and returns how they differ, or nil
// (also if mariadbsim or the harness fails).
func (r *mariaRun) diverges(seq DBSeq) *DBDivergence {
	_, d, _, err := r.compare(seq)
	if err != nil {
		return nil
	}
	return d
}

// trim takes steps out of the smallest divergence, one at a time, keeping
// each removal after which the sequence still diverges first at a step of
// the same statement, until no step can go (or budget runs on MariaDB are
// spent, or ctx ends); then it drops connections no step uses.
func (r *mariaRun) trim(budget int) {
	stmt := stepAt(r.found.Real, r.found.First).Op.Stmt
	try := func(seq DBSeq) bool {
		budget--
		d := r.diverges(seq)
		if d == nil || stepAt(d.Real, d.First).Op.Stmt != stmt {
			return false
		}
		r.found = d
		return true
	}
	for again := true; again; {
		again = false
		for i := len(r.found.Seq.Ops) - 1; i >= 0; i-- {
			if budget <= 0 || r.ctx.Err() != nil {
				return
			}
			if i >= len(r.found.Seq.Ops) {
				continue
			}
			seq := r.found.Seq
			seq.Ops = slices.Delete(slices.Clone(seq.Ops), i, i+1)
			if try(seq) {
				again = true
			}
		}
	}
	used := 1
	for _, o := range r.found.Seq.Ops {
		used = max(used, o.Conn+1)
	}
	if seq := r.found.Seq; used < seq.Conns && budget > 0 {
		seq.Conns = max(used, 2)
		try(seq)
	}
}

// replay runs the minimal divergence again, counting the runs that
// differ from mariadbsim at the same step (as compare judges them).
func (r *mariaRun) replay() {
	d := r.found
	for i := 0; i < r.o.Replays && r.ctx.Err() == nil; i++ {
		_, again, _, err := r.compare(d.Seq)
		if err != nil {
			break
		}
		d.Replays++
		if again != nil && again.First == d.First {
			d.Reproduced++
		}
	}
}

// MariaDB is the database semaphore's conformance check, as `lockprover
// conform --kind db-semaphore` runs it: runs sequences drawn from seed on
// mariadbsim and on the MariaDB that dsn names ("" means
// $LOCKPROVER_MYSQL_DSN, or adapters/servers/mariadb's DefaultDSN), shrinking the
// first divergence. It writes to out what it runs against, a line every tenth
// of the runs, and the summary, with the minimal divergence if there is
// one. It returns an error (wrapping ErrNoMariaDB or ErrHarness) only if
// the check could not be made; a divergence is in the report.
func MariaDB(ctx context.Context, dsn string, runs int, seed uint64, out io.Writer) (MariaDBReport, error) {
	o := MariaDBOptions{DSN: dsn, Runs: runs, Seed: seed}
	o = o.withDefaults()
	every := max(o.Runs/10, 1)
	o.Progress = func(r MariaDBReport) {
		if r.Runs%every == 0 && r.Runs < o.Runs {
			fmt.Fprintf(out, "  %d sequences, %d statements, %d lock waits, %d deadlocks\n", r.Runs, r.Steps, r.Waits, r.Deadlocks)
		}
	}
	fmt.Fprintf(out, "sqlsim against MariaDB: %d sequences of dbsem's statements, seed %d\n", o.Runs, seed)
	rep, err := MariaDBDifferential(ctx, o)
	if rep == nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(out, "interrupted after 0 sequences: %v\n", err)
		}
		return MariaDBReport{Seed: seed}, err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(out, "interrupted after %s\n", rep)
		return *rep, err
	}
	if rep.Model != "" {
		fmt.Fprintf(out, "MariaDB %s (sqlsim as MariaDB %s): %s\n", rep.Server, rep.Model, rep)
	} else {
		fmt.Fprintf(out, "MariaDB %s: %s\n", rep.Server, rep)
	}
	if rep.Found != nil {
		fmt.Fprintf(out, "\n%s", rep.Found)
	}
	return *rep, err
}
