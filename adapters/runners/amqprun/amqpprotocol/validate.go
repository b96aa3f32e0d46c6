package amqpprotocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/served/amqpserve"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// Validate checks an implementation's handling of the protocol against the
// broker at url, before a first prove: the handshake, each message, errors
// and ids. It prints one line per check, with what to fix for each failure,
// and reports whether every check passed. Every queue it makes is deleted.
func Validate(command, url string, out io.Writer) bool {
	return ValidateContext(context.Background(), command, url, out)
}

// ValidateContext is Validate, cut short when ctx ends (the checks left
// are not run, every process is killed and every queue deleted).
func ValidateContext(ctx context.Context, command, url string, out io.Writer) bool {
	return ValidateInit(ctx, command, 0, url, out)
}

// validateHeartbeatMs is the heartbeat validate-impl's processes propose:
// no check waits for the broker to notice a dead client, and 1s heartbeats
// lapsed on a loaded machine ("read tcp ...: i/o timeout" failed a release).
const validateHeartbeatMs = 5000

// ValidateInit is ValidateContext giving each process initTimeout to
// answer init (0 for the protocol's 10 s).
func ValidateInit(ctx context.Context, command string, initTimeout time.Duration, url string, out io.Writer) bool {
	v := &validator{Checker: process.NewChecker(ctx, out), launcher: process.Launcher{Command: command, Timeout: 10 * time.Second, InitTimeout: initTimeout, CheckInit: checkInit},
		url: url, lock: rabbitmq.UniqueName("lp-validate-")}
	defer v.cleanup()
	v.semaphore()
	v.mutex()
	return v.OK && ctx.Err() == nil // a check cut short by the cancel passed nothing
}

type validator struct {
	process.Checker
	launcher  process.Launcher
	url, lock string
	procs     []*process.Client
	// On the served simulator (ValidateServed): the broker serving it,
	// and the World's view of the one process the checks run in, through
	// which each of the implementation's processes is served.
	served *amqpserve.Broker
	b      broker.Broker
	// inits are the init requests sent, by process name, for a reset's
	// init again (Resets).
	inits map[string]process.Request
}

// ValidateServed is ValidateInit on the simulated broker served on the
// wire (as RabbitMQ version, "" for 3.10.8), needing no broker: the
// checks run as one process of a World, each of the implementation's
// processes served on a port of its own and its frames taken as it
// waits. A method the served broker does not serve fails the run, named.
func ValidateServed(ctx context.Context, command string, initTimeout time.Duration, version string, out io.Writer) bool {
	var s *amqpserve.Broker
	w := rabbitmqsim.New(rabbitmqsim.Options{Version: version, Pace: func(from, to int64) { s.Pace(from, to) }})
	s = amqpserve.New(w, amqpserve.Options{Version: version})
	v := &validator{Checker: process.NewChecker(ctx, out), launcher: process.Launcher{Command: command, Timeout: 10 * time.Second, InitTimeout: initTimeout, CheckInit: checkInit},
		lock: rabbitmq.UniqueName("lp-validate-"), served: s}
	w.Go("validate", func(b broker.Broker) {
		v.b = b
		defer v.cleanup()
		v.semaphore()
		v.mutex()
	})
	err := w.Run()
	s.Close()
	if m := s.Unserved(); len(m) > 0 {
		v.Check("every method it sent is one the simulated broker serves", fmt.Errorf("it sent %s, answered 503 COMMAND_INVALID as RabbitMQ answers a method it has no handler for: validate it on a real broker (--amqp-url)", strings.Join(m, ", ")))
	}
	if err != nil {
		v.Check("the simulated broker ran to the end", err)
	}
	return v.OK && ctx.Err() == nil
}

// start starts a process and shakes hands as client name of the lock.
func (v *validator) start(name, kind, lock string) *procClient {
	ctx, url := v.Ctx, v.url
	if v.served != nil {
		p, err := v.served.Process(name, v.b)
		if err != nil {
			v.Check(fmt.Sprintf("%s gets a port of the simulated broker", name), err)
			return nil
		}
		ctx, url = process.WithWaiter(ctx, p), p.URL()
	}
	init := initRequest(name, kind, lock, url, validateHeartbeatMs)
	if v.inits == nil {
		v.inits = map[string]process.Request{}
	}
	v.inits[name] = init
	c, err := v.launcher.Handshake(ctx, name, init)
	if c != nil {
		v.procs = append(v.procs, c)
		var bad *process.BadInit
		if err != nil && !errors.As(err, &bad) {
			err = fmt.Errorf(`answer {"id":1,"type":"init_ok"} on stdout within %v of the init request, and write nothing else there: %s`, v.launcher.InitTimeoutOrDefault(), c.Why())
		}
	}
	if !v.Check(fmt.Sprintf("%s starts and answers init with init_ok", name), err) {
		return nil
	}
	return &procClient{Client: c, kind: kind}
}

func (v *validator) semaphore() {
	ctx := v.Ctx
	admin := v.start("admin", "semaphore", v.lock)
	if admin == nil {
		return
	}
	v.Expect("create {slots:2} -> create_ok", admin.Create(ctx, 2), true, "")
	n, err := admin.Count(ctx)
	v.Expect("count -> count_ok {slots:2}", err, n == 2, fmt.Sprintf("count_ok must say slots 2 after create 2, said %d", n))
	c1, c2, c3 := v.start("c1", "semaphore", v.lock), v.start("c2", "semaphore", v.lock), v.start("c3", "semaphore", v.lock)
	if c1 == nil || c2 == nil || c3 == nil {
		return
	}
	// The spec's scan starts at slot 1, but allows other orders: the
	// first acquire may take either slot, the second the other.
	s1, err := c1.Acquire(ctx)
	v.Expect("acquire -> acquire_ok {slot:1 or 2}", err, s1 == 1 || s1 == 2, fmt.Sprintf("the first acquire on a free semaphore of 2 slots must take one of them (slot 1 if the scan starts at 1), took %d", s1))
	if s1 != 2 {
		s1 = 1 // the checks below go on as if it took slot 1
	}
	held, err := c1.Verify(ctx, s1)
	v.Expect(fmt.Sprintf("verify {slot:%d} -> verify_ok {held:true}", s1), err, held, "verify of a slot just acquired must say held:true")
	s2, err := c2.Acquire(ctx)
	v.Expect(fmt.Sprintf("a second client's acquire -> acquire_ok {slot:%d}", 3-s1), err, s2 == 3-s1, fmt.Sprintf("with slot %d held, acquire must take slot %d, took %d", s1, 3-s1, s2))
	s2 = 3 - s1
	_, err = c3.Acquire(ctx)
	var f *amqprun.Failure
	full := errors.As(err, &f) && (f.Reason == "full" || f.Reason == "unavailable")
	if full {
		err = nil
	}
	v.Expect(`a third client's acquire -> acquire_fail {reason:"full"} (or "unavailable")`, err, full, `with every slot held, answer {"type":"acquire_fail","reason":"full"} (or "unavailable" if the implementation cannot tell full from absent)`)
	v.Expect(fmt.Sprintf("release {slot:%d} -> release_ok", s1), c1.Release(ctx, s1), true, "")
	held, err = c1.Verify(ctx, s1)
	v.Expect("verify after release -> verify_ok {held:false}", err, !held, "after release_ok, verify of that slot must say held:false")
	from, to, err := admin.Change(ctx, -1)
	v.Expect("change {delta:-1} -> change_ok {from:2,to:1}", err, from == 2 && to == 1, fmt.Sprintf("change_ok must carry from and to (2 and 1 here), carried %d and %d", from, to))
	if s2 == 2 {
		held, err = c2.Verify(ctx, 2)
		v.Expect("verify of a removed slot -> verify_ok {held:false}", err, !held, "after an admin removed slot 2, its holder's verify must say held:false")
	} else {
		held, err = c2.Verify(ctx, 1)
		v.Expect("verify of slot 1 after slot 2 was removed -> verify_ok {held:true}", err, held, "removing slot 2 leaves slot 1's holder holding it: its verify must say held:true")
	}
	from, to, err = admin.Change(ctx, +1)
	v.Expect("change {delta:1} -> change_ok {from:1,to:2}", err, from == 1 && to == 2, fmt.Sprintf("change_ok must carry from and to (1 and 2 here), carried %d and %d", from, to))
	if s2 == 2 {
		held, err = c2.Verify(ctx, 2)
		v.Expect("verify of a removed slot created again -> verify_ok {held:false}", err, !held,
			"a verify that said held:false relinquished the slot (the spec's lock-relinquished): its holder must not say held:true again, even once an admin creates the slot again, until it acquires anew")
		// A holder that kept its B queue deletes it now; one that let go
		// at its verify (deleting it then) holds nothing to release.
		err = c2.Release(ctx, 2)
		notHeld := errors.As(err, &f) && f.Reason == "not held"
		if notHeld {
			err = nil
		}
		v.Expect(`release {slot:2} of the relinquished slot -> release_ok (or error {code:"not held", definite:true})`, err, true, "")
	} else {
		v.Expect("release {slot:1} -> release_ok", c2.Release(ctx, 1), true, "")
	}
	v.Expect("wait {slot:1} -> wait_ok", admin.Wait(ctx, 1), true, "")
	_, err = admin.op(ctx, process.Request{"type": "frobnicate"}, "frobnicate_ok")
	unsupported := errors.As(err, &f) && f.Reason == "unsupported"
	if unsupported {
		err = nil
	}
	v.Expect("an unknown request -> error {code:unsupported, definite:true}", err, unsupported, `answer a request type you do not support with {"type":"error","code":"unsupported","definite":true}`)
	from, err = admin.Destroy(ctx)
	v.Expect("destroy -> destroy_ok {from:2}", err, from == 2, fmt.Sprintf("destroy_ok must say how many slots there were (2 here), said %d", from))
	for _, c := range []*procClient{admin, c1, c2, c3} {
		v.Ends(c.Client)
	}
}

func (v *validator) mutex() {
	ctx := v.Ctx
	if ctx.Err() != nil {
		return
	}
	m1, m2 := v.start("m1", "mutex", v.lock+"-m"), v.start("m2", "mutex", v.lock+"-m")
	if m1 == nil || m2 == nil {
		return
	}
	_, err := m1.Acquire(ctx)
	v.Expect("mutex: acquire -> acquire_ok", err, true, "")
	_, err = m2.Acquire(ctx)
	var f *amqprun.Failure
	held := errors.As(err, &f) && f.Reason == "held"
	if held {
		err = nil
	}
	v.Expect(`mutex: a second acquire -> acquire_fail {reason:"held"}`, err, held, `a true mutex held by another client: answer {"type":"acquire_fail","reason":"held"}`)
	ok, err := m1.Verify(ctx, 0)
	v.Expect("mutex: verify -> verify_ok {held:true}", err, ok, "the holder's verify must say held:true")
	v.Expect("mutex: release -> release_ok", m1.Release(ctx, 0), true, "")
	if v.Resets(m1.Client, v.inits["m1"]) {
		// A new run of m1's, holding nothing: the mutex is free.
		_, err = m1.Acquire(ctx)
		v.Expect("mutex, reset: acquire -> acquire_ok", err, true, "after reset a process holds nothing, and m2 holds nothing: the mutex is free")
		v.Expect("mutex, reset: release -> release_ok", m1.Release(ctx, 0), true, "")
	}
	v.Ends(m1.Client)
	v.Ends(m2.Client)
}

// cleanup kills what is left and deletes every queue the checks made.
func (v *validator) cleanup() {
	for _, c := range v.procs {
		c.Kill()
	}
	if v.served != nil {
		return // the World, and every queue in it, goes with the run
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := rabbitmq.New(v.url).Dial(ctx, broker.Config{Name: "lockprover-validate"})
	if err != nil {
		return
	}
	defer conn.Close()
	names := []string{v.lock, v.lock + "-m"}
	for l := 1; l <= 4; l++ {
		names = append(names, amqplocks.SlotQueue(v.lock, l), amqplocks.HolderQueue(v.lock, l))
	}
	for _, n := range names {
		if ch, err := conn.Channel(ctx); err == nil {
			ch.Delete(ctx, n, broker.DeleteOptions{})
			ch.Close()
		}
	}
}
