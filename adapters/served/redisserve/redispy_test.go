package redisserve_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"

	"github.com/lockprover/lockprover/adapters/served/redisserve"
	"github.com/lockprover/lockprover/sim/redissim"
)

// redis-py's own Lock (acquire, extend, reacquire, release: its Lua
// scripts, by EVALSHA after SCRIPT LOAD) on the served simulator, through
// testdata/redispy_lock.py.
func TestRedisPyLock(t *testing.T) {
	t.Parallel()
	if exec.Command("/usr/bin/python3", "-c", "import redis").Run() != nil {
		t.Skip("redis-py's test needs Debian's python3-redis for /usr/bin/python3 (apt-get install python3-redis)")
	}
	var got map[string]any
	_, s, errs := serve(t, redissim.Options{}, redisserve.Options{}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		out, err := exec.Command("/usr/bin/python3", "testdata/redispy_lock.py", sp.Addrs()[0]).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return json.Unmarshal(out, &got)
	}})
	check(errs, t)
	t.Logf("redis-py %v: %v", got["version"], got)
	for k, want := range map[string]any{"acquire": true, "owned": true, "extend": true, "other_acquire": false,
		"reacquire": true, "exists_after_release": 0.0, "second_release": "LockNotOwnedError"} {
		if got[k] != want {
			t.Errorf("%s: got %v, want %v", k, got[k], want)
		}
	}
	if p, _ := got["pttl_after_extend"].(float64); p < 2900 || p > 3000 {
		t.Errorf("PTTL after extend(1) of a 2 s lock: %v, want 3 s or a little less", got["pttl_after_extend"])
	}
	if p, _ := got["pttl_after_reacquire"].(float64); p < 1900 || p > 2000 {
		t.Errorf("PTTL after reacquire: %v, want 2 s or a little less", got["pttl_after_reacquire"])
	}
	if u := s.Unserved(); len(u) > 0 {
		t.Errorf("unserved %q", u)
	}
	t.Logf("log: %q", s.Log()["c1"])
}
