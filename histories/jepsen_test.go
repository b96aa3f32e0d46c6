package histories_test

import (
	"github.com/lockprover/lockprover/histories"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadEDNFileOrder checks that the file's order is the order, as in
// Jepsen and Knossos: a :time that is missing or earlier than the op before
// it is moved to just after that op's, and noted.
func TestReadEDNFileOrder(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		times []int64
		note  string
	}{
		{"no time at all", "{:type :invoke, :f :acquire, :process 0}\n{:type :invoke, :f :acquire, :process 1}\n{:type :ok, :f :acquire, :process 0}\n",
			[]int64{0, 1, 2}, "no op has a :time (a Knossos-era history)"},
		{"one time missing", "{:type :invoke, :f :acquire, :process 0, :time 10}\n{:type :ok, :f :acquire, :process 0}\n",
			[]int64{10, 11}, "1 op has no :time (first at line 2)"},
		{"time going back", "{:type :invoke, :f :acquire, :process 0, :time 5000}\n{:type :invoke, :f :acquire, :process 1, :time 3900}\n{:type :ok, :f :acquire, :process 0, :time 6000}\n",
			[]int64{5000, 5001, 6000}, "1 op has a :time earlier than the op written before it (first at line 2; up to 1.1µs earlier)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, imp, err := histories.ReadEDN(strings.NewReader(tt.in), "h.edn")
			if err != nil {
				t.Fatal(err)
			}
			var times []int64
			for _, e := range events {
				times = append(times, e.Time)
			}
			if !reflect.DeepEqual(times, tt.times) {
				t.Errorf("times %v, want %v", times, tt.times)
			}
			if !strings.Contains(strings.Join(imp.Notes, "\n"), tt.note) {
				t.Errorf("notes %q lack %q", imp.Notes, tt.note)
			}
		})
	}
}

// TestReadEDNInFlightNoted checks that operations in flight at the end of
// an imported history are noted as unknown.
func TestReadEDNInFlightNoted(t *testing.T) {
	in := "{:type :invoke, :f :acquire, :process 0, :time 1}\n{:type :invoke, :f :acquire, :process 1, :time 2}\n{:type :ok, :f :acquire, :process 0, :time 3}\n{:type :invoke, :f :acquire, :process 2, :time 4}\n"
	_, imp, err := histories.ReadEDN(strings.NewReader(in), "h.edn")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(imp.Notes, "\n"), "2 operations are still in flight when the history ends (first at line 2)") {
		t.Errorf("notes %q", imp.Notes)
	}
}

// TestReadJepsenJSON checks that Jepsen's ops in JSON, one array or one op
// per line, keywords with or without their colon, read as the same ops in
// EDN do, with their lines.
func TestReadJepsenJSON(t *testing.T) {
	edn := "{:type :invoke, :f :acquire, :value nil, :process 0, :time 1}\n{:type :info, :f :start, :process :nemesis, :time 2}\n{:type :ok, :f :acquire, :value nil, :process 0, :time 3, :error \"late\"}\n"
	want, _, err := histories.ReadEDN(strings.NewReader(edn), "h.edn")
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"array": `[{"type":"invoke","f":"acquire","value":null,"process":0,"time":1},
 {"type":"info","f":"start","process":"nemesis","time":2},
 {"type":"ok","f":"acquire","value":null,"process":0,"time":3,"error":"late"}]`,
		"lines": `{"type":"invoke","f":"acquire","value":null,"process":0,"time":1}
{"type":":info","f":":start","process":":nemesis","time":2}
{"type":"ok","f":"acquire","value":null,"process":0,"time":3,"error":"late"}
`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h.json")
			if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
				t.Fatal(err)
			}
			events, imp, err := histories.ReadAnyFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if imp == nil || imp.Format != histories.FormatJSON {
				t.Fatalf("import %+v, want Jepsen JSON", imp)
			}
			if !reflect.DeepEqual(events, want) {
				t.Errorf("events %+v\nwant %+v", events, want)
			}
			if !reflect.DeepEqual(imp.Lines, []int{1, 2, 2, 3}) {
				t.Errorf("lines %v", imp.Lines)
			}
		})
	}
}

// TestReadJepsenJSONRejects checks that a register history in JSON is
// refused as not a lock history, with its line, and that lockprover's own
// JSON lines are not taken for Jepsen's.
func TestReadJepsenJSONRejects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.json")
	os.WriteFile(path, []byte("[{\"type\":\"invoke\",\"f\":\"acquire\",\"process\":0},\n {\"type\":\"invoke\",\"f\":\"read\",\"process\":1}]"), 0o644)
	if _, _, err := histories.ReadAnyFile(path); err == nil || !strings.Contains(err.Error(), "h.json:2: :f: :read is not a lock operation") {
		t.Errorf("got %v", err)
	}
	if histories.LooksLikeJepsenJSON([]byte(`{"index":0,"time":1,"process":"nemesis","type":"invoke","f":"kill","value":{"process":"c1"}}` + "\n" + `{"index":1,"time":2,"process":"c1","type":"invoke","f":"acquire","lock":"l"}`)) {
		t.Error("lockprover's JSON lines taken for Jepsen's")
	}
}
