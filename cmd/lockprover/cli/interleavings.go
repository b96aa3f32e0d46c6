package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/lockprover/lockprover/prover"
	"github.com/lockprover/lockprover/results"
)

// printInterleavings says, in a line, how many orders of two operations
// the run's plans reached (prover.Interleavings) and the least reached of
// them, with their share of plans: "count after another's change 16%" is
// an admin's count that began after another admin's change ended, with no
// operation of its own in between. --json lists them all.
func printInterleavings(w io.Writer, o *prover.Outcome) {
	if len(o.Interleavings) == 0 || o.Plans == 0 {
		return
	}
	all := prover.SortedInterleavings(o.Interleavings)
	var rare []string
	for k := len(all) - 1; k >= 0 && len(rare) < 3; k-- {
		rare = append(rare, fmt.Sprintf("%s %s", all[k], percent(o.Interleavings[all[k]], o.Plans)))
	}
	fmt.Fprintf(w, "%d interleavings of two operations reached; the rarest: %s (--json lists them all)\n", len(all), strings.Join(rare, ", "))
}

// percent is n of total as a percentage, "<1%" for a few.
func percent(n, total int) string {
	p := 100 * n / total
	if p == 0 {
		return "<1%"
	}
	return fmt.Sprintf("%d%%", p)
}

// printExcused says which properties (in report order) passed on some
// plans only by excuses, and on how many: a pass that rests on them says
// so. Unless quiet, the first excuse of each follows, indented; check and
// replay list every excuse of a history.
//
//	passed only by excuses: slot-exclusive on 10, available on 322 (of 1000 plans)
//	  slot-exclusive, the first: c1 verify slot 2 -> ok not held (#28): ...
func printExcused(w io.Writer, props []results.Property, plans int, quiet bool) {
	var counts, firsts []string
	for _, p := range props {
		if p.Excused > 0 {
			counts = append(counts, fmt.Sprintf("%s on %d", p.Name, p.Excused))
			firsts = append(firsts, fmt.Sprintf("  %s, the first: %s", p.Name, p.FirstExcuse))
		}
	}
	if len(counts) == 0 {
		return
	}
	fmt.Fprintf(w, "passed only by excuses: %s (of %d plans)\n", strings.Join(counts, ", "), plans)
	if !quiet {
		fmt.Fprintln(w, strings.Join(firsts, "\n"))
	}
}
