package consulconform

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/internal/rapidbatch"
	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/sim/consulsim"
)

var (
	diffN    = flag.Int("consulconform.sequences", 100, "sequences of each differential test")
	diffSeed = flag.Uint64("consulconform.seed", 0, "the differential tests' seed (0: a random one)")
)

// consulFloor is the private agents' session_ttl_min (adapters/servers/consul's
// default).
const consulFloor = time.Second

// privateTarget starts a private server of kind k for the test; the test
// is skipped on a machine without its binary.
func privateTarget(t *testing.T, k consulsim.Kind) Server {
	quick.Skip(t, "a private Consul agent or etcd")
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if k == consulsim.Consul {
		a, err := consul.Start(ctx, t.TempDir(), consul.Options{SessionTTLMin: consulFloor})
		if errors.Is(err, consul.ErrNoConsul) {
			t.Skipf("skipped: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Stop() })
		return Server{Kind: consulsim.Consul, Addr: a.Addr(), Floor: consulFloor}
	}
	s, err := etcd.Start(ctx, t.TempDir(), etcd.Options{})
	if errors.Is(err, etcd.ErrNoEtcd) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return Server{Kind: consulsim.Etcd, Addr: s.URL(), Floor: s.MinTTL()}
}

func seedOf() uint64 {
	if *diffSeed != 0 {
		return *diffSeed
	}
	return rand.Uint64()
}

// differential runs the differential of n sequences against a private
// server of kind k.
func differential(t *testing.T, k consulsim.Kind, n int) {
	quick.Skip(t, "a private Consul agent or etcd")
	t.Parallel()
	target := privateTarget(t, k)
	seed := seedOf()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rep, err := Differential(ctx, target, n, seed, nil)
	t.Logf("seed %d: %s", seed, rep)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != "" {
		t.Fatalf("%s:\n%s\nshrunk:\n%s", rep.Server, rep.Divergence, rep.Shrunk)
	}
	if rep.Sequences != n || rep.Steps == 0 || rep.Inconclusive > n/10 {
		t.Errorf("%s: want %d sequences, most of them judged", rep, n)
	}
}

// The differential (differential.go): drawn sequences of the recipe's
// calls get the same answers from the simulator and from a private Consul
// agent, and from a private etcd.
func TestDifferentialConsul(t *testing.T) { differential(t, consulsim.Consul, *diffN) }
func TestDifferentialEtcd(t *testing.T)   { differential(t, consulsim.Etcd, *diffN) }

// A simulator that answers one call wrongly (a renewal of a live session
// says it is gone) is caught: the report names the sequence that draws it
// again and marks the step, with both answers, and rapid shrinks it.
func TestDifferentialCatchesAWrongSimulator(t *testing.T) {
	t.Parallel()
	target := privateTarget(t, consulsim.Consul)
	target.alter = func(s step, a string) string {
		if s.kind == "renew" && a == "ok" {
			return "gone"
		}
		return a
	}
	rep, err := Differential(context.Background(), target, 100, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\n%s\nshrunk:\n%s", rep, rep.Divergence, rep.Shrunk)
	m := regexp.MustCompile(`^sequence (\d+) of seed 7 \(replay: --seed 7 --sequences (\d+)\), (\d+) steps: step (\d+) differs`).FindStringSubmatch(rep.Divergence)
	if m == nil || m[1] != m[2] {
		t.Fatalf("the divergence does not say which sequence and step:\n%s", rep.Divergence)
	}
	marked := regexp.MustCompile(`(?m)^!! +` + m[4] + `  (sleep [^;]+; )?renew s\d\n +simulator: gone\n +server: +ok$`)
	if !marked.MatchString(rep.Divergence) {
		t.Fatalf("step %s is not marked as the renewal, with both answers:\n%s", m[4], rep.Divergence)
	}
	// Shrunk: the renewal of a session, after as few steps as name it. Its
	// sleep may stay: the shrinker drops a step's sleep only while the
	// sequence still diverges within its budget, which a loaded machine
	// can spend first (seen once beside four cluster differentials).
	sm := regexp.MustCompile(`^sequence ` + m[1] + ` of seed 7 shrunk to (\d+) steps: step (\d+) differs\n`).FindStringSubmatch(rep.Shrunk)
	if sm == nil || sm[1] != sm[2] || sm[1] > "3" || sm[1] < "2" ||
		!regexp.MustCompile(`(?m)^!! +`+sm[2]+`  (sleep [^;]+; )?renew s\d\n +simulator: gone\n +server: +ok$`).MatchString(rep.Shrunk) {
		t.Errorf("not shrunk to a create and a renewal (at most one more create):\n%s", rep.Shrunk)
	}
}

// A seed draws the same sequences every time, and canonical answers
// name tokens by creation and indexes by rank.
func TestSequencesAndCanonical(t *testing.T) {
	for i := range 20 {
		a, ok := rapidbatch.Case(9, 0, i, drawSequence)
		b, _ := rapidbatch.Case(9, 0, i, drawSequence)
		if !ok || !slices.Equal(a, b) || len(a) == 0 || len(a) > 20 {
			t.Fatalf("case %d: %v, then %v", i, a, b)
		}
	}
	r := run{toks: []string{"aa", "bb"}, answers: []string{"aa TTL 1s", "granted at ⟦40⟧", "[x owner \"bb\" at ⟦17⟧ lock 1: ]", "granted at ⟦40⟧"}}
	want := []string{"s1 TTL 1s", "granted at #2", `[x owner "s2" at #1 lock 1: ]`, "granted at #2"}
	if got := r.canonical(consulsim.Consul); !slices.Equal(got, want) {
		t.Errorf("canonical: %q, want %q", got, want)
	}
	// a listing's keys sort by their canonical names, whatever the tokens
	r = run{toks: []string{"zz", "aa"}, answers: []string{`[aa owner "aa" at ⟦9⟧ lock 1: ; zz owner "zz" at ⟦3⟧ lock 1: ]`}}
	want = []string{`[s1 owner "s1" at #1 lock 1: ; s2 owner "s2" at #2 lock 1: ]`}
	if got := r.canonical(consulsim.Consul); !slices.Equal(got, want) {
		t.Errorf("canonical: %q, want %q", got, want)
	}
}

// On the simulator, a sequence's short Consul session outlives one sleep
// and not two (invalidated at twice its TTL), etcd's not one.
func TestSimulatorSleeps(t *testing.T) {
	steps := []step{
		{kind: "create", ttl: "short"},
		{kind: "contender", key: "own", ses: 1, bound: true},
		{sleep: true, kind: "list"},
		{sleep: true, kind: "list"},
	}
	for _, c := range []struct {
		k    consulsim.Kind
		min  time.Duration
		want []string
	}{
		{consulsim.Consul, consulFloor, []string{"s1 TTL 1s", "true", `[s1 owner "s1" at #1 lock 1: ]`, "[]"}},
		{consulsim.Etcd, time.Second, []string{"s1 TTL 1s", "true", "[]", "[]"}},
	} {
		r, err := onSimulator(c.k, c.min, steps, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.canonical(c.k); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.k, got, c.want)
		}
	}
}

// Lock-delay, on hand-made sequences (drawn ones rarely have a session
// with a lock-delay take a key another session then asks for): after a
// session with a lock-delay (500 ms) that held key x is destroyed, Behavior
// delete or release, another session's ?acquire of x is refused at once
// and granted after a sleep; after its TTL ran out (invalidated at 2 s)
// it is granted after the sleep that ends it; a key deleted before its
// session was destroyed is not delayed. The simulator and a private
// Consul agent answer each step alike, and the agent refuses where the
// sequence says it must (so that the sequences exercise the lock-delay).
func TestDifferentialLockDelay(t *testing.T) {
	t.Parallel()
	target := privateTarget(t, consulsim.Consul)
	j, err := openJudge(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	create := func(ttl string, release, delay bool) step {
		return step{kind: "create", ttl: ttl, release: release, delay: delay}
	}
	take := func(ses int, sleep bool) step {
		return step{kind: "contender", key: "other", ses: ses, bound: true, sleep: sleep}
	}
	for i, c := range []struct {
		steps []step
		want  []string // the real server's answers to the takes, in order
	}{
		{[]step{create("long", false, true), create("long", false, false), take(1, false),
			{kind: "destroy", ses: 1}, take(2, false), take(2, true)}, []string{"true", "false", "true"}},
		{[]step{create("long", true, true), create("long", false, false), take(1, false),
			{kind: "destroy", ses: 1}, take(2, false), take(2, true)}, []string{"true", "false", "true"}},
		{[]step{create("short", false, true), create("long", false, false), take(1, false),
			take(2, true), take(2, true)}, []string{"true", "false", "true"}},
		{[]step{create("long", false, true), create("long", false, false), take(1, false),
			{kind: "delete", key: "other", ses: 1}, {kind: "destroy", ses: 1}, take(2, false)}, []string{"true", "true"}},
		// without a lock-delay, at once
		{[]step{create("long", false, false), create("long", false, false), take(1, false),
			{kind: "destroy", ses: 1}, take(2, false)}, []string{"true", "true"}},
	} {
		v, err := j.judge(context.Background(), i, c.steps)
		if err != nil {
			t.Fatal(err)
		}
		if v.slow {
			t.Logf("sequence %d: too slow to judge", i+1)
			continue
		}
		if v.first >= 0 {
			t.Errorf("%s", v.String(0))
			continue
		}
		var got []string
		for k, s := range c.steps {
			if s.kind == "contender" {
				got = append(got, v.real[k])
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("sequence %d: the agent's answers to the takes %v, want %v:\n%s", i+1, got, c.want, v.show(""))
		}
	}
}

// A diverging cluster sequence is shown with how each real step went: its
// time, and the error behind an "error" (never compared: only shown).
func TestShowClusterRunNotes(t *testing.T) {
	steps := []clusterStep{{fault: "isolate", arg: "s1"}, {on: "A", call: step{kind: "list", stale: true}}}
	real := []string{"done", "error"}
	sim := []string{"done", "[]"}
	notes := []string{noteOf(10*time.Second, nil), noteOf(2010*time.Millisecond, errors.New("context deadline exceeded"))}
	got := showClusterRun(3, 371150, steps, real, sim, notes, 1, true)
	for _, want := range []string{"step 2 differs (no choice of the simulator gives step 2's answer)", "real: done (10.00s)", ">  2 A: list stale true\n       real: error (2.01s: context deadline exceeded)\n       sim:  []"} {
		if !strings.Contains(got, want) {
			t.Errorf("showClusterRun:\n%s\nwant in it %q", got, want)
		}
	}
}

// lateWaits is a backend whose blocking queries answer their whole max
// late, as a loaded machine may bring them.
type lateWaits struct {
	consulsem.Backend
	p *consulsim.Process
}

func (b lateWaits) WaitChange(ctx context.Context, prefix string, index uint64, max time.Duration) error {
	err := b.Backend.WaitChange(ctx, prefix, index, max)
	b.p.Sleep(max)
	return err
}

// On Consul a wait after a change made since the listing it follows is
// "changed" by the prefix's index, however late its answer comes; one with
// nothing changed since is "timed out". Judged by the answer's time alone
// (the cluster's differential, whose agents may be cut off), the late
// answer reads as "timed out".
func TestWaitJudgedByTheIndex(t *testing.T) {
	steps := []step{
		{kind: "create", ttl: "long"},
		{kind: "list"},
		{kind: "wait"},
		{kind: "contender", key: "own", ses: 1, bound: true},
		{kind: "wait"},
	}
	for _, c := range []struct {
		indexed bool
		want    []string
	}{
		{true, []string{"timed out", "true", "changed"}},
		{false, []string{"timed out", "true", "timed out"}},
	} {
		w, err := consulsim.New(consulsim.Options{Kind: consulsim.Consul, SessionTTLMin: consulFloor})
		if err != nil {
			t.Fatal(err)
		}
		var out run
		var runErr error
		w.Go("d", func(p *consulsim.Process) {
			r := runner{b: lateWaits{p.Backend(), p}, kind: consulsim.Consul, pr: profileOf(consulsim.Consul, consulFloor), prefix: "seq", indexed: c.indexed}
			out, runErr = r.run(context.Background(), steps)
		})
		if err := w.Run(); err != nil || runErr != nil {
			t.Fatal(err, runErr)
		}
		if got := out.answers[2:]; !slices.Equal(got, c.want) {
			t.Errorf("indexed %v: %q, want %q", c.indexed, got, c.want)
		}
	}
}

// lastChoice makes the last choice always: a run no seed is likely to give
// when a sequence holds several choices.
func lastChoice(n int) int { return n - 1 }

// Where the real answers hang on several rare choices together (here each
// of four stale listings lagging as far as it may, each election and each
// schedule the last), the 64 seeds miss them and the search of the
// simulator's choices finds them; answers no choice gives are reported
// with every choice tried, at the first step no run gave.
func TestMatchSimSearchesChoices(t *testing.T) {
	list := func(on string) clusterStep { return clusterStep{on: on, call: step{kind: "list", stale: true}} }
	write := func(on string, ses int, cas string) clusterStep {
		return clusterStep{on: on, call: step{kind: "write", ses: ses, cas: cas, live: true}}
	}
	steps := []clusterStep{
		{on: "A", call: step{kind: "create", ttl: "long"}},
		{on: "A", call: step{kind: "contender", key: "own", ses: 1, bound: true}},
		list("B"),
		write("A", 1, "last"),
		list("B"),
		{on: "B", call: step{kind: "create", ttl: "long"}},
		{on: "B", call: step{kind: "contender", key: "own", ses: 2, bound: true}},
		list("A"),
		write("B", 2, "last"),
		list("A"),
	}
	r, err := onSimCluster(consulsim.Consul, lastChoice, nil, steps)
	if err != nil {
		t.Fatal(err)
	}
	real := r.canonical(consulsim.Consul)
	for seed := range uint64(clusterSimSeeds) {
		s, err := onSimCluster(consulsim.Consul, clusterSeed(seed), nil, steps)
		if err != nil {
			t.Fatal(err)
		}
		if firstDifference(s.canonical(consulsim.Consul), real) < 0 {
			t.Fatalf("seed %d gives the last choices' run: the sequence does not need the search", seed)
		}
	}
	sim, at, _, err := matchSim(consulsim.Consul, steps, real)
	if err != nil {
		t.Fatal(err)
	}
	if at >= 0 {
		t.Fatalf("no match for the last choices' run: step %d: sim %q, real %q", at+1, sim, real)
	}

	bad := slices.Clone(real)
	bad[7] = "[nothing]"
	sim, at, exhausted, err := matchSim(consulsim.Consul, steps, bad)
	if err != nil {
		t.Fatal(err)
	}
	if at != 7 || !exhausted {
		t.Errorf("an answer no choice gives: at %d (want 7), every choice tried %v (want true); sim %q", at, exhausted, sim)
	}
}
