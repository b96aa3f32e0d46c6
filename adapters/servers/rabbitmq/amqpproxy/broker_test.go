package amqpproxy

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/host/faultnet/faultnettest"
)

// ListenURL listens in front of the broker a URL names and returns the URL
// through the proxy; BrokerAddr says where it forwards.
func TestListenURL(t *testing.T) {
	for in, want := range map[string]string{
		"amqp://u:p@broker.example:5673/v": "broker.example:5673",
		"amqp://u:p@broker.example/v":      "broker.example:5672",
		"amqp://u:p@[::1]/":                "[::1]:5672",
	} {
		if got, err := BrokerAddr(in); err != nil || got != want {
			t.Errorf("BrokerAddr(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	p, u, err := ListenURL("amqp://u:p%40ss@broker.example/%2f?heartbeat=5")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if want := "amqp://u:p%40ss@" + p.Addr() + "/%2f?heartbeat=5"; u != want {
		t.Errorf("URL through the proxy %q, want %q", u, want)
	}
	if got := p.fn.Upstream(); got != "broker.example:5672" {
		t.Errorf("the proxy forwards to %q", got)
	}
	for in, want := range map[string]string{
		"amqps://u:secret@broker.example:5671/": "scheme must be amqp",
		"amqp:///vhost":                         "no host",
		"::":                                    "broker URL",
	} {
		p, _, err := ListenURL(in)
		if err == nil {
			p.Close()
			t.Errorf("ListenURL(%s) accepted it", in)
			continue
		}
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("ListenURL(%s): %v, want %q and no password", in, err, want)
		}
	}
}

// A Set starts a name's proxy once, and Close closes them all.
func TestSet(t *testing.T) {
	s := NewSet("amqp://u:p@127.0.0.1:1/")
	if s.Get("a") != nil || len(s.All()) != 0 {
		t.Fatal("a new Set has proxies")
	}
	a, ua, err := s.For("a")
	if err != nil {
		t.Fatal(err)
	}
	if a2, ua2, err := s.For("a"); a2 != a || ua2 != ua || err != nil {
		t.Fatalf("For(a) again: %p %q %v, want %p %q", a2, ua2, err, a, ua)
	}
	b, ub, err := s.For("b")
	if err != nil || b == a || ub == ua {
		t.Fatalf("For(b): %p %q %v", b, ub, err)
	}
	if s.Get("a") != a || len(s.All()) != 2 {
		t.Fatalf("Get(a) = %p, All() = %d proxies", s.Get("a"), len(s.All()))
	}
	s.Close()
	if s.Get("a") != nil || len(s.All()) != 0 {
		t.Fatal("Close left proxies in the Set")
	}
	if !a.fn.Closed() {
		t.Fatal("Close did not close the proxies")
	}
	if _, _, err := NewSet("amqps://u:p@h/").For("a"); err == nil {
		t.Fatal("a Set in front of amqps started a proxy")
	}
	faultnettest.NoGoroutines(t)
}
