package lease_test

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	_ "github.com/lockprover/lockprover/model/amqpcheck" // the mutex kind Jepsen's histories hold
	"github.com/lockprover/lockprover/model/lease"
)

// TestAsLease checks the lease lens: tokens per acquire, releases naming
// the last one, the ttl asked for, and a history the reader accepts.
func TestAsLease(t *testing.T) {
	in := "{:type :invoke, :f :acquire, :process 0, :time 1}\n{:type :ok, :f :acquire, :process 0, :time 2}\n{:type :invoke, :f :release, :process 0, :time 3}\n{:type :info, :f :release, :process 0, :time 4}\n{:type :invoke, :f :release, :process 1, :time 5}\n{:type :fail, :f :release, :process 1, :time 6}\n"
	events, _, err := histories.ReadEDN(strings.NewReader(in), "h.edn")
	if err != nil {
		t.Fatal(err)
	}
	lens := lease.AsLease(events, 500)
	var b strings.Builder
	if err := histories.Write(&b, lens); err != nil {
		t.Fatal(err)
	}
	if _, err := histories.Read(strings.NewReader(b.String()), "lens"); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	want := `{"index":0,"time":1,"process":"p0","type":"invoke","f":"acquire","lock":"lock","kind":"lease","value":{"max":1,"ttl_ms":500}}
{"index":1,"time":2,"process":"p0","type":"ok","f":"acquire","lock":"lock","kind":"lease","value":{"token":"p0/1"}}
{"index":2,"time":3,"process":"p0","type":"invoke","f":"release","lock":"lock","kind":"lease","value":{"token":"p0/1"}}
{"index":3,"time":4,"process":"p0","type":"info","f":"release","lock":"lock","kind":"lease"}
{"index":4,"time":5,"process":"p1","type":"invoke","f":"release","lock":"lock","kind":"lease","value":{"token":"p1/0"}}
{"index":5,"time":6,"process":"p1","type":"fail","f":"release","lock":"lock","kind":"lease"}
`
	if b.String() != want {
		t.Errorf("got\n%swant\n%s", b.String(), want)
	}
	if events[0].Kind != histories.Mutex {
		t.Error("AsLease modified its input")
	}
}
