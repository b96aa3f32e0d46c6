package pgadvisoryprotocol_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/process/processtest"
	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun"
	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun/pgadvisoryprotocol"
	"github.com/lockprover/lockprover/adapters/servers/postgres"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
	"pgregory.net/rapid"
)

var lockprover string

func TestMain(m *testing.M) { processtest.Main(m, &lockprover) }

func serve(mutant string) string {
	cmd := lockprover + " serve-reference --kind pg-advisory"
	if mutant != "" {
		cmd += " --mutant " + mutant
	}
	return cmd
}

// validate runs validate-impl's checks on command: whether they passed,
// and what they printed.
func validate(t *testing.T, command string) (bool, string) {
	t.Helper()
	quick.Skip(t, "a private PostgreSQL server")
	var out strings.Builder
	x, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ok, err := pgadvisoryprotocol.Validate(x, command, 0, &out)
	if errors.Is(err, postgres.ErrNoServer) || errors.Is(err, postgres.ErrNoUser) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ok, out.String()
}

// validate-impl passes the reference served over the protocol, and fails
// the mutants it can see, at the check that sees them.
func TestValidate(t *testing.T) {
	if ok, out := validate(t, serve("")); !ok {
		t.Fatalf("the reference failed:\n%s", out)
	}
	for _, tc := range []struct{ mutant, fails string }{
		{"no-check", "FAIL  c1's refresh once the server ended its session is not ok"},
		{"unlock-elsewhere", "FAIL  c1's second release answers expired"},
	} {
		ok, out := validate(t, serve(tc.mutant))
		if ok || !strings.Contains(out, tc.fails) {
			t.Errorf("mutant %s: passed %v, want %q:\n%s", tc.mutant, ok, tc.fails, out)
		}
	}
}

// An implementation that is not one fails at its start, saying so.
func TestValidateNotAnImplementation(t *testing.T) {
	ok, out := validate(t, "echo hello")
	if ok || !strings.Contains(out, "FAIL  c1 starts and answers init with init_ok") {
		t.Fatalf("echo passed %v:\n%s", ok, out)
	}
}

// The reference served over the protocol holds on drawn plans, as it does
// in this process: each client a process of its own, paused with SIGSTOP
// and killed with SIGKILL.
func TestProveServedReference(t *testing.T) {
	quick.Skip(t, "a private PostgreSQL server")
	x, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv, err := postgres.StartPrivate(x, t.TempDir())
	if errors.Is(err, postgres.ErrNoServer) || errors.Is(err, postgres.ErrNoUser) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	impl := pgadvisoryprotocol.NewProcesses(serve(""))
	defer impl.Stop()
	c := pgadvisoryrun.Config{Server: srv, Impl: impl}
	gen := rapid.Custom(func(rt *rapid.T) *pgadvisoryrun.Plan { return c.Draw(rt).(*pgadvisoryrun.Plan) })
	for i := range 4 {
		p := gen.Example(i)
		res, err := c.Run(t.Context(), p)
		if err != nil {
			t.Fatalf("plan %d: %v", i, err)
		}
		if len(res.Evidence.Problems) > 0 {
			t.Errorf("plan %d: problems: %v", i, res.Evidence.Problems)
		}
		rep := prover.Judge(res, model.Options{Family: []any{c.Judging("")}})
		for _, v := range rep.Verdicts {
			if v.Status == verdict.Fail {
				t.Errorf("plan %d (%s): %s: %s", i, p.Brief(), v.Property, v.Detail)
			}
		}
	}
}
