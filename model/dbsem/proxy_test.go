package dbsem

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy relays MySQL connections (plain text: the test DSN has no TLS and no
// compression) and can lose the reply to a COMMIT: it passes the COMMIT on,
// waits for the server's answer, which means the transaction committed, and
// then closes both sides instead of relaying it, as a network failure at
// the worst moment would.
type proxy struct {
	ln     net.Listener
	target string
	drops  atomic.Int32 // COMMIT replies still to lose
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func startProxy(t testing.TB) *proxy {
	t.Helper()
	if noDB != nil {
		t.Skipf("no MariaDB: %v", noDB)
	}
	target := testCfg.Addr
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// dropCommitReplies makes the proxy lose the replies to the next n COMMITs.
func (p *proxy) dropCommitReplies(n int) { p.drops.Store(int32(n)) }

func (p *proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		var lose atomic.Bool
		p.wg.Go(func() { p.toServer(client, server, &lose) })
		p.wg.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && lose.Load() {
					break // the COMMIT's reply: lose it
				}
				if n > 0 {
					if _, err := client.Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			client.Close()
			server.Close()
		})
	}
}

// toServer relays the client's packets one by one, watching for COMMIT.
func (p *proxy) toServer(client, server net.Conn, lose *atomic.Bool) {
	defer server.Close()
	commit := append([]byte{3}, "COMMIT"...) // COM_QUERY "COMMIT"
	head := make([]byte, 4)
	for {
		if _, err := io.ReadFull(client, head); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(append(head[:3:3], 0)))
		body := make([]byte, n)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		if bytes.EqualFold(body, commit) && p.drops.Load() > 0 && p.drops.Add(-1) >= 0 {
			lose.Store(true)
		}
		if _, err := server.Write(append(head, body...)); err != nil {
			return
		}
	}
}
