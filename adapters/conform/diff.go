package conform

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/internal/rapidbatch"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
	"github.com/lockprover/lockprover/sim/rabbitmqsim/semantics"
)

// Part 2: differential testing. rapid draws sequences of low-level
// operations over 2-3 connections ("A", "B", "C") with 1-2 channels each
// ("A", "A.2") on 2-3 queue names; each sequence runs, in the step language
// of package semantics (semantics.Run), on the simulator and on the real
// broker, and what the client observed must be identical step by step: the
// reply code and whether the channel or the connection died, ack / nack /
// return+ack for a publish, the count of a delete or purge, "ok" or "empty"
// for a get, why a connection closed, and, for an inspect step, the queue
// as the broker lists it (durable, auto-delete, exclusive owner, ready
// messages, consumers). A divergence is any step whose two observations
// differ: sequences have no table to allow alternatives. rapid then
// shrinks the sequence (rapid's shrinking keeps a smaller sequence only if
// it still diverges), and the minimal one is run again on RabbitMQ a few
// times to say how reproducible it is.
//
// What is excluded, and why:
//
//   - The broker's asynchronous release after a connection dies without an
//     AMQP close. A kill (the fault proxy closes the sockets) or a forced
//     close is followed, on RabbitMQ, by a wait until the broker holds
//     nothing of the connection any more (its process, its channels, its
//     exclusive queues: Env.Settle), and in the simulator by 50
//     virtual ms, more than its largest socket-close release delay (36.8
//     ms). The measured release delay is itself covered by table case 7a;
//     here it would only make the next steps race.
//   - The broker's asynchronous release after a connection.close: RabbitMQ
//     4.3.6 may delete the connection's exclusive queues a few
//     milliseconds after close-ok (docs/broker-semantics.md, 1b, row 6.8,
//     where TestSemanticsByVersion measures it; the simulator as 4.3.6
//     has it). On RabbitMQ a close is followed by the same wait as a
//     kill's; the simulator, as 3.10.8, releases at close-ok.
//   - The broker's asynchronous tidying after a channel closes (close, or
//     a channel error): RabbitMQ requeues the channel's unacknowledged
//     messages and drops its consumers when the channel process ends,
//     which can be after close-ok (a get, a channel close and an
//     immediate purge elsewhere counted 0 instead of 1 in 14 of 1000 runs
//     here). On RabbitMQ, Env.Settle makes the next step wait until the
//     broker runs exactly the channels the clients have open; the
//     simulator tidies at once.
//   - Partitions and heartbeats: an operation on a partitioned connection
//     blocks the sequence for 1.5 heartbeats; the timed table cases cover
//     them.
//   - Faults that kill a connection in the middle of an operation
//     (publish immediate=true, a queue name over 255 bytes): the broker
//     releases that connection asynchronously and no step can wait for it;
//     table cases 4.13 and 12.8 cover them.
//   - Broker restarts (shared broker).
//   - Exact error texts: observations are reply codes and scopes only (an
//     error without a code is shown as text, and would diverge).
//
// Steps on a connection that has died give client-side 504s on both sides
// and are compared like any other.

// An Op is one drawn operation. Step turns it into a semantics.Step.
type Op struct {
	On   string // "A", "A.2", ...; "" for broker-side steps (inspect)
	Kind string // declare, passive, publish, delete, consume, get, purge, inspect, reopen, close-channel, close-conn, kill, force-close, redial, conn-error
	// Queue is the symbolic queue name ("Q1"...).
	Queue                          string
	Durable, Exclusive, AutoDelete bool
	// Args: 0 none, 1 x-max-length=0, 2 x-max-length=0 and
	// x-overflow=reject-publish.
	Args              int
	Mandatory         bool
	IfUnused, IfEmpty bool
}

func (o Op) declareOptions() broker.DeclareOptions {
	d := broker.DeclareOptions{Durable: o.Durable, Exclusive: o.Exclusive, AutoDelete: o.AutoDelete}
	switch o.Args {
	case 1:
		d.Args = map[string]any{"x-max-length": 0}
	case 2:
		d.Args = map[string]any{"x-max-length": 0, "x-overflow": "reject-publish"}
	}
	return d
}

// Step is the Op in the step language. Want is left empty: a sequence is
// judged by comparing the two sides, not against a table.
func (o Op) Step() semantics.Step {
	s := semantics.Step{On: o.On}
	switch o.Kind {
	case "declare":
		s.Do = semantics.Declare(o.Queue, o.declareOptions())
	case "passive":
		s.Do = semantics.Passive(o.Queue, o.declareOptions())
	case "publish":
		s.Do = semantics.Publish(o.Queue, broker.Publishing{Mandatory: o.Mandatory})
	case "delete":
		s.Do = semantics.Delete(o.Queue, broker.DeleteOptions{IfUnused: o.IfUnused, IfEmpty: o.IfEmpty})
	case "consume":
		s.Do = semantics.Consume(o.Queue, o.Exclusive)
	case "get":
		s.Do = semantics.Get(o.Queue)
	case "purge":
		s.Do = semantics.Purge(o.Queue)
	case "inspect":
		s.Do = semantics.Inspect(o.Queue)
	case "reopen":
		s.Do = semantics.Reopen
	case "close-channel":
		s.Do = semantics.CloseChannel
	case "close-conn":
		s.Do = semantics.CloseConn
	case "kill":
		s.Do = semantics.CloseSocket
	case "force-close":
		s.Do = semantics.ForceClose
	case "redial":
		s.Do = semantics.Redial
	case "conn-error":
		s.Do = semantics.ConnError
	default:
		panic("conform: unknown op " + o.Kind)
	}
	return s
}

func (o Op) String() string {
	on := o.On
	if on == "" {
		on = "broker"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %s", on, o.Kind)
	if o.Queue != "" {
		b.WriteString(" " + o.Queue)
	}
	flag := func(set bool, name string) {
		if set {
			b.WriteString(" " + name)
		}
	}
	switch o.Kind {
	case "declare", "passive":
		flag(o.Durable, "durable")
		flag(o.Exclusive, "exclusive")
		flag(o.AutoDelete, "auto-delete")
		switch o.Args {
		case 1:
			b.WriteString(" x-max-length=0")
		case 2:
			b.WriteString(" x-max-length=0,x-overflow=reject-publish")
		}
	case "publish":
		flag(o.Mandatory, "mandatory")
	case "delete":
		flag(o.IfUnused, "if-unused")
		flag(o.IfEmpty, "if-empty")
	case "consume":
		flag(o.Exclusive, "exclusive")
	}
	return b.String()
}

// CaseOf turns ops into a semantics.Case.
func CaseOf(ops []Op) semantics.Case {
	c := semantics.Case{ID: "differential", Title: "a drawn sequence"}
	for _, o := range ops {
		c.Steps = append(c.Steps, o.Step())
	}
	return c
}

// DrawOps draws a sequence of at most maxSteps operations.
func DrawOps(t *rapid.T, maxSteps int) []Op {
	nConns := rapid.IntRange(2, 3).Draw(t, "connections")
	nQueues := rapid.IntRange(2, 3).Draw(t, "queues")
	var chans []string
	for i := 0; i < nConns; i++ {
		c := string(rune('A' + i))
		chans = append(chans, c)
		if percent.Draw(t, "second channel of "+c) >= 30 {
			chans = append(chans, c+".2")
		}
	}
	var queues []string
	for i := 1; i <= nQueues; i++ {
		queues = append(queues, fmt.Sprintf("Q%d", i))
	}
	// Slice generators, so that rapid can drop steps while shrinking; two
	// of them because rapid's slices average 5 or 6 elements, and longer
	// sequences build up more state.
	op := rapid.Custom(func(t *rapid.T) Op { return drawOp(t, chans, queues) })
	half := max(maxSteps/2, 1)
	ops := rapid.SliceOfN(op, 1, half).Draw(t, "ops")
	if maxSteps > half {
		ops = append(ops, rapid.SliceOfN(op, 0, maxSteps-half).Draw(t, "more ops")...)
	}
	// A fault needs a connection that an earlier step dialled: otherwise
	// it reopens the channel instead (which dials it).
	dialled := map[string]bool{}
	for i, o := range ops {
		switch o.Kind {
		case "kill", "force-close":
			if !dialled[o.On] {
				ops[i] = Op{On: o.On, Kind: "reopen"}
				dialled[o.On] = true
			}
		case "inspect", "close-conn", "conn-error":
		default:
			dialled[connName(o.On)] = true
		}
	}
	return ops
}

func connName(on string) string {
	c, _, _ := strings.Cut(on, ".")
	return c
}

// percent draws 0..99 uniformly from seven unbiased bits (rapid's integer
// ranges favour small values), shrinking towards 0.
var percent = rapid.Custom(func(t *rapid.T) int {
	v := 0
	for i := 0; i < 7; i++ {
		v <<= 1
		if rapid.Bool().Draw(t, "bit") {
			v |= 1
		}
	}
	return v * 100 / 128
})

// drawOp draws one operation. Lower numbers shrink first: declares and
// publishes are the simplest, faults the most complex, and every flag
// shrinks to false.
func drawOp(t *rapid.T, chans, queues []string) Op {
	o := Op{On: rapid.SampledFrom(chans).Draw(t, "on")}
	q := func() string { return rapid.SampledFrom(queues).Draw(t, "queue") }
	chance := func(name string, p int) bool { return percent.Draw(t, name) >= 100-p }
	switch k := percent.Draw(t, "kind"); {
	case k < 24:
		o.Kind, o.Queue = "declare", q()
		o.Durable, o.Exclusive, o.AutoDelete = chance("durable", 30), chance("exclusive", 40), chance("auto-delete", 25)
		switch a := percent.Draw(t, "args"); {
		case a >= 85:
			o.Args = 2
		case a >= 70:
			o.Args = 1
		}
	case k < 44:
		o.Kind, o.Queue, o.Mandatory = "publish", q(), !chance("not mandatory", 25)
	case k < 51:
		o.Kind, o.Queue = "passive", q()
		o.Exclusive = chance("exclusive", 30)
	case k < 58:
		o.Kind, o.Queue = "delete", q()
		o.IfUnused, o.IfEmpty = chance("if-unused", 30), chance("if-empty", 30)
	case k < 64:
		o.Kind, o.Queue, o.Exclusive = "consume", q(), chance("exclusive", 30)
	case k < 71:
		o.Kind, o.Queue = "get", q()
	case k < 75:
		o.Kind, o.Queue = "purge", q()
	case k < 82:
		o.On, o.Kind, o.Queue = "", "inspect", q()
	case k < 90:
		o.Kind = "reopen"
	case k < 93:
		o.Kind = "close-channel"
	case k < 95:
		o.Kind = "close-conn"
	case k < 96:
		o.Kind = "redial"
	case k < 97:
		o.Kind = "conn-error"
	case k < 99:
		o.Kind = "kill"
	default:
		o.Kind = "force-close"
	}
	if o.Kind == "kill" || o.Kind == "force-close" || o.Kind == "redial" || o.Kind == "conn-error" || o.Kind == "close-conn" {
		o.On = connName(o.On)
	}
	return o
}

// simSettle is how long the simulator waits after a kill or a forced
// close: more than its largest release delay after a socket closes.
const simSettle = 50 * time.Millisecond

// simEnv is semantics.Env on the simulator, like semantics.RunSim's, but
// its connection faults wait simSettle so that the broker has released the
// connection, as Env.Settle does on RabbitMQ.
type simEnv struct {
	broker.Broker
	w *rabbitmqsim.World
}

func (e simEnv) Now() time.Duration { return time.Duration(e.w.Now()) }

func (e simEnv) Inspect(q string) (semantics.QueueState, bool, error) {
	info, ok := e.w.Queue(q)
	return semantics.QueueState{Durable: info.Durable, AutoDelete: info.AutoDelete, Owner: info.Owner, Messages: info.Messages, Consumers: info.Consumers}, ok, nil
}

func (e simEnv) Fault(kind, conn string) error {
	var err error
	switch kind {
	case "close-socket":
		err = e.w.CloseSocket(conn)
	case "force-close":
		err = e.w.ForceClose(conn)
	default:
		return fmt.Errorf("conform: fault %q is not drawn", kind)
	}
	if err != nil {
		return err
	}
	return e.Sleep(context.Background(), simSettle)
}

func (e simEnv) StopBroker() error  { return errors.New("conform: restarts are not drawn") }
func (e simEnv) StartBroker() error { return errors.New("conform: restarts are not drawn") }

// RunSimOps runs ops on a fresh simulator.
func RunSimOps(ops []Op) ([]string, error) { return runSimOps(ops, nil) }

// runSimOps runs ops on a fresh simulator; mutant, if not nil, then alters
// the observations: a deliberately wrong simulator, which a Differential
// must catch (set by tests, through DiffOptions.simMutant).
func runSimOps(ops []Op, mutant func(ops []Op, observed []string)) ([]string, error) {
	w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(0)})
	var res semantics.Result
	c := CaseOf(ops)
	w.Go("sequence", func(b broker.Broker) {
		res = semantics.Run(context.Background(), simEnv{b, w}, c, "s-")
	})
	if err := w.Run(); err != nil {
		return nil, err
	}
	if mutant != nil {
		mutant(ops, res.Observed)
	}
	return res.Observed, nil
}

// seqTimeout bounds one sequence on the real broker.
const seqTimeout = time.Minute

// RunOps runs ops on the real broker (in a fresh Env with Settle,
// cleaned up afterwards). An error wraps ErrHarness.
func (t *Server) RunOps(ctx context.Context, ops []Op) ([]string, error) {
	env := t.NewEnv()
	env.Settle = true
	ctx, cancel := context.WithTimeout(ctx, seqTimeout)
	defer cancel()
	res := semantics.Run(ctx, env, CaseOf(ops), env.Prefix())
	env.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if err := env.Err(); err != nil {
		t.Cleanup(cctx, env.Prefix())
		return res.Observed, fmt.Errorf("%w: %w", ErrHarness, err)
	}
	if err := t.Cleanup(cctx, env.Prefix()); err != nil {
		return res.Observed, fmt.Errorf("%w: %w", ErrHarness, err)
	}
	return res.Observed, nil
}

// ErrHarness is wrapped by the errors of conform's own machinery
// (rabbitmqctl, cleanup): a run that meets one proves nothing either way.
var ErrHarness = errors.New("conform: harness failure")

// A Divergence is a sequence whose observations differ.
type Divergence struct {
	Ops       []Op     // the sequence, up to and including step First
	Real, Sim []string // what each side observed of each step
	First     int      // the first step whose observations differ (0-based)
	// Reproduced counts how many of Replays re-runs on the real broker
	// (after shrinking) diverged again at the same step.
	Reproduced, Replays int
}

func (d *Divergence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d steps; step %d diverges", len(d.Ops), d.First+1)
	if d.Replays > 0 {
		fmt.Fprintf(&b, " (reproduced in %d of %d replays)", d.Reproduced, d.Replays)
	}
	b.WriteString("\n")
	for i, o := range d.Ops {
		mark := "  "
		if at(d.Real, i) != at(d.Sim, i) {
			mark = "!!"
		}
		fmt.Fprintf(&b, "%s %2d. %-50s rabbitmq: %-22s simulator: %s\n", mark, i+1, o, at(d.Real, i), at(d.Sim, i))
	}
	return b.String()
}

// firstDifference returns the first step whose observations differ, or -1.
func firstDifference(real, sim []string) int {
	for i := 0; i < max(len(real), len(sim)); i++ {
		if at(real, i) != at(sim, i) {
			return i
		}
	}
	return -1
}

// DiffOptions configure a differential run.
type DiffOptions struct {
	Sequences int           // how many sequences to draw; 0 means 100
	Seed      uint64        // the same seed draws the same sequences
	MaxSteps  int           // longest sequence; 0 means 24
	Shrink    time.Duration // time to minimise a divergence; 0 means 60 s
	Replays   int           // re-runs of the minimal divergence; 0 means 3
	// Progress, if set, is called after every sequence (not while
	// shrinking).
	Progress func(sequences, steps int)

	simMutant func(ops []Op, observed []string) // see runSimOps
}

// DiffOutcome is what a differential run found.
type DiffOutcome struct {
	Sequences int // sequences run up to and including the first divergence
	Steps     int // steps in those sequences
	Elapsed   time.Duration
	Found     *Divergence // the minimal divergence, or nil
}

// diffBatch is how many sequences each rapid.Check draws.
const diffBatch = 100

// withDefaults returns o with every zero setting at its default.
func (o DiffOptions) withDefaults() DiffOptions {
	if o.Sequences <= 0 {
		o.Sequences = 100
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = 24
	}
	if o.Shrink <= 0 {
		o.Shrink = time.Minute
	}
	if o.Replays <= 0 {
		o.Replays = 3
	}
	return o
}

// Differential runs o.Sequences sequences drawn from o.Seed on the simulator
// and on the real broker, and returns the first divergence, shrunk by rapid.
// rapid's settings are process-wide flags: in a program that is not a test,
// call testing.Init and parse the global flag set first (see
// cmd/lockprover). Sequences are drawn without them (rapidbatch.Cases), so
// several Differentials may run at once; their shrinking takes turns.
func (t *Server) Differential(ctx context.Context, o DiffOptions) (*DiffOutcome, error) {
	o = o.withDefaults()
	r := &diffRun{t: t, ctx: ctx, o: o, out: &DiffOutcome{}}
	start := time.Now()
	draw := func(rt *rapid.T) []Op { return DrawOps(rt, o.MaxSteps) }
	b, i, _, err := rapidbatch.Cases(o.Seed, o.Sequences, diffBatch, draw, func(ops []Op) bool {
		r.run(ops)
		return r.found != nil || r.infraErr != nil || ctx.Err() != nil
	})
	if err != nil {
		return r.out, fmt.Errorf("conform: %w", err)
	}
	if r.found != nil && r.infraErr == nil {
		if _, err := rapidbatch.ShrinkAlone(o.Seed, b, i, o.Shrink, func(rt *rapid.T) {
			if r.run(draw(rt)) {
				rt.Fatalf("a step diverges")
			}
		}); err != nil {
			return r.out, fmt.Errorf("conform: %w", err)
		}
	}
	r.out.Elapsed = time.Since(start)
	if r.infraErr != nil {
		return r.out, r.infraErr
	}
	if r.found != nil {
		t.replay(ctx, r.found, o.Replays)
		r.out.Found = r.found
	}
	return r.out, ctx.Err()
}

// diffRun is the state of one Differential run, shared by its search and
// its shrinking.
type diffRun struct {
	t   *Server
	ctx context.Context
	o   DiffOptions
	out *DiffOutcome

	found    *Divergence // the smallest divergence so far; set, rapid is shrinking
	infraErr error       // a harness failure: the run stops and says so
	// shrunk holds what the broker observed of each sequence run while
	// shrinking: rapid draws most of its candidates again and again (in
	// a test, 34 distinct sequences of about 370), and only the first of
	// them needs the broker.
	shrunk map[string][]string
}

// run runs ops on the simulator and on the real broker and reports whether
// a step diverges (keeping the divergence if it is the smallest yet).
// Sequences run while shrinking are not counted, and a harness failure
// while shrinking only rejects the candidate; after a harness failure, or
// once ctx ends, it runs nothing.
func (r *diffRun) run(ops []Op) (diverged bool) {
	if r.infraErr != nil || r.ctx.Err() != nil {
		return false
	}
	simObs, err := runSimOps(ops, r.o.simMutant)
	if err != nil {
		r.infraErr = fmt.Errorf("simulator: %w", err)
		return false
	}
	shrinking := r.found != nil
	key := ""
	if shrinking {
		key = fmt.Sprintf("%#v", ops)
	}
	realObs, seen := r.shrunk[key]
	if !seen {
		realObs, err = r.t.RunOps(r.ctx, ops)
		if err != nil {
			if !shrinking {
				r.infraErr = err
			}
			return false
		}
		if shrinking {
			if r.shrunk == nil {
				r.shrunk = map[string][]string{}
			}
			r.shrunk[key] = realObs
		}
	}
	if !shrinking {
		r.out.Sequences++
		r.out.Steps += len(ops)
		if r.o.Progress != nil {
			r.o.Progress(r.out.Sequences, r.out.Steps)
		}
	}
	i := firstDifference(realObs, simObs)
	if i < 0 {
		return false
	}
	r.keep(&Divergence{Ops: ops, Real: realObs, Sim: simObs, First: i})
	return true
}

// keep records d if it is the smallest divergence yet: fewer steps, or as
// many and diverging no later. The steps after the first that diverges go:
// a sequence runs one step after another, so none of them bears on it (the
// replays of the minimal divergence check that it still diverges there).
func (r *diffRun) keep(d *Divergence) {
	if n := d.First + 1; n < len(d.Ops) {
		d.Ops, d.Real, d.Sim = d.Ops[:n], d.Real[:min(n, len(d.Real))], d.Sim[:min(n, len(d.Sim))]
	}
	if r.found == nil || len(d.Ops) < len(r.found.Ops) || len(d.Ops) == len(r.found.Ops) && d.First <= r.found.First {
		r.found = d
	}
}

// replay re-runs the minimal divergence d on the real broker up to n times
// (stopping at a harness failure or when ctx ends), counting in d the
// replays and those that diverged again at the same step.
func (t *Server) replay(ctx context.Context, d *Divergence, n int) {
	for i := 0; i < n && ctx.Err() == nil; i++ {
		realObs, err := t.RunOps(ctx, d.Ops)
		if err != nil {
			break
		}
		d.Replays++
		if firstDifference(realObs, d.Sim) == d.First {
			d.Reproduced++
		}
	}
}
