package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover/explore"
)

// runExplore is `lockprover explore`: it proves the reference with each
// open choice changed under each family of faults and prints the table of
// what broke, so that the spec's choices can be compared side by side (the
// family's tables: family.Descriptor.Explore).
func runExplore(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parseExploreFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	inconclusive, err := family.Of(cfg.kind).Explore(ctx, explore.Config{Seed: cfg.seed, Plans: cfg.plans, Shrink: cfg.shrink, Root: cfg.root, Impls: cfg.impls, Out: stdout, Log: stderr})
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "explore: %v\n", interrupted(err))
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "explore: %v\n", err)
		return exitUsage
	case inconclusive:
		return exitInconclusive
	}
	return exitOK
}

// exploreConfig is what explore's flags ask for, checked.
type exploreConfig struct {
	kind   string // --kind: semaphore (amqp-locks) or db-semaphore
	plans  int
	seed   uint64
	shrink time.Duration // 0: no shrinking
	root   string        // a fresh directory under --out for the counterexamples
	impls  implList      // --impl, each given: amqp-locks' rows
}

// implList is explore's --impl, which may be given again: a row each.
type implList []string

func (l *implList) String() string { return strings.Join(*l, " ") }

func (l *implList) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("an empty command")
	}
	*l = append(*l, s)
	return nil
}

// parseExploreFlags reads and checks explore's flags, and picks the
// directory the counterexamples go to before anything runs: ok false with
// the exit status when the run must not start.
func parseExploreFlags(args []string, stdout, stderr io.Writer) (cfg exploreConfig, code int, ok bool) {
	kinds := kindsWith(func(d *family.Descriptor) bool { return d.Explore != nil })
	fs := newFlags(verbHelp{verb: "explore", sections: []section{{title: "Every run", flags: "[--kind KIND] [--plans N] [--seed N] [--shrink-time D] [--out DIR] [--impl COMMAND ...]"}}, about: `Proves the reference with each of its open choices changed (rows) under each
family of faults (columns), on the simulator, and prints a Markdown table of
what broke, with the path of a minimal counterexample for each violation.
With --impl (amqp-locks; again for more rows): implementations instead of
the reference's variants, a row each, on the simulator served on the wire
(each counterexample replays with that row's --impl).
With --kind db-semaphore: the database semaphore's designs, ttls and drift
bounds under each family of faults, then how large a jump of the database's
clock (or a client's) each design tolerates.
Exit status: 0 the table was made, 2 usage, 3 a cell was inconclusive,
130 interrupted.`}, stderr)
	fs.StringVar(&cfg.kind, "kind", histories.Semaphore, "the family whose matrix, by its kind: "+strings.Join(kinds, " or "))
	fs.IntVar(&cfg.plans, "plans", 300, "plans per cell")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the plans drawn")
	out := fs.String("out", "lockprover-explore", "directory for the counterexamples")
	fs.DurationVar(&cfg.shrink, "shrink-time", 5*time.Second, "time to spend minimising each counterexample (0: none)")
	fs.Var(&cfg.impls, "impl", "amqp-locks: the command that starts one process of an implementation, a row; again for more")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return cfg, code, false
	}
	if !noArgs("explore", pos, stderr) {
		return cfg, exitUsage, false
	}
	var bad checks
	bad.positive("plans", cfg.plans)
	bad.oneOf("kind", cfg.kind, kinds...)
	if d := family.Of(cfg.kind); len(cfg.impls) > 0 && d != nil && d.Name != "amqp-locks" {
		fmt.Fprintf(stderr, "explore: --impl is amqp-locks' (its simulator served on the wire), not --kind %s's\n", cfg.kind)
		return cfg, exitUsage, false
	}
	bad.duration("shrink-time", cfg.shrink, true)
	if !bad.report("explore", stderr) {
		return cfg, exitUsage, false
	}
	if err := checkOut(*out); err != nil {
		fmt.Fprintf(stderr, "explore: --out: %v\n", err)
		return cfg, exitUsage, false
	}
	root, err := freshDir(*out)
	if err != nil {
		fmt.Fprintf(stderr, "explore: --out: %v\n", err)
		return cfg, exitUsage, false
	}
	cfg.root = root
	return cfg, exitOK, true
}
