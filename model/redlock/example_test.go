package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
)

// A lock on three servers: acquire, work while the validity lasts (check
// it, and pass the fence to the resource), release.
func Example() {
	ctx := context.Background()
	r, err := redlock.New([]string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}, redlock.Options{})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	l, err := r.Acquire(ctx, "report", 10*time.Second)
	if errors.Is(err, redlock.ErrHeld) {
		fmt.Println("someone else holds it")
		return
	}
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer r.Release(ctx, l)
	fmt.Printf("fence %d, valid for %v\n", l.Fence, l.Validity)
	if redlock.Monotonic() < l.ValidUntil {
		// ... write to the resource, with l.Fence ...
	}
}

// A priority lock: a holder is told (OnLost) when a higher priority takes
// its lease, before the thief's Acquire returns.
func ExamplePriority() {
	ctx := context.Background()
	p, err := redlock.NewPriority([]string{"127.0.0.1:7001"}, redlock.Options{
		OnLost: func(x redlock.Lost) { fmt.Printf("lost %s to %s\n", x.Key, x.Thief) },
	})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	l, err := p.Acquire(ctx, "printer", 10*time.Second, 1)
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer p.Release(ctx, l)
	if ok, _ := p.Verify(ctx, l); ok {
		// ... still ours ...
	}
}
