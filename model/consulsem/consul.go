package consulsem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Consul is a Semaphore on the Consul agent whose HTTP API is at addr
// (host:port, or an http:// URL), through hc (nil: a client of its own,
// without timeouts: give operations contexts with deadlines). It uses
// net/http only: every call is one of the HTTP API's, listed in the
// methods below.
func Consul(addr string, hc *http.Client, o Options) (*Semaphore, error) {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("consulsem: Consul address %q: want host:port or http://host:port", addr)
	}
	owned := hc == nil
	if owned {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return newSemaphore(&consulStore{base: strings.TrimSuffix(base, "/"), hc: hc, owned: owned}, o)
}

// flags marks the keys of a semaphore, as api/semaphore.go's
// SemaphoreFlagValue does.
const flags = "16215126436148395488" // 0xe0f69a2baa414de0

type consulStore struct {
	base  string
	hc    *http.Client
	owned bool
}

func (c *consulStore) timing() Timing { return consulTiming }

func (c *consulStore) close() error {
	if c.owned {
		c.hc.CloseIdleConnections()
	}
	return nil
}

// call sends a request and returns the answer's status, body and
// X-Consul-Index. A transport error, or a status other than 200 and those
// in ok, is an error.
func (c *consulStore) call(ctx context.Context, method, path string, body []byte, ok ...int) (int, []byte, uint64, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, 0, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	index, _ := strconv.ParseUint(resp.Header.Get("X-Consul-Index"), 10, 64)
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, b, index, nil
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp.StatusCode, b, index, nil
		}
	}
	return resp.StatusCode, b, index, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
}

// createSession: PUT /v1/session/create, a session with no health checks
// (a pure TTL session, as api's CreateNoChecks), with lock-delay lockDelay
// (0s by default: Options.LockDelay).
func (c *consulStore) createSession(ctx context.Context, ttl time.Duration, release bool, lockDelay time.Duration) (string, time.Duration, error) {
	behavior := "delete"
	if release {
		behavior = "release"
	}
	body, _ := json.Marshal(map[string]any{"Name": "consulsem", "TTL": ttl.String(), "Behavior": behavior,
		"LockDelay": lockDelay.String(), "NodeChecks": []string{}})
	_, b, _, err := c.call(ctx, http.MethodPut, "/v1/session/create", body)
	if err != nil {
		return "", 0, err
	}
	var out struct{ ID string }
	if err := json.Unmarshal(b, &out); err != nil || out.ID == "" {
		return "", 0, fmt.Errorf("session/create answered %q", b)
	}
	return out.ID, ttl, nil
}

// renewSession: PUT /v1/session/renew/<id>; 404 when it is gone.
func (c *consulStore) renewSession(ctx context.Context, tok string) error {
	status, _, _, err := c.call(ctx, http.MethodPut, "/v1/session/renew/"+url.PathEscape(tok), nil, http.StatusNotFound)
	if err != nil {
		return err
	}
	if status == http.StatusNotFound {
		return errGone
	}
	return nil
}

// destroySession: PUT /v1/session/destroy/<id> (true even if it was gone).
func (c *consulStore) destroySession(ctx context.Context, tok string) error {
	_, _, _, err := c.call(ctx, http.MethodPut, "/v1/session/destroy/"+url.PathEscape(tok), nil)
	return err
}

// putContender: PUT /v1/kv/<key>?acquire=<id> (bound) or a plain PUT.
func (c *consulStore) putContender(ctx context.Context, key, tok string, bound bool) (bool, error) {
	q := "?flags=" + flags
	if bound {
		q += "&acquire=" + url.QueryEscape(tok)
	}
	_, b, _, err := c.call(ctx, http.MethodPut, "/v1/kv/"+key+q, []byte{})
	if err != nil {
		return false, err
	}
	return parseBool(b)
}

func parseBool(b []byte) (bool, error) {
	switch strings.TrimSpace(string(b)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("answer %q: want true or false", b)
}

// consulKV is a key as the KV and txn endpoints give it.
type consulKV struct {
	Key         string
	Value       []byte // base64 in JSON
	Session     string
	LockIndex   uint64
	ModifyIndex uint64
}

// list: GET /v1/kv/<prefix>/?recurse, consistent (or stale); 404 is an
// empty prefix.
func (c *consulStore) list(ctx context.Context, prefix string, stale bool) (listing, error) {
	mode := "&consistent"
	if stale {
		mode = "&stale"
	}
	return c.get(ctx, "/v1/kv/"+prefix+"/?recurse"+mode)
}

func (c *consulStore) get(ctx context.Context, path string) (listing, error) {
	status, b, index, err := c.call(ctx, http.MethodGet, path, nil, http.StatusNotFound)
	if err != nil {
		return listing{}, err
	}
	l := listing{Index: index, Entries: map[string]entry{}}
	if status == http.StatusNotFound {
		return l, nil
	}
	var kvs []consulKV
	if err := json.Unmarshal(b, &kvs); err != nil {
		return listing{}, fmt.Errorf("GET %s: %w", path, err)
	}
	for _, kv := range kvs {
		l.Entries[kv.Key] = entry{Key: kv.Key, Value: kv.Value, Owner: kv.Session, ModIndex: kv.ModifyIndex, LockIndex: kv.LockIndex}
	}
	return l, nil
}

// waitChange: a blocking GET /v1/kv/<prefix>/?recurse&index=<index>&wait=.
func (c *consulStore) waitChange(ctx context.Context, prefix string, index uint64, max time.Duration) error {
	ms := max.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	_, err := c.get(ctx, fmt.Sprintf("/v1/kv/%s/?recurse&index=%d&wait=%dms", prefix, index, ms))
	return err
}

// txnOp is a KV operation of PUT /v1/txn.
type txnOp struct {
	KV txnKV
}

type txnKV struct {
	Verb    string
	Key     string
	Value   []byte `json:",omitempty"`
	Flags   uint64 `json:",omitempty"`
	Index   uint64 `json:",omitempty"`
	Session string `json:",omitempty"`
}

// writeLock: PUT /v1/txn with [check-session live session] (if live), then
// cas (or set) of the lock key; the answer carries the key's new
// ModifyIndex. A failed transaction answers 409 with the index of the
// operation that failed.
func (c *consulStore) writeLock(ctx context.Context, w lockWrite) (uint64, error) {
	var ops []txnOp
	if w.live != "" {
		ops = append(ops, txnOp{txnKV{Verb: "check-session", Key: w.live, Session: w.session}})
	}
	set := txnKV{Verb: "set", Key: w.key, Value: w.value, Flags: 0xe0f69a2baa414de0}
	if w.cas {
		set.Verb, set.Index = "cas", w.index
	}
	ops = append(ops, txnOp{set})
	body, _ := json.Marshal(ops)
	status, b, _, err := c.call(ctx, http.MethodPut, "/v1/txn", body, http.StatusConflict)
	if err != nil {
		return 0, err
	}
	var out struct {
		Results []struct{ KV consulKV }
		Errors  []struct {
			OpIndex int
			What    string
		}
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, fmt.Errorf("PUT /v1/txn: %w: %q", err, b)
	}
	if status == http.StatusConflict {
		if len(out.Errors) == 0 {
			return 0, fmt.Errorf("PUT /v1/txn: 409 without errors: %q", b)
		}
		e := out.Errors[0]
		if ops[e.OpIndex].KV.Verb == "check-session" {
			return 0, fmt.Errorf("%w: %s", errNotLive, e.What)
		}
		if w.cas {
			return 0, fmt.Errorf("%w: %s", errCASLost, e.What)
		}
		return 0, errors.New("PUT /v1/txn: " + e.What)
	}
	if len(out.Results) != len(ops) {
		return 0, fmt.Errorf("PUT /v1/txn: %d results for %d operations", len(out.Results), len(ops))
	}
	return out.Results[len(ops)-1].KV.ModifyIndex, nil
}

// deleteKey: DELETE /v1/kv/<key>.
func (c *consulStore) deleteKey(ctx context.Context, key string) error {
	_, _, _, err := c.call(ctx, http.MethodDelete, "/v1/kv/"+key, nil)
	return err
}
