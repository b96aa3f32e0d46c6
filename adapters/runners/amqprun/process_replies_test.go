package amqprun_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/internal/quick"
)

// A reply the harness cannot decode exactly is a protocol error that says
// what is wrong with it, never a value read half-way or in another case.
func TestRepliesDecodedStrictly(t *testing.T) {
	t.Parallel()
	p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "x", Slots: 1}
	init := `read l; echo '{"id":1,"type":"init_ok"}'; read l; `
	for _, tc := range []struct{ name, reply, want string }{
		{"id a string", `{"id":"2","type":"acquire_ok","slot":1}`, `answered with an id that is not an integer ("2")`},
		{"type a number", `{"id":2,"type":5}`, `answered without a "type" string`},
		{"code in capitals", `{"id":2,"type":"error","CODE":"full","definite":true}`, `sent an error without a "code" string`},
		{"definite a string", `{"id":2,"type":"error","code":"full","definite":"yes"}`, `sent an error whose "definite" is not true or false`},
		{"text a number", `{"id":2,"type":"error","code":"broker","text":5}`, `sent an error whose "text" is not a string`},
		{"reason a number", `{"id":2,"type":"acquire_fail","reason":3}`, `sent an acquire_fail without a "reason" string (3)`},
		{"slot a string", `{"id":2,"type":"acquire_ok","slot":"1"}`, `sent a reply whose "slot" is not an integer >= 1`},
		{"an array", `[2]`, `wrote a line that is not a JSON object`},
		{"the wrong type", `{"id":2,"type":"release_ok"}`, `answered "release_ok" to a request that wants "acquire_ok" or "acquire_fail"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			impl := amqpprotocol.NewProcesses(init + "echo '" + tc.reply + "'; sleep 600")
			defer impl.Stop()
			c, err := impl.Connect(context.Background(), addrOnly{}, p, "c1")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Acquire(context.Background())
			var f *amqprun.Failure
			if err == nil || errors.As(err, &f) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("acquire: %v, want a protocol error saying %q", err, tc.want)
			}
			if crashed := c.(amqprun.ProcessClient).Crashed(); !strings.Contains(crashed, tc.want) {
				t.Errorf("the process is not reported as broken for it: %q", crashed)
			}
		})
	}
}

// "unavailable" (no slot: full or absent, for implementations that cannot
// tell them apart) is a failure reason for acquire, as full and absent are.
func TestAcquireUnavailable(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "x", Slots: 1}
	impl := amqpprotocol.NewProcesses(`read l; echo '{"id":1,"type":"init_ok"}'; read l; echo '{"id":2,"type":"acquire_fail","reason":"unavailable"}'; sleep 600`)
	defer impl.Stop()
	c, err := impl.Connect(context.Background(), addrOnly{}, p, "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Acquire(context.Background())
	var f *amqprun.Failure
	if !errors.As(err, &f) || f.Reason != "unavailable" {
		t.Fatalf("acquire: %v, want a failure with reason unavailable", err)
	}
}

// validate-impl takes "unavailable" where it wants "full": the reference
// with its "full" rewritten passes.
func TestValidateAcceptsUnavailable(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	var out strings.Builder
	impl := lockprover + ` serve-reference | sed -u 's/"reason":"full"/"reason":"unavailable"/'`
	if !amqpprotocol.Validate(impl, rabbitmqtest.URL(t), &out) {
		t.Fatalf("an implementation answering unavailable for full fails validation:\n%s", out.String())
	}
}

// No message shows the broker's password: not the last request (the init,
// which carries the URL), not what the process wrote.
func TestMessagesHideThePassword(t *testing.T) {
	t.Parallel()
	p := &amqprun.Plan{Version: amqprun.PlanVersion, Kind: "semaphore", Lock: "x", Slots: 1}
	impl := amqpprotocol.NewProcesses(`read l; echo "cannot use $l" >&2; echo "{\"id\":1,\"type\":\"error\",\"code\":\"broker\",\"text\":\"cannot dial amqp://guest:guest@127.0.0.1:1/\",\"definite\":true}"`)
	_, err := impl.Connect(context.Background(), addrOnly{}, p, "c1")
	if err == nil {
		t.Fatal("started")
	}
	impl2 := amqpprotocol.NewProcesses(`read l; echo "cannot use $l" >&2; exit 3`)
	_, err2 := impl2.Connect(context.Background(), addrOnly{}, p, "c1")
	if err2 == nil {
		t.Fatal("started")
	}
	for _, e := range []error{err, err2} {
		if strings.Contains(e.Error(), "guest:guest") {
			t.Errorf("the password shows: %v", e)
		}
	}
	if !strings.Contains(err2.Error(), "guest:xxxxx@") {
		t.Errorf("the URL is not shown redacted: %v", err2)
	}
}
