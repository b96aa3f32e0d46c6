// Package docker starts and removes containers through a Docker engine's
// HTTP API, for the private servers lockprover's verbs start when the user
// names none (a RabbitMQ broker for amqp-locks: `prove --docker`).
//
// It speaks the engine's API directly (unversioned paths, so any engine
// from Docker 20.10 to today answers in its own version) with the standard
// library alone: testcontainers-go, which lockprover's tests use
// (adapters/servers/rabbitmq/rabbitmqtest), links Docker's client, OpenTelemetry
// and testify, and must stay out of the lockprover binary
// (cmd/lockprover/cli's TestBinaryDoesNotLinkTestcontainers).
//
// The engine is the one DOCKER_HOST names (unix:///path or tcp://host:port;
// TLS is not supported), else unix:///var/run/docker.sock, as for the
// docker CLI. Every container carries a label whose value is the pid of the
// process that started it, so that what a killed process left can be found
// and removed (.ci/docker down does).
package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultHost is the engine's address when DOCKER_HOST is unset.
const DefaultHost = "unix:///var/run/docker.sock"

// Errors a caller tells apart (errors.Is): no engine at all, an engine
// that does not answer, an image that is not there.
var (
	ErrNoEngine   = errors.New("no Docker engine")
	ErrNotAnswer  = errors.New("the Docker engine does not answer")
	ErrNoImage    = errors.New("image not found")
	errNotRunning = errors.New("container not running")
)

// An Engine is a Docker engine's API.
type Engine struct {
	host   string // as given: unix:///..., tcp://...
	client *http.Client
	base   string // URL prefix of API paths
}

// Connect returns the engine host names (DOCKER_HOST's syntax; "" for
// DOCKER_HOST, else DefaultHost) once it has answered a ping. The error
// wraps ErrNoEngine when nothing listens there (no socket file, a refused
// connection), ErrNotAnswer when something does but does not answer as an
// engine; both say how to provide one.
func Connect(ctx context.Context, host string) (*Engine, error) {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = DefaultHost
	}
	if os.Getenv("DOCKER_TLS_VERIFY") != "" {
		return nil, fmt.Errorf("DOCKER_TLS_VERIFY is set: lockprover speaks to Docker engines without TLS only (a unix socket, or tcp:// on a trusted network)")
	}
	e := &Engine{host: host}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("DOCKER_HOST %q: %v", host, err)
	}
	switch u.Scheme {
	case "unix":
		path := u.Path
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%w at %s (%v): install Docker and start it, or set DOCKER_HOST", ErrNoEngine, host, err)
		}
		e.client = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
		}}
		e.base = "http://docker"
	case "tcp":
		e.client = &http.Client{Transport: &http.Transport{}}
		e.base = "http://" + u.Host
	default:
		return nil, fmt.Errorf("DOCKER_HOST %q: want unix:///path or tcp://host:port", host)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, status, err := e.do(ctx, http.MethodGet, "/_ping", nil, nil)
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		return nil, fmt.Errorf("%w at %s (%v): start Docker (dockerd), or set DOCKER_HOST", ErrNoEngine, host, err)
	case err != nil:
		return nil, fmt.Errorf("%w at %s: %v (is dockerd running and healthy?)", ErrNotAnswer, host, err)
	case status != http.StatusOK || strings.TrimSpace(string(body)) != "OK":
		return nil, fmt.Errorf("%w at %s: /_ping answered %d %q (is it a Docker engine?)", ErrNotAnswer, host, status, trim(body))
	}
	return e, nil
}

// Host is the engine's address, as DOCKER_HOST would name it.
func (e *Engine) Host() string { return e.host }

// do sends one API request with a JSON body (if in is not nil), and
// returns the whole answer.
func (e *Engine) do(ctx context.Context, method, path string, query url.Values, in any) ([]byte, int, error) {
	resp, err := e.send(ctx, method, path, query, in)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

func (e *Engine) send(ctx context.Context, method, path string, query url.Values, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	u := e.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return e.client.Do(req)
}

// apiError turns an engine's error answer into an error.
func apiError(what string, status int, body []byte) error {
	var m struct{ Message string }
	if json.Unmarshal(body, &m) == nil && m.Message != "" {
		return fmt.Errorf("%s: %s (HTTP %d)", what, m.Message, status)
	}
	return fmt.Errorf("%s: HTTP %d %q", what, status, trim(body))
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// HasImage reports whether the engine holds image (name:tag).
func (e *Engine) HasImage(ctx context.Context, image string) (bool, error) {
	b, status, err := e.do(ctx, http.MethodGet, "/images/"+image+"/json", nil, nil)
	switch {
	case err != nil:
		return false, err
	case status == http.StatusNotFound:
		return false, nil
	case status != http.StatusOK:
		return false, apiError("inspect image "+image, status, b)
	}
	return true, nil
}

// Pull pulls image from its registry. The error wraps ErrNoImage when the
// registry cannot give it (unreachable, unknown, refused).
func (e *Engine) Pull(ctx context.Context, image string) error {
	name, tag := image, "latest"
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		name, tag = image[:i], image[i+1:]
	}
	resp, err := e.send(ctx, http.MethodPost, "/images/create", url.Values{"fromImage": {name}, "tag": {tag}}, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%w: pull %s: %v", ErrNoImage, image, apiError("pull", resp.StatusCode, b))
	}
	// The answer is a stream of JSON progress messages; a failure is one
	// with an error, sent with status 200.
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct{ Error string }
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("pull %s: %v", image, err)
		}
		if m.Error != "" {
			return fmt.Errorf("%w: pull %s: %s", ErrNoImage, image, m.Error)
		}
	}
	if ok, err := e.HasImage(ctx, image); err != nil || !ok {
		return fmt.Errorf("%w: pull %s ended without the image", ErrNoImage, image)
	}
	return nil
}

// A Spec is a container to run.
type Spec struct {
	Image string
	// Port is the container's port to reach ("5672/tcp"); it is also
	// published on 127.0.0.1, on a port the engine picks.
	Port string
	// Label is the label that marks the container; its value is this
	// process's pid.
	Label string
	Env   []string
}

// A Container is a running container.
type Container struct {
	e  *Engine
	ID string
	// Hostname is the container's host name; IP its address on the
	// engine's bridge (empty if it has none); Published the host:port on
	// 127.0.0.1 where Spec.Port is published.
	Hostname, IP, Published string
}

// Run creates and starts a container. On an error after creation the
// container is removed before Run returns.
func (e *Engine) Run(ctx context.Context, s Spec) (*Container, error) {
	create := map[string]any{
		"Image":        s.Image,
		"Env":          s.Env,
		"Labels":       map[string]string{s.Label: strconv.Itoa(os.Getpid())},
		"ExposedPorts": map[string]any{s.Port: struct{}{}},
		"HostConfig": map[string]any{
			"PortBindings": map[string]any{s.Port: []map[string]string{{"HostIp": "127.0.0.1", "HostPort": ""}}},
		},
	}
	b, status, err := e.do(ctx, http.MethodPost, "/containers/create", nil, create)
	switch {
	case err != nil:
		return nil, fmt.Errorf("create a container of %s: %v", s.Image, err)
	case status == http.StatusNotFound:
		return nil, fmt.Errorf("%w: %s is not in the engine at %s", ErrNoImage, s.Image, e.host)
	case status != http.StatusCreated:
		return nil, apiError("create a container of "+s.Image, status, b)
	}
	var created struct{ Id string }
	if err := json.Unmarshal(b, &created); err != nil || created.Id == "" {
		return nil, fmt.Errorf("create a container of %s: answer %q", s.Image, trim(b))
	}
	c := &Container{e: e, ID: created.Id}
	fail := func(err error) (*Container, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := c.Remove(rctx); rerr != nil {
			err = fmt.Errorf("%w (and removing container %.12s failed: %v)", err, c.ID, rerr)
		}
		return nil, err
	}
	if b, status, err := e.do(ctx, http.MethodPost, "/containers/"+c.ID+"/start", nil, nil); err != nil {
		return fail(fmt.Errorf("start container %.12s: %v", c.ID, err))
	} else if status != http.StatusNoContent && status != http.StatusNotModified {
		return fail(apiError(fmt.Sprintf("start container %.12s", c.ID), status, b))
	}
	if err := c.inspect(ctx, s.Port); err != nil {
		return fail(err)
	}
	return c, nil
}

// inspect reads the container's host name, address and published port.
func (c *Container) inspect(ctx context.Context, port string) error {
	b, status, err := c.e.do(ctx, http.MethodGet, "/containers/"+c.ID+"/json", nil, nil)
	if err != nil {
		return fmt.Errorf("inspect container %.12s: %v", c.ID, err)
	}
	if status != http.StatusOK {
		return apiError(fmt.Sprintf("inspect container %.12s", c.ID), status, b)
	}
	var info struct {
		State           struct{ Running bool }
		Config          struct{ Hostname string }
		NetworkSettings struct {
			IPAddress string
			Ports     map[string][]struct{ HostIp, HostPort string }
			Networks  map[string]struct{ IPAddress string }
		}
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("inspect container %.12s: %v", c.ID, err)
	}
	if !info.State.Running {
		return fmt.Errorf("container %.12s: %w", c.ID, errNotRunning)
	}
	c.Hostname, c.IP = info.Config.Hostname, info.NetworkSettings.IPAddress
	if n, ok := info.NetworkSettings.Networks["bridge"]; ok && n.IPAddress != "" {
		c.IP = n.IPAddress
	}
	for _, p := range info.NetworkSettings.Ports[port] {
		if p.HostPort != "" {
			c.Published = net.JoinHostPort("127.0.0.1", p.HostPort)
			break
		}
	}
	if c.Published == "" {
		return fmt.Errorf("container %.12s: port %s was not published", c.ID, port)
	}
	return nil
}

// Running reports whether the container still runs.
func (c *Container) Running(ctx context.Context) bool {
	b, status, err := c.e.do(ctx, http.MethodGet, "/containers/"+c.ID+"/json", nil, nil)
	if err != nil || status != http.StatusOK {
		return false
	}
	var info struct{ State struct{ Running bool } }
	return json.Unmarshal(b, &info) == nil && info.State.Running
}

// Logs returns the last n lines the container wrote (stdout and stderr).
func (c *Container) Logs(ctx context.Context, n int) string {
	resp, err := c.e.send(ctx, http.MethodGet, "/containers/"+c.ID+"/logs",
		url.Values{"stdout": {"1"}, "stderr": {"1"}, "tail": {strconv.Itoa(n)}}, nil)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	// Without a terminal the engine frames each chunk: a byte for the
	// stream, three zero bytes, a big-endian length.
	var out strings.Builder
	r := bufio.NewReader(resp.Body)
	hdr := make([]byte, 8)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			break
		}
		if _, err := io.CopyN(&out, r, int64(binary.BigEndian.Uint32(hdr[4:]))); err != nil {
			break
		}
	}
	return out.String()
}

// Remove removes the container, running or not, with its anonymous
// volumes. A container already gone is not an error.
func (c *Container) Remove(ctx context.Context) error {
	b, status, err := c.e.do(ctx, http.MethodDelete, "/containers/"+c.ID, url.Values{"force": {"1"}, "v": {"1"}}, nil)
	switch {
	case err != nil:
		return fmt.Errorf("remove container %.12s: %v", c.ID, err)
	case status == http.StatusNoContent || status == http.StatusNotFound:
		return nil
	}
	return apiError(fmt.Sprintf("remove container %.12s", c.ID), status, b)
}

// Labelled lists the IDs of the containers (running or not) whose label
// has value; value "" matches any.
func (e *Engine) Labelled(ctx context.Context, label, value string) ([]string, error) {
	f := label
	if value != "" {
		f += "=" + value
	}
	filters, _ := json.Marshal(map[string][]string{"label": {f}})
	b, status, err := e.do(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(filters)}}, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, apiError("list containers", status, b)
	}
	var list []struct{ Id string }
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.Id)
	}
	return ids, nil
}
