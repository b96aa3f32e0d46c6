package explore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/explore"
)

// A matrix's table says which cells held and which broke, and writes a
// counterexample for each broken one under its row and column.
func TestMatrix(t *testing.T) {
	root := t.TempDir()
	var out, log bytes.Buffer
	m := explore.Matrix{Title: "variant", Rows: []string{"reference", "Mutant A"}, Cols: []string{"no faults"},
		Prove: func(r, c int) prover.Subject {
			if r == 1 {
				return amqprun.Config{Scope: prover.Scope{Mutant: "b-not-exclusive", Faults: []string{}}}
			}
			return amqprun.Config{Scope: prover.Scope{Faults: []string{}}}
		}}
	inconclusive, err := m.Run(context.Background(), explore.Config{Seed: 1, Plans: 200, Root: root, Out: &out, Log: &log})
	if err != nil || inconclusive {
		t.Fatalf("%v, inconclusive %v", err, inconclusive)
	}
	table := out.String()
	if !strings.HasPrefix(table, "| variant | no faults |\n|---|---|\n| reference | holds (200 plans) |\n| Mutant A | **slot-exclusive") {
		t.Errorf("table:\n%s", table)
	}
	if _, err := os.Stat(filepath.Join(root, "mutant-a--no-faults", "plan.json")); err != nil {
		t.Errorf("counterexample not written: %v\n%s", err, table)
	}
	if !strings.Contains(log.String(), "reference / no faults: holds") {
		t.Errorf("log: %s", log.String())
	}
}

// An interrupted matrix writes what it has and says where it stopped.
func TestMatrixInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	m := explore.Matrix{Title: "variant", Rows: []string{"reference"}, Cols: []string{"all faults"},
		Prove: func(int, int) prover.Subject { return amqprun.Config{} }}
	_, err := m.Run(ctx, explore.Config{Seed: 1, Plans: 10, Root: t.TempDir(), Out: &out, Log: &out})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "reference / all faults") {
		t.Errorf("err %v", err)
	}
}
