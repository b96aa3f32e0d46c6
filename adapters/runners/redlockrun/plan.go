package redlockrun

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
// (`prove --kind redlock`); its histories record lock kind
// histories.Lease, a mutex (max 1).
const Kind = "redlock"

// PriorityKind is the priority Redlock's (`prove --kind
// priority-redlock`): an acquirer of strictly higher priority takes the
// lock from its holder, and acts once the holder acknowledged (or could no
// longer hold). Its plans say each client's priority, and may give each
// client a ttl of its own.
const PriorityKind = "priority-redlock"

// maxPriority bounds a plan's priorities (the lock's, Lua's doubles).
const maxPriority = 1<<53 - 1

// PlanVersion is the version of the plan format this package reads and
// writes.
const PlanVersion = 1

// A Plan is one run of Redlock, as data: the servers (how many, what they
// keep across a restart), the lease's ttl, what each client does, which
// faults strike when, and the simulator's scheduling decisions. On the
// simulator the same plan always gives the same history, byte for byte.
type Plan struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"` // Kind
	Key     string `json:"key"`
	// Servers is N, the number of independent Redis servers (a majority,
	// N/2+1, grants a lease).
	Servers int `json:"servers"`
	// Persistence is what a server keeps across a restart: "none" (--save
	// '' --appendonly no: it comes back empty) or "always" (appendfsync
	// always: it comes back with every key).
	Persistence string `json:"persistence"`
	TTLMs       int    `json:"ttl_ms"`
	// Mutant names a deliberately broken variant of the reference to run
	// instead of the reference itself.
	Mutant string `json:"mutant,omitempty"`
	// Clients are the clients' scripts, run by processes c1, c2, ...
	Clients [][]Step `json:"clients"`
	// Priorities are the clients' priorities, one each (PriorityKind
	// only).
	Priorities []int64 `json:"priorities,omitempty"`
	// TTLs are the clients' ttls in ms, one each, where they differ
	// (PriorityKind only: a thief of a shorter ttl than its victim's time
	// left); none means TTLMs for all.
	TTLs []int `json:"ttls_ms,omitempty"`
	// Limit, where above 1, is how many leases the lock grants at once (a
	// counting semaphore; Kind only, and an implementation only: the
	// reference is a mutex). 0 or 1: a mutex.
	Limit int `json:"limit,omitempty"`
	// Faulted holds the faults, the simulator's decisions and how the
	// plan was judged.
	leaserun.Faulted[Fault]
}

// A Step is one line of a client's script (lease.Step).
type Step = lease.Step

// Sleep is the plan's word for a pause between operations.
const Sleep = lease.Sleep

// The persistence settings a plan names.
const (
	PersistNone   = "none"
	PersistAlways = "always"
)

// A Fault strikes At milliseconds into the run. Target names the client it
// is aimed at (kill; partition and drop-reply, between it and Server),
// Server the server (1 to N: partition, drop-reply, pause, restart-broker,
// clock-jump). A pause or a partition lasts For milliseconds (0: until the
// end of the run); a restart keeps its server down For milliseconds (and
// the faults timed within that strike once it is back up); a clock jump
// moves its server's clock by OffsetMs for good.
type Fault struct {
	At       int    `json:"at_ms"`
	Fault    string `json:"fault"`
	Target   string `json:"target,omitempty"`
	Server   int    `json:"server,omitempty"`
	For      int    `json:"for_ms,omitempty"`
	OffsetMs int    `json:"offset_ms,omitempty"`
}

// timing is f's name, time and length, as leaserun.Timeline reads them.
func (f Fault) timing() (string, int, int) { return f.Fault, f.At, f.For }

// faultNames are the faults a plan can hold: kill a client (it restarts
// without its lease); partition a client from one server (bytes wait both
// ways); lose one server's reply to a client (the connection resets, the
// command ran); pause a server (SIGSTOP: its clock runs on, so keys expire
// meanwhile); restart a server (down For ms, back with what its
// persistence kept); jump a server's clock.
var faultNames = run.Listed(histories.Kill, histories.Partition, histories.DropReply,
	histories.Pause, histories.RestartBroker, histories.ClockJump)

// FaultNames are the faults a plan can hold.
func FaultNames() []string { return slices.Clone(faultNames) }

// aims says which of a fault's Target and Server it needs.
func aims(fault string) (client, server bool) {
	switch fault {
	case histories.Kill:
		return true, false
	case histories.Partition, histories.DropReply:
		return true, true
	}
	return false, true
}

// Write writes the plan as indented JSON (leaserun.Write).
func (p *Plan) Write(w io.Writer) error { return leaserun.Write(w, p) }

// Brief says the plan in one line.
func (p *Plan) Brief() string {
	prio := ""
	if p.Kind == PriorityKind {
		prio = fmt.Sprintf(", priorities %v", p.Priorities)
		if p.TTLs != nil {
			prio += fmt.Sprintf(", ttls %v ms", p.TTLs)
		}
	}
	if p.limit() > 1 {
		prio += fmt.Sprintf(", limit %d", p.Limit)
	}
	return fmt.Sprintf("%s %q, %d server(s), persistence %s, ttl %d ms, %d clients%s, %d faults, %d scheduling decisions",
		p.Kind, p.Key, p.Servers, p.Persistence, p.TTLMs, len(p.Clients), prio, len(p.Nemesis), len(p.Schedule))
}

// ReadPlan reads a plan file as strictly as every plan is read
// (prover.ParsePlan): a wrong value, an unknown field or a field twice is
// an error naming the file, line, column and field.
func ReadPlan(path string) (*Plan, error) { return leaserun.Read[Plan](path) }

// Validate says what is wrong with a plan, naming the field.
func (p *Plan) Validate() error {
	if err := leaserun.Header(p.Version, PlanVersion, p.Kind, Kind, PriorityKind); err != nil {
		return err
	}
	switch {
	case p.Key == "":
		return leaserun.Bad("key", "want a non-empty key")
	case p.Servers < 1 || p.Servers > 9:
		return leaserun.Bad("servers", "want 1 to 9, got %d", p.Servers)
	case p.Persistence != PersistNone && p.Persistence != PersistAlways:
		return leaserun.Bad("persistence", "want %q or %q, got %q", PersistNone, PersistAlways, p.Persistence)
	case p.TTLMs < 10:
		return leaserun.Bad("ttl_ms", "want at least 10, got %d", p.TTLMs)
	case p.Mutant != "" && (MutantNamed(p.Mutant) == nil || MutantNamed(p.Mutant).Priority != (p.Kind == PriorityKind)):
		return leaserun.Bad("mutant", "no %s mutant named %q", p.Kind, p.Mutant)
	case p.Limit < 0 || p.Limit > 9:
		return leaserun.Bad("limit", "want 1 to 9 (or none: 1), got %d", p.Limit)
	case p.Limit > 1 && p.Kind == PriorityKind:
		return leaserun.Bad("limit", "a %s plan is a mutex: want none or 1, got %d", PriorityKind, p.Limit)
	case p.Limit > 1 && p.Mutant != "":
		return leaserun.Bad("limit", "the reference and its mutants are mutexes: a limit of %d needs an implementation (--impl)", p.Limit)
	}
	if err := p.validatePriority(); err != nil {
		return err
	}
	if err := leaserun.Scripts(p.Clients, func(s Step) error { return steps.Check(s.Op, s.Ms) }); err != nil {
		return err
	}
	return leaserun.Each("nemesis", len(p.Nemesis), func(i int) error { return p.validateFault(p.Nemesis[i]) })
}

// steps are the rules for a step of a client's script.
var steps = leaserun.Steps{Ops: []string{histories.Acquire, histories.Refresh, histories.Release}}

// validatePriority says what is wrong with the priorities and ttls.
func (p *Plan) validatePriority() error {
	switch {
	case p.Kind == Kind && p.Priorities != nil:
		return leaserun.Bad("priorities", "only a %s plan has priorities", PriorityKind)
	case p.Kind == Kind && p.TTLs != nil:
		return leaserun.Bad("ttls_ms", "only a %s plan has a ttl per client", PriorityKind)
	case p.Kind == PriorityKind && len(p.Priorities) != len(p.Clients):
		return leaserun.Bad("priorities", "want one per client (%d), got %d", len(p.Clients), len(p.Priorities))
	case p.TTLs != nil && len(p.TTLs) != len(p.Clients):
		return leaserun.Bad("ttls_ms", "want one per client (%d), or none, got %d", len(p.Clients), len(p.TTLs))
	}
	for i, pr := range p.Priorities {
		if pr > maxPriority || pr < -maxPriority {
			return leaserun.Bad(fmt.Sprintf("priorities[%d]", i), "want a magnitude below 2^53, got %d", pr)
		}
	}
	for i, t := range p.TTLs {
		if t < 10 {
			return leaserun.Bad(fmt.Sprintf("ttls_ms[%d]", i), "want at least 10, got %d", t)
		}
	}
	return nil
}

// ttlOf is client i's ttl in ms.
func (p *Plan) ttlOf(i int) int {
	if i < len(p.TTLs) {
		return p.TTLs[i]
	}
	return p.TTLMs
}

// longestTTL is the longest ttl of the plan's clients, in ms.
func (p *Plan) longestTTL() int {
	m := p.TTLMs
	for _, t := range p.TTLs {
		m = max(m, t)
	}
	return m
}

// lowestPriority is the lowest priority of the plan's clients, less one:
// the probe's, which takes the lock only if it is free.
func (p *Plan) lowestPriority() int64 {
	m := int64(0)
	for _, pr := range p.Priorities {
		m = min(m, pr)
	}
	return m - 1
}

// validateFault says what is wrong with one fault; the field it names
// starts with "." or is "" (the fault as a whole).
func (p *Plan) validateFault(f Fault) error {
	if !slices.Contains(faultNames, f.Fault) {
		return leaserun.Bad(".fault", "want one of %v, got %q", faultNames, f.Fault)
	}
	client, server := aims(f.Fault)
	procs := p.processes()
	switch {
	case f.At < 0 || f.For < 0:
		return leaserun.Bad("", "at_ms and for_ms must not be negative")
	case client && !slices.Contains(procs, f.Target):
		return leaserun.Bad(".target", "%s needs a client, one of %v; got %q", f.Fault, procs, f.Target)
	case !client && f.Target != "":
		return leaserun.Bad(".target", "%s strikes a server, not a client: give server only", f.Fault)
	case server && (f.Server < 1 || f.Server > p.Servers):
		return leaserun.Bad(".server", "%s needs a server, 1 to %d; got %d", f.Fault, p.Servers, f.Server)
	case !server && f.Server != 0:
		return leaserun.Bad(".server", "%s strikes a client, not a server", f.Fault)
	case f.Fault == histories.ClockJump && f.OffsetMs == 0:
		return leaserun.Bad(".offset_ms", "a clock jump needs an offset")
	case f.Fault != histories.ClockJump && f.OffsetMs != 0:
		return leaserun.Bad(".offset_ms", "only a clock jump has an offset, not %s", f.Fault)
	case f.For != 0 && (f.Fault == histories.Kill || f.Fault == histories.DropReply || f.Fault == histories.ClockJump):
		return leaserun.Bad(".for_ms", "a %s does not last", f.Fault)
	}
	return nil
}

// limit is how many leases the lock grants at once.
func (p *Plan) limit() int { return max(p.Limit, 1) }

// processes are the clients' process names.
func (p *Plan) processes() []string { return leaserun.Processes(len(p.Clients)) }

// serverName is how a history names server i (from 0): redis1, redis2, ...
// A fault aimed at it names it as its process; no client is called so, so
// the lease checker takes it for a part of the place.
func serverName(i int) string { return fmt.Sprintf("redis%d", i+1) }
