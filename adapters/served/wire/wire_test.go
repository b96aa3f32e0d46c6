package wire_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/lockprover/lockprover/adapters/served/wire"
)

// A port follows its server: closed, a dial is refused before any byte
// (ECONNREFUSED, as from a server that is down); opened again, at the
// same address, a dial is taken by what accept serves.
func TestAPortFollowsItsServer(t *testing.T) {
	ports, err := wire.Listen("c1", []string{"n1", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	defer wire.Close(ports)
	pt := ports[1]
	if pt.Key != "n2" || pt.URL("amqp://guest:guest@") != "amqp://guest:guest@"+pt.Addr+"/" {
		t.Fatalf("port %s at %s, URL %s", pt.Key, pt.Addr, pt.URL("amqp://guest:guest@"))
	}
	if err := pt.Follow(false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", pt.Addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a dial to a closed port: %v, want it refused", err)
	}
	accepted := make(chan struct{})
	if err := pt.Follow(true, func(ln net.Listener) {
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
				close(accepted)
			}
		}()
	}); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", pt.Addr)
	if err != nil {
		t.Fatalf("a dial to the port opened again: %v", err)
	}
	c.Close()
	<-accepted
}

// A Record keeps each process's steps in order, and what was unserved once.
func TestRecord(t *testing.T) {
	var r wire.Record
	r.Took("c1", "c1 open")
	r.Took("c2", "idle")
	r.Took("c1", "ready")
	r.Unserve("exchange.declare")
	r.Unserve("exchange.declare")
	r.Refuse("%s: %s", "c1", "a wrong vhost")
	if got := r.Log()["c1"]; !slices.Equal(got, []string{"c1 open", "ready"}) || r.Steps("c2") != 1 {
		t.Fatalf("log %v", r.Log())
	}
	script := map[string][]string{"c1": {"c1 open", "ready", "c1 gone"}, "c2": {"idle"}}
	if left := r.Left(script, "c1"); !slices.Equal(left, []string{"c1 gone"}) || r.Left(script, "c2") != nil {
		t.Fatalf("left to replay: c1 %v, c2 %v", left, r.Left(script, "c2"))
	}
	if !slices.Equal(r.Unserved(), []string{"exchange.declare"}) || !slices.Equal(r.Refused(), []string{"c1: a wrong vhost"}) || r.Diverged() != nil {
		t.Fatalf("unserved %v refused %v diverged %v", r.Unserved(), r.Refused(), r.Diverged())
	}
}

// Ended gives what a run recorded, and an error naming what it did not
// serve only where something was.
func TestEnded(t *testing.T) {
	var r wire.Record
	r.Took("c1", "ready")
	if log, _, _, err := r.Ended("sent %s"); err != nil || len(log["c1"]) != 1 {
		t.Fatalf("nothing unserved: log %v, %v", log, err)
	}
	r.Unserve("ZADD")
	r.Unserve("ZREM")
	r.Refuse("bad RESP")
	if _, refused, _, err := r.Ended("sent %s: run it on real servers"); err == nil || err.Error() != "sent ZADD, ZREM: run it on real servers" || len(refused) != 1 {
		t.Fatalf("unserved: %v, refused %v", err, refused)
	}
}

// A port's number is below the kernel's ephemeral range, so that no
// outgoing connection is given it while the port is closed (its server
// down): many connections made while it is closed leave it free to open
// again. (With a number the kernel picked for ":0", one of them could be
// given it.)
func TestAClosedPortIsNotGivenOut(t *testing.T) {
	ports, err := wire.Listen("c1", []string{""})
	if err != nil {
		t.Fatal(err)
	}
	defer wire.Close(ports)
	pt := ports[0]
	_, p, _ := net.SplitHostPort(pt.Addr)
	first := 32768 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &first)
	}
	if n, _ := strconv.Atoi(p); n >= first || n < 1024 {
		t.Fatalf("port %d: want one below the ephemeral range (from %d)", n, first)
	}
	if err := pt.Follow(false, nil); err != nil {
		t.Fatal(err)
	}
	peer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	go func() {
		for {
			c, err := peer.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for range 2000 {
		c, err := net.Dial("tcp", peer.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if err := pt.Follow(true, func(ln net.Listener) {}); err != nil {
		t.Fatalf("opened again after 2000 outgoing connections: %v", err)
	}
}
