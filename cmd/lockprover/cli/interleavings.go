package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/lockprover/lockprover/histories/results"
	"github.com/lockprover/lockprover/internal/prover"
)

// printInterleavings says, in a line, what the run's plans reached
// (prover.Interleavings). For a family with steering goals
// (prover.Steerable): how many of them, in all and by whose operations
// met (admin/admin, admin/client, ...; faults during operations), how many
// plans were steered toward them, the rarest reached, and then, in a line
// of its own, the first of those never reached. For another: how many
// interleavings, and the three rarest. A share of plans follows each:
// "count after another's change (admin/admin) 16%" is an admin's count
// that began after another admin's change ended, with no operation of its
// own in between. --json lists them all.
//
//	goals: 129 of 129 reached (admin/admin 33/33, ..., faults 36/36), 500 steered; the rarest: ... <1% (--json lists them all)
func printInterleavings(w io.Writer, o *prover.Outcome) {
	if o.Plans == 0 || len(o.Interleavings) == 0 && len(o.Goals) == 0 {
		return
	}
	rarest := func(all []prover.Interleaving, n int) string {
		var rare []string
		for k := len(all) - 1; k >= 0 && len(rare) < n; k-- {
			rare = append(rare, fmt.Sprintf("%s %s", all[k], percent(o.Interleavings[all[k]], o.Plans)))
		}
		return strings.Join(rare, ", ")
	}
	if len(o.Goals) == 0 {
		all := prover.SortedInterleavings(o.Interleavings)
		fmt.Fprintf(w, "%d interleavings of two operations reached; the rarest: %s (--json lists them all)\n", len(all), rarest(all, 3))
		return
	}
	reached := map[prover.Interleaving]int{}
	var never []string
	type group struct {
		name         string
		reached, all int
	}
	var groups []*group
	byName := map[string]*group{}
	for _, g := range o.Goals {
		name := g.Who
		if g.How == prover.Struck {
			name = "faults"
		}
		gr := byName[name]
		if gr == nil {
			gr = &group{name: name}
			byName[name] = gr
			groups = append(groups, gr)
		}
		gr.all++
		if n := o.Interleavings[g]; n > 0 {
			reached[g] = n
			gr.reached++
		} else {
			never = append(never, g.String())
		}
	}
	var parts []string
	for _, gr := range groups {
		parts = append(parts, fmt.Sprintf("%s %d/%d", gr.name, gr.reached, gr.all))
	}
	fmt.Fprintf(w, "goals: %d of %d reached (%s), %d steered", len(reached), len(o.Goals), strings.Join(parts, ", "), o.Steered)
	if len(reached) > 0 {
		fmt.Fprintf(w, "; the rarest: %s", rarest(prover.SortedInterleavings(reached), 1))
	}
	fmt.Fprintln(w, " (--json lists them all)")
	if len(never) > 0 {
		more := ""
		if len(never) > 3 {
			more = fmt.Sprintf(" and %d more", len(never)-3)
			never = never[:3]
		}
		fmt.Fprintf(w, "never reached: %s%s\n", strings.Join(never, ", "), more)
	}
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
