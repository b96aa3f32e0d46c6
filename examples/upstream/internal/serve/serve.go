// Package serve is the loop the Go adapters of examples/upstream
// (gooselock, redislock, redsync) share to serve lockprover's process
// protocol (docs/protocol.md) for a lease lock: it reads one JSON request
// a line, hands it to the adapter, and writes the reply with the
// request's id; and it words the refusals and errors every adapter gives
// alike (serve.js beside it is the node adapters'). Each adapter says
// only what its library does. It is a module of its own, required by each
// adapter's go.mod through a replace of its directory, so that the
// adapters stay modules of their own and lockprover's go.mod depends on
// none of their libraries.
package serve

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// A Request is a request's fields by name, as sent.
type Request map[string]json.RawMessage

// A Reply is a reply's fields by name.
type Reply = map[string]any

// Lines answers the requests of in on out, one a line, until in ends:
// each request's reply is handle's, for the request's type, with its id
// added, written and flushed before the next is read. A line that is not
// a JSON object with an id gets no reply: it is told on stderr as the
// client's, whom client names (init sets it).
func Lines(in io.Reader, out io.Writer, client func() string, handle func(typ string, req Request) Reply) {
	w := bufio.NewWriter(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var req Request
		var id int64
		var typ string
		if err := json.Unmarshal(line, &req); err != nil || json.Unmarshal(req["id"], &id) != nil {
			fmt.Fprintf(os.Stderr, "%s: a request that is not a JSON object with an id: %s\n", client(), line)
			continue
		}
		json.Unmarshal(req["type"], &typ)
		r := handle(typ, req)
		r["id"] = id
		b, err := json.Marshal(r)
		if err != nil {
			panic(err) // only strings, numbers and booleans: cannot happen
		}
		w.Write(append(b, '\n'))
		w.Flush()
	}
}

// Refuse is a definite error: the request did nothing.
func Refuse(code, text string) Reply {
	return Reply{"type": "error", "code": code, "text": text, "definite": true}
}

// Failure is an error of unknown outcome (not definite) of client's
// operation op, its code the library's name; it is told on stderr too.
func Failure(client, code, op string, err error) Reply {
	if err == nil {
		err = errors.New("no error")
	}
	fmt.Fprintf(os.Stderr, "%s: %s: %v\n", client, op, err)
	return Reply{"type": "error", "code": code, "text": err.Error()}
}

// Lease reads a lease operation's request (acquire, refresh or release)
// as every adapter checks it, in this order: its type, that init came
// first (initialised), its token (but an acquire's), and, withTTL, its
// ttl_ms (but a release's). A request that fails a check is refused: the
// refusal is not nil.
func Lease(typ string, req Request, initialised, withTTL bool) (token string, ttl time.Duration, refusal Reply) {
	switch typ {
	case "acquire", "refresh", "release":
	default:
		return "", 0, Refuse("unsupported", fmt.Sprintf("request type %q", typ))
	}
	if !initialised {
		return "", 0, Refuse("not initialised", "the first request must be init")
	}
	if typ != "acquire" {
		if json.Unmarshal(req["token"], &token) != nil || token == "" {
			return "", 0, Refuse("bad request", `"token" must be a non-empty string`)
		}
	}
	if withTTL && typ != "release" {
		var ms int64
		if json.Unmarshal(req["ttl_ms"], &ms) != nil || ms <= 0 {
			return "", 0, Refuse("bad request", `"ttl_ms" must be a positive integer`)
		}
		ttl = time.Duration(ms) * time.Millisecond
	}
	return token, ttl, nil
}
