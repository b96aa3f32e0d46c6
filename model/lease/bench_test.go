package lease_test

import (
	"fmt"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

// generate makes a correct history of n operations by clients on one lease
// lock of max 3 (ttl 1 s), served by a model lease server: each client
// acquires, refreshes twice and releases, over and over; operations take
// 1 ms each, one at a time, so every full acquire is judged.
func generate(n, clients int) []histories.Event {
	const ttl = 1000
	type client struct {
		token string
		step  int
		fence int
	}
	cs := make([]client, clients)
	leases := map[string]int64{} // token -> expiry (ms)
	var h []histories.Event
	now := int64(0)
	fence := 0
	add := func(proc string, typ histories.Type, f string, v *lease.Value) {
		h = append(h, histories.Event{Index: len(h), Time: now * 1e6, Process: proc, Type: typ, F: f, Lock: "k", Kind: histories.Lease, Value: v})
	}
	ops := 0
	for ops < n {
		for i := range cs {
			c := &cs[i]
			p := fmt.Sprintf("c%d", i+1)
			now++
			for tok, exp := range leases {
				if exp <= now {
					delete(leases, tok)
				}
			}
			switch c.step {
			case 0:
				add(p, histories.Invoke, "acquire", &lease.Value{Max: histories.Int(3), TTLMs: histories.Int(ttl)})
				now++
				if len(leases) < 3 {
					fence++
					c.token = fmt.Sprintf("t%d", fence)
					leases[c.token] = now + ttl
					add(p, histories.Ok, "acquire", &lease.Value{Token: c.token, Fence: histories.Int(fence)})
					c.step = 1
				} else {
					add(p, histories.Fail, "acquire", &lease.Value{Reason: histories.Full})
				}
			case 1, 2:
				add(p, histories.Invoke, "refresh", &lease.Value{Token: c.token, TTLMs: histories.Int(ttl)})
				now++
				leases[c.token] = now + ttl
				add(p, histories.Ok, "refresh", nil)
				c.step++
			case 3:
				add(p, histories.Invoke, "release", &lease.Value{Token: c.token})
				now++
				delete(leases, c.token)
				add(p, histories.Ok, "release", nil)
				c.step = 0
			}
			ops++
		}
	}
	return h
}

func TestGeneratedHistoryHolds(t *testing.T) {
	for _, v := range model.Check(generate(5000, 8), model.Options{}).Verdicts {
		if v.Status == verdict.Fail {
			t.Errorf("%s: %s", v.Property, v.Detail)
		}
	}
}

func BenchmarkLease(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		h := generate(n, 8)
		b.Run(fmt.Sprintf("ops=%d/clients=8/max=3", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := model.Check(h, model.Options{})
				if r.Status() == verdict.Fail {
					b.Fatal(r.Verdicts)
				}
			}
		})
	}
}
