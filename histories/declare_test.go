package histories_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
)

// epochValue is the value type of a kind declared here, as a family
// outside the format would declare it: fields the format has never heard
// of (epoch, tag, fresh), a reason, and a flag for the runner's patches.
type epochValue struct {
	Epoch   *int
	Reason  string
	Tag     string
	Fresh   *bool
	Patched bool
}

func (v *epochValue) WriteFields(w *histories.FieldWriter) {
	w.Int("epoch", v.Epoch)
	w.String("reason", v.Reason)
	w.String("tag", v.Tag)
	w.Bool("fresh", v.Fresh)
	w.Flag("patched", v.Patched)
}

func (v *epochValue) Text() string {
	var t histories.TextWriter
	t.Int("epoch", v.Epoch)
	t.String("tag", v.Tag)
	t.Bool("fresh", "stale", v.Fresh)
	return t.Text()
}

func (v *epochValue) IsPatched() bool { return v.Patched }

const epochKind = "epoch-lock"

func init() {
	values := &histories.ValueType{
		Fields: []histories.Field{{Name: "epoch", Type: histories.IntField}, {Name: "reason", Type: histories.StringField},
			{Name: "tag", Type: histories.StringField, Unique: true}, {Name: "fresh", Type: histories.BoolField},
			{Name: "patched", Type: histories.FlagField}},
		Make: func(r *histories.FieldReader) histories.Value {
			v := &epochValue{Reason: r.String("reason"), Tag: r.String("tag"), Patched: r.Flag("patched")}
			v.Epoch, v.Fresh = r.Int("epoch", new(int)), r.Bool("fresh", new(bool))
			return v
		},
		Check: func(v histories.Value) string {
			if e := v.(*epochValue); e.Epoch != nil && *e.Epoch < 1 {
				return "value.epoch: want an integer >= 1"
			}
			return ""
		},
		Patched: "patched",
	}
	histories.DeclareKind(epochKind, values,
		histories.Operation{F: histories.Acquire, Patchable: true,
			Invoke: histories.Shape{Fields: []string{"tag"}},
			Ok:     histories.Shape{Fields: []string{"epoch", "fresh"}, Required: []string{"epoch"}, Want: `{"epoch":e} with e >= 1`},
			Fail:   histories.Shape{Fields: []string{"reason"}, Reasons: []string{"taken"}}},
		histories.Operation{F: histories.Release, Invoke: histories.Shape{Fields: []string{"epoch"}, Required: []string{"epoch"}}},
		histories.Operation{F: "bump", Notice: true, Info: histories.Shape{Fields: []string{"epoch"}, Required: []string{"epoch"}}},
		histories.Operation{F: histories.Create, Refused: "an epoch lock is made by its first acquire"},
	)
}

// TestDeclaredValues reads, checks and writes the values of a kind the
// format does not know, through its declaration alone: its fields in the
// order it declares them, its shapes, its ranges, its reasons, its echoes,
// its patched flag, its notices and its refused operations.
func TestDeclaredValues(t *testing.T) {
	ev := func(s string) string { return `{"process":"c1",` + s + `,"lock":"e","kind":"epoch-lock"}` }
	good := hist(
		`{"process":"c1","type":"invoke","f":"acquire","lock":"e","kind":"epoch-lock","value":{"tag":"t\"1"}}`,
		`{"process":"c1","type":"info","f":"bump","lock":"e","kind":"epoch-lock","value":{"epoch":2}}`,
		`{"value":{"fresh":true,"epoch":3,"patched":true},"process":"c1","type":"ok","f":"acquire","lock":"e","kind":"epoch-lock"}`,
		ev(`"type":"invoke","f":"release","value":{"epoch":3}`),
		ev(`"type":"ok","f":"release","value":{"epoch":3}`),
		ev(`"type":"invoke","f":"acquire"`),
		// the value before the kind: a semaphore's reason too, until the
		// kind says otherwise
		`{"value":{"reason":"taken"},"process":"c1","type":"fail","f":"acquire","lock":"e","kind":"epoch-lock"}`)
	events, err := histories.Read(strings.NewReader(good), "h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	v := histories.As[*epochValue](&events[2])
	if v == nil || *v.Epoch != 3 || !*v.Fresh || !v.Patched || !histories.IsPatched(v) || v.Text() != "epoch 3, fresh" {
		t.Errorf("acquire ok decoded as %+v", v)
	}
	if !histories.IsNotice(&events[1]) || histories.IsNotice(&events[0]) {
		t.Error("bump is the kind's notice, acquire is not")
	}
	if got := histories.Reason(events[6].Value); got != "taken" || histories.As[*epochValue](&events[6]) == nil {
		t.Errorf("the fail read as %#v, reason %q", events[6].Value, got)
	}
	var out bytes.Buffer
	if err := histories.Write(&out, events); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"value":{"epoch":3,"fresh":true,"patched":true}`) || !strings.Contains(out.String(), `"value":{"tag":"t\"1"}`) {
		t.Errorf("not written in the declared order:\n%s", out.String())
	}
	again, err := histories.Read(&out, "again")
	if err != nil || len(again) != len(events) {
		t.Fatalf("the canonical form reads back: %v", err)
	}

	for _, c := range []struct{ name, h, want string }{
		{"unknown field", hist(ev(`"type":"invoke","f":"acquire","value":{"slot":1}`)), `h.jsonl:1: unknown field "slot" in a epoch-lock lock's value (want epoch, reason, tag, fresh, patched)`},
		{"wrong type", hist(ev(`"type":"invoke","f":"acquire","value":{"tag":1}`)), `h.jsonl:1: value.tag: want a string, got 1`},
		{"empty string", hist(ev(`"type":"invoke","f":"acquire","value":{"tag":""}`)), `h.jsonl:1: value.tag: want a non-empty string`},
		{"flag false", hist(ev(`"type":"invoke","f":"acquire"`), ev(`"type":"ok","f":"acquire","value":{"epoch":1,"patched":false}`)), `h.jsonl:2: value.patched: want true`},
		{"repeated", hist(ev(`"type":"invoke","f":"release","value":{"epoch":1,"epoch":2}`)), `h.jsonl:1: duplicate field "value.epoch"`},
		{"not in the shape", hist(ev(`"type":"invoke","f":"acquire","value":{"epoch":1}`)), `h.jsonl:1: value.epoch: not allowed: a epoch-lock acquire invoke wants a value with some of tag`},
		{"required", hist(ev(`"type":"invoke","f":"acquire"`), ev(`"type":"ok","f":"acquire","value":{"fresh":true}`)), `h.jsonl:2: value.epoch: missing: a epoch-lock acquire ok wants {"epoch":e} with e >= 1`},
		{"range", hist(ev(`"type":"invoke","f":"acquire"`), ev(`"type":"ok","f":"acquire","value":{"epoch":0}`)), `h.jsonl:2: value.epoch: want an integer >= 1`},
		{"reason", hist(ev(`"type":"invoke","f":"acquire"`), ev(`"type":"fail","f":"acquire","value":{"reason":"busy"}`)), `h.jsonl:2: value.reason: want "taken", got "busy"`},
		{"echo contradicts", hist(ev(`"type":"invoke","f":"release","value":{"epoch":2}`), ev(`"type":"ok","f":"release","value":{"epoch":3}`)), `h.jsonl:2: value.epoch: want 2, as in the invoke at line 1, got 3`},
		{"patched release", hist(ev(`"type":"invoke","f":"release","value":{"epoch":2}`), ev(`"type":"info","f":"release","value":{"patched":true}`)), `h.jsonl:2: value.patched: not allowed: only an acquire that completes ok or fail may be patched, not a epoch-lock release info`},
		{"notice with an invoke", hist(ev(`"type":"invoke","f":"bump","value":{"epoch":2}`)), `h.jsonl:1: type: a bump notice is a single info event`},
		{"refused", hist(ev(`"type":"invoke","f":"create"`)), `h.jsonl:1: f: "create" on lock "e", a epoch-lock: an epoch lock is made by its first acquire`},
		{"unknown operation", hist(ev(`"type":"invoke","f":"wait"`)), `h.jsonl:1: f: unknown operation "wait" for a epoch-lock lock (want one of acquire, release, bump)`},
	} {
		_, err := histories.Read(strings.NewReader(c.h), "h.jsonl")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v\nwant it to start %s", c.name, err, c.want)
		}
	}
}

// TestNilValueIsNoValue checks that a family's nil pointer handed on as a
// Value is no value: Of gives nil, and the Recorder and Write take it for
// none rather than writing an empty object.
func TestNilValueIsNoValue(t *testing.T) {
	var v *epochValue
	if histories.Of(v) != nil {
		t.Error("Of(nil *V) is not nil")
	}
	if histories.Of(&epochValue{}) == nil {
		t.Error("Of(&V{}) is nil")
	}
	r := histories.NewRecorder(func() int64 { return 1 })
	e := r.Add(histories.Event{Process: "c1", Type: histories.Invoke, F: histories.Acquire, Lock: "e", Kind: epochKind, Value: v})
	if e.Value != nil || r.Events()[0].Value != nil {
		t.Errorf("the Recorder kept a nil *V: %#v", e.Value)
	}
	var out bytes.Buffer
	histories.Write(&out, []histories.Event{{Process: "c1", Type: histories.Invoke, F: histories.Acquire, Lock: "e", Kind: epochKind, Value: v}})
	if strings.Contains(out.String(), "value") {
		t.Errorf("Write wrote a nil *V: %s", out.String())
	}
	if histories.TextOf(v) != "" || histories.IsPatched(v) || histories.Reason(v) != "" {
		t.Error("a nil *V has text, a patch or a reason")
	}
}
