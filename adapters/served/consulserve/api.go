package consulserve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/sim/consulsim"
)

// What the agent serves of Consul's HTTP API, read from a request and
// written back as Consul v1.16's HTTP handlers do (agent/http.go,
// agent/kvs_endpoint.go, agent/session_endpoint.go).

// notAnEndpoint is Consul's answer to a path under /v1/ it does not know.
const notAnEndpoint = "Invalid URL path: not a recognized HTTP API endpoint\n"

// read reads req into the agent's request, or the answer the agent gives
// without its state (a bad request, a path or parameter not served).
func (s *Broker) read(req *request) (consulsim.APIRequest, *response) {
	path := req.path
	switch {
	case strings.HasPrefix(path, "/v1/kv/"):
		return s.readKV(req, strings.TrimPrefix(path, "/v1/kv/"))
	case path == "/v1/session/create":
		return s.readCreate(req)
	}
	for _, op := range []struct {
		prefix, method string
		op             consulsim.APIOp
	}{{"/v1/session/renew/", http.MethodPut, consulsim.SessionRenew}, {"/v1/session/destroy/", http.MethodPut, consulsim.SessionDestroy},
		{"/v1/session/info/", http.MethodGet, consulsim.SessionInfo}} {
		if id, ok := strings.CutPrefix(path, op.prefix); ok {
			if r := methods(req, op.method); r != nil {
				return consulsim.APIRequest{}, r
			}
			if id == "" {
				return consulsim.APIRequest{}, failed(http.StatusBadRequest, "Missing session")
			}
			return consulsim.APIRequest{Op: op.op, Key: id}, nil
		}
	}
	s.Unserve(req.method + " " + endpoint(path))
	return consulsim.APIRequest{}, &response{status: http.StatusNotFound, body: []byte(notAnEndpoint)}
}

// endpoint names path as Unserved does: its first three segments.
func endpoint(path string) string {
	parts := strings.SplitN(path, "/", 5)
	return strings.Join(parts[:min(len(parts), 4)], "/")
}

// methods is Consul's 405 for a method the endpoint does not take, nil
// for one it does.
func methods(req *request, allowed ...string) *response {
	if slices.Contains(allowed, req.method) {
		return nil
	}
	r := failed(http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed", req.method))
	r.header["Allow"] = strings.Join(append([]string{"OPTIONS"}, allowed...), ",")
	return r
}

// failed is an error as Consul's handler writes it: the status, and its
// words as text.
func failed(status int, msg string) *response {
	return &response{status: status, header: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, body: []byte(msg)}
}

// readKV reads a request of /v1/kv/key.
func (s *Broker) readKV(req *request, key string) (consulsim.APIRequest, *response) {
	if r := methods(req, http.MethodGet, http.MethodPut, http.MethodDelete); r != nil {
		return consulsim.APIRequest{}, r
	}
	q := req.query
	for _, p := range []string{"keys", "raw", "separator", "seperator", "ns", "partition", "filter", "cached"} {
		if q.Has(p) {
			s.Unserve(req.method + " /v1/kv ?" + p)
			return consulsim.APIRequest{}, &response{status: http.StatusNotFound, body: []byte(notAnEndpoint)}
		}
	}
	ar := consulsim.APIRequest{Key: key, Recurse: q.Has("recurse")}
	switch req.method {
	case http.MethodGet:
		ar.Op = consulsim.KVGet
		if r := readBlocking(q, &ar); r != nil {
			return ar, r
		}
		if !ar.Recurse && key == "" {
			return ar, failed(http.StatusBadRequest, "Missing key name")
		}
		return ar, nil
	case http.MethodPut:
		ar.Op, ar.Recurse = consulsim.KVPut, false
		if key == "" {
			return ar, failed(http.StatusBadRequest, "Missing key name")
		}
		if r := conflicting(q, "cas", "acquire", "release"); r != nil {
			return ar, r
		}
		ar.Value = req.body
		return ar, readWrite(q, &ar)
	}
	ar.Op = consulsim.KVDelete
	if r := conflicting(q, "recurse", "cas"); r != nil {
		return ar, r
	}
	if !ar.Recurse && key == "" {
		return ar, failed(http.StatusBadRequest, "Missing key name")
	}
	return ar, readWrite(q, &ar)
}

// readBlocking reads ?index and ?wait as Consul's parseWait does.
func readBlocking(q map[string][]string, ar *consulsim.APIRequest) *response {
	if v := first(q, "wait"); v != "" {
		d, err := parseWait(v)
		if err != nil {
			return failed(http.StatusBadRequest, "Invalid wait time")
		}
		ar.Wait = d
	}
	if v := first(q, "index"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return failed(http.StatusBadRequest, "Invalid index")
		}
		ar.Index = n
	}
	return nil
}

// parseWait reads a ?wait: a duration, or a number of seconds.
func parseWait(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

func first(q map[string][]string, k string) string {
	if v := q[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// readWrite reads ?flags, ?cas, ?acquire and ?release: a number that
// cannot be read is Consul's 500 with strconv's words.
func readWrite(q map[string][]string, ar *consulsim.APIRequest) *response {
	for _, f := range []struct {
		name string
		set  func(uint64)
	}{{"flags", func(n uint64) { ar.Flags = n }}, {"cas", func(n uint64) { ar.CAS = &n }}} {
		if _, ok := q[f.name]; !ok || ar.Op == consulsim.KVDelete && f.name == "flags" {
			continue
		}
		n, err := strconv.ParseUint(first(q, f.name), 10, 64)
		if err != nil {
			return failed(http.StatusInternalServerError, err.Error())
		}
		f.set(n)
	}
	if ar.Op != consulsim.KVPut {
		return nil
	}
	if _, ok := q["acquire"]; ok {
		v := first(q, "acquire")
		ar.Acquire = &v
	}
	if _, ok := q["release"]; ok {
		v := first(q, "release")
		ar.Release = &v
	}
	return nil
}

// conflicting is Consul's 400 for two of flags given together.
func conflicting(q map[string][]string, flags ...string) *response {
	n := 0
	for _, f := range flags {
		if _, ok := q[f]; ok {
			n++
		}
	}
	if n < 2 {
		return nil
	}
	return &response{status: http.StatusBadRequest, body: []byte("Conflicting flags: " + encode(q))}
}

// readCreate reads a session's create: its body as Consul decodes it
// (LockDelay a duration or nanoseconds, under a thousand seconds; 15 s
// when not given). Health checks other than the node's serfHealth, which
// the agent does not model, are not served.
func (s *Broker) readCreate(req *request) (consulsim.APIRequest, *response) {
	if r := methods(req, http.MethodPut); r != nil {
		return consulsim.APIRequest{}, r
	}
	var body struct {
		Name, TTL, Behavior, Node string
		LockDelay                 any
		Checks, NodeChecks        []string
		ServiceChecks             []json.RawMessage
	}
	ar := consulsim.APIRequest{Op: consulsim.SessionCreate, Session: consulsim.APISession{LockDelay: 15 * time.Second}}
	if len(req.body) > 0 {
		if err := json.Unmarshal(req.body, &body); err != nil {
			return ar, failed(http.StatusBadRequest, "Request decode failed: "+err.Error())
		}
	}
	d, err := lockDelay(body.LockDelay)
	if err != nil {
		return ar, failed(http.StatusBadRequest, "Request decode failed: "+err.Error())
	}
	if d >= 0 {
		ar.Session.LockDelay = d
	}
	for _, c := range append(body.Checks, body.NodeChecks...) {
		if c != "serfHealth" {
			s.Unserve("PUT /v1/session/create with health checks")
		}
	}
	if len(body.ServiceChecks) > 0 {
		s.Unserve("PUT /v1/session/create with service checks")
	}
	ar.Session.Name, ar.Session.TTL, ar.Session.Behavior = body.Name, body.TTL, body.Behavior
	return ar, nil
}

// lockDelay reads a session's LockDelay as Consul's Session.UnmarshalJSON
// does; -1 when it was not given.
func lockDelay(v any) (time.Duration, error) {
	var d time.Duration
	switch x := v.(type) {
	case nil:
		return -1, nil
	case string:
		var err error
		if d, err = time.ParseDuration(x); err != nil {
			return 0, err
		}
	case float64:
		d = time.Duration(x)
	}
	if d < 1000 {
		d *= time.Second
	}
	return d, nil
}
