package redlockcli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/lockprover/lockprover/cmd/lockprover/leasecli"

	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/model/lease"
)

// PriorityRedlock is the priority Redlock (adapters/runners/redlockrun, PriorityKind):
// an acquirer of strictly higher priority takes the lock from its holder
// and acts once the holder acknowledged (or could no longer hold); equal
// priority never steals. Its plans run on the simulated servers or on real
// redis-servers each plan starts (the reference and its mutants), and an
// implementation in any language proves through the process protocol
// (redlockprotocol, its priority part) on real redis-servers; bench
// measures the reference on private redis-servers beside its scripts sent
// raw.
var PriorityRedlock = &family.Descriptor{
	Name:       redlockrun.PriorityKind,
	Kinds:      []string{redlockrun.PriorityKind},
	Properties: lease.WithPriority,
	Faults:     redlockrun.FaultNames(),
	Targets:    []family.Target{{Name: "sim", Faults: redlockrun.FaultNames()}, {Name: "redis", Real: true, Faults: redlockrun.FaultNames()}},
	Flags:      Redlock.Flags,
	Judging:    leasecli.Judging,
	CheckFlags: leasecli.Check,
	Setup:      prioritySetup,
	ReadPlan:   func(path string) (prover.Plan, error) { return redlockrun.ReadPlan(path) },
	Replay:     priorityReplay,
	Serve: func(in io.Reader, out, log io.Writer, mutant, options string) error {
		return serveKind(in, out, log, mutant, options, true)
	},
	Validate: func(ctx context.Context, command string, s family.Settings, out io.Writer) (bool, error) {
		return validateKind(ctx, command, s, out, true)
	},
	Bench: func(ctx context.Context, s family.Settings, c bench.Config, out io.Writer) error {
		return benchKind(ctx, s, c, out, true)
	},
}

func init() {
	for _, m := range redlockrun.PriorityMutants {
		PriorityRedlock.Mutants = append(PriorityRedlock.Mutants, family.Mutant{Name: m.Name, Property: m.Property, Defect: m.Defect,
			Prove: redlockrun.Config{Scope: prover.Scope{Mutant: m.Name}, Priority: true}})
	}
	family.Register(PriorityRedlock)
}

// prioritySetup makes a priority Redlock proof from the command line: the
// reference (or a mutant) on the simulated servers or real redis-servers,
// or an implementation's processes on real redis-servers, with Redlock's
// flags.
func prioritySetup(s family.Settings) (*family.Setup, error) {
	switch {
	case s.Impl != "" && s.Mutant != "":
		return nil, errors.New("--mutant: a mutant is a variant of the reference; it cannot run with --impl")
	case s.Mutant != "" && (redlockrun.MutantNamed(s.Mutant) == nil || !redlockrun.MutantNamed(s.Mutant).Priority):
		return nil, fmt.Errorf("--mutant: no %s mutant named %q (see lockprover mutants --kind %s)", redlockrun.PriorityKind, s.Mutant, redlockrun.PriorityKind)
	}
	plain := s
	plain.Mutant = ""
	setup, err := redlockSetup(plain)
	if err != nil {
		return nil, err
	}
	c := setup.Prove.(redlockrun.Config)
	if c.Limit > 1 {
		return nil, fmt.Errorf("--limit %d: the priority Redlock is a mutex", c.Limit)
	}
	c.Priority, c.Mutant = true, s.Mutant
	setup.Prove, setup.What = c, c.String()
	return setup, nil
}

// priorityReplay makes a priority Redlock plan read back ready to run on
// the simulated servers (its trace to s.Trace) or on real redis-servers,
// against the reference, a mutant or an implementation's processes.
func priorityReplay(pl prover.Plan, s family.Settings) (*family.Setup, error) {
	p := pl.(*redlockrun.Plan)
	ok := redlockrun.MutantNamed(s.Mutant) != nil && redlockrun.MutantNamed(s.Mutant).Priority
	if err := family.ReplaceMutant(&p.Mutant, s.Mutant, ok, "no priority-redlock mutant named %q (see lockprover mutants --kind priority-redlock)"); err != nil {
		return nil, err
	}
	return replayOn(s, redlockrun.Config{Scope: prover.Scope{Mutant: p.Mutant}, Priority: true})
}
