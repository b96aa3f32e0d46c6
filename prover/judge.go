package prover

import (
	"fmt"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
)

// Judge checks a run: the history against the model, and what the history
// cannot show (no-leak, cheap-acquire, cheap-verify, driver-minimal)
// against the run's method counts and the broker's queues.
func Judge(p *Plan, res *Result, o model.Options) *model.Report {
	r := model.Check(res.History, o)
	if len(res.Problems) > 0 && !hasLock(r, res.Lock) {
		r.Verdicts = append(r.Verdicts, model.Verdict{Lock: res.Lock, Property: model.Available, Status: model.NotJudged})
	}
	for i := range r.Verdicts {
		v := &r.Verdicts[i]
		if v.Lock == res.Lock && v.Property == model.Available && len(res.Problems) > 0 {
			v.Status = model.Fail
			v.Detail = "the implementation's processes failed: " + strings.Join(res.Problems, "; ")
			continue
		}
		if v.Lock != res.Lock || v.Status != model.NotJudged {
			continue
		}
		switch v.Property {
		case model.NoLeak:
			*v = noLeak(p, res)
		case model.CheapAcquire:
			*v = cheap(p, res, "acquire", acquireBudget)
		case model.CheapVerify:
			*v = cheap(p, res, "verify", verifyBudget)
		case model.DriverMinimal:
			*v = driverMinimal(p, res)
		}
	}
	return r
}

func noLeak(p *Plan, res *Result) model.Verdict {
	v := model.Verdict{Lock: res.Lock, Property: model.NoLeak, Status: model.Pass, Judged: 1}
	if len(res.Leaks) > 0 {
		v.Status = model.Fail
		v.Detail = "after every client let go or was detected dead (and a final destroy), the broker still holds " + strings.Join(res.Leaks, ", ")
	}
	return v
}

// A budget says what an operation may send, or why not.
type budget func(p *Plan, res *Result, e histories.Event, c Cost) string

// cheap judges every completed operation f against its budget.
func cheap(p *Plan, res *Result, f string, within budget) model.Verdict {
	v := model.Verdict{Lock: res.Lock, Property: map[string]string{"acquire": model.CheapAcquire, "verify": model.CheapVerify}[f], Status: model.Pass}
	for _, e := range res.History {
		c, ok := res.Costs[e.Index]
		if !ok || e.F != f || e.Lock != res.Lock {
			continue
		}
		v.Judged++
		why := res.Waste[e.Index]
		if why == "" {
			why = within(p, res, completion(res.History, e), c)
		}
		if why != "" {
			v.Status = model.Fail
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
func acquireBudget(p *Plan, res *Result, _ histories.Event, c Cost) string {
	races := c.Methods["channel.close-ok"]
	methods := c.Total()
	limit := (races+1)*(4*res.MaxSlots+6) + 2*races
	switch {
	case methods > limit:
		return fmt.Sprintf("sent %d methods, more than the spec's scan needs (%d with %d slots at most)", methods, limit, res.MaxSlots)
	}
	return ""
}

// verifyBudget: verify is one mandatory publish and its confirm: no
// declare and (the ledger's part) no wasted connection or channel; a
// verify that says held must have asked.
func verifyBudget(_ *Plan, _ *Result, done histories.Event, c Cost) string {
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
func driverMinimal(p *Plan, res *Result) model.Verdict {
	v := model.Verdict{Lock: res.Lock, Property: model.DriverMinimal, Status: model.Pass}
	var extra []string
	for m, n := range res.Methods {
		v.Judged += n
		class, _, _ := strings.Cut(m, ".")
		if class == "connection" || class == "channel" || m == "confirm.select" || m == "queue.declare" || m == "queue.delete" || m == "basic.publish" {
			continue
		}
		extra = append(extra, fmt.Sprintf("%s x%d", m, n))
	}
	if len(extra) > 0 {
		v.Status = model.Fail
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

func hasLock(r *model.Report, lock string) bool {
	for _, v := range r.Verdicts {
		if v.Lock == lock {
			return true
		}
	}
	return false
}
