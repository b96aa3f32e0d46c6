package semantics

import (
	"context"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// RunSim runs c on a fresh simulated broker whose open choices d makes.
func RunSim(c Case, d rabbitmqsim.Decider) (Result, error) {
	w := rabbitmqsim.New(rabbitmqsim.Options{Decider: d, ServerHeartbeat: c.ServerHeartbeat})
	var res Result
	w.Go("table", func(b broker.Broker) {
		res = Run(context.Background(), simEnv{b, w}, c, "t-")
	})
	return res, w.Run()
}

type simEnv struct {
	broker.Broker
	w *rabbitmqsim.World
}

func (e simEnv) Now() time.Duration { return time.Duration(e.w.Now()) }

func (e simEnv) Inspect(q string) (QueueState, bool, error) {
	info, ok := e.w.Queue(q)
	return QueueState{Durable: info.Durable, AutoDelete: info.AutoDelete, Owner: info.Owner, Messages: info.Messages, Consumers: info.Consumers}, ok, nil
}

func (e simEnv) Fault(kind, conn string) error { return e.w.Strike(kind, conn) }

func (e simEnv) StopBroker() error  { return e.w.StopBroker() }
func (e simEnv) StartBroker() error { return e.w.StartBroker() }
