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
	if a := valueText(o.arg); a != "" {
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
		if r := valueText(o.res); r != "" {
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

func valueText(v *histories.Value) string {
	if v == nil {
		return ""
	}
	var parts []string
	add := func(name string, p *int) {
		if p != nil {
			parts = append(parts, fmt.Sprintf("%s %d", name, *p))
		}
	}
	add("slot", v.Slot)
	add("slots", v.Slots)
	add("delta", v.Delta)
	add("from", v.From)
	add("to", v.To)
	if v.Held != nil {
		if *v.Held {
			parts = append(parts, "held")
		} else {
			parts = append(parts, "not held")
		}
	}
	return strings.Join(parts, ", ")
}

func describeFault(f *fault, procs []string) string {
	if f.target == 0 {
		return fmt.Sprintf("%s (#%d)", f.f, f.index)
	}
	return fmt.Sprintf("%s %s (#%d)", f.f, procs[f.target-1], f.index)
}
