package amqprun

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

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/rapidbatch"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
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
	{"reference", Config{}, 1, 400, "e82a483d773a1afcee6b52106d76e4fbb00845779de8b23fd576c01bda86612e"},
	{"mutex", Config{Kind: histories.Mutex}, 2, 150, "c1e66d5440133e7ba0f3dea40474aa5b9dff95edccb6d623c612c2449e9d1b9b"},
	{"b-not-exclusive", Config{Scope: prover.Scope{Mutant: "b-not-exclusive"}}, 3, 100, "4f5756fd71e3ce33b61280a8639f4bd2e5d86e06774ee7f1897e46ff9fa584f9"},
	{"no-admin-mutex", Config{Scope: prover.Scope{Mutant: "no-admin-mutex"}}, 4, 100, "d2fde24659447b836c06c4316fa0fac6d01d83153c88eac801405fb23bb380c4"},
	{"verify-from-cache", Config{Scope: prover.Scope{Mutant: "verify-from-cache"}}, 5, 100, "8050eeae3d1f6341b84dc8b914fedffea3f22714927ecd5b4db29b5f89680e8d"},
	{"ascending-no-overshoot", Config{Scope: prover.Scope{Mutant: "ascending-no-overshoot"}}, 6, 100, "da427aea89ae2e9a21bc6f03b3a41ea72d20ea6c4d75a3e1922e9bd124b19468"},
	{"release-by-channel-close", Config{Scope: prover.Scope{Mutant: "release-by-channel-close"}}, 7, 100, "6f56d81539ee16e116035f48ac7c7b2a09c7ecc3ee39d5495a12c5514da05465"},
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
			o := model.Options{Family: []any{amqpcheck.Options{Strict: strict}}}
			full := prover.Judge(res, o)
			o.StatusOnly = true
			quick := prover.Judge(res, o)
			hashVerdicts(h, quick, false)
			hashVerdicts(h, full, true)
			if !strict && full.Status() == verdict.Fail {
				failed++
			}
		}
	}
	return hex.EncodeToString(sum.Sum(nil)), failed
}

func hashVerdicts(h io.Writer, r *verdict.Report, full bool) {
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
