package amqprun

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// nodePlace is a place whose faults on nodes always apply, for what
// the runner records of them.
type nodePlace struct{}

func (nodePlace) Go(string, func(broker.Broker))              {}
func (nodePlace) Now() int64                                  { return 0 }
func (nodePlace) Strike(run.Aim) error                        { return nil }
func (nodePlace) End(run.Aim) error                           { return nil }
func (nodePlace) AfterMethods(string, int, func())            {}
func (nodePlace) After(time.Duration, func())                 {}
func (nodePlace) Cost(string) broker.Cost                     { return broker.Cost{} }
func (nodePlace) Hold(broker.Broker, string)                  {}
func (nodePlace) Queues(string) ([]queueOwner, error)         { return nil, nil }
func (nodePlace) Notice(broker.Broker, string, time.Duration) {}
func (nodePlace) OpContext(bool) (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

// A kill of a node is recorded as a partition of every process of the
// plan connected there (started or not), in place before it strikes; the node's
// start heals them; a pause and its resume likewise; a restart of a live
// node cuts and heals them around it. The history reads back as valid.
func TestNodeFaultsStrikeItsProcesses(t *testing.T) {
	p := isolatedHolder() // admin and c2 on n2, c1 on n1
	r := newRunner(p, Reference, nodePlace{}, p.Lock)
	r.strike(histories.Kill, "n2")
	r.strike(histories.RestartBroker, "n2") // its start: heals only
	r.strike(histories.RestartBroker, "n1") // a restart of a live node: cuts and heals
	r.strike(histories.Pause, "n1")
	r.strike(histories.Resume, "n1")
	var got []string
	for _, e := range r.Rec.Events() {
		f := histories.FaultOf(&e)
		got = append(got, string(e.Type)+" "+e.F+" "+f.Process)
	}
	want := []string{
		"invoke partition admin", "info partition admin", "invoke partition c2", "info partition c2", "invoke kill n2", "info kill n2",
		"invoke restart-broker n2", "info restart-broker n2", "invoke heal admin", "info heal admin", "invoke heal c2", "info heal c2",
		"invoke partition c1", "info partition c1", "invoke restart-broker n1", "info restart-broker n1", "invoke heal c1", "info heal c1",
		"invoke partition c1", "info partition c1", "invoke pause n1", "info pause n1",
		"invoke resume n1", "info resume n1", "invoke heal c1", "info heal c1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("recorded:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var b bytes.Buffer
	if err := histories.Write(&b, r.Rec.Events()); err != nil {
		t.Fatal(err)
	}
	if _, err := histories.Read(&b, "node-faults.jsonl"); err != nil {
		t.Errorf("the history does not read back: %v", err)
	}
}
