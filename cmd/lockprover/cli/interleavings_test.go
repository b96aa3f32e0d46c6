package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/internal/quick"
)

// prove says how many of the family's goals its plans reached, by whose
// operations met, how many plans it steered, the rarest reached with their
// share of plans, and the goals it never reached; --quiet leaves it out.
func TestProveSaysWhichInterleavingsItReached(t *testing.T) {
	code, out, _ := lockprover("prove", "--runs", "200", "--seed", "1")
	if code != exitOK || !regexp.MustCompile(`\ngoals: \d+ of 129 reached \(admin/admin \d+/33, admin/client \d+/18, client/admin \d+/19, client/client \d+/23, faults \d+/36\), 100 steered; the rarest: [a-z-]+ (after|during) [^,]+ (<1|\d+)% \(--json lists them all\)\n`).MatchString(out) {
		t.Errorf("prove: exit %d\n%s", code, out)
	}
	// In 20 plans, some goals are never reached: prove names them.
	code, out, _ = lockprover("prove", "--runs", "20", "--seed", "1")
	if code != exitOK || !regexp.MustCompile(`\nnever reached: [a-z-]+ (after|during) [^\n]+ and \d+ more\n`).MatchString(out) {
		t.Errorf("prove --runs 20: exit %d\n%s", code, out)
	}
	code, out, _ = lockprover("prove", "--runs", "20", "--seed", "1", "--quiet")
	if code != exitOK || strings.Contains(out, "interleavings") {
		t.Errorf("prove --quiet: exit %d\n%s", code, out)
	}
}

// --json lists the interleavings too, with their plans, the goals among
// them (those never reached with 0 plans) and the plans aimed at each, and
// merge adds up the shards' (two shards of one search reach and aim at
// what the search does).
func TestInterleavingsInJSON(t *testing.T) {
	dir := t.TempDir()
	type il struct {
		Order string `json:"order"`
		Plans int    `json:"plans"`
		Goal  bool   `json:"goal"`
		Aimed int    `json:"aimed"`
	}
	read := func(path string) map[string]il {
		t.Helper()
		var sum struct {
			Plans         int  `json:"plans"`
			Steered       int  `json:"steered_plans"`
			Interleavings []il `json:"interleavings"`
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &sum); err != nil {
			t.Fatal(err)
		}
		m := map[string]il{}
		aimed := 0
		for _, i := range sum.Interleavings {
			if i.Plans < 0 || i.Plans < 1 && !i.Goal || i.Plans > sum.Plans {
				t.Errorf("%s: %s in %d of %d plans", path, i.Order, i.Plans, sum.Plans)
			}
			m[i.Order] = i
			aimed += i.Aimed
		}
		if aimed != sum.Steered || sum.Steered != sum.Plans/2 {
			t.Errorf("%s: %d plans steered, %d aimed at goals, of %d", path, sum.Steered, aimed, sum.Plans)
		}
		return m
	}
	whole := filepath.Join(dir, "whole.json")
	if code, out, errOut := lockprover("prove", "--runs", "400", "--seed", "2", "--quiet", "--json", whole); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	all := read(whole)
	if all["count after another's change (admin/admin)"].Plans == 0 || all["acquire after own release (client/client)"].Plans == 0 ||
		!all["change during another's change (admin/admin)"].Goal || all["create after another's wait (admin/admin)"].Goal {
		t.Fatalf("--json lacks interleavings: %v", all)
	}
	var shards []string
	for i := 1; i <= 2; i++ {
		f := filepath.Join(dir, fmt.Sprintf("shard%d.json", i))
		if code, out, errOut := lockprover("prove", "--runs", "400", "--seed", "2", "--quiet", "--shard", fmt.Sprintf("%d/2", i), "--json", f); code != exitOK {
			t.Fatalf("shard %d: exit %d\n%s%s", i, code, out, errOut)
		}
		shards = append(shards, f)
	}
	merged := filepath.Join(dir, "merged.json")
	if code, out, errOut := lockprover(append([]string{"merge", "--json", merged}, shards...)...); code != exitOK {
		t.Fatalf("merge: exit %d\n%s%s", code, out, errOut)
	}
	if got := read(merged); !maps.Equal(got, all) {
		t.Errorf("merged shards reach %v, the whole search %v", got, all)
	}
}

// On real RabbitMQ, prove with its defaults draws its second plan toward
// the goal reached least, first in amqp-locks' order: two admins' changes
// at once, which the mutant no-admin-mutex (both read the same maximum and
// extend it) needs; the run reaches it by design and catches the mutant.
// How many plans and seconds it took is logged (docs/amqp-locks.md shows
// it), not asserted.
func TestNoAdminMutexOnRabbitMQ(t *testing.T) {
	quick.Skip(t, "a real broker, plans of seconds each")
	t.Parallel()
	u := rabbitmqtest.URL(t)
	dir := t.TempDir()
	sum := filepath.Join(dir, "sum.json")
	start := time.Now()
	code, out, errOut := lockprover("prove", "--mutant", "no-admin-mutex", "--target", "rabbitmq", "--amqp-url", u, "--seed", "1",
		"--shrink-time", "5s", "--out", filepath.Join(dir, "out"), "--json", sum)
	if code != exitViolation {
		t.Fatalf("no-admin-mutex not caught on RabbitMQ: exit %d\n%s%s", code, out, errOut)
	}
	var s struct {
		Plans         int `json:"plans"`
		Steered       int `json:"steered_plans"`
		Interleavings []struct {
			Order        string
			Plans, Aimed int
			Goal         bool
		} `json:"interleavings"`
	}
	data, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	reached := false
	for _, i := range s.Interleavings {
		if i.Order == "change during another's change (admin/admin)" {
			reached = i.Goal && i.Aimed >= 1 && i.Plans >= 1
		}
	}
	if !reached || s.Steered < 1 {
		// The counterexample's summary and history, for the cause: a run
		// whose first plan failed stops before any steering (seen once
		// beside the suite: persistent failed on plan 1, slots vanished).
		cx, _ := os.ReadFile(filepath.Join(dir, "out", "summary.txt"))
		h, _ := os.ReadFile(filepath.Join(dir, "out", "history.jsonl"))
		t.Errorf("two admins' changes at once not aimed at and reached (%d plans steered):\n%s\nthe counterexample:\n%s\nits history:\n%s", s.Steered, data, cx, h)
	}
	t.Logf("caught after %d plans (%d steered), %v in all:\n%s", s.Plans, s.Steered, time.Since(start).Round(time.Second), out)
}
