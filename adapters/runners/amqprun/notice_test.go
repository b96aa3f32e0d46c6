package amqprun

import (
	"context"
	"errors"
	"testing"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// gone is a connection whose first channel finds no queue (which closes
// the channel) and which then can open no other: the broker went away,
// or the run was interrupted, while the place looked at the lock.
type gone struct {
	broker.Conn
	opened int
}

type noQueue struct{ broker.Channel }

func (noQueue) Declare(context.Context, string, broker.DeclareOptions) (broker.Queue, error) {
	return broker.Queue{}, &broker.Error{Code: broker.NotFound, Server: true}
}
func (noQueue) Close() error { return nil }

func (c *gone) Channel(context.Context) (broker.Channel, error) {
	if c.opened++; c.opened > 1 {
		return nil, errors.New("connection closed")
	}
	return noQueue{}, nil
}

// Looking at the lock's queues on a connection that fails midway says
// the broker is not quiet yet; it does not panic (it did, closing a
// channel it never got, on the second Ctrl-C of a run).
func TestQuietOnAConnectionThatGoes(t *testing.T) {
	e := &realPlace{proxies: amqpproxy.NewSet("amqp://guest:guest@127.0.0.1:1/"), slots: 2}
	if e.quiet(context.Background(), &gone{}, e.queueNames("lp-x")) {
		t.Error("quiet, though it could not look at every queue")
	}
}
