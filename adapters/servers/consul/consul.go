// Package consul starts private Consul agents: a consul process of the
// caller's own, bound to 127.0.0.1 on free ports, for tests and prover runs
// that must never touch anybody else's Consul (restarts and crashes are
// faults lockprover injects).
//
// An agent runs in one of two modes. Dev (`consul agent -dev`) keeps its
// state in memory: a restart forgets every session and key, as a store
// without persistence does. Persistent (`consul agent -server -bootstrap
// -data-dir`) keeps its Raft log on disk: a restart keeps sessions and
// keys, and the new leader resets every session's TTL timer (Consul's
// initializeSessionTimers), so a session may outlive its TTL by the
// downtime.
//
// Either way DNS and gRPC are off, the minimum session TTL is lowered (1 s
// unless the options say otherwise; Consul's default is 10 s), and update
// checks are off (the machine may have no network). The binary is found by
// Find; without one, Start answers ErrNoConsul. Options.Version names
// another version lockprover builds into its cache (adapters/servers/versions:
// .ci/consul 1.20.2), whose binary runs instead.
package consul

import (
	"bytes"
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
	"time"

	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// Version is the Consul release lockprover builds by default (.ci/consul)
// and is tested against: 1.16.3, Consul's last release under the MPL-2.0
// (adapters/servers/versions' default consul).
const Version = "1.16.3"

// ErrNoConsul is returned (wrapped) by Find and Start when no consul
// binary is to be had: tests skip on it.
var ErrNoConsul = errors.New("consul: no consul binary: set $LOCKPROVER_CONSUL to one, put consul on $PATH, or run .ci/consul once to build Consul v" + Version + " into " + cacheHint)

const cacheHint = "$XDG_CACHE_HOME/lockprover/consul-v" + Version + "/consul (default ~/.cache)"

// CachePath is where .ci/consul puts the binary it builds:
// $XDG_CACHE_HOME/lockprover/consul-v1.16.3/consul, ~/.cache when
// $XDG_CACHE_HOME is unset. "" when neither can be known.
func CachePath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "lockprover", "consul-v"+Version, "consul")
}

// Find is the consul binary to run: $LOCKPROVER_CONSUL if set (which must
// then be an executable file), else consul on $PATH, else the one
// .ci/consul caches (CachePath). Without any, it answers ErrNoConsul.
func Find() (string, error) { return binary().Find() }

// binary is where Find looks: the cache's directory is $XDG_CACHE_HOME's
// at the time of asking.
func binary() proc.Binary {
	b := proc.Binary{Env: "LOCKPROVER_CONSUL", Names: []string{"consul"}, None: ErrNoConsul}
	if p := CachePath(); p != "" {
		b.Dirs = []string{filepath.Dir(p)}
	}
	return b
}

// Mode is how an agent keeps its state.
type Mode int

const (
	// Dev is `consul agent -dev`: state in memory, so a restart forgets
	// every session and key (and the indexes start again).
	Dev Mode = iota
	// Persistent is a single server (`-server -bootstrap`) with a data
	// directory: a restart keeps sessions and keys, and resets the
	// sessions' TTL timers when the server becomes leader again.
	Persistent
)

// String is the mode's name: "dev" or "persistent".
func (m Mode) String() string {
	switch m {
	case Dev:
		return "dev"
	case Persistent:
		return "persistent"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Options are the choices a private agent leaves open. The zero value is a
// Dev agent with a 1 s minimum session TTL, its binary found by Find.
type Options struct {
	Mode Mode
	// SessionTTLMin is the agent's session_ttl_min, the shortest TTL a
	// session may ask for (whole milliseconds); 0 means 1 s.
	SessionTTLMin time.Duration
	// Bin is the consul binary; "" means Find's.
	Bin string
	// Version, when set, is the version that runs instead of Bin: its
	// binary from lockprover's cache, where .ci/consul VERSION builds it
	// (versions.Version.Binary); an error matching both ErrNoConsul and
	// debroot.ErrUnavailable, naming that command, when it is not
	// built. The zero value runs Bin (or Find's).
	Version versions.Version
}

// An Agent is a private Consul agent. Its methods are safe for concurrent
// use.
//
// Its Restart stops it (SIGTERM: a server shuts down without leaving) and
// starts it again on the same ports, returning once it creates sessions
// again. A Dev agent comes back empty: every session and key is gone, and
// its indexes start again from 1. A Persistent one keeps them, and
// restarts every session's TTL timer once it is leader. Its Crash kills
// it (SIGKILL) and starts it again as Restart does: a Persistent agent
// keeps what its Raft log had made durable.
type Agent struct {
	proc.Daemon // LogPath, PID, Restart, Crash, Stop

	bin  string
	dir  string
	o    Options
	http int // ports: HTTP API, server RPC, Serf LAN, Serf WAN
	rpc  int
	lan  int
	wan  int

	proc proc.Proc // the process: started, stopped, crashed
}

// Start starts a private agent whose files live under dir (which the
// caller owns and removes, such as a test's t.TempDir()): its log
// dir/consul.log and, Persistent, its data directory dir/data. It returns
// once the agent has a leader and creates sessions (a probe session is
// created and destroyed): 0.3 to 0.6 s here in Dev mode, about 2.2 s
// Persistent (a Raft election first). The caller must Stop it; on Linux the agent is also killed
// if the calling process dies.
func Start(ctx context.Context, dir string, o Options) (*Agent, error) {
	if o.Mode != Dev && o.Mode != Persistent {
		return nil, fmt.Errorf("consul: unknown mode %d", int(o.Mode))
	}
	bin, dir, err := o.prepare(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("consul: %w", err)
	}
	var a *Agent
	err = proc.Retry(func() error {
		ports, err := proc.FreePorts(4, true)
		if err != nil {
			return fmt.Errorf("consul: free ports: %w", err)
		}
		os.RemoveAll(filepath.Join(dir, "data")) // a lost port race's
		a = &Agent{bin: bin, dir: dir, o: o,
			http: ports[0], rpc: ports[1], lan: ports[2], wan: ports[3]}
		a.proc = proc.Proc{Name: "consul: private agent" + o.named(), Log: filepath.Join(dir, "consul.log"), Port: a.http, Hold: ports}
		a.Daemon = proc.NewDaemon(&a.proc, a.start, proc.How{})
		if err := a.start(ctx); err != nil {
			a.Stop()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// args are the agent's command line.
func (a *Agent) args() []string {
	args := []string{"agent"}
	if a.o.Mode == Dev {
		args = append(args, "-dev")
	} else {
		args = append(args, "-server", "-bootstrap", "-data-dir", filepath.Join(a.dir, "data"),
			// Dev's Raft timing (Consul's production default is 5x slower).
			"-hcl", "performance { raft_multiplier = 1 }")
	}
	return append(args,
		"-node", "lockprover",
		"-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-http-port", strconv.Itoa(a.http),
		"-server-port", strconv.Itoa(a.rpc),
		"-serf-lan-port", strconv.Itoa(a.lan),
		"-serf-wan-port", strconv.Itoa(a.wan),
		"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1",
		"-hcl", fmt.Sprintf("session_ttl_min = %q", a.o.SessionTTLMin.String()),
		"-hcl", "disable_update_check = true",
	)
}

// start starts consul and waits until it creates sessions.
func (a *Agent) start(ctx context.Context) error {
	return a.proc.Launch(ctx, a.bin, a.args(), "on "+a.Addr(), a.probe)
}

// probe creates a session and destroys it.
func (a *Agent) probe(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"Name":"lockprover-probe","TTL":%q,"NodeChecks":[],"Behavior":"delete","LockDelay":"0s"}`,
		(10 * time.Second).String())
	var out struct{ ID string }
	if err := a.put(c, "/v1/session/create", body, &out); err != nil {
		return err
	}
	return a.put(c, "/v1/session/destroy/"+out.ID, "", nil)
}

// put sends a PUT to the agent's HTTP API and decodes a 200 answer into
// out (if not nil).
func (a *Agent) put(ctx context.Context, path, body string, out any) error {
	return Call(ctx, http.DefaultClient, http.MethodPut, a.URL(), path, []byte(body), out)
}

// Call sends method path, with body, to the HTTP API at base (an agent's
// URL) on hc and decodes a 200 answer (up to 1 MiB) into out, if out is
// not nil. Any other status is an error that says the method, the path,
// the status and what the agent answered.
func Call(ctx context.Context, hc *http.Client, method, base, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	case out == nil:
		return nil
	}
	return json.Unmarshal(b, out)
}

// Addr is the agent's HTTP API address, 127.0.0.1:port, the same across
// restarts.
func (a *Agent) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.http)) }

// URL is the agent's HTTP API as http://127.0.0.1:port.
func (a *Agent) URL() string { return "http://" + a.Addr() }

// Mode is the agent's mode.
func (a *Agent) Mode() Mode { return a.o.Mode }

// SessionTTLMin is the agent's session_ttl_min.
func (a *Agent) SessionTTLMin() time.Duration { return a.o.SessionTTLMin }

// StartTemp starts a private agent (Start) in a temporary directory of its
// own, which the returned stop removes once the agent has stopped: for a
// command's run, which has no test directory.
func StartTemp(ctx context.Context, o Options) (a *Agent, stop func(), err error) {
	return proc.Temp("lockprover-consul-", func(dir string) (*Agent, error) { return Start(ctx, dir, o) })
}

// prepare gives o its defaults (session_ttl_min 1 s), checks them, and
// returns the consul binary (o.Bin, else Find's) and dir made absolute:
// what a single agent and a cluster start alike.
func (o *Options) prepare(dir string) (bin, abs string, err error) {
	if o.SessionTTLMin == 0 {
		o.SessionTTLMin = time.Second
	}
	if o.SessionTTLMin < time.Millisecond || o.SessionTTLMin%time.Millisecond != 0 {
		return "", "", fmt.Errorf("consul: session_ttl_min %v: must be whole milliseconds, at least 1ms", o.SessionTTLMin)
	}
	bin = o.Bin
	switch {
	case o.Version.Server != "" && o.Version.Server != "consul":
		return "", "", fmt.Errorf("consul: %s is not a version of Consul", o.Version)
	case o.Version.Server != "":
		if bin, err = o.Version.Binary(); err != nil {
			return "", "", noVersion{err}
		}
	}
	return binary().Prepare(bin, dir)
}

// noVersion is the error of a version whose binary is not built here: no
// consul binary to run (ErrNoConsul, which tests skip on), and one that
// cannot be had until built (debroot.ErrUnavailable, which a command
// line's user is told: its message names .ci/consul VERSION).
type noVersion struct{ err error }

func (e noVersion) Error() string        { return "consul: " + e.err.Error() }
func (e noVersion) Unwrap() error        { return e.err }
func (e noVersion) Is(target error) bool { return target == ErrNoConsul }

// named is " 1.20.2" when o names a version, "" when it does not: for
// names in messages.
func (o Options) named() string {
	if o.Version.Server == "" {
		return ""
	}
	return " " + o.Version.Name
}

// version is o.Version, or the default version when it is the zero
// value.
func (o Options) version() versions.Version {
	if o.Version.Server == "" {
		v, _ := versions.Lookup("consul", "")
		return v
	}
	return o.Version
}

// Version is the agent's version as adapters/servers/versions names it ("consul
// 1.16.3"): Options.Version's, the default's when it named none (which
// the binary Find found is taken to be).
func (a *Agent) Version() versions.Version { return a.o.version() }
