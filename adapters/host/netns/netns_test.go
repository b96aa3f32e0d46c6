package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func newLab(t *testing.T, names ...string) *Lab {
	t.Helper()
	if err := Preflight(); err != nil {
		t.Skipf("no network lab here: %v", err)
	}
	l, err := New(context.Background(), names...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		assertGone(t, l.ID)
	})
	return l
}

// assertGone fails unless no namespace and no link of the lab id is left.
func assertGone(t *testing.T, id string) {
	t.Helper()
	ns, _ := exec.Command("ip", "netns", "list").Output()
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	if strings.Contains(string(ns), id) || strings.Contains(string(links), id) {
		t.Errorf("lab %s left behind:\n%s\n%s", id, ns, links)
	}
}

// echo listens on host's address in its namespace and echoes each line
// back; it returns the address.
func echo(t *testing.T, l *Lab, host string, network string) string {
	t.Helper()
	h, err := l.Host(host)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(h.Addr.String(), "7000")
	err = l.Do(host, func() error {
		if network == "udp" {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return err
			}
			t.Cleanup(func() { pc.Close() })
			go func() {
				buf := make([]byte, 1500)
				for {
					n, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					pc.WriteTo(buf[:n], from)
				}
			}()
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					s := bufio.NewScanner(c)
					for s.Scan() {
						fmt.Fprintln(c, s.Text())
					}
				}()
			}
		}()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// dial connects from host (or Local) to addr within d.
func dial(l *Lab, from, network, addr string, d time.Duration) (net.Conn, error) {
	var c net.Conn
	err := l.Do(from, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, d)
		return err
	})
	return c, err
}

// roundTrip sends a line on c and waits up to d for it to come back.
func roundTrip(c net.Conn, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	if _, err := fmt.Fprintln(c, "ping"); err != nil {
		return err
	}
	buf := make([]byte, 16)
	_, err := c.Read(buf)
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A cut drops packets silently: a new connection and an established one
// both time out (never refused, never reset), the other hosts and Local
// still get through, and Restore lets the same connection carry on.
func TestCutIsSilent(t *testing.T) {
	l := newLab(t, "n1", "n2", "n3")
	addr := echo(t, l, "n2", "tcp")
	for _, from := range []string{"n1", "n3", Local} {
		c, err := dial(l, from, "tcp", addr, 3*time.Second)
		if err != nil {
			t.Fatalf("%s to n2 before any cut: %v", from, err)
		}
		c.Close()
	}
	est, err := dial(l, "n1", "tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	if err := roundTrip(est, 3*time.Second); err != nil {
		t.Fatalf("established n1 to n2 before the cut: %v", err)
	}

	if err := l.Cut(context.Background(), "n1", "n2"); err != nil {
		t.Fatal(err)
	}
	if err := l.Cut(context.Background(), "n2", "n1"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(l.Cuts(), " "); got != "n1->n2 n2->n1" {
		t.Errorf("Cuts() = %q", got)
	}
	if _, err := dial(l, "n1", "tcp", addr, time.Second); !isTimeout(err) {
		t.Errorf("n1 dialling n2 across the cut: %v, want a timeout (a silent drop)", err)
	}
	if err := roundTrip(est, time.Second); !isTimeout(err) {
		t.Errorf("the established connection across the cut: %v, want a timeout", err)
	}
	for _, from := range []string{"n3", Local} {
		if c, err := dial(l, from, "tcp", addr, 3*time.Second); err != nil {
			t.Errorf("%s to n2, which the cut does not concern: %v", from, err)
		} else {
			c.Close()
		}
	}

	if err := l.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(l.Cuts()) != 0 {
		t.Errorf("after Heal, Cuts() = %v", l.Cuts())
	}
	if err := roundTrip(est, 5*time.Second); err != nil {
		t.Errorf("the established connection after the heal: %v", err)
	}
}

// A cut is one direction: datagrams from n1 reach n2 while n2's to n1 are
// dropped, and Local can be cut off from a host like any host.
func TestCutOneWay(t *testing.T) {
	l := newLab(t, "n1", "n2")
	addr := echo(t, l, "n2", "udp")
	ctx := context.Background()
	if err := l.Cut(ctx, "n2", "n1"); err != nil {
		t.Fatal(err)
	}
	got := make(chan bool, 1)
	// n2's echo sends back what it got: the request crosses, the echo
	// does not. A second echo server on n1 tells that n1's packets leave.
	if err := l.Do("n1", func() error {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(l.hosts[0].Addr.String(), "0"))
		if err != nil {
			return err
		}
		go func() {
			defer pc.Close()
			pc.SetReadDeadline(time.Now().Add(time.Second))
			_, _, err := pc.ReadFrom(make([]byte, 16))
			got <- err == nil
		}()
		ua, _ := net.ResolveUDPAddr("udp", addr)
		_, err = pc.WriteTo([]byte("ping"), ua)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if <-got {
		t.Error("n2's echo reached n1 across the cut n2->n1")
	}
	if err := l.Restore(ctx, "n2", "n1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Cut(ctx, Local, "n2"); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(l, Local, "tcp", net.JoinHostPort(l.hosts[1].Addr.String(), "7001"), time.Second); !isTimeout(err) {
		t.Errorf("Local dialling n2 across the cut: %v, want a timeout", err)
	}
	if err := l.Restore(ctx, Local, "n2"); err != nil {
		t.Fatal(err)
	}
	// Nobody listens on 7001: now refused, at once.
	if _, err := dial(l, Local, "tcp", net.JoinHostPort(l.hosts[1].Addr.String(), "7001"), 3*time.Second); err == nil || isTimeout(err) {
		t.Errorf("Local dialling a closed port of n2 after the restore: %v, want refused", err)
	}
}

// Two labs at once take blocks of their own and both work, and a process
// run in a host's namespace sees only that host's address.
func TestLabsSideBySide(t *testing.T) {
	a := newLab(t, "n1")
	b := newLab(t, "n1")
	if a.Prefix().Overlaps(b.Prefix()) {
		t.Fatalf("labs %s and %s share addresses: %v, %v", a.ID, b.ID, a.Prefix(), b.Prefix())
	}
	for _, l := range []*Lab{a, b} {
		cmd, err := l.Command("n1", "ip", "-o", "-4", "addr", "show", "dev", "eth0")
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", l.ID, err, out)
		}
		if want := l.hosts[0].Addr.String() + "/24"; !strings.Contains(string(out), want) {
			t.Errorf("in %s's n1: %q, want %s", l.ID, out, want)
		}
	}
}

func TestBadHosts(t *testing.T) {
	for _, names := range [][]string{nil, {"local"}, {"router"}, {"N1"}, {"n1", "n1"}, {"a-b"}, make([]string, 16)} {
		if _, err := New(context.Background(), names...); err == nil {
			t.Errorf("New(%q) built a lab", names)
		}
	}
	l := newLab(t, "n1", "n2")
	ctx := context.Background()
	for _, c := range [][2]string{{"n1", "n9"}, {"n9", "n1"}, {"n1", "n1"}} {
		if err := l.Cut(ctx, c[0], c[1]); err == nil {
			t.Errorf("Cut(%s, %s) did not fail", c[0], c[1])
		}
	}
	if _, err := l.Command("n9", "true"); err == nil || !strings.Contains(err.Error(), `"n9"`) {
		t.Errorf("Command on n9: %v", err)
	}
}

// A lab whose run died (killed, no Close) is swept: by Sweep, and by the
// next lab to take its block.
func TestSweepDeadRun(t *testing.T) {
	if os.Getenv("LOCKPROVER_NETNS_ORPHAN") == "1" {
		l, err := New(context.Background(), "n1", "n2")
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(l.ID)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	if err := Preflight(); err != nil {
		t.Skipf("no network lab here: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepDeadRun$")
	cmd.Env = append(os.Environ(), "LOCKPROVER_NETNS_ORPHAN=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	id := strings.TrimSpace(line)
	cmd.Process.Kill()
	cmd.Wait()
	if !ourLink.MatchString(id) {
		t.Fatalf("the orphan said %q", id)
	}
	ns, _ := exec.Command("ip", "netns", "list").Output()
	if !strings.Contains(string(ns), id+"-n1") {
		t.Fatalf("the orphan's lab %s is not there to sweep:\n%s", id, ns)
	}
	n, err := Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Errorf("Sweep removed %d namespaces, want the orphan's 3 at least", n)
	}
	assertGone(t, id)
}

// No lab's block holds the bridge of the Docker engine .ci/docker starts
// (198.19.255.0/24), and every block stays inside 198.18.0.0/15.
func TestBlocksLeaveDockersBridge(t *testing.T) {
	bridge := netip.MustParseAddr("198.19.255.1")
	bench := netip.MustParsePrefix("198.18.0.0/15")
	for b := range blocks {
		p := (&Lab{block: b}).Prefix()
		if p.Contains(bridge) {
			t.Errorf("block %d (%v) holds Docker's bridge %v", b, p, bridge)
		}
		if !bench.Contains(p.Addr()) || !bench.Contains((&Lab{block: b}).subnet(15, 255)) {
			t.Errorf("block %d (%v) leaves 198.18.0.0/15", b, p)
		}
	}
}

// A veth the router's deletion took along is gone, whichever moment ip
// looked for it; any other failure to delete one is reported.
func TestLinkGone(t *testing.T) {
	for _, c := range []struct {
		msg  string
		gone bool
	}{
		{`ip link del lp055950: exit status 1: Cannot find device "lp055950"`, true},
		{"ip link del lp055950: exit status 2: RTNETLINK answers: No such device", true},
		{"ip link del lp055950: exit status 2: RTNETLINK answers: Operation not permitted", false},
	} {
		if got := linkGone(errors.New(c.msg)); got != c.gone {
			t.Errorf("%q: gone %v, want %v", c.msg, got, c.gone)
		}
	}
}
