package amqpcheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// Evidence is what a run of amqp-locks shows beyond its history, about
// one lock (model.Evidence's Lock): what each operation sent, what any
// process sent, the queues left behind. adapters/runners/amqprun records it in
// model.Evidence.Family; with it Check judges no-leak and the efficiency
// properties, which without it (a history alone) are NotJudged.
type Evidence struct {
	// Costs are the methods each completed operation sent, by the index of
	// its invoke event, less the free setup of connections and channels;
	// Waste says how an operation wasted connections or channels.
	Costs map[int]broker.Cost
	Waste map[int]string
	// Methods counts every AMQP method any process sent.
	Methods map[string]int
	// Leaks are the lock's queues left on the broker once every client let
	// go or was detected dead, and a final destroy ran.
	Leaks []string
	// Unjudged are the slot queues left on the broker when no final
	// destroy succeeded: a slot queue is a leak only once a destroy said
	// it deleted them, so these are not judged, and the verdict says so.
	Unjudged []string
	// Unlisted, if set, says why the broker's queues could not be listed
	// at the end: queues an implementation named itself (not as the
	// reference does) were then not looked for, so a leak among them
	// could not be seen, and the verdict says so.
	Unlisted string
	// Unprobed, if set, says why the lock's queues could not be looked
	// at, at the end: no-leak is then not judged.
	Unprobed string `json:",omitempty"`
	// MaxSlots is the largest number of slots the run can have made.
	MaxSlots int
	// Cluster, for a run on a RabbitMQ cluster, is its mode and the node
	// of each process: a failure of slot-exclusive says what struck the
	// cluster between the two holders' nodes.
	Cluster *Cluster `json:",omitempty"`
}

// judgeEvidence fills in what the evidence shows about the lock's
// verdicts vs: no-leak and the efficiency properties. (The processes'
// failures, which fail available, model.Check judges for every family.)
func judgeEvidence(vs []verdict.Verdict, events []histories.Event, lock string, e *Evidence) {
	for i := range vs {
		v := &vs[i]
		switch {
		case v.Lock != lock || v.Status != verdict.NotJudged:
		case v.Property == NoLeak:
			*v = noLeak(lock, e)
		case v.Property == CheapAcquire:
			*v = cheap(events, lock, e, histories.Acquire, acquireBudget)
		case v.Property == CheapVerify:
			*v = cheap(events, lock, e, histories.Verify, verifyBudget)
		case v.Property == DriverMinimal:
			*v = driverMinimal(lock, e)
		}
		if e.Cluster != nil && v.Lock == lock {
			explainOnCluster(v, events, e.Cluster)
		}
	}
}

func noLeak(lock string, e *Evidence) verdict.Verdict {
	if e.Unprobed != "" {
		return verdict.Verdict{Lock: lock, Property: NoLeak, Status: verdict.NotJudged,
			Detail: "the lock's queues could not be looked at after the run (" + e.Unprobed + "), so what the broker kept is not known"}
	}
	v := verdict.Verdict{Lock: lock, Property: NoLeak, Status: verdict.Pass, Judged: 1}
	if len(e.Leaks) > 0 {
		v.Status = verdict.Fail
		v.Detail = "after every client let go or was detected dead (and a final destroy), the broker still holds " + strings.Join(e.Leaks, ", ")
	}
	if e.Unlisted != "" {
		why := "the broker's queues could not be listed (" + e.Unlisted + "): queues the implementation named itself were not looked for"
		if v.Status == verdict.Pass && v.Detail == "" {
			v.Detail = why
		}
		v.Excuses = append(v.Excuses, verdict.Excuse{Why: why})
	}
	if len(e.Unjudged) > 0 {
		why := "the slot queues " + strings.Join(e.Unjudged, ", ") + " were left unjudged: no final destroy succeeded, so they may be the semaphore's own"
		if v.Status == verdict.Pass {
			v.Detail = why
		}
		v.Excuses = append(v.Excuses, verdict.Excuse{Why: why})
	}
	return v
}

// A budget says what an operation may send, or why not.
type budget func(e *Evidence, done histories.Event, c broker.Cost) string

// cheap judges every completed operation f against its budget.
func cheap(events []histories.Event, lock string, ev *Evidence, f string, within budget) verdict.Verdict {
	v := verdict.Verdict{Lock: lock, Property: map[string]string{histories.Acquire: CheapAcquire, histories.Verify: CheapVerify}[f], Status: verdict.Pass}
	for i, e := range events {
		if e.F != f || e.Lock != lock {
			continue
		}
		c, ok := ev.Costs[e.Index]
		if !ok {
			continue
		}
		v.Judged++
		why := ev.Waste[e.Index]
		if why == "" {
			why = within(ev, completion(events[i+1:], e), c)
		}
		if why != "" {
			v.Status = verdict.Fail
			v.Ops = []int{e.Index}
			v.Detail = fmt.Sprintf("%s's %s (#%d) %s; it sent: %v", e.Process, f, e.Index, why, c)
			return v
		}
	}
	return v
}

// completion finds, among the events after e (its lock's and the
// nemesis's), the one that completed the operation invoked by e.
func completion(after []histories.Event, e histories.Event) histories.Event {
	for _, x := range after {
		if x.Process == e.Process && x.Type != histories.Invoke {
			return x
		}
	}
	return e
}

// acquireBudget: acquire wastes no connection or channel (the runner's
// ledger judges that, and takes the free setup out of c) and sends at most
// what the spec's scan needs: per attempt two probes per slot up to C+1
// (twice over for a scan that wraps round), the declare and the verify, plus
// the channel.close-ok of each race lost.
func acquireBudget(e *Evidence, _ histories.Event, c broker.Cost) string {
	races := c.Methods["channel.close-ok"]
	methods := c.Total()
	limit := (races+1)*(4*e.MaxSlots+6) + 2*races
	switch {
	case methods > limit:
		return fmt.Sprintf("sent %d methods, more than the spec's scan needs (%d with %d slots at most)", methods, limit, e.MaxSlots)
	}
	return ""
}

// verifyBudget: verify is charged for deciding its answer, one mandatory
// publish and its confirm: no declare and (the ledger's part) no wasted
// connection or channel; a verify that says held must have asked. A verify
// that says not held may also let go of what it kept, as the spec's
// "lock-relinquished" allows: a tidy client deletes its B queue on finding
// its slot gone, and may close the channel or connection it kept for it.
// That is a release, not part of deciding: at most the one queue.delete of
// its own B queue, and whatever it costs later (a connection opened again)
// is charged where it is spent, as after any release.
func verifyBudget(_ *Evidence, done histories.Event, c broker.Cost) string {
	v := ValueOf(&done)
	held := v != nil && v.Held != nil && *v.Held
	decide := c
	if !held {
		var cleanup broker.Cost
		decide, cleanup = splitCost(c, "queue.delete", "channel.close", "connection.close")
		if n := cleanup.Methods["queue.delete"]; n > 1 {
			return fmt.Sprintf("let go of its slot after finding it gone, and that release sent %d queue.delete, more than the one of its own B queue", n)
		}
	}
	pub := decide.Methods["basic.publish"]
	rest := decide.Total() - pub   // what it sent beside its publishes
	others := func() broker.Cost { // those methods, for the message (most verifies pass and need none)
		o := decide
		o.Methods = maps.Clone(decide.Methods)
		delete(o.Methods, "basic.publish")
		return o
	}
	switch {
	case pub == 0 && rest > 0:
		return fmt.Sprintf("asked the broker with %v, not one mandatory publish", methodList(others()))
	case pub > 1:
		return fmt.Sprintf("sent %d mandatory publishes, more than one", pub)
	case rest > 0:
		return fmt.Sprintf("sent, beside its mandatory publish, %v, which deciding does not need", methodList(others()))
	case pub == 0 && held:
		return "said held without asking the broker"
	}
	return ""
}

// methodList lists c's methods, sorted: "channel.close=1 queue.declare=1".
func methodList(c broker.Cost) string {
	var out []string
	for m, n := range c.Methods {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s=%d", m, n))
		}
	}
	return strings.Join(sortStrings(out), " ")
}

// splitCost parts c into the methods other than names and those named.
func splitCost(c broker.Cost, names ...string) (rest, named broker.Cost) {
	rest = broker.Cost{Methods: map[string]int{}, Connections: c.Connections, Channels: c.Channels}
	named = broker.Cost{Methods: map[string]int{}}
	for m, n := range c.Methods {
		if slices.Contains(names, m) {
			named.Methods[m] = n
		} else {
			rest.Methods[m] = n
		}
	}
	return rest, named
}

// driverMinimal: only the methods the spec needs, from any process.
func driverMinimal(lock string, e *Evidence) verdict.Verdict {
	v := verdict.Verdict{Lock: lock, Property: DriverMinimal, Status: verdict.Pass}
	var extra []string
	for m, n := range e.Methods {
		v.Judged += n
		class, _, _ := strings.Cut(m, ".")
		if class == "connection" || class == "channel" || m == "confirm.select" || m == "queue.declare" || m == "queue.delete" || m == "basic.publish" {
			continue
		}
		extra = append(extra, fmt.Sprintf("%s x%d", m, n))
	}
	if len(extra) > 0 {
		v.Status = verdict.Fail
		v.Detail = "used methods the spec does not need: " + strings.Join(sortStrings(extra), ", ")
	}
	return v
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}
