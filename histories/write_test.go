package histories_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"os"
	"strings"
	"testing"
)

// TestRoundTrip checks that a canonical file survives Read and Write byte
// for byte.
func TestRoundTrip(t *testing.T) {
	want, err := os.ReadFile("testdata/canonical.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	events, err := histories.Read(bytes.NewReader(want), "testdata/canonical.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := histories.Write(&got, events); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("Write(Read(x)) != x\ngot:\n%s\nwant:\n%s", got.Bytes(), want)
	}
}

// TestWriteCanonicalizes checks that Write turns any valid spelling of a
// history into the canonical one.
func TestWriteCanonicalizes(t *testing.T) {
	in := " {\"lock\":\"sem\",\"f\":\"acquire\", \"type\":\"invoke\",\"process\":\"c\\u0031\",\"time\":10,\"index\":0}\r\n" +
		`{"value":{ "slot" : 1 },"index":1,"time":20,"process":"c2","type":"invoke","f":"verify","lock":"sem","error":null}` + "\n" +
		`{"error":"boom","value":null,"index":2,"time":30,"process":"c1","type":"info","f":"acquire","lock":"sem"}`
	events, err := histories.Read(strings.NewReader(in), "h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := histories.Write(&got, events); err != nil {
		t.Fatal(err)
	}
	want := `{"index":0,"time":10,"process":"c1","type":"invoke","f":"acquire","lock":"sem"}` + "\n" +
		`{"index":1,"time":20,"process":"c2","type":"invoke","f":"verify","lock":"sem","value":{"slot":1}}` + "\n" +
		`{"index":2,"time":30,"process":"c1","type":"info","f":"acquire","lock":"sem","error":"boom"}` + "\n"
	if got.String() != want {
		t.Errorf("got:\n%swant:\n%s", got.String(), want)
	}
}

// TestWriteMatchesEncodingJSON checks that each line Write produces is what
// encoding/json makes of the Event (without HTML escaping), so the struct
// tags document the format truthfully, strings included.
func TestWriteMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "c1", `q"b\s/`, "\x00\x01\b\f\n\r\t\x1f\x7f", "\u2028\u2029", "<&>", "é☃😀", "bad\xffutf8\xc3", "\ufffd"}
	var events []histories.Event
	for i, s := range strs {
		events = append(events,
			histories.Event{Index: i, Time: int64(i) * -3, Process: s, Type: histories.Type(s), F: s, Lock: s, Kind: s,
				Value: &histories.Fault{Reason: s, Process: s}, Error: s},
			histories.Event{Value: &amqpcheck.Value{Slot: histories.Int(-1), Held: histories.Bool(false), Slots: histories.Int(0), Delta: histories.Int(1 << 40), From: histories.Int(3), To: histories.Int(4), Patched: true}},
			histories.Event{Value: &amqpcheck.Value{}},
			histories.Event{})
	}
	var got bytes.Buffer
	if err := histories.Write(&got, events); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	if got.String() != want.String() {
		t.Errorf("got:\n%s\nwant:\n%s", got.String(), want.String())
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestWriteError(t *testing.T) {
	events := make([]histories.Event, 10000) // more than one flush
	w := &failingWriter{}
	if err := histories.Write(w, events); err == nil || err.Error() != "disk full" {
		t.Errorf("got %v, want disk full", err)
	}
	if w.n != 1 {
		t.Errorf("Write went on after an error: %d writes", w.n)
	}
	if err := histories.Write(w, events[:1]); err == nil {
		t.Errorf("short history: error lost")
	}
	var buf bytes.Buffer
	if err := histories.Write(&buf, nil); err != nil || buf.Len() != 0 {
		t.Errorf("empty history: %q, %v", buf.String(), err)
	}
}

// A cluster's faults (a partition between nodes, by its cut; a node
// paused or restarted, named as the process) read and write back byte for
// byte, and a cut gives its directions.
func TestClusterFaults(t *testing.T) {
	want, err := os.ReadFile("testdata/cluster-faults.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	events, err := histories.Read(bytes.NewReader(want), "testdata/cluster-faults.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := histories.Write(&got, events); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("Write(Read(x)) != x\ngot:\n%s\nwant:\n%s", got.Bytes(), want)
	}
	f := histories.FaultOf(&events[0])
	if d := f.Directions(); len(d) != 4 || d[0] != [2]string{"n1", "n2"} || d[3] != [2]string{"n3", "n1"} {
		t.Errorf("Directions() = %v", d)
	}
	if txt := f.Text(); txt != "cut n1>n2 n1>n3 n2>n1 n3>n1" {
		t.Errorf("Text() = %q", txt)
	}
}
