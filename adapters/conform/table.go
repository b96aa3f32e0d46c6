package conform

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockprover/lockprover/sim/rabbitmqsim"
	"github.com/lockprover/lockprover/sim/rabbitmqsim/semantics"
)

// Part 1: the semantics table (broker-semantics.md as data, package
// sim/rabbitmqsim/semantics) on the real broker and on the simulator, step by step.
//
// The divergence rule. Each step gives one observation on each side. A step
// diverges when the two observations differ AND at least one of them is not
// among the step's Want alternatives. So:
//
//   - equal observations never diverge, even if both contradict the table
//     (then the table is wrong, not the simulator: the step is reported as
//     a table mismatch instead);
//   - different observations that the table both allows do not diverge: a
//     Want like "405 channel|ok" records a race the real broker may lose
//     either way, and the simulator need not pick the same branch;
//   - anything else is a divergence, including a real observation outside
//     the table (the simulator cannot be right about a behaviour the table
//     no longer describes) and a timing outside a step's Within bounds
//     (semantics.Run then appends " after ... (want ...)" to the
//     observation).

// Divergent reports whether a step whose table entry is want diverges when
// the real broker observed real and the simulator sim.
func Divergent(want, real, sim string) bool {
	return real != sim && !(allows(want, real) && allows(want, sim))
}

func allows(want, got string) bool {
	for _, w := range strings.Split(want, "|") {
		if w == got {
			return true
		}
	}
	return false
}

// CaseReport is one table case run on both sides.
type CaseReport struct {
	Case semantics.Case
	// Skipped says why the case did not run on the real broker ("" if it
	// ran).
	Skipped   string
	Real, Sim semantics.Result
	SimErr    error // the simulator's own failure (a panic), if any
	// Divergent lists the steps (0-based) that diverge; TableWrong those
	// where both sides agree with each other but not with the table.
	Divergent, TableWrong []int
	Elapsed               time.Duration // the last attempt, on the real broker
	Attempts              int
	Tries                 []semantics.Result // every attempt on the real broker
	// CleanupErr is a failure to delete the case's queues afterwards;
	// HarnessErr a failure of the Env's own machinery during the case
	// (Env.Err), which makes the attempt inconclusive.
	CleanupErr, HarnessErr error
}

// Status is "skip", "agree", "diverge", "table" (both sides agree, the
// table does not) or "error" (rabbitmqctl or the cleanup failed:
// inconclusive).
func (r CaseReport) Status() string {
	switch {
	case r.Skipped != "":
		return "skip"
	case r.HarnessErr != nil || r.CleanupErr != nil:
		return "error"
	case len(r.Divergent) > 0 || r.SimErr != nil:
		return "diverge"
	case len(r.TableWrong) > 0:
		return "table"
	}
	return "agree"
}

// Agree reports whether the case was skipped or agreed.
func (r CaseReport) Agree() bool { s := r.Status(); return s == "skip" || s == "agree" }

// Details describes every divergent or table-wrong step, one block each.
func (r CaseReport) Details() string {
	var b strings.Builder
	if r.SimErr != nil {
		fmt.Fprintf(&b, "  simulator failed: %v\n", r.SimErr)
	}
	if r.CleanupErr != nil {
		fmt.Fprintf(&b, "  cleanup: %v\n", r.CleanupErr)
	}
	if r.HarnessErr != nil {
		fmt.Fprintf(&b, "  harness failure (inconclusive): %v\n", r.HarnessErr)
	}
	show := func(kind string, i int) {
		s := r.Case.Steps[i]
		on := s.On
		if on == "" {
			on = "broker"
		}
		fmt.Fprintf(&b, "  step %d %s: %s %s\n    want:      %s\n    rabbitmq:  %s\n    simulator: %s\n", i+1, kind, on, s.Do, s.Want, at(r.Real.Observed, i), at(r.Sim.Observed, i))
	}
	for n, try := range r.Tries[:max(len(r.Tries)-1, 0)] {
		for i, st := range r.Case.Steps {
			if got, sm := at(try.Observed, i), at(r.Sim.Observed, i); Divergent(st.Want, got, sm) || !allows(st.Want, got) {
				on := st.On
				if on == "" {
					on = "broker"
				}
				fmt.Fprintf(&b, "  attempt %d, step %d (%s %s): rabbitmq %q, simulator %q, want %q\n", n+1, i+1, on, st.Do, got, sm, st.Want)
				break
			}
		}
	}
	for _, i := range r.Divergent {
		show("diverges", i)
	}
	for _, i := range r.TableWrong {
		show("contradicts the table on both sides", i)
	}
	return b.String()
}

func at(obs []string, i int) string {
	if i < len(obs) {
		return obs[i]
	}
	return "(not run)"
}

// Runnable says whether case c can run on this Server, and why not.
func (t *Server) Runnable(c semantics.Case) (bool, string) {
	if !c.SimOnly {
		return true, ""
	}
	restarts := false
	for _, s := range c.Steps {
		if d := s.Do.String(); d == "stop" || d == "start" {
			restarts = true
		}
	}
	switch {
	case restarts && c.ServerHeartbeat == 0 && t.opts.AllowRestart:
		return true, ""
	case restarts:
		return false, "restarts the broker (allow with --allow-restart)"
	}
	return false, "simulator only (reconfigures heartbeats or waits too long for a shared broker)"
}

// caseTimeout bounds one case on the real broker, 10 s plus twice its
// largest timing bound: an await that never ends gives a "context deadline
// exceeded" observation rather than a hang.
func caseTimeout(c semantics.Case) time.Duration {
	d := 10 * time.Second
	for _, s := range c.Steps {
		d = max(d, 10*time.Second+2*s.Within[1])
	}
	return d
}

// RunCase runs c on the real broker and on the simulator (decisions from
// rabbitmqsim.Seeded(0)) and compares them; a divergent case is run again up to
// retries more times (real timing varies on a loaded machine), and the last
// attempt is reported.
func (t *Server) RunCase(ctx context.Context, c semantics.Case, retries int) CaseReport {
	r := CaseReport{Case: c}
	if ok, why := t.Runnable(c); !ok {
		r.Skipped = why
		return r
	}
	r.Sim, r.SimErr = semantics.RunSim(c, rabbitmqsim.Seeded(0))
	for r.Attempts = 1; ; r.Attempts++ {
		t.runReal(ctx, c, &r)
		r.Tries = append(r.Tries, r.Real)
		r.Divergent, r.TableWrong = nil, nil
		for i, s := range c.Steps {
			real, sm := at(r.Real.Observed, i), at(r.Sim.Observed, i)
			switch {
			case Divergent(s.Want, real, sm):
				r.Divergent = append(r.Divergent, i)
			case !allows(s.Want, real):
				r.TableWrong = append(r.TableWrong, i)
			}
		}
		if r.Agree() || r.Attempts > retries || ctx.Err() != nil {
			return r
		}
	}
}

// runReal runs c once on the real broker, in a fresh Env, and cleans up.
func (t *Server) runReal(ctx context.Context, c semantics.Case, r *CaseReport) {
	env := t.NewEnv()
	ctx, cancel := context.WithTimeout(ctx, caseTimeout(c))
	defer cancel()
	start := time.Now()
	r.Real = semantics.Run(ctx, env, c, env.Prefix())
	r.Elapsed = time.Since(start)
	env.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	r.CleanupErr = t.Cleanup(cctx, env.Prefix())
	r.HarnessErr = env.Err()
}

// RunTable runs every case of cases (semantics.Cases if nil) with RunCase,
// calling progress (if set) after each.
func (t *Server) RunTable(ctx context.Context, cases []semantics.Case, retries int, progress func(CaseReport)) []CaseReport {
	if cases == nil {
		cases = semantics.Cases
	}
	var out []CaseReport
	for _, c := range cases {
		if ctx.Err() != nil {
			break
		}
		r := t.RunCase(ctx, c, retries)
		out = append(out, r)
		if progress != nil {
			progress(r)
		}
	}
	return out
}
