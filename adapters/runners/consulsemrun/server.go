package consulsemrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// A realServer is the server of one real run, private (started for it)
// or given (one the user runs, Config.Addrs): where it listens, how to
// stop and restart it (a private one only), and how to read and end
// what the run left on it.
type realServer struct {
	// addrs are the host:port each client's proxies lead to (one for
	// Consul; etcd's endpoints).
	addrs []string
	stop  func()
	// restart stops the server (SIGTERM), keeps it down for down, and
	// starts it again on the same ports (and data directory), returning
	// once it answers; nil for a given server, which lockprover did not
	// start and so cannot restart.
	restart func(ctx context.Context, down time.Duration) error
	// left lists the keys under a prefix but the lock key, and the
	// sessions (leases) alive: every one on a private server, only those
	// of only on a given one (only not nil), whose other sessions are
	// not the run's.
	left func(ctx context.Context, prefix string, only map[string]bool) (keys, sessions []string, err error)
	// clear deletes every key under a prefix.
	clear func(ctx context.Context, prefix string) error
	// end destroys sessions (revokes leases) by token, those gone
	// already aside.
	end func(ctx context.Context, sessions []string) error
}

// startServer starts the private server of p's backend: a Consul agent
// (persistent if p says so; session_ttl_min 1 s) or an etcd, of version
// v (the zero value: the machine's own etcd, Consul's binary as
// adapters/servers/consul finds it).
func startServer(ctx context.Context, p *Plan, v versions.Version) (*realServer, error) {
	if p.Backend == Consul {
		mode := consul.Dev
		if p.Persistent {
			mode = consul.Persistent
		}
		a, stop, err := consul.StartTemp(ctx, consul.Options{Mode: mode, SessionTTLMin: time.Second, Version: v})
		if err != nil {
			return nil, err
		}
		c := consulHTTP{url: a.URL()}
		return &realServer{addrs: []string{a.Addr()}, stop: stop, restart: a.Restart, left: c.left, clear: c.clear, end: c.end}, nil
	}
	s, stop, err := etcd.StartTemp(ctx, etcd.Options{Version: v})
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		stop()
		return nil, err
	}
	e := etcdAdmin{cli}
	return &realServer{addrs: []string{s.Addr()}, stop: func() { cli.Close(); stop() }, restart: s.Restart, left: e.left, clear: e.clear, end: e.end}, nil
}

// givenServer is the server the user runs at addrs (Config.Addrs), of p's
// backend: a Consul agent's HTTP address, or etcd's endpoints. Nothing is
// started, and stop only closes what reads it; it cannot be restarted.
func givenServer(p *Plan, addrs []string) (*realServer, error) {
	if p.Backend == Consul {
		if len(addrs) != 1 {
			return nil, fmt.Errorf("a Consul agent has one HTTP address, got %d", len(addrs))
		}
		c := consulHTTP{url: "http://" + addrs[0]}
		return &realServer{addrs: addrs, stop: func() {}, left: c.left, clear: c.clear, end: c.end}, nil
	}
	eps := make([]string, len(addrs))
	for i, a := range addrs {
		eps[i] = "http://" + a
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	e := etcdAdmin{cli}
	return &realServer{addrs: addrs, stop: func() { cli.Close() }, left: e.left, clear: e.clear, end: e.end}, nil
}

// leftovers waits up to patience for the run's sessions (leases) to be
// gone and its keys but the lock key deleted, then deletes every key
// under the prefix, ends the sessions still there, and says what was
// left, if anything ("" for nothing). only, if not nil, are the run's
// sessions on a given server (see left).
func (s *realServer) leftovers(ctx context.Context, prefix string, only map[string]bool, patience time.Duration) (string, error) {
	deadline := time.Now().Add(patience)
	for {
		keys, sessions, err := s.left(ctx, prefix, only)
		if err != nil {
			return "", err
		}
		if len(keys)+len(sessions) == 0 || time.Now().After(deadline) {
			if err := s.clear(ctx, prefix); err != nil {
				return "", err
			}
			if err := s.end(ctx, sessions); err != nil {
				return "", err
			}
			var out []string
			if len(keys) > 0 {
				out = append(out, fmt.Sprintf("keys %s", strings.Join(keys, ", ")))
			}
			if len(sessions) > 0 {
				out = append(out, fmt.Sprintf("sessions (leases) %s", strings.Join(sessions, ", ")))
			}
			if len(out) > 0 {
				return strings.Join(out, "; ") + fmt.Sprintf(" (%v after the run's end)", patience), nil
			}
			return "", nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// agentProbe is the name of adapters/servers/consul's probe sessions.
const agentProbe = "lockprover-probe"

// consulHTTP reads and clears a private agent's state over its HTTP API.
type consulHTTP struct{ url string }

func (c consulHTTP) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return err
	case resp.StatusCode == http.StatusNotFound:
		return nil
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.Unmarshal(b, out)
}

func (c consulHTTP) left(ctx context.Context, prefix string, only map[string]bool) (keys, sessions []string, err error) {
	var kv []struct{ Key string }
	if err := c.get(ctx, "/v1/kv/"+prefix+"/?recurse", &kv); err != nil {
		return nil, nil, err
	}
	for _, e := range kv {
		if e.Key != prefix+"/.lock" {
			keys = append(keys, e.Key)
		}
	}
	var ss []struct{ ID, Name string }
	if err := c.get(ctx, "/v1/session/list", &ss); err != nil {
		return nil, nil, err
	}
	for _, s := range ss {
		// The agent's start probe (adapters/servers/consul) is not the run's: a
		// persistent agent's first probe may time out during its
		// election yet be applied, leaving a session of 10 s behind.
		if s.Name != agentProbe && (only == nil || only[s.ID]) {
			sessions = append(sessions, s.ID)
		}
	}
	sort.Strings(keys)
	sort.Strings(sessions)
	return keys, sessions, nil
}

func (c consulHTTP) clear(ctx context.Context, prefix string) error {
	return c.do(ctx, http.MethodDelete, "/v1/kv/"+prefix+"/?recurse")
}

// end destroys sessions (PUT /v1/session/destroy/<id>, which answers
// true for one gone already).
func (c consulHTTP) end(ctx context.Context, sessions []string) error {
	for _, id := range sessions {
		if err := c.do(ctx, http.MethodPut, "/v1/session/destroy/"+url.PathEscape(id)); err != nil {
			return err
		}
	}
	return nil
}

// do sends a request with no body to the agent, wanting 200 OK.
func (c consulHTTP) do(ctx context.Context, method, path string) error {
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return nil
}

// etcdAdmin reads and clears a private etcd's state.
type etcdAdmin struct{ cli *clientv3.Client }

func (e etcdAdmin) left(ctx context.Context, prefix string, only map[string]bool) (keys, leases []string, err error) {
	resp, err := e.cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); k != prefix+"/.lock" {
			keys = append(keys, k)
		}
	}
	ls, err := e.cli.Leases(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, l := range ls.Leases {
		if id := fmt.Sprintf("%016x", int64(l.ID)); only == nil || only[id] {
			leases = append(leases, id)
		}
	}
	sort.Strings(keys)
	sort.Strings(leases)
	return keys, leases, nil
}

func (e etcdAdmin) clear(ctx context.Context, prefix string) error {
	_, err := e.cli.Delete(ctx, prefix+"/", clientv3.WithPrefix())
	return err
}

// end revokes leases by their tokens (16 hex digits, as consulsem's);
// one gone already is no error.
func (e etcdAdmin) end(ctx context.Context, leases []string) error {
	for _, tok := range leases {
		id, err := strconv.ParseUint(tok, 16, 64)
		if err != nil {
			return fmt.Errorf("lease %q: %w", tok, err)
		}
		if _, err := e.cli.Revoke(ctx, clientv3.LeaseID(id)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("revoking lease %s: %w", tok, err)
		}
	}
	return nil
}

// StartPrivate starts a private server of backend (Consul or Etcd) as a
// plan's: a Consul -dev agent with session_ttl_min 1 s, or an etcd, on
// ports and in a directory of its own, of version v (the zero value: as
// a plan's without one). It answers the address clients reach it at
// (Consul's HTTP API, etcd's client endpoint, host:port) and what stops
// it and removes its directory. adapters/servers/consul.ErrNoConsul and
// adapters/servers/etcd.ErrNoEtcd say that this machine has no such server;
// debroot.ErrUnavailable that v cannot be had here.
func StartPrivate(ctx context.Context, backend string, v versions.Version) (addr string, stop func(), err error) {
	if backend != Consul && backend != Etcd {
		return "", nil, fmt.Errorf("backend %q: want %s or %s", backend, Consul, Etcd)
	}
	srv, err := startServer(ctx, &Plan{Backend: backend}, v)
	if err != nil {
		return "", nil, err
	}
	return srv.addrs[0], srv.stop, nil
}
