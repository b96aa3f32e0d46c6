// Package etcd starts private etcd servers: an etcd process of the
// caller's own (Debian's etcd-server 3.4 here), a single-member cluster
// with its own data directory, bound to 127.0.0.1 on free client and peer
// ports, for tests and prover runs that must never touch anybody else's
// etcd (restarts and crashes are faults lockprover injects).
//
// The data directory survives a restart, and so do keys and leases; the
// restarted member, once leader, gives every lease a fresh TTL (etcd's
// lessor Promote), so a lease may outlive its TTL by the downtime.
//
// A lease's TTL is whole seconds, at least a minimum etcd derives from its
// Raft timing: 1.5 election timeouts, rounded up to a second. This package
// runs etcd with a 50 ms heartbeat and a 500 ms election timeout (etcd's
// defaults are 100 ms and 1 s), so that the minimum is 1 s rather than 2;
// Options change them.
//
// Given a version of a Debian release's root (Options.Version: etcd
// 3.5.16, 3.5.30), a server or a cluster's members run that release's
// etcd from the root instead (package adapters/servers/versions), as the root's
// user etcd, in PID and mount namespaces of their own (a member also in
// its host's network namespace), every fault alike.
package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// ErrNoEtcd is returned (wrapped) by Find and Start when no etcd binary is
// to be had: tests skip on it.
var ErrNoEtcd = errors.New("etcd: no etcd binary: set $LOCKPROVER_ETCD to one, put etcd on $PATH, or install Debian's etcd-server (apt-get install etcd-server)")

// Find is the etcd binary to run: $LOCKPROVER_ETCD if set (which must then
// be an executable file), else etcd on $PATH, else /usr/bin/etcd. Without
// any, it answers ErrNoEtcd.
func Find() (string, error) { return binary.Find() }

// binary is where Find looks.
var binary = proc.Binary{Env: "LOCKPROVER_ETCD", Names: []string{"etcd"}, Dirs: []string{"/usr/bin"}, None: ErrNoEtcd}

// Options are the choices a private etcd leaves open. The zero value is a
// 50 ms heartbeat and a 500 ms election timeout, its binary found by Find.
type Options struct {
	// HeartbeatInterval and ElectionTimeout are etcd's Raft timing (whole
	// milliseconds; the election timeout at least 5 heartbeats). 0 means
	// 50 ms and 500 ms. The minimum lease TTL is 1.5 election timeouts
	// rounded up to a whole second.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// Bin is the etcd binary; "" means Find's.
	Bin string
	// Version, when it is a version of a Debian release's root (see
	// versions.Version.Rooted), is what runs instead of Bin: that
	// release's /usr/bin/etcd, from the root (made first if need be:
	// minutes, once per machine), as the root's user etcd, its
	// directory bound at /lockprover. The machine's own version runs
	// Bin; so does the zero value, unless $LOCKPROVER_ETCD_VERSION names
	// a version (3.5.30), which it then is (DefaultVersion): for the
	// tests and measurements, whose servers name none, on another etcd.
	Version versions.Version
}

// A Server is a private etcd server. Its methods are safe for concurrent
// use.
//
// Its Restart stops it (SIGTERM) and starts it again on the same ports and
// data directory, returning once it is healthy: keys and leases survive,
// and every lease's TTL starts again when the member becomes leader. Its
// Crash kills it (SIGKILL) and starts it again as Restart does: etcd syncs
// its write-ahead log before it answers a write, so every acknowledged
// write survives.
type Server struct {
	proc.Daemon // LogPath, PID, Restart, Crash, Stop

	bin    string
	dir    string
	o      Options
	client int
	peer   int

	proc proc.Proc // the process: started, stopped, crashed
	// run is the server's run from its version's root; nil for the
	// machine's own etcd.
	run *versions.Run
}

// Start starts a private etcd whose files live under dir (which the caller
// owns and removes, such as a test's t.TempDir()): the data directory
// dir/data (kept if it exists) and the log dir/etcd.log. It returns once
// the server reports itself healthy (it has a leader): 0.3 to 0.6 s here. The
// caller must Stop it; on Linux the server is also killed if the calling
// process dies.
func Start(ctx context.Context, dir string, o Options) (*Server, error) {
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 50 * time.Millisecond
	}
	if o.ElectionTimeout == 0 {
		o.ElectionTimeout = 500 * time.Millisecond
	}
	if o.HeartbeatInterval < time.Millisecond || o.HeartbeatInterval%time.Millisecond != 0 ||
		o.ElectionTimeout%time.Millisecond != 0 || o.ElectionTimeout < 5*o.HeartbeatInterval {
		return nil, fmt.Errorf("etcd: heartbeat %v, election timeout %v: whole milliseconds, the timeout at least 5 heartbeats",
			o.HeartbeatInterval, o.ElectionTimeout)
	}
	bin, dir, err := o.prepare(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	run, err := o.rooted(ctx, dir, "")
	if err != nil {
		return nil, err
	}
	var s *Server
	err = proc.Retry(func() error {
		ports, err := proc.FreePorts(2, false)
		if err != nil {
			return fmt.Errorf("etcd: free ports: %w", err)
		}
		os.RemoveAll(filepath.Join(dir, "data")) // a lost port race's, with its peer URL
		s = &Server{bin: bin, dir: dir, o: o, client: ports[0], peer: ports[1], run: run}
		s.proc = proc.Proc{Name: "etcd: private server" + o.named(), Log: filepath.Join(dir, "etcd.log"), Command: run.Launcher(), Port: s.client, Hold: ports}
		s.Daemon = proc.NewDaemon(&s.proc, s.start, proc.How{})
		if err := s.start(ctx); err != nil {
			s.Stop()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// MinTTL is the shortest lease TTL the server grants: 1.5 election
// timeouts rounded up to a whole second (etcd's minLeaseTTL). A Grant of
// less gets this.
func (s *Server) MinTTL() time.Duration {
	ticks := int64(s.o.ElectionTimeout / s.o.HeartbeatInterval)
	min := time.Duration(3*ticks/2) * s.o.HeartbeatInterval
	return (min + time.Second - 1).Truncate(time.Second)
}

func (s *Server) args() []string {
	peer := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.peer))
	return []string{
		"--name", "lockprover",
		"--data-dir", in(s.run, filepath.Join(s.dir, "data")),
		"--listen-client-urls", s.URL(),
		"--advertise-client-urls", s.URL(),
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "lockprover=" + peer,
		"--initial-cluster-state", "new",
		"--heartbeat-interval", strconv.FormatInt(s.o.HeartbeatInterval.Milliseconds(), 10),
		"--election-timeout", strconv.FormatInt(s.o.ElectionTimeout.Milliseconds(), 10),
		"--logger", "zap", "--log-outputs", "stderr",
	}
}

// start starts etcd and waits until it is healthy.
func (s *Server) start(ctx context.Context) error {
	return s.proc.Launch(ctx, s.bin, s.args(), "on "+s.Addr(), s.healthy)
}

// healthy asks the server's /health: true once it has a leader and no
// alarm.
func (s *Server) healthy(ctx context.Context) error { return health(ctx, s.URL()) }

// health asks the /health of the etcd at url.
func health(ctx context.Context, url string) error {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(c, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct{ Health string }
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err := json.Unmarshal(b, &h); err != nil || h.Health != "true" {
		return fmt.Errorf("/health: %s %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// Addr is the server's client address, 127.0.0.1:port, the same across
// restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.client)) }

// URL is the server's client URL, http://127.0.0.1:port.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Endpoints are the server's client URLs, as clientv3.Config wants them.
func (s *Server) Endpoints() []string { return []string{s.URL()} }

// StartTemp starts a private server (Start) in a temporary directory of
// its own, which the returned stop removes once the server has stopped:
// for a command's run, which has no test directory.
func StartTemp(ctx context.Context, o Options) (s *Server, stop func(), err error) {
	return proc.Temp("lockprover-etcd-", func(dir string) (*Server, error) { return Start(ctx, dir, o) })
}

// Version is the server's version, as adapters/servers/versions names it ("etcd
// 3.5.30"): Options.Version's, the machine's own when it named none.
func (s *Server) Version() versions.Version { return s.o.version() }

// version is o.Version, or DefaultVersion's when it is the zero value.
func (o Options) version() versions.Version {
	if o.Version.Server == "" {
		v, _ := DefaultVersion()
		return v
	}
	return o.Version
}

// DefaultVersion is the version a server whose Options name none runs:
// the one $LOCKPROVER_ETCD_VERSION names (an error listing etcd's
// versions if it names none of them), else the machine's own.
func DefaultVersion() (versions.Version, error) {
	env := os.Getenv("LOCKPROVER_ETCD_VERSION")
	v, err := versions.Parse(env, "etcd")
	if err != nil {
		v, _ = versions.Lookup("etcd", "")
		return v, fmt.Errorf("etcd: $LOCKPROVER_ETCD_VERSION: %w", err)
	}
	return v, nil
}

// named is " 3.5.30" for a version of a root, "" for the machine's own:
// for names in messages.
func (o Options) named() string {
	if o.Version.Rooted() {
		return " " + o.Version.Name
	}
	return ""
}

// prepare returns the etcd binary (the root's for a version of one, else
// o.Bin, else Find's) and dir made absolute: what a single server and a
// cluster start alike.
func (o *Options) prepare(dir string) (bin, abs string, err error) {
	if o.Version.Server == "" && os.Getenv("LOCKPROVER_ETCD_VERSION") != "" {
		if o.Version, err = DefaultVersion(); err != nil {
			return "", "", err
		}
	}
	bin = o.Bin
	switch {
	case o.Version.Server != "" && o.Version.Server != "etcd":
		return "", "", fmt.Errorf("etcd: %s is not a version of etcd", o.Version)
	case o.Version.Rooted():
		bin = "/usr/bin/etcd"
	}
	return binary.Prepare(bin, dir)
}

// rooted readies the run of a version of a root in dir (given to the
// root's user etcd), in network namespace netns ("" for the machine's);
// nil for the machine's own etcd. An error that says the root cannot be
// had matches debroot.ErrUnavailable.
func (o Options) rooted(ctx context.Context, dir, netns string) (*versions.Run, error) {
	if !o.Version.Rooted() {
		return nil, nil
	}
	run, err := o.Version.Prepare(ctx, dir, "etcd", netns, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("etcd: private etcd %s: %w", o.Version.Name, err)
	}
	return run, nil
}

// in is path (under the server's directory) as its etcd sees it: under
// /lockprover when it runs from a root.
func in(run *versions.Run, path string) string {
	if run == nil {
		return path
	}
	return run.In(path)
}
