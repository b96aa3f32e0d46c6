package amqprun

import (
	"context"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/amqpcheck"

	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// lazyImpl is the reference with a client that, like many drivers, never
// says its connection is gone: it connects again itself at the start of
// its next operation (always, with every).
type lazyImpl struct{ every bool }

type lazyClient struct {
	Client
	every bool
	dial  func(context.Context) (Client, error)
}

func (l lazyImpl) Connect(ctx context.Context, b broker.Broker, p *Plan, name string) (Client, error) {
	dial := func(ctx context.Context) (Client, error) { return Reference.Connect(ctx, b, p, name) }
	c, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	return &lazyClient{Client: c, every: l.every, dial: dial}, nil
}

func (l *lazyClient) again(ctx context.Context) error {
	if !l.every && !l.Client.Broken() {
		return nil
	}
	l.Client.Close()
	c, err := l.dial(ctx)
	if err == nil {
		l.Client = c
	}
	return err
}

func (l *lazyClient) Broken() bool { return false }

func (l *lazyClient) Acquire(ctx context.Context) (int, error) {
	if err := l.again(ctx); err != nil {
		return 0, err
	}
	return l.Client.Acquire(ctx)
}

// An acquire that connects again after a fault cut its client off is not
// charged for the connection; one that connects when nothing cut it off is.
func TestReconnectAfterFault(t *testing.T) {
	plan := func(fault string) *Plan {
		p := &Plan{Version: PlanVersion, Kind: "semaphore", Lock: "lp", Slots: 1, Admins: [][]Step{{}},
			Clients: [][]Step{{{Op: "acquire"}, {Op: "release"}, {Op: "acquire"}, {Op: "release"}}}}
		if fault != "" {
			// After the first acquire's 9 methods: its release is cut off.
			p.Nemesis = []Fault{{Fault: fault, Target: "c1", AfterCalls: 9}}
		}
		return p
	}
	cheap := func(p *Plan, impl Impl) verdict.Verdict {
		res, err := Simulator{}.Run(context.Background(), p, impl)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range prover.Judge(res, model.Options{}).Verdicts {
			if v.Property == amqpcheck.CheapAcquire {
				return v
			}
		}
		t.Fatal("no cheap-acquire verdict")
		return verdict.Verdict{}
	}
	for _, fault := range []string{"force-close", "drop-reply"} {
		if v := cheap(plan(fault), lazyImpl{}); v.Status != verdict.Pass || v.Judged < 2 {
			t.Errorf("%s, then a lazy reconnect: %s (%d judged) %s", fault, v.Status, v.Judged, v.Detail)
		}
	}
	if v := cheap(plan(""), lazyImpl{every: true}); v.Status != verdict.Fail || !strings.Contains(v.Detail, "opened a connection though it had one") {
		t.Errorf("a connection per acquire: %s %s, want a failure: opened a connection though it had one", v.Status, v.Detail)
	}
	if v := cheap(plan("force-close"), lazyImpl{every: true}); v.Status != verdict.Fail || !strings.Contains(v.Detail, "opened a connection though it had one") {
		t.Errorf("a connection per acquire, one of them after a fault: %s %s, want a failure: opened a connection though it had one", v.Status, v.Detail)
	}
}
