package amqpproxy

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"sync"
)

// ListenURL starts a proxy (Listen) in front of the broker at brokerURL
// (amqp://user:pass@host[:port]/vhost?options; the port defaults to 5672)
// and returns it with the URL that reaches the broker through it (URL):
// the same credentials, vhost and options, the proxy's host and port. It is
// how lockprover puts a proxy in front of a process: the real-broker
// engine and conform start theirs here through a Set, bench directly.
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

// A Set is a proxy per name (a process, a connection of a test) in front
// of one broker, each started (ListenURL) the first time it is asked for.
// Its methods are safe for concurrent use.
type Set struct {
	brokerURL string
	route     func(name string) string // the broker of a name, if set (NewRoutedSet)
	mu        sync.Mutex
	proxies   map[string]*Proxy
	urls      map[string]string
}

// NewSet returns an empty Set in front of the broker at brokerURL.
func NewSet(brokerURL string) *Set {
	return &Set{brokerURL: brokerURL, proxies: map[string]*Proxy{}, urls: map[string]string{}}
}

// NewRoutedSet returns an empty Set whose proxy for a name is in front of
// the broker at route(name): a node of a cluster, each name its own.
func NewRoutedSet(route func(name string) string) *Set {
	return &Set{route: route, proxies: map[string]*Proxy{}, urls: map[string]string{}}
}

// For returns name's proxy and the broker's URL through it, starting the
// proxy the first time.
func (s *Set) For(name string) (*Proxy, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.proxies[name]; p != nil {
		return p, s.urls[name], nil
	}
	to := s.brokerURL
	if s.route != nil {
		to = s.route(name)
	}
	p, u, err := ListenURL(to)
	if err != nil {
		return nil, "", err
	}
	s.proxies[name], s.urls[name] = p, u
	return p, u, nil
}

// Get returns name's proxy, nil if none has been started.
func (s *Set) Get(name string) *Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proxies[name]
}

// All returns every proxy of the Set.
func (s *Set) All() []*Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.proxies))
}

// Close closes every proxy of the Set (Close) and forgets them: For starts
// new ones.
func (s *Set) Close() {
	s.mu.Lock()
	ps := s.proxies
	s.proxies, s.urls = map[string]*Proxy{}, map[string]string{}
	s.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
}

// Names lists the names the Set has proxies for, sorted.
func (s *Set) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.proxies))
}
