package amqpproxy

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
)

// feed feeds a session what one side of a connection sent, as its stream
// would.
func feed(t *testing.T, s *session, dir int, frames ...[]byte) {
	t.Helper()
	b := cat(frames...)
	st := newStream(dir, s, newCounters(), func(methodID) bool { return false }, b)
	st.n = len(b)
	if _, _, err := st.process(); err != nil {
		t.Fatal(err)
	}
}

func declare(ch uint16, q string, exclusive bool) []byte {
	bits := byte(0)
	if exclusive {
		bits = 1 << 2
	}
	return method(ch, "queue.declare", short(0), shortstr(q), octet(bits), emptyTable())
}

func closeFrame(code uint16, text string) []byte {
	return method(0, "connection.close", short(code), shortstr(text), short(0), short(0))
}

// ownStall is what an event says of the proxy's own process not running
// (ServerEvent.Stalled).
var ownStall = regexp.MustCompile(`, after lockprover's own process did not run for [0-9.]+[a-zµ]+`)

// What the proxy reports of a connection's end: a close the broker began
// (not one the client asked for), the broker's socket ending first (not
// when lockprover killed the connection), the client's socket ending
// first without a close (with how long the broker had been silent), and
// every queue.declare still waiting for its reply, exclusive or not, with
// who ended it.
func TestServerEvents(t *testing.T) {
	open1 := method(1, "channel.open", shortstr(""))
	for _, tc := range []struct {
		name           string
		client, broker [][]byte
		first          int // the direction whose source ends first
		killed         bool
		want           []string
		silent         time.Duration // since the broker's last byte, when the first source ends
	}{
		{"the broker closes", [][]byte{open1}, [][]byte{closeFrame(320, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'")}, toClient, false,
			[]string{"the broker closed the connection: 320 CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"}, 0},
		{"the client closes", [][]byte{open1, closeFrame(200, "Goodbye")}, [][]byte{method(0, "connection.close-ok")}, toClient, false, nil, 0},
		{"the broker's socket ends", [][]byte{open1}, nil, toClient, false,
			[]string{"the broker closed the connection's socket without a connection.close"}, 0},
		{"lockprover kills it", [][]byte{open1}, nil, toClient, true, nil, 0},
		{"the client's socket closes mid-declare", [][]byte{open1, declare(1, "lp-x-1-B", true)}, nil, toBroker, false,
			[]string{"the client closed the connection's socket without a connection.close, 1s after the broker's last byte on it and 1s after its own",
				"the connection ended (its socket closed) with an exclusive queue.declare of lp-x-1-B in flight"}, time.Second},
		{"the client's socket closes, the broker silent", [][]byte{open1}, nil, toBroker, false,
			[]string{"the client closed the connection's socket without a connection.close, 3s after the broker's last byte on it and 3s after its own"}, 3 * time.Second},
		{"the client's socket closes after its close", [][]byte{open1, closeFrame(200, "Goodbye")}, nil, toBroker, false, nil, 3 * time.Second},
		{"lockprover kills it, the broker silent", [][]byte{open1}, nil, toBroker, true, nil, 3 * time.Second},
		{"killed mid-declare", [][]byte{open1, declare(1, "lp-x-2-A", false)}, nil, toClient, true,
			[]string{"the connection ended (lockprover killed it) with a queue.declare of lp-x-2-A in flight"}, 0},
		{"the declare was answered", [][]byte{open1, declare(1, "q", true), closeFrame(200, "Goodbye")}, [][]byte{method(1, "channel.open-ok", long(0)), method(1, "queue.declare-ok", shortstr("q"), long(0), long(0))}, toBroker, false, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := newProxy(""), newSession()
			feed(t, s, toBroker, append([][]byte{protocolHeader}, tc.client...)...)
			feed(t, s, toClient, tc.broker...)
			s.heard.Store(time.Now().Add(-tc.silent).UnixNano())
			s.said.Store(time.Now().Add(-tc.silent).UnixNano())
			s.sourceEnded(tc.first)
			p.ended(s, tc.killed)
			var got []string
			for _, e := range p.ServerEvents() {
				// A stall of this test's own process (at load 42 it did
				// not run for 256 ms) is said too; it is the machine's.
				got = append(got, ownStall.ReplaceAllString(e.String(), ""))
				if time.Since(e.At) > time.Minute {
					t.Errorf("%s: at %v", e.What, e.At)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			// The trace says every end, judged or not, and who ended first.
			side := map[int]string{toBroker: "the client's side first", toClient: "the broker's side first"}[tc.first]
			tr := p.Trace()
			if len(tr) != 1 || !strings.Contains(tr[0].What, fmt.Sprintf("ended (killed by lockprover: %v): %s", tc.killed, side)) {
				t.Errorf("trace %+v does not say the connection ended, killed %v, %s", tr, tc.killed, side)
			}
			if strings.Contains(tc.name, "mid-declare") && (len(tr) != 1 || !strings.Contains(tr[0].What, "a queue.declare of lp-x-")) {
				t.Errorf("trace %+v does not name the declare in flight", tr)
			}
		})
	}
}

// On RabbitMQ: a connection killed while its exclusive declare is still
// on its way (a second of latency each way) is reported with the queue.
func TestDeclareInFlightOnRabbitMQ(t *testing.T) {
	p, u := startProxy(t)
	admin := direct(t)
	c := dial(t, u, 0)
	ch := channel(t, c)
	q := queueName(t)
	deleteAtEnd(t, admin, q)
	p.Delay(time.Second)
	go ch.QueueDeclare(q, false, false, true, false, nil)
	deadline := time.Now().Add(10 * time.Second)
	for p.Counts().Sent.Methods["queue.declare"] == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.Kill()
	waitClosed(t, c, 10*time.Second)
	deadline = time.Now().Add(10 * time.Second)
	for len(p.ServerEvents()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	evs := p.ServerEvents()
	if len(evs) != 1 || evs[0].What != DeclareInFlight || evs[0].Queue != q || !evs[0].Exclusive || !evs[0].Killed {
		t.Fatalf("events %+v, want one declare in flight of %s, exclusive, killed", evs, q)
	}
}

// On RabbitMQ: a client that ends its socket without a close is reported
// with the address it had on its connection to the proxy, the one its own
// read errors name ("read tcp CLIENT->PROXY: i/o timeout"), by which a
// verdict tells which of a process's connections an error was about.
func TestClientEndNamesTheClientOnRabbitMQ(t *testing.T) {
	p, u := startProxy(t)
	uu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", uu.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(protocolHeader); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 7)); err != nil { // connection.start's frame header
		t.Fatalf("no connection.start from the broker: %v", err)
	}
	client := c.LocalAddr().String()
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(p.ServerEvents()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	evs := p.ServerEvents()
	if len(evs) != 1 || evs[0].What != ClientEnd || evs[0].Client != client {
		t.Fatalf("events %+v, want one client end naming the client's %s", evs, client)
	}
	if tr := p.Trace(); len(tr) == 0 || !strings.Contains(tr[0].What, "from the client's "+client) {
		t.Errorf("trace %+v does not name the client's address at the opening", tr)
	}
}

// On RabbitMQ: a connection the broker closes itself (rabbitmqctl
// close_connection, as a forced close does) is reported with its code and
// reason; the client's own close is not.
func TestServerCloseOnRabbitMQ(t *testing.T) {
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		t.Skip("needs rabbitmqctl to close a connection from the broker's side")
	}
	p, u := startProxy(t)
	c := dial(t, u, 0)
	ctl := rabbitmq.NewCtl(nil, rabbitmq.VhostOf(u), false)
	defer ctl.Close()
	// Two plain rabbitmqctl commands: 16 s each were seen in CI.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	side := p.BrokerSide()
	if err := ctl.CloseConnectionsFrom(ctx, side, "lockprover test"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c, 10*time.Second)
	c2 := dial(t, u, 0)
	c2.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(p.ServerEvents()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the client's own close, if it were reported
	evs := p.ServerEvents()
	if len(evs) != 1 || evs[0].What != ServerClose || evs[0].Code != 320 || !strings.Contains(evs[0].Text, "lockprover test") {
		t.Fatalf("events %+v, want one server close 320 with the reason", evs)
	}
	if len(side) != 1 || evs[0].Local != side[0] {
		t.Errorf("the close names the connection %q, the broker knew it as %v", evs[0].Local, side)
	}
}

// A client's silence counts when it ended just before the client did: a
// process a loaded machine did not run may send a heartbeat as it wakes,
// then find its read deadline passed and close.
func TestClientSilence(t *testing.T) {
	s := newSession()
	start := time.Now()
	at := func(d time.Duration) { s.said.Store(start.Add(d).UnixNano()) }
	byteAt := func(d time.Duration) { s.lastByte(toBroker, start.Add(d).UnixNano()) }
	at(0)
	byteAt(400 * time.Millisecond)
	if got := s.clientSilence(start.Add(time.Second)); got != 600*time.Millisecond {
		t.Errorf("silent since its last byte: %v, want 600ms", got)
	}
	byteAt(3400 * time.Millisecond) // a 3s silence, then a heartbeat
	if got := s.clientSilence(start.Add(3410 * time.Millisecond)); got != 3*time.Second {
		t.Errorf("a heartbeat 10ms before its end, after 3s of silence: %v, want 3s", got)
	}
	if got := s.clientSilence(start.Add(7 * time.Second)); got != 3600*time.Millisecond {
		t.Errorf("the long silence ended long before: %v, want the 3.6s since its last byte", got)
	}
	byteAt(7 * time.Second)
	byteAt(7100 * time.Millisecond)
	if got := s.clientSilence(start.Add(7200 * time.Millisecond)); got != 3600*time.Millisecond {
		t.Errorf("talking again after a 3.6s silence: %v, want it (it ended 200ms before)", got)
	}
	if got := s.clientSilence(start.Add(11 * time.Second)); got != 3900*time.Millisecond {
		t.Errorf("%v, want 3.9s since its last byte", got)
	}
}
