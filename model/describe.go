package model

import (
	"fmt"
	"strings"

	"github.com/lockprover/lockprover/histories"
)

// DescribeOp renders an operation the way a person reads a history, in
// every family's verdicts: who, what with its argument, the outcome (typ ""
// for none) with its value or reason, the error the process gave, whether
// the outcome was patched from ground truth, and the invoke's index:
// "c1 acquire -> ok slot 2 (#12)".
func DescribeOp(process, f string, arg, res histories.Value, typ histories.Type, err string, index int) string {
	var b strings.Builder
	b.WriteString(process + " " + f)
	if a := histories.TextOf(arg); a != "" {
		b.WriteString(" " + a)
	}
	switch {
	case typ == "":
		b.WriteString(" -> never completed")
	case typ == histories.Info:
		b.WriteString(" -> unknown (info)")
	case typ == histories.Fail:
		b.WriteString(" -> failed")
		if r := histories.Reason(res); r != "" {
			b.WriteString(" " + r)
		}
	default:
		b.WriteString(" -> ok")
		if r := histories.TextOf(res); r != "" {
			b.WriteString(" " + r)
		}
	}
	if err != "" {
		fmt.Fprintf(&b, " (error: %s)", err)
	}
	if histories.IsPatched(res) {
		b.WriteString(" (patched from the simulator's ground truth)")
	}
	fmt.Fprintf(&b, " (#%d)", index)
	return b.String()
}

// NeverSucceeded is available's second half, for every family: of the
// kinds of operation tried (in order), those that some attempt no fault
// cut short tried (fair) and none of which succeeded (ok), said as a
// verdict's detail; "" when there are none.
func NeverSucceeded(order []string, fair, ok map[string]int) string {
	var never []string
	for _, f := range order {
		if fair[f] > 0 && ok[f] == 0 {
			never = append(never, f)
		}
	}
	if len(never) == 0 {
		return ""
	}
	return fmt.Sprintf("no %s ever succeeded: a history in which an operation never succeeds proves nothing about it", strings.Join(never, " or "))
}
