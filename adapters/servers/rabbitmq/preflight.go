package rabbitmq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// PreflightTimeout is how long Preflight waits for the broker by default:
// a wrong host or a refused port fails at once, and a broker busy with
// other work took over 4s to finish a handshake once (CI, load 10+).
const PreflightTimeout = 10 * time.Second

// What a preflight found wrong, in PreflightError.Kind.
const (
	BadURL      = "bad URL"
	Refused     = "connection refused"
	NoHost      = "unknown host"
	Unreachable = "unreachable"
	TimedOut    = "timed out"
	AuthFailed  = "authentication failure"
	NoVhost     = "vhost not found"
	VhostDenied = "vhost access refused"
	NotAMQP     = "not AMQP"
	TLSFailed   = "TLS"
	Closed      = "closed by the broker"
)

// A PreflightError says exactly why the broker at URL (redacted) cannot be
// used: Kind is one of the constants above, Detail what was seen.
type PreflightError struct {
	Kind   string
	URL    string // password redacted
	Detail string
}

func (e *PreflightError) Error() string {
	if e.Kind == BadURL {
		return fmt.Sprintf("broker URL %s: %s", e.URL, e.Detail)
	}
	return fmt.Sprintf("cannot use the broker at %s: %s: %s", e.URL, e.Kind, e.Detail)
}

// Preflight connects once to the broker at rawURL (TCP, AMQP handshake,
// authentication, vhost) and closes the connection at once, within timeout
// (0 means PreflightTimeout) or until ctx ends. It returns nil if the broker
// can be used, else a *PreflightError that says what is wrong: a bad URL,
// connection refused, an unknown host, a timeout, an authentication failure,
// a vhost that does not exist or refuses the user, a server that does not
// speak AMQP, or a TLS failure. If ctx ends first it returns ctx.Err(). No
// message carries the URL's password.
func Preflight(ctx context.Context, rawURL string, timeout time.Duration) error {
	bad := complaint(RedactURL(rawURL))
	uri, err := amqp.ParseURI(rawURL)
	if err != nil {
		return bad(BadURL, "%v (want an amqp:// or amqps:// URL with a user, password, host, port and vhost)", err)
	}
	if u, err := url.Parse(rawURL); err != nil || u.Host == "" {
		return bad(BadURL, "no host (want an amqp:// or amqps:// URL with a user, password, host, port and vhost)")
	}
	if timeout <= 0 {
		timeout = PreflightTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := handshake(ctx, rawURL, uri.Scheme)
	if err == nil {
		return nil
	}
	f := failure{err: err, uri: uri, host: uri.Host + ":" + fmt.Sprint(uri.Port), ctx: ctx, timeout: timeout}
	if s != nil {
		f.closeCode, f.closeText, f.garbage = s.result()
	}
	errors.As(err, &f.ae) // left nil unless err is an *amqprun.Error
	if e := f.refusal(bad); e != nil {
		return e
	}
	return f.network(bad)
}

// A complainer makes a *PreflightError of a kind, its Detail formatted
// from its arguments, each redacted.
type complainer func(kind, format string, args ...any) error

// complaint is the complainer about the broker at shown (a redacted URL).
func complaint(shown string) complainer {
	return func(kind, format string, args ...any) error {
		for i, a := range args {
			args[i] = Redact(fmt.Sprint(a))
		}
		return &PreflightError{Kind: kind, URL: shown, Detail: fmt.Sprintf(format, args...)}
	}
}

// handshake dials rawURL once (TCP, AMQP handshake, authentication, vhost)
// and closes the connection at once. The socket closes when ctx ends. For
// amqp:// it returns the sniffer that read the broker's side.
func handshake(ctx context.Context, rawURL, scheme string) (*sniffer, error) {
	var (
		mu sync.Mutex
		nc net.Conn
		sn *sniffer
	)
	cfg := amqp.Config{
		Heartbeat:  10 * time.Second,
		Properties: amqp.Table{"connection_name": "lockprover-preflight"},
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{}
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			nc = c
			if scheme == "amqp" {
				sn = &sniffer{Conn: c}
				return sn, nil
			}
			return c, nil
		},
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if nc != nil {
			nc.Close()
		}
	})
	defer stop()
	conn, err := amqp.DialConfig(rawURL, cfg)
	if err == nil {
		conn.Close()
		return nil, nil
	}
	mu.Lock()
	defer mu.Unlock()
	return sn, err
}

// failure is what a failed handshake left: amqp091-go's error, and what
// the sniffer saw of the broker's side.
type failure struct {
	err       error
	ae        *amqp.Error // err's, if it is one
	uri       amqp.URI
	host      string // host:port
	ctx       context.Context
	timeout   time.Duration
	closeCode int
	closeText string
	garbage   []byte
}

// refusal explains a broker that answered and refused (authentication, a
// vhost, another connection.close) or answered something that is not AMQP;
// nil if it did neither.
func (f failure) refusal(bad complainer) error {
	switch {
	case f.closeCode == 403 || f.ae != nil && f.ae.Code == 403 && f.closeCode == 0:
		text := f.closeText
		if text == "" {
			text = f.ae.Reason
		}
		return bad(AuthFailed, "the broker refused user %q: %s", f.uri.Username, text)
	case f.closeCode == 530 && strings.Contains(f.closeText, "not found"):
		return bad(NoVhost, "the broker has no vhost %q: %s", f.uri.Vhost, f.closeText)
	case f.closeCode == 530:
		return bad(VhostDenied, "user %q may not use vhost %q: %s", f.uri.Username, f.uri.Vhost, f.closeText)
	case f.closeCode != 0:
		return bad(Closed, "%d %s", f.closeCode, f.closeText)
	case len(f.garbage) > 0:
		return bad(NotAMQP, "%s answered %q, not an AMQP 0-9-1 handshake (is this RabbitMQ's AMQP port? the default is 5672)", f.host, string(f.garbage))
	}
	return nil
}

// network explains a handshake that did not get as far as the broker's
// answer: nothing listens, no such host, TLS, a timeout or ctx ending, an
// unreachable network, a server that does not speak AMQP.
func (f failure) network(bad complainer) error {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	err, ae := f.err, f.ae
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return bad(Refused, "nothing listens on %s (is RabbitMQ running, and is this its AMQP port?)", f.host)
	case errors.As(err, &dnsErr):
		return bad(NoHost, "%v", dnsErr)
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr),
		f.uri.Scheme == "amqps" && strings.Contains(err.Error(), "tls"):
		return bad(TLSFailed, "%v", err)
	case errors.Is(f.ctx.Err(), context.DeadlineExceeded):
		return bad(TimedOut, "no complete AMQP handshake with %s within %v (a firewall, a wrong host, or an overloaded broker)", f.host, f.timeout)
	case f.ctx.Err() != nil:
		return f.ctx.Err()
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return bad(Unreachable, "%v", err)
	case ae != nil && ae.Code == amqp.FrameError, ae != nil && ae.Code == amqp.SyntaxError:
		return bad(NotAMQP, "%s does not speak AMQP 0-9-1: %v", f.host, err)
	}
	return bad(Closed, "%v", err)
}

// sniffer reads the broker's side of the handshake as amqp091-go does, and
// notices a connection.close (the broker's reason for refusing) or bytes
// that are no AMQP frame. On a connection.close it closes the socket at
// once: RabbitMQ waits seconds before it closes the socket of a refused
// login, and amqp091-go waits for that.
type sniffer struct {
	net.Conn
	mu      sync.Mutex
	buf     []byte
	done    bool
	code    int
	text    string
	garbage []byte
}

func (s *sniffer) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if n > 0 {
		s.mu.Lock()
		if !s.done {
			s.buf = append(s.buf, p[:n]...)
			s.parse()
		}
		closeNow := s.code != 0
		s.mu.Unlock()
		if closeNow {
			s.Conn.Close()
		}
	}
	return n, err
}

// parse looks at the complete frames read so far.
func (s *sniffer) parse() {
	for !s.done {
		if len(s.buf) >= 1 && s.buf[0] != 1 && s.buf[0] != 2 && s.buf[0] != 3 && s.buf[0] != 8 {
			s.notAMQP()
			return
		}
		if len(s.buf) < 7 {
			return
		}
		size := int(binary.BigEndian.Uint32(s.buf[3:7]))
		if size > 1<<20 {
			s.notAMQP()
			return
		}
		if len(s.buf) < 7+size+1 {
			return
		}
		if s.buf[7+size] != 0xCE {
			s.notAMQP()
			return
		}
		payload := s.buf[7 : 7+size]
		if s.buf[0] == 1 && len(payload) >= 6 && binary.BigEndian.Uint16(payload[0:2]) == 10 && binary.BigEndian.Uint16(payload[2:4]) == 50 {
			s.code = int(binary.BigEndian.Uint16(payload[4:6]))
			if len(payload) >= 7 && len(payload) >= 7+int(payload[6]) {
				s.text = string(payload[7 : 7+int(payload[6])])
			}
			s.done = true
			return
		}
		s.buf = s.buf[7+size+1:]
	}
}

func (s *sniffer) notAMQP() {
	s.garbage = append([]byte(nil), s.buf[:min(len(s.buf), 40)]...)
	s.done = true
}

func (s *sniffer) result() (int, string, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.code, s.text, s.garbage
}

// RedactURL is rawURL with its password replaced by xxxxx
// (amqp://guest:xxxxx@host/); a string that is not a URL is redacted as
// text (Redact).
func RedactURL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		return u.Redacted()
	}
	return Redact(rawURL)
}

// credentials matches the user:password@ of a URL anywhere in a text.
var credentials = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:@/\s"'\\]*):[^@/\s"'\\]*@`)

// Redact replaces the password of every URL in s (amqp://user:secret@...)
// with xxxxx, for messages and logs.
func Redact(s string) string {
	return credentials.ReplaceAllString(s, "${1}:xxxxx@")
}
