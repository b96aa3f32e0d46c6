package histories_test

import (
	"errors"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// hist builds a history from lines. A line starting with '{' gets its index
// and time filled in (time 10, 20, 30, ...), so that tables only show what
// they are about; a line starting with '!' is taken as it is, without the
// '!'. Every line ends with '\n'.
func hist(lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		if raw, ok := strings.CutPrefix(l, "!"); ok {
			b.WriteString(raw)
		} else if rest, ok := strings.CutPrefix(l, "{"); ok {
			b.WriteString(`{"index":` + strconv.Itoa(i) + `,"time":` + strconv.Itoa(10*(i+1)))
			if rest != "}" {
				b.WriteString(",")
			}
			b.WriteString(rest)
		} else {
			b.WriteString(l)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Lines used by many cases.
const (
	acqInv  = `{"process":"c1","type":"invoke","f":"acquire","lock":"sem"}`
	acqOk   = `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2}}`
	verInv  = `{"process":"c1","type":"invoke","f":"verify","lock":"sem","value":{"slot":2}}`
	relInv  = `{"process":"c1","type":"invoke","f":"release","lock":"sem","value":{"slot":2}}`
	mAcqInv = `{"process":"c1","type":"invoke","f":"acquire","lock":"m","kind":"mutex"}`
	killInv = `{"process":"nemesis","type":"invoke","f":"kill","value":{"process":"c1"}}`
)

// TestReadRejects checks that every kind of bad history is rejected with an
// *Error naming the right line and saying what is wrong.
func TestReadRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
		line int
		msg  string // a substring of the message
	}{
		// Lines that are not one JSON object of known fields.
		{"malformed JSON", hist(acqInv, `!{"index":1,"time":20`), 2, "invalid JSON at column 21: want ',' or '}', got the end of the line"},
		{"missing colon", hist(`!{"index" 0}`), 1, "want ':' after the field name"},
		{"trailing comma", hist(`!{"index":0,}`), 1, "want a field name in double quotes, got '}'"},
		{"leading zero", hist(`!{"index":01}`), 1, "want ',' or '}', got '1'"},
		{"bare word", hist(`!{"index":zero}`), 1, "index: want an integer, got invalid JSON starting with 'z'"},
		{"array line", hist(`![{"index":0}]`), 1, "want a JSON object, got an array"},
		{"number line", hist(`!42`), 1, "want a JSON object, got 42"},
		{"string line", hist(`!"event"`), 1, `want a JSON object, got the string "event"`},
		{"two objects on a line", hist(acqInv[:len(acqInv)-1] + `}{}`), 1, "want one JSON object per line, got more after it"},
		{"text after the object", hist(acqInv + ` x`), 1, "want one JSON object per line"},
		{"long unknown field is shortened", hist(`!{"` + strings.Repeat("é", 30) + `":1}`), 1, `unknown field "` + strings.Repeat("é", 20) + `"... (want`},
		{"malformed number", hist(`!{"index":-}`), 1, "invalid JSON at column 11: want a digit, got '}'"},
		{"malformed exponent", hist(`!{"index":1e}`), 1, "want a digit in the exponent"},
		{"malformed fraction", hist(`!{"index":1.}`), 1, "want a digit after the decimal point"},
		{"number where a string goes", hist(`!{"process":-x}`), 1, "process: want a string, got a malformed number"},
		{"misspelt literal", hist(`!{"process":tru}`), 1, "process: want a string, got invalid JSON starting with 't'"},
		{"byte order mark", hist("\ufeff" + acqInv), 1, "want a JSON object, got invalid JSON starting with byte 0xef"},
		{"unknown field", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"sem","client":"c1"}`), 1, `unknown field "client" (want index, time, process, type, f, lock, kind, value, error)`},
		{"field names are case-sensitive", hist(`!{"Index":0}`), 1, `unknown field "Index"`},
		{"duplicate field", hist(`{"process":"c1","type":"invoke","type":"ok"}`), 1, `duplicate field "type"`},
		{"unknown value field", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slott":2}}`), 2, `unknown field "slott" in a semaphore lock's value (want slot, held, reason, slots, delta, from, to, patched)`},
		{"duplicate value field", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2,"slot":3}}`), 2, `duplicate field "value.slot"`},
		{"nested value", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":{"n":2}}}`), 2, "value.slot: want an integer, got an object"},
		{"slot as a string", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":"2"}}`), 2, `value.slot: want an integer, got the string "2"`},
		{"slot as a float", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2.0}}`), 2, "value.slot: want an integer, got 2.0"},
		{"slot out of range", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":1e400}}`), 2, "value.slot: want an integer, got 1e400"},
		{"held as a string", hist(acqInv, acqOk, verInv, `{"process":"c1","type":"ok","f":"verify","lock":"sem","value":{"held":"yes"}}`), 4, `value.held: want true or false, got the string "yes"`},
		{"held as a number", hist(acqInv, acqOk, verInv, `{"process":"c1","type":"ok","f":"verify","lock":"sem","value":{"held":1}}`), 4, "value.held: want true or false, got 1"},
		{"reason as a number", hist(acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":3}}`), 2, "value.reason: want a string, got 3"},
		{"empty reason", hist(acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":""}}`), 2, "value.reason: want a non-empty string"},
		{"value null where a value is wanted", hist(`{"process":"c1","type":"invoke","f":"verify","lock":"sem","value":null}`), 1, "value.slot: missing: a semaphore verify invoke wants"},
		{"value an array", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"sem","value":[]}`), 1, "value: want an object or null, got an array"},
		{"value field null", hist(`{"process":"c1","type":"invoke","f":"verify","lock":"sem","value":{"slot":null}}`), 1, "value.slot: want an integer, got null"},
		{"error on an invoke", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"sem","error":"early"}`), 1, "error: not allowed on an invoke"},
		{"error a number", hist(acqInv, `{"process":"c1","type":"info","f":"acquire","lock":"sem","error":504}`), 2, "error: want a string, got 504"},
		{"error an object", hist(acqInv, `{"process":"c1","type":"info","f":"acquire","lock":"sem","error":{"code":504}}`), 2, "error: want a string, got an object"},
		{"error empty", hist(acqInv, `{"process":"c1","type":"info","f":"acquire","lock":"sem","error":""}`), 2, "error: want a non-empty string, or null"},
		{"duplicate error", hist(acqInv, `{"process":"c1","type":"info","f":"acquire","lock":"sem","error":"a","error":"b"}`), 2, `duplicate field "error"`},
		{"index as a string", hist(`!{"index":"0"}`), 1, `index: want an integer, got the string "0"`},
		{"time as a float", hist(`!{"index":0,"time":1.5}`), 1, "time: want an integer, got 1.5"},
		{"time out of range", hist(`!{"index":0,"time":9223372036854775808}`), 1, "time: want an integer, got 9223372036854775808 (out of range)"},
		{"process as a number", hist(`{"process":1}`), 1, "process: want a string, got 1"},
		{"lock null", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":null}`), 1, "lock: want a string, got null"},
		{"blank line", hist(acqInv, ``, acqOk), 2, "empty line"},
		{"blank line at the end", hist(acqInv, ``), 2, "empty line"},
		{"blank first line", "\n" + hist(acqInv), 1, "empty line"},
		{"whitespace-only line", hist(acqInv, " \t"), 2, "empty line"},
		{"invalid UTF-8", hist("{\"process\":\"c\xff1\"}"), 1, "not valid UTF-8"},
		{"control character in a string", hist("{\"process\":\"c\t1\"}"), 1, "control character 0x09 in a string"},
		{"invalid escape", hist(`{"process":"c\x1"}`), 1, "invalid escape in a string"},
		{"invalid unicode escape", hist(`{"process":"c\u12"}`), 1, `invalid \u escape`},
		{"unterminated string", hist(`!{"index":0,"process":"c1`), 1, "unterminated string"},

		// Where the event is.
		{"index missing", hist(`!{"time":10,"process":"c1","type":"invoke","f":"acquire","lock":"sem"}`), 1, "index: missing (want 0"},
		{"index not the position", hist(acqInv, `!{"index":5,"time":20,"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2}}`), 2, "index: want 1 (the event's 0-based position), got 5"},
		{"time missing", hist(`!{"index":0,"process":"c1","type":"invoke","f":"acquire","lock":"sem"}`), 1, "time: missing"},
		{"time negative", hist(`!{"index":0,"time":-1,"process":"c1","type":"invoke","f":"acquire","lock":"sem"}`), 1, "time: want an integer >= 0 (nanoseconds), got -1"},
		{"time decreasing", hist(acqInv, `!{"index":1,"time":5,"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2}}`), 2, "time: 5 is before the previous event's time 10"},

		// Who does what.
		{"type unknown", hist(`{"process":"c1","type":"done","f":"acquire","lock":"sem"}`), 1, `type: want invoke, ok, fail or info, got "done"`},
		{"type missing", hist(`{"process":"c1","f":"acquire","lock":"sem"}`), 1, "type: missing"},
		{"process missing", hist(`{"type":"invoke","f":"acquire","lock":"sem"}`), 1, "process: missing"},
		{"process empty", hist(`{"process":"","type":"invoke","f":"acquire","lock":"sem"}`), 1, "process: want a non-empty string"},
		{"f missing", hist(`{"process":"c1","type":"invoke","lock":"sem"}`), 1, "f: missing"},
		{"f unknown for a semaphore", hist(`{"process":"c1","type":"invoke","f":"take","lock":"sem"}`), 1, `f: unknown operation "take" for a semaphore lock (want one of acquire, verify, release, create, change, destroy, count, wait)`},
		{"f unknown for a mutex", hist(`{"process":"c1","type":"invoke","f":"take","lock":"m","kind":"mutex"}`), 1, `f: unknown operation "take" for a mutex lock (want one of acquire, verify, release)`},
		{"f unknown for the nemesis", hist(`{"process":"nemesis","type":"invoke","f":"crash","value":{"process":"c1"}}`), 1, `f: process "nemesis" only injects faults (want one of kill, pause, resume, partition, heal, force-close, restart-broker, drop-reply, queue-deleted, clock-skew, clock-jump, clock-reset), got "crash"`},
		{"kind unknown", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"sem","kind":"rwlock"}`), 1, `", "lease", "epoch-lock" (or no kind, meaning semaphore: the kinds the families linked in declare), got "rwlock"`},
		{"kind empty", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"sem","kind":""}`), 1, `kind: want one of "semaphore", "mutex", "lease"`},
		{"lock with two kinds", hist(acqInv, acqOk, `{"process":"c2","type":"invoke","f":"acquire","lock":"sem","kind":"mutex"}`), 3, `kind: lock "sem" is a mutex here but was a semaphore at line 1`},
		{"lock with two kinds, explicit first", hist(mAcqInv, `{"process":"c2","type":"invoke","f":"acquire","lock":"m"}`), 2, `kind: lock "m" is a semaphore here but was a mutex at line 1`},
		{"lock missing", hist(`{"process":"c1","type":"invoke","f":"acquire"}`), 1, "lock: missing"},
		{"lock empty", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":""}`), 1, "lock: want a non-empty string"},
		{"lock on a nemesis event", hist(`{"process":"nemesis","type":"invoke","f":"kill","lock":"sem","value":{"process":"c1"}}`), 1, `lock: a nemesis event names no lock, got "sem"`},
		{"kind on a nemesis event", hist(`{"process":"nemesis","type":"invoke","f":"kill","kind":"mutex","value":{"process":"c1"}}`), 1, "kind: a nemesis event names no lock, so no kind"},
		{"nemesis doing a client operation", hist(`{"process":"nemesis","type":"invoke","f":"acquire","lock":"sem"}`), 1, `f: process "nemesis" only injects faults`},
		{"client injecting a fault", hist(`{"process":"c1","type":"invoke","f":"kill","value":{"process":"c2"}}`), 1, `f: "kill" is a fault; only process "nemesis" may inject it`},
		{"nemesis ok", hist(killInv, `{"process":"nemesis","type":"ok","f":"kill","value":{"process":"c1"}}`), 2, "type: a nemesis operation completes with info"},
		{"admin operation on a mutex", hist(`{"process":"admin","type":"invoke","f":"create","lock":"m","kind":"mutex"}`), 1, "a true mutex has no admin"},

		// Operations.
		{"completion without invoke", hist(acqOk), 1, `type: ok for process "c1", which has no operation in flight`},
		{"completion after completion", hist(acqInv, acqOk, acqOk), 3, `type: ok for process "c1", which has no operation in flight`},
		{"info without invoke", hist(`{"process":"c1","type":"info","f":"acquire","lock":"sem"}`), 1, `type: info for process "c1", which has no operation in flight`},
		{"second invoke in flight", hist(acqInv, verInv), 2, `type: process "c1" invokes verify while its acquire invoked at line 1 is still in flight`},
		{"completion of another f", hist(acqInv, `{"process":"c1","type":"ok","f":"verify","lock":"sem","value":{"held":true}}`), 2, "f: this ok completes verify, but the operation invoked at line 1 is acquire"},
		{"completion on another lock", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem2","value":{"slot":2}}`), 2, `lock: this ok is on lock "sem2", but the operation invoked at line 1 is on lock "sem"`},
		{"completion of another kind", hist(mAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"m"}`), 2, "kind: this ok says semaphore, but the operation invoked at line 1 says mutex"},

		// Values: semaphore clients.
		{"acquire invoke with a slot", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"sem","value":{"slot":1}}`), 1, "value.slot: not allowed: a semaphore acquire invoke carries no value"},
		{"acquire ok without value", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem"}`), 2, `value.slot: missing: a semaphore acquire ok wants {"slot":k} with k >= 1`},
		{"acquire ok with empty value", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{}}`), 2, "value.slot: missing"},
		{"acquire ok slot 0", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":0}}`), 2, "value.slot: want an integer >= 1, got 0"},
		{"acquire ok with held", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":1,"held":true}}`), 2, `value.held: not allowed: a semaphore acquire ok wants {"slot":k}`},
		{"acquire fail without reason", hist(acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem"}`), 2, `value.reason: missing: a semaphore acquire fail wants {"reason":"full"|"absent"|"unavailable"|"contended"}`},
		{"acquire fail unknown reason", hist(acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":"busy"}}`), 2, `value.reason: want "full", "absent", "unavailable" or "contended", got "busy"`},
		{"acquire info with a value", hist(acqInv, `{"process":"c1","type":"info","f":"acquire","lock":"sem","value":{"slot":1}}`), 2, "value.slot: not allowed: a semaphore acquire info carries no value"},
		{"verify invoke without slot", hist(acqInv, acqOk, `{"process":"c1","type":"invoke","f":"verify","lock":"sem"}`), 3, "value.slot: missing: a semaphore verify invoke wants"},
		{"verify invoke slot 0", hist(`{"process":"c1","type":"invoke","f":"verify","lock":"sem","value":{"slot":0}}`), 1, "value.slot: want an integer >= 1, got 0"},
		{"verify ok without held", hist(verInv, `{"process":"c1","type":"ok","f":"verify","lock":"sem","value":{"slot":2}}`), 2, "value.held: missing: a semaphore verify ok wants"},
		{"verify ok with another slot", hist(verInv, `{"process":"c1","type":"ok","f":"verify","lock":"sem","value":{"slot":3,"held":true}}`), 2, "value.slot: want 2, as in the invoke at line 1, got 3 (a completion may repeat its invoke's value, not contradict it)"},
		{"verify fail with another slot", hist(verInv, `{"process":"c1","type":"fail","f":"verify","lock":"sem","value":{"slot":1,"reason":"x"}}`), 2, "value.slot: want 2, as in the invoke at line 1, got 1"},
		{"verify fail with held", hist(verInv, `{"process":"c1","type":"fail","f":"verify","lock":"sem","value":{"slot":2,"held":true}}`), 2, "value.held: not allowed: a semaphore verify fail wants no value, or {\"reason\":r} saying why (besides the fields of its invoke at line 1, which it may repeat)"},
		{"verify info with another slot", hist(verInv, `{"process":"c1","type":"info","f":"verify","lock":"sem","value":{"slot":7}}`), 2, "value.slot: want 2, as in the invoke at line 1, got 7"},
		{"verify info with held", hist(verInv, `{"process":"c1","type":"info","f":"verify","lock":"sem","value":{"held":false}}`), 2, "value.held: not allowed: a semaphore verify info carries no value"},
		{"release invoke negative slot", hist(`{"process":"c1","type":"invoke","f":"release","lock":"sem","value":{"slot":-1}}`), 1, "value.slot: want an integer >= 1, got -1"},
		{"release invoke without slot", hist(`{"process":"c1","type":"invoke","f":"release","lock":"sem"}`), 1, "value.slot: missing"},
		{"release ok with another slot", hist(relInv, `{"process":"c1","type":"ok","f":"release","lock":"sem","value":{"slot":1}}`), 2, "value.slot: want 2, as in the invoke at line 1, got 1"},
		{"release fail with another slot", hist(relInv, `{"process":"c1","type":"fail","f":"release","lock":"sem","value":{"slot":3,"reason":"404"}}`), 2, "value.slot: want 2, as in the invoke at line 1, got 3"},
		{"release ok with held", hist(relInv, `{"process":"c1","type":"ok","f":"release","lock":"sem","value":{"held":false}}`), 2, "value.held: not allowed"},
		{"release info with a reason", hist(relInv, `{"process":"c1","type":"info","f":"release","lock":"sem","value":{"reason":"timeout"}}`), 2, "value.reason: not allowed: a semaphore release info carries no value"},

		// Values: semaphore admin.
		{"create without slots", hist(`{"process":"admin","type":"invoke","f":"create","lock":"sem"}`), 1, `value.slots: missing: a semaphore create invoke wants {"slots":n} with n >= 0`},
		{"create negative slots", hist(`{"process":"admin","type":"invoke","f":"create","lock":"sem","value":{"slots":-1}}`), 1, "value.slots: want an integer >= 0, got -1"},
		{"create ok with other slots", hist(`{"process":"admin","type":"invoke","f":"create","lock":"sem","value":{"slots":2}}`, `{"process":"admin","type":"ok","f":"create","lock":"sem","value":{"slots":3}}`), 2, "value.slots: want 2, as in the invoke at line 1, got 3"},
		{"create ok with a value not echoed", hist(`{"process":"admin","type":"invoke","f":"create","lock":"sem","value":{"slots":2}}`, `{"process":"admin","type":"ok","f":"create","lock":"sem","value":{"slots":2,"from":0}}`), 2, "value.from: not allowed: a semaphore create ok carries no value (besides the fields of its invoke at line 1, which it may repeat)"},
		{"create fail with other slots", hist(`{"process":"admin","type":"invoke","f":"create","lock":"sem","value":{"slots":2}}`, `{"process":"admin","type":"fail","f":"create","lock":"sem","value":{"slots":1,"reason":"exists"}}`), 2, "value.slots: want 2, as in the invoke at line 1, got 1"},
		{"change ok with another delta", hist(`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":1}}`, `{"process":"admin","type":"ok","f":"change","lock":"sem","value":{"delta":-1,"from":2,"to":1}}`), 2, "value.delta: want 1, as in the invoke at line 1, got -1"},
		{"change info with another delta", hist(`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":1}}`, `{"process":"admin","type":"info","f":"change","lock":"sem","value":{"delta":2}}`), 2, "value.delta: want 1, as in the invoke at line 1, got 2"},
		{"count ok echo of nothing", hist(`{"process":"admin","type":"invoke","f":"count","lock":"sem"}`, `{"process":"admin","type":"ok","f":"count","lock":"sem","value":{"slots":1,"delta":1}}`), 2, "value.delta: not allowed: a semaphore count ok wants {\"slots\":c} with c >= 0"},
		{"change delta 0", hist(`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":0}}`), 1, "value.delta: want a non-zero integer, got 0"},
		{"change without delta", hist(`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"slots":2}}`), 1, "value.slots: not allowed: a semaphore change invoke wants {\"delta\":d}"},
		{"change ok without to", hist(`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":1}}`, `{"process":"admin","type":"ok","f":"change","lock":"sem","value":{"from":1}}`), 2, `value.to: missing: a semaphore change ok wants {"from":c,"to":c'}`},
		{"change ok negative from", hist(`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":1}}`, `{"process":"admin","type":"ok","f":"change","lock":"sem","value":{"from":-1,"to":0}}`), 2, "value.from: want an integer >= 0, got -1"},
		{"change ok negative to", hist(`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":-3}}`, `{"process":"admin","type":"ok","f":"change","lock":"sem","value":{"from":1,"to":-2}}`), 2, "value.to: want an integer >= 0, got -2"},
		{"destroy invoke with a value", hist(`{"process":"admin","type":"invoke","f":"destroy","lock":"sem","value":{"slots":0}}`), 1, "value.slots: not allowed: a semaphore destroy invoke carries no value"},
		{"destroy ok without from", hist(`{"process":"admin","type":"invoke","f":"destroy","lock":"sem"}`, `{"process":"admin","type":"ok","f":"destroy","lock":"sem"}`), 2, `value.from: missing: a semaphore destroy ok wants {"from":c} with c >= 0`},
		{"count ok without slots", hist(`{"process":"admin","type":"invoke","f":"count","lock":"sem"}`, `{"process":"admin","type":"ok","f":"count","lock":"sem","value":{}}`), 2, "value.slots: missing: a semaphore count ok wants"},
		{"count ok negative slots", hist(`{"process":"admin","type":"invoke","f":"count","lock":"sem"}`, `{"process":"admin","type":"ok","f":"count","lock":"sem","value":{"slots":-4}}`), 2, "value.slots: want an integer >= 0, got -4"},
		{"wait without slot", hist(`{"process":"admin","type":"invoke","f":"wait","lock":"sem"}`), 1, "value.slot: missing: a semaphore wait invoke wants"},
		{"wait ok with another slot", hist(`{"process":"admin","type":"invoke","f":"wait","lock":"sem","value":{"slot":1}}`, `{"process":"admin","type":"ok","f":"wait","lock":"sem","value":{"slot":2}}`), 2, "value.slot: want 1, as in the invoke at line 1, got 2"},

		// Values: mutex.
		{"mutex acquire invoke with a slot", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"m","kind":"mutex","value":{"slot":1}}`), 1, "value.slot: not allowed: a mutex acquire invoke carries no value"},
		{"mutex acquire ok with a slot", hist(mAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"m","kind":"mutex","value":{"slot":1}}`), 2, "value.slot: not allowed: a mutex acquire ok carries no value"},
		{"mutex acquire fail reason full", hist(mAcqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"m","kind":"mutex","value":{"reason":"full"}}`), 2, `value.reason: want "held", got "full"`},
		{"mutex acquire fail without reason", hist(mAcqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"m","kind":"mutex"}`), 2, `value.reason: missing: a mutex acquire fail wants {"reason":"held"}`},
		{"mutex verify invoke with a slot", hist(`{"process":"c1","type":"invoke","f":"verify","lock":"m","kind":"mutex","value":{"slot":1}}`), 1, "value.slot: not allowed: a mutex verify invoke carries no value"},
		{"mutex verify ok without held", hist(`{"process":"c1","type":"invoke","f":"verify","lock":"m","kind":"mutex"}`, `{"process":"c1","type":"ok","f":"verify","lock":"m","kind":"mutex"}`), 2, "value.held: missing: a mutex verify ok wants"},
		{"mutex release invoke with a slot", hist(`{"process":"c1","type":"invoke","f":"release","lock":"m","kind":"mutex","value":{"slot":1}}`), 1, "value.slot: not allowed: a mutex release invoke carries no value"},

		// Values: nemesis.
		{"kill without target", hist(`{"process":"nemesis","type":"invoke","f":"kill"}`), 1, `value.process: missing: a nemesis kill invoke wants {"process":p}`},
		{"kill with empty target", hist(`{"process":"nemesis","type":"invoke","f":"kill","value":{"process":""}}`), 1, "value.process: want a non-empty string"},
		{"kill info with another target", hist(killInv, `{"process":"nemesis","type":"info","f":"kill","value":{"process":"c2"}}`), 2, `value.process: want "c1", as in the invoke at line 1, got "c2"`},
		{"kill info without target", hist(killInv, `{"process":"nemesis","type":"info","f":"kill"}`), 2, "value.process: missing: a nemesis kill info wants"},
		{"partition with a slot", hist(`{"process":"nemesis","type":"invoke","f":"partition","value":{"process":"c1","slot":1}}`), 1, `unknown field "slot" in a fault's value (want reason, process, offset_ms, cut)`},
		{"partition with neither process nor cut", hist(`{"process":"nemesis","type":"invoke","f":"partition"}`), 1, `value.process: missing: a nemesis partition invoke wants {"process":p} naming the client cut off, or {"cut":"a>b ..."}`},
		{"partition with both process and cut", hist(`{"process":"nemesis","type":"invoke","f":"partition","value":{"process":"c1","cut":"n1>n2"}}`), 1, "value.cut: not allowed with value.process"},
		{"cut of a node from itself", hist(`{"process":"nemesis","type":"invoke","f":"partition","value":{"cut":"n1>n2 n2>n2"}}`), 1, `value.cut: "n2>n2" cuts n2 off from itself`},
		{"cut not a direction", hist(`{"process":"nemesis","type":"invoke","f":"partition","value":{"cut":"n1-n2"}}`), 1, `value.cut: want directions "from>to" separated by single spaces, got "n1-n2"`},
		{"cut with two spaces", hist(`{"process":"nemesis","type":"invoke","f":"partition","value":{"cut":"n1>n2  n2>n1"}}`), 1, `value.cut: want directions`},
		{"cut given twice", hist(`{"process":"nemesis","type":"invoke","f":"partition","value":{"cut":"n1>n2 n1>n2"}}`), 1, `value.cut: "n1>n2" given twice`},
		{"heal of another cut", hist(`{"process":"nemesis","type":"invoke","f":"heal","value":{"cut":"n1>n2"}}`, `{"process":"nemesis","type":"info","f":"heal","value":{"cut":"n2>n1"}}`), 2, `value.cut: want "n1>n2", as in the invoke at line 1, got "n2>n1"`},
		// Values: patched completions.
		{"patched verify", hist(verInv, `{"process":"c1","type":"ok","f":"verify","lock":"sem","value":{"held":true,"patched":true}}`), 2, "value.patched: not allowed: only an acquire or release that completes ok or fail may be patched, not a semaphore verify ok"},
		{"patched info", hist(acqInv, `{"process":"c1","type":"info","f":"acquire","lock":"sem","value":{"patched":true}}`), 2, "value.patched: not allowed"},
		{"patched false", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2,"patched":false}}`), 2, "value.patched: want true (leave the field out otherwise), got false"},
		{"patched fail with another reason", hist(acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":"full","patched":true}}`), 2, `value.reason: a patched fail says "not applied", got "full"`},
		{"patched fail with another slot", hist(relInv, `{"process":"c1","type":"fail","f":"release","lock":"sem","value":{"reason":"not applied","patched":true,"slot":3}}`), 2, "value.slot: want 2, as in the invoke at line 1, got 3"},
		{"patched fail with held", hist(relInv, `{"process":"c1","type":"fail","f":"release","lock":"sem","value":{"reason":"not applied","patched":true,"held":true}}`), 2, "value.held: not allowed: a patched fail holds only its reason"},
		{"not applied without patched", hist(acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":"not applied"}}`), 2, `value.reason: want "full", "absent", "unavailable" or "contended", got "not applied"`},
		{"patched ok without a slot", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"patched":true}}`), 2, "value.slot: missing"},

		{"restart-broker with an offset", hist(`{"process":"nemesis","type":"invoke","f":"restart-broker","value":{"offset_ms":5}}`), 1, `value.offset_ms: not allowed: a nemesis restart-broker invoke wants no value, or {"process":n} naming the cluster's node restarted`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, err := histories.Read(strings.NewReader(tt.in), "h.jsonl")
			if err == nil {
				t.Fatalf("Read accepted:\n%s", tt.in)
			}
			if events != nil {
				t.Errorf("Read returned %d events with its error", len(events))
			}
			var e *histories.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is a %T, want *Error", err, err)
			}
			if e.File != "h.jsonl" || e.Line != tt.line || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got  %s\nwant h.jsonl:%d: ...%s...", err, tt.line, tt.msg)
			}
		})
	}
}

// TestReadAccepts checks histories that are valid, some of them only just.
func TestReadAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int // events
	}{
		{"empty input", "", 0},
		{"design example", hist(
			`!{"index":0,"time":1200,"process":"c1","type":"invoke","f":"acquire","lock":"sem"}`,
			`!{"index":1,"time":1800,"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2}}`,
			`!{"index":2,"time":1900,"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":-1}}`,
			`!{"index":3,"time":2500,"process":"nemesis","type":"invoke","f":"kill","value":{"process":"c1"}}`,
			`!{"index":4,"time":2510,"process":"nemesis","type":"info","f":"kill","value":{"process":"c1"}}`), 5},
		{"no newline at the end", strings.TrimSuffix(hist(acqInv, acqOk), "\n"), 2},
		{"CRLF line ends", strings.ReplaceAll(hist(acqInv, acqOk), "\n", "\r\n"), 2},
		{"spaces and any field order", hist(`! { "lock" : "sem", "f":"acquire", "type":"invoke", "process":"c1", "time":10, "index":0 } `), 1},
		{"equal times", hist(`!{"index":0,"time":7,"process":"c1","type":"invoke","f":"acquire","lock":"sem"}`, `!{"index":1,"time":7,"process":"c2","type":"invoke","f":"acquire","lock":"sem"}`), 2},
		{"operations in flight at the end", hist(acqInv, `{"process":"c2","type":"invoke","f":"acquire","lock":"sem"}`, killInv), 3},
		{"empty value", hist(`{"process":"c1","type":"invoke","f":"acquire","lock":"sem","value":{}}`, acqOk), 2},
		{"explicit semaphore kind", hist(acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","kind":"semaphore","value":{"slot":2}}`), 2},
		{"escapes in strings", hist(`{"process":"c\u0031","type":"invoke","f":"acq\u0075ire","lock":"s\"e\\m\/"}`), 1},
		{"semaphore clients", hist(
			acqInv, acqOk,
			verInv, `{"process":"c1","type":"ok","f":"verify","lock":"sem","value":{"held":true}}`,
			verInv, `{"process":"c1","type":"ok","f":"verify","lock":"sem","value":{"slot":2,"held":false}}`,
			verInv, `{"process":"c1","type":"fail","f":"verify","lock":"sem","value":{"reason":"channel closed"}}`,
			verInv, `{"process":"c1","type":"fail","f":"verify","lock":"sem"}`,
			verInv, `{"process":"c1","type":"info","f":"verify","lock":"sem"}`,
			relInv, `{"process":"c1","type":"ok","f":"release","lock":"sem"}`,
			relInv, `{"process":"c1","type":"ok","f":"release","lock":"sem","value":{"slot":2}}`,
			relInv, `{"process":"c1","type":"fail","f":"release","lock":"sem","value":{"reason":"404"}}`,
			acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":"full"}}`,
			acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":"absent"}}`,
			acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":"contended"}}`,
			acqInv, `{"process":"c1","type":"info","f":"acquire","lock":"sem"}`), 26},
		{"semaphore admin", hist(
			`{"process":"admin","type":"invoke","f":"create","lock":"sem","value":{"slots":0}}`, `{"process":"admin","type":"ok","f":"create","lock":"sem"}`,
			`{"process":"admin","type":"invoke","f":"create","lock":"sem","value":{"slots":3}}`, `{"process":"admin","type":"fail","f":"create","lock":"sem","value":{"reason":"exists"}}`,
			`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":2}}`, `{"process":"admin","type":"ok","f":"change","lock":"sem","value":{"from":0,"to":2}}`,
			`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":-5}}`, `{"process":"admin","type":"info","f":"change","lock":"sem"}`,
			`{"process":"admin","type":"invoke","f":"count","lock":"sem"}`, `{"process":"admin","type":"ok","f":"count","lock":"sem","value":{"slots":0}}`,
			`{"process":"admin","type":"invoke","f":"wait","lock":"sem","value":{"slot":1}}`, `{"process":"admin","type":"ok","f":"wait","lock":"sem"}`,
			`{"process":"admin","type":"invoke","f":"destroy","lock":"sem"}`, `{"process":"admin","type":"ok","f":"destroy","lock":"sem","value":{"from":0}}`), 14},
		{"mutex", hist(
			mAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"m","kind":"mutex"}`,
			`{"process":"c2","type":"invoke","f":"acquire","lock":"m","kind":"mutex"}`, `{"process":"c2","type":"fail","f":"acquire","lock":"m","kind":"mutex","value":{"reason":"held"}}`,
			`{"process":"c1","type":"invoke","f":"verify","lock":"m","kind":"mutex"}`, `{"process":"c1","type":"ok","f":"verify","lock":"m","kind":"mutex","value":{"held":true}}`,
			`{"process":"c1","type":"invoke","f":"release","lock":"m","kind":"mutex"}`, `{"process":"c1","type":"ok","f":"release","lock":"m","kind":"mutex"}`), 8},
		{"patched completions", hist(
			acqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2,"patched":true}}`,
			acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":"not applied","patched":true}}`,
			relInv, `{"process":"c1","type":"ok","f":"release","lock":"sem","value":{"slot":2,"patched":true}}`,
			relInv, `{"process":"c1","type":"fail","f":"release","lock":"sem","value":{"patched":true,"reason":"not applied"}}`,
			mAcqInv, `{"process":"c1","type":"ok","f":"acquire","lock":"m","kind":"mutex","value":{"patched":true}}`,
			mAcqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"m","kind":"mutex","value":{"reason":"not applied","patched":true}}`), 12},
		{"echoed values agreeing with the invoke", hist(
			verInv, `{"process":"c1","type":"fail","f":"verify","lock":"sem","value":{"slot":2,"reason":"channel closed"}}`,
			verInv, `{"process":"c1","type":"info","f":"verify","lock":"sem","value":{"slot":2}}`,
			relInv, `{"process":"c1","type":"info","f":"release","lock":"sem","value":{"slot":2}}`,
			relInv, `{"process":"c1","type":"fail","f":"release","lock":"sem","value":{"slot":2,"reason":"not applied","patched":true}}`,
			`{"process":"admin","type":"invoke","f":"create","lock":"sem","value":{"slots":2}}`, `{"process":"admin","type":"ok","f":"create","lock":"sem","value":{"slots":2}}`,
			`{"process":"admin","type":"invoke","f":"create","lock":"sem","value":{"slots":2}}`, `{"process":"admin","type":"fail","f":"create","lock":"sem","value":{"slots":2,"reason":"exists"}}`,
			`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":1}}`, `{"process":"admin","type":"ok","f":"change","lock":"sem","value":{"delta":1,"from":2,"to":3}}`,
			`{"process":"admin","type":"invoke","f":"change","lock":"sem","value":{"delta":-1}}`, `{"process":"admin","type":"info","f":"change","lock":"sem","value":{"delta":-1}}`,
			`{"process":"admin","type":"invoke","f":"wait","lock":"sem","value":{"slot":1}}`, `{"process":"admin","type":"ok","f":"wait","lock":"sem","value":{"slot":1}}`,
			killInv, `{"process":"nemesis","type":"info","f":"kill","value":{"process":"c1"}}`), 20},
		{"null values and errors", hist(
			`{"process":"c1","type":"invoke","f":"acquire","lock":"sem","value":null}`, `{"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2},"error":null}`,
			`{"process":"c1","type":"invoke","f":"acquire","lock":"sem","value":null,"error":null}`, `{"process":"c1","type":"info","f":"acquire","lock":"sem","value":null,"error":"timeout after 5s"}`,
			`{"process":"c2","type":"invoke","f":"acquire","lock":"m","kind":"mutex"}`, `{"process":"c2","type":"fail","f":"acquire","lock":"m","kind":"mutex","value":{"reason":"held"},"error":"RESOURCE_LOCKED 405"}`,
			`{"process":"c2","type":"invoke","f":"release","lock":"m","kind":"mutex"}`, `{"process":"c2","type":"ok","f":"release","lock":"m","kind":"mutex","error":":not-held"}`,
			`{"process":"nemesis","type":"invoke","f":"restart-broker","value":null}`, `{"process":"nemesis","type":"fail","f":"restart-broker","error":"no rabbitmqctl"}`), 10},
		{"unavailable", hist(acqInv, `{"process":"c1","type":"fail","f":"acquire","lock":"sem","value":{"reason":"unavailable"}}`), 2},
		{"several locks of both kinds", hist(acqInv, `{"process":"c2","type":"invoke","f":"acquire","lock":"m","kind":"mutex"}`, acqOk), 3},
		{"every fault", hist(
			killInv, `{"process":"nemesis","type":"info","f":"kill","value":{"process":"c1"}}`,
			`{"process":"nemesis","type":"invoke","f":"pause","value":{"process":"c2"}}`, `{"process":"nemesis","type":"info","f":"pause","value":{"process":"c2"}}`,
			`{"process":"nemesis","type":"invoke","f":"resume","value":{"process":"c2"}}`, `{"process":"nemesis","type":"info","f":"resume","value":{"process":"c2"}}`,
			`{"process":"nemesis","type":"invoke","f":"partition","value":{"process":"c3"}}`, `{"process":"nemesis","type":"info","f":"partition","value":{"process":"c3"}}`,
			`{"process":"nemesis","type":"invoke","f":"heal","value":{"process":"c3"}}`, `{"process":"nemesis","type":"fail","f":"heal","value":{"process":"c3","reason":"not partitioned"}}`,
			`{"process":"nemesis","type":"invoke","f":"force-close","value":{"process":"c4"}}`, `{"process":"nemesis","type":"info","f":"force-close","value":{"process":"c4"}}`,
			`{"process":"nemesis","type":"invoke","f":"drop-reply","value":{"process":"c5"}}`, `{"process":"nemesis","type":"info","f":"drop-reply","value":{"process":"c5"}}`,
			`{"process":"nemesis","type":"invoke","f":"restart-broker"}`, `{"process":"nemesis","type":"info","f":"restart-broker"}`), 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, err := histories.Read(strings.NewReader(tt.in), "h.jsonl")
			if err != nil {
				t.Fatalf("Read: %v\n%s", err, tt.in)
			}
			if len(events) != tt.n {
				t.Errorf("got %d events, want %d", len(events), tt.n)
			}
		})
	}
}

// TestReadDecodes checks that every field lands where it belongs.
func TestReadDecodes(t *testing.T) {
	in := hist(
		`!{"index":0,"time":5,"process":"c\u0031","type":"invoke","f":"verify","lock":"s\u00e9m","kind":"semaphore","value":{"slot":2}}`,
		`!{"index":1,"time":9,"process":"c1","type":"ok","f":"verify","lock":"sém","kind":"semaphore","value":{"slot":2,"held":false}}`,
		`!{"index":2,"time":9,"process":"admin","type":"invoke","f":"change","lock":"sém","value":{"delta":-2}}`,
		`!{"index":3,"time":12,"process":"admin","type":"ok","f":"change","lock":"sém","value":{"from":3,"to":1}}`,
		`!{"index":4,"time":13,"process":"nemesis","type":"invoke","f":"kill","value":{"process":"c2"}}`,
		`!{"index":5,"time":14,"process":"nemesis","type":"fail","f":"kill","value":{"process":"c2","reason":"gone"},"error":"no such process"}`,
		`!{"index":6,"time":15,"process":"c1","type":"invoke","f":"acquire","lock":"sém","value":null}`,
		`!{"index":7,"time":16,"process":"c1","type":"info","f":"acquire","lock":"sém","error":"tim\u00e9out"}`,
		`!{"index":8,"time":17,"process":"c1","type":"invoke","f":"acquire","lock":"sém"}`,
		`!{"index":9,"time":18,"process":"c1","type":"fail","f":"acquire","lock":"sém","value":{"reason":"unavailable"},"error":null}`,
	)
	got, err := histories.Read(strings.NewReader(in), "h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := []histories.Event{
		{Index: 0, Time: 5, Process: "c1", Type: histories.Invoke, F: "verify", Lock: "sém", Kind: histories.Semaphore, Value: &amqpcheck.Value{Slot: histories.Int(2)}},
		{Index: 1, Time: 9, Process: "c1", Type: histories.Ok, F: "verify", Lock: "sém", Kind: histories.Semaphore, Value: &amqpcheck.Value{Slot: histories.Int(2), Held: histories.Bool(false)}},
		{Index: 2, Time: 9, Process: "admin", Type: histories.Invoke, F: "change", Lock: "sém", Value: &amqpcheck.Value{Delta: histories.Int(-2)}},
		{Index: 3, Time: 12, Process: "admin", Type: histories.Ok, F: "change", Lock: "sém", Value: &amqpcheck.Value{From: histories.Int(3), To: histories.Int(1)}},
		{Index: 4, Time: 13, Process: "nemesis", Type: histories.Invoke, F: "kill", Value: &histories.Fault{Process: "c2"}},
		{Index: 5, Time: 14, Process: "nemesis", Type: histories.Fail, F: "kill", Value: &histories.Fault{Process: "c2", Reason: "gone"}, Error: "no such process"},
		{Index: 6, Time: 15, Process: "c1", Type: histories.Invoke, F: "acquire", Lock: "sém"},
		{Index: 7, Time: 16, Process: "c1", Type: histories.Info, F: "acquire", Lock: "sém", Error: "timéout"},
		{Index: 8, Time: 17, Process: "c1", Type: histories.Invoke, F: "acquire", Lock: "sém"},
		{Index: 9, Time: 18, Process: "c1", Type: histories.Fail, F: "acquire", Lock: "sém", Value: &amqpcheck.Value{Reason: histories.Unavailable}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(path, []byte(hist(acqInv, acqInv)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := histories.ReadFile(path)
	if want := path + ":2: type: process"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want an error starting %q", err, want)
	}
	if _, err := histories.ReadFile(filepath.Join(t.TempDir(), "missing.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: got %v, want os.ErrNotExist", err)
	}
	events, err := histories.ReadFile("testdata/canonical.jsonl")
	if err != nil || len(events) == 0 {
		t.Errorf("testdata/canonical.jsonl: %d events, %v", len(events), err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestReadReaderError(t *testing.T) {
	_, err := histories.Read(failingReader{}, "h.jsonl")
	if err == nil || err.Error() != "h.jsonl: disk on fire" {
		t.Errorf("got %v", err)
	}
}

func TestErrorString(t *testing.T) {
	e := &histories.Error{File: "runs/h.jsonl", Line: 7, Msg: "time: missing"}
	if got, want := e.Error(), "runs/h.jsonl:7: time: missing"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
