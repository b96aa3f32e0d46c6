package rabbitmqsim_test

import (
	"testing"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// BenchmarkCall is the cost of one simulated broker call: a mandatory
// publish under confirms, scheduled among three processes.
func BenchmarkCall(b *testing.B) {
	w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(1)})
	for _, name := range []string{"a", "b", "c"} {
		w.Go(name, func(br broker.Broker) {
			c, _ := br.Dial(bg, broker.Config{})
			ch, _ := c.Channel(bg)
			ch.Confirm(bg)
			for i := 0; i < b.N/3+1; i++ {
				ch.Publish(bg, broker.Publishing{Key: "q", Mandatory: true})
			}
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := w.Run(); err != nil {
		b.Fatal(err)
	}
}
