package process

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
	"io"

	"github.com/lockprover/lockprover/adapters/rabbitmq"
)

// Serve speaks the protocol as an implementation: it reads requests from
// r and answers on w until r ends, serving lockprover's reference with
// options o (or, if mutant is set, that mutant of it). It is what
// `lockprover serve-reference` runs.
func Serve(r io.Reader, w io.Writer, o amqp.Options, mutant string) error {
	s := &server{out: bufio.NewWriter(w), o: o, mutant: mutant}
	defer s.close()
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	for in.Scan() {
		var req map[string]json.RawMessage
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			s.reply(0, map[string]any{"type": "error", "code": "bad request", "text": err.Error(), "definite": true})
			continue
		}
		var id int
		var typ string
		if err := json.Unmarshal(req["id"], &id); err != nil {
			s.reply(0, map[string]any{"type": "error", "code": "bad request", "text": fmt.Sprintf("id must be an integer, got %s", req["id"]), "definite": true})
		} else if err := json.Unmarshal(req["type"], &typ); err != nil {
			s.reply(id, map[string]any{"type": "error", "code": "bad request", "text": fmt.Sprintf("type must be a string, got %s", req["type"]), "definite": true})
		} else {
			s.reply(id, s.handle(typ, req))
		}
		if err := s.out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}

type server struct {
	out    *bufio.Writer
	o      amqp.Options
	mutant string
	plan   *amqp.Plan
	name   string
	url    string
	client amqp.Client
}

func (s *server) reply(id int, m map[string]any) {
	m["id"] = id
	line, _ := json.Marshal(m)
	s.out.Write(append(line, '\n'))
}

func (s *server) close() {
	if s.client != nil {
		s.client.Close()
	}
}

// connect makes sure there is a live client: after a connection loss the
// next request connects again (and holds nothing).
func (s *server) connect() error {
	if s.client != nil && !s.client.Broken() {
		return nil
	}
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
	c, err := amqp.ImplFor(s.plan).Connect(context.Background(), rabbitmq.New(s.url), s.plan, s.name)
	if err != nil {
		return err
	}
	s.client = c
	return nil
}

func (s *server) handle(typ string, req map[string]json.RawMessage) map[string]any {
	var bad error
	decode := func(field string, v any) {
		if raw, ok := req[field]; ok && bad == nil {
			if err := json.Unmarshal(raw, v); err != nil {
				bad = fmt.Errorf("field %q: %v", field, err)
			}
		}
	}
	num := func(field string) int {
		var n int
		decode(field, &n)
		return n
	}
	badRequest := func() map[string]any {
		return map[string]any{"type": "error", "code": "bad request", "text": bad.Error(), "definite": true}
	}
	if typ == "init" {
		var lock, name string
		decode("client", &s.name)
		decode("lock", &lock)
		decode("url", &s.url)
		decode("name", &name)
		hb := num("heartbeat_ms")
		if bad != nil {
			return badRequest()
		}
		o := s.o
		if hb > 0 {
			o.HeartbeatMs = hb
		} else {
			o.HeartbeatMs = -1 // propose none
		}
		s.plan = &amqp.Plan{Version: amqp.PlanVersion, Kind: lock, Lock: name, Options: o, Mutant: s.mutant}
		if err := s.connect(); err != nil {
			return failure(err)
		}
		return map[string]any{"type": "init_ok"}
	}
	if s.plan == nil {
		return map[string]any{"type": "error", "code": "not initialised", "text": "the first request must be init", "definite": true}
	}
	if err := s.connect(); err != nil {
		return failure(err)
	}
	ctx := context.Background()
	c := s.client
	for _, field := range []string{"slot", "slots", "delta"} {
		num(field)
	}
	if bad != nil {
		return badRequest()
	}
	switch typ {
	case "acquire":
		slot, err := c.Acquire(ctx)
		var f *amqp.Failure
		switch {
		case errors.As(err, &f) && (f.Reason == "full" || f.Reason == "absent" || f.Reason == "unavailable" || f.Reason == "contended" || f.Reason == "held"):
			return map[string]any{"type": "acquire_fail", "reason": f.Reason}
		case err != nil:
			return failure(err)
		case s.plan.Kind == "mutex":
			return map[string]any{"type": "acquire_ok"}
		}
		return map[string]any{"type": "acquire_ok", "slot": slot}
	case "verify":
		held, err := c.Verify(ctx, num("slot"))
		if err != nil {
			return failure(err)
		}
		return map[string]any{"type": "verify_ok", "held": held}
	case "release":
		return done("release_ok", c.Release(ctx, num("slot")))
	case "create":
		return done("create_ok", c.Create(ctx, num("slots")))
	case "change":
		from, to, err := c.Change(ctx, num("delta"))
		if err != nil {
			return failure(err)
		}
		return map[string]any{"type": "change_ok", "from": from, "to": to}
	case "count":
		n, err := c.Count(ctx)
		if err != nil {
			return failure(err)
		}
		return map[string]any{"type": "count_ok", "slots": n}
	case "destroy":
		from, err := c.Destroy(ctx)
		if err != nil {
			return failure(err)
		}
		return map[string]any{"type": "destroy_ok", "from": from}
	case "wait":
		return done("wait_ok", c.Wait(ctx, num("slot")))
	}
	return map[string]any{"type": "error", "code": "unsupported", "text": "no request type " + typ, "definite": true}
}

func done(typ string, err error) map[string]any {
	if err != nil {
		return failure(err)
	}
	return map[string]any{"type": typ}
}

// failure turns an error into the protocol's: definite for a
// *amqp.Failure, of unknown outcome otherwise.
func failure(err error) map[string]any {
	var f *amqp.Failure
	if errors.As(err, &f) {
		return map[string]any{"type": "error", "code": f.Reason, "text": rabbitmq.Redact(err.Error()), "definite": true}
	}
	return map[string]any{"type": "error", "code": "broker", "text": rabbitmq.Redact(err.Error())}
}
