package amqpcheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// What a history establishes: a create that succeeded settles the slots
// (none before it, exactly n after it) and the count; a history whose lock
// pre-existed keeps the caution of not knowing which slots were there.
func TestCreateSettlesTheSlots(t *testing.T) {
	for _, tc := range []struct {
		name      string
		history   string
		prop      string
		want      verdict.Status
		fragments []string
	}{
		{"an acquire beyond the count after create", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=3`, SlotExclusive, verdict.Fail, []string{"took slot 3, which did not exist"}},
		{"the same slot within the count", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=2`, SlotExclusive, verdict.Pass, nil},
		{"no create: the lock may have had slot 3 already", `
			c1 invoke acquire sem
			c1 ok acquire sem slot=3`, SlotExclusive, verdict.Pass, nil},
		{"create failed exists: the lock pre-existed", `
			admin invoke create sem slots=2
			admin fail create sem reason=exists
			c1 invoke acquire sem
			c1 ok acquire sem slot=3`, SlotExclusive, verdict.Pass, nil},
		{"create of unknown outcome settles nothing", `
			admin invoke create sem slots=2
			admin info create sem
			c1 invoke acquire sem
			c1 ok acquire sem slot=3`, SlotExclusive, verdict.Pass, nil},
		{"an admin adds the slot first", created2 + `
			admin invoke change sem delta=1
			admin ok change sem from=2 to=3
			c1 invoke acquire sem
			c1 ok acquire sem slot=3`, SlotExclusive, verdict.Pass, nil},
		{"a second create succeeds while the semaphore exists", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			admin invoke create sem slots=2
			admin ok create sem`, SlotExclusive, verdict.Fail, []string{"so the semaphore did not exist, but slot 1 did"}},
		{"create again after destroy", created2 + `
			admin invoke destroy sem
			admin ok destroy sem from=2
			admin invoke create sem slots=1
			admin ok create sem
			c1 invoke acquire sem
			c1 ok acquire sem slot=1`, SlotExclusive, verdict.Pass, nil},
		{"after destroy and a smaller create, slot 2 is gone", created2 + `
			admin invoke destroy sem
			admin ok destroy sem from=2
			admin invoke create sem slots=1
			admin ok create sem
			c1 invoke acquire sem
			c1 ok acquire sem slot=2`, SlotExclusive, verdict.Fail, []string{"took slot 2, which did not exist"}},
		{"quiescent full right after create with a free slot", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 fail acquire sem reason=full`, AcquireExact, verdict.Fail, []string{"slot 2", "failed full, but slot 2 was free"}},
		{"quiescent full right after create with every slot held", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 ok acquire sem slot=2
			c3 invoke acquire sem
			c3 fail acquire sem reason=full`, AcquireExact, verdict.Pass, nil},
		{"full with slot 2 free, no create: only slot 1 is known", `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 fail acquire sem reason=full`, AcquireExact, verdict.Pass, nil},
		// A count found 3 slots, then a create found none: either they
		// vanished or the create lied; the checker names the first.
		{"create succeeds on a semaphore a count found", `
			admin invoke count sem
			admin ok count sem slots=3
			admin invoke create sem slots=2
			admin ok create sem`, Persistent, verdict.Fail, []string{"slots vanished", "it succeeded, so the semaphore did not exist"}},
		{"create settles the count exactly", created2 + `
			admin invoke count sem
			admin ok count sem slots=3`, CountExact, verdict.Fail, []string{"found 3 slots", "leave 2 slots"}},
		{"count agrees with create", created2 + `
			admin invoke count sem
			admin ok count sem slots=2`, CountExact, verdict.Pass, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, hist(t, tc.history), model.Options{}, tc.prop, tc.want, tc.fragments...)
		})
	}
}

// An error the process gave is shown where the operation is described, and
// a true mutex is named as such, not as a slot.
func TestExplanationsNameErrorsAndTheMutex(t *testing.T) {
	h := hist(t, `
		c1 invoke acquire m
		c1 ok acquire m
		c2 invoke acquire m
		c2 ok acquire m`)
	expect(t, h, model.Options{}, SlotExclusive, verdict.Fail, "took the mutex while c1 held it")
	h = hist(t, created2+`
		c1 invoke acquire sem
		c1 ok acquire sem slot=1
		c2 invoke acquire sem
		c2 ok acquire sem slot=1`)
	h[len(h)-1].Error = "lease renewed late"
	expect(t, h, model.Options{}, SlotExclusive, verdict.Fail, "c2 acquire -> ok slot 1 (error: lease renewed late) (#4)")
}

// A dropped reply fires at the process's next method, whenever that is:
// clean completions that may have sent nothing do not use up its excuse,
// but the first outcome it cost does.
func TestDroppedReplyExcusesItsFirstCut(t *testing.T) {
	const armed = created2 + `
		c1 invoke acquire sem
		c1 ok acquire sem slot=1
		nemesis invoke drop-reply process=c1
		nemesis info drop-reply process=c1
		c1 invoke verify sem slot=1
		c1 ok verify sem held=false
		c1 invoke verify sem slot=1
		c1 ok verify sem held=false
		c1 invoke acquire sem
		c1 info acquire sem`
	expect(t, hist(t, armed), model.Options{}, Available, verdict.Pass)
	expect(t, hist(t, armed+`
		c1 invoke acquire sem
		c1 info acquire sem`), model.Options{}, Available, verdict.Fail, "no fault was in force on c1")
}

// RabbitMQ's exclusive-queue bug deletes c2's B queue by name (a
// queue-deleted the runner records) while c2 goes on verifying cleanly;
// c1 then takes the slot, and c2's release meets c1's queue (405) and
// answers unknown: the queue-deleted excuses it (issue 55, seen on RabbitMQ
// 3.10.8 in TestValidateTakesAnyScanOrder). It does not excuse a release
// after c2 acquired anew, nor a release of another process.
func TestQueueDeletedExcusesALaterRelease(t *testing.T) {
	const deleted = `
		admin invoke create sem slots=1
		admin ok create sem
		c2 invoke acquire sem
		c1 invoke acquire sem
		nemesis invoke kill process=c1
		nemesis info kill process=c1
		nemesis invoke queue-deleted process=c2
		nemesis info queue-deleted process=c2
		c1 info acquire sem
		c2 ok acquire sem slot=1
		c2 invoke verify sem slot=1
		c2 ok verify sem held=true
		c1 invoke acquire sem
		c1 ok acquire sem slot=1`
	const release = `
		c2 invoke release sem slot=1
		c2 info release sem`
	expect(t, hist(t, deleted+release), model.Options{}, Available, verdict.Pass)
	expect(t, hist(t, deleted+release), model.Options{}, SlotExclusive, verdict.Pass)
	expect(t, hist(t, deleted+`
		c2 invoke acquire sem
		c2 fail acquire sem reason=full`+release), model.Options{}, Available, verdict.Fail, "no fault was in force on c2")
	expect(t, hist(t, deleted+`
		c1 invoke release sem slot=1
		c1 info release sem`), model.Options{}, Available, verdict.Fail, "no fault was in force on c1")
}

// A release that answers ok after a fault may have cost its client the hold
// lets go of nothing: RabbitMQ answers a delete of a queue that is gone
// with ok. Seen in the soak of issue 55 (docs/measurements/soak/
// release-after-queue-deleted): the exclusive-queue bug deleted c3's B
// queue, c1 took and released slot 1, and c3, finding its slot lost,
// released it, ok. The pass shows the excuse it rests on. After c3
// acquired anew, such a release is one of a slot c3 must hold, and so it is
// in Knossos's mutex model, where no fault ends a hold.
func TestReleaseAfterALossLetsGoOfNothing(t *testing.T) {
	for _, lock := range []struct{ name, created, slot string }{
		{"semaphore", created2, " slot=1"},
		{"mutex", "", ""},
	} {
		t.Run(lock.name, func(t *testing.T) {
			l := "sem"
			if lock.name == "mutex" {
				l = "m"
			}
			text := func(fault, between string) string {
				return strings.NewReplacer("sem", l, " slot=1", lock.slot).Replace(lock.created + `
					c3 invoke acquire sem
					c3 ok acquire sem slot=1` + fault + `
					c1 invoke acquire sem
					c1 ok acquire sem slot=1
					c1 invoke release sem slot=1
					c1 ok release sem` + between + `
					c3 invoke release sem slot=1
					c3 ok release sem`)
			}
			const fault = `
					nemesis invoke queue-deleted process=c3
					nemesis info queue-deleted process=c3`
			h := hist(t, text(fault, ""))
			expect(t, h, model.Options{}, SlotExclusive, verdict.Pass)
			v := verdictOf(t, model.Check(h, model.Options{}), l, SlotExclusive)
			if !slices.ContainsFunc(v.Excuses, func(e verdict.Excuse) bool {
				return strings.Contains(e.Why, "c3 release") && strings.Contains(e.Why, "may have let go of nothing: queue-deleted c3")
			}) {
				t.Errorf("the pass does not show the release's excuse: %+v", v.Excuses)
			}
			expect(t, hist(t, text("", "")), model.Options{}, SlotExclusive, verdict.Fail, "while c3 held it")
			if lock.name == "semaphore" {
				expect(t, hist(t, text(fault, `
					c3 invoke acquire sem
					c3 ok acquire sem slot=2`)), model.Options{}, SlotExclusive, verdict.Fail, "released slot 1, which c3 did not hold")
			}
			// Knossos's mutex model: no fault ends a hold, so nothing is let go of.
			if lock.name == "mutex" {
				expect(t, h, model.Options{Jepsen: true}, SlotExclusive, verdict.Fail)
			}
		})
	}
}
