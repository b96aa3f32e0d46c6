package rabbitmq

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// The partition handling modes of RabbitMQ 3.x (rabbitmq.conf's
// cluster_partition_handling): what a node does once it has noticed that
// it lost touch with others.
const (
	// Ignore: both sides go on, each on its own copy of the metadata, and
	// stay apart after the heal until an operator restarts one side.
	Ignore = "ignore"
	// PauseMinority: a node that sees itself in a minority stops its
	// broker (its clients' connections close) until a majority is back.
	PauseMinority = "pause_minority"
	// Autoheal: as Ignore while the partition lasts; at the heal, the
	// side with fewer client connections restarts.
	Autoheal = "autoheal"
	// Khepri is no cluster_partition_handling but a metadata store:
	// RabbitMQ 4.3 and later have no other (4.3.0 removed Mnesia); 4.2.0
	// made it the default of new deployments (an upgraded cluster keeps
	// Mnesia); 4.0 and 4.1 use Mnesia unless the khepri_db feature flag
	// is enabled (an opt-in on 4.0). A cluster in this mode of a version
	// before 4.3 enables the flag once its nodes have joined; the project
	// measured 4.0.5 so, and 4.3.6. The metadata (queues, exclusive
	// owners) then lives in Khepri, a Raft store, and Mnesia's three modes
	// do not apply. A node cut off from a majority keeps its clients'
	// connections but commits no declare or delete (541 after 30 s); the
	// majority goes on; the cluster agrees again by itself after the heal
	// (docs/broker-semantics.md, section 6).
	Khepri = "khepri"
)

// Modes are a cluster's modes, in the order docs list them: Mnesia's
// three partition handling modes, then Khepri.
var Modes = []string{Ignore, PauseMinority, Autoheal, Khepri}

// KhepriCommandTimeout is how long a 4.3 node waits for Khepri to commit
// a declare or a delete before it closes the client's connection (541):
// 30 s, measured (K.4).
const KhepriCommandTimeout = 30 * time.Second

// DefaultNetTicktime is a cluster's net_ticktime unless ClusterOptions say
// otherwise: 5 s, where RabbitMQ's default is 60 s. By OTP's rule
// (kernel's net_ticktime, tick intensity 4) a node declares a silent peer
// down 0.75 to 1.25 times it after it last heard from it; measured with
// 5 s, 5.0 to 6.3 s after the cut or pause, never under one net_ticktime
// (docs/broker-semantics.md C.3, C.24, K.10). 60 s would make every
// partition plan last minutes; RabbitMQ's own partition tests use 5 s and
// less. Lower values declare a peer down after a scheduling stall of the
// 2 cores the nodes share.
const DefaultNetTicktime = 5 * time.Second

// ServerBin is Debian's rabbitmq-server script, which runs the node in
// the foreground (not the /usr/sbin wrapper, which switches to the
// rabbitmq user).
var ServerBin = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// CtlBin is rabbitmqctl, run in a node's namespace with the cluster's
// cookie.
var CtlBin = "/usr/lib/rabbitmq/bin/rabbitmqctl"

// ClusterOptions say how a Cluster is made.
type ClusterOptions struct {
	// PartitionHandling is one of Modes; "" means Ignore, RabbitMQ's
	// default.
	PartitionHandling string
	// NetTicktime is every node's net_ticktime, whole seconds; 0 means
	// DefaultNetTicktime.
	NetTicktime time.Duration
	// Version is the RabbitMQ every node runs. The zero value, or the
	// machine's own (3.10.8), runs ServerBin; a version of a Debian
	// release's root (4.0.5 from trixie's, 4.3.6 from sid's: see
	// versions.Version.Rooted) runs that root's rabbitmq-server and
	// rabbitmqctl (--longnames), in PID and mount namespaces of the
	// node's own inside its host's network namespace, the node's files
	// bound at /lockprover (versions.Run). The root is made first if
	// need be: minutes, once per machine.
	Version versions.Version
}

// rooted says whether the nodes run from a Debian release's root.
func (o ClusterOptions) rooted() bool { return o.Version.Rooted() }

// hasPartitionHandling says whether the version's rabbitmq.conf takes
// cluster_partition_handling: 3.x and 4.0 to 4.2 (Mnesia). 4.3 removed
// Mnesia and the partition handling strategies, and its release notes say
// the key is accepted with no effect; measured on 4.3.6, a node given it
// boots and takes it into its environment (that it has no effect was not
// measured: docs/measurements/rabbitmq-versions.md).
func (o ClusterOptions) hasPartitionHandling() bool {
	if !o.rooted() {
		return true
	}
	m, n := o.majorMinor()
	return m < 4 || m == 4 && n < 3
}

// khepriOptIn says whether a khepri cluster of the version enables the
// khepri_db feature flag once its nodes have joined: 4.0 to 4.2 (4.0 and
// 4.1 keep their metadata in Mnesia without it; 4.2.0 made Khepri the
// default of new deployments, which the flag makes sure of).
func (o ClusterOptions) khepriOptIn() bool {
	if !o.rooted() {
		return false
	}
	m, n := o.majorMinor()
	return m == 4 && n < 3
}

// majorMinor reads a rooted version's name ("4.3.6": 4, 3).
func (o ClusterOptions) majorMinor() (major, minor int) {
	ma, mi, _ := strings.Cut(o.Version.Name, ".")
	major, _ = strconv.Atoi(ma)
	minor, _ = strconv.Atoi(strings.SplitN(mi, ".", 2)[0])
	return major, minor
}

// khepriEnabled says whether list_feature_flags' name and state columns
// list khepri_db enabled.
func khepriEnabled(out string) bool {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "khepri_db" {
			return f[1] == "enabled"
		}
	}
	return false
}

// forcePartitionHandling writes cluster_partition_handling for every
// version: for the test that measures what 4.3 does with the key.
var forcePartitionHandling = false

// versionNamed is " 4.3.6" for a version of a root, "" for the machine's
// own: for names in messages.
func (o ClusterOptions) versionNamed() string {
	if o.rooted() {
		return " " + o.Version.Name
	}
	return ""
}

// ClusterPreflight says what this machine lacks to start a cluster, in
// words that say how to get it: a network lab (root, ip) and Debian's
// rabbitmq-server.
func ClusterPreflight() error { return ClusterPreflightOf(versions.Version{}) }

// ClusterPreflightOf is ClusterPreflight for nodes of version v: a
// version of a root needs a network lab and the root (made, or makeable:
// that is StartCluster's to find out, and it says so with an error that
// matches debroot.ErrUnavailable); any other, the machine's
// rabbitmq-server.
func ClusterPreflightOf(v versions.Version) error {
	if err := netns.Preflight(); err != nil {
		return err
	}
	if v.Rooted() {
		if v.Server != "rabbitmq" {
			return fmt.Errorf("%s is not a version of RabbitMQ", v)
		}
		return nil
	}
	for _, b := range []string{ServerBin, CtlBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("no %s (apt-get install rabbitmq-server): %w", b, err)
		}
	}
	return nil
}

// A Cluster is a private RabbitMQ cluster: one node per host of a network
// lab (adapters/host/netns), joined to the first. The lab is the caller's: it
// cuts, isolates and heals the nodes' links.
type Cluster struct {
	Nodes []*Node
	o     ClusterOptions
}

// A Node is one node of a Cluster: rabbitmq-server in its host's
// namespace, named rabbit@<its address> (long names: no host names to
// resolve), listening on AMQP's default port there, its files under
// dir/<host>.
type Node struct {
	Host string // the lab host's name
	Name string // the Erlang node name, rabbit@198.18.x.2
	Addr string // host:5672, reachable from the caller's namespace
	dir  string
	env  []string
	lab  *netns.Lab
	proc proc.Proc
	// run is the node's run from its version's root, in its host's
	// network namespace; nil for the machine's own RabbitMQ.
	run *versions.Run
	ns  string // its host's network namespace
}

// URL is an AMQP URL of the node, for the guest user (which the cluster
// lets in from other hosts).
func (n *Node) URL() string { return "amqp://guest:guest@" + n.Addr + "/" }

// StartCluster starts one node in each named host of lab (all of the
// lab's hosts if none are named), files under dir (the caller's to
// remove), and joins every node to the first. It returns once every node
// runs its broker in one cluster, or, on any failure, having stopped what
// it started.
func StartCluster(ctx context.Context, lab *netns.Lab, dir string, o ClusterOptions, hosts ...string) (*Cluster, error) {
	o, err := o.checked()
	if err != nil {
		return nil, fmt.Errorf("rabbitmq cluster: %w", err)
	}
	if len(hosts) == 0 {
		for _, h := range lab.Hosts() {
			hosts = append(hosts, h.Name)
		}
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	cookie := make([]byte, 16)
	rand.Read(cookie)
	c := &Cluster{o: o}
	for _, name := range hosts {
		n, err := newNode(ctx, lab, name, dir, hex.EncodeToString(cookie), o)
		if err != nil {
			return nil, fmt.Errorf("rabbitmq cluster: %w", err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	if err := c.form(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("rabbitmq cluster: %w", err)
	}
	return c, nil
}

// checked is o with its defaults, or what is wrong with it: its mode for
// its version, net_ticktime in whole seconds, a version of RabbitMQ that
// can run a cluster here.
func (o ClusterOptions) checked() (ClusterOptions, error) {
	mode, err := o.Mode()
	if err != nil {
		return o, err
	}
	o.PartitionHandling = mode
	if o.NetTicktime == 0 {
		o.NetTicktime = DefaultNetTicktime
	}
	if o.NetTicktime < time.Second || o.NetTicktime%time.Second != 0 {
		return o, fmt.Errorf("net_ticktime %v: whole seconds, at least 1 s", o.NetTicktime)
	}
	if o.Version.Server != "" && o.Version.Server != "rabbitmq" {
		return o, fmt.Errorf("%s is not a version of RabbitMQ", o.Version)
	}
	return o, ClusterPreflightOf(o.Version)
}

// newNode is the node of host name of lab, its files under dir/name
// written (the Erlang cookie, the configuration), not started.
func newNode(ctx context.Context, lab *netns.Lab, name, dir, cookie string, o ClusterOptions) (*Node, error) {
	h, err := lab.Host(name)
	if err != nil {
		return nil, err
	}
	n := &Node{Host: name, Name: "rabbit@" + h.Addr.String(), Addr: net.JoinHostPort(h.Addr.String(), "5672"),
		dir: filepath.Join(dir, name), lab: lab, ns: h.NS}
	if o.rooted() {
		// The node's directory, bound at /lockprover, is root's (the
		// node runs as root, as the machine's does).
		if n.run, err = o.Version.Prepare(ctx, n.dir, "", h.NS, nil, nil); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Version, err)
		}
	}
	if err := n.files(cookie, o); err != nil {
		return nil, err
	}
	n.proc = proc.Proc{Name: "rabbitmq" + o.versionNamed() + ": node " + n.Name, Log: filepath.Join(n.dir, "server.log")}
	n.proc.Command = n.run.Launcher()
	return n, nil
}

// form boots c's nodes side by side, joins each to the first one after
// the other, and on a Khepri cluster of a version before 4.3 enables
// khepri_db (khepriOptIn). Measured on 2 cores, from nothing to one
// cluster: three 3.10.8 nodes in 10.8 to 25.6 s, three 4.3.6 nodes in 8
// to 14 s (docs/broker-semantics.md section 5,
// docs/measurements/rabbitmq-versions.md). The caller stops c on an
// error.
func (c *Cluster) form(ctx context.Context) error {
	errs := make(chan error, len(c.Nodes))
	for _, n := range c.Nodes {
		go func() { errs <- n.start(ctx) }()
	}
	var all []error
	for range c.Nodes {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	for _, n := range c.Nodes[1:] {
		if err := n.join(ctx, c.Nodes[0]); err != nil {
			return err
		}
	}
	if c.o.PartitionHandling == Khepri && c.o.khepriOptIn() {
		return c.enableKhepri(ctx)
	}
	return nil
}

// enableKhepri enables 4.0's Khepri, an opt-in, on the formed cluster (its
// Mnesia data migrated; its rabbitmqctl refuses without --opt-in), and
// checks that every node says so, or the cluster is not what it claims.
func (c *Cluster) enableKhepri(ctx context.Context) error {
	o := c.o
	if out, err := c.Nodes[0].Ctl(ctx, "enable_feature_flag", "--opt-in", "khepri_db"); err != nil {
		return fmt.Errorf("enabling khepri_db on %s: %w: %s", o.Version, err, strings.TrimSpace(out))
	}
	for _, n := range c.Nodes {
		out, err := n.Ctl(ctx, "-q", "list_feature_flags", "name", "state", "--no-table-headers")
		if err != nil || !khepriEnabled(out) {
			return fmt.Errorf("%s: khepri_db not enabled on %s after enable_feature_flag (%v): %s", o.Version, n.Host, err, strings.TrimSpace(out))
		}
	}
	return nil
}

// Mode is the cluster's mode o asks for, given its version: "" is
// Ignore (RabbitMQ's default) where Mnesia's modes exist and Khepri where
// they do not (4.3 and later); a Mnesia mode asked of 4.3 and Khepri
// asked of a Mnesia version are refused, naming the version.
func (o ClusterOptions) Mode() (string, error) {
	m := o.PartitionHandling
	if !slices.Contains(Modes, m) && m != "" {
		return "", fmt.Errorf("partition handling %q: want one of %s", m, strings.Join(Modes, ", "))
	}
	mnesia := o.hasPartitionHandling()
	version := "RabbitMQ " + o.Version.Name
	if o.Version.Name == "" {
		version = "the machine's RabbitMQ"
	}
	switch {
	case m == "" && mnesia:
		return Ignore, nil
	case m == "":
		return Khepri, nil
	case m == Khepri && mnesia && !o.khepriOptIn():
		return "", fmt.Errorf("partition handling khepri: %s keeps its metadata in Mnesia and has no Khepri (4.0.5 takes it as an opt-in, 4.3.6 runs nothing else: --server-version); want ignore, pause_minority or autoheal", version)
	case m != Khepri && !mnesia && !forcePartitionHandling:
		return "", fmt.Errorf("partition handling %s: %s has no cluster_partition_handling (4.3 removed Mnesia and its modes; its metadata lives in Khepri): want khepri", m, version)
	}
	return m, nil
}

// files writes the node's configuration, cookie and directories, and
// the environment its server and rabbitmqctl run with.
func (n *Node) files(cookie string, o ClusterOptions) error {
	for _, d := range []string{"mnesia", "log", "home"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	conf := "loopback_users = none\nlisteners.tcp.default = 5672\n"
	if o.PartitionHandling != Khepri && (o.hasPartitionHandling() || forcePartitionHandling) {
		conf += "cluster_partition_handling = " + o.PartitionHandling + "\n"
	}
	files := []struct {
		name, text string
		mode       os.FileMode
	}{
		{"rabbitmq.conf", conf, 0o644},
		{"advanced.config", fmt.Sprintf("[{kernel, [{net_ticktime, %d}]}].\n", int(o.NetTicktime/time.Second)), 0o644},
		{"enabled_plugins", "[].\n", 0o644},
		// Not the machine's /etc/rabbitmq/rabbitmq-env.conf, which may
		// bind epmd and the node's distribution to 127.0.0.1 (Debian's
		// single node), where the other nodes cannot reach them.
		{"rabbitmq-env.conf", "", 0o644},
		{"home/.erlang.cookie", cookie, 0o400},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(n.dir, f.name), []byte(f.text), f.mode); err != nil {
			return err
		}
	}
	// Paths as the node sees them: under /lockprover from a root.
	in := func(name string) string { return n.in(filepath.Join(n.dir, name)) }
	n.env = []string{
		"HOME=" + in("home"),
		"RABBITMQ_USE_LONGNAME=true",
		"RABBITMQ_NODENAME=" + n.Name,
		"RABBITMQ_MNESIA_BASE=" + in("mnesia"),
		"RABBITMQ_LOG_BASE=" + in("log"),
		"RABBITMQ_CONFIG_FILE=" + in("rabbitmq.conf"),
		"RABBITMQ_CONF_ENV_FILE=" + in("rabbitmq-env.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + in("advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + in("enabled_plugins"),
		"RABBITMQ_PID_FILE=" + in("rabbit.pid"),
		"ERL_CRASH_DUMP=" + in("erl_crash.dump"),
		"RABBITMQ_LOGS=-", // the server's log on its output: server.log
		"PATH=/usr/lib/rabbitmq/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	}
	return nil
}

// in is path (under the node's directory) as the node sees it.
func (n *Node) in(path string) string {
	if n.run == nil {
		return path
	}
	return n.run.In(path)
}

// script is the command line, from /bin/sh, that runs name with the
// node's environment under a lowered open-file limit (Erlang spends
// seconds closing every possible descriptor at start when the limit is
// high).
func (n *Node) script(name string, args ...string) []string {
	a := append([]string{"/bin/sh", "-c", `ulimit -n 4096; exec env "$@"`, "sh"}, n.env...)
	return append(append(a, name), args...)
}

// command runs name with the node's environment in its namespace (for the
// machine's RabbitMQ; a node of a root runs its commands through its run).
func (n *Node) command(name string, args ...string) (bin string, argv []string, err error) {
	a := n.script(name, args...)
	return n.lab.Exec(n.Host, a[0], a[1:]...)
}

func (n *Node) start(ctx context.Context) error {
	if n.run != nil {
		a := n.script(ServerBin)
		return n.proc.Launch(ctx, a[0], a[1:], "on "+n.Addr, n.ready)
	}
	bin, argv, err := n.command(ServerBin)
	if err != nil {
		return err
	}
	return n.proc.Launch(ctx, bin, argv, "on "+n.Addr, n.ready)
}

// ctlArgs are rabbitmqctl's arguments for the node: --longnames from a
// root (4.x's CLI does not take RABBITMQ_USE_LONGNAME from the
// environment alone: rabbitmq4.md), -n, then args.
func (n *Node) ctlArgs(args ...string) []string {
	a := []string{"-n", n.Name}
	if n.run != nil {
		a = append([]string{"--longnames"}, a...)
	}
	return append(a, args...)
}

// ready says whether the node's broker takes AMQP connections.
func (n *Node) ready(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := amqp.DialConfig(n.URL(), amqp.Config{Dial: func(network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(dctx, network, addr)
	}})
	if err != nil {
		return err
	}
	return conn.Close()
}

// Ctl runs rabbitmqctl against the node (-n), from the node's namespace,
// and returns its output; an error quotes it.
func (n *Node) Ctl(ctx context.Context, args ...string) (string, error) {
	var cmd *exec.Cmd
	if n.run != nil {
		var err error
		if cmd, err = n.run.Command(ctx, n.script(CtlBin, n.ctlArgs(args...)...)...); err != nil {
			return "", err
		}
	} else {
		bin, argv, err := n.command(CtlBin, n.ctlArgs(args...)...)
		if err != nil {
			return "", err
		}
		cmd = exec.CommandContext(ctx, bin, argv...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("rabbitmqctl %s on %s: %v: %s", strings.Join(args, " "), n.Name, err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// join makes n a member of to's cluster: stop_app, join_cluster,
// start_app, then waits for its broker.
func (n *Node) join(ctx context.Context, to *Node) error {
	for _, args := range [][]string{{"stop_app"}, {"join_cluster", to.Name}, {"start_app"}} {
		if _, err := n.Ctl(ctx, args...); err != nil {
			return fmt.Errorf("%w\n%s", err, n.proc.LogTail())
		}
	}
	for {
		if err := n.ready(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not ready after joining %s: %w", n.Name, to.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Node is the node on that lab host, nil if none.
func (c *Cluster) Node(host string) *Node {
	for _, n := range c.Nodes {
		if n.Host == host {
			return n
		}
	}
	return nil
}

// Options are the options the cluster was made with, defaults filled in.
func (c *Cluster) Options() ClusterOptions { return c.o }

// beam is the pid of the node's Erlang VM (the server script's child):
// the process to kill for a crash and to stop for a pause. A node of a
// root writes the pid its PID namespace gives the VM: beam finds the VM
// among its run's processes by that pid (hostPID).
func (n *Node) beam() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.dir, "rabbit.pid"))
	if err != nil {
		return 0, fmt.Errorf("%s: no pid file: %w", n.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: pid file %q", n.Name, b)
	}
	if n.run == nil {
		return pid, nil
	}
	host := hostPID(n.proc.PID(), pid)
	if host == 0 {
		return 0, fmt.Errorf("%s: no process of pid %d in its run's namespace: %w", n.Name, pid, errNoVM)
	}
	return host, nil
}

// errNoVM is beam's error when a node of a root has a pid file but its VM
// is not among its run's processes (gone, or a stale file).
var errNoVM = errors.New("its Erlang VM is not running")

// hostPID is the machine's pid of the descendant of init (the init of a
// PID namespace, by the machine's pid) whose pid in that namespace is
// nsPID; 0 if none.
func hostPID(init, nsPID int) int {
	if init <= 0 {
		return 0
	}
	seen := map[int]bool{}
	todo := []int{init}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if p != init && innermostPID(p) == nsPID {
			return p
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					todo = append(todo, c)
				}
			}
		}
	}
	return 0
}

// innermostPID is pid's pid in its innermost PID namespace (the last of
// NSpid in /proc/pid/status), 0 if it cannot be read.
func innermostPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			p, _ := strconv.Atoi(f[len(f)-1])
			return p
		}
	}
	return 0
}

// Pause stops the node's VM (SIGSTOP) until Resume: alive to the kernel,
// its connections open, answering nothing, its peers' ticks unanswered.
func (n *Node) Pause() error {
	pid, err := n.beam()
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGSTOP)
}

// Resume continues a paused node (SIGCONT).
func (n *Node) Resume() error {
	pid, err := n.beam()
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGCONT)
}

// Crash kills the node's VM (SIGKILL): its clients' and peers'
// connections are reset at once by the kernel. It stays down until
// Start.
func (n *Node) Crash() error {
	pid, err := n.beam()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	return n.proc.Halt(syscall.SIGTERM, 10*time.Second) // the script, once its VM is gone
}

// Start starts a crashed or stopped node again on its data (it rejoins
// its cluster by itself), returning once its broker takes connections.
func (n *Node) Start(ctx context.Context) error {
	if err := n.clearOld(ctx, 5*time.Second, 10*time.Second); err != nil {
		return err
	}
	os.Remove(filepath.Join(n.dir, "rabbit.pid"))
	return n.start(ctx)
}

// clearOld waits, before the node starts again, until no broker VM of
// the node runs: one that outlived its script's stop (a loaded machine;
// a pid file not yet written when the VM was to be killed) still holds the
// node's name and distribution port, and the new one would stop at once
// (dist_port_already_used). It kills those left after grace, and errs,
// naming them, if one is still there after limit.
func (n *Node) clearOld(ctx context.Context, grace, limit time.Duration) error {
	start := time.Now()
	killed := false
	for {
		left := n.brokerVMs()
		if len(left) == 0 {
			return nil
		}
		switch d := time.Since(start); {
		case d >= limit:
			return fmt.Errorf("%s: an earlier broker VM of the node still runs (pid %v) %v after it was to stop", n.Name, left, limit)
		case d >= grace && !killed:
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			killed = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// brokerVMs are the pids of the node's broker VMs that run: an Erlang VM
// whose command line names the node's home and boots rabbit (not a
// rabbitmqctl's VM, which names the home too, nor a zombie, whose command
// line is empty).
func (n *Node) brokerVMs() []int {
	home := "-home " + n.in(filepath.Join(n.dir, "home")) + " "
	// From a root every node's home is /lockprover/home: a node's VMs are
	// those in its host's network namespace.
	var netNS uint64
	if n.run != nil {
		st, err := os.Stat(filepath.Join("/run/netns", n.ns))
		if err != nil {
			return nil // no namespace, no VM in it
		}
		netNS = st.Sys().(*syscall.Stat_t).Ino
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(line, home) && strings.Contains(line, "-s rabbit boot") {
			if netNS != 0 {
				st, err := os.Stat(filepath.Join(filepath.Dir(p), "ns/net"))
				if err != nil || st.Sys().(*syscall.Stat_t).Ino != netNS {
					continue
				}
			}
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Stop stops every node at once (SIGTERM, SIGKILL after 30 s) and waits
// for them to be gone. It leaves the directory and the lab (whose Close
// ends the nodes' epmd) to the caller.
func (c *Cluster) Stop() error {
	errs := make(chan error, len(c.Nodes))
	for _, n := range c.Nodes {
		go func() {
			n.Resume() // a paused VM must run to stop
			errs <- n.proc.Stop(30 * time.Second)
		}()
	}
	var all []error
	for range c.Nodes {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// Restart stops the node (SIGTERM: a clean stop) and starts it again on
// its data, returning once its broker takes connections: what RabbitMQ's
// docs tell an operator to do to the side of a partition given up.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.halt(); err != nil {
		return err
	}
	return n.Start(ctx)
}

// halt stops the node cleanly (SIGTERM), for Restart.
func (n *Node) halt() error {
	pid, _ := n.beam()
	err := n.proc.Halt(syscall.SIGTERM, 30*time.Second)
	// The script stops its VM on SIGTERM; if it had to be killed for
	// taking longer, its VM may still run, holding the node's name: the
	// start would exit at once.
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err != nil && !errors.Is(err, proc.ErrKilled) {
		return err
	}
	return nil
}

// CtlCommand is the command that runs rabbitmqctl against the node from
// its namespace, with the cluster's cookie (what a RabbitMQ target's Ctl
// takes): rabbitmqctl's own arguments follow it.
//
// For a node of a root the command is its run's, made an argument list:
// unshare gives it the PID and private mount namespaces the run's
// command gets from its process attributes (--kill-child: the run ends
// with unshare), env -i its environment.
func (n *Node) CtlCommand() ([]string, error) {
	if n.run != nil {
		cmd, err := n.run.Command(context.Background(), n.script(CtlBin, n.ctlArgs()...)...)
		if err != nil {
			return nil, err
		}
		out := []string{"unshare", "--pid", "--fork", "--mount", "--propagation", "private", "--kill-child", "env", "-i"}
		out = append(out, cmd.Env...)
		return append(out, cmd.Args...), nil
	}
	bin, argv, err := n.command(CtlBin, n.ctlArgs()...)
	if err != nil {
		return nil, err
	}
	return append([]string{bin}, argv...), nil
}

// Up says whether the node's server runs (it may be paused).
func (n *Node) Up() bool { return n.proc.PID() != 0 }

// A Status is what one node says of its cluster (cluster_status).
type Status struct {
	Running    []string            `json:"running_nodes"`
	Partitions map[string][]string `json:"partitions"`
}

// Status asks the node what it sees of its cluster.
func (n *Node) Status(ctx context.Context) (Status, error) {
	var st Status
	out, err := n.Ctl(ctx, "cluster_status", "--formatter", "json")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return st, fmt.Errorf("cluster_status on %s: %v: %q", n.Name, err, out)
	}
	return st, nil
}

// poll asks every node at once what it sees of the cluster (nil where a
// node is down or does not answer: rabbitmqctl boots a VM of its own for
// each call, 0.5 to 0.8 s of a quiet machine), and says whether they
// agree: every node sees every node running and none lists a partition.
func (c *Cluster) poll(ctx context.Context, r *Recovery) (sts []*Status, agree bool) {
	r.Polls++
	sts = make([]*Status, len(c.Nodes))
	took := make([]time.Duration, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		if !n.Up() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			st, err := n.Status(ctx)
			took[i] = time.Since(t0)
			if err == nil {
				sts[i] = &st
			}
		}()
	}
	wg.Wait()
	agree = true
	for i, st := range sts {
		if took[i] > 0 {
			r.Calls++
			r.Status += took[i]
		}
		if st == nil || len(st.Partitions) > 0 || len(st.Running) != len(c.Nodes) {
			agree = false
		}
	}
	return sts, agree
}

// agreed says whether every node runs, each sees every node running and
// none lists a partition.
func (c *Cluster) agreed(ctx context.Context, r *Recovery) bool {
	_, ok := c.poll(ctx, r)
	return ok
}

// splitForGood says, of what the nodes said of the cluster, whether it
// will not agree again by itself: under ignore, a node that lists a
// partition (it saw a peer it had declared down come back) keeps listing
// it until a node it lists goes down (RabbitMQ's rabbit_node_monitor
// forgets partitions only then; C.8: still listed 40 s after the heal),
// and nothing under ignore takes a node down. Under pause_minority and
// autoheal a listed partition is what the mode resolves.
func splitForGood(mode string, sts []*Status) bool {
	if mode != Ignore {
		return false
	}
	for _, st := range sts {
		if st != nil && len(st.Partitions) > 0 {
			return true
		}
	}
	return false
}

// awaitAgreement polls until the cluster agrees, or limit passes, or it
// is split for good (splitForGood): it returns what the nodes said last
// and whether they agree. While a node takes no AMQP connection (its
// application stopped or starting: it cannot agree yet) it asks
// rabbitmqctl only every slowPoll, whose VMs cost a second of CPU each
// on a loaded machine: a node autoheal restarts took 20 to 50 s there,
// polled some 20 times.
func (c *Cluster) awaitAgreement(ctx context.Context, limit time.Duration, r *Recovery) ([]*Status, bool) {
	return pollUntilAgreed(ctx, c.o.PartitionHandling, limit, r, c.poll, c.allServe)
}

// pollUntilAgreed is Cluster.awaitAgreement with its polls (poll, and
// serve, whether every node takes connections) given.
func pollUntilAgreed(ctx context.Context, mode string, limit time.Duration, r *Recovery,
	poll func(context.Context, *Recovery) ([]*Status, bool), serve func(context.Context) bool) ([]*Status, bool) {
	defer func(t0 time.Time) { r.Agreement += time.Since(t0) }(time.Now())
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var sts []*Status
	var last time.Time
	for {
		if last.IsZero() || time.Since(last) >= slowPoll || serve(ctx) {
			last = time.Now()
			var ok bool
			if sts, ok = poll(ctx, r); ok {
				return sts, true
			}
			if splitForGood(mode, sts) {
				r.Stuck++
				return sts, false
			}
		} else {
			r.Skipped++
		}
		select {
		case <-ctx.Done():
			return sts, false
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// slowPoll is how often awaitAgreement asks rabbitmqctl while a node
// takes no connection.
const slowPoll = 5 * time.Second

// allServe says whether every node takes AMQP connections.
func (c *Cluster) allServe(ctx context.Context) bool {
	for _, n := range c.Nodes {
		if !n.Up() || n.ready(ctx) != nil {
			return false
		}
	}
	return true
}

// givenUp is which nodes (indexes into names, the nodes' names in the
// cluster's order) an operator restarts to make a split cluster one,
// from what each said of it (nil: nothing): those outside the largest
// side a node sees running (the first such node's side of a tie), or, if
// none is outside it, every node but the first. The simulated cluster's
// Settle gives up the same nodes (sim's givenUp), so that the quiescent
// probe after a plan finds the same records kept on both.
func givenUp(names []string, sts []*Status) []int {
	var kept []string
	for _, st := range sts {
		if st != nil && len(st.Running) > len(kept) {
			kept = st.Running
		}
	}
	var given []int
	for i, name := range names {
		if !slices.Contains(kept, name) {
			given = append(given, i)
		}
	}
	if len(given) == 0 {
		for i := range names[1:] {
			given = append(given, i+1)
		}
	}
	return given
}

// A Recovery says what Recover did and where its time went.
type Recovery struct {
	// Did is what it had to do, in order: "healed the lab", "started n2",
	// "restarted n1".
	Did []string
	// Heal is the lab's heal and the continuation of paused nodes;
	// Starts, the starts of crashed nodes; Restarts, the operator's
	// restarts of the nodes given up (Stops of it their clean stops, the
	// rest their starts); Agreement, the waits until the cluster agrees,
	// in Polls rounds of Calls of cluster_status, which took Status
	// together (a round's calls run at once).
	Heal, Starts, Agreement, Restarts, Stops, Status time.Duration
	Polls, Calls                                     int
	// Stuck counts the waits cut short by a partition that stays listed
	// (splitForGood); Skipped, the polls not made while a node took no
	// connection.
	Stuck, Skipped int
}

// String is what Recover did, for a run's log.
func (r Recovery) String() string { return strings.Join(r.Did, ", ") }

// Restarted says whether an operator's restart was needed.
func (r Recovery) Restarted() bool {
	return slices.ContainsFunc(r.Did, func(d string) bool { return strings.HasPrefix(d, "restarted ") })
}

// Times says where its time went.
func (r Recovery) Times() string {
	per := 0.0
	if r.Calls > 0 {
		per = r.Status.Seconds() / float64(r.Calls)
	}
	restarts := 0
	for _, d := range r.Did {
		if strings.HasPrefix(d, "restarted ") {
			restarts++
		}
	}
	stuck := ""
	if r.Stuck > 0 {
		stuck = fmt.Sprintf(", %d cut short by a lasting partition", r.Stuck)
	}
	if r.Skipped > 0 {
		stuck += fmt.Sprintf(", %d skipped while a node took no connection", r.Skipped)
	}
	return fmt.Sprintf("agreement %.0fs in %d polls (%d cluster_status, %.1fs each%s), %d restarts %.0fs (stops %.0fs), starts %.0fs, heal %.0fs",
		r.Agreement.Seconds(), r.Polls, r.Calls, per, stuck, restarts, r.Restarts.Seconds(), r.Stops.Seconds(), r.Starts.Seconds(), r.Heal.Seconds())
}

// Recover brings the cluster back to one after a plan's faults: it heals
// every cut of the lab, continues paused nodes, starts crashed ones and
// waits until the cluster agrees again (every node running, no partition
// listed). A cluster that stays split (ignore never merges by itself:
// splitForGood) is recovered as RabbitMQ's docs tell an operator to: the
// nodes of the side given up are restarted (givenUp), and if it is still
// split, the nodes one after the other until it agrees (restartUntil).
// It says what it had to do and where its time went, also with an error.
func (c *Cluster) Recover(ctx context.Context, lab *netns.Lab) (Recovery, error) {
	var r Recovery
	t0 := time.Now()
	if len(lab.Cuts()) > 0 {
		if err := lab.Heal(ctx); err != nil {
			return r, err
		}
		r.Did = append(r.Did, "healed the lab")
	}
	for _, n := range c.Nodes {
		if !n.Up() {
			t1 := time.Now()
			if err := n.Start(ctx); err != nil {
				return r, err
			}
			r.Starts += time.Since(t1)
			r.Did = append(r.Did, "started "+n.Host)
		} else if err := n.Resume(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return r, err // (no pid file: a node still starting, not paused)
		}
	}
	r.Heal = time.Since(t0) - r.Starts
	// Within two tick times a healed cluster has merged (pause_minority,
	// autoheal), or it never will by itself (ignore).
	sts, ok := c.awaitAgreement(ctx, 2*c.o.NetTicktime+10*time.Second, &r)
	if ok {
		return r, nil
	}
	restart := func(nodes []*Node) error {
		defer func(t0 time.Time) { r.Restarts += time.Since(t0) }(time.Now())
		for _, n := range nodes {
			t1 := time.Now()
			if err := n.halt(); err != nil {
				return err
			}
			r.Stops += time.Since(t1)
			if err := n.Start(ctx); err != nil {
				return err
			}
			r.Did = append(r.Did, "restarted "+n.Host)
		}
		return nil
	}
	if slices.Contains(sts, nil) {
		sts, _ = c.poll(ctx, &r) // one did not answer: ask again
	}
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
	}
	var given []*Node
	for _, i := range givenUp(names, sts) {
		given = append(given, c.Nodes[i])
	}
	if err := restart(given); err != nil {
		return r, err
	}
	if _, ok := c.awaitAgreement(ctx, time.Minute, &r); ok {
		return r, nil
	}
	// Still split: a node keeps the partitions it saw listed until it
	// restarts itself or a node it lists goes down (after a bridge, or
	// two partitions, the cluster is in three pieces): the nodes restart,
	// one after the other, until the cluster agrees.
	ok, err := restartUntil(len(c.Nodes), func(i int) error { return restart(c.Nodes[i : i+1]) }, func(last bool) bool {
		limit := 5 * time.Second // (a lasting partition ends the wait at once)
		if last {
			limit = time.Minute
		}
		_, ok := c.awaitAgreement(ctx, limit, &r)
		return ok
	})
	switch {
	case err != nil:
		return r, err
	case ok:
		return r, nil
	}
	return r, fmt.Errorf("%w after %s", ErrStillSplit, r)
}

// restartUntil restarts n nodes one after the other (restart(i)), asking
// after each whether the cluster agrees (agrees, told whether that was
// the last node), and stops at the first restart that made it agree: a
// node restarted into a cluster that agrees takes the records the others
// share, so that restarting the rest would change nothing but the time.
// It says whether the cluster agrees.
func restartUntil(n int, restart func(i int) error, agrees func(last bool) bool) (bool, error) {
	for i := range n {
		if err := restart(i); err != nil {
			return false, err
		}
		if agrees(i == n-1) {
			return true, nil
		}
	}
	return false, nil
}

// ErrStillSplit is Recover's error when the cluster stays split after
// every restart an operator would make: only Reset (which wipes the
// data) makes it one again.
var ErrStillSplit = errors.New("rabbitmq cluster: still split")

// Reset makes the cluster anew on the same hosts: every node stopped, its
// data (Mnesia, logs) wiped, started again and joined to the first, as
// StartCluster does.
func (c *Cluster) Reset(ctx context.Context) error {
	errs := make(chan error, len(c.Nodes))
	for _, n := range c.Nodes {
		go func() {
			n.Resume() // a paused VM must run to stop
			errs <- n.proc.Halt(syscall.SIGTERM, 30*time.Second)
		}()
	}
	for range c.Nodes {
		<-errs // a node that had to be killed is down all the same
	}
	for _, n := range c.Nodes {
		for _, d := range []string{"mnesia", "log"} {
			if err := os.RemoveAll(filepath.Join(n.dir, d)); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
				return err
			}
		}
		os.Remove(filepath.Join(n.dir, "rabbit.pid"))
	}
	for _, n := range c.Nodes {
		go func() { errs <- n.start(ctx) }()
	}
	var all []error
	for range c.Nodes {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	for _, n := range c.Nodes[1:] {
		if err := n.join(ctx, c.Nodes[0]); err != nil {
			return err
		}
	}
	return nil
}
