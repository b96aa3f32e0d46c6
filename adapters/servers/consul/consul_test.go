package consul

import (
	"context"
	"errors"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/host/proc/proctest"
)

// start starts a private agent for the test, stopped when it ends; it
// skips the test when there is no consul binary.
func start(t *testing.T, o Options) *Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	began := time.Now()
	a, err := Start(ctx, t.TempDir(), o)
	if errors.Is(err, ErrNoConsul) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v agent up on %s in %v", o.Mode, a.Addr(), time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		// A stop that had to kill the agent after its grace left nothing
		// behind either: on a loaded machine Consul can take longer than
		// 30 s to shut down, which is not what these tests judge.
		if err := a.Stop(); errors.Is(err, proc.ErrKilled) {
			t.Log(err)
		} else if err != nil {
			t.Error(err)
		}
	})
	return a
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// session creates a session of ttl on a.
func session(t *testing.T, a *Agent, ttl time.Duration) string {
	t.Helper()
	var out struct{ ID string }
	body := `{"TTL":"` + ttl.String() + `","NodeChecks":[],"Behavior":"delete","LockDelay":"0s"}`
	if err := a.put(ctx(t), "/v1/session/create", body, &out); err != nil {
		t.Fatal(err)
	}
	return out.ID
}

// alive says whether a's session id exists (renewing it).
func alive(t *testing.T, a *Agent, id string) bool {
	t.Helper()
	err := a.put(ctx(t), "/v1/session/renew/"+id, "", nil)
	return err == nil
}

func TestFindHonoursTheEnvironment(t *testing.T) {
	t.Setenv("LOCKPROVER_CONSUL", "/nonexistent/consul")
	if _, err := Find(); !errors.Is(err, ErrNoConsul) {
		t.Fatalf("Find with a missing $LOCKPROVER_CONSUL: %v, want ErrNoConsul", err)
	}
	t.Setenv("LOCKPROVER_CONSUL", "")
	t.Setenv("PATH", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if _, err := Find(); !errors.Is(err, ErrNoConsul) {
		t.Fatalf("Find with no binary anywhere: %v, want ErrNoConsul", err)
	}
}

func TestDevRestartForgetsSessions(t *testing.T) {
	a := start(t, Options{})
	id := session(t, a, 30*time.Second)
	pid := a.PID()
	if pid == 0 {
		t.Fatal("no PID")
	}
	began := time.Now()
	if err := a.Restart(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %v", time.Since(began).Round(time.Millisecond))
	if a.PID() == pid || a.PID() == 0 {
		t.Fatalf("PID %d after the restart, was %d", a.PID(), pid)
	}
	if alive(t, a, id) {
		t.Fatal("a dev agent kept a session across a restart")
	}
}

func TestPersistentRestartKeepsSessions(t *testing.T) {
	a := start(t, Options{Mode: Persistent})
	id := session(t, a, 30*time.Second)
	began := time.Now()
	if err := a.Restart(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %v", time.Since(began).Round(time.Millisecond))
	if !alive(t, a, id) {
		t.Fatal("a persistent agent lost a session across a restart")
	}
}

// The session's TTL timer is reset when the restarted server becomes
// leader: a 2 s session (invalidated at 4 s) outlives a restart that
// kept the agent down for 3 s.
func TestPersistentRestartResetsTimers(t *testing.T) {
	a := start(t, Options{Mode: Persistent})
	id := session(t, a, 2*time.Second)
	renewed := time.Now()
	if err := a.Restart(ctx(t), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if !alive(t, a, id) {
		t.Fatalf("session gone %v after its last renewal, although the restart should have reset its timer", back.Sub(renewed))
	}
	t.Logf("session alive %v after its last renewal, TTL 2s", time.Since(renewed).Round(time.Millisecond))
}

func TestStopLeavesNoProcess(t *testing.T) {
	a := start(t, Options{})
	pid := a.PID()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if a.PID() != 0 {
		t.Fatalf("PID %d after Stop", a.PID())
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d still exists after Stop", pid)
	}
	if _, err := http.Get(a.URL() + "/v1/status/leader"); err == nil {
		t.Fatal("the agent still answers after Stop")
	}
	if err := a.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestSessionTTLMinIsLowered(t *testing.T) {
	a := start(t, Options{SessionTTLMin: 500 * time.Millisecond})
	session(t, a, 500*time.Millisecond) // Consul's default minimum would refuse it
	var out struct{ ID string }
	err := a.put(ctx(t), "/v1/session/create", `{"TTL":"400ms","NodeChecks":[]}`, &out)
	if err == nil {
		t.Fatal("a TTL under session_ttl_min was accepted")
	}
}

func TestMain(m *testing.M) {
	proctest.Child(childEnv, startChild)
	if _, err := Find(); err != nil {
		os.Stdout.WriteString("adapters/servers/consul: " + err.Error() + ": agent tests skip\n")
	}
	os.Exit(m.Run())
}
