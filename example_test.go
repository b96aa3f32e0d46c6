package lockprover_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"pgregory.net/rapid"

	"github.com/lockprover/lockprover"
	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpgo"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
)

// The reference amqp-locks semaphore, proven on the simulated RabbitMQ with
// every fault: what a user's test looks like.
func TestCheckTheReference(t *testing.T) {
	lockprover.Check(t, lockprover.Config{Subject: amqprun.Config{}})
}

// A Scope narrows the plans: Redlock's reference over the simulated Redis
// servers, two clients, only the faults of the Redlock debate named here,
// judged on lease-exclusive alone.
func TestCheckAScope(t *testing.T) {
	lockprover.Check(t, lockprover.Config{
		Subject:    redlockrun.Config{Scope: lockprover.Scope{Clients: 2, Faults: []string{"pause", "clock-jump"}}},
		Properties: []string{"lease-exclusive"},
	})
}

// A user's test of their own amqp-locks implementation on the simulator
// proves it in one call.
func ExampleCheck() {
	var t *testing.T // the test's own
	lockprover.Check(t, lockprover.Config{Subject: amqprun.Config{}})
}

// A lock written in Go on amqp091-go, proven from its own test: no
// broker, no process protocol. Each client's handle is made from the URL
// of the simulated broker lockprover serves for it; plans are drawn, run,
// judged and shrunk as for the reference.
func TestCheckAGoLock(t *testing.T) {
	// It acts only when called: the World's clock may run unbounded.
	c := amqpgo.Impl{Open: openMutex(true), Name: "the small Go mutex", HeartbeatClose: true, Speedup: -1}.Config()
	c.Kind = histories.Mutex
	lockprover.Check(t, lockprover.Config{Subject: c})
}

// Its defective twin, whose queue is not exclusive, is caught: two clients
// hold the mutex at once. (In a user's test, lockprover.Check fails with
// the shrunk counterexample and the command that replays it.)
func TestAGoLocksDefectIsCaught(t *testing.T) {
	c := amqpgo.Impl{Open: openMutex(false), Name: "the small Go mutex, not exclusive", HeartbeatClose: true, Speedup: -1}.Config()
	c.Kind = histories.Mutex
	out, err := prover.Search{Config: prover.Config{Subject: c, Out: t.TempDir()}, Seed: 1, Plans: 100, Shrink: 20, Context: t.Context()}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if out.Found == nil {
		t.Fatalf("100 plans, no counterexample: the non-exclusive mutex passed")
	}
	var failed []string
	for _, v := range out.Found.Report.Verdicts {
		if v.Status == verdict.Fail {
			failed = append(failed, v.Property)
		}
	}
	t.Logf("caught after %d plans: %v fail", out.Plans, failed)
	if !slicesContain(failed, "slot-exclusive") {
		t.Errorf("the failed properties are %v, want slot-exclusive among them", failed)
	}
}

// Every schedule of a small scope, as `prove --exhaustive` searches the
// reference: two clients, the first with every script of one or two steps
// of acquire, verify, release and a sleep of 100 ms, the second of one,
// under every schedule without a preemption (`--ops 2,1 --sleep 100ms
// --preemptions 0`). The Go mutex holds under every schedule of it
// (CheckExhaust), and its defective twin is caught there, the shortest
// counterexample found. (With one step each, a client's hold ends at once:
// the run releases it, and a release in flight may have taken effect
// before the other's acquire; so no scope of one step catches the twin.)
func TestSearchAGoLockWhole(t *testing.T) {
	scope := lockprover.ExhaustScope{Clients: 2, EachOps: []int{2, 1}, SleepMs: 100, Bounded: true, Preemptions: 0}
	c := amqpgo.Impl{Open: openMutex(true), Name: "the small Go mutex", HeartbeatClose: true, Speedup: -1}.Config()
	c.Kind = histories.Mutex
	lockprover.CheckExhaust(t, lockprover.Config{Subject: c}, scope)

	twin := amqpgo.Impl{Open: openMutex(false), Name: "the small Go mutex, not exclusive", HeartbeatClose: true, Speedup: -1}.Config()
	twin.Kind = histories.Mutex
	o, err := prover.Exhaust{Config: prover.Config{Subject: twin, Out: t.TempDir()}, Scope: scope, Reduce: true, Context: t.Context()}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if o.Found == nil || o.Found.Property != "slot-exclusive" || o.Undecided > 0 {
		t.Fatalf("the twin: found %v, %d of %d schedules undecided (%s); want slot-exclusive violated", o.Found, o.Undecided, o.Schedules, o.FirstUndecided)
	}
	t.Logf("the twin caught after %d schedules of %d plans: %s", o.Schedules, o.PlansDone, o.Found.Plan.Brief())
}

// What Check prints for a Go lock's counterexample: its replay is the
// test's own (the lockprover command cannot run a lock in the test's
// process). The test runs itself as a test binary that fails, in a
// directory of its own (rapid writes its fail file there).
func TestAGoLocksCounterexampleReplaysInItsTest(t *testing.T) {
	if os.Getenv("LOCKPROVER_GO_LOCK_TWIN") == "1" {
		c := amqpgo.Impl{Open: openMutex(false), HeartbeatClose: true, Speedup: -1}.Config()
		c.Kind = histories.Mutex
		lockprover.Check(t, lockprover.Config{Subject: c, Out: os.Getenv("LOCKPROVER_GO_LOCK_OUT")})
		return
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LOCKPROVER_GO_LOCK_TWIN=1", "LOCKPROVER_GO_LOCK_OUT="+filepath.Join(dir, "out"))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the defective twin's Check passed:\n%s", out)
	}
	want := "replay: go test -run '^" + t.Name() + "$' with the fail file rapid names above"
	if !strings.Contains(string(out), want) || strings.Contains(string(out), "cmd/lockprover replay") {
		t.Errorf("want %q and no lockprover replay command in:\n%s", want, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "plan.json")); err != nil {
		t.Errorf("the counterexample was not written: %v", err)
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// mutex is a small amqp-locks true mutex on amqp091-go: the lock named N
// is held by the connection that owns the exclusive queue N, which
// RabbitMQ lets only one connection own, and deletes when its owner's
// connection ends. A verify asks whether N is still there with one
// mandatory publish under confirms (a return means it is gone), as the
// spec's cheap-verify wants. It keeps one channel, opened again only once
// the broker closed it (a refusal closes the channel, never the
// connection). Its defective twin declares N without exclusive: any
// connection may then declare it, and hold the lock too.
type mutex struct {
	name      string
	exclusive bool
	conn      *amqp.Connection
	ch        *amqp.Channel
	returns   chan amqp.Return
	held      bool // it declared N, and has not released it or found it gone
}

// openMutex is how a client's handle is made (amqpgo.Impl.Open).
func openMutex(exclusive bool) func(context.Context, amqpgo.Session) (amqprun.Client, error) {
	return func(_ context.Context, s amqpgo.Session) (amqprun.Client, error) {
		conn, err := amqp.DialConfig(s.URL, amqp.Config{Heartbeat: s.Heartbeat})
		if err != nil {
			return nil, err
		}
		return &mutex{name: s.Lock, conn: conn, exclusive: exclusive}, nil
	}
}

// channel is the mutex's channel, in confirm mode, opened again if the
// broker closed it.
func (m *mutex) channel() (*amqp.Channel, error) {
	if m.ch != nil && !m.ch.IsClosed() {
		return m.ch, nil
	}
	ch, err := m.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		return nil, err
	}
	m.ch, m.returns = ch, ch.NotifyReturn(make(chan amqp.Return, 1))
	return ch, nil
}

// code is the AMQP reply code err carries, or 0.
func code(err error) int {
	var e *amqp.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// x-max-length 0: the probes' empty messages are dropped, not kept.
var probesDropped = amqp.Table{"x-max-length": int64(0)}

func (m *mutex) Acquire(context.Context) (int, error) {
	ch, err := m.channel()
	if err != nil {
		return 0, err
	}
	_, err = ch.QueueDeclare(m.name, false, false, m.exclusive, false, probesDropped)
	switch {
	case code(err) == amqp.ResourceLocked:
		return 0, &amqprun.Failure{Reason: "held"} // another connection owns N
	case err == nil:
		m.held = true
	}
	return 0, err
}

func (m *mutex) Verify(ctx context.Context, _ int) (bool, error) {
	if !m.held || m.conn.IsClosed() {
		return false, nil
	}
	ch, err := m.channel()
	if err != nil {
		return false, err
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", m.name, true, false, amqp.Publishing{})
	if err != nil {
		return false, err
	}
	if !dc.Wait() && ch.IsClosed() {
		return false, amqp.ErrClosed
	}
	select {
	case <-m.returns: // N is gone: the broker returned the probe before its ack
		m.held = false
		return false, nil
	default:
		return true, nil
	}
}

func (m *mutex) Release(context.Context, int) error {
	if !m.held || m.conn.IsClosed() {
		return &amqprun.Failure{Reason: "not held"}
	}
	ch, err := m.channel()
	if err != nil {
		return err
	}
	if _, err = ch.QueueDelete(m.name, false, false, false); err == nil {
		m.held = false
	}
	return err
}

// A mutex has no slots to administer.
var errNoAdmin = &amqprun.Failure{Reason: "unsupported"}

func (m *mutex) Create(context.Context, int) error             { return errNoAdmin }
func (m *mutex) Change(context.Context, int) (int, int, error) { return 0, 0, errNoAdmin }
func (m *mutex) Destroy(context.Context) (int, error)          { return 0, errNoAdmin }
func (m *mutex) Count(context.Context) (int, error)            { return 0, errNoAdmin }
func (m *mutex) Wait(context.Context, int) error               { return errNoAdmin }
func (m *mutex) Broken() bool                                  { return m.conn.IsClosed() }
func (m *mutex) Close() error                                  { return m.conn.Close() }

// Plans of the small Go mutex, drawn, run and judged one after another on
// the served simulator, the clock unbounded: what lockprover.Check spends
// a plan (docs/measurements/served.md quotes it).
func BenchmarkGoLockPlans(b *testing.B) {
	c := amqpgo.Impl{Open: openMutex(true), HeartbeatClose: true, Speedup: -1}.Config()
	c.Kind = histories.Mutex
	gen := rapid.Custom(func(rt *rapid.T) prover.Plan { return c.Draw(rt) })
	i := 0
	for b.Loop() {
		res, err := c.Run(b.Context(), gen.Example(i%100))
		if err != nil {
			b.Fatal(err)
		}
		if rep := prover.Judge(res, model.Options{Family: []any{c.Judging("")}}); rep.Status() == verdict.Fail {
			var h strings.Builder
			histories.Write(&h, res.History)
			for _, v := range rep.Verdicts {
				if v.Status == verdict.Fail {
					b.Errorf("plan %d: %s: %s", i%100, v.Property, v.Detail)
				}
			}
			b.Fatalf("plan %d failed: problems %q\n%s", i%100, res.Evidence.Problems, h.String())
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "plans/s")
}
