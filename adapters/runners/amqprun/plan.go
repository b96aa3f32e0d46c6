package amqprun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/amqpcheck"

	"github.com/lockprover/lockprover/model/amqplocks"
)

// PlanVersion is the version of the plan format this package writes. It
// reads version 1 too: version 2 spells the heartbeat as the CLI and the
// process protocol do (0 proposes none), where version 1 had 0 for the
// reference's default and -1 for none.
const PlanVersion = 2

// A Plan is one run, as data: what the admins and clients do, which faults
// strike when, and, in the simulator, every scheduling decision. The same
// plan runs unchanged against every target; in the simulator it always
// gives the same history, byte for byte.
type Plan struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`  // "semaphore" or "mutex"
	Lock    string `json:"lock"`  // the lock's name
	Slots   int    `json:"slots"` // created by the first admin before anything else (semaphore)
	// Options are the reference's options (and the mutant's, if any).
	Options Options `json:"options"`
	// Mutant names a deliberately broken variant of the reference to run
	// instead of the reference itself.
	Mutant string `json:"mutant,omitempty"`
	// Clients are the clients' scripts, run by processes c1, c2, ...
	Clients [][]Step `json:"clients"`
	// Admins are the admins' scripts, run by processes admin, admin2, ...
	Admins [][]Step `json:"admins"`
	// Nemesis lists the faults, by time from the start of the run.
	Nemesis []Fault `json:"nemesis"`
	// Cluster names the nodes of the RabbitMQ cluster the plan runs on
	// (n1, n2, n3), none for a single broker. Nodes says which node each
	// process connects to; a process it does not name connects to
	// Cluster[i mod len(Cluster)], i its place among admins then clients
	// (NodeOf), and the final probe to the first node.
	Cluster []string          `json:"cluster,omitempty"`
	Nodes   map[string]string `json:"nodes,omitempty"`
	// PartitionHandling is the cluster's mode the plan was drawn for
	// (ignore, pause_minority, autoheal, khepri): what a replay runs it
	// under unless told otherwise, or the version has no such mode.
	PartitionHandling string `json:"partition_handling,omitempty"`
	// Decisions are the simulator's scheduling decisions.
	run.Decisions
	// JudgedBy is how the plan was judged when it was found (plans written
	// before it existed have none).
	prover.JudgedBy
}

// PropertyNames are the properties a plan can be judged by, in the
// report's order.
var PropertyNames = []string{amqpcheck.SlotExclusive, amqpcheck.AcquireExact, amqpcheck.CountExact, amqpcheck.Persistent, amqpcheck.NoLeak,
	amqpcheck.Available, amqpcheck.CheapAcquire, amqpcheck.CheapVerify, amqpcheck.DriverMinimal}

// A Step is one line of a script: acquire, verify, release (the slot the
// client believes it holds), sleep, or an admin's change, count, wait,
// destroy.
type Step struct {
	Op    string `json:"op"`
	Ms    int    `json:"ms,omitempty"`    // sleep
	Delta int    `json:"delta,omitempty"` // change
	Slot  int    `json:"slot,omitempty"`  // wait
}

// A Fault strikes Target (a process name) At milliseconds into the run,
// or, with AfterCalls, right after Target's AfterCalls-th AMQP method has
// reached the broker, before Target hears the reply: in the middle of an
// operation. A restart-broker has no target unless it counts a process's
// calls. A pause or partition lasts For milliseconds (0: until the end of
// the run).
//
// On a cluster, a fault may strike a node instead of a process: a kill
// (the node's VM killed; it stays down For milliseconds, or until the
// end of the run), a pause (SIGSTOP) or a restart-broker (a clean restart,
// or the start of a killed node) names its Node; a partition between
// nodes names the directions it cuts (Cut, "n1>n2 n2>n1": each from>to
// drops from's packets to "to", silently). Target then only counts calls.
type Fault struct {
	At         int    `json:"at_ms"`
	AfterCalls int    `json:"after_calls,omitempty"`
	Fault      string `json:"fault"`
	Target     string `json:"target,omitempty"`
	Node       string `json:"node,omitempty"`
	Cut        string `json:"cut,omitempty"`
	For        int    `json:"for_ms,omitempty"`
}

// aim is what the fault strikes, as the runner keys its holds and the
// place takes it: the process, the node, or the cut.
func (f Fault) aim() string {
	switch {
	case f.Cut != "":
		return f.Cut
	case f.Node != "":
		return f.Node
	case f.Fault == histories.RestartBroker:
		return ""
	}
	return f.Target
}

// OnCluster says whether the fault strikes the cluster (a node, or the
// links between nodes) rather than a process.
func (f Fault) OnCluster() bool { return f.Node != "" || f.Cut != "" }

// NodeOf is the cluster node process name connects to ("" for a single
// broker).
func (p *Plan) NodeOf(name string) string {
	if len(p.Cluster) == 0 {
		return ""
	}
	if n := p.Nodes[name]; n != "" {
		return n
	}
	if i := slices.Index(p.processes(), name); i >= 0 {
		return p.Cluster[i%len(p.Cluster)]
	}
	return p.Cluster[0]
}

// Options are the reference implementation's options, as plan data; see
// amqplocks.Options for what each means.
type Options struct {
	// HeartbeatMs is the heartbeat the client proposes, in milliseconds,
	// as the CLI's --heartbeat and the process protocol's heartbeat_ms
	// say it: 0 proposes none (the broker's value applies; the simulated
	// broker then sends none either); absent (nil) is the reference's
	// default, 10 s. Ms makes one.
	HeartbeatMs            *int   `json:"heartbeat_ms,omitempty"`
	DeleteOrder            string `json:"delete_order,omitempty"` // "descending" (default) or "ascending"
	Overshoot              int    `json:"overshoot,omitempty"`
	ScanStart              string `json:"scan_start,omitempty"` // "first" (default), "last-known", "random"
	ContentionRetries      int    `json:"contention_retries,omitempty"`
	JitterMs               int    `json:"jitter_ms,omitempty"`
	SkipVerifyAfterAcquire bool   `json:"skip_verify_after_acquire,omitempty"`
	VerifyMethod           string `json:"verify_method,omitempty"` // "publish" (default) or "passive"
	NoAdminMutex           bool   `json:"no_admin_mutex,omitempty"`
	TransientSlots         bool   `json:"transient_slots,omitempty"`
	NoLengthLimit          bool   `json:"no_length_limit,omitempty"`
	LazyConnect            bool   `json:"lazy_connect,omitempty"`
	Channels               string `json:"channels,omitempty"` // "one" (default) or "per-purpose"
	Reconnect              bool   `json:"reconnect,omitempty"`
	PlainFailure           bool   `json:"plain_failure,omitempty"`
	TidyVerify             bool   `json:"tidy_verify,omitempty"`
}

// Reference turns plan options into the reference's.
func (o Options) Reference() amqplocks.Options {
	r := amqplocks.Options{
		Overshoot:              o.Overshoot,
		ContentionRetries:      o.ContentionRetries,
		Jitter:                 time.Duration(o.JitterMs) * time.Millisecond,
		SkipVerifyAfterAcquire: o.SkipVerifyAfterAcquire,
		NoAdminMutex:           o.NoAdminMutex,
		TransientSlots:         o.TransientSlots,
		NoLengthLimit:          o.NoLengthLimit,
		LazyConnect:            o.LazyConnect,
		Reconnect:              o.Reconnect,
		PlainFailure:           o.PlainFailure,
		TidyVerify:             o.TidyVerify,
	}
	switch hb := o.HeartbeatMs; {
	case hb == nil: // the reference's default
	case *hb == 0:
		r.Heartbeat = -1 // none proposed
	default:
		r.Heartbeat = time.Duration(*hb) * time.Millisecond
	}
	if o.DeleteOrder == "ascending" {
		r.DeleteOrder = amqplocks.Ascending
	}
	switch o.ScanStart {
	case "last-known":
		r.ScanStart = amqplocks.FromLastKnown
	case "random":
		r.ScanStart = amqplocks.FromRandom
	}
	if o.VerifyMethod == "passive" {
		r.VerifyMethod = amqplocks.VerifyPassive
	}
	if o.Channels == "per-purpose" {
		r.Channels = amqplocks.ChannelPerPurpose
	}
	return r
}

// Heartbeat is the heartbeat the reference proposes for these options: a
// duration, or 0 for none proposed.
func (o Options) Heartbeat() time.Duration { return o.Reference().ProposedHeartbeat() }

// NoHeartbeat says whether the options propose no heartbeat.
func (o Options) NoHeartbeat() bool { return o.HeartbeatMs != nil && *o.HeartbeatMs == 0 }

// Ms is n milliseconds as an optional field of Options (HeartbeatMs).
func Ms(n int) *int { return &n }

// The plan's own vocabulary, beside the operations and faults a history
// records (histories.Acquire, histories.Kill, ...): a client or admin may
// Sleep between operations, and an AdminCrash kills an admin after its
// k-th method inside its next change or destroy (recorded as a kill).
const (
	Sleep      = "sleep"
	AdminCrash = run.AdminCrash
)

// The faults a plan can hold. An admin-crash kills an admin right after its
// AfterCalls-th AMQP method within its next change or destroy (1 if
// unset): the admin crash in the middle of a change. Histories record it
// as a kill.
var faultNames = run.Listed(histories.Kill, histories.Pause, histories.Partition, histories.ForceClose, histories.RestartBroker, histories.DropReply, AdminCrash)

// The targets' names (--target). Each strikes every fault of faultNames,
// a cluster's on its nodes and links too (ClusterFaultNames draws them),
// a restart-broker there only aimed at a node; on a real broker a
// restart-broker only with RabbitMQ.AllowRestart.
const (
	SimTarget        = "sim"
	RabbitMQTarget   = "rabbitmq"
	ClusterTarget    = "rabbitmq-cluster"
	SimClusterTarget = "sim-cluster"
)

// targetName is how a refusal names t, running p.
func targetName(t Target, p *Plan) string {
	switch t.(type) {
	case Simulator:
		if len(p.Cluster) > 0 {
			return SimClusterTarget
		}
		return SimTarget
	case RabbitMQ:
		return RabbitMQTarget
	case RabbitMQCluster:
		return ClusterTarget
	}
	return fmt.Sprintf("%T", t)
}

// Validate reports the first thing wrong with p, naming the field: a
// *prover.PlanError.
func (p *Plan) Validate() error {
	bad := planError
	if p.Version != PlanVersion {
		return bad("version", "want %d (or 1, which is read as 2), got %d", PlanVersion, p.Version)
	}
	if hb := p.Options.HeartbeatMs; hb != nil && *hb < 0 {
		return bad("options.heartbeat_ms", "want 0 (propose none) or more, got %d (version 1 said none as -1; version 2 says 0)", *hb)
	}
	switch p.Kind {
	case histories.Semaphore:
		if p.Slots < 0 {
			return bad("slots", "want a number >= 0, got %d", p.Slots)
		}
	case histories.Mutex:
		if p.Slots != 0 || len(p.Admins) > 0 {
			return bad("kind", "a true mutex has no slots and no admins")
		}
	default:
		return bad("kind", `want "semaphore" or "mutex", got %q`, p.Kind)
	}
	if p.Lock == "" {
		return bad("lock", "missing")
	}
	if p.Mutant != "" && MutantNamed(p.Mutant) == nil {
		return bad("mutant", "no mutant named %q (see lockprover mutants)", p.Mutant)
	}
	if field, err := p.Options.validate(); err != nil {
		return bad("options."+field, "%v", err)
	}
	for i, script := range p.Clients {
		for j, s := range script {
			if field, err := s.validate(false); err != nil {
				return bad(fmt.Sprintf("clients[%d][%d].%s", i, j, field), "%v", err)
			}
		}
	}
	for i, script := range p.Admins {
		for j, s := range script {
			if field, err := s.validate(true); err != nil {
				return bad(fmt.Sprintf("admins[%d][%d].%s", i, j, field), "%v", err)
			}
		}
	}
	if err := p.validateCluster(); err != nil {
		return err
	}
	if err := p.validateNemesis(); err != nil {
		return err
	}
	for i, d := range p.Schedule {
		if d < 0 {
			return bad(fmt.Sprintf("schedule[%d]", i), "decisions are numbers >= 0, got %d", d)
		}
	}
	if p.Model != "" && p.Model != "strict" && p.Model != "standard" {
		return bad("model", `want "standard" or "strict", got %q`, p.Model)
	}
	for i, prop := range p.Properties {
		if !contains(PropertyNames, prop) {
			return bad(fmt.Sprintf("properties[%d]", i), "want one of %s, got %q", strings.Join(PropertyNames, ", "), prop)
		}
	}
	return nil
}

// validateNemesis reports the first fault of the plan that is wrong.
func (p *Plan) validateNemesis() error {
	procs := map[string]bool{}
	for _, n := range p.processes() {
		procs[n] = true
	}
	for i, f := range p.Nemesis {
		field := fmt.Sprintf("nemesis[%d]", i)
		if !contains(faultNames, f.Fault) {
			return planError(field+".fault", "want one of %v, got %q", faultNames, f.Fault)
		}
		if f.OnCluster() {
			if err := p.validateClusterFault(field, f, procs); err != nil {
				return err
			}
			continue
		}
		if f.At < 0 || f.For < 0 || f.AfterCalls < 0 {
			return planError(field, "times and counts must not be negative")
		}
		if f.AfterCalls > 0 && f.At != 0 {
			return planError(field, "a fault strikes at_ms or after_calls, not both")
		}
		if f.Fault == AdminCrash && !strings.HasPrefix(f.Target, "admin") {
			return planError(field+".target", "an admin-crash strikes an admin, not %q", f.Target)
		}
		if f.Fault == histories.RestartBroker && f.AfterCalls == 0 {
			if f.Target != "" {
				return planError(field+".target", "restart-broker has no target unless it counts a process's calls (after_calls)")
			}
		} else if !procs[f.Target] {
			return planError(field+".target", "no process named %q in this plan", f.Target)
		}
	}
	return nil
}

// validateCluster reports what is wrong with the plan's cluster and the
// nodes its processes connect to.
func (p *Plan) validateCluster() error {
	for i, n := range p.Cluster {
		if !nodeName.MatchString(n) {
			return planError(fmt.Sprintf("cluster[%d]", i), "a node's name is a letter then letters or digits (n1), got %q", n)
		}
		if slices.Contains(p.Cluster[:i], n) {
			return planError(fmt.Sprintf("cluster[%d]", i), "node %q named twice", n)
		}
		if slices.Contains(p.processes(), n) || strings.HasPrefix(n, "probe") || n == "nemesis" {
			return planError(fmt.Sprintf("cluster[%d]", i), "node %q has a process's name", n)
		}
	}
	if len(p.Nodes) > 0 && len(p.Cluster) == 0 {
		return planError("nodes", "a plan without a cluster has no nodes to connect to")
	}
	switch p.PartitionHandling {
	case "":
	case "ignore", "pause_minority", "autoheal", "khepri":
		if len(p.Cluster) == 0 {
			return planError("partition_handling", "a plan without a cluster has no partition handling")
		}
	default:
		return planError("partition_handling", "want ignore, pause_minority, autoheal or khepri, got %q", p.PartitionHandling)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Nodes)) {
		if !slices.Contains(p.processes(), name) {
			return planError("nodes."+name, "no process named %q in this plan", name)
		}
		if n := p.Nodes[name]; !slices.Contains(p.Cluster, n) {
			return planError("nodes."+name, "want a node of the cluster (%s), got %q", strings.Join(p.Cluster, ", "), n)
		}
	}
	return nil
}

// nodeName is what a cluster node's name looks like (a network lab
// host's name).
var nodeName = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)

// validateClusterFault reports what is wrong with a fault that strikes the
// cluster.
func (p *Plan) validateClusterFault(field string, f Fault, procs map[string]bool) error {
	switch {
	case len(p.Cluster) == 0:
		return planError(field, "a fault on a node or a cut between nodes needs a cluster (the plan's cluster field)")
	case f.Node != "" && f.Cut != "":
		return planError(field, "a fault strikes a node or cuts links between nodes, not both")
	case f.Cut != "" && f.Fault != histories.Partition:
		return planError(field+".cut", "only a partition cuts links, not a %s", f.Fault)
	case f.Node != "" && f.Fault != histories.Kill && f.Fault != histories.Pause && f.Fault != histories.RestartBroker:
		return planError(field+".node", "a node can be killed, paused or restarted (restart-broker), not struck by %s", f.Fault)
	case f.Node != "" && !slices.Contains(p.Cluster, f.Node):
		return planError(field+".node", "want a node of the cluster (%s), got %q", strings.Join(p.Cluster, ", "), f.Node)
	case f.Target != "" && !procs[f.Target]:
		return planError(field+".target", "no process named %q in this plan", f.Target)
	case f.Target != "" && f.AfterCalls == 0:
		return planError(field+".target", "a fault on the cluster strikes at_ms, or after_calls of its target process")
	case f.AfterCalls > 0 && f.Target == "":
		return planError(field+".after_calls", "counts the calls of a target process: name it")
	}
	if f.Cut != "" {
		v := histories.Fault{Cut: f.Cut}
		if msg := v.CheckCut(); msg != "" {
			return planError(field+".cut", "%s", strings.TrimPrefix(msg, "value.cut: "))
		}
		for _, d := range v.Directions() {
			for _, n := range d {
				if !slices.Contains(p.Cluster, n) {
					return planError(field+".cut", "want nodes of the cluster (%s), got %q", strings.Join(p.Cluster, ", "), n)
				}
			}
		}
	}
	return nil
}

// planError is a *prover.PlanError naming field.
func planError(field, format string, args ...any) error {
	return &prover.PlanError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// FaultNames are the faults a plan can hold.
func FaultNames() []string { return append([]string(nil), faultNames...) }

// validate names the step's field that is wrong, and what.
func (s Step) validate(admin bool) (string, error) {
	client := map[string]bool{histories.Acquire: true, histories.Verify: true, histories.Release: true, Sleep: true}
	admins := map[string]bool{histories.Change: true, histories.Count: true, histories.Wait: true, histories.Destroy: true, Sleep: true}
	switch {
	case !admin && !client[s.Op]:
		return "op", fmt.Errorf("want acquire, verify, release or sleep, got %q", s.Op)
	case admin && !admins[s.Op]:
		return "op", fmt.Errorf("want change, count, wait, destroy or sleep, got %q", s.Op)
	case s.Op == Sleep && s.Ms <= 0:
		return "ms", fmt.Errorf("a sleep needs a duration > 0")
	case s.Op == histories.Change && s.Delta == 0:
		return "delta", fmt.Errorf("a change needs a delta other than 0")
	case s.Op == histories.Wait && s.Slot < 1:
		return "slot", fmt.Errorf("a wait needs a slot >= 1")
	}
	return "", nil
}

// validate names the option that is wrong, and what.
func (o Options) validate() (string, error) {
	switch {
	case o.DeleteOrder != "" && o.DeleteOrder != "descending" && o.DeleteOrder != "ascending":
		return "delete_order", fmt.Errorf("want descending or ascending, got %q", o.DeleteOrder)
	case o.ScanStart != "" && !contains([]string{"first", "last-known", "random"}, o.ScanStart):
		return "scan_start", fmt.Errorf("want first, last-known or random, got %q", o.ScanStart)
	case o.VerifyMethod != "" && o.VerifyMethod != "publish" && o.VerifyMethod != "passive":
		return "verify_method", fmt.Errorf("want publish or passive, got %q", o.VerifyMethod)
	case o.Channels != "" && o.Channels != "one" && o.Channels != "per-purpose":
		return "channels", fmt.Errorf("want one or per-purpose, got %q", o.Channels)
	case o.Overshoot < 0:
		return "overshoot", errors.New("must not be negative")
	case o.JitterMs < 0:
		return "jitter_ms", errors.New("must not be negative")
	}
	return "", nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// processes are the plan's process names: admins then clients.
func (p *Plan) processes() []string {
	var ns []string
	for i := range p.Admins {
		ns = append(ns, adminName(i))
	}
	for i := range p.Clients {
		ns = append(ns, clientName(i))
	}
	return ns
}

func adminName(i int) string {
	if i == 0 {
		return "admin"
	}
	return fmt.Sprintf("admin%d", i+1)
}

func clientName(i int) string { return fmt.Sprintf("c%d", i+1) }

// ReadPlan reads a plan file as strictly as histories are read: an empty
// file, text that is not JSON, a value of the wrong type, an unknown field
// (field names are case-sensitive) or a field with a wrong value is an
// error that names the file, the line and column, and the field.
func ReadPlan(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePlan(path, data)
}

// ParsePlan is ReadPlan on data read from the file named path. A plan of
// version 1 is read as the version 2 plan that runs the same way.
func ParsePlan(path string, data []byte) (*Plan, error) {
	var p Plan
	validate := func() error {
		p.upgrade()
		return p.Validate()
	}
	if err := prover.ParsePlan(path, data, &p, validate); err != nil {
		return nil, err
	}
	return &p, nil
}

// upgrade turns a version 1 plan into version 2: heartbeat_ms 0 (the
// reference's default) becomes absent, -1 (none) becomes 0.
func (p *Plan) upgrade() {
	if p.Version != 1 {
		return
	}
	p.Version = 2
	switch hb := p.Options.HeartbeatMs; {
	case hb == nil:
	case *hb == 0:
		p.Options.HeartbeatMs = nil
	case *hb == -1:
		p.Options.HeartbeatMs = Ms(0)
	}
}

// Write writes p as indented JSON.
func (p *Plan) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a cut reads n1>n2
	return enc.Encode(p)
}
