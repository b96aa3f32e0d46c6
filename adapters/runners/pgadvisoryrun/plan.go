package pgadvisoryrun

import (
	"fmt"
	"io"
	"slices"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/lease"
)

// Kind is the family's name on the command line and in its plans
// (`prove --kind pg-advisory`); its histories record lock kind
// histories.Lease.
const Kind = "pg-advisory"

// PlanVersion is the version of the plan format this package reads and
// writes.
const PlanVersion = 1

// A Plan is one run of a PostgreSQL advisory lock, as data: the lock (its
// name and the ttl its holders count on), what each client does, and
// which faults strike when.
type Plan struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"` // Kind
	Key     string `json:"key"`
	TTLMs   int    `json:"ttl_ms"`
	// Mutant names a deliberately broken variant of the reference to run
	// instead of the reference itself.
	Mutant string `json:"mutant,omitempty"`
	// Clients are the clients' scripts, run by processes c1, c2, ...
	Clients [][]lease.Step `json:"clients"`
	// Faulted holds the faults, the simulator's scheduling decisions
	// (read on the simulator; a real server ignores them) and how the
	// plan was judged.
	leaserun.Faulted[Fault]
}

// A Fault strikes Target At milliseconds into the run. A pause or a
// partition lasts For milliseconds (0: until the end of the run).
type Fault struct {
	At     int    `json:"at_ms"`
	Fault  string `json:"fault"`
	Target string `json:"target,omitempty"`
	For    int    `json:"for_ms,omitempty"`
}

// faultNames are the faults a plan can hold: kill a client (its
// connection closes, the server ends its session; it starts again holding
// nothing), pause it (it stops, its session stays open and idle),
// partition it from the server (its proxy holds every byte both ways),
// end its session from the server (pg_terminate_backend:
// histories.ForceClose), restart the server (a fast shutdown).
var faultNames = run.Listed(histories.Kill, histories.Pause, histories.Partition, histories.ForceClose, histories.RestartBroker)

// promised are the faults an advisory lock used as a lease can keep its
// promise under, and so the faults plans draw by default: force-close and
// restart-broker end the holder's session, and its lock, at once, and no
// client can learn it in time (docs/pg-advisory.md); they are drawn only
// when --faults names them.
var promised = run.Listed(histories.Kill, histories.Pause, histories.Partition)

// FaultNames are the faults a plan can hold.
func FaultNames() []string { return slices.Clone(faultNames) }

// Write writes the plan as indented JSON (leaserun.Write).
func (p *Plan) Write(w io.Writer) error { return leaserun.Write(w, p) }

// Brief says the plan in one line.
func (p *Plan) Brief() string {
	return fmt.Sprintf("%s %q, ttl %d ms, %d clients, %d faults", p.Kind, p.Key, p.TTLMs, len(p.Clients), len(p.Nemesis))
}

// ReadPlan reads a plan file as strictly as every plan is read: a wrong
// value, an unknown field or a field twice is an error naming the file,
// line, column and field.
func ReadPlan(path string) (*Plan, error) { return leaserun.Read[Plan](path) }

// steps are the rules for a step of a client's script.
var steps = leaserun.Steps{Ops: []string{histories.Acquire, histories.Refresh, histories.Release}, MaxMs: 60_000}

// Validate says what is wrong with a plan, naming the field.
func (p *Plan) Validate() error {
	if err := leaserun.Header(p.Version, PlanVersion, p.Kind, Kind); err != nil {
		return err
	}
	switch {
	case p.Key == "":
		return leaserun.Bad("key", "want a non-empty key")
	case p.TTLMs < 10 || p.TTLMs > 60_000:
		return leaserun.Bad("ttl_ms", "want 10 to 60000 (idle_session_timeout has millisecond grain), got %d", p.TTLMs)
	case p.Mutant != "" && MutantNamed(p.Mutant) == nil:
		return leaserun.Bad("mutant", "no mutant named %q", p.Mutant)
	}
	if err := leaserun.Scripts(p.Clients, func(s lease.Step) error { return steps.Check(s.Op, s.Ms) }); err != nil {
		return err
	}
	procs := leaserun.Processes(len(p.Clients))
	return leaserun.Each("nemesis", len(p.Nemesis), func(i int) error {
		f := p.Nemesis[i]
		switch {
		case !slices.Contains(faultNames, f.Fault):
			return leaserun.Bad(".fault", "want one of %v, got %q", faultNames, f.Fault)
		case f.At < 0 || f.For < 0:
			return leaserun.Bad("", "at_ms and for_ms must not be negative")
		case f.Fault == histories.RestartBroker && f.Target != "":
			return leaserun.Bad(".target", "restart-broker restarts the server: it has no target")
		case f.Fault != histories.RestartBroker && !slices.Contains(procs, f.Target):
			return leaserun.Bad(".target", "want one of %v, got %q", procs, f.Target)
		case f.For != 0 && histories.EndOf(f.Fault) == "":
			return leaserun.Bad(".for_ms", "only a pause or a partition lasts, not %s", f.Fault)
		}
		return nil
	})
}
