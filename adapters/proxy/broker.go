package proxy

import (
	"fmt"
	"net"
	"net/url"
)

// ListenURL starts a proxy (Listen) in front of the broker at brokerURL
// (amqp://user:pass@host[:port]/vhost?options; the port defaults to 5672)
// and returns it with the URL that reaches the broker through it (URL):
// the same credentials, vhost and options, the proxy's host and port. It is
// how lockprover puts a proxy in front of a process: the real-broker
// engine, conform and bench all start theirs here.
func ListenURL(brokerURL string) (*Proxy, string, error) {
	addr, err := BrokerAddr(brokerURL)
	if err != nil {
		return nil, "", err
	}
	p, err := Listen(addr)
	if err != nil {
		return nil, "", err
	}
	through, err := p.URL(brokerURL)
	if err != nil {
		p.Close()
		return nil, "", err
	}
	return p, through, nil
}

// BrokerAddr is the host:port of the broker an amqp:// URL names (port
// 5672 when it names none): where a proxy in front of it forwards.
func BrokerAddr(brokerURL string) (string, error) {
	u, err := parseBrokerURL(brokerURL)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", fmt.Errorf("proxy: broker URL %q: no host", u.Redacted())
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "5672"), nil
	}
	return u.Host, nil
}

// parseBrokerURL parses an amqp:// URL; amqps:// is refused: the proxy
// could not read encrypted frames.
func parseBrokerURL(brokerURL string) (*url.URL, error) {
	u, err := url.Parse(brokerURL)
	if err != nil {
		return nil, fmt.Errorf("proxy: broker URL: %w", err)
	}
	if u.Scheme != "amqp" {
		return nil, fmt.Errorf("proxy: broker URL %q: scheme must be amqp (the proxy reads plain AMQP frames)", u.Redacted())
	}
	return u, nil
}
