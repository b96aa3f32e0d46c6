package amqprun

import (
	"context"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"github.com/lockprover/lockprover/model/amqplocks/broker"

	"github.com/lockprover/lockprover/model"
)

// variants are correct implementations written differently from the
// reference's defaults: the checker must judge them by the spec, not by
// the reference's habits.
var variants = []string{
	"lazy_connect",
	"channels=per-purpose",
	"scan_start=random",
	"reconnect",
	"plain_failure",
	"tidy_verify",
	"lazy_connect,channels=per-purpose,reconnect,plain_failure,scan_start=random,tidy_verify",
}

// Every correct variant holds every property on the simulator, with every
// fault, for both lock kinds.
func TestCorrectVariantsHold(t *testing.T) {
	for _, spec := range variants {
		for _, kind := range []string{"semaphore", "mutex"} {
			t.Run(kind+"/"+spec, func(t *testing.T) {
				t.Parallel()
				o, err := ParseOptions(Options{}, spec)
				if err != nil {
					t.Fatal(err)
				}
				out, err := prover.Search{Config: prover.Config{Subject: Config{Kind: kind, Options: o}}, Seed: 20261122, Plans: 400}.Run()
				if err != nil {
					t.Fatal(err)
				}
				if out.Found != nil {
					t.Fatalf("%s", out.Found.Summary())
				}
			})
		}
	}
}

// cheapAcquire runs p and returns its cheap-acquire verdict.
func cheapVerdict(t *testing.T, p *Plan, prop string) verdict.Verdict {
	t.Helper()
	res, err := Simulator{}.Run(context.Background(), p, Reference)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range prover.Judge(res, model.Options{}).Verdicts {
		if v.Property == prop {
			return v
		}
	}
	t.Fatalf("no %s verdict", prop)
	return verdict.Verdict{}
}

// The first connection and the channels a client opens for its purposes
// are free wherever the implementation opens them; the acquire that opens
// them is judged and passes.
func TestLazySetupIsFree(t *testing.T) {
	for _, spec := range []string{"lazy_connect", "lazy_connect,channels=per-purpose", "channels=per-purpose"} {
		o, err := ParseOptions(Options{}, spec)
		if err != nil {
			t.Fatal(err)
		}
		p := &Plan{Version: PlanVersion, Kind: "semaphore", Lock: "lp", Slots: 2, Options: o, Admins: [][]Step{{}},
			Clients: [][]Step{{{Op: "acquire"}, {Op: "verify"}, {Op: "release"}, {Op: "acquire"}, {Op: "verify"}}}}
		for _, prop := range []string{amqpcheck.CheapAcquire, amqpcheck.CheapVerify} {
			if v := cheapVerdict(t, p, prop); v.Status != verdict.Pass || v.Judged < 2 {
				t.Errorf("%s: %s %s (%d judged) %s", spec, prop, v.Status, v.Judged, v.Detail)
			}
		}
	}
}

// The ledger charges what the spec calls waste and nothing else.
func TestLedger(t *testing.T) {
	tallyOf := func(c broker.Cost) *tally {
		var x tally
		x.set(c)
		return &x
	}
	cost := func(conns, chans int, methods ...string) broker.Cost {
		c := broker.Cost{Methods: map[string]int{}, Connections: conns, Channels: chans}
		for _, m := range methods {
			c.Methods[m]++
		}
		return c
	}
	handshake := []string{"connection.start-ok", "connection.tune-ok", "connection.open"}
	sum := func(cs ...broker.Cost) broker.Cost {
		out := broker.Cost{Methods: map[string]int{}}
		for _, c := range cs {
			out.Connections += c.Connections
			out.Channels += c.Channels
			for m, n := range c.Methods {
				out.Methods[m] += n
			}
		}
		return out
	}
	connect := cost(1, 1, append(handshake, "channel.open", "confirm.select")...)
	probe := cost(0, 0, "basic.publish")
	for _, tc := range []struct {
		name  string
		steps func(l *ledger) (broker.Cost, string) // its absorbs and charges take tallyOf's
		waste string                                // "" for none
		conns int                                   // connections charged
		chans int                                   // channels charged
	}{
		{"the first connection at an operation", func(l *ledger) (broker.Cost, string) {
			return l.charge(tallyOf(sum(connect, probe)))
		}, "", 0, 0},
		{"the first connection at init, then an operation", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			return l.charge(tallyOf(sum(connect, probe)))
		}, "", 0, 0},
		{"a second connection with no fault", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			return l.charge(tallyOf(sum(connect, connect, probe)))
		}, "opened a connection though it had one", 1, 0},
		{"a second connection after a fault", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			l.cut()
			return l.charge(tallyOf(sum(connect, connect, probe)))
		}, "", 0, 0},
		{"a second connection after the broker closed the first", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(sum(connect, cost(0, 0, "connection.close-ok"))))
			return l.charge(tallyOf(sum(connect, connect, cost(0, 0, "connection.close-ok"), probe)))
		}, "", 0, 0},
		{"attempts that never reached connection.open, then a connection, after one fault", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			l.cut()
			attempts := cost(2, 0, "connection.start-ok")
			return l.charge(tallyOf(sum(connect, attempts, connect, probe)))
		}, "", 0, 0},
		// A reconnect begun while idle: the dial between operations, its
		// handshake's connection.open inside the next one (the Python
		// example, pika's connection made again after a fault while its
		// client waited for its next request).
		{"a reconnect after a fault, dialled while idle, opened in the next operation", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			l.cut()
			l.absorb(tallyOf(sum(connect, cost(1, 0, "connection.start-ok"))))
			return l.charge(tallyOf(sum(connect, connect, probe)))
		}, "", 0, 0},
		{"a reconnect with no fault, dialled while idle, opened in the next operation", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			l.absorb(tallyOf(sum(connect, cost(1, 0, "connection.start-ok"))))
			return l.charge(tallyOf(sum(connect, connect, probe)))
		}, "opened a connection though it had one", 1, 0},
		{"a dial refused while idle, then an operation on the connection it had", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			l.absorb(tallyOf(sum(connect, cost(1, 0))))
			return l.charge(tallyOf(sum(connect, cost(1, 0), probe)))
		}, "", 0, 0},
		{"a channel per purpose", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			return l.charge(tallyOf(sum(connect, cost(0, 2, "channel.open", "channel.open", "confirm.select"))))
		}, "", 0, 0},
		{"a channel reopened after closing one", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			return l.charge(tallyOf(sum(connect, cost(0, 1, "channel.close", "channel.open", "confirm.select"))))
		}, "reopened a channel after closing one itself", 0, 1},
		{"a channel closed in one operation, another opened in the next", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			after := sum(connect, cost(0, 0, "channel.close"))
			l.charge(tallyOf(after))
			return l.charge(tallyOf(sum(after, cost(0, 1, "channel.open"))))
		}, "reopened a channel after closing one itself", 0, 1},
		{"a channel the broker closed, reopened at once", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			return l.charge(tallyOf(sum(connect, cost(0, 1, "channel.close-ok", "channel.open", "confirm.select"))))
		}, "", 0, 0},
		{"a channel the broker closed, reopened at the next operation", func(l *ledger) (broker.Cost, string) {
			l.absorb(tallyOf(connect))
			after := sum(connect, cost(0, 0, "channel.close-ok"))
			l.charge(tallyOf(after))
			return l.charge(tallyOf(sum(after, cost(0, 1, "channel.open", "confirm.select"))))
		}, "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, waste := tc.steps(&ledger{})
			if tc.waste == "" && waste != "" || !strings.Contains(waste, tc.waste) {
				t.Errorf("waste %q, want %q", waste, tc.waste)
			}
			if c.Connections != tc.conns || c.Channels != tc.chans {
				t.Errorf("charged %d connections and %d channels, want %d and %d (%v)", c.Connections, c.Channels, tc.conns, tc.chans, c)
			}
			for _, m := range append(handshake, "channel.open", "confirm.select") {
				if n := c.Methods[m]; n > tc.conns+tc.chans {
					t.Errorf("charged %d %s for its free setup (%v)", n, m, c)
				}
			}
		})
	}
}

// What the ledger charges comes out by name, methods the simulator does
// not know (a real broker's proxy counts whatever is sent) among them.
func TestLedgerChargesByName(t *testing.T) {
	var l ledger
	var now tally
	now.set(broker.Cost{Methods: map[string]int{"connection.start-ok": 1, "connection.tune-ok": 1, "connection.open": 1, "channel.open": 1, "basic.qos": 2}, Connections: 1, Channels: 1})
	l.absorb(&now)
	now.set(broker.Cost{Methods: map[string]int{"connection.start-ok": 1, "connection.tune-ok": 1, "connection.open": 1, "channel.open": 1, "basic.qos": 3, "basic.publish": 1, "exchange.declare": 1}, Connections: 1, Channels: 1})
	c, waste := l.charge(&now)
	if want := "basic.publish=1 basic.qos=1 exchange.declare=1 channels=0 connections=0"; c.String() != want || waste != "" {
		t.Errorf("charged %v (waste %q), want %s", c, waste, want)
	}
}

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions(Options{}, "lazy_connect, channels=per-purpose,overshoot=2,reconnect=false")
	if err != nil {
		t.Fatal(err)
	}
	if !o.LazyConnect || o.Channels != "per-purpose" || o.Overshoot != 2 || o.Reconnect {
		t.Fatalf("%+v", o)
	}
	if got := o.String(); got != "overshoot=2,lazy_connect,channels=per-purpose" {
		t.Errorf("String() = %q", got)
	}
	for spec, want := range map[string]string{
		"lazy":                      `no option "lazy"`,
		"overshoot=two":             "overshoot: want a whole number",
		"reconnect=maybe":           "reconnect: want true or false",
		"channels":                  "channels: needs a value",
		"channels=many":             "channels: want one or per-purpose",
		"scan_start=middle":         "scan_start: want first",
		"Lazy_Connect":              `no option "Lazy_Connect"`,
		"lazy_connect,,overshoot=1": `no option ""`,
	} {
		if _, err := ParseOptions(Options{}, spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", spec, err, want)
		}
	}
}
