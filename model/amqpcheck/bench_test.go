package amqpcheck

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// generate makes a linearizable semaphore history of about n operations by
// clients clients on slots slots: each operation takes effect at its
// invoke, so its interval always holds its linearization point, and lasts
// 50 µs to 2 ms, so clients overlap. Clients acquire (the lowest free
// slot, or fail full), verify, release; an admin counts now and then.
func generate(n, clients, slots int, seed uint64) []histories.Event {
	rnd := rand.New(rand.NewPCG(seed, 1))
	type opT struct {
		proc      string
		f         string
		call, ret int64
		arg, res  *Value
		typ       histories.Type
	}
	var ops []opT
	holder := make([]int, slots+1)
	next := make([]int64, clients+2) // next free time per process (0: admin)
	held := make([]int, clients+2)   // slot held by a client, 0 none
	verified := make([]bool, clients+2)
	lat := func() int64 { return int64(50*time.Microsecond) + rnd.Int64N(int64(2*time.Millisecond)) }
	ops = append(ops, opT{proc: "admin", f: "create", call: 0, ret: 1000, arg: &Value{Slots: histories.Int(slots)}, typ: histories.Ok})
	next[0] = 1000
	// Each process invokes its next operation a little after its last one
	// returned; the earliest invoke goes next, so effects happen in time
	// order.
	for i := range next {
		next[i] += rnd.Int64N(int64(100 * time.Microsecond))
	}
	for len(ops) < n {
		p := 0
		for i := range next {
			if next[i] < next[p] {
				p = i
			}
		}
		t := next[p]
		o := opT{call: t, ret: t + lat(), typ: histories.Ok}
		switch {
		case p == 0:
			o.proc, o.f, o.res = "admin", "count", &Value{Slots: histories.Int(slots)}
			o.ret = t + lat()*5
		case held[p] == 0:
			o.proc, o.f = fmt.Sprintf("c%d", p), "acquire"
			o.typ, o.res = histories.Fail, &Value{Reason: "full"}
			for s := 1; s <= slots; s++ {
				if holder[s] == 0 {
					holder[s], held[p] = p, s
					o.typ, o.res = histories.Ok, &Value{Slot: histories.Int(s)}
					break
				}
			}
		case !verified[p]:
			o.proc, o.f = fmt.Sprintf("c%d", p), "verify"
			o.arg, o.res = &Value{Slot: histories.Int(held[p])}, &Value{Held: histories.Bool(true)}
			verified[p] = true
		default:
			o.proc, o.f = fmt.Sprintf("c%d", p), "release"
			o.arg = &Value{Slot: histories.Int(held[p])}
			holder[held[p]], held[p], verified[p] = 0, 0, false
		}
		next[p] = o.ret + rnd.Int64N(int64(100*time.Microsecond))
		ops = append(ops, o)
	}
	type ev struct {
		t   int64
		seq int
		e   histories.Event
	}
	var evs []ev
	for i, o := range ops {
		evs = append(evs, ev{o.call, 2 * i, histories.Event{Time: o.call, Process: o.proc, Type: histories.Invoke, F: o.f, Lock: "sem", Value: o.arg}})
		evs = append(evs, ev{o.ret, 2*i + 1, histories.Event{Time: o.ret, Process: o.proc, Type: o.typ, F: o.f, Lock: "sem", Value: o.res}})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].seq < evs[j].seq
	})
	h := make([]histories.Event, len(evs))
	for i, e := range evs {
		h[i] = e.e
		h[i].Index = i
	}
	return h
}

func TestGeneratedHistoriesHold(t *testing.T) {
	for _, clients := range []int{8, 32} {
		h := generate(2000, clients, 16, 1)
		r := model.Check(h, model.Options{Timeout: time.Minute})
		for _, v := range r.Verdicts {
			if v.Status == verdict.Fail || v.Status == verdict.Inconclusive {
				t.Errorf("%d clients: %s %v: %s", clients, v.Property, v.Status, v.Detail)
			}
		}
	}
}

// BenchmarkCheck checks generated histories of 1k, 10k and 100k operations
// with 8, 16 and 32 clients on 16 slots, with the partitioned (standard)
// and the strict model.
func BenchmarkCheck(b *testing.B) {
	for _, m := range []string{"standard", "strict"} {
		for _, n := range []int{1000, 10000, 100000} {
			for _, clients := range []int{8, 16, 32} {
				h := generate(n, clients, 16, 1)
				b.Run(fmt.Sprintf("%s/ops=%d/clients=%d", m, n, clients), func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						r := model.Check(h, model.Options{Family: []any{Options{Strict: m == "strict"}}, Timeout: 2 * time.Minute})
						if s := r.Status(); s != verdict.Pass {
							b.Fatalf("generated history: %v", s)
						}
					}
				})
			}
		}
	}
}
