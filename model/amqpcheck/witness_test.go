package amqpcheck

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestWitnessOnlyWhatPorcupineAccepts: on random partitions of slot
// operations (ops of unknown outcome and faults among them) and of count
// operations, every linearization the search finds is one porcupine
// accepts too, and it finds one for most of those porcupine accepts.
func TestWitnessOnlyWhatPorcupineAccepts(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	found, ok := 0, 0
	for range 20000 {
		list := [][]porcupine.Operation{randomSlotOps(rnd)}
		w := witnessed(slotModel, list, time.Time{})
		m := slotModel
		m.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return list }
		p := porcupine.CheckOperations(m, nil)
		if w && !p {
			t.Fatalf("witnessed a history porcupine rejects: %+v", describeOps(list[0]))
		}
		if p {
			ok++
			if w {
				found++
			}
		}
	}
	t.Logf("%d of %d histories porcupine accepts witnessed", found, ok)
	if ok < 2000 || found < ok*9/10 {
		t.Errorf("%d of %d linearizable histories witnessed", found, ok)
	}
}

// randomSlotOps is a partition of up to 12 operations on one slot by 3
// processes, with overlapping times and some outcomes unknown.
func randomSlotOps(rnd *rand.Rand) []porcupine.Operation {
	kinds := []slotKind{take, maybeTake, release, maybeRelease, verifyHeld, verifyLost, create, remove, lost, seeHeld, seeMissing}
	n := 1 + rnd.IntN(12)
	ops := make([]porcupine.Operation, n)
	for i := range ops {
		k := kinds[rnd.IntN(len(kinds))]
		proc := 1 + rnd.IntN(3)
		call := int64(rnd.IntN(40))
		ret := call + int64(rnd.IntN(6))
		if k == maybeTake || k == maybeRelease || k == lost || rnd.IntN(10) == 0 {
			ret = never
		}
		so := &slotOp{kind: k, proc: proc, immune: int64(rnd.IntN(40))}
		ops[i] = porcupine.Operation{ClientId: i, Call: call, Return: ret, Input: &slotCall{so, call}}
	}
	return ops
}

func describeOps(ops []porcupine.Operation) []string {
	var out []string
	for _, o := range ops {
		c := o.Input.(*slotCall)
		out = append(out, c.op.kind.String()+" by "+string(rune('0'+c.op.proc))+" ["+time.Duration(o.Call).String()+", "+time.Duration(o.Return).String()+"]")
	}
	return out
}

// TestWitnessKeepsToTheDeadline: past its deadline the search gives up.
func TestWitnessKeepsToTheDeadline(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for {
		list := [][]porcupine.Operation{randomSlotOps(rnd)}
		if !witnessed(slotModel, list, time.Time{}) {
			continue
		}
		if witnessed(slotModel, list, time.Now().Add(-time.Second)) {
			t.Fatal("witnessed past its deadline")
		}
		return
	}
}
