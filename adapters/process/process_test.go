package process_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/internal/prover"
)

// The tests here speak a toy codec of their own (a "ping" answered
// "pong"): the launcher, the transport and the server know no family.

// toyInit is a toy family's init.
func toyInit(name string) process.Request {
	return process.Request{"type": "init", "client": name, "url": "toy://u:secret@host/"}
}

// A start that fails is the implementation's failure, said in words; an
// init answered with an error without definite may pass if tried again;
// after two failures no process starts.
func TestStartFailures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, script, want string }{
		{"crashes", `echo "no config" >&2; exit 3`, "c1 did not start: exited (exit status 3)"},
		{"prints garbage", `read l; echo garbage`, `c1 did not start: wrote a line that is not a JSON object: "garbage"`},
		{"closes its stdout", `read l; exec >&-; sleep 600`, "c1 did not start: closed its stdout"},
		{"refuses", `read l; echo '{"id":1,"type":"error","code":"unsupported","text":"no toys","definite":true}'`, "c1 refused to start: unsupported: no toys"},
		{"hangs", `sleep 600`, "c1 did not start: did not answer within 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 300 ms for the one that hangs; the others answer, if late
			// on a busy machine (a shell's reply took more than 300 ms
			// under CI's load), within the protocol's 10 s.
			l := &process.Launcher{Command: tc.script}
			if tc.name == "hangs" {
				l.InitTimeout = 300 * time.Millisecond
			}
			_, err := l.Connect(ctx, "run1", "c1", toyInit("c1"))
			var ie *prover.ImplementationError
			if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v, want an implementation error starting %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the password shows: %v", err)
			}
		})
	}
	l := &process.Launcher{Command: `read l; echo '{"id":1,"type":"error","code":"unsupported","definite":true}'`,
		Refusal: func(e *process.ErrorReply) string { return "code " + e.Code }}
	if _, err := l.Connect(ctx, "run1", "c1", toyInit("c1")); err == nil || err.Error() != "c1 refused to start: code unsupported" {
		t.Errorf("with a family's Refusal: %v", err)
	}
	if _, err := l.Connect(ctx, "run1", "c2", toyInit("c2")); err == nil || !strings.HasPrefix(err.Error(), "c2 refused") {
		t.Errorf("second start: %v", err)
	}
	if _, err := l.Connect(ctx, "run1", "c3", toyInit("c3")); err == nil || !strings.Contains(err.Error(), "c3 not started: the implementation failed to start twice") {
		t.Errorf("after two failed starts: %v", err)
	}
	unreachable := &process.Launcher{Command: `read l; echo '{"id":1,"type":"error","code":"backend","text":"refused"}'`}
	for i := 0; i < 3; i++ {
		_, err := unreachable.Connect(ctx, "run1", "c1", toyInit("c1"))
		var e *process.ErrorReply
		if !errors.As(err, &e) || e.Definite || e.Code != "backend" {
			t.Fatalf("start %d: %v, want the backend out of reach", i, err)
		}
	}
}

// A failed start is charged to the run whose process failed: two failures
// in one run stop that run's starts, and not another's that runs at the
// same time or next (issue 27, problem 3: a plan that never failed was
// blamed, saved, and could not be replayed).
func TestStartFailuresChargedToTheirRun(t *testing.T) {
	ctx := context.Background()
	// The process refuses a lock named "bad" and serves any other.
	l := &process.Launcher{Command: `read l; case "$l" in *'"lock":"bad"'*) echo "bad lock" >&2; exit 3;; esac; echo '{"id":1,"type":"init_ok"}'; sleep 600`}
	bad := func(name string) process.Request { r := toyInit(name); r["lock"] = "bad"; return r }
	good := func(name string) process.Request { r := toyInit(name); r["lock"] = "good"; return r }
	for _, name := range []string{"c1", "c2"} {
		if _, err := l.Connect(ctx, "plan-bad", name, bad(name)); err == nil || !strings.Contains(err.Error(), "did not start: exited") {
			t.Fatalf("%s of the bad run: %v", name, err)
		}
	}
	if _, err := l.Connect(ctx, "plan-bad", "c3", bad("c3")); err == nil || !strings.Contains(err.Error(), "failed to start twice in this run") {
		t.Errorf("a third start in the run that failed twice: %v", err)
	}
	c, err := l.Connect(ctx, "plan-good", "c1", good("c1"))
	if err != nil {
		t.Fatalf("a run whose processes start was charged another's failures: %v", err)
	}
	c.Kill()
}

// Replies are read exactly: a reply that does not decode gives the
// process up, saying why; a definite error is an *ErrorReply.
func TestRepliesDecodedStrictly(t *testing.T) {
	init := `read l; echo '{"id":1,"type":"init_ok"}'; read l; `
	for _, tc := range []struct{ name, reply, want string }{
		{"id a string", `{"id":"2","type":"pong"}`, `answered with an id that is not an integer ("2")`},
		{"another id", `{"id":3,"type":"pong"}`, `answered id 3 to request id 2`},
		{"no id", `{"type":"pong"}`, `answered without an id`},
		{"type a number", `{"id":2,"type":5}`, `answered without a "type" string`},
		{"code in capitals", `{"id":2,"type":"error","CODE":"x","definite":true}`, `sent an error without a "code" string`},
		{"definite a string", `{"id":2,"type":"error","code":"x","definite":"yes"}`, `sent an error whose "definite" is not true or false`},
		{"text a number", `{"id":2,"type":"error","code":"x","text":5}`, `sent an error whose "text" is not a string`},
		{"an array", `[2]`, `wrote a line that is not a JSON object`},
		{"the wrong type", `{"id":2,"type":"pang"}`, `answered "pang" to a request that wants "pong"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &process.Launcher{Command: init + "echo '" + tc.reply + "'; sleep 600"}
			defer l.Stop()
			c, err := l.Connect(context.Background(), "run1", "c1", toyInit("c1"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Call(context.Background(), time.Second, process.Request{"type": "ping"}, "pong")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(c.Crashed(), tc.want) {
				t.Fatalf("got %v (crashed: %s), want %q", err, c.Crashed(), tc.want)
			}
			if _, err := c.Call(context.Background(), time.Second, process.Request{"type": "ping"}, "pong"); !errors.Is(err, process.ErrGone) {
				t.Errorf("a request to a process given up on: %v", err)
			}
		})
	}
	l := &process.Launcher{Command: init + `echo '{"id":2,"type":"error","code":"busy","text":"t","definite":true}'; sleep 600`}
	defer l.Stop()
	c, err := l.Connect(context.Background(), "run1", "c1", toyInit("c1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(context.Background(), time.Second, process.Request{"type": "ping"}, "pong")
	var e *process.ErrorReply
	if !errors.As(err, &e) || !e.Definite || e.Code != "busy" || e.Text != "t" || c.Broken() {
		t.Errorf("a definite error: %v (broken %v)", err, c.Broken())
	}
}

// Stop kills every process Connect started.
func TestStop(t *testing.T) {
	l := &process.Launcher{Command: `read l; echo '{"id":1,"type":"init_ok"}'; sleep 600`}
	var cs []*process.Client
	for _, name := range []string{"c1", "c2"} {
		c, err := l.Connect(context.Background(), "run1", name, toyInit(name))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	l.Stop()
	for _, c := range cs {
		if !c.Broken() || c.Crashed() != "" {
			t.Errorf("%s after Stop: broken %v, crashed %q", c.Name(), c.Broken(), c.Crashed())
		}
	}
}

// The server's transport: ids echoed, unknown types unsupported, and lines
// that are not requests answered as its framing says.
func TestServer(t *testing.T) {
	handle := func(typ string, req map[string]json.RawMessage) map[string]any {
		if typ == "ping" {
			return map[string]any{"type": "pong"}
		}
		return nil
	}
	in := "{\"id\":4,\"type\":\"ping\"}\n{\"id\":5,\"type\":\"frob\"}\n\nnull\n{\"type\":\"ping\"}\n{\"id\":6}\n"
	for _, tc := range []struct {
		lenient bool
		want    string
	}{
		{false, `{"id":4,"type":"pong"}
{"code":"unsupported","definite":true,"id":5,"text":"no request type frob","type":"error"}
{"code":"bad request","definite":true,"id":0,"text":"a request must be one JSON object","type":"error"}
{"code":"bad request","definite":true,"id":0,"text":"id must be an integer, got absent","type":"error"}
{"code":"bad request","definite":true,"id":6,"text":"type must be a string, got absent","type":"error"}
`},
		{true, `{"id":4,"type":"pong"}
{"code":"unsupported","definite":true,"id":5,"text":"no request type frob","type":"error"}
{"code":"bad request","definite":true,"id":0,"text":"unexpected end of JSON input","type":"error"}
{"code":"bad request","definite":true,"id":0,"text":"id must be an integer, got ","type":"error"}
{"code":"bad request","definite":true,"id":0,"text":"id must be an integer, got ","type":"error"}
{"code":"bad request","definite":true,"id":6,"text":"type must be a string, got ","type":"error"}
`},
	} {
		var out strings.Builder
		if err := (process.Server{Handle: handle, Lenient: tc.lenient}).Serve(strings.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("lenient %v:\n%s\nwant\n%s", tc.lenient, out.String(), tc.want)
		}
	}
}

// A process that never answers an operation hung: the error and Crashed
// say so plainly, with the operation and how long it was waited for, not
// as a crash (issue 27: a hang is a finding).
func TestHangSaidPlainly(t *testing.T) {
	// It answers ping, and never answers wait.
	l := &process.Launcher{Command: `read l; echo '{"id":1,"type":"init_ok"}'; read l; echo '{"id":2,"type":"pong"}'; read l; sleep 600`}
	defer l.Stop()
	c, err := l.Connect(context.Background(), "run1", "c1", toyInit("c1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), time.Second, process.Request{"type": "ping"}, "pong"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(context.Background(), 200*time.Millisecond, process.Request{"type": "wait"}, "wait_ok")
	want := "hung: no answer to its wait within 200ms"
	if err == nil || err.Error() != "c1 "+want {
		t.Errorf("got %v, want %q", err, "c1 "+want)
	}
	if got := c.Crashed(); !strings.HasPrefix(got, want+"; last request: ") {
		t.Errorf("Crashed() = %q, want it to start %q", got, want)
	}
}

// Ends passes a process that exits once its stdin closes, and fails one
// that stays (which it kills), after process.ExitGrace, or after the
// launcher's init timeout where that is longer.
func TestEndsChecksTheExit(t *testing.T) {
	ctx := context.Background()
	const initOK = `echo '{"id":1,"type":"init_ok"}'`
	for _, tc := range []struct {
		name, script string
		init         time.Duration
		pass         bool
		want         string
	}{
		{"exits", `read l; ` + initOK + `; cat >/dev/null`, 0, true, ""},
		{"stays", `read l; ` + initOK + `; trap "" TERM; exec sleep 600 </dev/null`, 0, false, "exit within 5s"},
		{"exits late, within the init timeout", `read l; ` + initOK + `; cat >/dev/null; sleep 6`, 7 * time.Second, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := &process.Launcher{Command: tc.script, InitTimeout: tc.init}
			c, err := l.Handshake(ctx, "c1", toyInit("c1"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Kill()
			var out strings.Builder
			v := process.NewChecker(ctx, &out)
			start := time.Now()
			v.Ends(c)
			if v.OK != tc.pass || !strings.Contains(out.String(), tc.want) {
				t.Errorf("passed %v after %v, want %v:\n%s", v.OK, time.Since(start), tc.pass, out.String())
			}
			if !tc.pass && time.Since(start) < process.ExitGrace {
				t.Errorf("failed after %v, before the grace ran out", time.Since(start))
			}
		})
	}
}

// Lines without an id are notices once a family names their types: each
// goes to its handler as it is read, in order with the replies; Drain
// returns only once what the process wrote so far is handled; an id-less
// line of a type not named, or one the handler refuses, gives the
// process up at once.
func TestNotices(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	script := `read l; echo '{"id":1,"type":"init_ok"}'
read l; echo '{"type":"lost","token":"a"}'; echo '{"id":2,"type":"pong"}'
read l; echo '{"type":"lost","token":"b"}'; touch ` + dir + `/wrote; sleep 600`
	c, err := (&process.Launcher{Command: script}).Launch(ctx, "c1", toyInit("c1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	var got []string
	var mu sync.Mutex
	c.OnNotice([]string{"lost"}, func(n process.Notice) error {
		var token string
		if err := json.Unmarshal(n.Fields["token"], &token); err != nil || token == "" {
			return errors.New(`"token" is not a non-empty string`)
		}
		mu.Lock()
		got = append(got, token)
		mu.Unlock()
		return nil
	})
	if _, err := c.Call(ctx, 5*time.Second, process.Request{"type": "ping"}, "pong"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 || got[0] != "a" {
		t.Errorf("after the reply, notices %q: want [a], handled before the reply that followed it", got)
	}
	mu.Unlock()
	if _, err := c.Call(ctx, 300*time.Millisecond, process.Request{"type": "ping"}, "pong"); err == nil {
		t.Fatal("a ping with no answer passed")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(dir + "/wrote"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	c.Drain()
	mu.Lock()
	if len(got) != 2 || got[1] != "b" {
		t.Errorf("after Drain, notices %q: want [a b]", got)
	}
	mu.Unlock()

	for _, tc := range []struct{ line, want string }{
		{`{"type":"gossip"}`, `wrote a message without an id whose "type" is "gossip": only "lost" may come unasked`},
		{`{"type":"lost"}`, `wrote a lost notice that breaks the protocol ("token" is not a non-empty string)`},
	} {
		c, err := (&process.Launcher{Command: `read l; echo '{"id":1,"type":"init_ok"}'; read l; echo '` + tc.line + `'; sleep 600`}).Launch(ctx, "c1", toyInit("c1"))
		if err != nil {
			t.Fatal(err)
		}
		c.OnNotice([]string{"lost"}, func(n process.Notice) error {
			return errors.New(`"token" is not a non-empty string`)
		})
		_, err = c.Call(ctx, 5*time.Second, process.Request{"type": "ping"}, "pong")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(c.Crashed(), tc.want) {
			t.Errorf("%s: got %v (crashed: %q), want it given up: %s", tc.line, err, c.Crashed(), tc.want)
		}
		c.Kill()
	}
}
