package model

import (
	"fmt"
	"strings"

	"github.com/lockprover/lockprover/histories"
)

// describeOp renders an operation the way a person reads a history:
// "c1 acquire -> slot 2 (#12)".
func describeOp(o *op) string {
	var b strings.Builder
	b.WriteString(o.name + " " + o.f)
	if a := o.arg.Text(); a != "" {
		b.WriteString(" " + a)
	}
	switch {
	case o.typ == "":
		b.WriteString(" -> never completed")
	case o.typ == histories.Info:
		b.WriteString(" -> unknown (info)")
	case o.typ == histories.Fail:
		b.WriteString(" -> failed")
		if o.res != nil && o.res.Reason != "" {
			b.WriteString(" " + o.res.Reason)
		}
	default:
		b.WriteString(" -> ok")
		if r := o.res.Text(); r != "" {
			b.WriteString(" " + r)
		}
	}
	if o.err != "" {
		fmt.Fprintf(&b, " (error: %s)", o.err)
	}
	if o.patched() {
		b.WriteString(" (patched from the simulator's ground truth)")
	}
	fmt.Fprintf(&b, " (#%d)", o.index)
	return b.String()
}

func describeFault(f *fault, procs []string) string {
	if f.target == 0 {
		return fmt.Sprintf("%s (#%d)", f.f, f.index)
	}
	return fmt.Sprintf("%s %s (#%d)", f.f, procs[f.target-1], f.index)
}
