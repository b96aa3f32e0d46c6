package consulsemrun

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/model/consulsem"
)

// benchClients are what a bench sends through on one server: the
// reference and the floor, each on a client of its own that counts what
// it sends.
type benchClients struct {
	server, unit, library string // for the report: "Consul agent (consul 1.20.2, -dev)", "HTTP requests", "net/http"
	ref                   *consulsem.Semaphore
	floor                 floorClient
	refSent, floorSent    *sentCounter
	closers               []func()
}

func (c *benchClients) close() {
	for _, f := range c.closers {
		f()
	}
}

// dialBench makes the bench's clients for the server of backend at addr.
func dialBench(ctx context.Context, backend, addr string) (*benchClients, error) {
	c := &benchClients{refSent: newSentCounter(), floorSent: newSentCounter()}
	var err error
	if backend == Consul {
		err = c.dialConsul(ctx, addr)
	} else {
		err = c.dialEtcd(ctx, addr)
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// dialConsul: net/http clients, as consulsem's Consul uses, each with a
// transport of its own that counts its requests.
func (c *benchClients) dialConsul(ctx context.Context, addr string) error {
	version, err := consul.AgentVersion(ctx, addr)
	if err != nil {
		return err
	}
	c.server, c.unit, c.library = "Consul agent ("+version+", -dev)", "HTTP requests", "net/http on Consul's HTTP API"
	client := func(sent *sentCounter) *http.Client {
		hc := &http.Client{Transport: countingTransport{base: http.DefaultTransport.(*http.Transport).Clone(), sent: sent}}
		c.closers = append(c.closers, hc.CloseIdleConnections)
		return hc
	}
	if c.ref, err = consulsem.Consul(addr, client(c.refSent), consulsem.Options{}); err != nil {
		return err
	}
	c.floor = consulFloor{base: "http://" + addr, hc: client(c.floorSent)}
	return nil
}

// dialEtcd: go.etcd.io/etcd/client/v3 clients, as consulsem's Etcd uses,
// each counting its gRPC requests.
func (c *benchClients) dialEtcd(ctx context.Context, addr string) error {
	client := func(sent *sentCounter) (*clientv3.Client, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 5 * time.Second,
			Logger: zap.NewNop(), DialOptions: sent.grpcOptions()})
		if err == nil {
			c.closers = append(c.closers, func() { cli.Close() })
		}
		return cli, err
	}
	refCli, err := client(c.refSent)
	if err != nil {
		return err
	}
	floorCli, err := client(c.floorSent)
	if err != nil {
		return err
	}
	version, err := etcd.ServerVersion(ctx, refCli, "http://"+addr)
	if err != nil {
		return err
	}
	c.server, c.unit, c.library = "etcd ("+version+")", "gRPC requests", "go.etcd.io/etcd/client/v3"
	if c.ref, err = consulsem.Etcd(refCli, consulsem.Options{}); err != nil {
		return err
	}
	c.floor = etcdFloor{c: floorCli}
	return nil
}

// A sentCounter counts the requests one client sends, by kind.
type sentCounter struct {
	mu   sync.Mutex
	sent map[string]int
}

func newSentCounter() *sentCounter { return &sentCounter{sent: map[string]int{}} }

func (c *sentCounter) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent[name]++
}

// take is what was counted since the last take.
func (c *sentCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := maps.Clone(c.sent)
	clear(c.sent)
	return m
}

// countingTransport counts each HTTP request it carries (consulCallName).
type countingTransport struct {
	base http.RoundTripper
	sent *sentCounter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.sent.add(consulCallName(r))
	return t.base.RoundTrip(r)
}

// consulCallName names a request of Consul's HTTP API by its method, its
// endpoint without the key or session id, and the query parameter that
// changes what it does: "PUT /v1/kv?acquire", "PUT /v1/session/renew".
func consulCallName(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1/kv/"):
		p = "/v1/kv"
	case strings.HasPrefix(p, "/v1/session/"):
		if parts := strings.SplitN(p, "/", 5); len(parts) == 5 {
			p = strings.Join(parts[:4], "/")
		}
	}
	q := r.URL.Query()
	for _, k := range []string{"acquire", "release", "cas", "recurse"} {
		if q.Has(k) {
			return fmt.Sprintf("%s %s?%s", r.Method, p, k)
		}
	}
	return r.Method + " " + p
}

// grpcOptions count each unary gRPC call, and each message sent on a
// stream, by method ("Txn", "LeaseKeepAlive"). They run inside
// clientv3's own interceptors, so that a call it retries counts each
// time it is sent.
func (c *sentCounter) grpcOptions() []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.add(path.Base(method))
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return countingStream{ClientStream: s, name: path.Base(method), sent: c}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// countingStream counts the messages sent on a gRPC stream.
type countingStream struct {
	grpc.ClientStream
	name string
	sent *sentCounter
}

func (s countingStream) SendMsg(m any) error {
	s.sent.add(s.name)
	return s.ClientStream.SendMsg(m)
}
