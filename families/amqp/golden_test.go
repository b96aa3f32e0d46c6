package amqp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/families/amqp/check"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/rapidbatch"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
)

// goldenCases are fixed seeds' plans, run on the simulator and judged, whose
// every byte TestGoldenRuns pins: the reference's semaphore (judged by the
// standard and the strict model) and true mutex, and mutants that fail
// slot-exclusive, count-exact, no-leak and acquire-exact, so that failed
// verdicts' explanations are pinned too, not only passes.
var goldenCases = []struct {
	name  string
	c     Config
	seed  uint64
	plans int
	want  string // the SHA-256 of everything the plans gave (goldenDigest)
}{
	{"reference", Config{}, 1, 400, "7dfd577dd4ed1e1c658955d06c8534f497e2482d2b2a4deab0d843c86e6c4ebb"},
	{"mutex", Config{Kind: histories.Mutex}, 2, 150, "da4ac8a14ada0190f8516ed2513ad700fdd28a4b10c787104a6f7b2ad3c944e7"},
	{"b-not-exclusive", Config{Scope: prover.Scope{Mutant: "b-not-exclusive"}}, 3, 100, "8db16dbd2e2d31637d772c4ed7634c460f37afc4ccc3f1a7c74e8da9dbc459d9"},
	{"no-admin-mutex", Config{Scope: prover.Scope{Mutant: "no-admin-mutex"}}, 4, 100, "a576c78838ab86b257b98d68a8ebe6513a246db314752de61ad5c87305259807"},
	{"verify-from-cache", Config{Scope: prover.Scope{Mutant: "verify-from-cache"}}, 5, 100, "2279a790ce6797de51b8b1db758fc9d0e7dfbebe80fa1fa4d88dbe6daa3d8fc3"},
	{"ascending-no-overshoot", Config{Scope: prover.Scope{Mutant: "ascending-no-overshoot"}}, 6, 100, "3e748f2a7e06b0404da6ea1a6cbcad4c8dfa253c1b5dde348d6e94c65c665238"},
	{"release-by-channel-close", Config{Scope: prover.Scope{Mutant: "release-by-channel-close"}}, 7, 100, "86feaf5165a8648f311eaf55d3ee509d89c80eda88da95b415de6fe0dd3ea181"},
}

// TestGoldenRuns pins what the simulator and the checker give, byte for
// byte, on the plans of goldenCases: each plan's JSON, the simulator's
// trace, the history as written, the evidence, the interleavings, and every
// verdict (status only, as a search judges, and in full, with its detail
// and excuses; semaphores also by the strict model). A change that speeds
// the simulator, the runner or the checker must leave every digest as it
// is; a change that means to alter a run or a verdict updates them (the
// failure prints the new digest) and says why in its commit.
// LOCKPROVER_GOLDEN_DUMP=DIR writes what each case hashes to a file in
// DIR, to diff against the same from the commit before.
func TestGoldenRuns(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.name, func(t *testing.T) {
			got, failed := goldenDigest(t, gc.c, gc.seed, gc.plans)
			t.Logf("%d of %d plans failed a property", failed, gc.plans)
			if gc.name != "reference" && gc.name != "mutex" && failed == 0 {
				t.Errorf("no plan of mutant %s failed a property: its case pins no failed verdict", gc.name)
			}
			if got != gc.want {
				t.Errorf("seed %d, %d plans: digest %s, want %s (a run or a verdict changed)", gc.seed, gc.plans, got, gc.want)
			}
		})
	}
}

// goldenDigest draws plans 0..n-1 of seed (batch by batch, as a search
// does), runs each on the simulator with its trace, judges it, and hashes
// it all; failed counts the plans on which a property failed.
func goldenDigest(t *testing.T, c Config, seed uint64, n int) (digest string, failed int) {
	t.Helper()
	sum := sha256.New()
	var h io.Writer = sum
	if dir := os.Getenv("LOCKPROVER_GOLDEN_DUMP"); dir != "" {
		f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h = io.MultiWriter(sum, f)
	}
	for k := range n {
		p, ok := rapidbatch.Case(seed, k/500, k%500, c.Draw)
		if !ok {
			t.Fatalf("plan %d: rapid rejected its draw", k)
		}
		pl := p.(*Plan)
		fmt.Fprintf(h, "plan %d\n", k)
		if err := pl.Write(h); err != nil {
			t.Fatal(err)
		}
		var trace bytes.Buffer
		res, err := Simulator{Trace: &trace}.Run(context.Background(), pl, implFor(pl, Reference))
		if err != nil {
			t.Fatalf("plan %d: %v", k, err)
		}
		h.Write(trace.Bytes())
		if err := histories.Write(h, res.History); err != nil {
			t.Fatalf("plan %d: writing its history: %v", k, err)
		}
		ev, err := json.Marshal(res.Evidence)
		if err != nil {
			t.Fatalf("plan %d: %v", k, err)
		}
		h.Write(ev)
		var ils []string
		for _, il := range prover.Interleavings(res.History) {
			ils = append(ils, il.String())
		}
		slices.Sort(ils) // Interleavings lists them in no fixed order
		fmt.Fprintf(h, "%q\n", ils)
		models := []bool{false}
		if pl.Kind == histories.Semaphore {
			models = append(models, true)
		}
		for _, strict := range models {
			o := model.Options{Family: []any{check.Options{Strict: strict}}}
			full := prover.Judge(res, o)
			o.StatusOnly = true
			quick := prover.Judge(res, o)
			hashVerdicts(h, quick, false)
			hashVerdicts(h, full, true)
			if !strict && full.Status() == model.Fail {
				failed++
			}
		}
	}
	return hex.EncodeToString(sum.Sum(nil)), failed
}

func hashVerdicts(h io.Writer, r *model.Report, full bool) {
	for _, v := range r.Verdicts {
		if !full {
			fmt.Fprintf(h, "%s %s %v\n", v.Lock, v.Property, v.Status)
			continue
		}
		fmt.Fprintf(h, "%s %s %v %d %d %v %q\n", v.Lock, v.Property, v.Status, v.Judged, v.Slot, v.Ops, v.Detail)
		for _, e := range v.Excuses {
			fmt.Fprintf(h, "  %v %q\n", e.Ops, e.Why)
		}
	}
}
