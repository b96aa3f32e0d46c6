package amqprun_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// addrOnly is a broker that only gives its URL: enough for an init.
type addrOnly struct{}

func (addrOnly) URL() string { return "amqp://guest:guest@127.0.0.1:1/" }
func (addrOnly) Dial(context.Context, broker.Config) (broker.Conn, error) {
	return nil, errors.New("no dialling here")
}
func (addrOnly) Sleep(context.Context, time.Duration) error { return nil }

// brokerAt is addrOnly with the URL of a broker that answers.
type brokerAt struct {
	addrOnly
	url string
}

func (b brokerAt) URL() string { return b.url }

// An init answered with an error, by a process that then exits at once, is
// the broker out of reach (try again later), every time: the reply is read
// before the exit is noticed. A definite one is a refusal to start.
func TestInitAnsweredWithAnError(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "x", Slots: 1}
	impl := amqpprotocol.NewProcesses(`read l; echo '{"id":1,"type":"error","code":"broker","text":"unreachable"}'`)
	for i := 0; i < 200; i++ {
		_, err := impl.Connect(context.Background(), addrOnly{}, p, "c1")
		var pe *prover.ImplementationError
		if err == nil || errors.As(err, &pe) {
			t.Fatalf("start %d: %v, want the broker out of reach", i, err)
		}
	}
	impl = amqpprotocol.NewProcesses(`read l; echo '{"id":1,"type":"error","code":"unsupported","text":"no semaphores here","definite":true}'`)
	_, err := impl.Connect(context.Background(), addrOnly{}, p, "c1")
	var pe *prover.ImplementationError
	if !errors.As(err, &pe) || pe.Msg != "c1 refused to start: unsupported" {
		t.Fatalf("%v, want a refusal to start", err)
	}
}

// Preflight fails at once, saying why, for an implementation that cannot
// start, and passes the reference.
func TestPreflight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, script, want string }{
		{"crashes at start", `echo "no config" >&2; exit 3`, "probe did not start: exited (exit status 3)"},
		{"prints garbage", `read l; echo garbage`, `probe did not start: wrote a line that is not a JSON object: "garbage"`},
		{"closes its stdout", `read l; exec >&-; sleep 600`, "probe did not start: closed its stdout"},
		{"refuses", `read l; echo '{"id":1,"type":"error","code":"unsupported","text":"no","definite":true}'`, "probe refused to start: unsupported"},
		{"broker out of reach", `read l; echo '{"id":1,"type":"error","code":"broker","text":"refused"}'`, "probe could not reach the broker: broker: refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := amqpprotocol.NewProcesses(tc.script).Preflight(context.Background(), "amqp://guest:guest@127.0.0.1:1/", "semaphore")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			if tc.name == "crashes at start" && !strings.Contains(err.Error(), "stderr ends: no config") {
				t.Errorf("%v does not show the process's stderr", err)
			}
		})
	}
	t.Run("the reference", func(t *testing.T) {
		t.Parallel()
		if err := amqpprotocol.NewProcesses(lockprover+" serve-reference").Preflight(context.Background(), rabbitmqtest.URL(t), "mutex"); err != nil {
			t.Fatal(err)
		}
	})
}

// A process that answers init with "abrupt_close": "heartbeat" is taken
// to end a socket without a connection.close only when its heartbeat
// deadline passes (the runner then records such an end as a stall of the
// machine); one that says nothing, or anything else, is not. The
// reference served through the protocol says so; a mutant of it does not.
func TestInitDeclaresHeartbeatClose(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "x", Slots: 1}
	closes := func(t *testing.T, impl *amqpprotocol.Processes, b broker.Broker) bool {
		t.Helper()
		defer impl.Stop()
		c, err := impl.Connect(context.Background(), b, p, "c1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hc, ok := c.(interface{ ClosesOnlyOnHeartbeat() bool })
		return ok && hc.ClosesOnlyOnHeartbeat()
	}
	for _, tc := range []struct {
		reply string
		want  bool
	}{
		{`{"id":1,"type":"init_ok","abrupt_close":"heartbeat"}`, true},
		{`{"id":1,"type":"init_ok"}`, false},
	} {
		if got := closes(t, amqpprotocol.NewProcesses(`read l; echo '`+tc.reply+`'; read l`), addrOnly{}); got != tc.want {
			t.Errorf("%s: declares a heartbeat-only close %v, want %v", tc.reply, got, tc.want)
		}
	}
	// Any other value is a mistake the implementation is told of, as a
	// start that failed: not a declaration silently dropped.
	for _, tc := range []struct{ value, want string }{
		{`"never"`, `c1 did not start: sent an init_ok whose "abrupt_close" is "never": the one value it takes is "heartbeat"`},
		{`true`, `c1 did not start: sent an init_ok whose "abrupt_close" is true: the one value it takes is "heartbeat"`},
		{`"Heartbeat"`, `whose "abrupt_close" is "Heartbeat"`},
	} {
		impl := amqpprotocol.NewProcesses(`read l; echo '{"id":1,"type":"init_ok","abrupt_close":` + tc.value + `}'; read l`)
		_, err := impl.Connect(context.Background(), addrOnly{}, p, "c1")
		var ie *prover.ImplementationError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("abrupt_close %s: %v, want an implementation error containing %q", tc.value, err, tc.want)
		}
		impl.Stop()
	}
	url := rabbitmqtest.URL(t)
	if !closes(t, amqpprotocol.NewProcesses(lockprover+" serve-reference"), brokerAt{url: url}) {
		t.Error("serve-reference does not declare that amqp091-go ends a socket so only when its heartbeat deadline passes")
	}
	if closes(t, amqpprotocol.NewProcesses(lockprover+" serve-reference --mutant verify-errors"), brokerAt{url: url}) {
		t.Error("a mutant served through the protocol declares what only the reference may")
	}
	// validate-impl says so too, on the check of the start.
	var out strings.Builder
	if amqpprotocol.Validate(`read l; echo '{"id":1,"type":"init_ok","abrupt_close":"hearbeat"}'; read l`, url, &out) ||
		!strings.Contains(out.String(), "FAIL  admin starts and answers init with init_ok\n      admin sent an init_ok whose \"abrupt_close\" is \"hearbeat\"") {
		t.Errorf("validate-impl of an init_ok with a misspelt abrupt_close:\n%s", out.String())
	}
}

// After two failed starts in a run no more of its processes are started,
// and each refusal names who was not started and why; a run on another
// lock is not charged with them.
func TestGivesUpAfterTwoFailedStarts(t *testing.T) {
	t.Parallel()
	p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "x", Slots: 1}
	impl := amqpprotocol.NewProcesses(`read -r line; exit 4`)
	for _, name := range []string{"c1", "c2"} {
		if _, err := impl.Connect(context.Background(), addrOnly{}, p, name); err == nil || err.Error() != name+" did not start: exited (exit status 4); last request: "+
			`{"client":"`+name+`","heartbeat_ms":10000,"id":1,"lock":"semaphore","name":"x","type":"init","url":"amqp://guest:xxxxx@127.0.0.1:1/"}` { // the password redacted
			t.Fatalf("%s: %v", name, err)
		}
	}
	_, err := impl.Connect(context.Background(), addrOnly{}, p, "probe")
	var pe *prover.ImplementationError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Msg, "probe not started: the implementation failed to start twice in this run (c2 did not start: exited") {
		t.Fatalf("%v", err)
	}
	other := *p
	other.Lock = "y"
	if _, err := impl.Connect(context.Background(), addrOnly{}, &other, "c1"); err == nil || !strings.HasPrefix(err.Error(), "c1 did not start: exited (exit status 4)") {
		t.Fatalf("a run on another lock: %v, want its own start tried", err)
	}
}

// init proposes the plan's heartbeat, which the protocol spells as plans
// do: a plan without heartbeat_ms has the reference's default (10 s, sent
// as 10000), 0 is none (sent as 0, "propose none"), n is n. (The process
// reads init before it exits: one that exits at once may be gone before
// init is sent, beside a loaded suite, and the error then names no
// request.)
func TestInitProposesThePlansHeartbeat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		plan *int
		wire string
	}{{nil, `"heartbeat_ms":10000,`}, {amqprun.Ms(0), `"heartbeat_ms":0,`}, {amqprun.Ms(1500), `"heartbeat_ms":1500,`}} {
		p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "mutex", Lock: "x", Options: amqprun.Options{HeartbeatMs: tc.plan}}
		_, err := amqpprotocol.NewProcesses(`read -r line; exit 4`).Connect(context.Background(), addrOnly{}, p, "c1")
		if err == nil || !strings.Contains(err.Error(), tc.wire) {
			t.Errorf("plan heartbeat_ms %v: %v, want a request with %s", p.Options.Heartbeat(), err, tc.wire)
		}
	}
}
