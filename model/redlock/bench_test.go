package redlock

import (
	"fmt"
	"testing"
	"time"
)

// The cost of each operation against the floor of one round trip (PING)
// per server, on the shared private servers:
//
//	go test -run '^$' -bench . -benchtime 2000x ./model/redlock/

func BenchmarkPing(b *testing.B) {
	c := raw(b, shared(b)[0])
	for b.Loop() {
		if err := c.Ping(ctx(b)).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRedlock(b *testing.B) {
	addrs := shared(b)
	for _, n := range []int{1, 3} {
		r := newRedlock(b, addrs[:n], Options{Timeout: time.Second})
		k := key(b)
		b.Run(fmt.Sprintf("N=%d/acquire+release", n), func(b *testing.B) {
			for b.Loop() {
				l := acquire(b, r, k, 10*time.Second)
				if err := r.Release(ctx(b), l); err != nil {
					b.Fatal(err)
				}
			}
		})
		l := acquire(b, r, k, 10*time.Second)
		b.Run(fmt.Sprintf("N=%d/refresh", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := r.Refresh(ctx(b), l, 10*time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
		r.Release(ctx(b), l)
	}
}

func BenchmarkPriority(b *testing.B) {
	p := newPriority(b, shared(b)[:1], Options{})
	k := key(b)
	b.Run("acquire+release", func(b *testing.B) {
		for b.Loop() {
			l, err := p.Acquire(ctx(b), k, 10*time.Second, 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Release(ctx(b), l); err != nil {
				b.Fatal(err)
			}
		}
	})
	victim := newPriority(b, shared(b)[:1], Options{})
	b.Run("steal", func(b *testing.B) {
		for b.Loop() {
			v, err := victim.Acquire(ctx(b), k, 10*time.Second, 1)
			if err != nil {
				b.Fatal(err)
			}
			th, err := p.Acquire(ctx(b), k, 10*time.Second, 2)
			if err != nil {
				b.Fatal(err)
			}
			victim.Release(ctx(b), v)
			p.Release(ctx(b), th)
		}
	})
}
