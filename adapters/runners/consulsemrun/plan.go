package consulsemrun

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/lease"
)

// Kind is the family's name on the command line and in its plans (`prove
// --kind consul-semaphore`); its histories record lock kind
// histories.Lease, a semaphore of the plan's limit.
const Kind = "consul-semaphore"

// PlanVersion is the version of the plan format this package reads and
// writes.
const PlanVersion = 1

// The backends a plan runs on (the simulator's two flavours).
const (
	Consul = "consul"
	Etcd   = "etcd"
)

// A Plan is one run of the semaphore recipe, as data: the backend and
// whether it keeps its state across a restart, the semaphore's limit and
// its sessions' TTL, what each client does, which faults strike when,
// and the simulator's scheduling decisions. On the simulator the same
// plan always gives the same history, byte for byte.
type Plan struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"` // Kind
	Prefix  string `json:"prefix"`
	// Backend is the simulated server: "consul" or "etcd".
	Backend string `json:"backend"`
	// Persistent (Consul) is an agent with a data directory: a restart
	// keeps sessions and keys. Without it a -dev agent, which forgets
	// everything (and its indexes) at a restart. etcd always keeps its
	// state.
	Persistent bool `json:"persistent,omitempty"`
	// Limit is the semaphore's limit, every client's unless Limits says
	// otherwise.
	Limit int `json:"limit"`
	// Limits, if set, are the clients' own limits, one each (clients that
	// disagree on the limit: the recipe refuses the second one's).
	Limits []int `json:"limits,omitempty"`
	TTLMs  int   `json:"ttl_ms"`
	// Mutant names a deliberately broken variant of the reference.
	Mutant string `json:"mutant,omitempty"`
	// StaleReads and BehaviorRelease are the reference's correct variants
	// (consulsem.Options).
	StaleReads      bool `json:"stale_reads,omitempty"`
	BehaviorRelease bool `json:"behavior_release,omitempty"`
	// LockDelay creates the sessions with a lock-delay of the plan's TTL
	// (Consul only; consulsem.Options.LockDelay).
	LockDelay bool `json:"lock_delay,omitempty"`
	// Clients are the clients' scripts, run by processes c1, c2, ...
	Clients [][]Step `json:"clients"`
	// Cluster names the nodes of the real cluster the plan runs on
	// (ClusterNodes: Consul's servers s1, s2, s3 and client agents a1,
	// a2; etcd's members e1, e2, e3), none for a single server. Nodes
	// says which node each client talks to (a client agent; a member),
	// the first when it does not say, and the probe to the first.
	Cluster []string          `json:"cluster,omitempty"`
	Nodes   map[string]string `json:"nodes,omitempty"`
	// Faulted holds the faults, the simulator's decisions and how the
	// plan was judged.
	leaserun.Faulted[Fault]
}

// A Step is one line of a client's script (lease.Step).
type Step = lease.Step

// Sleep is the plan's word for a pause between operations.
const Sleep = lease.Sleep

// A Fault strikes At milliseconds into the run. Target names the client
// it is aimed at (all but restart-broker, which strikes the server, and
// the faults on a cluster's nodes). A pause or a partition lasts For
// milliseconds (0: until the clients are done); a restart keeps the
// server down For milliseconds. A drop-reply is armed At and strikes the
// client's next granting write (the lock key's), if it makes one; a
// force-close strikes At and does not last.
//
// On a cluster (Plan.Cluster), a fault may strike a node instead (Node):
// a partition cuts it off from every other node, both ways (Node
// "leader": whichever server leads when it strikes), a pause stops its
// process (SIGSTOP), a kill (SIGKILL) or a restart-broker (SIGTERM) keeps
// it down For milliseconds and starts it again; or a partition cuts the
// links Cut names ("s1>s2 s2>s1": each from>to direction dropped). Node
// and Cut are the cluster's names (ClusterNodes).
type Fault struct {
	At     int    `json:"at_ms"`
	Fault  string `json:"fault"`
	Target string `json:"target,omitempty"`
	For    int    `json:"for_ms,omitempty"`
	Node   string `json:"node,omitempty"`
	Cut    string `json:"cut,omitempty"`
}

// timing is f's name, time and length, as leaserun.Timeline reads them: a
// node's kill, like a restart, comes back by itself.
func (f Fault) timing() (string, int, int) {
	if f.Fault == histories.Kill && f.Node != "" {
		return histories.RestartBroker, f.At, f.For
	}
	return f.Fault, f.At, f.For
}

// faultNames are the faults a plan can hold: kill a client (it restarts
// without its lease), pause it (a GC pause, its session expiring
// meanwhile), partition it from the server (bytes wait both ways), lose
// the reply to its granting write, restart the server, close the
// client's connections from the server's side (force-close: its call in
// flight fails, and it connects again; its session lives on).
var faultNames = run.Listed(histories.Kill, histories.Pause, histories.Partition, histories.DropReply, histories.RestartBroker,
	histories.ForceClose)

// FaultNames are the faults a plan can hold.
func FaultNames() []string { return slices.Clone(faultNames) }

// Write writes the plan as indented JSON (leaserun.Write).
func (p *Plan) Write(w io.Writer) error { return leaserun.Write(w, p) }

// Brief says the plan in one line.
func (p *Plan) Brief() string {
	kept := ""
	if p.Backend == Consul && p.Persistent {
		kept = " (persistent)"
	}
	limits := ""
	if p.Limits != nil {
		limits = fmt.Sprintf(" (clients' own: %v)", p.Limits)
	}
	return fmt.Sprintf("%s %q on %s%s, limit %d%s, ttl %d ms, %d clients, %d faults, %d scheduling decisions",
		p.Kind, p.Prefix, p.Backend, kept, p.Limit, limits, p.TTLMs, len(p.Clients), len(p.Nemesis), len(p.Schedule))
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
	case !prefixOK(p.Prefix):
		return leaserun.Bad("prefix", "want 1 to 64 letters, digits, '-' or '_', got %q", p.Prefix)
	case p.Backend != Consul && p.Backend != Etcd:
		return leaserun.Bad("backend", "want %q or %q, got %q", Consul, Etcd, p.Backend)
	case p.Persistent && p.Backend != Consul:
		return leaserun.Bad("persistent", "only a Consul agent has a choice: etcd always keeps its state")
	case p.BehaviorRelease && p.Backend != Consul:
		return leaserun.Bad("behavior_release", "Behavior release is Consul's: etcd keys vanish with their lease")
	case p.LockDelay && p.Backend != Consul:
		return leaserun.Bad("lock_delay", "lock-delay is Consul's: etcd has none")
	case p.Limit < 1 || p.Limit > 9:
		return leaserun.Bad("limit", "want 1 to 9, got %d", p.Limit)
	case p.Limits != nil && len(p.Limits) != len(p.Clients):
		return leaserun.Bad("limits", "want one per client (%d), or none, got %d", len(p.Clients), len(p.Limits))
	case CheckTTL(p.Backend, p.TTLMs) != nil:
		return leaserun.Bad("ttl_ms", "want 1000 (session_ttl_min, etcd's floor) to 60000, whole seconds on etcd, got %d", p.TTLMs)
	case p.Mutant != "" && MutantNamed(p.Mutant) == nil:
		return leaserun.Bad("mutant", "no %s mutant named %q", Kind, p.Mutant)
	}
	if err := leaserun.Each("limits", len(p.Limits), func(i int) error {
		if l := p.Limits[i]; l < 1 || l > 9 {
			return leaserun.Bad("", "want 1 to 9, got %d", l)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := leaserun.Scripts(p.Clients, func(s Step) error { return steps.Check(s.Op, s.Ms) }); err != nil {
		return err
	}
	if err := p.validateCluster(); err != nil {
		return err
	}
	return leaserun.Each("nemesis", len(p.Nemesis), func(i int) error { return p.validateFault(p.Nemesis[i]) })
}

// steps are the rules for a step of a client's script: a verify too, and
// no sleep past an hour.
var steps = leaserun.Steps{Ops: []string{histories.Acquire, histories.Refresh, histories.Verify, histories.Release}, MaxMs: 3_600_000}

// prefixOK says whether prefix is a plain key segment.
func prefixOK(prefix string) bool {
	if len(prefix) < 1 || len(prefix) > 64 {
		return false
	}
	for _, c := range prefix {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// validateFault says what is wrong with one fault; the field it names
// starts with "." or is "" (the fault as a whole).
func (p *Plan) validateFault(f Fault) error {
	if !slices.Contains(faultNames, f.Fault) {
		return leaserun.Bad(".fault", "want one of %v, got %q", faultNames, f.Fault)
	}
	procs := p.processes()
	server := f.Fault == histories.RestartBroker
	switch {
	case f.At < 0 || f.For < 0 || f.At > 3_600_000 || f.For > 3_600_000:
		return leaserun.Bad("", "at_ms and for_ms must be 0 to 3600000")
	case f.onCluster():
		return p.validateClusterFault(f)
	case server && len(p.Cluster) > 0:
		return leaserun.Bad(".node", "on a cluster, a %s names the server it restarts (one of %s)", f.Fault, strings.Join(servers(p.Backend), ", "))
	case !server && !slices.Contains(procs, f.Target):
		return leaserun.Bad(".target", "%s needs a client, one of %v; got %q", f.Fault, procs, f.Target)
	case server && f.Target != "":
		return leaserun.Bad(".target", "%s strikes the server, not a client", f.Fault)
	case f.For != 0 && (f.Fault == histories.Kill || f.Fault == histories.DropReply || f.Fault == histories.ForceClose):
		return leaserun.Bad(".for_ms", "a %s does not last", f.Fault)
	}
	return nil
}

// processes are the clients' process names.
func (p *Plan) processes() []string { return leaserun.Processes(len(p.Clients)) }

// limitOf is client i's limit.
func (p *Plan) limitOf(i int) int {
	if i < len(p.Limits) {
		return p.Limits[i]
	}
	return p.Limit
}
