package amqpcheck

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// A failure is explained the same way every time the same history is
// checked: here two acquires of slot 1 overlap, and either could be the
// one that "took slot 1 while the other held it"; porcupine hands its
// partial linearizations over in no fixed order.
func TestExplanationIsTheSameEveryTime(t *testing.T) {
	h, err := histories.ReadFile(filepath.Join("..", "..", "testdata", "histories", "150-overlapping-acquires-explained-alike.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first := ""
	for i := range 40 {
		var got string
		for _, v := range model.Check(h, model.Options{}).Verdicts {
			if v.Status == verdict.Fail {
				got += fmt.Sprintf("%s %s %d %v: %s\n", v.Lock, v.Property, v.Slot, v.Ops, v.Detail)
			}
		}
		if got == "" {
			t.Fatal("no failure")
		}
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("check %d explains otherwise:\n%s\nthe first:\n%s", i+1, got, first)
		}
	}
}
