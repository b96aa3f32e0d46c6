package run

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
)

// A Fault is one fault lockprover strikes, as its table (Faults) lists
// it: its name, what it strikes, what ends it and what a history records
// of it. A plan's fault names one; a family's runner strikes it on a
// Target; docs/faults.md is the table, checked against this one.
type Fault struct {
	// Name is what plans, --faults and the table call it.
	Name string
	// Strikes is what it may be aimed at.
	Strikes Strikes
	// Ends is what ends it.
	Ends Ending
	// Records is what a history records of it: its nemesis event's f
	// and value.
	Records string
	// Does says in a line what it does.
	Does string
	// Cluster says it is a cluster's fault: --faults draws it by Name,
	// and a plan holds it as the fault Records names, aimed at a node or
	// at the links between nodes.
	Cluster bool
}

// Strikes is what a fault may be aimed at: a set.
type Strikes uint8

// What a fault may be aimed at.
const (
	// AProcess is a client's (or an admin's) process: its connections,
	// its proxy, its clock.
	AProcess Strikes = 1 << iota
	// AServer is the server, or one of a family's servers (Redlock's N).
	AServer
	// ANode is a node of a cluster.
	ANode
	// TheLinks are the links between a cluster's nodes.
	TheLinks
)

// String says what s strikes, as the table does: "a process, a server".
func (s Strikes) String() string {
	var out []string
	for i, w := range []string{"a process", "a server", "a node", "links between nodes"} {
		if s&(1<<i) != 0 {
			out = append(out, w)
		}
	}
	return strings.Join(out, ", ")
}

// Ending is what ends a fault.
type Ending uint8

// What ends a fault.
const (
	// Nothing ends it: it happens once (a kill, a lost reply).
	Nothing Ending = iota
	// ItsEnd ends it: a resume or a heal (EndOf), at its for_ms or, with
	// none, at the run's end.
	ItsEnd
	// ForMs ends it: it lasts for_ms and ends by itself (a restart's
	// downtime; a node killed starts again).
	ForMs
	// ClockReset ends it: a clock-reset at its for_ms or the run's end.
	ClockReset
)

// String says what e is, as the table does.
func (e Ending) String() string {
	return [...]string{"nothing: it happens once", "its end (resume, heal), at for_ms or the run's end",
		"itself, after its downtime (for_ms)", "a clock-reset, at for_ms or the run's end"}[e]
}

// The names of the faults only plans and --faults hold: no history
// records them by these names (histories holds the names it records).
const (
	// AdminCrash kills an admin in the middle of a change or destroy
	// (amqp-locks).
	AdminCrash = "admin-crash"
	// The faults of a cluster, drawn by name and held by plans as the
	// fault their table row records.
	IsolateNode   = "isolate-node"
	CutOneWay     = "cut-one-way"
	Bridge        = "bridge"
	KillNode      = "kill-node"
	PauseNode     = "pause-node"
	RestartNode   = "restart-node"
	IsolateAgent  = "isolate-agent"
	IsolateServer = "isolate-server"
	IsolateLeader = "isolate-leader"
	Split         = "split"
)

// Faults is the table of faults: every fault a plan can hold or --faults
// draw, listed once. Each family's fault lists, each target's, and
// docs/faults.md come from it.
var Faults = []Fault{
	{Name: histories.Kill, Strikes: AProcess | ANode, Ends: Nothing, Records: "kill of the process (a node: kill, and restart-broker once it is up)",
		Does: "ends a client's process at once (its connections close; it starts again, holding nothing)"},
	{Name: histories.Pause, Strikes: AProcess | AServer | ANode, Ends: ItsEnd, Records: "pause, then resume",
		Does: "stops a process or a server (SIGSTOP, or its proxy holds its bytes) until its resume"},
	{Name: histories.Partition, Strikes: AProcess | ANode | TheLinks, Ends: ItsEnd, Records: "partition, then heal (of a process, or cut: the directions between nodes)",
		Does: "holds what a client and the server send each other, or cuts links between nodes, until its heal"},
	{Name: histories.ForceClose, Strikes: AProcess, Ends: Nothing, Records: "force-close of the process",
		Does: "the server closes a client's connections (rabbitmqctl, KILL CONNECTION, pg_terminate_backend)"},
	{Name: histories.DropReply, Strikes: AProcess | AServer, Ends: Nothing, Records: "drop-reply of the process, once a reply is lost",
		Does: "loses the server's next reply to a client, after the server acted on it"},
	{Name: histories.RestartBroker, Strikes: AServer | ANode, Ends: ForMs, Records: "restart-broker, in force until the server is up",
		Does: "restarts the server (or a node): it is down for the fault's time, and comes back with what it kept"},
	{Name: histories.ClockSkew, Strikes: AProcess | AServer, Ends: ClockReset, Records: "clock-skew with offset_ms, then clock-reset",
		Does: "sets a client's or the server's clock offset_ms away from true time"},
	{Name: histories.ClockJump, Strikes: AProcess | AServer, Ends: ClockReset, Records: "clock-jump with offset_ms (then clock-reset, where it lasts)",
		Does: "steps a clock by offset_ms, once"},
	{Name: AdminCrash, Strikes: AProcess, Ends: Nothing, Records: "kill of the admin",
		Does: "kills an admin right after its k-th AMQP method inside its next change or destroy"},
	{Name: IsolateNode, Cluster: true, Strikes: TheLinks, Ends: ItsEnd, Records: "partition with cut: a node from every other, both ways",
		Does: "cuts one node off from the others"},
	{Name: CutOneWay, Cluster: true, Strikes: TheLinks, Ends: ItsEnd, Records: "partition with cut: a node's packets to the others",
		Does: "cuts one node's links to the others one way"},
	{Name: Bridge, Cluster: true, Strikes: TheLinks, Ends: ItsEnd, Records: "partition with cut: the two other nodes from each other",
		Does: "leaves one node the only bridge between the two others"},
	{Name: KillNode, Cluster: true, Strikes: ANode, Ends: ForMs, Records: "kill of the node, restart-broker of it after for_ms",
		Does: "kills a node (SIGKILL) and starts it again after a while"},
	{Name: PauseNode, Cluster: true, Strikes: ANode, Ends: ItsEnd, Records: "pause of the node, then resume",
		Does: "stops a node (SIGSTOP) and continues it"},
	{Name: RestartNode, Cluster: true, Strikes: ANode, Ends: ForMs, Records: "restart-broker of the node",
		Does: "restarts a node cleanly"},
	{Name: IsolateAgent, Cluster: true, Strikes: ANode, Ends: ItsEnd, Records: "partition of the agent's node",
		Does: "cuts a client agent off from every other node, its applications still reaching it (Consul)"},
	{Name: IsolateServer, Cluster: true, Strikes: ANode, Ends: ItsEnd, Records: "partition of the server's node",
		Does: "cuts a server off both ways (on etcd, its clients with it)"},
	{Name: IsolateLeader, Cluster: true, Strikes: ANode, Ends: ItsEnd, Records: "partition of node leader (whichever leads then)",
		Does: "cuts the leader off: an election"},
	{Name: Split, Cluster: true, Strikes: TheLinks, Ends: ItsEnd, Records: "partition with cut: a server and an agent from the majority",
		Does: "cuts a server and a client agent off together from the majority (Consul)"},
}

// FaultNamed is the table's fault called name, or false.
func FaultNamed(name string) (Fault, bool) {
	i := slices.IndexFunc(Faults, func(f Fault) bool { return f.Name == name })
	if i < 0 {
		return Fault{}, false
	}
	return Faults[i], true
}

// Listed is names, each a fault of the table, as a new list: a family's
// or a target's faults. A name the table does not list is a mistake in
// the program, and panics (at its package's start).
func Listed(names ...string) []string {
	for _, n := range names {
		if _, ok := FaultNamed(n); !ok {
			panic(fmt.Sprintf("run: fault %q is not in the table (run.Faults)", n))
		}
	}
	return slices.Clone(names)
}

// Refuse says why a plan cannot run on target, which strikes strikes:
// the first of the plan's n faults (fault(i) the i-th's name, field the
// plan's field that holds them: "nemesis") that target does not strike,
// refused by name before the run; nil when target strikes them all.
func Refuse(target string, strikes []string, field string, n int, fault func(i int) string) error {
	for i := range n {
		if f := fault(i); !slices.Contains(strikes, f) {
			return &prover.PlanError{Field: fmt.Sprintf("%s[%d].fault", field, i),
				Msg: fmt.Sprintf("target %s does not strike %s (it strikes: %s)", target, f, strings.Join(strikes, ", "))}
		}
	}
	return nil
}
