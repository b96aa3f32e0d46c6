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
)

// prove says which orders of two operations its plans reached, and in what
// share of them; --quiet leaves it out.
func TestProveSaysWhichInterleavingsItReached(t *testing.T) {
	code, out, _ := lockprover("prove", "--runs", "200", "--seed", "1")
	if code != exitOK || !regexp.MustCompile(`\n\d+ interleavings of two operations reached; the rarest: [a-z]+ after (own|another's) [a-z]+ (<1|\d+)%, `).MatchString(out) {
		t.Errorf("prove: exit %d\n%s", code, out)
	}
	code, out, _ = lockprover("prove", "--runs", "20", "--seed", "1", "--quiet")
	if code != exitOK || strings.Contains(out, "interleavings") {
		t.Errorf("prove --quiet: exit %d\n%s", code, out)
	}
}

// --json lists the interleavings too, with their plans, and merge adds up
// the shards' (two shards of one search reach what the search reaches).
func TestInterleavingsInJSON(t *testing.T) {
	dir := t.TempDir()
	read := func(path string) map[string]int {
		t.Helper()
		var sum struct {
			Plans         int `json:"plans"`
			Interleavings []struct {
				Order string `json:"order"`
				Plans int    `json:"plans"`
			} `json:"interleavings"`
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &sum); err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, i := range sum.Interleavings {
			if i.Plans < 1 || i.Plans > sum.Plans {
				t.Errorf("%s: %s in %d of %d plans", path, i.Order, i.Plans, sum.Plans)
			}
			m[i.Order] = i.Plans
		}
		return m
	}
	whole := filepath.Join(dir, "whole.json")
	if code, out, errOut := lockprover("prove", "--runs", "400", "--seed", "2", "--quiet", "--json", whole); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	all := read(whole)
	if all["count after another's change"] == 0 || all["acquire after own release"] == 0 {
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
