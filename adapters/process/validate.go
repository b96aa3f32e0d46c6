package process

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/rabbitmq"
	"github.com/lockprover/lockprover/amqplocks"
	"github.com/lockprover/lockprover/amqplocks/broker"
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
	v := &validator{checker: checker{ctx: ctx, out: out, ok: true}, command: command, url: url, lock: rabbitmq.UniqueName("lp-validate-")}
	defer v.cleanup()
	v.semaphore()
	v.mutex()
	return v.ok
}

// A checker runs the checks of a validation and prints one line per check
// (and what to fix under a failure's), for either protocol.
type checker struct {
	ctx context.Context
	out io.Writer
	ok  bool // every check so far passed
}

// check prints check name's outcome, err nil for a pass, and says whether
// it passed. Once ctx is done nothing passes, and nothing is printed.
func (v *checker) check(name string, err error) bool {
	if v.ctx.Err() != nil {
		v.ok = false
		return false
	}
	if err == nil {
		fmt.Fprintf(v.out, "ok    %s\n", name)
		return true
	}
	v.ok = false
	fmt.Fprintf(v.out, "FAIL  %s\n      %v\n", name, err)
	return false
}

type validator struct {
	checker
	command, url, lock string
	procs              []*client
}

// start starts a process and shakes hands as client name of the lock.
func (v *validator) start(name, kind, lock string) *client {
	c, err := start(v.command, name, 10*time.Second)
	if err == nil {
		c.kind = kind
		v.procs = append(v.procs, c)
		_, err = c.amqpCall(v.ctx, handshake, request{"type": "init", "client": name, "lock": kind, "name": lock, "url": v.url, "heartbeat_ms": 1000}, "init_ok")
		if err != nil {
			err = fmt.Errorf(`answer {"id":1,"type":"init_ok"} on stdout within %v of the init request, and write nothing else there: %s`, handshake, c.why())
		}
	}
	if !v.check(fmt.Sprintf("%s starts and answers init with init_ok", name), err) {
		return nil
	}
	return c
}

// expect runs an operation and compares its result with the protocol's.
func (v *checker) expect(name string, err error, ok bool, fix string) {
	if err == nil && !ok {
		err = errors.New(fix)
	}
	v.check(name, err)
}

func (v *validator) semaphore() {
	ctx := v.ctx
	admin := v.start("admin", "semaphore", v.lock)
	if admin == nil {
		return
	}
	v.expect("create {slots:2} -> create_ok", admin.Create(ctx, 2), true, "")
	n, err := admin.Count(ctx)
	v.expect("count -> count_ok {slots:2}", err, n == 2, fmt.Sprintf("count_ok must say slots 2 after create 2, said %d", n))
	c1, c2, c3 := v.start("c1", "semaphore", v.lock), v.start("c2", "semaphore", v.lock), v.start("c3", "semaphore", v.lock)
	if c1 == nil || c2 == nil || c3 == nil {
		return
	}
	s, err := c1.Acquire(ctx)
	v.expect("acquire -> acquire_ok {slot:1}", err, s == 1, fmt.Sprintf("the first acquire on a free semaphore must take slot 1 (scan from 1), took %d", s))
	held, err := c1.Verify(ctx, 1)
	v.expect("verify {slot:1} -> verify_ok {held:true}", err, held, "verify of a slot just acquired must say held:true")
	s, err = c2.Acquire(ctx)
	v.expect("a second client's acquire -> acquire_ok {slot:2}", err, s == 2, fmt.Sprintf("with slot 1 held, acquire must take slot 2, took %d", s))
	_, err = c3.Acquire(ctx)
	var f *amqp.Failure
	full := errors.As(err, &f) && (f.Reason == "full" || f.Reason == "unavailable")
	if full {
		err = nil
	}
	v.expect(`a third client's acquire -> acquire_fail {reason:"full"} (or "unavailable")`, err, full, `with every slot held, answer {"type":"acquire_fail","reason":"full"} (or "unavailable" if the implementation cannot tell full from absent)`)
	v.expect("release {slot:1} -> release_ok", c1.Release(ctx, 1), true, "")
	held, err = c1.Verify(ctx, 1)
	v.expect("verify after release -> verify_ok {held:false}", err, !held, "after release_ok, verify of that slot must say held:false")
	from, to, err := admin.Change(ctx, -1)
	v.expect("change {delta:-1} -> change_ok {from:2,to:1}", err, from == 2 && to == 1, fmt.Sprintf("change_ok must carry from and to (2 and 1 here), carried %d and %d", from, to))
	held, err = c2.Verify(ctx, 2)
	v.expect("verify of a removed slot -> verify_ok {held:false}", err, !held, "after an admin removed slot 2, its holder's verify must say held:false")
	v.expect("release {slot:2} -> release_ok", c2.Release(ctx, 2), true, "")
	v.expect("wait {slot:1} -> wait_ok", admin.Wait(ctx, 1), true, "")
	_, err = admin.op(ctx, request{"type": "frobnicate"}, "frobnicate_ok")
	unsupported := errors.As(err, &f) && f.Reason == "unsupported"
	if unsupported {
		err = nil
	}
	v.expect("an unknown request -> error {code:unsupported, definite:true}", err, unsupported, `answer a request type you do not support with {"type":"error","code":"unsupported","definite":true}`)
	from, err = admin.Destroy(ctx)
	v.expect("destroy -> destroy_ok {from:1}", err, from == 1, fmt.Sprintf("destroy_ok must say how many slots there were (1 here), said %d", from))
	for _, c := range []*client{admin, c1, c2, c3} {
		v.ends(c)
	}
}

func (v *validator) mutex() {
	ctx := v.ctx
	if ctx.Err() != nil {
		return
	}
	m1, m2 := v.start("m1", "mutex", v.lock+"-m"), v.start("m2", "mutex", v.lock+"-m")
	if m1 == nil || m2 == nil {
		return
	}
	_, err := m1.Acquire(ctx)
	v.expect("mutex: acquire -> acquire_ok", err, true, "")
	_, err = m2.Acquire(ctx)
	var f *amqp.Failure
	held := errors.As(err, &f) && f.Reason == "held"
	if held {
		err = nil
	}
	v.expect(`mutex: a second acquire -> acquire_fail {reason:"held"}`, err, held, `a true mutex held by another client: answer {"type":"acquire_fail","reason":"held"}`)
	ok, err := m1.Verify(ctx, 0)
	v.expect("mutex: verify -> verify_ok {held:true}", err, ok, "the holder's verify must say held:true")
	v.expect("mutex: release -> release_ok", m1.Release(ctx, 0), true, "")
	v.ends(m1)
	v.ends(m2)
}

// ends checks that the process exits within 5 s of its stdin closing.
func (v *checker) ends(c *client) {
	if v.ctx.Err() != nil {
		return // cleanup kills it
	}
	c.stdin.Close()
	var err error
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		err = errors.New("when its stdin closes, a process must close its connection and exit within 5 s")
		c.Signal(syscall.SIGKILL)
	}
	v.check(c.name+" exits when its stdin closes", err)
	c.mu.Lock()
	crashed := c.crashed
	c.mu.Unlock()
	if crashed != "" && !strings.HasPrefix(crashed, "exited") {
		v.check(c.name+" kept to the protocol", errors.New(c.why()))
	}
}

// cleanup kills what is left and deletes every queue the checks made.
func (v *validator) cleanup() {
	for _, c := range v.procs {
		c.Signal(syscall.SIGKILL)
		c.wait()
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
