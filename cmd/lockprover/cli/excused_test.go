package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories/results"
)

// A pass that rests on excuses says so: prove names the properties that
// held on some plans only by excuses, and on how many (the first excuse of
// each too, unless --quiet), its JSON summary counts them, and merge adds
// the shards' counts; explore's cells say it. On amqp-locks' seed 1,
// available is excused on many plans (unknown outcomes under faults).
func TestPassesByExcusesAreShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, out, errOut := lockprover("prove", "--runs", "300", "--seed", "1", "--json", filepath.Join(dir, "all.json"))
	if code != exitOK || !strings.Contains(out, "passed only by excuses: ") || !strings.Contains(out, "  available, the first: ") || !strings.Contains(out, "excused by") {
		t.Fatalf("prove: exit %d\n%s%s", code, out, errOut)
	}
	data, err := os.ReadFile(filepath.Join(dir, "all.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum results.Summary
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	excused := 0
	for _, p := range sum.Properties {
		if p.Name == "available" {
			excused = p.Excused
			if p.FirstExcuse == "" || p.Excused > p.Pass {
				t.Errorf("available in the summary: %+v", p)
			}
		}
	}
	if excused == 0 || !strings.Contains(out, "available on "+itoa(excused)) {
		t.Errorf("available excused on %d plans in the summary; the output:\n%s", excused, out)
	}
	code, out, _ = lockprover("prove", "--runs", "300", "--seed", "1", "--quiet")
	if code != exitOK || !strings.Contains(out, "passed only by excuses: ") || strings.Contains(out, "the first: ") {
		t.Errorf("prove --quiet: exit %d\n%s", code, out)
	}
	for i := 1; i <= 2; i++ {
		s := itoa(i)
		if code, out, errOut := lockprover("prove", "--runs", "300", "--seed", "1", "--shard", s+"/2", "--quiet", "--json", filepath.Join(dir, "shard"+s, "results.json")); code != exitOK {
			t.Fatalf("shard %d: exit %d\n%s%s", i, code, out, errOut)
		}
	}
	code, out, errOut = lockprover("merge", filepath.Join(dir, "shard1"), filepath.Join(dir, "shard2"))
	if code != exitOK || !strings.Contains(out, "available on "+itoa(excused)+" (of 300 plans)") {
		t.Errorf("merge: exit %d, want available on %d\n%s%s", code, excused, out, errOut)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
