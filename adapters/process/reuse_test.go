package process_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/lockprover/lockprover/adapters/process"
)

// reusable answers every request with its type and "_ok", its id echoed;
// init_ok says "reuse": true when declared, and the client's name it was
// given, so that a test sees which init a process answered.
func reusable(declared bool) string {
	reuse := ""
	if declared {
		reuse = `,\"reuse\":true`
	}
	return `while read -r l; do id=$(printf '%s' "$l" | sed 's/.*"id": *\([0-9]*\).*/\1/'); ` +
		`t=$(printf '%s' "$l" | sed 's/.*"type": *"\([a-z]*\)".*/\1/'); ` +
		`echo "{\"id\":$id,\"type\":\"${t}_ok\",\"pid\":$$` + reuse + `}"; done`
}

// A process that declares it takes another run ("reuse": true) is sent
// reset when its client closes and, having answered reset_ok, waits for
// its run's Drain, then is given the next run's init, in the next Connect
// or Spawn, and Drain gives one no Connect took back; one that does not
// declare it, or was killed or paused after its close (a fault on a
// client whose script ended), is ended, and the next run starts a process of its own.
func TestAProcessThatDeclaresReuseTakesTheNextRun(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		declared bool
		sig      syscall.Signal // struck after the close, before the run's Drain
		same     bool
	}{
		{"declared", true, 0, true},
		{"not declared", false, 0, false},
		{"killed", true, syscall.SIGKILL, false},
		{"paused", true, syscall.SIGSTOP, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &process.Launcher{Command: reusable(tc.declared)}
			defer l.Stop()
			c1, err := l.Connect(ctx, "run1", "c1", toyInit("c1"))
			if err != nil {
				t.Fatal(err)
			}
			first := c1.Pid()
			c1.Close()
			if tc.sig != 0 {
				// A fault struck on a client whose script ended: its
				// process, reset, waits for the run's end.
				c1.Signal(tc.sig)
			}
			if c, err := l.Connect(ctx, "run1b", "c9", toyInit("c9")); err != nil || c.Pid() == first {
				t.Fatalf("before run1's Drain, another run got process %d (%v): want a new one", c.Pid(), err)
			}
			l.Drain("run1")
			c2, err := l.Connect(ctx, "run2", "c2", toyInit("c2"))
			if err != nil {
				t.Fatal(err)
			}
			if (c2.Pid() == first) != tc.same {
				t.Fatalf("run2's c2 is process %d, run1's c1 was %d: want the same %v", c2.Pid(), first, tc.same)
			}
			if c2.Name() != "c2" {
				t.Errorf("the process is named %q in its second run", c2.Name())
			}
			if tc.same {
				c2.Close()
				l.Drain("run2")
				l.Spawn("run3", 1)
				l.Drain("run3")
				c3, err := l.Connect(ctx, "run4", "c3", toyInit("c3"))
				if err != nil {
					t.Fatal(err)
				}
				if c3.Pid() != first {
					t.Errorf("spawned ahead for run3, drained unused, then run4's c3: process %d, want %d again", c3.Pid(), first)
				}
			}
		})
	}
}

// validate-impl's check of a process that declares "reuse": reset answered
// reset_ok, then init answered init_ok, passes; a reset refused fails; a
// process that declared nothing is not sent reset.
func TestResetsChecksWhatReuseDeclares(t *testing.T) {
	ctx := context.Background()
	refuses := `while read -r l; do id=$(printf '%s' "$l" | sed 's/.*"id": *\([0-9]*\).*/\1/'); ` +
		`case "$l" in *'"reset"'*) echo "{\"id\":$id,\"type\":\"error\",\"code\":\"unsupported\",\"definite\":true}";; ` +
		`*) echo "{\"id\":$id,\"type\":\"init_ok\",\"reuse\":true}";; esac; done`
	for _, tc := range []struct {
		name, script string
		reset, ok    bool
	}{
		{"resets", reusable(true), true, true},
		{"refuses reset", refuses, false, false},
		{"declared nothing", reusable(false), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &process.Launcher{Command: tc.script}
			c, err := l.Handshake(ctx, "m1", toyInit("m1"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Kill()
			var out strings.Builder
			v := process.NewChecker(ctx, &out)
			if got := v.Resets(c, toyInit("m1")); got != tc.reset || v.OK != tc.ok {
				t.Fatalf("Resets said %v, checks passed %v; want %v, %v:\n%s", got, v.OK, tc.reset, tc.ok, out.String())
			}
		})
	}
}
