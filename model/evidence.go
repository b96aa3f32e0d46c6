package model

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lockprover/lockprover/histories"
)

// Cost is what an operation (or a process) sent to the broker: AMQP methods
// by name, connections dialled, channels opened. The efficiency properties
// are judged from it. It is the one representation of what a client sent:
// the simulator reports it (sim.World.Cost), and so does the counting proxy
// in front of a real broker (proxy.Counts.Sent).
type Cost struct {
	// Methods counts methods by full AMQP name ("queue.declare",
	// "basic.publish"); names never sent are absent.
	Methods     map[string]int
	Connections int // connections dialled
	Channels    int // channels opened (channel.open sent)
}

// Sub is the cost between two snapshots, c the later: methods whose
// difference is zero are left out (counts only grow, so a name only in d
// does not occur).
func (c Cost) Sub(d Cost) Cost {
	out := Cost{Methods: map[string]int{}, Connections: c.Connections - d.Connections, Channels: c.Channels - d.Channels}
	for m, n := range c.Methods {
		if n -= d.Methods[m]; n != 0 {
			out.Methods[m] = n
		}
	}
	return out
}

// Class sums the methods of one AMQP class ("connection", "channel",
// "queue", "basic", "confirm", ...): Class("queue") counts queue.declare,
// queue.delete and the rest.
func (c Cost) Class(class string) int {
	n := 0
	for m, k := range c.Methods {
		if cl, _, _ := strings.Cut(m, "."); cl == class {
			n += k
		}
	}
	return n
}

// Total is the number of methods.
func (c Cost) Total() int {
	n := 0
	for _, k := range c.Methods {
		n += k
	}
	return n
}

// String lists the methods by name, then channels and connections, for
// reports: "channel.open=1 queue.declare=2 channels=1 connections=1".
func (c Cost) String() string {
	names := make([]string, 0, len(c.Methods))
	for m := range c.Methods {
		names = append(names, m)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, m := range names {
		fmt.Fprintf(&b, "%s=%d ", m, c.Methods[m])
	}
	fmt.Fprintf(&b, "channels=%d connections=%d", c.Channels, c.Connections)
	return b.String()
}

// Evidence is what a run shows beyond its history, about one lock: what
// each operation sent, what any process sent, the queues left behind, and
// what went wrong with the implementation's processes. With it Check judges
// no-leak and the efficiency properties, and available counts the
// processes' failures; without it (a history alone) those are NotJudged.
type Evidence struct {
	Lock string // the lock the evidence is about
	// Costs are the methods each completed operation sent, by the index of
	// its invoke event, less the free setup of connections and channels;
	// Waste says how an operation wasted connections or channels.
	Costs map[int]Cost
	Waste map[int]string
	// Methods counts every AMQP method any process sent.
	Methods map[string]int
	// Leaks are the lock's queues left on the broker once every client let
	// go or was detected dead, and a final destroy ran.
	Leaks []string
	// MaxSlots is the largest number of slots the run can have made.
	MaxSlots int
	// Problems are what went wrong with the implementation's processes:
	// crashes, garbage, wrong ids, timeouts, failures to start.
	Problems []string
}

// judgeEvidence fills in what the evidence shows about vs's lock: no-leak,
// the efficiency properties, and the processes' failures (available).
func judgeEvidence(vs []Verdict, h []histories.Event, e *Evidence) []Verdict {
	found := false
	for i := range vs {
		v := &vs[i]
		if v.Lock != e.Lock {
			continue
		}
		found = true
		switch {
		case v.Property == Available && len(e.Problems) > 0:
			v.Status, v.Detail = Fail, "the implementation's processes failed: "+strings.Join(e.Problems, "; ")
		case v.Status != NotJudged:
		case v.Property == NoLeak:
			*v = noLeak(e)
		case v.Property == CheapAcquire:
			*v = cheap(h, e, histories.Acquire, acquireBudget)
		case v.Property == CheapVerify:
			*v = cheap(h, e, histories.Verify, verifyBudget)
		case v.Property == DriverMinimal:
			*v = driverMinimal(e)
		}
	}
	if !found && len(e.Problems) > 0 {
		vs = append(vs, Verdict{Lock: e.Lock, Property: Available, Status: Fail,
			Detail: "the implementation's processes failed: " + strings.Join(e.Problems, "; ")})
	}
	return vs
}

func noLeak(e *Evidence) Verdict {
	v := Verdict{Lock: e.Lock, Property: NoLeak, Status: Pass, Judged: 1}
	if len(e.Leaks) > 0 {
		v.Status = Fail
		v.Detail = "after every client let go or was detected dead (and a final destroy), the broker still holds " + strings.Join(e.Leaks, ", ")
	}
	return v
}

// A budget says what an operation may send, or why not.
type budget func(e *Evidence, done histories.Event, c Cost) string

// cheap judges every completed operation f against its budget.
func cheap(h []histories.Event, ev *Evidence, f string, within budget) Verdict {
	v := Verdict{Lock: ev.Lock, Property: map[string]string{histories.Acquire: CheapAcquire, histories.Verify: CheapVerify}[f], Status: Pass}
	for _, e := range h {
		c, ok := ev.Costs[e.Index]
		if !ok || e.F != f || e.Lock != ev.Lock {
			continue
		}
		v.Judged++
		why := ev.Waste[e.Index]
		if why == "" {
			why = within(ev, completion(h, e), c)
		}
		if why != "" {
			v.Status = Fail
			v.Ops = []int{e.Index}
			v.Detail = fmt.Sprintf("%s's %s (#%d) %s; it sent: %v", e.Process, f, e.Index, why, c)
			return v
		}
	}
	return v
}

// completion finds the event that completed the operation invoked by e.
func completion(h []histories.Event, e histories.Event) histories.Event {
	for _, x := range h[e.Index+1:] {
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
func acquireBudget(e *Evidence, _ histories.Event, c Cost) string {
	races := c.Methods["channel.close-ok"]
	methods := c.Total()
	limit := (races+1)*(4*e.MaxSlots+6) + 2*races
	switch {
	case methods > limit:
		return fmt.Sprintf("sent %d methods, more than the spec's scan needs (%d with %d slots at most)", methods, limit, e.MaxSlots)
	}
	return ""
}

// verifyBudget: verify is one mandatory publish and its confirm: no
// declare and (the ledger's part) no wasted connection or channel; a
// verify that says held must have asked.
func verifyBudget(_ *Evidence, done histories.Event, c Cost) string {
	pub := c.Methods["basic.publish"]
	others := c.Total() - pub
	switch {
	case others > 0 || pub > 1:
		return "sent more than one mandatory publish"
	case pub == 0 && done.Value != nil && done.Value.Held != nil && *done.Value.Held:
		return "said held without asking the broker"
	}
	return ""
}

// driverMinimal: only the methods the spec needs, from any process.
func driverMinimal(e *Evidence) Verdict {
	v := Verdict{Lock: e.Lock, Property: DriverMinimal, Status: Pass}
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
		v.Status = Fail
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
