package amqplocks_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// The examples run on the simulator; against RabbitMQ, pass
// rabbitmq.New(url) from package adapters/servers/rabbitmq instead.
func onSimulator(fn func(b broker.Broker)) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	w.Go("example", fn)
	if err := w.Run(); err != nil {
		panic(err)
	}
}

func Example() {
	onSimulator(func(b broker.Broker) {
		ctx := context.Background()
		admin, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		defer admin.Close()
		admin.Admin("jobs").Create(ctx, 2)

		client, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		defer client.Close()
		jobs := client.Semaphore("jobs")
		slot, err := jobs.Acquire(ctx)
		fmt.Println("acquired slot", slot, err)
		fmt.Println("verify:", jobs.Verify(ctx, slot))
		fmt.Println("release:", jobs.Release(ctx, slot))
	})
	// Output:
	// acquired slot 1 <nil>
	// verify: <nil>
	// release: <nil>
}

func ExampleSemaphore_Acquire() {
	onSimulator(func(b broker.Broker) {
		ctx := context.Background()
		admin, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		admin.Admin("jobs").Create(ctx, 1)

		first, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		second, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		first.Semaphore("jobs").Acquire(ctx)
		_, err := second.Semaphore("jobs").Acquire(ctx)
		fmt.Println(errors.Is(err, amqplocks.ErrFull))
		_, err = second.Semaphore("no-such-semaphore").Acquire(ctx)
		fmt.Println(errors.Is(err, amqplocks.ErrAbsent))
	})
	// Output:
	// true
	// true
}

// Removing a held slot does not take it from its holder; the holder learns
// at its next verify, and the admin can wait until it lets go.
func ExampleAdmin_Change() {
	onSimulator(func(b broker.Broker) {
		ctx := context.Background()
		admin, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		adm := admin.Admin("jobs")
		adm.Create(ctx, 2)

		client, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		jobs := client.Semaphore("jobs")
		jobs.Acquire(ctx)
		slot, _ := jobs.Acquire(ctx)

		from, to, _ := adm.Change(ctx, -1)
		fmt.Printf("slots %d -> %d\n", from, to)
		fmt.Println("holder of slot", slot, "verifies:", errors.Is(jobs.Verify(ctx, slot), amqplocks.ErrLost))
		jobs.Release(ctx, slot)
		fmt.Println("wait:", adm.Wait(ctx, slot))
	})
	// Output:
	// slots 2 -> 1
	// holder of slot 2 verifies: true
	// wait: <nil>
}

func ExampleMutex() {
	onSimulator(func(b broker.Broker) {
		ctx := context.Background()
		a, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		c, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		fmt.Println(a.Mutex("deploy").Acquire(ctx))
		fmt.Println(c.Mutex("deploy").Acquire(ctx))
		a.Close() // closing the connection releases the mutex
		fmt.Println(c.Mutex("deploy").Acquire(ctx))
	})
	// Output:
	// <nil>
	// amqplocks: the mutex is held by another client
	// <nil>
}

func ExampleClient_PersistentMutex() {
	onSimulator(func(b broker.Broker) {
		ctx := context.Background()
		admin, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		client, _ := amqplocks.Dial(ctx, b, amqplocks.Options{})
		m := client.PersistentMutex("migrations")
		_, err := m.Acquire(ctx)
		fmt.Println("disabled:", errors.Is(err, amqplocks.ErrAbsent))
		admin.Admin("migrations").Create(ctx, 1) // enable it
		slot, err := m.Acquire(ctx)
		fmt.Println("acquired", slot, err)
	})
	// Output:
	// disabled: true
	// acquired 1 <nil>
}
