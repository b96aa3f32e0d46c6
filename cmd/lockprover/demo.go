package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/lockprover/lockprover/amqplocks"
	"github.com/lockprover/lockprover/amqplocks/broker"
	"github.com/lockprover/lockprover/sim"
)

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "seed of the simulator's decisions")
	clients := fs.Int("clients", 3, "number of semaphore clients")
	slots := fs.Int("slots", 2, "number of slots the admin creates")
	trace := fs.Bool("trace", false, "print every simulated broker event")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *clients < 1 || *slots < 1 {
		fmt.Fprintln(stderr, "demo: -clients and -slots must be at least 1")
		return exitUsage
	}
	o := sim.Options{Decider: sim.Seeded(*seed)}
	if *trace {
		o.Trace = stdout
	}
	w := sim.New(o)
	ctx := context.Background()
	log := func(who, format string, args ...any) {
		fmt.Fprintf(stdout, "%10.3fms %-7s %s\n", float64(w.Now())/1e6, who, fmt.Sprintf(format, args...))
	}
	opts := func(i int) amqplocks.Options {
		return amqplocks.Options{Heartbeat: time.Second, Rand: rand.New(rand.NewPCG(*seed, uint64(i)))}
	}
	w.Go("admin", func(b broker.Broker) {
		c, err := amqplocks.Dial(ctx, b, opts(0))
		if err != nil {
			log("admin", "dial: %v", err)
			return
		}
		defer c.Close()
		log("admin", "create %d slots: %v", *slots, c.Admin("sem").Create(ctx, *slots))
		b.Sleep(ctx, 50*time.Millisecond)
		from, to, err := c.Admin("sem").Change(ctx, -1)
		log("admin", "change -1: %d -> %d %v", from, to, err)
	})
	for i := 1; i <= *clients; i++ {
		name := fmt.Sprintf("c%d", i)
		w.Go(name, func(b broker.Broker) {
			b.Sleep(ctx, 10*time.Millisecond)
			c, err := amqplocks.Dial(ctx, b, opts(i))
			if err != nil {
				log(name, "dial: %v", err)
				return
			}
			sem := c.Semaphore("sem")
			for j := 0; j < 4; j++ {
				if c.Err() != nil {
					if c, err = amqplocks.Dial(ctx, b, opts(i)); err != nil {
						log(name, "redial: %v", err)
						return
					}
					sem = c.Semaphore("sem")
				}
				slot, err := sem.Acquire(ctx)
				if err != nil {
					log(name, "acquire: %v", err)
					b.Sleep(ctx, 20*time.Millisecond)
					continue
				}
				log(name, "acquired slot %d", slot)
				b.Sleep(ctx, 30*time.Millisecond)
				log(name, "verify slot %d: %s", slot, heldText(sem.Verify(ctx, slot)))
				log(name, "release slot %d: %v", slot, sem.Release(ctx, slot))
			}
		})
	}
	w.Go("nemesis", func(b broker.Broker) {
		b.Sleep(ctx, 40*time.Millisecond)
		log("nemesis", "partition c1: %v", w.Partition("c1"))
		b.Sleep(ctx, 3*time.Second)
		log("nemesis", "heal c1: %v", w.Heal("c1"))
	})
	if err := w.Run(); err != nil {
		fmt.Fprintln(stderr, err)
		return exitViolation
	}
	fmt.Fprintln(stdout, "\nmethods sent per process:")
	for _, p := range w.Processes() {
		fmt.Fprintf(stdout, "  %-7s %v\n", p, w.Counters(p))
	}
	return exitOK
}

func heldText(err error) string {
	switch {
	case err == nil:
		return "held"
	case errors.Is(err, amqplocks.ErrLost):
		return "lost (" + err.Error() + ")"
	}
	return "unknown (" + err.Error() + ")"
}
