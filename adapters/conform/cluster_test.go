package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns/netnstest"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// Drawn cluster sequences run on the simulated cluster in every mode,
// the same sequence giving the same observations every time, and they
// observe what a cluster does: some step is held up (a timeout) or
// refused by a fault somewhere among them, and faults apply.
func TestSimClusterSequences(t *testing.T) {
	seen := map[string]bool{}
	for _, mode := range rabbitmq.Modes {
		for i := range 60 {
			steps := DrawClusterSteps(rand.New(rand.NewPCG(7, uint64(i))), 12)
			a, err := RunSimCluster(mode, "", 5*time.Second, ClusterSteady, 0, steps)
			if err != nil {
				t.Fatalf("%s, sequence %d: %v", mode, i, err)
			}
			b, _ := RunSimCluster(mode, "", 5*time.Second, ClusterSteady, 0, steps)
			if !slices.Equal(a, b) || len(a) != len(steps) {
				t.Fatalf("%s, sequence %d: %d steps observed %v, then %v", mode, i, len(steps), a, b)
			}
			for j, o := range a {
				if strings.HasPrefix(o, "fault failed") {
					t.Errorf("%s, sequence %d, step %d (%s): %s", mode, i, j+1, steps[j], o)
				}
				seen[o] = true
			}
		}
	}
	for _, want := range []string{"ok", "405", "404", "acked", "returned", "done", "404 home node down"} {
		if !seen[want] {
			t.Errorf("no step observed %q; seen %v", want, seen)
		}
	}
}

// The differential on a real cluster, briefly: one drawn sequence per
// mode, each on a cluster of its own, agrees with the simulated cluster:
// under ignore seed 2's first (n3 isolated, the heal, a bridge through
// n2); under pause_minority the bridge through n1 whose outcome races
// (seed 1's third sequence of 8 steps: n2 or n3 pauses,
// TestSimClusterGivesEveryRecordedRun); under autoheal seed 4's first
// (n3 isolated, the heal, n3 killed). make test runs autoheal's alone
// (2.5 minutes of a loaded machine; the three, one after the other, took
// fourteen): LOCKPROVER_CLUSTER_DIFF_MODES=ignore,pause_minority,autoheal
// runs those named. It needs root, network namespaces and
// rabbitmq-server, and skips without them.
func TestClusterDifferential(t *testing.T) {
	quick.Long(t, "a cluster of three RabbitMQ 3.10 nodes, partitioned")
	quick.Skip(t, "a RabbitMQ cluster")
	if err := rabbitmq.ClusterPreflight(); err != nil {
		t.Skipf("no RabbitMQ cluster here: %v", err)
	}
	modes := []string{rabbitmq.Autoheal}
	if m := os.Getenv("LOCKPROVER_CLUSTER_DIFF_MODES"); m != "" {
		modes = strings.Split(m, ",")
	}
	for _, c := range []struct {
		mode         string
		seed         uint64
		first, steps int
	}{
		{rabbitmq.Ignore, 2, 0, 10},
		{rabbitmq.PauseMinority, 1, 2, 8},
		{rabbitmq.Autoheal, 4, 0, 10},
	} {
		if !slices.Contains(modes, c.mode) {
			continue
		}
		t.Run(c.mode, func(t *testing.T) {
			lab := netnstest.Lab(t, "n1", "n2", "n3")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cl, err := rabbitmq.StartCluster(ctx, lab, t.TempDir(), rabbitmq.ClusterOptions{PartitionHandling: c.mode})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := cl.Stop(); err != nil {
					t.Errorf("stopping the cluster: %v", err)
				}
			})
			o := ClusterDiffOptions{Mode: c.mode, Sequences: 1, Seed: c.seed, First: c.first, Steps: c.steps, Out: os.Stderr}
			tally, d, err := ClusterDifferential(ctx, RealCluster{cl, lab}, o)
			if err != nil {
				t.Fatal(err)
			}
			if d != nil {
				t.Errorf("after %d sequences that agreed:\n%s", tally.Agreed, d)
			}
		})
	}
}

// settleCounter is a cluster where every dial is refused and faults
// apply, counting the settles a sequence waits.
type settleCounter struct {
	settles int
	faults  []string
}

func (e *settleCounter) Dial(context.Context, broker.Config) (broker.Conn, error) {
	return nil, broker.ErrRefused
}

func (e *settleCounter) Sleep(_ context.Context, d time.Duration) error {
	if d == ClusterSettle {
		e.settles++
	}
	return nil
}

func (e *settleCounter) Timeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func (e *settleCounter) Fault(fault, target string) error {
	e.faults = append(e.faults, fault+" "+target)
	return nil
}

// Every fault of a sequence but its last step is followed by a settle:
// after the last step nothing observes, and the real cluster's recovery
// follows at once.
func TestClusterSettlesBeforeTheNextStepOnly(t *testing.T) {
	steps := []ClusterStep{{Do: "isolate", Arg: "n1"}, {On: "A", Do: "declare-passive", Arg: "q1"}, {Do: "heal"}, {Do: "kill", Arg: "n2"}}
	e := &settleCounter{}
	obs := RunClusterSteps(e, "t-", steps, 0)
	want := []string{"done", "dial: refused", NotServing, "done"}
	if !slices.Equal(obs, want) {
		t.Errorf("observed %q, want %q", obs, want)
	}
	if len(e.faults) != 3 || e.settles != 2 {
		t.Errorf("%d faults struck (%q), %d settles; want 3 faults, 2 settles (none after the last step)", len(e.faults), e.faults, e.settles)
	}
	e = &settleCounter{}
	RunClusterSteps(e, "t-", steps[:3], 0)
	if e.settles != 1 {
		t.Errorf("ending in a heal: %d settles, want 1", e.settles)
	}
}

// restartingCluster is a cluster whose nodes refuse connections for a
// number of dials after each fault, as a node autoheal restarts does
// after a resume; it notes what every step's method observed.
type restartingCluster struct {
	settleCounter
	refuse, left int
}

func (e *restartingCluster) Dial(context.Context, broker.Config) (broker.Conn, error) {
	if e.left > 0 {
		e.left--
		return nil, broker.ErrRefused
	}
	return nil, errors.New("served")
}

func (e *restartingCluster) Fault(fault, target string) error {
	e.left = e.refuse
	return e.settleCounter.Fault(fault, target)
}

// After a settle that leaves no fault in force, the next step waits until
// every node takes connections (a node autoheal restarts after a resume
// may need more than a settle); while a fault is in force it does not
// wait (a node killed, paused or cut off may refuse for good).
func TestClusterAwaitsServingAfterTheLastFaultEnds(t *testing.T) {
	for _, c := range []struct {
		steps []ClusterStep
		want  string
	}{
		{[]ClusterStep{{Do: "pause", Arg: "n2"}, {Do: "resume", Arg: "n2"}, {On: "B", Do: "reconnect"}}, "dial: error"},
		{[]ClusterStep{{Do: "isolate", Arg: "n1"}, {Do: "heal"}, {On: "A", Do: "reconnect"}}, "dial: error"},
		{[]ClusterStep{{Do: "kill", Arg: "n2"}, {On: "B", Do: "reconnect"}}, "dial: refused"},
		{[]ClusterStep{{Do: "isolate", Arg: "n1"}, {On: "A", Do: "reconnect"}}, "dial: refused"},
	} {
		e := &restartingCluster{refuse: 5}
		obs := RunClusterSteps(e, "t-", c.steps, 0)
		if got := obs[len(obs)-1]; got != c.want {
			t.Errorf("%v: the last step observed %q, want %q", c.steps, got, c.want)
		}
	}
	// A node that never serves again ends the wait after ServingTries, and
	// the fault step says so.
	e := &restartingCluster{refuse: 1 << 30}
	obs := RunClusterSteps(e, "t-", []ClusterStep{{Do: "resume", Arg: "n2"}, {On: "B", Do: "reconnect"}}, 0)
	if obs[0] != NotServing || obs[1] != "dial: refused" || e.refuse-e.left != ServingTries+1 {
		t.Errorf("a node refusing for good: observed %q after %d dials, want %q, then refused after %d", obs, e.refuse-e.left, NotServing, ServingTries+1)
	}
}

// flappingCluster serves after each fault as an autoheal that decides
// twice does: refused for a while (the first loser restarting), served,
// refused again (the second decision's loser), then served for good.
// script holds how many dials each phase lasts, refused first.
type flappingCluster struct {
	settleCounter
	script []int
	dials  int
}

func (e *flappingCluster) Dial(context.Context, broker.Config) (broker.Conn, error) {
	e.dials++
	n := e.dials
	for i, k := range e.script {
		if n <= k {
			if i%2 == 0 {
				return nil, broker.ErrRefused
			}
			return servedConn{}, nil
		}
		n -= k
	}
	return servedConn{}, nil
}

// servedConn is a connection a node took, on which no channel opens.
type servedConn struct{}

func (servedConn) Channel(context.Context) (broker.Channel, error) {
	return nil, errors.New("no channel")
}
func (servedConn) Close() error { return nil }
func (servedConn) Err() error   { return nil }

func (e *flappingCluster) Fault(fault, target string) error {
	e.dials = 0
	return e.settleCounter.Fault(fault, target)
}

// A cluster that serves once and then stops a node again (an autoheal's
// second decision) is waited for when the wait is steady: the step after
// the resume sees every node serve. Without it the step sees the refusal.
func TestClusterAwaitsASteadyCluster(t *testing.T) {
	steps := []ClusterStep{{Do: "resume", Arg: "n2"}, {On: "B", Do: "reconnect"}}
	// Two rounds refused (one dial each), one served (three dials), two
	// refused, then served.
	script := []int{2, 3, 2}
	e := &flappingCluster{script: script}
	if obs := RunClusterSteps(e, "t-", steps, 0); obs[1] != "dial: refused" {
		t.Errorf("steady 0: the step after the resume observed %q, want the second decision's \"dial: refused\"", obs[1])
	}
	e = &flappingCluster{script: script}
	obs := RunClusterSteps(e, "t-", steps, ClusterSteady)
	if obs[0] != "done" || obs[1] != "channel: error" {
		t.Errorf("steady %s: observed %q, want done, then a served dial (\"channel: error\" here)", ClusterSteady, obs)
	}
	// Rounds: 2 refused, 1 served, 2 refused, then ClusterSteady/1s + 1
	// served, the last of which returns without a sleep.
	if want := 2*1 + 3 + 2 + 3*(int(ClusterSteady/time.Second)+1) + 1; e.dials != want {
		t.Errorf("steady %s: %d dials, want %d", ClusterSteady, e.dials, want)
	}
}

// A node restarted while the two others are split (ignore never merges
// them) takes its records from one of them: which one is a race the real
// cluster ran n2's way (seed 20261126, sequence 76), and the simulator
// runs both, by the seed: C's publish through the restarted n3 to B's
// queue, recorded by n2 alone, is acked when n3 took n2's records and
// returned when it took n1's.
func TestRestartIntoASplitClusterTakesEitherSide(t *testing.T) {
	steps := []ClusterStep{{Do: "isolate", Arg: "n2"}, {On: "B", Do: "declare-exclusive", Arg: "q1"},
		{Do: "heal"}, {Do: "restart", Arg: "n3"}, {On: "C", Do: "publish", Arg: "q1"}}
	seen := map[string]int{}
	for seed := range uint64(SimSeeds) {
		obs, err := RunSimCluster(rabbitmq.Ignore, "", 5*time.Second, ClusterSteady, seed, steps)
		if err != nil {
			t.Fatal(err)
		}
		seen[obs[len(obs)-1]]++
	}
	if seen["acked"] == 0 || seen["returned"] == 0 || len(seen) != 2 {
		t.Errorf("C's publish through the restarted n3 over %d seeds: %v; want acked (n2's records) and returned (n1's), nothing else", SimSeeds, seen)
	}
	// From then on the two sides share their writes (sequence 89: n2
	// paused and continued, which leaves it apart under ignore, n3
	// restarted): n1 sees the queues declared through n3 and through n2
	// after the restart, on every seed; under autoheal a second decision
	// makes the cluster one instead (TestClusterAutohealPartialView).
	steps = []ClusterStep{{Do: "pause", Arg: "n2"}, {Do: "resume", Arg: "n2"}, {Do: "restart", Arg: "n3"},
		{On: "C", Do: "declare-exclusive", Arg: "q1"}, {On: "B", Do: "declare-exclusive", Arg: "q2"},
		{On: "A", Do: "declare-exclusive", Arg: "q1"}, {On: "A", Do: "declare-passive", Arg: "q2"}}
	for seed := range uint64(SimSeeds) {
		obs, err := RunSimCluster(rabbitmq.Ignore, "", 5*time.Second, ClusterSteady, seed, steps)
		if err != nil {
			t.Fatal(err)
		}
		if obs[5] != "405" || obs[6] != "405" {
			t.Errorf("seed %d: after n3's restart into the split cluster, n1 saw %s for n3's queue and %s for n2's; want 405 for both (%v)", seed, obs[5], obs[6], obs)
		}
	}
}

// A corpus of recorded real runs reads back as written and holds the
// simulated cluster to each; a record the simulator cannot give is the
// divergence, named by its sequence and step; a malformed line is
// refused with its line and what is wrong.
func TestClusterRecords(t *testing.T) {
	recs := corpus(t)[:4]
	var buf bytes.Buffer
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(line, '\n', '\n'))
	}
	back, err := ReadClusterRecords(&buf, "corpus")
	if err != nil || len(back) != len(recs) || !slices.Equal(back[3].Real, recs[3].Real) || back[2].Steps[5] != recs[2].Steps[5] {
		t.Fatalf("read back %d records (%v), want %d as written", len(back), err, len(recs))
	}
	if tally, d, err := MatchClusterRecords(back); err != nil || d != nil || tally.Agreed != len(recs) {
		t.Fatalf("the recorded runs: %+v, divergence %v, error %v; want all %d agreeing", tally, d, err, len(recs))
	}
	back[3].Real = slices.Clone(back[3].Real)
	back[3].Real[7] = "nacked"
	tally, d, err := MatchClusterRecords(back)
	if err != nil || tally.Agreed != 3 || d == nil || d.Seq != 76 || d.Step != 7 {
		t.Errorf("a nack no simulator gives: %+v, divergence %+v, error %v; want 3 agreeing, then sequence 76 at step 8", tally, d, err)
	}
	for _, c := range []struct{ line, want string }{
		{`{"mode":"sometimes","net_ticktime":"5s","steps":[{"do":"heal"}],"real":["done"]}`, `corpus:2: mode "sometimes"`},
		{`{"mode":"ignore","net_ticktime":"soon","steps":[{"do":"heal"}],"real":["done"]}`, `corpus:2: net_ticktime "soon"`},
		{`{"mode":"ignore","net_ticktime":"5s","steps":[{"do":"heal"}],"real":[]}`, "corpus:2: 1 steps and 0 observations"},
		{`{"mode":"ignore","net_ticktime":"5s","steps":[{"do":"heal"}],"real":["done"],"steady":"a while"}`, `corpus:2: steady "a while"`},
		{`{"mode":"ignore","net_ticktime":"5s","steps":[{"on":"D","do":"publish","arg":"q1"}],"real":["acked"]}`, `corpus:2: step 1: "publish" on "D"`},
		{`{"mode":"ignore","net_ticktime":"5s","steps":[{"do":"heal"}],"real":["done"],"colour":"red"}`, `corpus:2: json: unknown field "colour"`},
		{`{"mode":`, "corpus:2: unexpected EOF"},
	} {
		good, _ := json.Marshal(recs[0])
		_, err := ReadClusterRecords(strings.NewReader(string(good)+"\n"+c.line+"\n"), "corpus")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.line, err, c.want)
		}
	}
}

// The corpus of what the real cluster observed (testdata/cluster-real.jsonl,
// net_ticktime 5 s, written by conform --cluster --record): the simulated
// cluster must give every one, after any change to it. Its first four are
// the sequences where it once diverged, run again: under pause_minority,
// seed 1's third sequence of 8 steps, a bridge through n1, in two of four
// runs: in the first n3 noticed n2 down first, its on_node_down deleted
// n2's queue records in n1's copy too (n1's "home node down" for n2's
// durable queue) and it paused, n2 noticing n3 down after n3 had stopped
// and serving on; in the other n2 paused. Under autoheal, seed 12's
// sixth: n3 paused for 12 s and continued; n2, which had given n3 up,
// kept n1's queue records (405 for A's exclusive queue), though n3's
// on_node_down for n1 ran. Under ignore, seed 20261126's 77th: n2 cut off
// and healed (the cluster left split), n3 restarted took n2's records
// (C's publish to B's queue on n2 acked), where the simulator took n1's
// (TestRestartIntoASplitClusterTakesEitherSide). The rest are the long
// runs' sequences, each of which agreed when it ran.
func TestSimClusterGivesEveryRecordedRun(t *testing.T) {
	recs := corpus(t)
	modes := map[string]int{}
	for _, r := range recs {
		modes[r.Mode]++
	}
	tally, d, err := MatchClusterRecords(recs)
	if err != nil {
		t.Fatal(err)
	}
	if d != nil {
		r := recs[tally.Compared()]
		t.Fatalf("%s, seed %d: the simulated cluster no longer gives what the real one observed:\n%s", r.Mode, r.Seed, d)
	}
	if tally.Inconclusive > 0 {
		t.Errorf("%d recorded runs are inconclusive: the corpus keeps settled runs only", tally.Inconclusive)
	}
	t.Logf("%d recorded real runs agree (%v)", tally.Agreed, modes)
}

// corpus reads testdata/cluster-real.jsonl.
func corpus(t *testing.T) []ClusterRecord { return records(t, "cluster-real.jsonl") }

// records reads a file of testdata/ written by conform --cluster --record.
func records(t *testing.T, name string) []ClusterRecord {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := ReadClusterRecords(f, f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// The real runs the simulated cluster cannot give (testdata/
// cluster-diverged.jsonl: autoheal's restarts at moments the harness had
// already looked, a timeout of a loaded machine; docs/rabbitmq-cluster.md)
// are kept apart from the corpus. Each must still diverge: one that agrees
// after a change of the simulator moves to cluster-real.jsonl, where
// TestSimClusterGivesEveryRecordedRun holds every later change to it.
func TestSimClusterDivergedRunsStayApart(t *testing.T) {
	recs := records(t, "cluster-diverged.jsonl")
	if len(recs) == 0 {
		t.Fatal("no diverged runs read")
	}
	for _, r := range recs {
		if _, d, err := MatchClusterRecords([]ClusterRecord{r}); err != nil {
			t.Fatal(err)
		} else if d == nil {
			t.Errorf("%s, seed %d, sequence %d: the simulated cluster now gives what the real one observed: move it to cluster-real.jsonl", r.Mode, r.Seed, r.Sequence)
		}
	}
}

// A real run in which a node did not serve again within the wait after a
// fault (NotServing) is inconclusive from there: its steps before it must
// agree, its steps after it are not compared, and it is counted apart
// from the runs that agreed.
func TestUnsettledRunIsInconclusive(t *testing.T) {
	var rec ClusterRecord
	k := -1
	methodOrCut := func(s ClusterStep) bool {
		return s.On != "" || s.Do == "isolate" || s.Do == "cut-one-way" || s.Do == "bridge"
	}
	for _, r := range corpus(t) {
		// A heal, not the last step, after cuts and no other fault: no
		// fault is in force after it.
		i := slices.IndexFunc(r.Steps, func(s ClusterStep) bool { return s.Do == "heal" })
		if i > 0 && i < len(r.Steps)-1 && !slices.ContainsFunc(r.Steps[:i], func(s ClusterStep) bool { return !methodOrCut(s) }) {
			rec, k = r, i
			break
		}
	}
	if k < 0 {
		t.Fatal("no recorded run with a heal after cuts only")
	}
	rec.Real = slices.Clone(rec.Real)
	rec.Real[k] = NotServing
	for i := k + 1; i < len(rec.Real); i++ {
		rec.Real[i] = "nacked" // what no simulator gives
	}
	tally, d, err := MatchClusterRecords([]ClusterRecord{rec})
	if err != nil || d != nil || tally != (ClusterTally{Inconclusive: 1}) {
		t.Errorf("unsettled at step %d: %+v, divergence %v, error %v; want one inconclusive", k+1, tally, d, err)
	}
	rec.Real[k-1] = "nacked"
	tally, d, err = MatchClusterRecords([]ClusterRecord{rec})
	if err != nil || d == nil || d.Step != k-1 || tally != (ClusterTally{}) {
		t.Errorf("differing before the unsettled step: %+v, divergence %v, error %v; want a divergence at step %d", tally, d, err, k)
	}
}

// The differential holds the khepri mode to a 4.3.6 cluster in the
// differential's terms (broker-semantics.md K.1 to K.8): with n1 cut
// off, B's exclusive declare through n2 of A's queue is refused (405,
// K.2), A's passive declare through n1 of its own queue answers from n1's
// copy (ok, K.3), A's durable declare through n1 gets no answer within
// the step's 2 s (it waits Khepri's 30 s, K.4) and B's through n2 is
// made, and B's passive declare through n2 of A's queue, whose node is
// cut off, gets no answer (K.4b); after the heal A's queue is kept (C's
// declare 405: the delete at the close of A's connection, through the
// cut-off n1, was lost, K.8) and n1 has caught up (A's passive declare of
// d1, made through n2 during the cut: ok). Every seed gives it.
func TestSimClusterKhepriSequence(t *testing.T) {
	steps := []ClusterStep{{On: "A", Do: "declare-exclusive", Arg: "q1"}, {Do: "isolate", Arg: "n1"},
		{On: "B", Do: "declare-exclusive", Arg: "q1"}, {On: "A", Do: "declare-passive", Arg: "q1"},
		{On: "A", Do: "declare-durable", Arg: "d1"}, {On: "B", Do: "declare-durable", Arg: "d1"},
		{On: "B", Do: "declare-passive", Arg: "q1"}, {Do: "heal"},
		{On: "C", Do: "declare-exclusive", Arg: "q1"}, {On: "A", Do: "declare-passive", Arg: "d1"}}
	want := []string{"ok", "done", "405", "ok", "timeout", "ok", "timeout", "done", "405", "ok"}
	for seed := range uint64(16) {
		obs, err := RunSimCluster(rabbitmq.Khepri, "", 5*time.Second, ClusterSteady, seed, steps)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(obs, want) {
			t.Errorf("seed %d: %v, want %v", seed, obs, want)
		}
	}
}
