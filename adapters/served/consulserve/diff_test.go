package consulserve_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockprover/lockprover/adapters/served/consulserve"
	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// The wire differential: drawn sequences of the calls consul/api's
// Semaphore and Lock make (sessions created with either behaviour,
// renewed, destroyed, read; keys written plain, by ?cas, ?acquire and
// ?release with flags, read one and by prefix, in a blocking query or
// not, deleted plain, by ?cas and by prefix), each run through consul/api
// on a private Consul agent and on the served simulator, reply by reply.
// Indexes are compared by their rank among the indexes the run saw (the
// real agent's numbers count its own writes and earlier sequences'),
// sessions by the order they were created, errors by their text with the
// sessions' ids so renamed.

// A wireStep is one call of a sequence.
type wireStep struct {
	op         string
	key        string // k1, k2 or .lock, under the sequence's prefix
	sess       int    // a session created before (by order), or -1: one that never was, -2: none
	value      string
	flags      uint64
	behavior   string
	ttl        string
	cas        int // 0: index 0, 1: the key's last ModifyIndex seen, 2: a wrong one
	consistent bool
	below      bool          // a blocking query at an index below the last listing's
	lockDelay  time.Duration // a create's LockDelay (0: not sent, Consul's 15 s)
}

// wireSleep is a sleep's length: past two TTLs of a second (Consul
// invalidates a session at twice its TTL) and a lock-delay of a second
// after it, with 200 ms to spare for a real agent's late timers.
const wireSleep = 2200 * time.Millisecond

var wireOps = []string{"create", "create", "destroy", "renew", "info", "put", "cas", "cas", "acquire", "acquire", "release", "release",
	"get", "get", "list", "list", "block", "wake", "delete", "deletecas", "deletetree", "sleep"}

// drawWire draws a sequence of 1 to 20 steps, the first a session's create.
func drawWire(r *rand.Rand) []wireStep {
	n := 1 + r.IntN(20)
	steps := []wireStep{{op: "create", ttl: "30s"}}
	for len(steps) < n {
		s := wireStep{op: wireOps[r.IntN(len(wireOps))], key: []string{"k1", "k2", ".lock"}[r.IntN(3)],
			sess: r.IntN(3) - 1, value: []string{"", "a", `{"Limit":1,"Holders":{}}`}[r.IntN(3)],
			flags: []uint64{0, 42, api.SemaphoreFlagValue, api.LockFlagValue}[r.IntN(4)], cas: r.IntN(3), consistent: r.IntN(2) == 0, below: r.IntN(3) == 0}
		if r.IntN(10) == 0 {
			s.sess = -2
		}
		if s.op == "create" {
			s.behavior = []string{"", "release", "delete", "nonsense"}[r.IntN(4)]
			s.ttl = []string{"30s", "", "500ms", "1s", "1s"}[r.IntN(5)]
			s.lockDelay = []time.Duration{0, time.Millisecond, time.Second}[r.IntN(3)]
		}
		steps = append(steps, s)
	}
	return steps
}

// wireRun runs steps through c under prefix, as observations (indexes
// marked ⟦n⟧, ids raw) and the sessions' ids in creation order.
type wireRun struct {
	c        *api.Client
	sleep    func(time.Duration)
	prefix   string
	sessions []string
	mods     map[string]uint64
	list     uint64
	obs      []string
}

func (w *wireRun) sid(i int) string {
	switch {
	case i == -2:
		return ""
	case i < 0 || i >= len(w.sessions):
		return "00000000-0000-4000-8000-00000000dead"
	}
	return w.sessions[i]
}

func (w *wireRun) casIndex(s wireStep) uint64 {
	switch s.cas {
	case 0:
		return 0
	case 1:
		return w.mods[s.key]
	}
	return w.mods[s.key] + 1000
}

func pairString(p *api.KVPair) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%s=%q flags %d session %s lock %d create ⟦%d⟧ modify ⟦%d⟧", p.Key, p.Value, p.Flags, p.Session, p.LockIndex, p.CreateIndex, p.ModifyIndex)
}

func sessionString(e *api.SessionEntry) string {
	if e == nil {
		return "none"
	}
	return fmt.Sprintf("%s %q %s TTL %q lock-delay %v create ⟦%d⟧ checks %v", e.ID, e.Name, e.Behavior, e.TTL, e.LockDelay, e.CreateIndex, e.NodeChecks)
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return "error " + err.Error()
}

// step runs one step and notes what it observed.
func (w *wireRun) step(s wireStep) {
	kv, key := w.c.KV(), w.prefix+s.key
	pair := &api.KVPair{Key: key, Value: []byte(s.value), Flags: s.flags}
	var out string
	switch s.op {
	case "create":
		id, _, err := w.c.Session().Create(&api.SessionEntry{Name: "wire", TTL: s.ttl, Behavior: s.behavior, LockDelay: s.lockDelay}, nil)
		out = errString(err)
		if err == nil {
			w.sessions = append(w.sessions, id)
			out = "created " + id
		}
	case "destroy":
		_, err := w.c.Session().Destroy(w.sid(s.sess), nil)
		out = errString(err)
	case "renew":
		e, _, err := w.c.Session().Renew(w.sid(s.sess), nil)
		out = errString(err) + " " + sessionString(e)
	case "info":
		e, meta, err := w.c.Session().Info(w.sid(s.sess), nil)
		out = errString(err) + " " + sessionString(e) + metaString(meta)
	case "put":
		_, err := kv.Put(pair, nil)
		out = errString(err)
	case "cas", "acquire", "release", "deletecas":
		out = w.conditional(s, pair)
	case "get":
		p, meta, err := kv.Get(key, &api.QueryOptions{RequireConsistent: s.consistent})
		if p != nil {
			w.mods[s.key] = p.ModifyIndex
		}
		out = errString(err) + " " + pairString(p) + metaString(meta)
	case "list", "block":
		out = w.listing(s)
	case "wake":
		out = w.wake(s, pair)
	case "sleep":
		w.sleep(wireSleep)
		out = "slept"
	case "delete":
		_, err := kv.Delete(key, nil)
		out = errString(err)
	case "deletetree":
		_, err := kv.DeleteTree(w.prefix, nil)
		out = errString(err)
	}
	w.obs = append(w.obs, out)
}

// conditional is a write that answers true or false.
func (w *wireRun) conditional(s wireStep, pair *api.KVPair) string {
	var ok bool
	var err error
	switch s.op {
	case "cas":
		pair.ModifyIndex = w.casIndex(s)
		ok, _, err = w.c.KV().CAS(pair, nil)
	case "acquire":
		pair.Session = w.sid(s.sess)
		ok, _, err = w.c.KV().Acquire(pair, nil)
	case "release":
		pair.Session = w.sid(s.sess)
		ok, _, err = w.c.KV().Release(pair, nil)
	case "deletecas":
		pair.ModifyIndex = w.casIndex(s)
		ok, _, err = w.c.KV().DeleteCAS(pair, nil)
	}
	return fmt.Sprintf("%s %v", errString(err), ok)
}

// listing is a listing of the prefix, or a blocking query of it (50 ms
// at most) at the last listing's index or below it.
func (w *wireRun) listing(s wireStep) string {
	q := &api.QueryOptions{RequireConsistent: s.consistent}
	if s.op == "block" {
		q.WaitIndex, q.WaitTime = max(w.list, 1), 2*time.Second
		if s.below {
			q.WaitIndex = max(w.list, 2) - 1
		}
	}
	pairs, meta, err := w.c.KV().List(w.prefix, q)
	var ps []string
	for _, p := range pairs {
		w.mods[strings.TrimPrefix(p.Key, w.prefix)] = p.ModifyIndex
		ps = append(ps, pairString(p))
	}
	if meta != nil {
		w.list = meta.LastIndex
	}
	return errString(err) + " [" + strings.Join(ps, "; ") + "]" + metaString(meta)
}

// wake is a blocking query of the prefix at the last listing's index (2
// s at most) that a write of a key under it, 50 ms later on another
// connection, wakes.
func (w *wireRun) wake(s wireStep, pair *api.KVPair) string {
	done := make(chan string, 1)
	go func() { done <- w.listing(wireStep{op: "block", consistent: s.consistent}) }()
	time.Sleep(50 * time.Millisecond)
	_, err := w.c.KV().Put(pair, nil)
	return errString(err) + " then " + <-done
}

func metaString(m *api.QueryMeta) string {
	if m == nil {
		return ""
	}
	return fmt.Sprintf(" index ⟦%d⟧ leader %v", m.LastIndex, m.KnownLeader)
}

var marked = regexp.MustCompile(`⟦(\d+)⟧`)

// canonical makes a run's observations comparable: each index its rank
// among those the run saw, each session's id s1, s2... in order of
// creation.
func canonical(obs, sessions []string) []string {
	var idx []uint64
	for _, o := range obs {
		for _, m := range marked.FindAllStringSubmatch(o, -1) {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			idx = append(idx, n)
		}
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	out := make([]string, len(obs))
	for i, o := range obs {
		o = marked.ReplaceAllStringFunc(o, func(m string) string {
			n, _ := strconv.ParseUint(m[len("⟦"):len(m)-len("⟧")], 10, 64)
			r, _ := slices.BinarySearch(idx, n)
			return fmt.Sprintf("#%d", r)
		})
		for j, id := range sessions {
			o = strings.ReplaceAll(o, id, fmt.Sprintf("s%d", j+1))
		}
		out[i] = o
	}
	return out
}

func runWire(c *api.Client, sleep func(time.Duration), prefix string, steps []wireStep) []string {
	w := &wireRun{c: c, sleep: sleep, prefix: prefix, mods: map[string]uint64{}}
	// The prefix first gets a history of its own (a key put and
	// deleted): the KV store's last write is then the sequence's on the
	// real agent too, which earlier sequences wrote to.
	c.KV().Put(&api.KVPair{Key: prefix + "h"}, nil)
	c.KV().Delete(prefix+"h", nil)
	for _, s := range steps {
		w.step(s)
	}
	for _, id := range w.sessions {
		c.Session().Destroy(id, nil)
	}
	return canonical(w.obs, w.sessions)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestWireDifferentialWithConsul: LOCKPROVER_CONSUL_WIRE_SEQUENCES drawn
// sequences (8 unless set) of seed LOCKPROVER_CONSUL_WIRE_SEED (drawn
// unless set) observe on the served simulator what they observe on a
// private Consul agent (the binary adapters/servers/consul finds:
// $LOCKPROVER_CONSUL names one).
func TestWireDifferentialWithConsul(t *testing.T) {
	quick.Skip(t, "a private Consul agent")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := consul.Start(ctx, t.TempDir(), consul.Options{})
	if errors.Is(err, consul.ErrNoConsul) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	version, _ := consul.AgentVersion(ctx, a.Addr())
	real, err := api.NewClient(&api.Config{Address: a.Addr(), Scheme: "http"})
	if err != nil {
		t.Fatal(err)
	}
	n, seed := envInt("LOCKPROVER_CONSUL_WIRE_SEQUENCES", 8), uint64(envInt("LOCKPROVER_CONSUL_WIRE_SEED", int(time.Now().UnixNano()%1e15)))
	r := rand.New(rand.NewPCG(seed, 0x636f6e73))
	start, steps := time.Now(), 0
	for i := range n {
		seq := drawWire(r)
		prefix := fmt.Sprintf("lpw-%d-%d/", seed, i)
		want := runWire(real, time.Sleep, prefix, seq)
		var got []string
		_, s, errs := serve(t, consulsim.Options{}, consulserve.Options{}, map[string]client{
			"c1": func(w *consulsim.World, wp *consulsim.Process, sp *consulserve.Process) error {
				got = runWire(consulAPI(t, sp), func(d time.Duration) { sp.Do(func() { wp.Sleep(d) }) }, prefix, seq)
				return nil
			},
		})
		check(t, errs)
		if u := s.Unserved(); len(u) > 0 {
			t.Fatalf("sequence %d: unserved %v", i, u)
		}
		steps += len(seq)
		if d := firstDiff(want, got); d >= 0 {
			var b strings.Builder
			for j, st := range seq {
				mark := "  "
				if j == d {
					mark = "!!"
				}
				fmt.Fprintf(&b, "%s %2d %+v\n      %s: %s\n      simulator: %s\n", mark, j, st, version, want[j], got[j])
			}
			t.Fatalf("seed %d sequence %d, step %d differs:\n%s", seed, i, d, b.String())
		}
	}
	t.Logf("seed %d: %d sequences, %d steps: the served simulator observed through consul/api what %s did, in %v", seed, n, steps, version, time.Since(start).Round(time.Second))
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
