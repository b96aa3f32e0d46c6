package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Under ignore, a cluster whose nodes list a partition is split for good
// (Recover stops waiting and restarts the side given up); under
// pause_minority and autoheal the mode resolves it, and a cluster whose
// nodes list none (nodes still reconnecting, one down) may yet agree.
func TestSplitForGood(t *testing.T) {
	listed := []*Status{
		{Running: []string{"a"}, Partitions: map[string][]string{"a": {"b"}}},
		nil,
		{Running: []string{"b", "c"}},
	}
	reconnecting := []*Status{{Running: []string{"a"}}, nil, {Running: []string{"b", "c"}}}
	for _, c := range []struct {
		mode string
		sts  []*Status
		want bool
	}{
		{Ignore, listed, true},
		{PauseMinority, listed, false},
		{Autoheal, listed, false},
		{Ignore, reconnecting, false},
		{Ignore, []*Status{nil, nil, nil}, false},
	} {
		if got := splitForGood(c.mode, c.sts); got != c.want {
			t.Errorf("%s, %v: split for good %v, want %v", c.mode, c.sts, got, c.want)
		}
	}
}

// The nodes given up are those outside the largest side a node sees
// running (the first such node's side of a tie), as the simulated
// cluster's Settle gives up; where none is outside it (after a bridge the
// bridge node sees every node running), every node but the first.
func TestGivenUp(t *testing.T) {
	names := []string{"n1", "n2", "n3"}
	all := []string{"n1", "n2", "n3"}
	for _, c := range []struct {
		what string
		sts  []*Status
		want []int
	}{
		{"n1 isolated, then healed", []*Status{
			{Running: []string{"n1"}, Partitions: map[string][]string{"n1": {"n2", "n3"}}},
			{Running: []string{"n2", "n3"}, Partitions: map[string][]string{"n2": {"n1"}}},
			{Running: []string{"n2", "n3"}},
		}, []int{0}},
		{"n3 paused past its peers' tick, then continued", []*Status{
			{Running: []string{"n1", "n2"}},
			{Running: []string{"n1", "n2"}, Partitions: map[string][]string{"n2": {"n3"}}},
			nil,
		}, []int{2}},
		{"a bridge through n1", []*Status{
			{Running: all},
			{Running: []string{"n1", "n2"}, Partitions: map[string][]string{"n2": {"n3"}}},
			{Running: []string{"n1", "n3"}, Partitions: map[string][]string{"n3": {"n2"}}},
		}, []int{1, 2}},
		{"three sides of one, n1 silent: n2's is kept", []*Status{
			nil,
			{Running: []string{"n2"}},
			{Running: []string{"n3"}},
		}, []int{0, 2}},
		{"every node sees every node, none lists a partition", []*Status{
			{Running: all}, {Running: all}, {Running: all},
		}, []int{1, 2}},
		{"no node answers", []*Status{nil, nil, nil}, []int{0, 1, 2}},
	} {
		if got := givenUp(names, c.sts); !slices.Equal(got, c.want) {
			t.Errorf("%s: given up %v, want %v", c.what, got, c.want)
		}
	}
}

// A recovery says what it did and where its time went: its restarts
// counted from what it did, a wait cut short named.
func TestRecoveryTimes(t *testing.T) {
	r := Recovery{Did: []string{"healed the lab", "restarted n1"}, Agreement: 3 * time.Second, Polls: 2, Calls: 6,
		Status: 3 * time.Second, Restarts: 7 * time.Second, Stops: time.Second, Stuck: 1}
	if !r.Restarted() || (Recovery{Did: []string{"healed the lab", "started n2"}}).Restarted() {
		t.Errorf("Restarted: %v for %q; want true, and false for a start", r.Restarted(), r)
	}
	want := "agreement 3s in 2 polls (6 cluster_status, 0.5s each, 1 cut short by a lasting partition), 1 restarts 7s (stops 1s), starts 0s, heal 0s"
	if got := r.Times(); got != want {
		t.Errorf("Times:\n%s\nwant\n%s", got, want)
	}
	r.Skipped = 4
	if got := r.Times(); !strings.Contains(got, "lasting partition, 4 skipped while a node took no connection)") {
		t.Errorf("Times with polls skipped: %s", got)
	}
	if got := r.String(); got != "healed the lab, restarted n1" {
		t.Errorf("String: %q", got)
	}
}

// The fallback's restarts stop at the first that makes the cluster
// agree, give the last node the long wait, and stop at a failed restart.
func TestRestartUntil(t *testing.T) {
	for _, c := range []struct {
		agreesAfter, failAt int // -1: never
		want                []string
		ok, err             bool
	}{
		{0, -1, []string{"restart 0", "ask 0 (last false)"}, true, false},
		{1, -1, []string{"restart 0", "ask 0 (last false)", "restart 1", "ask 1 (last false)"}, true, false},
		{-1, -1, []string{"restart 0", "ask 0 (last false)", "restart 1", "ask 1 (last false)", "restart 2", "ask 2 (last true)"}, false, false},
		{-1, 1, []string{"restart 0", "ask 0 (last false)", "restart 1"}, false, true},
	} {
		var did []string
		cur := -1
		ok, err := restartUntil(3, func(i int) error {
			did = append(did, fmt.Sprint("restart ", i))
			cur = i
			if i == c.failAt {
				return errors.New("no start")
			}
			return nil
		}, func(last bool) bool {
			did = append(did, fmt.Sprintf("ask %d (last %v)", cur, last))
			return cur == c.agreesAfter
		})
		if ok != c.ok || (err != nil) != c.err || !slices.Equal(did, c.want) {
			t.Errorf("agreeing after restart %d, failing at %d: %v, %v, did %q; want %v, error %v, %q", c.agreesAfter, c.failAt, ok, err, did, c.ok, c.err, c.want)
		}
	}
}

// While a node takes no connection, the wait for agreement asks
// rabbitmqctl only every slowPoll (each call boots a VM); once every node
// serves, at every round again; it returns what the last poll said.
func TestAwaitAgreementSkipsPollsWhileANodeIsDown(t *testing.T) {
	var polls int
	served := false
	poll := func(ctx context.Context, r *Recovery) ([]*Status, bool) {
		polls++
		r.Polls++
		return []*Status{{Running: []string{"n1"}}}, served && polls >= 3
	}
	var r Recovery
	sts, ok := pollUntilAgreed(context.Background(), Autoheal, 2*time.Second, &r, poll, func(context.Context) bool { return false })
	if ok || polls != 1 || r.Skipped < 2 || len(sts) != 1 {
		t.Errorf("a node down for 2 s: agreed %v after %d polls, %d skipped, last %v; want no agreement, 1 poll (the first), the rest skipped, the poll's statuses", ok, polls, r.Skipped, sts)
	}
	polls, served, r = 0, true, Recovery{}
	if _, ok := pollUntilAgreed(context.Background(), Autoheal, 10*time.Second, &r, poll, func(context.Context) bool { return true }); !ok || polls != 3 || r.Skipped != 0 {
		t.Errorf("every node serving: agreed %v after %d polls, %d skipped; want agreement at the third poll, none skipped", ok, polls, r.Skipped)
	}
}
