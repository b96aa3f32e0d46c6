package dbsemrun

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
)

// Kind is the family's name on the command line and in its plans
// (`prove --kind db-semaphore`); its histories record lock kind
// histories.Lease.
const Kind = "db-semaphore"

// PlanVersion is the version of the plan format this package reads and
// writes.
const PlanVersion = 1

// A Plan is one run of the database semaphore, as data: the semaphore (its
// key, max, ttl and the reference's options), what each client does, which
// faults strike when, and the simulator's scheduling decisions. On the
// simulator the same plan always gives the same history, byte for byte.
type Plan struct {
	Version int     `json:"version"`
	Kind    string  `json:"kind"` // Kind
	Key     string  `json:"key"`
	Max     int     `json:"max"`
	TTLMs   int     `json:"ttl_ms"`
	Options Options `json:"options"`
	// Mutant names a deliberately broken variant of the reference to run
	// instead of the reference itself.
	Mutant string `json:"mutant,omitempty"`
	// Clients are the clients' scripts, run by processes c1, c2, ...
	Clients [][]Step `json:"clients"`
	// Faulted holds the faults, the simulator's decisions and how the
	// plan was judged.
	leaserun.Faulted[Fault]
}

// Options are the reference's options, as plan data (see dbsem.Options).
type Options struct {
	Design  string `json:"design,omitempty"` // "master-row" (default) or "row-per-slot"
	Fencing bool   `json:"fencing,omitempty"`
}

// A Step is one line of a client's script: acquire, refresh or release
// (the lease the client believes it holds; skipped when that makes no
// sense), or sleep Ms milliseconds.
type Step struct {
	Op string `json:"op"`
	Ms int    `json:"ms,omitempty"`
	// Max, on an acquire, is a limit other than the plan's: clients that
	// disagree on max (the reference refuses such an acquire).
	Max int `json:"max,omitempty"`
}

// Sleep is the plan's word for a pause between operations.
const Sleep = "sleep"

// A Fault strikes Target At milliseconds into the run or, with
// AfterStatements, right after Target's AfterStatements-th statement was
// applied by the server, before Target hears the reply. A pause, a
// partition or a clock fault lasts For milliseconds (0: until the end of
// the run). A clock fault moves Target's clock ("" for the server's) by
// OffsetMs.
type Fault struct {
	At              int    `json:"at_ms"`
	AfterStatements int    `json:"after_statements,omitempty"`
	Fault           string `json:"fault"`
	Target          string `json:"target,omitempty"`
	For             int    `json:"for_ms,omitempty"`
	OffsetMs        int    `json:"offset_ms,omitempty"`
}

// faultNames are the faults a plan can hold: kill a client (it restarts
// without its lease), pause it (SIGSTOP), partition it from the server
// (it runs on; bytes wait both ways), close its connections from the
// server (KILL CONNECTION: histories.ForceClose), lose the reply to its
// COMMIT, restart the server, skew or jump a clock.
var faultNames = run.Listed(histories.Kill, histories.Pause, histories.Partition, histories.ForceClose,
	histories.DropReply, histories.RestartBroker, histories.ClockSkew, histories.ClockJump)

// FaultNames are the faults a plan can hold.
func FaultNames() []string { return slices.Clone(faultNames) }

// Write writes the plan as indented JSON (leaserun.Write).
func (p *Plan) Write(w io.Writer) error { return leaserun.Write(w, p) }

// Brief says the plan in one line.
func (p *Plan) Brief() string {
	return fmt.Sprintf("%s %q, max %d, ttl %d ms, %d clients, %d faults, %d scheduling decisions",
		p.Kind, p.Key, p.Max, p.TTLMs, len(p.Clients), len(p.Nemesis), len(p.Schedule))
}

// ReadPlan reads a plan file as strictly as every plan is read
// (prover.ParsePlan): a wrong value, an unknown field or a field twice is
// an error naming the file, line, column and field.
func ReadPlan(path string) (*Plan, error) { return leaserun.Read[Plan](path) }

// Validate says what is wrong with a plan, naming the field.
func (p *Plan) Validate() error {
	if err := leaserun.Header(p.Version, PlanVersion, p.Kind, Kind); err != nil {
		return err
	}
	switch {
	case p.Key == "":
		return leaserun.Bad("key", "want a non-empty key")
	case p.Max < 1 || p.Max > 1000:
		return leaserun.Bad("max", "want 1 to 1000, got %d", p.Max)
	case p.TTLMs < 1:
		return leaserun.Bad("ttl_ms", "want at least 1, got %d", p.TTLMs)
	case p.Options.Design != "" && p.Options.Design != "master-row" && p.Options.Design != "row-per-slot":
		return leaserun.Bad("options.design", `want "master-row" or "row-per-slot", got %q`, p.Options.Design)
	case p.Mutant != "" && MutantNamed(p.Mutant) == nil:
		return leaserun.Bad("mutant", "no mutant named %q", p.Mutant)
	}
	if err := leaserun.Scripts(p.Clients, func(s Step) error { return steps.Check(s.Op, s.Ms) }); err != nil {
		return err
	}
	return leaserun.Each("nemesis", len(p.Nemesis), func(i int) error { return p.validateFault(p.Nemesis[i]) })
}

// steps are the rules for a step of a client's script: an operation's ms
// is ignored, as it always was.
var steps = leaserun.Steps{Ops: []string{histories.Acquire, histories.Refresh, histories.Release}, OpMs: true}

// validateFault says what is wrong with one fault; the field it names
// starts with "." or is "" (the fault as a whole).
func (p *Plan) validateFault(f Fault) error {
	procs := p.processes()
	switch {
	case !slices.Contains(faultNames, f.Fault):
		return leaserun.Bad(".fault", "want one of %v, got %q", faultNames, f.Fault)
	case f.At < 0 || f.For < 0 || f.AfterStatements < 0:
		return leaserun.Bad("", "at_ms, for_ms and after_statements must not be negative")
	case f.Target != "" && !slices.Contains(procs, f.Target):
		return leaserun.Bad(".target", "want one of %v, got %q", procs, f.Target)
	case f.Target == "" && f.Fault != histories.RestartBroker && !histories.IsClockFault(f.Fault):
		return leaserun.Bad(".target", "%s needs a target", f.Fault)
	case histories.IsClockFault(f.Fault) && f.OffsetMs == 0:
		return leaserun.Bad(".offset_ms", "a clock fault needs an offset")
	case !histories.IsClockFault(f.Fault) && f.OffsetMs != 0:
		return leaserun.Bad(".offset_ms", "only a clock fault has an offset, not %s", f.Fault)
	case f.For != 0 && histories.EndOf(f.Fault) == "" && !histories.IsClockFault(f.Fault):
		return leaserun.Bad(".for_ms", "only a pause, a partition or a clock fault lasts, not %s", f.Fault)
	}
	return nil
}

// processes are the clients' process names.
func (p *Plan) processes() []string { return leaserun.Processes(len(p.Clients)) }

// ParseOptions reads the reference's options as the CLI's --options gives
// them: comma-separated design=master-row|row-per-slot and fencing.
func ParseOptions(s string) (Options, error) {
	var o Options
	for _, kv := range strings.Split(s, ",") {
		k, v, hasValue := strings.Cut(strings.TrimSpace(kv), "=")
		switch {
		case k == "design" && (v == "master-row" || v == "row-per-slot"):
			o.Design = v
		case k == "design":
			return o, fmt.Errorf("design: want master-row or row-per-slot, got %q", v)
		case k == "fencing" && !hasValue:
			o.Fencing = true
		default:
			return o, fmt.Errorf("unknown option %q (want design=master-row|row-per-slot, fencing)", kv)
		}
	}
	return o, nil
}
