package faultnet

import (
	"slices"
	"testing"
	"time"
)

// Merge puts several proxies' lines in time order, each named and
// stamped from the start; a Tracer keeps its lines in the order noted.
func TestMergeTraces(t *testing.T) {
	start := time.Now()
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	got := Merge(start, []NamedTrace{
		{Name: "c1", Lines: []Traced{{at(5), "-> SET"}, {at(30), "<- SET +OK"}}},
		{Name: "c2", Lines: []Traced{{at(10), "-> GET"}}},
	})
	want := []string{"   0.0050s c1: -> SET", "   0.0100s c2: -> GET", "   0.0300s c1: <- SET +OK"}
	if !slices.Equal(got, want) {
		t.Errorf("Merge = %q, want %q", got, want)
	}
	var tr Tracer
	tr.Note("a %d", 1)
	tr.Note("b")
	if lines := tr.Trace(); len(lines) != 2 || lines[0].What != "a 1" || lines[1].What != "b" || lines[1].At.Before(lines[0].At) {
		t.Errorf("Trace = %+v", lines)
	}
}
