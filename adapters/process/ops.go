package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
	"time"
)

// This file is the harness side of the protocol for amqp-locks: what the
// replies of a client's process mean, in amqp-locks' terms (amqp.Client).

// amqpCall is call in amqp-locks' terms: a definite error reply is a
// *amqp.Failure with its code as the reason; any other error (an
// *errorReply without definite among them) means the outcome is unknown.
func (c *client) amqpCall(ctx context.Context, d time.Duration, req request, wants ...string) (reply, error) {
	r, err := c.call(ctx, d, req, wants...)
	var e *errorReply
	if errors.As(err, &e) && e.definite {
		return reply{}, &amqp.Failure{Reason: e.code}
	}
	return r, err
}

// op sends one operation, within the operation timeout, and checks its
// reply's type.
func (c *client) op(ctx context.Context, req request, wants ...string) (reply, error) {
	return c.amqpCall(ctx, c.timeout, req, wants...)
}

// intField reads a reply's integer field, at least min.
func (c *client) intField(f map[string]json.RawMessage, name string, min int) (int, error) {
	var n int
	if err := json.Unmarshal(f[name], &n); err != nil || f[name] == nil || n < min {
		return 0, c.giveUp(fmt.Sprintf("sent a reply whose %q is not an integer >= %d: %s", name, min, f[name]))
	}
	return n, nil
}

func (c *client) Acquire(ctx context.Context) (int, error) {
	r, err := c.op(ctx, request{"type": "acquire"}, "acquire_ok", "acquire_fail")
	if err != nil {
		return 0, err
	}
	f := r.fields
	if r.typ == "acquire_fail" {
		var reason string
		if err := json.Unmarshal(f["reason"], &reason); err != nil || reason == "" {
			return 0, c.giveUp(fmt.Sprintf("sent an acquire_fail without a \"reason\" string (%s): want full, absent, unavailable, contended or held", f["reason"]))
		}
		return 0, &amqp.Failure{Reason: reason}
	}
	if c.kind == "mutex" {
		return 0, nil
	}
	return c.intField(f, "slot", 1)
}

func (c *client) Verify(ctx context.Context, slot int) (bool, error) {
	req := request{"type": "verify"}
	if c.kind != "mutex" {
		req["slot"] = slot
	}
	r, err := c.op(ctx, req, "verify_ok")
	if err != nil {
		return false, err
	}
	var held *bool
	if err := json.Unmarshal(r.fields["held"], &held); err != nil || held == nil {
		return false, c.giveUp(fmt.Sprintf("sent a verify_ok whose %q is not true or false: %s", "held", r.fields["held"]))
	}
	return *held, nil
}

func (c *client) Release(ctx context.Context, slot int) error {
	req := request{"type": "release"}
	if c.kind != "mutex" {
		req["slot"] = slot
	}
	_, err := c.op(ctx, req, "release_ok")
	return err
}

func (c *client) Create(ctx context.Context, slots int) error {
	_, err := c.op(ctx, request{"type": "create", "slots": slots}, "create_ok")
	return err
}

func (c *client) Change(ctx context.Context, delta int) (int, int, error) {
	r, err := c.op(ctx, request{"type": "change", "delta": delta}, "change_ok")
	if err != nil {
		return 0, 0, err
	}
	from, err := c.intField(r.fields, "from", 0)
	if err != nil {
		return 0, 0, err
	}
	to, err := c.intField(r.fields, "to", 0)
	return from, to, err
}

func (c *client) Destroy(ctx context.Context) (int, error) {
	r, err := c.op(ctx, request{"type": "destroy"}, "destroy_ok")
	if err != nil {
		return 0, err
	}
	return c.intField(r.fields, "from", 0)
}

func (c *client) Count(ctx context.Context) (int, error) {
	r, err := c.op(ctx, request{"type": "count"}, "count_ok")
	if err != nil {
		return 0, err
	}
	return c.intField(r.fields, "slots", 0)
}

func (c *client) Wait(ctx context.Context, slot int) error {
	_, err := c.amqpCall(ctx, 3*c.timeout, request{"type": "wait", "slot": slot}, "wait_ok") // a holder may take heartbeats to go
	return err
}
