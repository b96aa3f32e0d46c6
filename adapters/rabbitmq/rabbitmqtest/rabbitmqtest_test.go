package rabbitmqtest

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeTB records Skip and Fatal instead of acting on a real test. Skip and
// Fatal end the calling goroutine, as they do on a *testing.T.
type fakeTB struct {
	testing.TB // nil: calling anything not overridden panics
	skipped    bool
	failed     bool
	msg        string
	cleanups   []func()
}

func (f *fakeTB) Helper()             {}
func (f *fakeTB) Cleanup(fn func())   { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Logf(string, ...any) {}
func (f *fakeTB) Skip(args ...any)    { f.skipped, f.msg = true, fmt.Sprint(args...); runtime.Goexit() }
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) SkipNow()      { f.skipped = true; runtime.Goexit() }
func (f *fakeTB) Skipped() bool { return f.skipped }
func (f *fakeTB) Fatal(args ...any) {
	f.failed, f.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) FailNow()     { f.failed = true; runtime.Goexit() }
func (f *fakeTB) Failed() bool { return f.failed }

// runFake runs resolve with a fake TB on its own goroutine (so that Skip and
// Fatal can end it) and returns the URL (if resolve returned) and the fake.
func runFake(lookupEnv func(string) (string, bool), probeAddr string, dockerOK func() bool, start func(testing.TB) (string, error)) (string, bool, *fakeTB) {
	f := &fakeTB{}
	var (
		u        string
		returned bool
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		u = resolve(f, lookupEnv, probeAddr, dockerOK, start)
		returned = true
	}()
	<-done
	return u, returned, f
}

func env(vals map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vals[k]
		return v, ok
	}
}

// listener returns the address of a local listener that counts the
// connections it accepts.
func listener(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String(), &n
}

// closedAddr returns a local address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestResolve(t *testing.T) {
	liveAddr, accepts := listener(t)
	deadAddr := closedAddr(t)

	noDocker := func() bool { return false }
	yesDocker := func() bool { return true }
	mustNotStart := func(testing.TB) (string, error) {
		t.Error("start called")
		return "", errors.New("must not start")
	}
	mustNotAskDocker := func() bool {
		t.Error("docker checked")
		return false
	}

	tests := []struct {
		name      string
		env       map[string]string
		probeAddr string
		dockerOK  func() bool
		start     func(testing.TB) (string, error)

		wantURL     string
		wantSkip    bool
		wantFail    bool
		wantMsgs    []string
		wantAccepts int32 // connections the live listener saw during the case
	}{
		{
			name:      "env wins and is not probed",
			env:       map[string]string{EnvVar: "amqp://u:p@broker.example:5673/vh"},
			probeAddr: liveAddr,
			dockerOK:  mustNotAskDocker,
			start:     mustNotStart,
			wantURL:   "amqp://u:p@broker.example:5673/vh",
		},
		{
			name:        "empty env counts as unset",
			env:         map[string]string{EnvVar: ""},
			probeAddr:   liveAddr,
			dockerOK:    mustNotAskDocker,
			start:       mustNotStart,
			wantURL:     "amqp://guest:guest@" + liveAddr + "/",
			wantAccepts: 1,
		},
		{
			name:        "local broker answers",
			probeAddr:   liveAddr,
			dockerOK:    mustNotAskDocker,
			start:       mustNotStart,
			wantURL:     "amqp://guest:guest@" + liveAddr + "/",
			wantAccepts: 1,
		},
		{
			name:      "no local broker, docker starts a container",
			probeAddr: deadAddr,
			dockerOK:  yesDocker,
			start:     func(testing.TB) (string, error) { return "amqp://guest:guest@container:32768", nil },
			wantURL:   "amqp://guest:guest@container:32768",
		},
		{
			name:      "docker healthy but the container fails",
			probeAddr: deadAddr,
			dockerOK:  yesDocker,
			start:     func(testing.TB) (string, error) { return "", errors.New("image pull failed") },
			wantFail:  true,
			wantMsgs:  []string{"image pull failed"},
		},
		{
			name:      "nothing: skip and say how",
			probeAddr: deadAddr,
			dockerOK:  noDocker,
			start:     mustNotStart,
			wantSkip:  true,
			wantMsgs:  []string{EnvVar, "127.0.0.1:5672", "install Docker"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := accepts.Load()
			u, returned, f := runFake(env(tt.env), tt.probeAddr, tt.dockerOK, tt.start)
			if f.Skipped() != tt.wantSkip {
				t.Errorf("skipped = %v, want %v (msg %q)", f.Skipped(), tt.wantSkip, f.msg)
			}
			if f.Failed() != tt.wantFail {
				t.Errorf("failed = %v, want %v (msg %q)", f.Failed(), tt.wantFail, f.msg)
			}
			if returned != (!tt.wantSkip && !tt.wantFail) {
				t.Errorf("resolve returned = %v; Skip and Fatal must stop the test", returned)
			}
			if u != tt.wantURL {
				t.Errorf("url = %q, want %q", u, tt.wantURL)
			}
			for _, m := range tt.wantMsgs {
				if !strings.Contains(f.msg, m) {
					t.Errorf("message %q does not mention %q", f.msg, m)
				}
			}
			// The listener counts asynchronously; the probe has closed its
			// connection, so give the accept loop a moment.
			for i := 0; i < 100 && accepts.Load()-before < tt.wantAccepts; i++ {
				runtime.Gosched()
			}
			if got := accepts.Load() - before; tt.wantAccepts == 0 && got != 0 {
				t.Errorf("probe connected %d times; the env URL must be used as is", got)
			}
		})
	}
}

// TestResolveSkipsRealTest checks the skip branch on a real *testing.T: the
// subtest must end skipped, not failed, and not return a URL.
func TestResolveSkipsRealTest(t *testing.T) {
	deadAddr := closedAddr(t)
	var (
		sub      *testing.T
		returned bool
	)
	ok := t.Run("skipped", func(st *testing.T) {
		sub = st
		resolve(st, env(nil), deadAddr, func() bool { return false }, func(testing.TB) (string, error) {
			t.Error("start called")
			return "", nil
		})
		returned = true
	})
	if !ok {
		t.Fatal("subtest failed; it should have been skipped")
	}
	if !sub.Skipped() {
		t.Fatal("subtest was not skipped")
	}
	if returned {
		t.Fatal("resolve returned after Skip")
	}
}

func TestProbe(t *testing.T) {
	live, _ := listener(t)
	if !probe(live) {
		t.Errorf("probe(%s) = false for a listening address", live)
	}
	if dead := closedAddr(t); probe(dead) {
		t.Errorf("probe(%s) = true for a closed port", dead)
	}
}

// TestURL runs the real discovery: here it finds the local broker or skips.
func TestURL(t *testing.T) {
	u := URL(t)
	if u == "" {
		t.Fatal("URL returned an empty string")
	}
	t.Logf("broker: %s", u)
}
