package amqpgo_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpgo"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
)

// plan is c1's script on a mutex, with the nemesis's faults.
func plan(script []amqprun.Step, faults ...amqprun.Fault) *amqprun.Plan {
	return &amqprun.Plan{Version: amqprun.PlanVersion, Kind: histories.Mutex, Lock: "lp-amqpgo",
		Options: amqprun.Options{HeartbeatMs: amqprun.Ms(1000)}, Clients: [][]amqprun.Step{script}, Nemesis: faults}
}

var (
	acquire = amqprun.Step{Op: histories.Acquire}
	verify  = amqprun.Step{Op: histories.Verify}
)

func sleep(ms int) amqprun.Step { return amqprun.Step{Op: "sleep", Ms: ms} }

// run runs p against i on the served simulator and judges it.
func run(t *testing.T, i amqpgo.Impl, p *amqprun.Plan) (*prover.Result, *verdict.Report) {
	t.Helper()
	c := i.Config()
	c.Kind = histories.Mutex
	res, err := c.Run(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res, prover.Judge(res, model.Options{Family: []any{c.Judging("")}})
}

// failed is the report's failed properties, with their details.
func failed(r *verdict.Report) map[string]string {
	out := map[string]string{}
	for _, v := range r.Verdicts {
		if v.Status == verdict.Fail {
			out[v.Property] = v.Detail
		}
	}
	return out
}

// A panic in Open fails available with its stack: the test that proves
// the lock fails, saying where, and the run goes on to its end.
func TestOpenPanics(t *testing.T) {
	i := amqpgo.Impl{Speedup: -1, Open: func(context.Context, amqpgo.Session) (amqprun.Client, error) {
		var m map[string]int
		m["boom"]++ // a nil map: the constructor's own bug
		return nil, nil
	}}
	res, rep := run(t, i, plan([]amqprun.Step{acquire}))
	d, ok := failed(rep)["available"]
	if !ok {
		t.Fatalf("available did not fail: %v", failed(rep))
	}
	for _, want := range []string{"c1: Open panicked: assignment to entry in nil map", "amqpgo_test.go"} {
		if !strings.Contains(d, want) {
			t.Errorf("available's detail lacks %q:\n%s\nproblems: %q", want, d, res.Evidence.Problems)
		}
	}
}

// stuck is a handle whose acquire never returns, whatever its context
// says.
type stuck struct{ amqprun.Client }

func (stuck) Acquire(context.Context) (int, error) { select {} }
func (stuck) Broken() bool                         { return false }
func (stuck) Close() error                         { return nil }

// panicky is a handle whose acquire panics.
type panicky struct{ stuck }

func (panicky) Acquire(context.Context) (int, error) { panic("acquire: not written yet") }

// A call that does not return within Timeout is hung: the client is ended
// as a crash, and available fails, naming it.
func TestHungCall(t *testing.T) {
	i := amqpgo.Impl{Speedup: -1, Timeout: 300 * time.Millisecond, Open: func(context.Context, amqpgo.Session) (amqprun.Client, error) {
		return stuck{}, nil
	}}
	_, rep := run(t, i, plan([]amqprun.Step{acquire}))
	if d := failed(rep)["available"]; !strings.Contains(d, "c1: hung: Acquire did not return within 300ms") {
		t.Errorf("available: %q, want the hang named", d)
	}
}

// A panic in an operation ends the client as a crash, its stack among the
// problems.
func TestCallPanics(t *testing.T) {
	i := amqpgo.Impl{Speedup: -1, Timeout: 300 * time.Millisecond, Open: func(context.Context, amqpgo.Session) (amqprun.Client, error) {
		return panicky{}, nil
	}}
	_, rep := run(t, i, plan([]amqprun.Step{acquire}))
	d := failed(rep)["available"]
	for _, want := range []string{"c1: Acquire panicked: acquire: not written yet", "amqpgo_test.go"} {
		if !strings.Contains(d, want) {
			t.Errorf("available's detail lacks %q:\n%s", want, d)
		}
	}
}

// Open is not called, and the run says why, where the broker is not
// served on the wire (the in-process simulator's target).
func TestNeedsTheServedSimulator(t *testing.T) {
	var opened atomic.Bool
	i := amqpgo.Impl{Open: func(context.Context, amqpgo.Session) (amqprun.Client, error) {
		opened.Store(true)
		return nil, errors.New("unreachable")
	}}
	c := i.Config()
	c.Target = amqprun.Simulator{}
	c.Kind = histories.Mutex
	res, err := c.Run(t.Context(), plan([]amqprun.Step{acquire}))
	if err != nil {
		t.Fatal(err)
	}
	if opened.Load() {
		t.Error("Open was called on a broker that is not served")
	}
	if p := strings.Join(res.Evidence.Problems, "; "); !strings.Contains(p, "served on the wire") {
		t.Errorf("problems %q: want the target named", p)
	}
}

// holder is a handle that holds the mutex by its exclusive queue, and
// counts its closes.
type holder struct {
	amqprun.Client
	conn   *amqp.Connection
	closed *atomic.Int32
}

func (h holder) Acquire(context.Context) (int, error) {
	ch, err := h.conn.Channel()
	if err != nil {
		return 0, err
	}
	_, err = ch.QueueDeclare("lp-amqpgo", false, false, true, false, nil)
	return 0, err
}
func (h holder) Broken() bool { return h.conn.IsClosed() }
func (h holder) Close() error { h.closed.Add(1); return h.conn.Close() }

// A kill abandons the handle (closed in the background, as nothing it
// sends is taken any more), and the client goes on as a new handle: the
// history records the kill, and the queue the killed one held is freed
// only when its heartbeats time out in the World.
func TestKillAbandonsTheHandle(t *testing.T) {
	var opens, closed atomic.Int32
	i := amqpgo.Impl{Speedup: -1, Open: func(_ context.Context, s amqpgo.Session) (amqprun.Client, error) {
		opens.Add(1)
		conn, err := amqp.DialConfig(s.URL, amqp.Config{Heartbeat: s.Heartbeat})
		if err != nil {
			return nil, err
		}
		return holder{conn: conn, closed: &closed}, nil
	}}
	res, _ := run(t, i, plan([]amqprun.Step{acquire, sleep(500), acquire}, amqprun.Fault{At: 100, Fault: histories.Kill, Target: "c1"}))
	var b strings.Builder
	histories.Write(&b, res.History)
	var acquired []string
	killed := false
	for _, e := range res.History {
		switch {
		case e.Process == "nemesis" && e.F == histories.Kill && e.Type == histories.Invoke:
			killed = true
		case e.Process == "c1" && e.F == histories.Acquire && e.Type != histories.Invoke:
			acquired = append(acquired, string(e.Type))
		}
	}
	if !killed || len(acquired) != 2 || acquired[1] != string(histories.Fail) {
		t.Errorf("want c1 killed, then its second acquire failing on the queue its first incarnation left (its heartbeats not yet timed out); got killed %v, acquires %v\n%s", killed, acquired, b.String())
	}
	if opens.Load() < 2 {
		t.Errorf("%d handles opened, want one for each incarnation", opens.Load())
	}
	deadline := time.Now().Add(5 * time.Second)
	for closed.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if closed.Load() < 1 {
		t.Error("the killed handle was never closed")
	}
}

// An Impl with no Open, or an Open that returns neither a handle nor an
// error, fails the run as the implementation's, saying which.
func TestBadImpl(t *testing.T) {
	for _, tc := range []struct {
		name string
		i    amqpgo.Impl
		want string
	}{
		{"no Open", amqpgo.Impl{Speedup: -1}, "Open is nil"},
		{"no handle", amqpgo.Impl{Speedup: -1, Open: func(context.Context, amqpgo.Session) (amqprun.Client, error) { return nil, nil }},
			"c1: Open returned no handle and no error"},
	} {
		res, rep := run(t, tc.i, plan([]amqprun.Step{acquire}))
		if d := failed(rep)["available"]; !strings.Contains(d, tc.want) {
			t.Errorf("%s: available %q, problems %q: want %q named", tc.name, d, res.Evidence.Problems, tc.want)
		}
	}
}
