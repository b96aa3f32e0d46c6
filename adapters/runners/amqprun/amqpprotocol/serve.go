package amqpprotocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
)

// Serve speaks the protocol as an implementation: it reads requests from
// r and answers on w until r ends, serving lockprover's reference with
// options o (or, if mutant is set, that mutant of it). It is what
// `lockprover serve-reference` runs; the transport is the generic one
// (process.Server), as lenient with lines that are not requests as it
// always was.
func Serve(r io.Reader, w io.Writer, o amqprun.Options, mutant string) error {
	s := &server{o: o, mutant: mutant}
	defer s.close()
	return process.Server{Handle: s.handle, Lenient: true}.Serve(r, w)
}

type server struct {
	o      amqprun.Options
	mutant string
	plan   *amqprun.Plan
	name   string
	url    string
	client amqprun.Client
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
	c, err := amqprun.ImplFor(s.plan).Connect(context.Background(), rabbitmq.New(s.url), s.plan, s.name)
	if err != nil {
		return err
	}
	s.client = c
	return nil
}

// handle answers one request of type typ: init sets the server up, and
// every other request is an operation on its client, connected again
// first if its connection was lost.
func (s *server) handle(typ string, req map[string]json.RawMessage) map[string]any {
	f := &lenient{req: req}
	if typ == "init" {
		return s.init(f)
	}
	if s.plan == nil {
		return process.Refuse("not initialised", "the first request must be init")
	}
	if err := s.connect(); err != nil {
		return failure(err)
	}
	for _, field := range []string{"slot", "slots", "delta"} {
		f.num(field)
	}
	if f.bad != nil {
		return f.badRequest()
	}
	return s.operate(typ, f)
}

// lenient decodes a request's fields: a field left out is its zero value,
// one present must be of its type (the first that is not is bad).
type lenient struct {
	req map[string]json.RawMessage
	bad error
}

func (f *lenient) decode(field string, v any) {
	if raw, ok := f.req[field]; ok && f.bad == nil {
		if err := json.Unmarshal(raw, v); err != nil {
			f.bad = fmt.Errorf("field %q: %v", field, err)
		}
	}
}

func (f *lenient) num(field string) int {
	var n int
	f.decode(field, &n)
	return n
}

func (f *lenient) badRequest() map[string]any {
	return process.Refuse("bad request", f.bad.Error())
}

// init sets up the plan the requests after it run in, with the
// heartbeat init proposes, and connects.
func (s *server) init(f *lenient) map[string]any {
	var lock, name string
	f.decode("client", &s.name)
	f.decode("lock", &lock)
	f.decode("url", &s.url)
	f.decode("name", &name)
	hb := f.num("heartbeat_ms")
	if f.bad != nil {
		return f.badRequest()
	}
	o := s.o
	o.HeartbeatMs = amqprun.Ms(max(hb, 0)) // the protocol's meaning is the plan's: 0 proposes none
	s.plan = &amqprun.Plan{Version: amqprun.PlanVersion, Kind: lock, Lock: name, Options: o, Mutant: s.mutant}
	if err := s.connect(); err != nil {
		return failure(err)
	}
	if s.mutant == "" {
		// amqp091-go ends a socket without a connection.close only when
		// its heartbeat read deadline passes; a mutant's defects are
		// its own, so it declares nothing.
		return map[string]any{"type": "init_ok", "abrupt_close": "heartbeat"}
	}
	return map[string]any{"type": "init_ok"}
}

// operate runs an operation of type typ on the client, its fields already
// checked, and answers with its result.
func (s *server) operate(typ string, f *lenient) map[string]any {
	ctx := context.Background()
	c := s.client
	switch typ {
	case "acquire":
		return s.acquire(ctx)
	case "verify":
		held, err := c.Verify(ctx, f.num("slot"))
		if err != nil {
			return failure(err)
		}
		return map[string]any{"type": "verify_ok", "held": held}
	case "release":
		return done("release_ok", c.Release(ctx, f.num("slot")))
	case "create":
		return done("create_ok", c.Create(ctx, f.num("slots")))
	case "change":
		from, to, err := c.Change(ctx, f.num("delta"))
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
		return done("wait_ok", c.Wait(ctx, f.num("slot")))
	}
	return nil // unsupported
}

// acquire answers an acquire: a failure with one of the protocol's
// reasons is acquire_fail, and a mutex's acquire_ok has no slot.
func (s *server) acquire(ctx context.Context) map[string]any {
	slot, err := s.client.Acquire(ctx)
	var f *amqprun.Failure
	switch {
	case errors.As(err, &f) && (f.Reason == "full" || f.Reason == "absent" || f.Reason == "unavailable" || f.Reason == "contended" || f.Reason == "held"):
		return map[string]any{"type": "acquire_fail", "reason": f.Reason}
	case err != nil:
		return failure(err)
	case s.plan.Kind == "mutex":
		return map[string]any{"type": "acquire_ok"}
	}
	return map[string]any{"type": "acquire_ok", "slot": slot}
}

func done(typ string, err error) map[string]any {
	if err != nil {
		return failure(err)
	}
	return map[string]any{"type": typ}
}

// failure turns an error into the protocol's: definite for a
// *Failure, of unknown outcome otherwise.
func failure(err error) map[string]any {
	var f *amqprun.Failure
	if errors.As(err, &f) {
		return process.Refuse(f.Reason, rabbitmq.Redact(err.Error()))
	}
	return map[string]any{"type": "error", "code": "broker", "text": rabbitmq.Redact(err.Error())}
}
