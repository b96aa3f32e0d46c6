package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// ClusterTiming is a cluster's default Raft timing: etcd's own defaults,
// a 100 ms heartbeat and a 1 s election timeout. The single server runs
// at half that, but a cluster's members share 2 cores with the prover and
// other servers here, and a member that misses 5 heartbeats for a
// scheduling stall starts a needless election; with these a lease's TTL is
// at least 2 s. Options change them.
const (
	ClusterHeartbeat       = 100 * time.Millisecond
	ClusterElectionTimeout = time.Second
)

// ClientPort and PeerPort are every member's ports: each member has a
// network namespace (a host of a netns lab) and an address of its own, so
// two labs' members never collide.
const (
	ClientPort = 2379
	PeerPort   = 2380
)

// A Cluster is a private etcd cluster, one member per host of a network
// lab (adapters/host/netns), started together with --initial-cluster. The lab
// is the caller's: it cuts, isolates and heals the members' links.
type Cluster struct {
	Members []*Member
}

// A Member is one member of a Cluster: an etcd process in its host's
// namespace, its data directory under the cluster's dir.
type Member struct {
	Name string // the lab host's name, also the member's name
	Addr string // host:2379, reachable from the caller's namespace
	peer string
	bin  string
	dir  string
	o    Options
	lab  *netns.Lab
	init string // --initial-cluster
	proc proc.Proc
	run  *versions.Run // its run from its version's root, in its host's namespace; nil for the machine's etcd
	// Its Restart stops the member (SIGTERM) and starts it again on its
	// data directory, returning once it is healthy (which needs a
	// quorum); its Crash kills it (SIGKILL) and starts it again as Restart
	// does; its Stop gives it 10 s (a leader cut off from its followers
	// can wait longer than that trying to hand its leadership over).
	proc.Daemon
}

// StartCluster starts one etcd member in each named host of lab (all of
// the lab's hosts if none are named), files under dir (the caller's to
// remove): dir/<name>/data and dir/<name>/etcd.log. With a version of a
// root (o.Version), every member is that version's etcd, from the root,
// in its host's network namespace. It returns once every
// member reports itself healthy (the cluster has a leader), or, on any
// failure, having stopped what it started. A zero Options means
// ClusterHeartbeat and ClusterElectionTimeout.
func StartCluster(ctx context.Context, lab *netns.Lab, dir string, o Options, names ...string) (*Cluster, error) {
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = ClusterHeartbeat
	}
	if o.ElectionTimeout == 0 {
		o.ElectionTimeout = ClusterElectionTimeout
	}
	if o.HeartbeatInterval < time.Millisecond || o.HeartbeatInterval%time.Millisecond != 0 ||
		o.ElectionTimeout%time.Millisecond != 0 || o.ElectionTimeout < 5*o.HeartbeatInterval {
		return nil, fmt.Errorf("etcd: heartbeat %v, election timeout %v: whole milliseconds, the timeout at least 5 heartbeats",
			o.HeartbeatInterval, o.ElectionTimeout)
	}
	if len(names) == 0 {
		for _, h := range lab.Hosts() {
			names = append(names, h.Name)
		}
	}
	bin, dir, err := o.prepare(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	var initial []string
	for _, n := range names {
		h, err := lab.Host(n)
		if err != nil {
			return nil, fmt.Errorf("etcd cluster: %w", err)
		}
		a := h.Addr.String()
		m := &Member{Name: n, Addr: a + ":" + strconv.Itoa(ClientPort), peer: "http://" + a + ":" + strconv.Itoa(PeerPort),
			bin: bin, dir: filepath.Join(dir, n), o: o, lab: lab}
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return nil, fmt.Errorf("etcd cluster: %w", err)
		}
		if m.run, err = o.rooted(ctx, m.dir, h.NS); err != nil {
			return nil, fmt.Errorf("etcd cluster: %w", err)
		}
		m.proc = proc.Proc{Name: "etcd: member " + n + o.named(), Log: filepath.Join(m.dir, "etcd.log"), Command: m.run.Launcher()}
		m.Daemon = proc.NewDaemon(&m.proc, m.start, proc.How{StopGrace: 10 * time.Second})
		initial = append(initial, n+"="+m.peer)
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		m.init = strings.Join(initial, ",")
	}
	// The members start at once: none is healthy before a quorum is up.
	errs := make(chan error, len(c.Members))
	for _, m := range c.Members {
		go func() { errs <- m.start(ctx) }()
	}
	var all []error
	for range c.Members {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		c.Stop()
		return nil, fmt.Errorf("etcd cluster: %w", err)
	}
	return c, nil
}

// URL is the member's client URL.
func (m *Member) URL() string { return "http://" + m.Addr }

func (m *Member) args() []string {
	return []string{
		"--name", m.Name,
		"--data-dir", in(m.run, filepath.Join(m.dir, "data")),
		"--listen-client-urls", m.URL(),
		"--advertise-client-urls", m.URL(),
		"--listen-peer-urls", m.peer,
		"--initial-advertise-peer-urls", m.peer,
		"--initial-cluster", m.init,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "lockprover-" + m.lab.ID,
		"--heartbeat-interval", strconv.FormatInt(m.o.HeartbeatInterval.Milliseconds(), 10),
		"--election-timeout", strconv.FormatInt(m.o.ElectionTimeout.Milliseconds(), 10),
		"--logger", "zap", "--log-outputs", "stderr",
	}
}

func (m *Member) start(ctx context.Context) error {
	bin, argv := m.bin, m.args()
	if m.run == nil {
		// A run from a root enters its host's namespace itself.
		var err error
		if bin, argv, err = m.lab.Exec(m.Name, m.bin, m.args()...); err != nil {
			return err
		}
	}
	return m.proc.Launch(ctx, bin, argv, "on "+m.Addr, func(ctx context.Context) error { return health(ctx, m.URL()) })
}

// Endpoints are every member's client URL, as clientv3.Config wants them.
func (c *Cluster) Endpoints() []string {
	var e []string
	for _, m := range c.Members {
		e = append(e, m.URL())
	}
	return e
}

// Member is the member of that name, nil if none.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Pause stops the member's process (SIGSTOP) until Resume: a member that
// is alive to the kernel (its connections stay open) but answers nothing.
func (m *Member) Pause() error { return m.proc.Signal(syscall.SIGSTOP) }

// Resume continues a paused member (SIGCONT).
func (m *Member) Resume() error { return m.proc.Signal(syscall.SIGCONT) }

// Stop stops every member at once (resuming a paused one first; SIGTERM,
// SIGKILL 10 s later: a leader cut off from its followers can wait longer
// than that trying to hand its leadership over) and waits for their
// processes to be gone. It leaves the directory and the lab to the caller.
func (c *Cluster) Stop() error {
	errs := make(chan error, len(c.Members))
	for _, m := range c.Members {
		go func() {
			m.Resume()
			errs <- m.Stop()
		}()
	}
	var all []error
	for range c.Members {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// Leader is the member that says it leads (each member asked in turn,
// within a second each, through the gRPC gateway's maintenance status);
// an error if none does.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	var errs []error
	for _, m := range c.Members {
		id, leader, err := m.status(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
			continue
		}
		if id != "" && id == leader {
			return m, nil
		}
	}
	return nil, fmt.Errorf("etcd cluster: no member leads: %w", errors.Join(errs...))
}

// status is the member's id and its leader's, as its maintenance status
// says them.
func (m *Member) status(ctx context.Context) (id, leader string, err error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, m.URL()+"/v3/maintenance/status", strings.NewReader("{}"))
	if err != nil {
		return "", "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var s struct {
		Header struct {
			MemberID string `json:"member_id"`
		}
		Leader string
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err := json.Unmarshal(b, &s); err != nil || resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("status: %s %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return s.Header.MemberID, s.Leader, nil
}

// Agreed says whether the cluster is whole again: every member is
// healthy (it has a leader) and all name the same one; or why not.
func (c *Cluster) Agreed(ctx context.Context) error {
	var first string
	for _, m := range c.Members {
		if err := health(ctx, m.URL()); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		_, leader, err := m.status(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if leader == "" || leader == "0" || first != "" && leader != first {
			return fmt.Errorf("%s names leader %q, another %q", m.Name, leader, first)
		}
		first = leader
	}
	return nil
}
