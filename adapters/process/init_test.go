package process_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/amqplocks/broker"
	"github.com/lockprover/lockprover/prover"
)

// addrOnly is a broker that only gives its URL: enough for an init.
type addrOnly struct{}

func (addrOnly) URL() string { return "amqp://guest:guest@127.0.0.1:1/" }
func (addrOnly) Dial(context.Context, broker.Config) (broker.Conn, error) {
	return nil, errors.New("no dialling here")
}
func (addrOnly) Sleep(context.Context, time.Duration) error { return nil }

// An init answered with an error, by a process that then exits at once, is
// the broker out of reach (try again later), every time: the reply is read
// before the exit is noticed. A definite one is a refusal to start.
func TestInitAnsweredWithAnError(t *testing.T) {
	p := &prover.Plan{Version: 1, Kind: "semaphore", Lock: "x", Slots: 1}
	impl := &process.Impl{Command: `read l; echo '{"id":1,"type":"error","code":"broker","text":"unreachable"}'`}
	for i := 0; i < 200; i++ {
		_, err := impl.Connect(context.Background(), addrOnly{}, p, "c1")
		var pe *prover.ProcessError
		if err == nil || errors.As(err, &pe) {
			t.Fatalf("start %d: %v, want the broker out of reach", i, err)
		}
	}
	impl = &process.Impl{Command: `read l; echo '{"id":1,"type":"error","code":"unsupported","text":"no semaphores here","definite":true}'`}
	_, err := impl.Connect(context.Background(), addrOnly{}, p, "c1")
	var pe *prover.ProcessError
	if !errors.As(err, &pe) || pe.Msg != "c1 refused to start: unsupported" {
		t.Fatalf("%v, want a refusal to start", err)
	}
}
