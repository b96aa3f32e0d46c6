package histories_test

import (
	"bytes"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"math/rand/v2"
	"strconv"
	"testing"
)

// generate returns a valid history of n events or a few more, with clients
// on several locks of both kinds, admin operations and faults, drawn from a
// fixed seed.
func generate(n int) []histories.Event {
	rng := rand.New(rand.NewPCG(1, 2))
	var now int64
	r := histories.NewRecorder(func() int64 { now += rng.Int64N(1000); return now })

	type client struct {
		name, lock, kind string
		pending          *histories.Event // the invoke in flight, if any
		slot             int              // held slot, 0 if none
	}
	var clients []*client
	for i := range 40 {
		c := &client{name: "c" + strconv.Itoa(i+1), lock: "sem-" + strconv.Itoa(i%4)}
		if i%4 == 3 {
			c.lock, c.kind = "mutex-3", histories.Mutex
		}
		clients = append(clients, c)
	}
	admin := &client{name: "admin", lock: "sem-0"}
	nem := &client{name: "nemesis"}
	faults := []string{"kill", "pause", "resume", "partition", "heal", "force-close", "drop-reply", "restart-broker"}

	count := 0 // the events added: Events copies them
	add := func(e histories.Event) histories.Event { count++; return r.Add(e) }
	for count < n {
		switch k := rng.IntN(100); {
		case k < 2: // "nemesis"
			if nem.pending == nil {
				f := faults[rng.IntN(len(faults))]
				var v histories.Value
				if f != "restart-broker" {
					v = &histories.Fault{Process: clients[rng.IntN(len(clients))].name}
				}
				e := add(histories.Event{Process: "nemesis", Type: histories.Invoke, F: f, Value: v})
				nem.pending = &e
			} else {
				e := *nem.pending
				e.Type = histories.Info
				add(e)
				nem.pending = nil
			}
		case k < 6: // admin
			if admin.pending == nil {
				e := histories.Event{Process: admin.name, Type: histories.Invoke, Lock: admin.lock}
				switch rng.IntN(3) {
				case 0:
					e.F, e.Value = "change", &amqpcheck.Value{Delta: histories.Int([]int{-2, -1, 1, 2}[rng.IntN(4)])}
				case 1:
					e.F = "count"
				default:
					e.F, e.Value = "wait", &amqpcheck.Value{Slot: histories.Int(1 + rng.IntN(3))}
				}
				e = add(e)
				admin.pending = &e
			} else {
				e := *admin.pending
				e.Type, e.Value = histories.Ok, nil
				switch e.F {
				case "change":
					e.Value = &amqpcheck.Value{From: histories.Int(3), To: histories.Int(max(0, 3+*amqpcheck.ValueOf(admin.pending).Delta))}
				case "count":
					e.Value = &amqpcheck.Value{Slots: histories.Int(3)}
				}
				add(e)
				admin.pending = nil
			}
		default: // a client
			c := clients[rng.IntN(len(clients))]
			if c.pending == nil {
				e := histories.Event{Process: c.name, Type: histories.Invoke, Lock: c.lock, Kind: c.kind}
				switch {
				case c.slot == 0:
					e.F = "acquire"
				case rng.IntN(3) > 0:
					e.F = "verify"
				default:
					e.F = "release"
				}
				if e.F != "acquire" && c.kind != histories.Mutex {
					e.Value = &amqpcheck.Value{Slot: histories.Int(c.slot)}
				}
				e = add(e)
				c.pending = &e
				continue
			}
			e := *c.pending
			e.Value = nil
			switch roll := rng.IntN(10); {
			case roll == 0:
				e.Type = histories.Info
				if e.F == "acquire" {
					c.slot = 0
				}
			case e.F == "acquire" && roll < 4:
				v := &amqpcheck.Value{Reason: "full"}
				if c.kind == histories.Mutex {
					v.Reason = "held"
				}
				e.Type, e.Value = histories.Fail, v
			case e.F == "acquire":
				e.Type, c.slot = histories.Ok, 1+rng.IntN(3)
				if c.kind != histories.Mutex {
					e.Value = &amqpcheck.Value{Slot: histories.Int(c.slot)}
				}
			case e.F == "verify":
				e.Type, e.Value = histories.Ok, &amqpcheck.Value{Held: histories.Bool(roll < 8)}
			default:
				e.Type, c.slot = histories.Ok, 0
			}
			add(e)
			c.pending = nil
		}
	}
	return r.Events()
}

// BenchmarkRead reads a history of 100k events.
func BenchmarkRead(b *testing.B) {
	var buf bytes.Buffer
	if err := histories.Write(&buf, generate(100_000)); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := histories.Read(bytes.NewReader(data), "bench.jsonl"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite writes a history of 100k events.
func BenchmarkWrite(b *testing.B) {
	events := generate(100_000)
	var buf bytes.Buffer
	if err := histories.Write(&buf, events); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := histories.Write(&buf, events); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGenerate checks that the benchmark's history is valid, so that the
// benchmark measures the whole of Read.
func TestGenerate(t *testing.T) {
	events := generate(20_000)
	var buf bytes.Buffer
	if err := histories.Write(&buf, events); err != nil {
		t.Fatal(err)
	}
	got, err := histories.Read(&buf, "generated.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, e := range got {
		kinds[string(e.Type)+" "+e.F] = true
	}
	if len(kinds) < 20 {
		t.Errorf("generated history is too plain: %v", kinds)
	}
}
