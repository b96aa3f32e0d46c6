package amqpcheck

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// hist builds a history from lines "process type f [lock] [key=value...]",
// ten nanoseconds apart; "| n" on a line advances the clock by n more. The
// kind is mutex for locks named "m*".
func hist(t *testing.T, text string) []histories.Event {
	t.Helper()
	var h []histories.Event
	now := int64(0)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if gap, ok := strings.CutPrefix(line, "| "); ok {
			n, _ := strconv.Atoi(gap)
			now += int64(n)
			continue
		}
		f := strings.Fields(line)
		now += 10
		e := histories.Event{Index: len(h), Time: now, Process: f[0], Type: histories.Type(f[1]), F: f[2]}
		rest := f[3:]
		if e.Process != "nemesis" {
			e.Lock, rest = rest[0], rest[1:]
			if strings.HasPrefix(e.Lock, "m") {
				e.Kind = histories.Mutex
			}
		}
		for _, kv := range rest {
			k, v, _ := strings.Cut(kv, "=")
			if e.Value == nil && e.Process == "nemesis" {
				e.Value = &histories.Fault{}
			} else if e.Value == nil {
				e.Value = &Value{}
			}
			n, _ := strconv.Atoi(v)
			switch k {
			case "slot":
				ValueOf(&e).Slot = &n
			case "slots":
				ValueOf(&e).Slots = &n
			case "delta":
				ValueOf(&e).Delta = &n
			case "from":
				ValueOf(&e).From = &n
			case "to":
				ValueOf(&e).To = &n
			case "held":
				b := v == "true"
				ValueOf(&e).Held = &b
			case "reason":
				ValueOf(&e).Reason = v
			case "process":
				histories.FaultOf(&e).Process = v
			}
		}
		h = append(h, e)
	}
	// The notation is for valid histories only: round-trip through the
	// strict reader.
	var b strings.Builder
	if err := histories.Write(&b, h); err != nil {
		t.Fatal(err)
	}
	if _, err := histories.Read(strings.NewReader(b.String()), "test"); err != nil {
		t.Fatalf("invalid test history: %v", err)
	}
	return h
}

func verdictOf(t *testing.T, r *verdict.Report, lock, prop string) verdict.Verdict {
	t.Helper()
	for _, v := range r.Verdicts {
		if v.Lock == lock && v.Property == prop {
			return v
		}
	}
	t.Fatalf("no %s verdict for %s", prop, lock)
	return verdict.Verdict{}
}

// expect checks that prop has status want and, for a failure, that the
// detail mentions every fragment.
func expect(t *testing.T, h []histories.Event, o model.Options, prop string, want verdict.Status, fragments ...string) {
	t.Helper()
	r := model.Check(h, o)
	lock := "sem"
	for _, e := range h {
		if e.Lock != "" {
			lock = e.Lock
			break
		}
	}
	v := verdictOf(t, r, lock, prop)
	if v.Status != want {
		t.Fatalf("%s = %v (%s), want %v", prop, v.Status, v.Detail, want)
	}
	for _, f := range fragments {
		if !strings.Contains(v.Detail, f) {
			t.Errorf("%s detail %q lacks %q", prop, v.Detail, f)
		}
	}
}

const created2 = `
admin invoke create sem slots=2
admin ok create sem
`

func TestSlotExclusive(t *testing.T) {
	for _, tc := range []struct {
		name      string
		history   string
		want      verdict.Status
		fragments []string
	}{
		{"holders take turns", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 ok acquire sem slot=2
			c1 invoke verify sem slot=1
			c1 ok verify sem held=true
			c1 invoke release sem slot=1
			c1 ok release sem
			c3 invoke acquire sem
			c3 ok acquire sem slot=1`, verdict.Pass, nil},
		{"two holders of one slot", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 ok acquire sem slot=1`, verdict.Fail, []string{"slot 1:", "c2 acquire -> ok slot 1 (#4)", "while c1 held it", "c1 acquire -> ok slot 1 (#2)"}},
		{"a killed holder's slot is taken", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			nemesis invoke kill process=c1
			nemesis info kill process=c1
			c2 invoke acquire sem
			c2 ok acquire sem slot=1`, verdict.Pass, nil},
		{"verify says held after the slot was removed", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=2
			admin invoke change sem delta=-1
			admin ok change sem from=2 to=1
			c1 invoke verify sem slot=2
			c1 ok verify sem held=true`, verdict.Fail, []string{"said held, but slot 2 had been deleted", "admin change delta -1 -> ok from 2, to 1 (#4)"}},
		{"decrement then increment lets a new client in", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=2
			admin invoke change sem delta=-1
			admin ok change sem from=2 to=1
			admin invoke change sem delta=1
			admin ok change sem from=1 to=2
			c2 invoke acquire sem
			c2 ok acquire sem slot=2`, verdict.Fail, []string{"while c1 held it"}},
		{"verify says not held with nothing lost", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c1 invoke verify sem slot=1
			c1 ok verify sem held=false`, verdict.Fail, []string{"said not held, but c1 still held slot 1"}},
		{"verify says not held after a partition", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			nemesis invoke partition process=c1
			nemesis info partition process=c1
			c1 invoke verify sem slot=1
			c1 ok verify sem held=false`, verdict.Pass, nil},
		{"a hold taken after the heal survives the partition", created2 + `
			nemesis invoke partition process=c1
			nemesis info partition process=c1
			nemesis invoke heal process=c1
			nemesis info heal process=c1
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 ok acquire sem slot=1`, verdict.Fail, []string{"while c1 held it"}},
		{"an acquire of unknown outcome may have taken a slot", created2 + `
			c1 invoke acquire sem
			c1 info acquire sem
			c1 invoke verify sem slot=2
			c1 ok verify sem held=true
			c2 invoke acquire sem
			c2 ok acquire sem slot=1`, verdict.Pass, nil},
		{"a release of unknown outcome may have happened", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c1 invoke release sem slot=1
			c1 info release sem
			c2 invoke acquire sem
			c2 ok acquire sem slot=1`, verdict.Pass, nil},
		{"releasing a slot not held", created2 + `
			c1 invoke release sem slot=1
			c1 ok release sem`, verdict.Fail, []string{"released slot 1, which c1 did not hold"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, hist(t, tc.history), model.Options{}, SlotExclusive, tc.want, tc.fragments...)
		})
	}
}

func TestAcquireExact(t *testing.T) {
	for _, tc := range []struct {
		name      string
		history   string
		strict    bool
		want      verdict.Status
		fragments []string
	}{
		{"alone and full while a slot is free", `
			admin invoke create sem slots=1
			admin ok create sem
			c1 invoke acquire sem
			c1 fail acquire sem reason=full`, false, verdict.Fail, []string{"ran alone and failed full, but slot 1 was free"}},
		{"alone and full with every slot held", `
			admin invoke count sem
			admin ok count sem slots=2
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c2 ok acquire sem slot=2
			c3 invoke acquire sem
			c3 fail acquire sem reason=full`, false, verdict.Pass, nil},
		{"alone and full with the count known and slot 2 free", `
			admin invoke count sem
			admin ok count sem slots=2
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c3 invoke acquire sem
			c3 fail acquire sem reason=full`, false, verdict.Fail, []string{"slot 2 was free"}},
		{"alone and absent while slot 1 exists", created2 + `
			c1 invoke acquire sem
			c1 fail acquire sem reason=absent`, false, verdict.Fail, []string{"ran alone and failed, but slot 1 existed", "admin create slots 2 -> ok (#0)"}},
		{"alone and contended", created2 + `
			c1 invoke acquire sem
			c1 fail acquire sem reason=contended`, false, verdict.Fail, []string{"cannot have lost a race"}},
		{"full among other acquires: the spec's scan is not atomic", created2 + `
			c1 invoke acquire sem
			c2 invoke acquire sem
			c2 ok acquire sem slot=1
			c1 fail acquire sem reason=full`, false, verdict.NotJudged, []string{"nothing to judge"}},
		{"the same under the strict model", created2 + `
			c1 invoke acquire sem
			c2 invoke acquire sem
			c2 ok acquire sem slot=1
			c1 fail acquire sem reason=full`, true, verdict.Fail, []string{"(strict model)", "c1 acquire -> failed full"}},
		{"strict: a count of zero", `
			admin invoke count sem
			admin ok count sem slots=0
			c1 invoke acquire sem
			c1 fail acquire sem reason=absent`, true, verdict.Pass, nil},
		{"strict: full when every slot was held at one instant", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c2 invoke acquire sem
			c3 invoke acquire sem
			c2 ok acquire sem slot=2
			c3 fail acquire sem reason=full`, true, verdict.Pass, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, hist(t, tc.history), model.Options{Family: []any{Options{Strict: tc.strict}}}, AcquireExact, tc.want, tc.fragments...)
		})
	}
}

func TestCountExactAndPersistent(t *testing.T) {
	for _, tc := range []struct {
		name       string
		history    string
		count, per verdict.Status
		fragments  []string
	}{
		{"counts follow the admins", `
			admin invoke create sem slots=3
			admin ok create sem
			admin invoke count sem
			admin ok count sem slots=3
			admin invoke change sem delta=-1
			admin ok change sem from=3 to=2
			admin invoke count sem
			admin ok count sem slots=2`, verdict.Pass, verdict.Pass, nil},
		{"a count that is low, then right again: miscounted", `
			admin invoke create sem slots=3
			admin ok create sem
			admin invoke count sem
			admin ok count sem slots=1
			admin invoke count sem
			admin ok count sem slots=3`, verdict.Fail, verdict.Pass, []string{"found 1 slots", "leave 3 slots"}},
		{"two admins changing at once without the mutex", `
			admin invoke create sem slots=2
			admin ok create sem
			admin invoke change sem delta=1
			admin2 invoke change sem delta=1
			admin ok change sem from=2 to=3
			admin2 ok change sem from=2 to=3
			admin invoke count sem
			admin ok count sem slots=3`, verdict.Fail, verdict.Pass, nil},
		{"slots vanish across a restart", `
			admin invoke create sem slots=2
			admin ok create sem
			nemesis invoke restart-broker
			nemesis info restart-broker
			admin invoke count sem
			admin ok count sem slots=0`, verdict.Pass, verdict.Fail, []string{"slots vanished without an admin removing them", "found 0 slots"}},
		{"slots survive a restart", `
			admin invoke create sem slots=2
			admin ok create sem
			nemesis invoke restart-broker
			nemesis info restart-broker
			admin invoke count sem
			admin ok count sem slots=2`, verdict.Pass, verdict.Pass, nil},
		{"an admin crash leaves the count anywhere in its range", `
			admin invoke create sem slots=4
			admin ok create sem
			admin invoke change sem delta=-3
			nemesis invoke kill process=admin
			nemesis info kill process=admin
			admin2 invoke count sem
			admin2 ok count sem slots=2`, verdict.Pass, verdict.Pass, nil},
		{"a count concurrent with a change is not judged", `
			admin invoke create sem slots=4
			admin ok create sem
			admin invoke change sem delta=-3
			admin2 invoke count sem
			admin2 ok count sem slots=3
			admin ok change sem from=4 to=1`, verdict.Pass, verdict.Pass, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(t, tc.history)
			r := model.Check(h, model.Options{})
			c, p := verdictOf(t, r, "sem", CountExact), verdictOf(t, r, "sem", Persistent)
			if c.Status != tc.count || p.Status != tc.per {
				t.Fatalf("count-exact %v (%s), persistent %v (%s); want %v, %v", c.Status, c.Detail, p.Status, p.Detail, tc.count, tc.per)
			}
			for _, f := range tc.fragments {
				if !strings.Contains(c.Detail+p.Detail, f) {
					t.Errorf("details %q / %q lack %q", c.Detail, p.Detail, f)
				}
			}
		})
	}
}

func TestAvailable(t *testing.T) {
	for _, tc := range []struct {
		name, history string
		want          verdict.Status
		fragment      string
	}{
		{"an unknown outcome with no fault", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c1 invoke verify sem slot=1
			c1 info verify sem`, verdict.Fail, "no fault was in force on c1"},
		{"an unknown outcome during a kill", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c1 invoke verify sem slot=1
			nemesis invoke kill process=c1
			nemesis info kill process=c1`, verdict.Pass, ""},
		{"the first operation after a heal may find the connection dead", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			nemesis invoke partition process=c1
			nemesis info partition process=c1
			nemesis invoke heal process=c1
			nemesis info heal process=c1
			c1 invoke verify sem slot=1
			c1 info verify sem`, verdict.Pass, ""},
		{"after recovering, an unknown outcome is not excused", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			nemesis invoke force-close process=c1
			nemesis info force-close process=c1
			c1 invoke acquire sem
			c1 ok acquire sem slot=2
			c1 invoke verify sem slot=2
			c1 info verify sem`, verdict.Fail, "no fault was in force"},
		{"a wait that never ends with no fault", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			admin invoke wait sem slot=1
			admin info wait sem`, verdict.Fail, "no fault was in force on admin"},
		{"a wait for a killed holder, however long after the kill", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			nemesis invoke kill process=c1
			nemesis info kill process=c1
			admin invoke count sem
			admin ok count sem slots=2
			admin invoke wait sem slot=1
			admin info wait sem`, verdict.Pass, ""},
		{"a fault after a wait gave up does not excuse it", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			admin invoke wait sem slot=1
			admin info wait sem
			nemesis invoke kill process=c1
			nemesis info kill process=c1`, verdict.Fail, "no fault was in force on admin"},
		{"a fault after an unknown outcome does not excuse it", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c1 invoke verify sem slot=1
			c1 info verify sem
			nemesis invoke kill process=c1
			nemesis info kill process=c1`, verdict.Fail, "no fault was in force on c1"},
		{"a verify that never succeeds proves nothing", created2 + `
			c1 invoke acquire sem
			c1 ok acquire sem slot=1
			c1 invoke verify sem slot=1
			c1 fail verify sem reason=broken`, verdict.Fail, "no verify ever succeeded"},
		{"an answer the spec allows counts as success", `
			c1 invoke acquire sem
			c1 fail acquire sem reason=absent`, verdict.Pass, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var frags []string
			if tc.fragment != "" {
				frags = append(frags, tc.fragment)
			}
			expect(t, hist(t, tc.history), model.Options{}, Available, tc.want, frags...)
		})
	}
}

func TestMutex(t *testing.T) {
	for _, tc := range []struct {
		name, history, prop string
		want                verdict.Status
		fragment            string
	}{
		{"one holder at a time", `
			c1 invoke acquire m
			c1 ok acquire m
			c2 invoke acquire m
			c2 fail acquire m reason=held
			c1 invoke release m
			c1 ok release m
			c2 invoke acquire m
			c2 ok acquire m
			c2 invoke verify m
			c2 ok verify m held=true`, SlotExclusive, verdict.Pass, ""},
		{"two holders", `
			c1 invoke acquire m
			c1 ok acquire m
			c2 invoke acquire m
			c2 ok acquire m`, SlotExclusive, verdict.Fail, "while c1 held it"},
		{"held when free", `
			c1 invoke acquire m
			c1 ok acquire m
			c1 invoke release m
			c1 ok release m
			c2 invoke acquire m
			c2 fail acquire m reason=held`, AcquireExact, verdict.Fail, "failed held, but the mutex was free"},
		{"held when held, even among others", `
			c1 invoke acquire m
			c1 ok acquire m
			c2 invoke acquire m
			c3 invoke acquire m
			c2 fail acquire m reason=held
			c3 fail acquire m reason=held`, AcquireExact, verdict.Pass, ""},
		{"the holder lost after a kill", `
			c1 invoke acquire m
			c1 ok acquire m
			nemesis invoke kill process=c1
			nemesis info kill process=c1
			c2 invoke acquire m
			c2 ok acquire m`, SlotExclusive, verdict.Pass, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var frags []string
			if tc.fragment != "" {
				frags = append(frags, tc.fragment)
			}
			expect(t, hist(t, tc.history), model.Options{}, tc.prop, tc.want, frags...)
		})
	}
}

func TestSeveralLocksAreCheckedApart(t *testing.T) {
	h := hist(t, `
		admin invoke create a slots=1
		admin ok create a
		admin invoke create b slots=1
		admin ok create b
		c1 invoke acquire a
		c1 ok acquire a slot=1
		c2 invoke acquire b
		c2 ok acquire b slot=1
		c3 invoke acquire b
		c3 ok acquire b slot=1`)
	r := model.Check(h, model.Options{})
	if v := verdictOf(t, r, "a", SlotExclusive); v.Status != verdict.Pass {
		t.Errorf("lock a: %v %s", v.Status, v.Detail)
	}
	if v := verdictOf(t, r, "b", SlotExclusive); v.Status != verdict.Fail {
		t.Errorf("lock b: %v, want Fail", v.Status)
	}
	if r.Status() != verdict.Fail {
		t.Errorf("report status %v", r.Status())
	}
}

// A check that runs out of time is inconclusive, never pass.
func TestTimeoutIsInconclusive(t *testing.T) {
	var b strings.Builder
	b.WriteString("admin invoke create sem slots=8\nadmin ok create sem\n")
	for i := 0; i < 300; i++ {
		for c := 1; c <= 8; c++ {
			b.WriteString("c" + strconv.Itoa(c) + " invoke acquire sem\n")
		}
		for c := 1; c <= 8; c++ {
			b.WriteString("c" + strconv.Itoa(c) + " info acquire sem\n")
		}
	}
	h := hist(t, b.String())
	r := model.Check(h, model.Options{Timeout: time.Microsecond})
	if v := verdictOf(t, r, "sem", SlotExclusive); v.Status != verdict.Inconclusive {
		t.Fatalf("slot-exclusive = %v with a 1µs budget, want inconclusive", v.Status)
	}
}

func TestReportStatusIsTheWorstJudged(t *testing.T) {
	for _, tc := range []struct {
		in   []verdict.Status
		want verdict.Status
	}{
		{[]verdict.Status{verdict.Pass, verdict.NotJudged}, verdict.Pass},
		{[]verdict.Status{verdict.Pass, verdict.Inconclusive, verdict.NotJudged}, verdict.Inconclusive},
		{[]verdict.Status{verdict.Inconclusive, verdict.Fail, verdict.Pass}, verdict.Fail},
	} {
		r := &verdict.Report{}
		for _, s := range tc.in {
			r.Verdicts = append(r.Verdicts, verdict.Verdict{Status: s})
		}
		if got := r.Status(); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.in, got, tc.want)
		}
	}
}
