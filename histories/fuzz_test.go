package histories_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/lockprover/lockprover/histories"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzRead checks that Read never panics, that its errors are located on a
// real line, and that whatever it accepts survives Write and Read unchanged,
// in a canonical form that is a fixed point. It also checks the hand-made
// parser against encoding/json: every line Read accepts must be valid JSON
// that encoding/json decodes into the same Event.
func FuzzRead(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := histories.Read(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			var e *histories.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is a %T, want *Error", err, err)
			}
			if lines := bytes.Count(data, []byte{'\n'}) + 1; e.Line < 1 || e.Line > lines || e.Msg == "" || e.File != "fuzz.jsonl" {
				t.Fatalf("bad error location or message in a %d-line input: %#v", lines, e)
			}
			return
		}

		var canonical bytes.Buffer
		if err := histories.Write(&canonical, events); err != nil {
			t.Fatal(err)
		}
		again, err := histories.Read(bytes.NewReader(canonical.Bytes()), "canonical.jsonl")
		if err != nil {
			t.Fatalf("Read accepted the input but not its canonical form: %v\ninput:\n%q\ncanonical:\n%s", err, data, canonical.Bytes())
		}
		if !reflect.DeepEqual(events, again) {
			t.Fatalf("events changed through Write and Read:\n%+v\n%+v", events, again)
		}
		var twice bytes.Buffer
		if err := histories.Write(&twice, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(canonical.Bytes(), twice.Bytes()) {
			t.Fatalf("canonical form not stable:\n%s\n%s", canonical.Bytes(), twice.Bytes())
		}

		if len(data) == 0 {
			return
		}
		lines := bytes.Split(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'})
		if len(lines) != len(events) {
			t.Fatalf("%d lines, %d events", len(lines), len(events))
		}
		for i, line := range lines {
			if !json.Valid(line) {
				t.Fatalf("line %d accepted but not valid JSON: %q", i+1, line)
			}
			var e histories.Event
			if v := events[i].Value; v != nil {
				// encoding/json decodes into the value an interface
				// holds: a value of the type Read chose, by the kind.
				e.Value = reflect.New(reflect.TypeOf(v).Elem()).Interface().(histories.Value)
			}
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil {
				t.Fatalf("line %d accepted but encoding/json says %v: %q", i+1, err, line)
			}
			if !reflect.DeepEqual(e, events[i]) {
				t.Fatalf("line %d: Read gives %+v, encoding/json %+v: %q", i+1, events[i], e, line)
			}
		}
	})
}

// TestFuzzCorpus keeps the seed corpus honest: the seeds named valid-* must
// be accepted and those named invalid-* rejected.
func TestFuzzCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzRead/*valid-*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seeds: %v", err)
	}
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		lit, ok := strings.CutPrefix(lines[1], "[]byte(")
		lit, ok2 := strings.CutSuffix(lit, ")")
		data, err := strconv.Unquote(lit)
		if lines[0] != "go test fuzz v1" || !ok || !ok2 || err != nil {
			t.Fatalf("%s: not a corpus file: %v", file, err)
		}
		_, err = histories.Read(strings.NewReader(data), file)
		if valid := strings.HasPrefix(filepath.Base(file), "valid-"); valid != (err == nil) {
			t.Errorf("%s: got error %v", file, err)
		}
	}
}

// FuzzReadEDN checks that ReadEDN never panics, that its errors are located
// on a real line, and that whatever it accepts is a history Read accepts,
// with an EDN line for every event. The seeds are the EDN histories of
// testdata/histories.
func FuzzReadEDN(f *testing.F) {
	files, _ := filepath.Glob("../testdata/histories/*.edn")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("[{:type :invoke, :f :acquire, :process 0, :time 1}]"))
	f.Add([]byte("{:type :info, :f :start, :process :nemesis, :time 1}\n{:type :info, :f :start, :process :nemesis, :time 2, :value #{\"n1\"}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, imp, err := histories.ReadEDN(bytes.NewReader(data), "fuzz.edn")
		lines := bytes.Count(data, []byte{'\n'}) + 1
		if err != nil {
			var e *histories.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is a %T, want *Error", err, err)
			}
			if e.Line < 1 || e.Line > lines || e.Msg == "" || e.File != "fuzz.edn" {
				t.Fatalf("bad error location or message in a %d-line input: %#v", lines, e)
			}
			return
		}
		if len(imp.Lines) != len(events) {
			t.Fatalf("%d lines for %d events", len(imp.Lines), len(events))
		}
		for _, l := range imp.Lines {
			if l < 1 || l > lines {
				t.Fatalf("event from line %d of a %d-line input", l, lines)
			}
		}
		var buf bytes.Buffer
		if err := histories.Write(&buf, events); err != nil {
			t.Fatal(err)
		}
		again, err := histories.Read(bytes.NewReader(buf.Bytes()), "imported.jsonl")
		if err != nil {
			t.Fatalf("ReadEDN accepted what Read refuses: %v\ninput:\n%q\nimported:\n%s", err, data, buf.Bytes())
		}
		if !reflect.DeepEqual(again, events) {
			t.Fatalf("imported events changed through Write and Read")
		}
	})
}

// FuzzReadJepsenJSON checks Jepsen's JSON as FuzzReadEDN checks EDN: no
// panic, errors located in the input, and imports that Read accepts.
func FuzzReadJepsenJSON(f *testing.F) {
	files, _ := filepath.Glob("../testdata/histories/*.json")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`[{"type":"invoke","f":"acquire","process":0}, {"type":"info","f":"start","process":"nemesis"}]`))
	f.Add([]byte(`{"type":":invoke","f":":acquire","process":0,"time":5}` + "\n" + `{"type":"ok","f":"acquire","process":0,"time":1,"value":[1,null]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !histories.LooksLikeJepsenJSON(data) {
			return
		}
		events, imp, err := histories.ParseJepsenJSON(data, "fuzz.json")
		lines := bytes.Count(data, []byte{'\n'}) + 1
		if err != nil {
			var e *histories.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is a %T, want *Error", err, err)
			}
			if e.Line < 1 || e.Line > lines || e.Msg == "" || e.File != "fuzz.json" {
				t.Fatalf("bad error location or message in a %d-line input: %#v", lines, e)
			}
			return
		}
		if len(imp.Lines) != len(events) {
			t.Fatalf("%d lines for %d events", len(imp.Lines), len(events))
		}
		for _, l := range imp.Lines {
			if l < 1 || l > lines {
				t.Fatalf("event from line %d of a %d-line input", l, lines)
			}
		}
		var buf bytes.Buffer
		if err := histories.Write(&buf, events); err != nil {
			t.Fatal(err)
		}
		if _, err := histories.Read(bytes.NewReader(buf.Bytes()), "imported.jsonl"); err != nil {
			t.Fatalf("the JSON import gave what Read refuses: %v\ninput:\n%q\nimported:\n%s", err, data, buf.Bytes())
		}
	})
}
