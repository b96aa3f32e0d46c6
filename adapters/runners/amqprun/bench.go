package amqprun

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// benchHeartbeat is what every bench connection proposes: the reference's
// default (amqplocks.Options{}.Heartbeat == 0 means 10 s), so that the floor
// connection is set up exactly like the library's.
const benchHeartbeat = 10 * time.Second

// Bench measures the reference against the broker at url (plain amqp:
// the counting proxy reads AMQP frames) beside its floors, with a
// semaphore of slots slots, and writes the tables to out. Every queue it
// made is deleted however it ends; an interrupted run's error wraps ctx's.
func Bench(ctx context.Context, url string, slots int, c bench.Config, out io.Writer) error {
	if err := plainAMQP(url); err != nil {
		return err
	}
	b := &benchRun{ctx: ctx, url: url, slots: slots, seed: c.Seed, run: bench.New(c), prefix: benchPrefix(), stderr: c.Log}
	b.sem = b.prefix + "sem"
	b.fresh = b.prefix + "floor-B"
	if err := b.connect(); err != nil {
		return err
	}
	return b.finish(b.measure(), out)
}

// connect checks that the broker takes a connection set up like the
// library's, then starts the counting proxy in front of it, so that a
// broker that cannot be used is named before any queue is made.
func (b *benchRun) connect() error {
	dctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	probe, err := rabbitmq.New(b.url).Dial(dctx, broker.Config{Heartbeat: benchHeartbeat, Name: "lockprover bench probe"})
	cancel()
	if err != nil {
		return fmt.Errorf("cannot connect to the broker at %s: %v", rabbitmq.RedactURL(b.url), err)
	}
	probe.Close()
	b.proxy, b.proxyURL, err = amqpproxy.ListenURL(b.url)
	return err
}

// finish closes the run's connections, deletes its queues, and then either
// says why the run failed (runErr) or prints the table. The cleanup runs
// whatever happened, so no queue is left behind.
func (b *benchRun) finish(runErr error, stdout io.Writer) error {
	interrupted := b.ctx.Err() != nil
	b.closeAll()
	left, cerr := b.cleanup()
	clean := "the queues it created were deleted"
	switch {
	case cerr != nil:
		clean = "cleanup failed"
		fmt.Fprintf(b.stderr, "bench: cleanup: %v (delete the queues named %s* by hand)\n", cerr, b.prefix)
	case len(left) > 0:
		clean = "cleanup incomplete"
		fmt.Fprintf(b.stderr, "bench: cleanup: queues left on the broker: %s\n", strings.Join(left, ", "))
	}
	switch {
	case runErr != nil && interrupted:
		return fmt.Errorf("interrupted; %s: %w", clean, b.ctx.Err())
	case runErr != nil:
		return runErr
	}
	b.report(stdout)
	return nil
}

// plainAMQP refuses a broker URL that the counting proxy cannot serve.
func plainAMQP(raw string) error {
	pu, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("broker URL: %w", err)
	}
	if pu.Scheme != "amqp" {
		return fmt.Errorf("broker URL %s: scheme must be amqp (the counting proxy reads plain AMQP frames)", rabbitmq.RedactURL(raw))
	}
	return nil
}

func benchPrefix() string { return rabbitmq.UniqueName("lp-bench-") + "-" }

// benchRun is one bench. Operations run one at a time, so the difference
// of two proxy snapshots around an operation is exactly what it sent.
type benchRun struct {
	ctx                     context.Context
	url, proxyURL           string
	slots                   int
	seed                    uint64
	run                     *bench.Run
	prefix, sem, fresh      string // queue-name prefix, semaphore name, the floor's fresh queue
	stderr                  io.Writer
	proxy                   *amqpproxy.Proxy
	clients                 []*amqplocks.Client
	conns                   []broker.Conn
	defaultC, skipC, setupC *amqplocks.Client
	raw                     rawOps
}

// Series keys: the library's operations and the floors.
const (
	opAcq1, opAcq1Skip, opAcqL, opAcqLSkip = "acq1", "acq1-skip", "acqL", "acqL-skip"
	opVerify, opRelease                    = "verify", "release"
	opInc, opDec, opCount                  = "change+1", "change-1", "count"
	flPublish, flDeclare, flDelete         = "F1", "F2", "F3"
	flAcq1, flAcq1V, flAcqL, flAcqLV       = "F4", "F5", "F6", "F7"
	flCount, flInc, flDec                  = "F8", "F9", "F10"
)

// time runs f as one measured operation of series key.
func (b *benchRun) time(key string, f func() error) error {
	before := b.proxy.Counts()
	return b.run.Time(key, f, func() map[string]int { return b.proxy.Counts().Sub(before).Sent.Methods })
}

// loop runs the iterations of steps (bench.Run.Loop).
func (b *benchRun) loop(phase string, steps ...func() error) error {
	return b.run.Loop(b.ctx, phase, steps...)
}

// dial connects a reference client, through the proxy unless direct.
func (b *benchRun) dial(o amqplocks.Options, direct bool) (*amqplocks.Client, error) {
	u := b.proxyURL
	if direct {
		u = b.url
	}
	c, err := amqplocks.Dial(b.ctx, rabbitmq.New(u), o)
	if err != nil {
		return nil, err
	}
	b.clients = append(b.clients, c)
	return c, nil
}

func (b *benchRun) measure() error {
	var err error
	// The setup client and the holders of slots 1..L-1 talk to the broker
	// directly: only what is measured goes through the proxy.
	if b.setupC, err = b.dial(amqplocks.Options{}, true); err != nil {
		return err
	}
	if err := b.setupC.Admin(b.sem).Create(b.ctx, b.slots); err != nil {
		return fmt.Errorf("create the semaphore: %w", err)
	}
	if b.defaultC, err = b.dial(amqplocks.Options{}, false); err != nil {
		return err
	}
	if b.skipC, err = b.dial(amqplocks.Options{SkipVerifyAfterAcquire: true}, false); err != nil {
		return err
	}
	// The floor: raw calls on a connection set up like the library's (same
	// adapter, same proxy, same heartbeat, a confirm channel).
	fc, err := rabbitmq.New(b.proxyURL).Dial(b.ctx, broker.Config{Heartbeat: benchHeartbeat, Name: "lockprover bench floor"})
	if err != nil {
		return err
	}
	b.conns = append(b.conns, fc)
	ch, err := fc.Channel(b.ctx)
	if err != nil {
		return err
	}
	if err := ch.Confirm(b.ctx); err != nil {
		return err
	}
	b.raw = rawOps{ctx: b.ctx, ch: ch}

	for _, phase := range []func() error{b.slotOne, b.verify, b.slotL, b.admin} {
		if err := phase(); err != nil {
			return err
		}
	}
	return nil
}

// acquireAt measures an acquire that must land on slot want, and (for the
// default client at slot 1) the release after it.
func (b *benchRun) acquireAt(c *amqplocks.Client, key string, want int, releaseKey string) func() error {
	sem := c.Semaphore(b.sem)
	return func() error {
		err := b.time(key, func() error {
			got, err := sem.Acquire(b.ctx)
			if err == nil && got != want {
				err = fmt.Errorf("acquired slot %d, want %d", got, want)
			}
			return err
		})
		if err != nil {
			return err
		}
		release := func() error { return sem.Release(b.ctx, want) }
		if releaseKey == "" {
			return release()
		}
		return b.time(releaseKey, release)
	}
}

// floorAcquire measures the spec's acquire at slot l as raw calls: probe
// A[1], B[1], ..., A[l], B[l] (B[1..l-1] held by others), declare B[l]
// exclusively, and with verifyAfter probe A[l] again; then deletes B[l],
// unmeasured.
func (b *benchRun) floorAcquire(key string, l int, verifyAfter bool) func() error {
	bq := amqplocks.HolderQueue(b.sem, l)
	return func() error {
		err := b.time(key, func() error {
			for i := 1; i <= l; i++ {
				if err := b.raw.probe(amqplocks.SlotQueue(b.sem, i), true); err != nil {
					return err
				}
				if err := b.raw.probe(amqplocks.HolderQueue(b.sem, i), i < l); err != nil {
					return err
				}
			}
			if err := b.raw.declareExclusive(bq); err != nil {
				return err
			}
			if verifyAfter {
				return b.raw.probe(amqplocks.SlotQueue(b.sem, l), true)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return b.raw.delete(bq)
	}
}

// slotOne: acquire at slot 1 with every slot free, the release after it,
// and the floors of both and of the decisive declare.
func (b *benchRun) slotOne() error {
	return b.loop("acquire at slot 1, release",
		b.acquireAt(b.defaultC, opAcq1, 1, opRelease),
		b.acquireAt(b.skipC, opAcq1Skip, 1, ""),
		b.floorAcquire(flAcq1, 1, false),
		b.floorAcquire(flAcq1V, 1, true),
		func() error {
			if err := b.time(flDeclare, func() error { return b.raw.declareExclusive(b.fresh) }); err != nil {
				return err
			}
			return b.time(flDelete, func() error { return b.raw.delete(b.fresh) })
		},
	)
}

// verify: the default client holds slot 1 and verifies it; the floor is one
// mandatory publish to A[1] and its confirm.
func (b *benchRun) verify() error {
	sem := b.defaultC.Semaphore(b.sem)
	if got, err := sem.Acquire(b.ctx); err != nil || got != 1 {
		return fmt.Errorf("acquire for verify: slot %d, %v", got, err)
	}
	err := b.loop("verify",
		func() error { return b.time(opVerify, func() error { return sem.Verify(b.ctx, 1) }) },
		func() error {
			return b.time(flPublish, func() error { return b.raw.probe(amqplocks.SlotQueue(b.sem, 1), true) })
		},
	)
	if err != nil {
		return err
	}
	return sem.Release(b.ctx, 1)
}

// slotL: L-1 other clients hold slots 1..L-1; acquire lands on slot L.
func (b *benchRun) slotL() error {
	var holders []*amqplocks.Client
	for l := 1; l < b.slots; l++ {
		h, err := b.dial(amqplocks.Options{}, true)
		if err != nil {
			return err
		}
		if got, err := h.Semaphore(b.sem).Acquire(b.ctx); err != nil || got != l {
			return fmt.Errorf("holder %d acquired slot %d, %v", l, got, err)
		}
		holders = append(holders, h)
	}
	err := b.loop(fmt.Sprintf("acquire at slot %d with %d slots held", b.slots, b.slots-1),
		b.acquireAt(b.defaultC, opAcqL, b.slots, ""),
		b.acquireAt(b.skipC, opAcqLSkip, b.slots, ""),
		b.floorAcquire(flAcqL, b.slots, false),
		b.floorAcquire(flAcqLV, b.slots, true),
	)
	for _, h := range holders {
		h.Close()
	}
	return err
}

// admin: count, change +1 and change -1 (back to L slots) by the default
// client as an admin, and the same methods as raw calls: declare the
// administration mutex, probe A[1].. up to the first missing one, declare or
// delete the top A queue, delete the mutex.
func (b *benchRun) admin() error {
	adm := b.defaultC.Admin(b.sem)
	change := func(key string, delta, from int) error {
		return b.time(key, func() error {
			f, t, err := adm.Change(b.ctx, delta)
			if err == nil && (f != from || t != from+delta) {
				err = fmt.Errorf("changed from %d to %d, want %d to %d", f, t, from, from+delta)
			}
			return err
		})
	}
	top := amqplocks.SlotQueue(b.sem, b.slots+1)
	floor := func(key string, slots int, middle func() error) error {
		return b.time(key, func() error {
			if err := b.raw.declareExclusive(b.sem); err != nil {
				return err
			}
			for l := 1; l <= slots+1; l++ {
				if err := b.raw.probe(amqplocks.SlotQueue(b.sem, l), l <= slots); err != nil {
					return err
				}
			}
			if middle != nil {
				if err := middle(); err != nil {
					return err
				}
			}
			return b.raw.delete(b.sem)
		})
	}
	return b.loop("admin count, change +1 and -1",
		func() error {
			return b.time(opCount, func() error {
				got, err := adm.Count(b.ctx)
				if err == nil && got != b.slots {
					err = fmt.Errorf("count %d, want %d", got, b.slots)
				}
				return err
			})
		},
		func() error { return floor(flCount, b.slots, nil) },
		func() error {
			if err := change(opInc, 1, b.slots); err != nil {
				return err
			}
			return change(opDec, -1, b.slots+1)
		},
		func() error {
			if err := floor(flInc, b.slots, func() error { return b.raw.declareSlot(top) }); err != nil {
				return err
			}
			return floor(flDec, b.slots+1, func() error { return b.raw.delete(top) })
		},
	)
}

// closeAll closes every connection the run opened, which releases their
// exclusive queues, and the proxy.
func (b *benchRun) closeAll() {
	for _, c := range b.clients {
		c.Close()
	}
	for _, c := range b.conns {
		c.Close()
	}
	if b.proxy != nil {
		b.proxy.Close()
	}
}

// createdQueues is every queue name the run may have created.
func (b *benchRun) createdQueues() []string {
	qs := []string{b.sem, b.fresh}
	for l := 1; l <= b.slots+1; l++ {
		qs = append(qs, amqplocks.SlotQueue(b.sem, l), amqplocks.HolderQueue(b.sem, l))
	}
	return qs
}

// cleanup deletes every queue the run may have created (rabbitmq's
// Cleaner, on a connection of its own, retrying a queue a torn-down
// connection still holds for about 5 s) with a context of its own (the
// run's may be cancelled), and returns those still there.
func (b *benchRun) cleanup() (left []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &rabbitmq.Cleaner{URL: b.url, Name: "lockprover bench cleanup", Rounds: 100}
	defer c.Close()
	return c.Cleanup(ctx, b.prefix, b.createdQueues()...)
}

// rawOps are the floor's raw calls on one confirm channel, with the same
// queue arguments as the reference's.
type rawOps struct {
	ctx context.Context
	ch  broker.Channel
}

var benchQueueArgs = map[string]any{"x-max-length": int32(0)} // amqplocks' default queue arguments

// probe publishes a mandatory message to q and checks it was routed (q
// exists) or returned as wanted.
func (r rawOps) probe(q string, exists bool) error {
	c, err := r.ch.Publish(r.ctx, broker.Publishing{Key: q, Mandatory: true})
	if err != nil {
		return err
	}
	if c.Returned == exists {
		return fmt.Errorf("probe %s: exists %v, want %v", q, !c.Returned, exists)
	}
	return nil
}

func (r rawOps) declareExclusive(q string) error {
	_, err := r.ch.Declare(r.ctx, q, broker.DeclareOptions{Exclusive: true, Args: benchQueueArgs})
	return err
}

func (r rawOps) declareSlot(q string) error {
	_, err := r.ch.Declare(r.ctx, q, broker.DeclareOptions{Durable: true, Args: benchQueueArgs})
	return err
}

func (r rawOps) delete(q string) error {
	_, err := r.ch.Delete(r.ctx, q, broker.DeleteOptions{})
	return err
}

func (b *benchRun) stats(key string) bench.Stats { return b.run.Stats(key) }

// benchRow is a row of the table: a library operation and its floor.
type benchRow struct{ name, key, floor string }

func (b *benchRun) rows() []benchRow {
	L := b.slots
	return []benchRow{
		{"acquire, slot 1, all free (default: verify after)", opAcq1, flAcq1V},
		{"acquire, slot 1, all free (SkipVerifyAfterAcquire)", opAcq1Skip, flAcq1},
		{fmt.Sprintf("acquire, slot %d, %d held (default: verify after)", L, L-1), opAcqL, flAcqLV},
		{fmt.Sprintf("acquire, slot %d, %d held (SkipVerifyAfterAcquire)", L, L-1), opAcqLSkip, flAcqL},
		{"verify", opVerify, flPublish},
		{"release", opRelease, flDelete},
		{fmt.Sprintf("admin change +1 (%d to %d slots)", L, L+1), opInc, flInc},
		{fmt.Sprintf("admin change -1 (%d to %d slots)", L+1, L), opDec, flDec},
		{fmt.Sprintf("admin count (%d slots)", L), opCount, flCount},
	}
}

func (b *benchRun) floors() [][2]string {
	L := b.slots
	return [][2]string{
		{flPublish, "mandatory basic.publish + confirm to an existing queue (A[1]): the floor of verify"},
		{flDeclare, "exclusive queue.declare of a new queue, timed alone: the decisive step of acquire"},
		{flDelete, "queue.delete of that queue, own and exclusive: the floor of release"},
		{flAcq1, "the spec's acquire at slot 1: probe A[1], probe B[1] (returned), declare B[1]"},
		{flAcq1V, "F4, then probe A[1] again (the verify the spec recommends)"},
		{flAcqL, fmt.Sprintf("the spec's acquire at slot %d: probe A[l], B[l] for l = 1..%d, declare B[%d]", L, L, L)},
		{flAcqLV, fmt.Sprintf("F6, then probe A[%d] again", L)},
		{flCount, fmt.Sprintf("count: declare the admin mutex, probe A[1..%d], delete the mutex", L+1)},
		{flInc, fmt.Sprintf("change +1: declare the mutex, probe A[1..%d], declare A[%d], delete the mutex", L+1, L+1)},
		{flDec, fmt.Sprintf("change -1: declare the mutex, probe A[1..%d], delete A[%d], delete the mutex", L+2, L+1)},
	}
}

func (b *benchRun) report(w io.Writer) {
	fmt.Fprintf(w, "lockprover bench: %s through a counting proxy; %d iterations after %d warm-up; %d slots; seed %d; queue prefix %s\n\n",
		rabbitmq.RedactURL(b.url), b.run.N, b.run.Warmup, b.slots, b.seed, b.prefix)
	fmt.Fprintln(w, "| operation | p50 | p99 | mean | methods/op | floor (p50) | ratio |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --- | --- | --: |")
	for _, r := range b.rows() {
		s, f := b.stats(r.key), b.stats(r.floor)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s: %s | %.2fx |\n",
			r.name, bench.US(s.P50), bench.US(s.P99), bench.US(s.Mean), s.Sent, r.floor, bench.US(f.P50), bench.Ratio(s.P50, f.P50))
	}
	fmt.Fprintln(w, "\nFloors: the same AMQP methods as raw broker.Channel calls, no lock library, on a connection set up like the library's (same adapter, proxy, heartbeat, confirm channel, queue arguments):")
	fmt.Fprintln(w, "\n| floor | what | p50 | p99 | mean | methods/op |")
	fmt.Fprintln(w, "| --- | --- | --: | --: | --: | --- |")
	for _, f := range b.floors() {
		s := b.stats(f[0])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", f[0], f[1], bench.US(s.P50), bench.US(s.P99), bench.US(s.Mean), s.Sent)
	}

	fmt.Fprintln(w, "\nTargets (p50 against p50):")
	target := func(what, op, fl string, limit float64) {
		s, f := b.stats(op), b.stats(fl)
		r := bench.Ratio(s.P50, f.P50)
		verdict := "met"
		if r > limit {
			verdict = "NOT met"
		}
		same := "the same methods as the floor"
		if s.Sent != f.Sent {
			same = fmt.Sprintf("methods %s, the floor's %s", s.Sent, f.Sent)
		}
		fmt.Fprintf(w, "- %s: %s vs %s = %.2fx (%+d µs), target <= %.1fx: %s; %s.\n",
			what, bench.US(s.P50), fl, r, (s.P50 - f.P50).Microseconds(), limit, verdict, same)
	}
	target("verify within 1.3x of one publish+confirm", opVerify, flPublish, 1.3)
	target("acquire at slot 1 (SkipVerifyAfterAcquire) within 1.3x of the spec's required methods", opAcq1Skip, flAcq1, 1.3)
	target("acquire at slot 1 (default) within 1.3x of the spec's required methods", opAcq1, flAcq1, 1.3)
	target("acquire at slot 1 (default) within 1.3x of its own methods (required + recommended verify)", opAcq1, flAcq1V, 1.3)
	fmt.Fprintf(w, `
The acquire target is judged on SkipVerifyAfterAcquire against F4: F4 is exactly
the methods the spec requires (steps 1-5 and 7), and SkipVerifyAfterAcquire sends
exactly those, so the ratio is what the library adds. The default also probes
A[1] after the declare, which the spec recommends but does not require; judged
against F4 it would be charged for a round trip the floor does not contain, so
it is shown against F4 for information and judged like-for-like against F5.
`)
	d, a1 := b.stats(flDeclare), b.stats(flAcq1)
	fmt.Fprintf(w, "Where acquire's time goes: the exclusive declare alone (F2) is %s of F4's %s p50 (%.0f%%); each probe is about %s (F1).\n",
		bench.US(d.P50), bench.US(a1.P50), 100*bench.Ratio(d.P50, a1.P50), bench.US(b.stats(flPublish).P50))
}
