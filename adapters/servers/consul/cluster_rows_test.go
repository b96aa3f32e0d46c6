package consul

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"

	"github.com/lockprover/lockprover/adapters/host/netns/netnstest"
)

// clusterForRows starts three servers and a client agent in a lab of its
// own for a measurement, or skips; cleanup heals, stops and removes it.
func clusterForRows(t *testing.T) (*Cluster, *netns.Lab) {
	t.Helper()
	if os.Getenv("LOCKPROVER_CLUSTER_ROWS") == "" {
		t.Skip("measures docs/consul-semaphore.md's cluster rows: LOCKPROVER_CLUSTER_ROWS=1 to run it")
	}
	if _, err := Find(); err != nil {
		t.Skip(err)
	}
	lab := netnstest.Lab(t, "s1", "s2", "s3", "c1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, lab, t.TempDir(), Options{}, []string{"s1", "s2", "s3"}, []string{"c1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lab.Heal(context.Background())
		c.Stop()
	})
	return c, lab
}

// call is one HTTP call with a deadline of its own: its answer, or what
// went wrong, in a word or a line.
func call(method, base, path string, body string, out any) error {
	return callWithin(2*time.Second, method, base, path, body, out)
}

func callWithin(limit time.Duration, method, base, path string, body string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return Call(ctx, &http.Client{}, method, base, path, []byte(body), out)
}

// A changeLog notes what a probe answered, once per change, with the time
// since t0.
type changeLog struct {
	t0    time.Time
	last  string
	seen  []string
	first map[string]time.Duration // when each answer was first seen
}

func (l *changeLog) see(what string) bool {
	if what == l.last {
		return false
	}
	l.last = what
	if l.first == nil {
		l.first = map[string]time.Duration{}
	}
	if _, ok := l.first[what]; !ok {
		l.first[what] = time.Since(l.t0)
	}
	l.seen = append(l.seen, fmt.Sprintf("%s from %.1fs", what, time.Since(l.t0).Seconds()))
	return true
}

func (l *changeLog) String() string { return strings.Join(l.seen, ", ") }

func short(err error) string {
	s := err.Error()
	if i := strings.Index(s, "context deadline exceeded"); i >= 0 {
		return "no answer in time"
	}
	if len(s) > 90 {
		s = s[:90] + "..."
	}
	return s
}

// TestClusterSessionRows measures, on three Consul servers and a client
// agent c1 (raft_multiplier 1, session_ttl_min 1 s), what
// docs/consul-semaphore.md's cluster rows say: (1) when a session whose
// node c1 is cut off from every server is invalidated (read from a
// server), and what its holder sees through c1 meanwhile; (2) what a
// session's TTL does when the leader changes; (3) what a deposed leader
// answers to reads in each consistency mode.
func TestClusterSessionRows(t *testing.T) {
	c, lab := clusterForRows(t)
	ctx := context.Background()
	c1, s1 := c.Member("c1"), c.Member("s1")

	// (1) A node-bound session (the default checks: serfHealth), made
	// through c1, holding a key.
	var sess struct{ ID string }
	if err := call("PUT", c1.URL(), "/v1/session/create", `{"Name":"rows","LockDelay":"0s"}`, &sess); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := call("PUT", c1.URL(), "/v1/kv/lprows/lock?acquire="+sess.ID, "x", &ok); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	t0 := time.Now()
	for _, s := range c.Servers {
		lab.Cut(ctx, "c1", s.Name)
		lab.Cut(ctx, s.Name, "c1")
	}
	server, holder, key := &changeLog{t0: t0}, &changeLog{t0: t0}, &changeLog{t0: t0}
	var wg sync.WaitGroup
	loop := func(l *changeLog, probe func() string) {
		defer wg.Done()
		for time.Since(t0) < 45*time.Second {
			l.see(probe())
			time.Sleep(250 * time.Millisecond)
		}
	}
	wg.Add(3)
	go loop(server, func() string {
		var info []map[string]any
		if err := call("GET", s1.URL(), "/v1/session/info/"+sess.ID, "", &info); err != nil {
			return short(err)
		} else if len(info) == 0 {
			return "gone"
		}
		return "alive"
	})
	// The holder asks its own agent: its session, and the key (?stale).
	go loop(holder, func() string {
		var info []map[string]any
		t1 := time.Now()
		if err := callWithin(15*time.Second, "GET", c1.URL(), "/v1/session/info/"+sess.ID, "", &info); err != nil {
			return fmt.Sprintf("%s (after %.1fs)", short(err), time.Since(t1).Seconds())
		} else if len(info) == 0 {
			return "gone"
		}
		return "alive"
	})
	go loop(key, func() string {
		var kv []struct{ Session string }
		t1 := time.Now()
		if err := callWithin(15*time.Second, "GET", c1.URL(), "/v1/kv/lprows/lock?stale", "", &kv); err != nil {
			return fmt.Sprintf("stale read: %s (after %.1fs)", short(err), time.Since(t1).Seconds())
		} else if len(kv) == 1 && kv[0].Session == sess.ID {
			return "stale read: held"
		}
		return "stale read: not held"
	})
	wg.Wait()
	t.Logf("row: c1 cut off from the servers; its session, read from s1: %s", server)
	t.Logf("row: the same session, read through c1 (the holder's agent): %s", holder)
	t.Logf("row: the lock key, read through c1 with ?stale: %s", key)
	// K.3: the servers let the session go within seconds (a serf failure
	// detection), while the holder's own agent never says it is gone.
	if d, ok := server.first["gone"]; !ok || d > 20*time.Second {
		t.Errorf("the cut-off node's session, read from s1: %s; want it gone within 20 s", server)
	}
	if _, ok := holder.first["gone"]; ok {
		t.Errorf("the holder's agent said its session was gone while cut off: %s", holder)
	}
	lab.Heal(ctx)

	// (2) A TTL session, then the leader isolated half-way through it.
	var leader string
	if err := call("GET", s1.URL(), "/v1/status/leader", "", &leader); err != nil {
		t.Fatal(err)
	}
	var lead *Member
	for _, s := range c.Servers {
		if strings.HasPrefix(leader, strings.TrimSuffix(s.Addr, ":8500")+":") {
			lead = s
		}
	}
	if lead == nil {
		t.Fatalf("leader %q is none of the servers", leader)
	}
	var other *Member
	for _, s := range c.Servers {
		if s != lead {
			other = s
			break
		}
	}
	if err := call("PUT", other.URL(), "/v1/session/create", `{"Name":"ttl","TTL":"10s","Behavior":"delete","LockDelay":"0s"}`, &sess); err != nil {
		t.Fatal(err)
	}
	tc := time.Now()
	time.Sleep(5 * time.Second)
	// (3) before the cut, a key written through the leader.
	if err := call("PUT", lead.URL(), "/v1/kv/lprows/v", "old", &ok); err != nil {
		t.Fatal(err)
	}
	ti := time.Now()
	if err := lab.Isolate(ctx, lead.Name); err != nil {
		t.Fatal(err)
	}
	// A new leader, and the value changed through it.
	var newLeader string
	for time.Since(ti) < 20*time.Second {
		if err := call("GET", other.URL(), "/v1/status/leader", "", &newLeader); err == nil && newLeader != "" && newLeader != leader {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	elected := time.Since(tc)
	t.Logf("row: leader %s isolated; %s leads %.1fs later", leader, newLeader, time.Since(ti).Seconds())
	for time.Since(ti) < 20*time.Second {
		if err := call("PUT", other.URL(), "/v1/kv/lprows/v", "new", &ok); err == nil && ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, mode := range []string{"", "?stale", "?consistent"} {
		var kv []struct{ Value string }
		got := ""
		t1 := time.Now()
		if err := callWithin(15*time.Second, "GET", lead.URL(), "/v1/kv/lprows/v"+mode, "", &kv); err != nil {
			got = fmt.Sprintf("%s (after %.1fs)", short(err), time.Since(t1).Seconds())
		} else if len(kv) == 1 {
			b, _ := base64.StdEncoding.DecodeString(kv[0].Value)
			got = fmt.Sprintf("%q", b)
		}
		name := strings.TrimPrefix(mode, "?")
		if name == "" {
			name = "default"
		}
		t.Logf("row: the deposed leader's read of a key changed by the new leader, %s mode: %s", name, got)
		// K.5: ?stale serves the old value; the others never the new one.
		if (mode == "?stale" && got != `"old"`) || got == `"new"` {
			t.Errorf("the deposed leader's %s read: %s", name, got)
		}
	}
	// The TTL session: when is it gone, as the new leader sees it?
	var info []map[string]any
	for time.Since(tc) < 60*time.Second {
		if err := call("GET", other.URL(), "/v1/session/info/"+sess.ID, "", &info); err == nil && len(info) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	gone := time.Since(tc)
	t.Logf("row: a 10s TTL session never renewed, the leader isolated at %.1fs: gone at %.1fs (new leader's view)", ti.Sub(tc).Seconds(), gone.Seconds())
	// K.4: the new leader starts the TTL timer afresh, so the session
	// lives twice its TTL from the election (not from its creation, 20 s,
	// what it would get without one), less a second of the probe's slack.
	if gone < elected+19*time.Second || gone >= 60*time.Second {
		t.Errorf("the TTL session was gone %v after its creation, the new leader elected at %v; want 2 x 10 s after the election, within a minute", gone, elected)
	}
}

// raftVoters is the leader's Raft configuration as "s1:voter s2:nonvoter
// ..." (absent servers left out), asked of m with a second's deadline.
func raftVoters(m *Member) (string, error) {
	var conf struct {
		Servers []struct {
			Node  string
			Voter bool
		}
	}
	if err := callWithin(time.Second, "GET", m.URL(), "/v1/operator/raft/configuration", "", &conf); err != nil {
		return "", err
	}
	var out []string
	for _, s := range conf.Servers {
		kind := "voter"
		if !s.Voter {
			kind = "nonvoter"
		}
		out = append(out, s.Node+":"+kind)
	}
	slices.Sort(out)
	return strings.Join(out, " "), nil
}

// TestClusterSplitRows measures, on three Consul servers and a client
// agent c1, what docs/consul-semaphore.md's rows K.6 and K.7 say: (K.6)
// what Consul's autopilot does with a server cut off from the others
// (with c1: a split) and when it comes back, and what a second server cut
// off while the first is not yet a voter again does; (K.7) when a ?stale
// read through c1, split off with a server, is answered.
func TestClusterSplitRows(t *testing.T) {
	c, lab := clusterForRows(t)
	ctx := context.Background()
	c1 := c.Member("c1")
	var ok bool
	for round := 1; round <= 3; round++ {
		lead, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var x *Member // a follower, split off with c1
		for _, s := range c.Servers {
			if s != lead && x == nil {
				x = s
			}
		}
		if err := call("PUT", lead.URL(), "/v1/kv/lpsplit/v", fmt.Sprint(round), &ok); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		side := []string{x.Name, "c1"}
		for _, a := range side {
			for _, h := range lab.Hosts() {
				if !slices.Contains(side, h.Name) {
					lab.Cut(ctx, a, h.Name)
					lab.Cut(ctx, h.Name, a)
				}
			}
		}
		// ?stale reads through c1, one launched every 500 ms, each with 3 s.
		stale := &changeLog{t0: t0}
		var mu sync.Mutex
		var wg sync.WaitGroup
		conf := &changeLog{t0: t0}
		for time.Since(t0) < 30*time.Second {
			wg.Add(1)
			go func(at time.Duration) {
				defer wg.Done()
				var kv []struct{ Value string }
				got := ""
				if err := callWithin(3*time.Second, "GET", c1.URL(), "/v1/kv/lpsplit/v?stale", "", &kv); err != nil {
					got = short(err)
				} else if len(kv) == 1 {
					b, _ := base64.StdEncoding.DecodeString(kv[0].Value)
					got = fmt.Sprintf("answered %q", b)
				}
				mu.Lock()
				stale.seen = append(stale.seen, fmt.Sprintf("%.1fs: %s", at.Seconds(), got))
				mu.Unlock()
			}(time.Since(t0))
			if v, err := raftVoters(lead); err == nil {
				conf.see(v)
			}
			time.Sleep(500 * time.Millisecond)
		}
		wg.Wait()
		th := time.Now()
		lab.Heal(ctx)
		back := &changeLog{t0: th}
		for time.Since(th) < 40*time.Second {
			if v, err := raftVoters(lead); err == nil {
				back.see(v)
				if !strings.Contains(v, "nonvoter") && strings.Count(v, ":voter") == 3 {
					break
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Logf("round %d: %s split off with c1 (leader %s): the leader's Raft configuration: %s", round, x.Name, lead.Name, conf)
		t.Logf("round %d: ?stale reads through c1 (launched at, answer): %s", round, strings.Join(stale.seen, "; "))
		t.Logf("round %d: healed; the configuration: %s", round, back)
		// K.6: autopilot takes the split-off server out of the voters,
		// and it is a voter again only after the heal.
		if _, ok := conf.first[strings.Join(slices.DeleteFunc([]string{"s1:voter", "s2:voter", "s3:voter"}, func(v string) bool { return strings.HasPrefix(v, x.Name+":") }), " ")]; !ok {
			t.Errorf("round %d: %s split off for 30 s never left the Raft configuration: %s", round, x.Name, conf)
		}
		// K.7: a stale read through c1 answers the split-off server's
		// state: the value written just before the split, or the one
		// before it (not yet applied there), never anything else.
		for _, a := range stale.seen {
			if _, v, ok := strings.Cut(a, "answered "); ok && v != fmt.Sprintf("%q", fmt.Sprint(round)) && v != fmt.Sprintf("%q", fmt.Sprint(round-1)) {
				t.Errorf("round %d: a stale read through c1 answered %s", round, v)
			}
		}
		for time.Since(th) < 60*time.Second {
			if c.Agreed(ctx) == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	// K.6's second half: a server cut off alone; healed; as soon as it is
	// back as a non-voter, another follower cut off.
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var x, y *Member
	for _, s := range c.Servers {
		switch {
		case s == lead:
		case x == nil:
			x = s
		default:
			y = s
		}
	}
	lab.Isolate(ctx, x.Name)
	t0 := time.Now()
	for time.Since(t0) < 30*time.Second {
		if v, err := raftVoters(lead); err == nil && !strings.Contains(v, x.Name) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	removed := time.Since(t0)
	lab.Heal(ctx)
	th := time.Now()
	for time.Since(th) < 45*time.Second {
		if v, err := raftVoters(lead); err == nil && strings.Contains(v, x.Name+":") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	nonvoter := time.Since(th)
	v, _ := raftVoters(lead)
	lab.Isolate(ctx, y.Name)
	ty := time.Now()
	leaders := &changeLog{t0: ty}
	for time.Since(ty) < 40*time.Second {
		var l string
		if err := call("GET", lead.URL(), "/v1/status/leader", "", &l); err != nil {
			leaders.see(short(err))
		} else if l == "" {
			leaders.see("no leader")
		} else {
			leaders.see("leader " + l)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("second fault: %s cut off, out of the configuration %.1fs later; healed, back in it %.1fs after the heal (%s); then %s cut off: %s says %s",
		x.Name, removed.Seconds(), nonvoter.Seconds(), v, y.Name, lead.Name, leaders)
	// K.6: with the first server back as a non-voter, the second fault
	// leaves the two voters without a quorum: no leader for a while.
	if d, ok := leaders.first["no leader"]; strings.Contains(v, x.Name+":nonvoter") && (!ok || d > 5*time.Second) {
		t.Errorf("%s cut off while %s was a non-voter: %s; want no leader within 5 s", y.Name, x.Name, leaders)
	}
}
