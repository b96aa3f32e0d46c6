package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
)

// listener serves each connection with serve on a local port.
func listener(t *testing.T, serve func(net.Conn)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return l.Addr().String()
}

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestPreflightSaysWhatIsWrong: each way a broker URL can be wrong is told
// apart, within seconds, and no message shows the password.
func TestPreflightSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	good := rabbitmqtest.URL(t)
	u, err := url.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(u *url.URL)) string {
		c := *u
		f(&c)
		return c.String()
	}
	http := listener(t, func(c net.Conn) {
		defer c.Close()
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
	})
	silent := listener(t, func(c net.Conn) { time.Sleep(10 * time.Second); c.Close() })
	for _, tc := range []struct {
		name, url, kind string
		timeout         time.Duration
	}{
		{"not a URL", "notaurl", rabbitmq.BadURL, 0},
		{"closed port", "amqp://guest:sekrit@" + closedPort(t) + "/", rabbitmq.Refused, 0},
		{"wrong password", with(func(u *url.URL) { u.User = url.UserPassword(u.User.Username(), "sekrit") }), rabbitmq.AuthFailed, 0},
		{"unknown user", with(func(u *url.URL) { u.User = url.UserPassword("lp-nobody", "sekrit") }), rabbitmq.AuthFailed, 0},
		{"wrong vhost", with(func(u *url.URL) { u.Path = "/lp-no-such-vhost" }), rabbitmq.NoVhost, 0},
		{"not AMQP", "amqp://guest:sekrit@" + http + "/", rabbitmq.NotAMQP, 0},
		{"TLS to a plain port", with(func(u *url.URL) { u.Scheme = "amqps" }), rabbitmq.TLSFailed, 0},
		{"silent server", "amqp://guest:sekrit@" + silent + "/", rabbitmq.TimedOut, 500 * time.Millisecond},
		{"unknown host", "amqp://guest:sekrit@lp-no-such-host.invalid:5672/", rabbitmq.NoHost, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := rabbitmq.Preflight(context.Background(), tc.url, tc.timeout)
			took := time.Since(start)
			var pe *rabbitmq.PreflightError
			if !errors.As(err, &pe) {
				t.Fatalf("Preflight(%s) = %v, want a *PreflightError of kind %q", rabbitmq.RedactURL(tc.url), err, tc.kind)
			}
			if pe.Kind != tc.kind {
				t.Errorf("kind %q, want %q: %v", pe.Kind, tc.kind, err)
			}
			if strings.Contains(err.Error(), "sekrit") {
				t.Errorf("the message shows the password: %v", err)
			}
			if took > 5*time.Second {
				t.Errorf("took %v, want < 5 s", took)
			}
			t.Logf("%v: %v", took.Round(time.Millisecond), err)
		})
	}
	t.Run("vhost access refused", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("rabbitmqctl"); err != nil {
			t.Skip("needs rabbitmqctl to make a vhost guest may not use")
		}
		vhost := fmt.Sprintf("lp-preflight-%d", time.Now().UnixNano())
		if out, err := exec.Command("rabbitmqctl", "-q", "add_vhost", vhost).CombinedOutput(); err != nil {
			t.Skipf("rabbitmqctl add_vhost: %v: %s", err, out)
		}
		defer exec.Command("rabbitmqctl", "-q", "delete_vhost", vhost).Run()
		err := rabbitmq.Preflight(context.Background(), with(func(u *url.URL) { u.Path = "/" + vhost }), 0)
		var pe *rabbitmq.PreflightError
		if !errors.As(err, &pe) || pe.Kind != rabbitmq.VhostDenied {
			t.Errorf("got %v, want kind %q", err, rabbitmq.VhostDenied)
		}
		t.Log(err)
	})
	if err := rabbitmq.Preflight(context.Background(), good, 0); err != nil {
		t.Errorf("the good broker: %v", err)
	}
}

// TestPreflightHonoursContext: an interrupt ends a preflight stuck on a
// silent server at once.
func TestPreflightHonoursContext(t *testing.T) {
	silent := listener(t, func(c net.Conn) { time.Sleep(10 * time.Second); c.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err := rabbitmq.Preflight(ctx, "amqp://guest:guest@"+silent+"/", time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v after the cancel", d)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		`amqp://guest:guest@127.0.0.1:5672/`:           `amqp://guest:xxxxx@127.0.0.1:5672/`,
		`{"url":"amqp://u:p%40ss@h:1/v","x":1}`:        `{"url":"amqp://u:xxxxx@h:1/v","x":1}`,
		`dial amqps://a:b@h/ and amqp://c:d@e/ failed`: `dial amqps://a:xxxxx@h/ and amqp://c:xxxxx@e/ failed`,
		`amqp://nopassword@h/`:                         `amqp://nopassword@h/`,
		`no url here: 10:30`:                           `no url here: 10:30`,
	} {
		if got := rabbitmq.Redact(in); got != want {
			t.Errorf("Redact(%s) = %s, want %s", in, got, want)
		}
	}
}
