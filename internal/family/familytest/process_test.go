package familytest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"pgregory.net/rapid"
)

// The toy's side of the process protocol, built on the generic launcher
// alone: its processes share a folder, where the lock is a file named
// after the lock and holding its holder's name.
//
//	-> {"id":1,"type":"init","client":"c1","lock":"toy-lock","name":"lp-toy-3","dir":"/tmp/..."}
//	-> {"id":2,"type":"take"}   <- {"id":2,"type":"take_ok"}  or  {"id":2,"type":"take_fail","reason":"held"}
//	-> {"id":3,"type":"drop"}   <- {"id":3,"type":"drop_ok"}  or  {"id":3,"type":"drop_fail","reason":"not held"}

// toyInit is the init of client name of lock in dir.
func toyInit(name, lock, dir string) process.Request {
	return process.Request{"type": "init", "client": name, "lock": toyKind, "name": lock, "dir": dir}
}

// toyServe serves the toy's reference (or its mutant) over the protocol:
// serve-reference --kind toy-lock.
func toyServe(in io.Reader, out, _ io.Writer, mutant, options string) error {
	switch {
	case mutant != "" && mutant != "takes-held":
		return family.Usagef("--mutant: no toy mutant named %q", mutant)
	case options != "":
		return family.Usagef("--options: the toy has none")
	}
	s := &toyServer{broken: mutant != ""}
	return process.Server{Handle: s.handle}.Serve(in, out)
}

// toyServer is one client of the toy's reference, in a process.
type toyServer struct {
	broken     bool
	name, file string
}

func (s *toyServer) handle(typ string, req map[string]json.RawMessage) map[string]any {
	if typ == "init" {
		var lock, dir string
		for field, v := range map[string]*string{"client": &s.name, "name": &lock, "dir": &dir} {
			if err := json.Unmarshal(req[field], v); err != nil || *v == "" {
				return process.Refuse("bad request", fmt.Sprintf("field %q: want a non-empty string", field))
			}
		}
		s.file = filepath.Join(dir, lock)
		return map[string]any{"type": "init_ok"}
	}
	if s.file == "" {
		return process.Refuse("not initialised", "the first request must be init")
	}
	switch typ {
	case take:
		return s.take()
	case drop:
		if holder, _ := os.ReadFile(s.file); string(holder) != s.name {
			return map[string]any{"type": "drop_fail", "reason": "not held"}
		}
		if err := os.Remove(s.file); err != nil {
			return map[string]any{"type": "error", "code": "backend", "text": err.Error()}
		}
		return map[string]any{"type": "drop_ok"}
	}
	return nil
}

// take creates the lock's file, holding the client's name, unless another
// holds it (the mutant never looks).
func (s *toyServer) take() map[string]any {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if s.broken {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(s.file, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		if holder, _ := os.ReadFile(s.file); string(holder) == s.name {
			return map[string]any{"type": "take_ok"}
		}
		return map[string]any{"type": "take_fail", "reason": "held"}
	}
	if err == nil {
		_, err = f.WriteString(s.name)
		f.Close()
	}
	if err != nil {
		return map[string]any{"type": "error", "code": "backend", "text": err.Error()}
	}
	return map[string]any{"type": "take_ok"}
}

// toyProcesses proves an implementation of the toy in processes: each
// plan's clients are processes of command, sharing a folder of the run's
// own, and run one step at a time in the plan's schedule.
type toyProcesses struct {
	l     *process.Launcher
	dir   string
	locks atomic.Int64
}

// toyImplSetup is the setup of a run against the implementation command:
// its folder is made at the start and removed at the end.
func toyImplSetup(command string) *family.Setup {
	tp := &toyProcesses{l: &process.Launcher{Command: command}}
	return &family.Setup{Prove: tp, Target: "sim", Where: "processes of the implementation", What: fmt.Sprintf("%q", command),
		Replay: []string{"--impl", family.Quote(command)}, Interrupt: tp.l.Stop,
		Start: func(context.Context) (err error) {
			tp.dir, err = os.MkdirTemp("", "lockprover-toy-")
			return err
		},
		Stop: func() {
			tp.l.Stop()
			if tp.dir != "" {
				os.RemoveAll(tp.dir)
			}
		},
	}
}

func (tp *toyProcesses) Draw(t *rapid.T) prover.Plan { return toyProof{}.Draw(t) }

func (*toyProcesses) Deterministic() bool { return false }

func (tp *toyProcesses) String() string { return tp.l.String() }

// Run runs the plan's clients as processes, one step at a time as its
// schedule says; a step whose outcome is unknown ends its client.
func (tp *toyProcesses) Run(ctx context.Context, p prover.Plan) (*prover.Result, error) {
	plan := p.(*toyPlan)
	lock := fmt.Sprintf("lp-toy-%d", tp.locks.Add(1))
	var now int64
	rec := histories.NewRecorder(func() int64 { now += 1000; return now })
	clients := make([]*process.Client, len(plan.Clients))
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range plan.Clients {
		name := fmt.Sprintf("c%d", i+1)
		c, err := tp.l.Connect(ctx, lock, name, toyInit(name, lock, tp.dir))
		if err != nil {
			return nil, err
		}
		clients[i] = c
	}
	for i, op := range plan.steps() {
		c := clients[i]
		if c.Broken() {
			continue
		}
		rec.Add(histories.Event{Process: c.Name(), Type: histories.Invoke, F: op, Lock: "toy", Kind: toyKind})
		rec.Add(toyOutcome(ctx, c, op))
	}
	return &prover.Result{History: rec.Events(), Evidence: model.Evidence{Lock: "toy"}}, nil
}

// toyOutcome sends op to c and says how it completed.
func toyOutcome(ctx context.Context, c *process.Client, op string) histories.Event {
	done := histories.Event{Process: c.Name(), Type: histories.Ok, F: op, Lock: "toy", Kind: toyKind}
	r, err := c.Call(ctx, c.Timeout(), process.Request{"type": op}, op+"_ok", op+"_fail")
	var reason string
	switch {
	case err != nil:
		done.Type, done.Error = histories.Info, err.Error()
	case r.Type == op+"_fail" && json.Unmarshal(r.Fields["reason"], &reason) == nil && reason != "":
		done.Type, done.Value = histories.Fail, &toyValue{Reason: reason}
	case r.Type == op+"_fail":
		done.Type, done.Error = histories.Info, c.GiveUp("sent a _fail without a \"reason\" string").Error()
	}
	return done
}

// toyAnswer says how op completed, as the protocol's reply: detail is a
// failure's reason, or what went wrong when the outcome is unknown.
func toyAnswer(op string, typ histories.Type, detail string) string {
	switch typ {
	case histories.Ok:
		return op + "_ok"
	case histories.Fail:
		return fmt.Sprintf("%s_fail {reason:%q}", op, detail)
	}
	return "no answer (" + detail + ")"
}

// toyValidate checks an implementation of the toy: two clients of one
// lock take and drop it as a try-lock must, and an unknown request is
// unsupported.
func toyValidate(ctx context.Context, command string, _ family.Settings, out io.Writer) (bool, error) {
	dir, err := os.MkdirTemp("", "lockprover-toy-validate-")
	if err != nil {
		return false, &family.UsageError{Err: err}
	}
	defer os.RemoveAll(dir)
	v := process.NewChecker(ctx, out)
	l := &process.Launcher{Command: command}
	defer l.Stop()
	var cs []*process.Client
	for _, name := range []string{"c1", "c2"} {
		c, err := l.Connect(ctx, "lp-validate", name, toyInit(name, "lp-validate", dir))
		if !v.Check(name+" starts and answers init with init_ok", err) {
			return false, nil
		}
		cs = append(cs, c)
	}
	c1, c2 := cs[0], cs[1]
	// expect checks that op answers ok (reason "") or fails for reason.
	expect := func(c *process.Client, op, reason, fix string) {
		want, got := toyAnswer(op, histories.Ok, ""), toyOutcome(ctx, c, op)
		if reason != "" {
			want = toyAnswer(op, histories.Fail, reason)
		}
		answered := toyAnswer(op, got.Type, got.Error)
		if got.Value != nil {
			answered = toyAnswer(op, got.Type, histories.Reason(got.Value))
		}
		v.Expect(fmt.Sprintf("%s: %s -> %s", c.Name(), op, want), nil, answered == want, fmt.Sprintf("%s: answer %s, not %s", fix, want, answered))
	}
	expect(c1, take, "", "a free lock is taken")
	expect(c2, take, "held", "a lock another client holds is not taken")
	expect(c2, drop, "not held", "a lock the client does not hold is not dropped")
	expect(c1, drop, "", "the holder drops the lock")
	_, err = c1.Call(ctx, c1.Timeout(), process.Request{"type": "frobnicate"}, "frobnicate_ok")
	var e *process.ErrorReply
	v.Expect("an unknown request -> error {code:unsupported, definite:true}", nil, errors.As(err, &e) && e.Code == "unsupported" && e.Definite, `answer {"type":"error","code":"unsupported","definite":true}`)
	v.Ends(c1)
	v.Ends(c2)
	return v.OK, nil
}
