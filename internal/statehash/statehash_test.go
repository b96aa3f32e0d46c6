package statehash

import (
	"reflect"
	"testing"
)

type node struct {
	name string
	next *node
	tags map[string]int
	f    func()
}

type skipped struct{ n int }

type tagged struct {
	n    int
	last *node `statehash:"-"`
}

func graph(name string, share bool) *node {
	b := &node{name: "b", tags: map[string]int{"x": 1, "y": 2, "z": 3}}
	a := &node{name: name, next: b}
	if share {
		b.next = a // a cycle
	} else {
		b.next = &node{name: name, next: b}
	}
	return a
}

// TestSumByStructure: graphs of the same shape hash the same wherever
// they live and whatever their maps' order; a field, a shared pointer, a
// map entry or a function's code told apart; skipped types, and fields
// tagged statehash:"-", left out.
func TestSumByStructure(t *testing.T) {
	h := New(reflect.TypeOf(&skipped{}))
	if h.Sum(graph("a", true)) != h.Sum(graph("a", true)) {
		t.Error("two graphs of the same shape hash differently")
	}
	if h.Sum(graph("a", true)) == h.Sum(graph("c", true)) {
		t.Error("a field's value is not seen")
	}
	if h.Sum(graph("a", true)) == h.Sum(graph("a", false)) {
		t.Error("a pointer shared (a cycle) is not told from a copy")
	}
	g := graph("a", true)
	g.next.tags["w"] = 0
	if h.Sum(g) == h.Sum(graph("a", true)) {
		t.Error("a map entry is not seen")
	}
	f1, f2 := graph("a", true), graph("a", true)
	f1.f, f2.f = func() {}, func() { println() }
	if h.Sum(f1) == h.Sum(f2) {
		t.Error("two functions' code is not told apart")
	}
	if h.Sum(struct{ S *skipped }{&skipped{1}}) != h.Sum(struct{ S *skipped }{&skipped{2}}) {
		t.Error("a skipped type is seen")
	}
	var any1, any2 any = &skipped{1}, &skipped{2}
	if h.Sum(struct{ A any }{any1}) != h.Sum(struct{ A any }{any2}) {
		t.Error("a skipped type in an interface is seen")
	}
	if h.Sum(tagged{1, graph("a", true)}) != h.Sum(tagged{1, graph("c", false)}) {
		t.Error("a field tagged statehash:\"-\" is seen")
	}
	if h.Sum(tagged{1, nil}) == h.Sum(tagged{2, nil}) {
		t.Error("a field beside one tagged statehash:\"-\" is not seen")
	}
}

// A graph in which a map's key leads back to the map (a lock table keyed
// by rows whose transactions lead to the world that holds the table) is
// fingerprinted, and two such graphs built alike hash the same, two that
// differ behind the cycle differently.
func TestCycleThroughMapKey(t *testing.T) {
	type world struct {
		locks map[*row]int
		name  string
	}
	build := func(name string, n int) *world {
		w := &world{locks: map[*row]int{}, name: name}
		for i := range n {
			w.locks[&row{id: i, owner: w}] = i
		}
		return w
	}
	a, b, c := New().Sum(build("w", 3)), New().Sum(build("w", 3)), New().Sum(build("v", 3))
	if a != b {
		t.Errorf("two graphs built alike hash differently")
	}
	if a == c {
		t.Errorf("two graphs that differ (the world's name) hash the same")
	}
}

type row struct {
	id    int
	owner any
}
