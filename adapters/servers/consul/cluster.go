package consul

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/host/proc"
)

// HTTPPort is every cluster agent's HTTP API port: each agent has a
// network namespace (a host of a netns lab) and an address of its own, so
// Consul's default ports (8300 RPC, 8301 Serf LAN, 8302 WAN, 8500 HTTP)
// never collide between agents or labs.
const HTTPPort = 8500

// A Cluster is a private Consul datacenter in a network lab: servers
// (`-server -bootstrap-expect N`, data directories kept across restarts)
// and a client agent per application node, which the node's clients talk
// to. Raft runs with raft_multiplier 1, the fastest timing Consul allows
// (the default 5 is for slow shared machines): leader lease 500 ms,
// election timeout 1 s, so a cut-off leader steps down within about a
// second. The lab is the caller's: it cuts, isolates and heals.
type Cluster struct {
	Servers []*Member
	Clients []*Member
}

// A Member is one agent of a Cluster.
type Member struct {
	Name   string // the lab host's name, also the agent's node name
	Addr   string // host:8500, reachable from the caller's namespace
	Server bool
	bin    string
	dir    string
	ttlMin time.Duration
	lab    *netns.Lab
	join   []string // the servers' addresses, -retry-join
	nsrv   int
	proc   proc.Proc
	// Its Restart stops the agent (SIGTERM) and starts it again on its
	// data directory, returning once it creates a session; its Crash
	// kills it (SIGKILL) and starts it again as Restart does.
	proc.Daemon
}

// StartCluster starts a server agent in each of the lab's hosts named in
// servers and a client agent in each named in clients, files under dir
// (the caller's to remove): dir/<name>/data and dir/<name>/consul.log. It
// returns once every agent creates a session (a leader is elected and the
// agent has joined), or, on any failure, having stopped what it started.
// o.Mode is ignored (a cluster keeps its state on disk); o.SessionTTLMin
// is every agent's session_ttl_min (0 means 1 s).
func StartCluster(ctx context.Context, lab *netns.Lab, dir string, o Options, servers, clients []string) (*Cluster, error) {
	if len(servers) == 0 {
		return nil, errors.New("consul cluster: no servers named")
	}
	bin, dir, err := o.prepare(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	var join []string
	mk := func(name string, server bool) (*Member, error) {
		h, err := lab.Host(name)
		if err != nil {
			return nil, fmt.Errorf("consul cluster: %w", err)
		}
		m := &Member{Name: name, Addr: fmt.Sprintf("%s:%d", h.Addr, HTTPPort), Server: server, bin: bin,
			dir: filepath.Join(dir, name), ttlMin: o.SessionTTLMin, lab: lab, nsrv: len(servers)}
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return nil, fmt.Errorf("consul cluster: %w", err)
		}
		m.proc = proc.Proc{Name: "consul: agent " + name + o.named(), Log: filepath.Join(m.dir, "consul.log")}
		m.Daemon = proc.NewDaemon(&m.proc, m.start, proc.How{})
		return m, nil
	}
	for _, n := range servers {
		m, err := mk(n, true)
		if err != nil {
			return nil, err
		}
		join = append(join, m.Addr[:len(m.Addr)-len(":8500")])
		c.Servers = append(c.Servers, m)
	}
	for _, n := range clients {
		m, err := mk(n, false)
		if err != nil {
			return nil, err
		}
		c.Clients = append(c.Clients, m)
	}
	all := c.members()
	for _, m := range all {
		m.join = join
	}
	errs := make(chan error, len(all))
	for _, m := range all {
		go func() { errs <- m.start(ctx) }()
	}
	var es []error
	for range all {
		es = append(es, <-errs)
	}
	if err := errors.Join(es...); err != nil {
		c.Stop()
		return nil, fmt.Errorf("consul cluster: %w", err)
	}
	return c, nil
}

func (c *Cluster) members() []*Member { return append(append([]*Member{}, c.Servers...), c.Clients...) }

// Member is the agent of that name, nil if none.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.members() {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// URL is the agent's HTTP API URL.
func (m *Member) URL() string { return "http://" + m.Addr }

func (m *Member) args() []string {
	host := m.Addr[:len(m.Addr)-len(":8500")]
	args := []string{"agent", "-node", m.Name, "-data-dir", filepath.Join(m.dir, "data"),
		"-bind", host, "-client", host, "-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1",
		"-hcl", fmt.Sprintf("session_ttl_min = %q", m.ttlMin.String()),
		"-hcl", "disable_update_check = true",
		"-hcl", "performance { raft_multiplier = 1 }",
		"-log-level", "info"}
	if m.Server {
		args = append(args, "-server", "-bootstrap-expect", fmt.Sprint(m.nsrv))
	}
	for _, j := range m.join {
		if j != host {
			args = append(args, "-retry-join", j, "-retry-interval", "1s")
		}
	}
	return args
}

func (m *Member) start(ctx context.Context) error {
	bin, argv, err := m.lab.Exec(m.Name, m.bin, m.args()...)
	if err != nil {
		return err
	}
	return m.proc.Launch(ctx, bin, argv, "on "+m.Addr, m.probe)
}

// probe creates a session through the agent and destroys it: it works
// once the agent has joined and the servers have a leader.
func (m *Member) probe(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var out struct{ ID string }
	body := `{"Name":"lockprover-probe","TTL":"10s","Behavior":"delete","LockDelay":"0s"}`
	if err := Call(c, http.DefaultClient, http.MethodPut, m.URL(), "/v1/session/create", []byte(body), &out); err != nil {
		return err
	}
	return Call(c, http.DefaultClient, http.MethodPut, m.URL(), "/v1/session/destroy/"+out.ID, nil, nil)
}

// Pause stops the agent's process (SIGSTOP) until Resume.
func (m *Member) Pause() error { return m.proc.Signal(syscall.SIGSTOP) }

// Resume continues a paused agent (SIGCONT).
func (m *Member) Resume() error { return m.proc.Signal(syscall.SIGCONT) }

// Stop stops every agent (resuming a paused one first) and waits for
// their processes to be gone: the client agents first, which leave the
// cluster through its servers on SIGTERM (with the servers gone, each
// waited out its 30 s). It leaves the directory and the lab to the
// caller.
func (c *Cluster) Stop() error {
	var errs []error
	for _, m := range append(append([]*Member{}, c.Clients...), c.Servers...) {
		m.Resume()
		if err := m.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Leader is the server the cluster's servers say leads, asking each in
// turn (each within a second): the first non-empty answer names it. An
// error if none answers with a leader (an election under way, or a
// majority cut off from every server asked).
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	var errs []error
	for _, s := range c.Servers {
		var leader string
		err := within1s(ctx, http.MethodGet, s.URL(), "/v1/status/leader", &leader)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
			continue
		}
		for _, m := range c.Servers {
			if host, _, _ := strings.Cut(leader, ":"); host != "" && host == strings.TrimSuffix(m.Addr, fmt.Sprintf(":%d", HTTPPort)) {
				return m, nil
			}
		}
		errs = append(errs, fmt.Errorf("%s: no leader (%q)", s.Name, leader))
	}
	return nil, fmt.Errorf("consul cluster: no leader: %w", errors.Join(errs...))
}

// Agreed says whether the cluster is whole again: every server names the
// same leader, every server is a voter of the leader's Raft configuration,
// every agent the first server knows is alive (Serf status 1), and every
// agent creates a session; or why not. The voters matter: Consul's
// autopilot (cleanup_dead_servers, on by default) removes a server Serf
// declared failed from the Raft configuration, and takes it back, once it
// rejoins, as a non-voter, promoted only after server_stabilization_time
// (10 s); until then the cluster has two voters, and a second fault on a
// server leaves it without a leader (measured: 14 s with none, K.6).
func (c *Cluster) Agreed(ctx context.Context) error {
	var leaders []string
	for _, s := range c.Servers {
		var leader string
		err := within1s(ctx, http.MethodGet, s.URL(), "/v1/status/leader", &leader)
		if err != nil || leader == "" {
			return fmt.Errorf("%s names no leader (%v)", s.Name, err)
		}
		leaders = append(leaders, leader)
	}
	for _, l := range leaders[1:] {
		if l != leaders[0] {
			return fmt.Errorf("the servers name different leaders: %v", leaders)
		}
	}
	if err := c.voters(ctx); err != nil {
		return err
	}
	var members []struct {
		Name   string
		Status int
	}
	err := within1s(ctx, http.MethodGet, c.Servers[0].URL(), "/v1/agent/members", &members)
	if err != nil {
		return fmt.Errorf("%s: members: %w", c.Servers[0].Name, err)
	}
	alive := map[string]bool{}
	for _, m := range members {
		alive[m.Name] = m.Status == 1
	}
	for _, m := range c.members() {
		if !alive[m.Name] {
			return fmt.Errorf("%s is not alive in %s's view", m.Name, c.Servers[0].Name)
		}
		if err := m.probe(ctx); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	return nil
}

// voters says whether every server is a voter of the Raft configuration,
// as the leader has it (/v1/operator/raft/configuration, asked of the
// first server: it forwards to the leader); or which is not.
func (c *Cluster) voters(ctx context.Context) error {
	var conf struct {
		Servers []struct {
			Node  string
			Voter bool
		}
	}
	err := within1s(ctx, http.MethodGet, c.Servers[0].URL(), "/v1/operator/raft/configuration", &conf)
	if err != nil {
		return fmt.Errorf("%s: raft configuration: %w", c.Servers[0].Name, err)
	}
	voter := map[string]bool{}
	for _, s := range conf.Servers {
		voter[s.Node] = s.Voter
	}
	for _, s := range c.Servers {
		if !voter[s.Name] {
			return fmt.Errorf("%s is no voter of the Raft configuration yet (autopilot promotes a server that rejoined after server_stabilization_time, 10 s)", s.Name)
		}
	}
	return nil
}

// Rejoin asks every agent to join every server's Serf (PUT
// /v1/agent/join), a second each, errors ignored: after a heal Serf
// itself tries a failed member again only every 30 s, and each try only
// with the chance failed/alive members, so a server cut off alone may
// stay out for minutes (seen: more than a minute, seed 371150, sequence
// 30); an operator's `consul join` ends that at once.
func (c *Cluster) Rejoin(ctx context.Context) {
	for _, m := range c.members() {
		for _, s := range c.Servers {
			if s == m {
				continue
			}
			within1s(ctx, http.MethodPut, m.URL(), "/v1/agent/join/"+strings.TrimSuffix(s.Addr, fmt.Sprintf(":%d", HTTPPort)), nil)
		}
	}
}

// Flush makes every client agent use each server once, so that none keeps
// a connection to a server that is dead or stalled: through each agent,
// three times, a lock acquire with a session no one has (its error, as
// any error an agent gets from a server, moves the agent on to the next
// server of its list) and a ?stale read (a read that meets a dead
// connection is sent again to the next server, and the connection
// dropped), a second each. An error answer is an answer; an error if a
// call got none (a connection that stalled while its agent was cut off
// holds every call sent on it until yamux's keepalive gives up on it, up
// to 40 s later: K.8). Without it the first write an agent sends to a
// server restarted since it last used it fails at once, 500 "rpc error
// making call: stream closed", on a whole cluster (K.8: consul's
// connection pool hands out a stream cached from the dead session, and an
// agent sends a write again only after "No cluster leader", a read after
// a closed stream too).
func (c *Cluster) Flush(ctx context.Context) error {
	const bogus = "00000000-0000-4000-8000-00000000f1a5"
	for _, m := range c.Clients {
		for range c.Servers {
			for _, q := range []struct{ method, path string }{
				{http.MethodPut, "/v1/kv/lockprover-flush?acquire=" + bogus},
				{http.MethodGet, "/v1/kv/lockprover-flush?stale"},
			} {
				var ue *url.Error
				if err := within1s(ctx, q.method, m.URL(), q.path, nil); errors.As(err, &ue) {
					return fmt.Errorf("%s: no answer through it from a server: %w", m.Name, err)
				}
			}
		}
	}
	return nil
}

// within1s is one call to an agent's HTTP API (Call), given a second.
func within1s(ctx context.Context, method, base, path string, out any) error {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return Call(cctx, http.DefaultClient, method, base, path, nil, out)
}
