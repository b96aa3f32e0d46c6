package all

import (
	"context"
	"fmt"
	"io"

	"github.com/lockprover/lockprover/family"
)

// A differential is how a simulator-against-server comparison ended, in
// what every family's conform says of it (sim/redissim's and
// sim/consulsim's Reports, and their error).
type differential struct {
	report     fmt.Stringer // the counts, as the Report says them
	server     string       // "redis-server 7.0.15", "consul 1.20.2"
	divergence string       // the first diverging sequence, "" if none
	shrunk     string       // that sequence shrunk, "" if not
	// sequences run, and how many of them the machine was too slow to
	// judge
	sequences, inconclusive int
	err                     error // the harness's
	stopped                 string
}

// end writes what d says on out (a harness failure on c.Log if set) and
// turns it into conform's outcome: interrupted (an error wrapping ctx's,
// with d.stopped saying what was stopped), inconclusive (the harness
// failed, or more than a tenth of the sequences could not be judged),
// diverging, or agreeing.
func (d differential) end(ctx context.Context, c family.ConformConfig, out io.Writer) (family.Conformance, error) {
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(out, "interrupted after %s\n", d.report)
		return 0, fmt.Errorf("interrupted; %s: %w", d.stopped, ctx.Err())
	case d.err != nil:
		log := c.Log
		if log == nil {
			log = out
		}
		fmt.Fprintf(log, "conform: the harness failed, nothing is decided: %v\n", d.err)
		return family.Inconclusive, nil
	case d.divergence != "":
		fmt.Fprintf(out, "%s: the simulator diverges from %s\n\n%s", d.report, d.server, d.divergence)
		if d.shrunk != "" {
			fmt.Fprintf(out, "\nshrunk:\n%s", d.shrunk)
		}
		return family.Diverge, nil
	case d.inconclusive*10 > d.sequences:
		fmt.Fprintf(out, "%s: inconclusive, the machine was too slow to judge more than a tenth of them\n", d.report)
		return family.Inconclusive, nil
	}
	fmt.Fprintf(out, "%s: the simulator agrees with %s\n", d.report, d.server)
	return family.Agree, nil
}
