package all_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	_ "github.com/lockprover/lockprover/cmd/lockprover/all"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover/run"
)

// The table's markers in docs/faults.md: what lies between them is
// faultsTable's, and nothing else.
const (
	tableBegins = "<!-- the fault table: made from run.Faults and the families' targets (TestFaultsPage) -->"
	tableEnds   = "<!-- end of the fault table -->"
)

// faultsTable is docs/faults.md's table: each fault of run.Faults, what
// it strikes, what ends it, what a history records of it, and the
// targets that strike it, family by family, as their descriptors say.
func faultsTable() string {
	var b strings.Builder
	b.WriteString("| fault | strikes | ended by | a history records | struck by (family: targets) |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, f := range run.Faults {
		var by []string
		for _, d := range family.All() {
			var ts []string
			for _, t := range d.Targets {
				if slices.Contains(t.Faults, f.Name) {
					ts = append(ts, "`"+t.Name+"`")
				}
			}
			if ts != nil {
				by = append(by, d.Name+": "+strings.Join(ts, ", "))
			}
		}
		name := "`" + f.Name + "`"
		if f.Cluster {
			name += " (cluster)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, f.Strikes, f.Ends, f.Records, strings.Join(by, "; "))
	}
	return b.String()
}

// docs/faults.md holds the table the code makes (faultsTable), so that it
// cannot drift; every fault a family's target strikes is in the table,
// and every fault of the table is struck somewhere.
func TestFaultsPage(t *testing.T) {
	page, err := os.ReadFile("../../../docs/faults.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), tableBegins+"\n\n")
	table, _, ok2 := strings.Cut(rest, "\n"+tableEnds)
	if !ok || !ok2 {
		t.Fatalf("docs/faults.md: the table's markers are missing:\n%s\n...\n%s", tableBegins, tableEnds)
	}
	if want := faultsTable(); table != want {
		t.Errorf("docs/faults.md's table is not the code's; put this between its markers:\n\n%s", want)
	}
	struck := map[string]bool{}
	for _, d := range family.All() {
		for _, tg := range d.Targets {
			for _, f := range tg.Faults {
				if _, ok := run.FaultNamed(f); !ok {
					t.Errorf("%s's target %s strikes %s, which the table (run.Faults) does not list", d.Name, tg.Name, f)
				}
				struck[f] = true
			}
		}
	}
	for _, f := range run.Faults {
		if !struck[f.Name] {
			t.Errorf("the table lists %s, which no family's target strikes", f.Name)
		}
	}
}
