package redisconform

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/sim/redissim"
)

// The sorted sets' steps are held to Redis's words: a simulator that
// words one of their errors otherwise, or writes a score otherwise
// ("1.50" for "1.5"), is caught at such a step.
func TestDifferentialHoldsSortedSets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alter func(s step, r redissim.Result) redissim.Result
	}{
		{"error words", func(s step, r redissim.Result) redissim.Result {
			if _, script := semSources[s.kind]; s.zcmd != nil && !script && r.Err != nil {
				r.Err = redissim.Error(strings.ToLower(r.Err.Error()))
			}
			return r
		}},
		{"scores", func(s step, r redissim.Result) redissim.Result {
			if v, ok := r.Val.(string); ok && s.kind == "ZSCORE" && strings.Contains(v, ".") {
				r.Val = v + "0"
			}
			if vs, ok := r.Val.([]any); ok && s.kind == "ZRANGE" && strings.Contains(strings.Join(s.zcmd, " "), "WITHSCORES") {
				for i := 1; i < len(vs); i += 2 {
					if v, ok := vs[i].(string); ok && strings.Contains(v, ".") {
						vs[i] = v + "0"
					}
				}
			}
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := privateServers(t, 2) // fresh: the keys of a sequence's first run are named alike in both
			alterSim = tc.alter
			t.Cleanup(func() { alterSim = nil })
			rep, err := Differential(context.Background(), addrs, 300, 11, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s\n%s", rep, rep.Divergence)
			if !regexp.MustCompile(`(?m)^!! +\d+  (sleep [^;]+; )?Z[A-Z]+ `).MatchString(rep.Divergence) {
				t.Errorf("the broken simulator was not caught at a sorted set's command:\n%s", rep.Divergence)
			}
		})
	}
}

// The differential's scripts are npm redis-semaphore's, as installed in
// examples/upstream (skipped where they are not).
func TestSemaphoreScriptsAreTheLibrarys(t *testing.T) {
	lib := "../../../examples/upstream/node-redis-semaphore/node_modules/redis-semaphore/lib/semaphore"
	for kind, file := range map[string]string{"semAcquire": "acquire/lua.js", "semRefresh": "refresh/lua.js"} {
		b, err := os.ReadFile(filepath.Join(lib, file))
		if errors.Is(err, os.ErrNotExist) {
			t.Skipf("redis-semaphore is not installed (npm ci in examples/upstream/node-redis-semaphore): %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "`"+semSources[kind]+"`") {
			t.Errorf("%s is not the script of %s", kind, file)
		}
	}
}
