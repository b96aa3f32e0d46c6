package family

import (
	"context"
	"fmt"
	"io"
)

// A Differential is how a simulator-against-server comparison ended, in
// what every family's conform says of it (the Reports of
// adapters/conform/redisconform and adapters/conform/consulconform, and
// their error).
type Differential struct {
	Report     fmt.Stringer // the counts, as the Report says them
	Server     string       // "redis-server 7.0.15", "consul 1.20.2"
	Divergence string       // the first diverging sequence, "" if none
	Shrunk     string       // that sequence shrunk, "" if not
	// Sequences run, and how many of them the machine was too slow to
	// judge
	Sequences, Inconclusive int
	Err                     error  // the harness's
	Stopped                 string // what an interrupt stopped
}

// End writes what d says on out (a harness failure on c.Log if set) and
// turns it into conform's outcome: interrupted (an error wrapping ctx's,
// with d.Stopped saying what was stopped), inconclusive (the harness
// failed, or more than a tenth of the sequences could not be judged),
// diverging, or agreeing.
func (d Differential) End(ctx context.Context, c ConformConfig, out io.Writer) (Conformance, error) {
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(out, "interrupted after %s\n", d.Report)
		return 0, fmt.Errorf("interrupted; %s: %w", d.Stopped, ctx.Err())
	case d.Err != nil:
		log := c.Log
		if log == nil {
			log = out
		}
		fmt.Fprintf(log, "conform: the harness failed, nothing is decided: %v\n", d.Err)
		return Inconclusive, nil
	case d.Divergence != "":
		fmt.Fprintf(out, "%s: the simulator diverges from %s\n\n%s", d.Report, d.Server, d.Divergence)
		if d.Shrunk != "" {
			fmt.Fprintf(out, "\nshrunk:\n%s", d.Shrunk)
		}
		return Diverge, nil
	case d.Inconclusive*10 > d.Sequences:
		fmt.Fprintf(out, "%s: inconclusive, the machine was too slow to judge more than a tenth of them\n", d.Report)
		return Inconclusive, nil
	}
	fmt.Fprintf(out, "%s: the simulator agrees with %s\n", d.Report, d.Server)
	return Agree, nil
}
