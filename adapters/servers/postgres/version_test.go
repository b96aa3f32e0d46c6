package postgres

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/quick"
)

// startVersion starts a private server of v, stopped when the test ends;
// it skips the test when v's root is not made (saying how to make it),
// under -short, or when the machine cannot run it.
func startVersion(t *testing.T, v versions.Version) *Server {
	t.Helper()
	quick.Skip(t, "a private PostgreSQL "+v.Name+" from Debian "+v.Release+"'s root")
	if !v.Made() {
		t.Skipf("%s's root is not made here: lockprover servers --make postgresql-%s (root, debootstrap and the Debian mirror; some minutes)", v, v.Name)
	}
	start := time.Now()
	// A bound for a wedged start, not a measure: initdb takes seconds, but
	// beside a loaded suite it has taken over a minute.
	x, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	s, err := StartVersion(x, t.TempDir(), v, nil)
	if errors.Is(err, debroot.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s initialised and started in %v (pid %d, %s)", v, time.Since(start).Round(time.Millisecond), s.PID(), s.Addr())
	t.Cleanup(func() { s.Stop() })
	return s
}

// leftInRoots lists what runs from a root of v's release, and the mounts
// of its root: what a stopped server must not leave behind.
func leftInRoots(t *testing.T, v versions.Version) (mounts, procs []string) {
	t.Helper()
	out, _ := exec.Command("mount").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "lockprover/debian-"+v.Release) {
			mounts = append(mounts, l)
		}
	}
	ds, _ := os.ReadDir("/proc")
	for _, d := range ds {
		if l, err := os.Readlink("/proc/" + d.Name() + "/root"); err == nil && strings.Contains(l, "lockprover/debian-"+v.Release) {
			procs = append(procs, d.Name())
		}
	}
	return mounts, procs
}

// A private server of each version from a Debian release's root is that
// version; it takes advisory locks; a restart and a crash end the holder's
// session and free its lock, as on the machine's own; and once stopped
// it leaves no process, no mount, no listener and no directory behind.
func TestVersionsFromRoots(t *testing.T) {
	for _, v := range versions.Of("postgresql") {
		if !v.Rooted() {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			s := startVersion(t, v)
			if s.Version() != v {
				t.Errorf("Version() is %s, want %s", s.Version(), v)
			}
			a := connect(t, s.URL())
			var got string
			if err := a.QueryRow(ctx(t), "SHOW server_version").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got, v.Name+".") {
				t.Fatalf("server_version is %q, want %s.x", got, v.Name)
			}
			for i, strike := range []struct {
				name string
				do   func() error
			}{
				{"Restart", func() error { return s.Restart(ctx(t), 0) }},
				{"Crash", func() error { return s.Crash(ctx(t), 0) }},
			} {
				key := int64(70 + i)
				holder := connect(t, s.URL())
				if !tryLock(t, holder, key) {
					t.Fatalf("pg_try_advisory_lock(%d) failed", key)
				}
				pid := s.PID()
				if err := strike.do(); err != nil {
					t.Fatalf("%s: %v", strike.name, err)
				}
				if s.PID() == pid {
					t.Errorf("%s: the postmaster's pid is still %d", strike.name, pid)
				}
				if !gone(pid) {
					t.Errorf("%s: the old postmaster %d still runs", strike.name, pid)
				}
				if !tryLock(t, connect(t, s.URL()), key) {
					t.Errorf("%s: another session could not take the holder's lock", strike.name)
				}
				if _, err := holder.Exec(ctx(t), "SELECT 1"); !terminated(err) {
					t.Errorf("%s: the holder's next statement: %v, want its session ended", strike.name, err)
				}
			}
			pid, own := s.PID(), s.Dir()
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			if !gone(pid) {
				t.Errorf("postmaster %d still running after Stop", pid)
			}
			if _, err := os.Stat(own); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the server's directory %s is still there after Stop (%v)", own, err)
			}
			if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
				c.Close()
				t.Errorf("something still listens on %s after Stop", s.Addr())
			}
			// Other tests may run servers from the same root at once: only
			// this server's directory is looked for.
			mounts, procs := leftInRoots(t, v)
			for _, m := range mounts {
				if strings.Contains(m, own) {
					t.Errorf("a mount is left: %s", m)
				}
			}
			for _, p := range procs {
				if cmdline, _ := os.ReadFile("/proc/" + p + "/cmdline"); strings.Contains(string(cmdline), own) {
					t.Errorf("process %s is left: %q", p, cmdline)
				}
			}
		})
	}
}

// A version that is not PostgreSQL's is refused, naming it.
func TestStartVersionRefusesAnotherServer(t *testing.T) {
	v, err := versions.Lookup("mariadb", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartVersion(ctx(t), t.TempDir(), v, nil); err == nil || !strings.Contains(err.Error(), "mariadb 10.11") {
		t.Errorf("StartVersion of %s: %v", v, err)
	}
}
