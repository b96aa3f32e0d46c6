// Package explore proves a family's open choices side by side: a matrix
// of proofs (variants of the reference as rows, families of faults as
// columns, say) whose cells say what held and what broke, as a Markdown
// table, with a minimal counterexample written for every violation. A
// family builds its matrices (and any table of its own) from it for
// `lockprover explore`; a go test can run one too.
package explore

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/internal/prover"
)

// Config says how hard each cell looks and where its counterexamples go.
type Config struct {
	Seed   uint64
	Plans  int           // plans per cell
	Shrink time.Duration // time to minimise each counterexample; 0 none
	Root   string        // counterexamples go to Root/<row>--<col>
	// Impls, if set, are implementations to prove, one row each, in
	// place of the reference's variants: each a command that starts one
	// of its processes (the family's process protocol).
	Impls []string
	// Out hears the tables; Log a line per cell as it ends.
	Out, Log io.Writer
}

// A Matrix is a table of proofs: Prove(r, c) is the proof in row r and
// column c.
type Matrix struct {
	Title      string // the rows' title: "variant", "design"
	Rows, Cols []string
	Prove      func(r, c int) prover.Subject
}

// Run proves every cell and writes the table to c.Out (what it has so far
// when ctx ends: the error then wraps ctx's). inconclusive says a cell's
// checks ran out of time; an error names the cell that could not run.
func (m Matrix) Run(ctx context.Context, c Config) (inconclusive bool, err error) {
	shrink := c.Shrink
	if shrink == 0 {
		shrink = time.Nanosecond // no shrinking
	}
	var b strings.Builder
	Header(&b, m.Title, m.Cols)
	for r, row := range m.Rows {
		b.WriteString("| " + row + " |")
		for col, name := range m.Cols {
			o, err := prover.Search{Config: prover.Config{Subject: m.Prove(r, col)}, Seed: c.Seed, Plans: c.Plans, Shrink: shrink, Context: ctx}.Run()
			if err != nil {
				return inconclusive, fmt.Errorf("%s, %s: %w", row, name, err)
			}
			if o.Interrupted {
				fmt.Fprintf(c.Out, "%s", b.String())
				return inconclusive, fmt.Errorf("interrupted at %s / %s: %w", row, name, context.Canceled)
			}
			text, undecided := cell(o, filepath.Join(c.Root, slug(row)+"--"+slug(name)), c.Log)
			inconclusive = inconclusive || undecided
			b.WriteString(" " + text + " |")
			fmt.Fprintf(c.Log, "%s / %s: %s\n", row, name, text)
		}
		b.WriteString("\n")
	}
	fmt.Fprint(c.Out, b.String())
	return inconclusive, nil
}

// Header writes a table's header: the rows' title, then a column each.
func Header(b *strings.Builder, title string, cols []string) {
	b.WriteString("| " + title + " |")
	for _, c := range cols {
		b.WriteString(" " + c + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
}

// cell says in a table cell how one cell's search ended: it held, it
// broke (the counterexample written to dir, or why it could not be), or
// checks ran out of time.
func cell(o *prover.Outcome, dir string, log io.Writer) (text string, inconclusive bool) {
	switch {
	case o.Found != nil:
		text = fmt.Sprintf("**%s** after %d plans: `%s`", strings.Join(violated(o.Found), ", "), o.Plans, dir)
		if err := o.Found.Write(dir); err != nil {
			fmt.Fprintf(log, "explore: writing the counterexample: %v\n", err)
			text = fmt.Sprintf("**%s** after %d plans (not written: %v)", strings.Join(violated(o.Found), ", "), o.Plans, err)
		}
		return text, false
	case o.Inconclusive > 0:
		return fmt.Sprintf("inconclusive on %d of %d plans (checks ran out of time)", o.Inconclusive, o.Plans), true
	}
	return fmt.Sprintf("holds (%d plans%s)", o.Plans, excused(o)), false
}

// excused says on how many plans each property held only by excuses
// ("; only by excuses: lease-exclusive on 131"), in the properties'
// alphabetical order; "" for none.
func excused(o *prover.Outcome) string {
	if len(o.Excused) == 0 {
		return ""
	}
	var ps []string
	for p, n := range o.Excused {
		ps = append(ps, fmt.Sprintf("%s on %d", p, n))
	}
	slices.Sort(ps)
	return "; only by excuses: " + strings.Join(ps, ", ")
}

// violated lists the properties a counterexample breaks, the one it was
// shrunk for first.
func violated(cx *prover.Counterexample) []string {
	props := []string{cx.Property}
	for _, v := range cx.Report.Verdicts {
		if v.Status.String() == "FAIL" && v.Property != cx.Property {
			props = append(props, v.Property)
		}
	}
	return props
}

func slug(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}
