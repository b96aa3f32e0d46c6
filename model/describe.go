package model

import (
	"fmt"
	"strings"

	"github.com/lockprover/lockprover/histories"
)

// describeOp renders an operation the way a person reads a history:
// "c1 acquire -> slot 2 (#12)".
func describeOp(o *op) string {
	return DescribeOp(o.name, o.f, o.arg, o.res, o.typ, o.err, o.index)
}

// DescribeOp renders an operation the way a person reads a history, in
// every family's verdicts: who, what with its argument, the outcome (typ ""
// for none) with its value or reason, the error the process gave, whether
// the outcome was patched from ground truth, and the invoke's index:
// "c1 acquire -> ok slot 2 (#12)".
func DescribeOp(process, f string, arg, res *histories.Value, typ histories.Type, err string, index int) string {
	var b strings.Builder
	b.WriteString(process + " " + f)
	if a := arg.Text(); a != "" {
		b.WriteString(" " + a)
	}
	switch {
	case typ == "":
		b.WriteString(" -> never completed")
	case typ == histories.Info:
		b.WriteString(" -> unknown (info)")
	case typ == histories.Fail:
		b.WriteString(" -> failed")
		if res != nil && res.Reason != "" {
			b.WriteString(" " + res.Reason)
		}
	default:
		b.WriteString(" -> ok")
		if r := res.Text(); r != "" {
			b.WriteString(" " + r)
		}
	}
	if err != "" {
		fmt.Fprintf(&b, " (error: %s)", err)
	}
	if res != nil && res.Patched {
		b.WriteString(" (patched from the simulator's ground truth)")
	}
	fmt.Fprintf(&b, " (#%d)", index)
	return b.String()
}

func describeFault(f *fault, procs []string) string {
	if f.target == 0 {
		return fmt.Sprintf("%s (#%d)", f.f, f.index)
	}
	return fmt.Sprintf("%s %s (#%d)", f.f, procs[f.target-1], f.index)
}
