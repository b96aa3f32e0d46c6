package rabbitmq_test

import (
	"context"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// The benchmarks compare one round trip through the adapter with the same
// round trip through amqp091-go directly; the difference is the adapter's
// overhead. "adapter" uses context.Background (no teardown guard),
// "adapter-deadline" a context with a deadline (the guarded path that lock
// code takes).

func rawConn(b *testing.B, url string) (*amqp.Connection, *amqp.Channel) {
	b.Helper()
	c, err := amqp.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		b.Fatal(err)
	}
	return c, ch
}

func BenchmarkPassiveDeclare(b *testing.B) {
	e := newEnv(b)
	q := e.queue("q")
	if _, err := e.channel(e.dial()).Declare(ctxT(b), q, broker.DeclareOptions{}); err != nil {
		b.Fatal(err)
	}

	b.Run("raw", func(b *testing.B) {
		_, ch := rawConn(b, e.url)
		for b.Loop() {
			if _, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	adapter := func(b *testing.B, ctx context.Context) {
		ch := e.channel(e.dial())
		for b.Loop() {
			if _, err := ch.Declare(ctx, q, broker.DeclareOptions{Passive: true}); err != nil {
				b.Fatal(err)
			}
		}
	}
	withAndWithoutDeadline(b, adapter)
}

func BenchmarkMandatoryPublishConfirm(b *testing.B) {
	e := newEnv(b)
	q := e.queue("q")
	// Routed, acked and dropped at once: the queue never grows.
	if _, err := e.channel(e.dial()).Declare(ctxT(b), q, broker.DeclareOptions{Args: map[string]any{"x-max-length": 0}}); err != nil {
		b.Fatal(err)
	}
	body := []byte("lock")

	b.Run("raw", func(b *testing.B) {
		_, ch := rawConn(b, e.url)
		returns := ch.NotifyReturn(make(chan amqp.Return, 8))
		if err := ch.Confirm(false); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			dc, err := ch.PublishWithDeferredConfirm("", q, true, false, amqp.Publishing{Body: body})
			if err != nil {
				b.Fatal(err)
			}
			if !dc.Wait() {
				b.Fatal("nack")
			}
			select {
			case <-returns:
				b.Fatal("returned")
			default:
			}
		}
	})
	adapter := func(b *testing.B, ctx context.Context) {
		ch := e.confirmChannel(e.dial())
		for b.Loop() {
			c, err := ch.Publish(ctx, broker.Publishing{Key: q, Mandatory: true, Body: body})
			if err != nil {
				b.Fatal(err)
			}
			if !c.Acked || c.Returned {
				b.Fatalf("%+v", c)
			}
		}
	}
	withAndWithoutDeadline(b, adapter)
}

// BenchmarkPaired alternates one raw amqp091-go round trip and one adapter
// round trip (with a deadline context) per iteration, so that both see the
// same load, and reports the medians and the median of the paired
// differences: a figure that survives a noisy, shared machine better than
// comparing separate benchmarks.
func BenchmarkPaired(b *testing.B) {
	e := newEnv(b)
	q := e.queue("q")
	if _, err := e.channel(e.dial()).Declare(ctxT(b), q, broker.DeclareOptions{Args: map[string]any{"x-max-length": 0}}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	body := []byte("lock")

	cases := []struct {
		name    string
		confirm bool
		raw     func(ch *amqp.Channel, returns chan amqp.Return) error
		adapter func(ch broker.Channel) error
	}{
		{"passive-declare", false,
			func(ch *amqp.Channel, _ chan amqp.Return) error {
				_, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
				return err
			},
			func(ch broker.Channel) error {
				_, err := ch.Declare(ctx, q, broker.DeclareOptions{Passive: true})
				return err
			}},
		{"mandatory-publish-confirm", true,
			func(ch *amqp.Channel, returns chan amqp.Return) error {
				dc, err := ch.PublishWithDeferredConfirm("", q, true, false, amqp.Publishing{Body: body})
				if err != nil {
					return err
				}
				if !dc.Wait() {
					b.Fatal("nack")
				}
				select {
				case <-returns:
					b.Fatal("returned")
				default:
				}
				return nil
			},
			func(ch broker.Channel) error {
				c, err := ch.Publish(ctx, broker.Publishing{Key: q, Mandatory: true, Body: body})
				if err == nil && (!c.Acked || c.Returned) {
					b.Fatalf("%+v", c)
				}
				return err
			}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			_, rch := rawConn(b, e.url)
			returns := rch.NotifyReturn(make(chan amqp.Return, 8))
			ach := e.channel(e.dial())
			if tc.confirm {
				if err := rch.Confirm(false); err != nil {
					b.Fatal(err)
				}
				if err := ach.Confirm(ctx); err != nil {
					b.Fatal(err)
				}
			}
			var raw, adp, diff []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if err := tc.raw(rch, returns); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := tc.adapter(ach); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				raw = append(raw, t1.Sub(t0))
				adp = append(adp, t2.Sub(t1))
				diff = append(diff, t2.Sub(t1)-t1.Sub(t0))
			}
			b.ReportMetric(float64(median(raw)), "raw-p50-ns")
			b.ReportMetric(float64(median(adp)), "adapter-p50-ns")
			b.ReportMetric(float64(median(diff)), "overhead-p50-ns")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// withAndWithoutDeadline runs an adapter benchmark with a background
// context and with one that has a deadline, which the adapter must watch.
func withAndWithoutDeadline(b *testing.B, adapter func(*testing.B, context.Context)) {
	b.Run("adapter", func(b *testing.B) { adapter(b, context.Background()) })
	b.Run("adapter-deadline", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		adapter(b, ctx)
	})
}
