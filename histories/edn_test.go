package histories_test

import (
	"bytes"
	"errors"
	"github.com/lockprover/lockprover/histories"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestReadEDNConverts checks the whole mapping on a small history: names,
// kind, lock, errors, an :info that ends nothing else (no kill: Knossos
// judges it as an unknown outcome and no more), faults on every client, a
// failed acquire left out, and the line of every event.
func TestReadEDNConverts(t *testing.T) {
	in := `{:type :invoke, :f :acquire, :value nil, :process 0, :time 10, :index 0}
{:type :invoke, :f :acquire, :value nil, :process 1, :time 20, :index 1}
{:type :ok, :f :acquire, :value nil, :process 0, :time 30, :index 2}
{:type :fail, :f :acquire, :value nil, :process 1, :time 40, :index 3, :error :not-swapped}
{:type :info, :f :start, :value nil, :process :nemesis, :time 50, :index 4}
{:type :info, :f :start, :value [:isolated {"n1" #{"n2"}}], :process :nemesis, :time 60, :index 5}
; a comment, and a blank line

{:type :invoke, :f :release, :value nil, :process 0, :time 70, :index 6}
{:type :info, :f :release, :value nil, :process 0, :time 80, :index 7, :error [:timeout "no reply"]}
{:type :info, :f :stop, :value nil, :process :nemesis, :time 90, :index 8}
{:type :info, :f :stop, :value :network-healed, :process :nemesis, :time 100, :index 9}
{:type :invoke, :f :release, :value nil, :process 2, :time 110, :index 10}
{:type :fail, :f :release, :value nil, :process 2, :time 120, :index 11, :error :not-held}
`
	events, imp, err := histories.ReadEDN(strings.NewReader(in), "h.edn")
	if err != nil {
		t.Fatal(err)
	}
	mx := func(p string, ty histories.Type, f string, tm int64) histories.Event {
		return histories.Event{Time: tm, Process: p, Type: ty, F: f, Lock: histories.JepsenLock, Kind: histories.Mutex}
	}
	nem := func(ty histories.Type, f, p string, tm int64) histories.Event {
		return histories.Event{Time: tm, Process: "nemesis", Type: ty, F: f, Value: &histories.Fault{Process: p}}
	}
	info := mx("p0", histories.Info, "release", 80)
	info.Error = `[:timeout "no reply"]`
	fail := mx("p2", histories.Fail, "release", 120)
	fail.Error = ":not-held"
	want := []histories.Event{
		mx("p0", histories.Invoke, "acquire", 10),
		mx("p0", histories.Ok, "acquire", 30),
		nem(histories.Invoke, "partition", "p0", 50), nem(histories.Info, "partition", "p0", 50),
		nem(histories.Invoke, "partition", "p1", 50), nem(histories.Info, "partition", "p1", 50),
		nem(histories.Invoke, "partition", "p2", 50), nem(histories.Info, "partition", "p2", 50),
		mx("p0", histories.Invoke, "release", 70),
		info,
		nem(histories.Invoke, "heal", "p0", 100), nem(histories.Info, "heal", "p0", 100),
		nem(histories.Invoke, "heal", "p1", 100), nem(histories.Info, "heal", "p1", 100),
		nem(histories.Invoke, "heal", "p2", 100), nem(histories.Info, "heal", "p2", 100),
		mx("p2", histories.Invoke, "release", 110),
		fail,
	}
	for i := range want {
		want[i].Index = i
	}
	if !reflect.DeepEqual(events, want) {
		var got, w bytes.Buffer
		histories.Write(&got, events)
		histories.Write(&w, want)
		t.Errorf("got:\n%s\nwant:\n%s", got.String(), w.String())
	}
	wantLines := []int{1, 3, 5, 5, 5, 5, 5, 5, 9, 10, 12, 12, 12, 12, 12, 12, 13, 14}
	if !reflect.DeepEqual(imp.Lines, wantLines) {
		t.Errorf("lines %v, want %v", imp.Lines, wantLines)
	}
	if len(imp.Notes) != 1 || !strings.Contains(imp.Notes[0], "1 failed :acquire op left out (first at line 4)") {
		t.Errorf("notes %q", imp.Notes)
	}
}

// TestReadEDNFaults checks how faults come into force and end: a paired
// fault until its stop, a one-shot fault until it completes, overlapping
// faults as one span, a failed start only while it was tried, an unknown
// fault for ever (with a note).
func TestReadEDNFaults(t *testing.T) {
	const client = "{:type :invoke, :f :acquire, :process 0, :time 0}\n{:type :ok, :f :acquire, :process 0, :time 0}\n"
	tests := []struct {
		name  string
		ops   string
		want  string // the nemesis events, "partition@t" or "heal@t"
		notes int
	}{
		{"start and stop", ":info :start 1|:info :start 2|:info :stop 3|:info :stop 4", "partition@1 heal@4", 0},
		{"start-X and stop-X", ":invoke :start-partition 1|:info :start-partition 2|:invoke :stop-partition 3|:info :stop-partition 4", "partition@1 heal@4", 0},
		{"pause and resume", ":info :pause 1|:info :pause 2|:info :resume 3|:info :resume 4", "partition@1 heal@4", 0},
		{"stop of another kind heals nothing", ":info :start-partition 1|:info :start-partition 2|:info :stop-clock 3|:info :stop-clock 4", "partition@1", 0},
		{"one-shot kill", ":info :kill 1|:info :kill 2", "partition@1 heal@2", 0},
		{"kill inside a partition", ":info :start 1|:info :start 2|:info :kill 3|:info :kill 4|:info :stop 5|:info :stop 6", "partition@1 heal@6", 0},
		{"partition outlives a kill", ":info :start 1|:info :start 2|:info :kill 3|:info :kill 4", "partition@1", 0},
		{"failed start", ":info :start 1|:fail :start 2", "partition@1 heal@2", 0},
		{"failed stop", ":info :start 1|:info :start 2|:info :stop 3|:fail :stop 4", "partition@1", 0},
		{"never completed", ":info :start 1", "partition@1", 0},
		{"unknown fault", ":info :bitflip 1|:info :bitflip 2|:info :start 3|:info :start 4|:info :stop 5|:info :stop 6", "partition@1", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in strings.Builder
			in.WriteString(client)
			for _, op := range strings.Split(tt.ops, "|") {
				f := strings.Fields(op)
				in.WriteString("{:type " + f[0] + ", :f " + f[1] + ", :process :nemesis, :time " + f[2] + "}\n")
			}
			events, imp, err := histories.ReadEDN(strings.NewReader(in.String()), "h.edn")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range events {
				if e.Process == "nemesis" && e.Type == histories.Invoke {
					got = append(got, e.F+"@"+strconv.FormatInt(e.Time, 10))
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tt.want)
			}
			if len(imp.Notes) != tt.notes {
				t.Errorf("notes %q, want %d", imp.Notes, tt.notes)
			}
		})
	}
}

// TestReadEDNForms checks the shapes of file Jepsen writes: one op per line,
// an op over several lines, records, commas, and a single vector of ops.
func TestReadEDNForms(t *testing.T) {
	want := []histories.Event{
		{Index: 0, Time: 1, Process: "p3", Type: histories.Invoke, F: "acquire", Lock: "k", Kind: histories.Mutex},
		{Index: 1, Time: 2, Process: "p3", Type: histories.Ok, F: "acquire", Lock: "k", Kind: histories.Mutex},
	}
	for name, in := range map[string]string{
		"lines":      "{:type :invoke, :f :acquire, :value [\"k\" nil], :process 3, :time 1}\n{:type :ok, :f :acquire, :value [\"k\" nil], :process 3, :time 2}\n",
		"no ending":  "{:type :invoke, :f :acquire, :value [:k nil], :process 3, :time 1}\n{:type :ok, :f :acquire, :value [:k nil], :process 3, :time 2}",
		"crlf":       "{:type :invoke :f :acquire :value [k nil] :process 3 :time 1}\r\n{:type :ok :f :acquire :value [k nil] :process 3 :time 2}\r\n",
		"multiline":  "{:type :invoke,\n :f :acquire,\n :value [\"k\" nil],\n :process 3,\n :time 1}\n{:type :ok, :f :acquire, :value [\"k\" nil], :process 3, :time 2, :extra {:a [1 2 \"}\"]}}\n",
		"records":    "#jepsen.history.Op{:type :invoke, :f :acquire, :value [\"k\" nil], :process 3, :time 1}\n#jepsen.history.Op {:type :ok, :f :acquire, :value [\"k\" nil], :process 3, :time 2}\n",
		"vector":     "[{:type :invoke, :f :acquire, :value [\"k\" nil], :process 3, :time 1}\n {:type :ok, :f :acquire, :value [\"k\" nil], :process 3, :time 2}]\n",
		"empty vec":  "[\n{:type :invoke, :f :acquire, :value [\"k\" nil], :process 3, :time 1},\n{:type :ok, :f :acquire, :value [\"k\" nil], :process 3, :time 2}\n]\n",
		"two a line": "{:type :invoke, :f :acquire, :value [\"k\" nil], :process 3, :time 1} {:type :ok, :f :acquire, :value [\"k\" nil], :process 3, :time 2}\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, _, err := histories.ReadEDN(strings.NewReader(in), "h.edn")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v", got)
			}
		})
	}
	events, _, err := histories.ReadEDN(strings.NewReader(""), "empty.edn")
	if err != nil || len(events) != 0 {
		t.Errorf("empty: %v, %v", events, err)
	}
}

// TestReadEDNRejects checks that bad EDN and ops that are not a lock
// workload's are refused with the line and what is wrong.
func TestReadEDNRejects(t *testing.T) {
	const (
		inv = "{:type :invoke, :f :acquire, :process 0, :time 1}"
		ok  = "{:type :ok, :f :acquire, :process 0, :time 2}"
	)
	tests := []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"unclosed map", inv + "\n{:type :ok, :f :acquire\n" + ok + "\n", 2, `invalid EDN: '{' opened here is never closed`},
		{"stray closer", inv + "\n}\n", 2, "invalid EDN: unexpected '}' with nothing open"},
		{"mismatched closer", inv + "\n{:type :ok, :f [:acquire}\n", 2, `invalid EDN: '}' closes the '[' opened at line 2`},
		{"unterminated string", inv + "\n{:type :ok, :error \"oops}\n" + ok + "\n", 2, "invalid EDN: unterminated string"},
		{"odd map", inv + "\n{:type :ok, :f}\n", 2, "invalid EDN"},
		{"bad token", inv + "\n{:type :ok, :f :acquire, :process 0, :time 1.2.3}\n", 2, "invalid EDN"},
		{"not a map", inv + "\n42\n", 2, "want an op map such as {:type :invoke, :f :acquire, :process 0, :time 0}, got 42"},
		{"a list of numbers", "[1 2]\n", 1, "want an op map"},
		{"missing type", "{:f :acquire, :process 0, :time 1}\n", 1, ":type: missing"},
		{"bad type", "{:type :done, :f :acquire, :process 0, :time 1}\n", 1, ":type: want :invoke, :ok, :fail or :info, got :done"},
		{"type a string", `{:type "invoke", :f :acquire, :process 0, :time 1}` + "\n", 1, `:type: want :invoke, :ok, :fail or :info, got "invoke"`},
		{"missing f", "{:type :invoke, :process 0, :time 1}\n", 1, ":f: missing"},
		{"f a string", `{:type :invoke, :f "acquire", :process 0, :time 1}` + "\n", 1, `:f: want a keyword, got "acquire"`},
		{"not a lock op", "{:type :invoke, :f :read, :process 0, :time 1}\n", 1, ":f: :read is not a lock operation: this is not a lock history. lockprover checks histories of a lock (mutex) workload, whose clients do :acquire and :release"},
		{"not a lock op, no time", "{:type :invoke, :f :write, :value 3, :process 0}\n", 1, ":f: :write is not a lock operation: this is not a lock history"},
		{"not a lock op, time going back", inv + "\n{:type :invoke, :f :cas, :value [1 2], :process 1, :time 0}\n", 2, ":f: :cas is not a lock operation"},
		{"missing process", "{:type :invoke, :f :acquire, :time 1}\n", 1, ":process: missing"},
		{"process a string", `{:type :invoke, :f :acquire, :process "c1", :time 1}` + "\n", 1, `:process: want an integer (a client) or :nemesis, got "c1"`},
		{"process another keyword", "{:type :invoke, :f :acquire, :process :admin, :time 1}\n", 1, ":process: want an integer (a client) or :nemesis, got :admin"},
		{"process negative", "{:type :invoke, :f :acquire, :process -1, :time 1}\n", 1, ":process: want an integer >= 0"},
		{"time a float", "{:type :invoke, :f :acquire, :process 0, :time 1.5}\n", 1, ":time: want an integer (nanoseconds), got 1.5"},
		{"time negative", "{:type :invoke, :f :acquire, :process 0, :time -5}\n", 1, ":time: want an integer >= 0"},
		{"time huge", "{:type :invoke, :f :acquire, :process 0, :time 99999999999999999999999}\n", 1, "invalid EDN"},
		{"a value", "{:type :invoke, :f :acquire, :value 3, :process 0, :time 1}\n", 1, ":value: want nil (a lock operation carries no value) or an independent tuple [key nil], got 3"},
		{"a tuple with a value", "{:type :invoke, :f :acquire, :value [1 2], :process 0, :time 1}\n", 1, ":value: want nil or an independent tuple [key nil], got [1 2]"},
		{"a tuple with a nil key", "{:type :invoke, :f :acquire, :value [nil nil], :process 0, :time 1}\n", 1, ":value: the key of an independent tuple names the lock, got nil"},
		{"completion without invoke", ok + "\n", 1, `type: ok for process "p0", which has no operation in flight`},
		{"failed acquire without invoke", "{:type :fail, :f :acquire, :process 0, :time 1}\n", 1, `type: fail for process "p0", which has no operation in flight`},
		{"info without invoke", "{:type :info, :f :acquire, :process 0, :time 1}\n", 1, `type: info for process "p0", which has no operation in flight`},
		{"second invoke", inv + "\n" + inv + "\n", 2, `type: process "p0" invokes acquire while its acquire invoked at line 1 is still in flight`},
		{"completion of another f", inv + "\n{:type :ok, :f :release, :process 0, :time 2}\n", 2, "f: this ok completes release, but the operation invoked at line 1 is acquire"},
		{"failed acquire completing a release", "{:type :invoke, :f :release, :process 0, :time 1}\n{:type :fail, :f :acquire, :process 0, :time 2}\n", 2, "f: this fail completes acquire, but the operation invoked at line 1 is release"},
		{"completion on another lock", "{:type :invoke, :f :acquire, :value [1 nil], :process 0, :time 1}\n{:type :ok, :f :acquire, :value [2 nil], :process 0, :time 2}\n", 2, `lock: this ok is on lock "2", but the operation invoked at line 1 is on lock "1"`},
		{"nemesis ok first", "{:type :ok, :f :start, :process :nemesis, :time 1}\n", 1, ":type: a nemesis :ok with no nemesis operation in flight"},
		{"nemesis completes another f", "{:type :info, :f :start, :process :nemesis, :time 1}\n{:type :info, :f :kill, :process :nemesis, :time 2}\n", 2, ":f: this nemesis :info completes :kill, but the nemesis operation invoked at line 1 is :start"},
		{"vector with a bad op", "[{:type :invoke, :f :acquire, :process 0, :time 1}\n {:type :ok, :f :acquire, :process 0, :time :late}]\n", 2, ":time: want an integer (nanoseconds), got :late"},
		{"vector unclosed", "[{:type :invoke, :f :acquire, :process 0, :time 1}\n", 1, "'[' opened here is never closed"},
		{"duplicate key", "{:type :invoke, :type :ok, :f :acquire, :process 0, :time 1}\n", 1, "invalid EDN"},
		{"vector key", "{[1] 2}\n", 1, ":f: missing"},
		{"duplicate key in a record", "#jepsen.history.Op{:type :invoke, :f :acquire, :f :release, :process 0, :time 1}\n", 1, "invalid EDN: a key appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, imp, err := histories.ReadEDN(strings.NewReader(tt.in), "h.edn")
			if err == nil {
				t.Fatalf("accepted: %+v", events)
			}
			if events != nil || imp != nil {
				t.Errorf("returned events or an import with the error")
			}
			var e *histories.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is a %T, want *Error", err, err)
			}
			if e.File != "h.edn" || e.Line != tt.line || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got  %v\nwant h.edn:%d: ...%s...", err, tt.line, tt.msg)
			}
		})
	}
}

func TestLooksLikeEDN(t *testing.T) {
	for in, want := range map[string]bool{
		`{:type :invoke}`:                   true,
		" \n{ :type :invoke}":               true,
		`[{:type :invoke}]`:                 true,
		"[\n  {:type :invoke}]":             true,
		`[]`:                                true,
		`#jepsen.history.Op{:type :invoke}`: true,
		"; Jepsen\n{}":                      true,
		`({:type :invoke})`:                 true,
		`{"index":0}`:                       false,
		`[{"index":0}]`:                     false,
		`{}`:                                false,
		``:                                  false,
		`42`:                                false,
	} {
		if got := histories.LooksLikeEDN([]byte(in)); got != want {
			t.Errorf("LooksLikeEDN(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestReadAnyFile checks that the format is picked by extension, then by
// content.
func TestReadAnyFile(t *testing.T) {
	dir := t.TempDir()
	edn := "{:type :invoke, :f :acquire, :process 0, :time 1}\n"
	jsonl := hist(acqInv)
	for name, tc := range map[string]struct {
		text     string
		imported bool
		err      string
	}{
		"h.edn":          {edn, true, ""},
		"H.EDN":          {edn, true, ""},
		"history.txt":    {edn, true, ""},
		"h.jsonl":        {jsonl, false, ""},
		"h":              {jsonl, false, ""},
		"json-as.edn":    {jsonl, true, "json-as.edn:1: invalid EDN"},
		"bad.jsonl":      {"{\"index\":0,\n", false, "bad.jsonl:1: invalid JSON"},
		"broken-edn.txt": {"{:type :invoke\n", true, "broken-edn.txt:1: invalid EDN"},
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		events, imp, err := histories.ReadAnyFile(path)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want an error with %q", name, err, tc.err)
			}
			continue
		}
		if err != nil || len(events) != 1 || (imp != nil) != tc.imported {
			t.Errorf("%s: %d events, imported %v, %v", name, len(events), imp != nil, err)
		}
	}
	if _, _, err := histories.ReadAnyFile(filepath.Join(dir, "missing.edn")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestImportedHistoriesAreValid checks that every EDN history in
// testdata/histories that imports at all becomes a history the JSON-lines
// reader accepts, unchanged through Write and Read.
func TestImportedHistoriesAreValid(t *testing.T) {
	files, _ := filepath.Glob("../testdata/histories/*.edn")
	if len(files) == 0 {
		t.Fatal("no EDN histories")
	}
	for _, f := range files {
		events, imp, err := histories.ReadAnyFile(f)
		if err != nil {
			continue // the malformed ones
		}
		if len(imp.Lines) != len(events) {
			t.Errorf("%s: %d lines for %d events", f, len(imp.Lines), len(events))
		}
		var buf bytes.Buffer
		if err := histories.Write(&buf, events); err != nil {
			t.Fatal(err)
		}
		again, err := histories.Read(&buf, f+".jsonl")
		if err != nil {
			t.Errorf("%s: the imported history does not read back: %v", f, err)
			continue
		}
		if !reflect.DeepEqual(again, events) {
			t.Errorf("%s: changed through Write and Read", f)
		}
	}
}

func TestEDNText(t *testing.T) {
	for in, want := range map[string]string{
		`:timeout`:                     `:timeout`,
		`[:no-leader "n1 \"x\""]`:      `[:no-leader "n1 \"x\""]`,
		`{:b 2, :a 1}`:                 `{:a 1, :b 2}`,
		`#{3 1 2}`:                     `#{1 2 3}`,
		`(1 2.5 nil true \a)`:          `[1 2.5 nil true \a]`,
		`#inst "2026-01-01T00:00:00Z"`: `#inst "2026-01-01T00:00:00Z"`,
		`12345678901234567890123N`:     `12345678901234567890123N`,
		`sym`:                          `sym`,
		`#{[1] [2]}`:                   `#{[1] [2]}`,
	} {
		var v any
		if err := histories.UnmarshalEDN([]byte(in), &v); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := histories.EDNText(v); got != want {
			t.Errorf("histories.EDNText(%s) = %s, want %s", in, got, want)
		}
	}
}
