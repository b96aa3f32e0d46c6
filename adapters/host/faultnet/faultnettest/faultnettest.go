// Package faultnettest helps the tests of the proxies built on package
// faultnet: that a partition holds what it must, and that a closed proxy
// leaves nothing running.
package faultnettest

import (
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// grace is how long a goroutine that has signalled its end may take to be
// gone.
const grace = 5 * time.Second

// NoGoroutines fails t if goroutines of a faultnet Proxy (its accept loop,
// its connections, their readers and writers) are still running after a
// grace period: once every proxy of the test binary is closed, there must
// be none.
func NoGoroutines(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(grace)
	for {
		g := goroutines()
		if len(g) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d proxy goroutines left after Close:\n%s", len(g), strings.Join(g, "\n\n"))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CloseAtEnd closes p when the test ends, failing t if Close fails or
// leaves goroutines behind (NoGoroutines).
func CloseAtEnd(t testing.TB, p io.Closer) {
	t.Helper()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		NoGoroutines(t)
	})
}

// Silent fails t at once if anything (a byte, an end of stream, a reset)
// arrives on c within 300 ms: what a partition must hold from who (the
// side c is) does not reach it.
func Silent(t testing.TB, c net.Conn, who string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.Read(make([]byte, 64))
	if ne, ok := err.(net.Error); n != 0 || !ok || !ne.Timeout() {
		t.Fatalf("%s got %d bytes, %v during the partition", who, n, err)
	}
	c.SetReadDeadline(time.Time{})
}

// goroutines returns the stacks of the goroutines faultnet started.
func goroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "adapters/host/faultnet.(*") {
			found = append(found, g)
		}
	}
	return found
}
