package rabbitmq

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKhepriTally counts how often a Khepri cluster frees the exclusive
// queue of a holder whose node it lost (broker-semantics.md K.2 and K.6),
// run after run, with the metadata store's leader read before each fault:
// a row measured twice cannot say how often, nor whether the leader
// decides it. Each run starts a cluster of its own (holder on n1,
// contender on n2), strikes one fault at n1 (a cut both ways, or a kill),
// and has the contender try an exclusive declare of the holder's queue
// through n2 every 250 ms for a window (40 s after a cut, 55 s after a
// kill, 20 s after a pause, and then, the node continued, whether the
// contender's queue is still there); it logs one row per run and a tally
// per fault and leader. It
// asserts only that each run measured something (a leader read, a
// contender answered): the counts are what it is for.
//
// LOCKPROVER_CLUSTER_ROWS=khepri-tally runs it, on the version of
// LOCKPROVER_TALLY_VERSION (default 4.0.5, with khepri_db enabled),
// LOCKPROVER_TALLY_RUNS runs of each fault (default 10) of
// LOCKPROVER_TALLY_FAULTS (cut, kill, pause; default cut,kill), the
// contender's first try LOCKPROVER_TALLY_FIRST after the fault (a Go
// duration, default 0: a late contender, as a hand plan's, may find what
// one trying from the fault on does not).
func TestKhepriTally(t *testing.T) {
	if os.Getenv("LOCKPROVER_CLUSTER_ROWS") != "khepri-tally" {
		t.Skip("counts K.2 and K.6 outcomes over many clusters (about two minutes a run): LOCKPROVER_CLUSTER_ROWS=khepri-tally runs it")
	}
	version := os.Getenv("LOCKPROVER_TALLY_VERSION")
	if version == "" {
		version = "4.0.5"
	}
	runs := 10
	if s := os.Getenv("LOCKPROVER_TALLY_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LOCKPROVER_TALLY_RUNS=%q: want a whole number of runs, at least 1", s)
		}
		runs = n
	}
	faults := []string{"cut", "kill"}
	if s := os.Getenv("LOCKPROVER_TALLY_FAULTS"); s != "" {
		faults = strings.Split(s, ",")
		for _, f := range faults {
			if f != "cut" && f != "kill" && f != "pause" {
				t.Fatalf("LOCKPROVER_TALLY_FAULTS=%q: %q is not cut, kill or pause", s, f)
			}
		}
	}
	first, err := time.ParseDuration(cmp.Or(os.Getenv("LOCKPROVER_TALLY_FIRST"), "0s"))
	if err != nil || first < 0 {
		t.Fatalf("LOCKPROVER_TALLY_FIRST=%q: want a duration such as 12s", os.Getenv("LOCKPROVER_TALLY_FIRST"))
	}
	o := ClusterOptions{Version: rootedVersion(t, version), PartitionHandling: Khepri}
	tally := map[string]int{}
	for i := 1; i <= runs; i++ {
		for _, fault := range faults {
			t.Run(fmt.Sprintf("%s-%d", fault, i), func(t *testing.T) {
				leader, outcome := tallyRun(t, o, fault, first)
				tally[fault+" "+outcome+", "+leader+" leading"]++
				tally[fault+" "+outcome]++
			})
		}
	}
	keys := make([]string, 0, len(tally))
	for k := range tally {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("tally (%s, %d runs a fault): %s: %d", version, runs, k, tally[k])
	}
}

// tallyRun is one run of TestKhepriTally: which node led the store
// before the fault, as n2 saw it ("n1", "n2", "n3"), and whether the
// contender took the lost holder's queue ("freed at 13.1s") or not
// ("kept").
func tallyRun(t *testing.T, o ClusterOptions, fault string, first time.Duration) (leader, outcome string) {
	s, cut := newKhepriSetup(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := s.n2.Ctl(ctx, "eval", "ra_leaderboard:lookup_leader(rabbitmq_metadata).")
	leader = "unknown"
	for i, n := range []*Node{s.n1, s.n2, s.n3} {
		if err == nil && strings.Contains(out, "'"+n.Name+"'") {
			leader = fmt.Sprintf("n%d", i+1)
		}
	}
	if leader == "unknown" {
		t.Errorf("the store's leader, as n2 sees it: %v %s", err, strings.TrimSpace(out))
	}
	window := 40 * time.Second
	t0 := time.Now()
	switch fault {
	case "cut":
		err = cut(ctx, s.n2.Host, s.n3.Host)
	case "kill":
		window = 55 * time.Second
		err = s.n1.Crash()
	case "pause":
		window = 20 * time.Second
		err = s.n1.Pause()
	}
	if err != nil {
		t.Fatal(err)
	}
	cont := &timeline{t0: t0}
	time.Sleep(first)
	for time.Since(t0) < window+first {
		r := probe(s.contender, 2*time.Second, exclusive(s.b))
		cont.see(r)
		if r == "ok" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	outcome = "kept"
	if at, took := cont.when("ok"); took {
		outcome = fmt.Sprintf("freed at %.1fs", at.Seconds())
	}
	t.Logf("run (%s, %s of n1, %s leading): the contender's exclusive declare through n2: %s; the holder's connection: %s", o.Version.Name, fault, leader, cont, s.holderW.since(t0))
	if fault == "pause" {
		if err := s.n1.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(outcome, "freed") {
		return leader, outcome
	}
	if fault == "pause" {
		// K.6 on 4.0.5: the paused node, continuing, may delete the
		// contender's queue by its name.
		agreed := awaitAgreement(ctx, s.n2, s.c, 90*time.Second)
		time.Sleep(5 * time.Second)
		mine := probe(s.contender, 5*time.Second, passive(s.b))
		t.Logf("run (%s, pause of n1, %s leading): n1 continued, the cluster agreed %.1fs after; the contender's verify (a passive declare of its queue through n2): %s", o.Version.Name, leader, agreed.Seconds(), mine)
		if mine != "ok" {
			return leader, "freed, then the contender's queue gone"
		}
	}
	return leader, "freed"
}
