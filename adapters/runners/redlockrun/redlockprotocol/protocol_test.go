package redlockprotocol_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/process/processtest"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun/redlockprotocol"
	"github.com/lockprover/lockprover/adapters/servers/redis"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

var lockprover string

func TestMain(m *testing.M) { processtest.Main(m, &lockprover) }

// safety are the properties counted on real Redis (see adapters/runners/redlockrun's
// tests: available needs a machine that answers within a round's timeout).
var safety = []string{lease.LeaseExclusive, lease.NoRevival, lease.AcquireExact, lease.Fencing, lease.ValiditySound}

// onRedis skips where this machine has no redis-server.
func onRedis(t *testing.T) {
	quick.Skip(t, "private redis-servers")
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := (redlockrun.Redis{}).Preflight(ctx); errors.Is(err, redis.ErrNoRedis) {
		t.Skipf("skipped: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

func serve(mutant string) string { return serveKind("redlock", mutant) }

// serveKind is the command that serves the reference of kind, or its
// mutant.
func serveKind(kind, mutant string) string {
	cmd := lockprover + " serve-reference --kind " + kind
	if mutant != "" {
		cmd += " --mutant " + mutant
	}
	return cmd
}

// A validateCase is an implementation's variant (a mutant, a defect; ""
// for none) and the check validate-impl must fail it at ("" for none).
type validateCase struct{ variant, fails string }

// validates runs validate-impl (of a priority Redlock, with priority) on
// command(variant) for each case: the plain one passes every check, and
// says passing too if set; each other fails its check.
func validates(t *testing.T, command func(string) string, priority bool, passing string, cases []validateCase) {
	t.Helper()
	for _, c := range cases {
		var out strings.Builder
		passed, err := redlockprotocol.Validate(context.Background(), command(c.variant), time.Minute, "", &out, priority)
		switch {
		case err != nil:
			t.Fatalf("%q: %v", c.variant, err)
		case c.fails == "" && (!passed || strings.Contains(out.String(), "FAIL") || !strings.Contains(out.String(), passing)):
			t.Errorf("%s fails validate-impl:\n%s", command(c.variant), out.String())
		case c.fails != "" && (passed || !strings.Contains(out.String(), c.fails)):
			t.Errorf("%s: passed %v, want %q in:\n%s", command(c.variant), passed, c.fails, out.String())
		}
	}
}

// validate-impl passes the reference served over the protocol, and fails
// each mutant it can see, at the check that sees it.
func TestValidate(t *testing.T) {
	t.Parallel()
	onRedis(t)
	validates(t, serve, false, "", []validateCase{
		{"", ""},
		{"setnx-on-extend", "FAIL  c1's refresh after its release answers expired"},
		{"always-ok", "FAIL  c1's second release answers expired"},
		{"constant-token", "FAIL  c2's lease has a new token"},
	})
}

// The reference served over the protocol holds on real redis-servers
// under every fault offered there, and a mutant served so is caught: the
// validity an implementation claims (elapsed_ms plus validity_ms) is
// judged, counted from the invoke.
func TestProveThroughTheProtocol(t *testing.T) {
	t.Parallel()
	onRedis(t)
	if out := proveImpl(t, serve(""), false, 3, 6, safety); out.Found != nil {
		t.Fatalf("the reference through the protocol: %s", out.Found.Summary())
	}
	if out := proveImpl(t, serve("no-drift"), false, 3, 6, []string{lease.ValiditySound}); out.Found == nil {
		t.Fatal("no-drift through the protocol: not caught by validity-sound")
	}
}

// processes is the implementation command starts, given a minute to
// answer init (a loaded machine), its processes killed when t ends.
func processes(t *testing.T, command string) *redlockprotocol.Processes {
	impl := redlockprotocol.NewProcesses(command)
	impl.InitTimeout = time.Minute
	t.Cleanup(impl.Stop)
	return impl
}

// onePlan runs a one-client plan against the fake implementation in
// mode, on one private redis-server.
func onePlan(t *testing.T, mode string, steps []redlockrun.Step) *prover.Result {
	t.Helper()
	return onePlanOn(t, false, mode, steps)
}

// onePlanOn is onePlan, on the simulated server served on the wire if
// served.
func onePlanOn(t *testing.T, served bool, mode string, steps []redlockrun.Step) *prover.Result {
	t.Helper()
	impl := processes(t, "/usr/bin/python3 testdata/fake_redlock.py "+mode)
	p := &redlockrun.Plan{Version: redlockrun.PlanVersion, Kind: redlockrun.Kind, Key: "lp", Servers: 1, Persistence: redlockrun.PersistNone, TTLMs: 1000,
		Clients: [][]redlockrun.Step{steps}}
	var target redlockrun.Target = redlockrun.Redis{Impl: impl}
	if served {
		target = redlockrun.Simulator{Impl: impl, Wire: redlockprotocol.Wire}
	}
	res, err := target.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A grant that claims its whole ttl, with no time elapsed, claims more
// than any grant can have (the time it took, and the drift): the
// history records the claim, and validity-sound fails it.
func TestWholeTTLClaimFails(t *testing.T) {
	t.Parallel()
	onRedis(t)
	res := onePlan(t, "whole-ttl", []redlockrun.Step{{Op: histories.Acquire}})
	var b strings.Builder
	histories.Write(&b, res.History)
	if !strings.Contains(b.String(), `"validity_ms":`) {
		t.Fatalf("the grant's claim is not recorded:\n%s", b.String())
	}
	for _, v := range prover.Judge(res, model.Options{Family: []any{lease.Options{Validity: true}}}).Verdicts {
		if v.Property == lease.ValiditySound && v.Status != verdict.Fail {
			t.Fatalf("validity-sound %s on a grant that claims its whole ttl:\n%s", v.Status, b.String())
		}
	}
}

// An acquire_ok without a token breaks the protocol: the process is given
// up on, the acquire's outcome is unknown, and the run says why.
func TestProtocolErrorIsACrash(t *testing.T) {
	t.Parallel()
	onRedis(t)
	res := onePlan(t, "no-token", []redlockrun.Step{{Op: histories.Acquire}})
	var b strings.Builder
	histories.Write(&b, res.History)
	if !strings.Contains(strings.Join(res.Evidence.Problems, "\n"), `"token" is not a non-empty string`) {
		t.Errorf("the problems do not name the missing token: %q", res.Evidence.Problems)
	}
	if !strings.Contains(b.String(), `"type":"info","f":"acquire"`) {
		t.Errorf("the acquire is not recorded as of unknown outcome:\n%s", b.String())
	}
}

// A process that exits after a grant is a crash: recorded as a kill once
// noticed, after the operation (so that it excuses nothing before), and
// the client goes on as a new process with the rest of its script. No
// grant comes from a process already gone. The same on the simulated
// server served on the wire, where the kill is the World's, struck from
// outside the crashed process; there the exit is noticed at the next
// request (the release: a sleep of virtual time gives the process no real
// time to be seen gone), on a real server during the sleep.
func TestExitedProcessGoesOn(t *testing.T) {
	t.Parallel()
	for _, served := range []bool{false, true} {
		t.Run(map[bool]string{false: "redis", true: "served"}[served], func(t *testing.T) {
			t.Parallel()
			if !served {
				onRedis(t)
			}
			exitedGoesOn(t, served)
		})
	}
}

func exitedGoesOn(t *testing.T, served bool) {
	sleep := redlockrun.Step{Op: redlockrun.Sleep, Ms: 500}
	acquire := redlockrun.Step{Op: histories.Acquire}
	release := redlockrun.Step{Op: histories.Release}
	res := onePlanOn(t, served, "exit-after-acquire", []redlockrun.Step{acquire, sleep, release, sleep, acquire})
	kills, grants := 0, 0
	for _, e := range res.History {
		switch {
		case e.Process == "nemesis" && e.F == histories.Kill && e.Type == histories.Info:
			kills++
		case e.Process == "c1" && e.F == histories.Acquire && e.Type == histories.Ok:
			if grants > kills {
				t.Errorf("grant %d came from the process that made grant %d, which had exited", grants+1, grants)
			}
			grants++
		}
	}
	if kills < 1 || grants < 2 || !strings.Contains(strings.Join(res.Evidence.Problems, "\n"), "exited") {
		var b strings.Builder
		histories.Write(&b, res.History)
		t.Fatalf("%d kills and %d grants (want at least 1 and 2), problems %q:\n%s", kills, grants, res.Evidence.Problems, b.String())
	}
}

// A grant whose library started 20 ms after the process and claims
// ttl(1-drift) from there, with no margin, passes validity-sound only
// counted from the start its started_ms says: the history records it, and
// the verdict shows the excuse. The same library claiming its whole ttl
// from its start still fails; a started_ms after the reply breaks the
// protocol, named.
func TestLibraryStart(t *testing.T) {
	t.Parallel()
	onRedis(t)
	judge := func(mode string) (verdict.Verdict, string) {
		res := onePlan(t, mode, []redlockrun.Step{{Op: histories.Acquire}})
		var b strings.Builder
		histories.Write(&b, res.History)
		for _, v := range prover.Judge(res, model.Options{Family: []any{lease.Options{Validity: true}}}).Verdicts {
			if v.Property == lease.ValiditySound {
				return v, b.String() + strings.Join(res.Evidence.Problems, "\n")
			}
		}
		t.Fatalf("%s: validity-sound not listed", mode)
		return verdict.Verdict{}, ""
	}
	v, h := judge("library-start")
	// 20 ms and more: the fake sleeps 20 ms before its library starts,
	// longer on a loaded machine (42 ms once beside the suite at load 35).
	m := regexp.MustCompile(`"started_ms":(\d+)`).FindStringSubmatch(h)
	started := -1
	if m != nil {
		started, _ = strconv.Atoi(m[1])
	}
	if started < 20 || v.Status != verdict.Pass || len(v.Excuses) == 0 || !strings.Contains(v.Excuses[0].Why, "(started_ms)") {
		t.Errorf("library-start: %v %q excuses %+v, want a pass excused by started_ms:\n%s", v.Status, v.Detail, v.Excuses, h)
	}
	if v, h := judge("over-claim-from-start"); v.Status != verdict.Fail || !strings.Contains(v.Detail, "past its library's start") {
		t.Errorf("over-claim-from-start: %v %q, want a failure counted from the library's start:\n%s", v.Status, v.Detail, h)
	}
	if _, h := judge("started-after-reply"); !strings.Contains(h, `"started_ms"`) || !strings.Contains(h, "more than its \"elapsed_ms\"") {
		t.Errorf("started-after-reply: the problems do not name started_ms:\n%s", h)
	}
}

// A grant whose reply is read only after the validity it claimed ran out
// (a loaded machine that did not run the reader) is recorded as it was:
// validity_ms negative, from the reading, and replied_ms, when the process
// replied; validity-sound judges the claim at the reply, passing it with
// that excuse shown, rather than failing a sound claim as one that should
// have failed (or moving its end to the reading, past its bound).
func TestReplyReadLate(t *testing.T) {
	t.Parallel()
	onRedis(t)
	res := onePlan(t, "reply-read-late", []redlockrun.Step{{Op: histories.Acquire}})
	var b strings.Builder
	histories.Write(&b, res.History)
	h := b.String()
	validity := regexp.MustCompile(`"validity_ms":(-?\d+)`).FindStringSubmatch(h)
	if validity == nil || !strings.HasPrefix(validity[1], "-") || !strings.Contains(h, `"replied_ms":`) {
		t.Fatalf("the late reply is not recorded as one (a negative validity_ms and replied_ms):\n%s", h)
	}
	for _, v := range prover.Judge(res, model.Options{Family: []any{lease.Options{Validity: true}}}).Verdicts {
		if v.Property != lease.ValiditySound {
			continue
		}
		// The run's probe (the recovery check's acquire) is read late too.
		if v.Status != verdict.Pass || len(v.Excuses) == 0 || !strings.Contains(v.Excuses[0].Why, "(replied_ms)") || !strings.Contains(v.Detail, "judged at the reply") {
			t.Errorf("validity-sound %s %q excuses %+v, want a pass excused by replied_ms:\n%s", v.Status, v.Detail, v.Excuses, h)
		}
		return
	}
	t.Fatal("validity-sound not listed")
}

// validate-impl checks a grant's started_ms against the call as it timed
// it: a process whose elapsed_ms (and started_ms after it) says it started
// before the request came fails that check; one within the call passes
// it. (The fake keeps its lock in memory, so other checks fail.)
func TestValidateChecksStarted(t *testing.T) {
	t.Parallel()
	onRedis(t)
	const check = "c1's acquire of the free lock is granted: started_ms lies within the call"
	for mode, want := range map[string]string{"library-start": "ok    " + check, "started-before-request": "FAIL  " + check} {
		var out strings.Builder
		if _, err := redlockprotocol.Validate(context.Background(), "/usr/bin/python3 testdata/fake_redlock.py "+mode, time.Minute, "", &out, false); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("%s: want %q in:\n%s", mode, want, out.String())
		}
	}
}
