package amqplocks_test

import (
	"testing"

	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// BenchmarkCycle is one acquire, verify and release of the reference
// semaphore on the simulator (4 slots, slot 1 taken by another client, so
// acquire lands on slot 2).
func BenchmarkCycle(b *testing.B) {
	w := rabbitmqsim.New(rabbitmqsim.Options{})
	w.Go("p", func(br broker.Broker) {
		admin, _ := amqplocks.Dial(bg, br, amqplocks.Options{})
		admin.Admin("sem").Create(bg, 4)
		other, _ := amqplocks.Dial(bg, br, amqplocks.Options{})
		other.Semaphore("sem").Acquire(bg)
		c, err := amqplocks.Dial(bg, br, amqplocks.Options{})
		if err != nil {
			b.Error(err)
			return
		}
		sem := c.Semaphore("sem")
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s, err := sem.Acquire(bg)
			if err != nil || s != 2 {
				b.Errorf("acquire = %d, %v", s, err)
				return
			}
			if err := sem.Verify(bg, s); err != nil {
				b.Error(err)
				return
			}
			if err := sem.Release(bg, s); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if err := w.Run(); err != nil {
		b.Fatal(err)
	}
}
