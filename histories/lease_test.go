package histories_test

import (
	"bytes"
	"errors"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/lease"
	"reflect"
	"strings"
	"testing"
)

// Lines of the lease vocabulary used by the tests below.
const (
	lAcqInv = `{"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease","value":{"max":2,"ttl_ms":1000}}`
	lAcqOk  = `{"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"token":"t1","fence":7}}`
	lRefInv = `{"process":"c1","type":"invoke","f":"refresh","lock":"k","kind":"lease","value":{"token":"t1","ttl_ms":1000}}`
	lRelInv = `{"process":"c1","type":"invoke","f":"release","lock":"k","kind":"lease","value":{"token":"t1"}}`
	skewInv = `{"process":"nemesis","type":"invoke","f":"clock-skew","value":{"process":"c1","offset_ms":5000}}`
)

// TestReadLease checks the lease vocabulary: what is accepted, and that each
// mistake is refused naming its line and field.
func TestReadLease(t *testing.T) {
	good := hist(
		lAcqInv, lAcqOk,
		lRefInv, `{"process":"c1","type":"ok","f":"refresh","lock":"k","kind":"lease"}`,
		lRefInv, `{"process":"c1","type":"fail","f":"refresh","lock":"k","kind":"lease","value":{"reason":"expired"}}`,
		lRefInv, `{"process":"c1","type":"info","f":"refresh","lock":"k","kind":"lease","value":{"token":"t1","ttl_ms":1000}}`,
		lRelInv, `{"process":"c1","type":"fail","f":"release","lock":"k","kind":"lease","error":"deadlock"}`,
		lRelInv, `{"process":"c1","type":"ok","f":"release","lock":"k","kind":"lease","value":{"token":"t1"}}`,
		lAcqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"k","kind":"lease","value":{"reason":"full"}}`,
		lAcqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"k","kind":"lease"}`,
		lAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"max":2,"ttl_ms":1000,"token":"t2"}}`,
		skewInv, `{"process":"nemesis","type":"info","f":"clock-skew","value":{"process":"c1","offset_ms":5000}}`,
		`{"process":"nemesis","type":"invoke","f":"clock-jump","value":{"offset_ms":-300}}`, `{"process":"nemesis","type":"info","f":"clock-jump","value":{"offset_ms":-300}}`,
		`{"process":"nemesis","type":"invoke","f":"clock-reset"}`, `{"process":"nemesis","type":"info","f":"clock-reset"}`,
		`{"process":"nemesis","type":"invoke","f":"clock-reset","value":{"process":"c1"}}`, `{"process":"nemesis","type":"fail","f":"clock-reset","value":{"process":"c1","reason":"ntp"}}`,
		`{"process":"c2","type":"invoke","f":"acquire","lock":"sem"}`)
	events, err := histories.Read(strings.NewReader(good), "h.jsonl")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got := lease.ValueOf(&events[1]); got.Token != "t1" || got.Fence == nil || *got.Fence != 7 {
		t.Errorf("acquire ok decoded as %+v", got)
	}
	if got := lease.ValueOf(&events[0]); *got.Max != 2 || *got.TTLMs != 1000 {
		t.Errorf("acquire invoke decoded as %+v", got)
	}
	if got := histories.FaultOf(&events[18]); got.Process != "c1" || *got.OffsetMs != 5000 {
		t.Errorf("clock-skew decoded as %+v", got)
	}
	// The canonical form reads back the same.
	var buf bytes.Buffer
	if err := histories.Write(&buf, events); err != nil {
		t.Fatal(err)
	}
	again, err := histories.Read(bytes.NewReader(buf.Bytes()), "canonical.jsonl")
	if err != nil || !reflect.DeepEqual(events, again) {
		t.Fatalf("canonical form does not read back: %v\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), `"value":{"max":2,"ttl_ms":1000,"token":"t2"}`) {
		t.Errorf("canonical order of lease fields wrong:\n%s", buf.String())
	}

	for _, tt := range []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"unknown lease op", hist(`{"process":"c1","type":"invoke","f":"wait","lock":"k","kind":"lease"}`), 1, `f: unknown operation "wait" for a lease lock (want one of acquire, refresh, release, verify, lost)`},
		{"verify without token", hist(`{"process":"c1","type":"invoke","f":"verify","lock":"k","kind":"lease"}`), 1, "value.token: missing"},
		{"acquire without ttl", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease","value":{"max":1}}`), 1, "value.ttl_ms: missing"},
		{"acquire without value", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease"}`), 1, "value.max: missing"},
		{"max zero", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease","value":{"max":0,"ttl_ms":10}}`), 1, "value.max: want an integer >= 1, got 0"},
		{"ttl zero", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease","value":{"max":1,"ttl_ms":0}}`), 1, "value.ttl_ms: want an integer >= 1"},
		{"ttl a string", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease","value":{"max":1,"ttl_ms":"10"}}`), 1, `value.ttl_ms: want an integer, got the string "10"`},
		{"ok without token", hist(lAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"fence":1}}`), 2, "value.token: missing"},
		{"token a number", hist(lAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"token":5}}`), 2, "value.token: want a string, got 5"},
		{"empty token", hist(lAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"token":""}}`), 2, "value.token: want a non-empty string"},
		{"negative fence", hist(lAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"token":"a","fence":-1}}`), 2, "value.fence: want an integer >= 0, got -1"},
		{"fence a float", hist(lAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"token":"a","fence":1.5}}`), 2, "value.fence: want an integer, got 1.5"},
		{"acquire fails busy", hist(lAcqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"k","kind":"lease","value":{"reason":"busy"}}`), 2, `value.reason: want "full", got "busy"`},
		{"refresh fails full", hist(lRefInv, `{"process":"c1","type":"fail","f":"refresh","lock":"k","kind":"lease","value":{"reason":"full"}}`), 2, `value.reason: want "expired", got "full"`},
		{"refresh without token", hist(`{"process":"c1","type":"invoke","f":"refresh","lock":"k","kind":"lease","value":{"ttl_ms":10}}`), 1, "value.token: missing"},
		{"refresh ok with a token of its own", hist(lRefInv, `{"process":"c1","type":"ok","f":"refresh","lock":"k","kind":"lease","value":{"token":"t9"}}`), 2, `value.token: want "t1", as in the invoke at line 1, got "t9"`},
		{"release with ttl", hist(`{"process":"c1","type":"invoke","f":"release","lock":"k","kind":"lease","value":{"token":"a","ttl_ms":3}}`), 1, "value.ttl_ms: not allowed"},
		{"slot on a lease", hist(lAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"token":"a","slot":1}}`), 2, `unknown field "slot" in a lease lock's value (want held, reason, max, ttl_ms, token, fence, validity_ms, priority, thief, started_ms, replied_ms)`},
		{"patched lease", hist(lAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"token":"a","patched":true}}`), 2, `unknown field "patched" in a lease lock's value`},
		{"token on a semaphore", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":1,"token":"a"}}`), 2, `unknown field "token" in a semaphore lock's value (want slot, held, reason, slots, delta, from, to, patched)`},
		{"lease lock seen as semaphore", hist(lAcqInv, lAcqOk, `{"process":"c2","type":"invoke","f":"acquire","lock":"k"}`), 3, `kind: lock "k" is a semaphore here but was a lease at line 1`},
		{"clock skew without amount", hist(`{"process":"nemesis","type":"invoke","f":"clock-skew","value":{"process":"c1"}}`), 1, "value.offset_ms: missing"},
		{"clock skew of zero", hist(`{"process":"nemesis","type":"invoke","f":"clock-jump","value":{"offset_ms":0}}`), 1, "value.offset_ms: want a non-zero integer"},
		{"clock completion forgets its process", hist(skewInv, `{"process":"nemesis","type":"info","f":"clock-skew","value":{"offset_ms":5000}}`), 2, "value.process: missing: a clock-skew completion repeats its invoke's value (line 1)"},
		{"clock completion changes its amount", hist(skewInv, `{"process":"nemesis","type":"info","f":"clock-skew","value":{"process":"c1","offset_ms":10}}`), 2, "value.offset_ms: want 5000, as in the invoke at line 1, got 10"},
		{"clock completion names a process its invoke did not", hist(`{"process":"nemesis","type":"invoke","f":"clock-jump","value":{"offset_ms":9}}`, `{"process":"nemesis","type":"info","f":"clock-jump","value":{"process":"c1","offset_ms":9}}`), 2, "value.process: not allowed"},
		{"clock reset with amount", hist(`{"process":"nemesis","type":"invoke","f":"clock-reset","value":{"offset_ms":9}}`), 1, "value.offset_ms: not allowed"},
		{"clock fault from a client", hist(`{"process":"c1","type":"invoke","f":"clock-skew","lock":"k","kind":"lease","value":{"offset_ms":9}}`), 1, `f: "clock-skew" is a fault`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := histories.Read(strings.NewReader(tt.in), "h.jsonl")
			var e *histories.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want *Error", err)
			}
			if e.Line != tt.line || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got  %s\nwant h.jsonl:%d: ...%s...", err, tt.line, tt.msg)
			}
		})
	}
}

// A grant's validity_ms reads, writes back byte for byte, and shows in the
// value's text; negative says none was left, and is kept. It belongs to a
// granting acquire's or refresh's ok, and nowhere else.
func TestValidityMs(t *testing.T) {
	acq := `{"index":1,"time":5,"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"token":"t1","validity_ms":-3}}`
	ref := `{"index":3,"time":7,"process":"c1","type":"ok","f":"refresh","lock":"k","kind":"lease","value":{"ttl_ms":1000,"validity_ms":987}}`
	in := `{"index":0,"time":0,"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease","value":{"max":2,"ttl_ms":1000}}` + "\n" + acq + "\n" +
		`{"index":2,"time":6,"process":"c1","type":"invoke","f":"refresh","lock":"k","kind":"lease","value":{"ttl_ms":1000,"token":"t1"}}` + "\n" + ref + "\n"
	events, err := histories.Read(strings.NewReader(in), "h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := histories.Write(&out, events); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("written back:\n%s\nwant\n%s", out.String(), in)
	}
	if got := events[3].Value.Text(); !strings.Contains(got, "validity_ms 987") {
		t.Errorf("text %q lacks the validity", got)
	}
	bad := hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease","value":{"max":2,"ttl_ms":1000,"validity_ms":5}}`)
	if _, err := histories.Read(strings.NewReader(bad), "h.jsonl"); err == nil || !strings.Contains(err.Error(), "h.jsonl:1") {
		t.Errorf("validity_ms on an invoke: %v, want refused at line 1", err)
	}
}

// A priority acquire says its priority; a victim's lost notice is an info
// of its own, read and written back byte for byte, allowed while the
// process has an operation in flight, which it leaves in flight. Each
// mistake is refused naming its line and field.
func TestPriorityAndLost(t *testing.T) {
	in := `{"index":0,"time":0,"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease","value":{"max":1,"ttl_ms":1000,"priority":-2}}` + "\n" +
		`{"index":1,"time":5,"process":"c1","type":"ok","f":"acquire","lock":"k","kind":"lease","value":{"token":"t1"}}` + "\n" +
		`{"index":2,"time":6,"process":"c1","type":"invoke","f":"refresh","lock":"k","kind":"lease","value":{"ttl_ms":1000,"token":"t1"}}` + "\n" +
		`{"index":3,"time":7,"process":"c1","type":"info","f":"lost","lock":"k","kind":"lease","value":{"token":"t1","thief":"t2"}}` + "\n" +
		`{"index":4,"time":8,"process":"c1","type":"fail","f":"refresh","lock":"k","kind":"lease"}` + "\n"
	events, err := histories.Read(strings.NewReader(in), "h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := histories.Write(&out, events); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("written back:\n%s\nwant\n%s", out.String(), in)
	}
	if *lease.ValueOf(&events[0]).Priority != -2 || lease.ValueOf(&events[3]).Thief != "t2" || !histories.IsNotice(&events[3]) || histories.IsNotice(&events[4]) {
		t.Errorf("decoded as %+v, %+v", events[0].Value, events[3].Value)
	}
	if got := events[3].Value.Text(); got != "token t1, thief t2" {
		t.Errorf("text %q", got)
	}
	lost := func(v string) string {
		return `{"process":"c1","type":"info","f":"lost","lock":"k","kind":"lease","value":` + v + `}`
	}
	for _, tt := range []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"priority a string", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"k","kind":"lease","value":{"max":1,"ttl_ms":10,"priority":"high"}}`), 1, `value.priority: want an integer, got the string "high"`},
		{"priority on a refresh", hist(`{"process":"c1","type":"invoke","f":"refresh","lock":"k","kind":"lease","value":{"token":"a","ttl_ms":10,"priority":1}}`), 1, "value.priority: not allowed"},
		{"lost without thief", hist(lost(`{"token":"t1"}`)), 1, "value.thief: missing"},
		{"lost without token", hist(lost(`{"thief":"t1"}`)), 1, "value.token: missing"},
		{"empty thief", hist(lost(`{"token":"t1","thief":""}`)), 1, "value.thief: want a non-empty string"},
		{"lost with a fence", hist(lost(`{"token":"t1","thief":"t2","fence":1}`)), 1, "value.fence: not allowed"},
		{"lost invoked", hist(`{"process":"c1","type":"invoke","f":"lost","lock":"k","kind":"lease","value":{"token":"t1","thief":"t2"}}`), 1, "type: a lost notice is a single info event"},
		{"lost on a semaphore", hist(`{"process":"c1","type":"info","f":"lost","lock":"k","value":{"token":"t1","thief":"t2"}}`), 1, `f: unknown operation "lost" for a semaphore lock`},
		{"lost by the nemesis", hist(`{"process":"nemesis","type":"info","f":"lost","value":{"token":"t1","thief":"t2"}}`), 1, `f: process "nemesis" only injects faults`},
		{"lost on a lock of another kind", hist(`{"process":"c2","type":"invoke","f":"acquire","lock":"k"}`, lost(`{"token":"t1","thief":"t2"}`)), 2, `kind: lock "k" is a lease here but was a semaphore at line 1`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := histories.Read(strings.NewReader(tt.in), "h.jsonl")
			var e *histories.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want *Error", err)
			}
			if e.Line != tt.line || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got  %s\nwant h.jsonl:%d: ...%s...", err, tt.line, tt.msg)
			}
		})
	}
}
