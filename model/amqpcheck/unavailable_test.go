package amqpcheck

import (
	"testing"

	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// The spec's acquire says only "return lock-acquire failure": unavailable
// is full or absent, wrong only where a slot was certainly free and A[1]
// certainly existed.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		history   string
		strict    bool
		want      verdict.Status
		fragments []string
	}{
		{"alone while slot 1 exists and is free", created2 + `
			c1 invoke acquire sem
			c1 fail acquire sem reason=unavailable`, false, verdict.Fail, []string{"failed unavailable, but slot 1 existed and was free"}},
		{"alone while slot 2 is free", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 fail acquire sem reason=unavailable`, false, verdict.Fail, []string{"slot 2 existed and was free"}},
		{"alone with every slot held", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 ok acquire sem slot=2
			c3 invoke acquire sem
			c3 fail acquire sem reason=unavailable`, false, verdict.Pass, nil},
		{"alone after destroy: absent", created2 + `
			admin invoke destroy sem
			admin ok destroy sem from=2
			c1 invoke acquire sem
			c1 fail acquire sem reason=unavailable`, false, verdict.Pass, nil},
		{"alone with no semaphore ever created", `
			c1 invoke acquire sem
			c1 fail acquire sem reason=unavailable`, false, verdict.Pass, nil},
		{"alone, nothing known, after slot 1 was seen free", `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c1 invoke release sem slot=1
			c1 ok release sem
			c2 invoke acquire sem
			c2 fail acquire sem reason=unavailable`, false, verdict.Fail, []string{"slot 1 existed and was free"}},
		{"among other acquires: not judged by the standard model", created2 + `
			c1 invoke acquire sem
			c2 invoke acquire sem
			c2 ok acquire sem slot=1
			c1 fail acquire sem reason=unavailable`, false, verdict.NotJudged, []string{"nothing to judge"}},
		{"strict: with a slot free at every instant", created2 + `
			c1 invoke acquire sem
			c2 invoke acquire sem
			c2 ok acquire sem slot=1
			c1 fail acquire sem reason=unavailable`, true, verdict.Fail, []string{"(strict model)", "c1 acquire -> failed unavailable"}},
		{"strict: full at one instant", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c3 invoke acquire sem
			c2 ok acquire sem slot=2
			c3 fail acquire sem reason=unavailable`, true, verdict.Pass, nil},
		{"strict: absent", `
			admin invoke count sem
			admin ok count sem slots=0
			c1 invoke acquire sem
			c1 fail acquire sem reason=unavailable`, true, verdict.Pass, nil},
		// The precise reasons stay judged precisely.
		{"full while absent is wrong", created2 + `
			admin invoke destroy sem
			admin ok destroy sem from=2
			c1 invoke acquire sem
			c1 fail acquire sem reason=full`, false, verdict.Fail, []string{"slot 1 did not exist"}},
		{"absent while full is wrong", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 ok acquire sem slot=2
			c3 invoke acquire sem
			c3 fail acquire sem reason=absent`, false, verdict.Fail, []string{"slot 1 existed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, hist(t, tc.history), model.Options{Family: []any{Options{Strict: tc.strict}}}, AcquireExact, tc.want, tc.fragments...)
		})
	}
}

// unavailable is an answer the spec allows: it counts for available.
func TestUnavailableIsAnAnswer(t *testing.T) {
	expect(t, hist(t, `
		c1 invoke acquire sem
		c1 fail acquire sem reason=unavailable`), model.Options{}, Available, verdict.Pass)
}
