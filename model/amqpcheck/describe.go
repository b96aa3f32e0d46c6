package amqpcheck

import (
	"fmt"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
)

// describeOp renders an operation the way a person reads a history:
// "c1 acquire -> slot 2 (#12)".
func describeOp(o *op) string {
	return model.DescribeOp(o.name, o.f, histories.Of(o.arg), histories.Of(o.res), o.typ, o.err, o.index)
}

func describeFault(f *fault, procs []string) string {
	said := ""
	if f.said != "" {
		said = " (" + f.said + ")"
	}
	if f.target == 0 {
		return fmt.Sprintf("%s (#%d)%s", f.f, f.index, said)
	}
	return fmt.Sprintf("%s %s (#%d)%s", f.f, procs[f.target-1], f.index, said)
}
