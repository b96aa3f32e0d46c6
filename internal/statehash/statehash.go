// Package statehash fingerprints a graph of Go values by its structure:
// every field (unexported ones too), every element, every map entry (in
// an order of their own, not the map's), and pointers by identity, each
// numbered where the walk first meets it, so that two graphs built in the
// same shape but at different addresses hash the same, and two that
// differ anywhere (a field, an element, which object a pointer shares)
// hash differently (but for collisions of a 128-bit hash).
//
// It is what the exhaustive search (prover.Exhaust) knows of a simulator's
// state. What it cannot see is listed so that a caller can argue it
// away: a function value is hashed by its code alone (a closure's
// captured variables are not visible), a channel by identity alone, and
// types the caller names in Skip, and struct fields tagged
// `statehash:"-"`, are left out.
package statehash

import (
	"cmp"
	"encoding/binary"
	"hash"
	"hash/fnv"
	"math"
	"reflect"
	"slices"
	"sync"
	"unsafe"
)

// A Sum is a fingerprint.
type Sum [16]byte

// Hasher fingerprints values; its zero value is not ready: use New.
type Hasher struct {
	skip map[reflect.Type]bool
	// ordering are the maps whose keys are being fingerprinted alone, to
	// order them (mapValue), shared with the hashers that do it: a key
	// that leads back to its own map (a cycle through it) is not walked
	// into again there, which would never end.
	ordering map[uintptr]bool
	h        hash.Hash
	seen     map[uintptr]uint64 // pointer -> its number in the walk
	buf      [8]byte
}

// New returns a Hasher that leaves out the values of the types in skip
// (a pointer type skips the pointers; an interface holding one is
// hashed as its type's name).
func New(skip ...reflect.Type) *Hasher {
	s := map[reflect.Type]bool{}
	for _, t := range skip {
		s[t] = true
	}
	return &Hasher{skip: s}
}

// Sum hashes vs, one graph (pointers shared between them are shared in
// the numbering).
func (x *Hasher) Sum(vs ...any) Sum {
	x.h = fnv.New128a()
	x.seen = map[uintptr]uint64{}
	for _, v := range vs {
		x.value(reflect.ValueOf(v))
	}
	var s Sum
	copy(s[:], x.h.Sum(nil))
	return s
}

func (x *Hasher) u64(n uint64) {
	binary.LittleEndian.PutUint64(x.buf[:], n)
	x.h.Write(x.buf[:])
}

func (x *Hasher) str(s string) {
	x.u64(uint64(len(s)))
	x.h.Write(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// ref hashes a pointer's identity: its number if seen, else a new number
// and then (more true) what it points to.
func (x *Hasher) ref(p uintptr) (more bool) {
	if p == 0 {
		x.u64(0)
		return false
	}
	if n, ok := x.seen[p]; ok {
		x.u64(1)
		x.u64(n)
		return false
	}
	n := uint64(len(x.seen) + 1)
	x.seen[p] = n
	x.u64(2)
	return true
}

// value hashes v by its kind: a scalar's value, what a composite holds,
// a pointer's identity and then (the first time) what it points to.
func (x *Hasher) value(v reflect.Value) {
	if !v.IsValid() {
		x.u64(0xdead)
		return
	}
	t := v.Type()
	if x.skip[t] {
		x.str("skip " + t.String())
		return
	}
	switch t.Kind() {
	case reflect.Array:
		for i := range v.Len() {
			x.value(v.Index(i))
		}
	case reflect.Slice:
		x.slice(v)
	case reflect.Struct:
		x.str(t.String())
		omit := omitted(t)
		for i := range v.NumField() {
			if omit == nil || !omit[i] {
				x.value(v.Field(i))
			}
		}
	case reflect.Pointer:
		if x.ref(v.Pointer()) {
			x.value(v.Elem())
		}
	case reflect.Interface:
		x.iface(v)
	case reflect.Map:
		x.mapValue(v)
	case reflect.Func:
		// The code alone: a closure's captured variables are not
		// visible (see the package doc).
		if v.IsNil() {
			x.u64(0)
		} else {
			x.u64(uint64(v.Pointer()))
		}
	case reflect.Chan, reflect.UnsafePointer:
		x.ref(v.Pointer())
	default:
		x.scalar(v)
	}
}

// scalar hashes a value of a kind that holds no other: a bool, a
// number, a string.
func (x *Hasher) scalar(v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			x.u64(1)
		} else {
			x.u64(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x.u64(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		x.u64(v.Uint())
	case reflect.Float32, reflect.Float64:
		x.u64(math.Float64bits(v.Float()))
	case reflect.Complex64, reflect.Complex128:
		c := v.Complex()
		x.u64(math.Float64bits(real(c)))
		x.u64(math.Float64bits(imag(c)))
	case reflect.String:
		x.str(v.String())
	}
}

// slice hashes a slice: nil apart from empty, its length, its elements
// (a byte slice's bytes at once).
func (x *Hasher) slice(v reflect.Value) {
	if v.IsNil() {
		x.u64(0)
		return
	}
	x.u64(uint64(v.Len()) + 1)
	if v.Type().Elem().Kind() == reflect.Uint8 {
		x.h.Write(v.Bytes())
		return
	}
	for i := range v.Len() {
		x.value(v.Index(i))
	}
}

// iface hashes an interface: nil, or its dynamic type's name and then
// its value (the name alone for a type left out).
func (x *Hasher) iface(v reflect.Value) {
	if v.IsNil() {
		x.u64(0)
		return
	}
	e := v.Elem()
	if x.skip[e.Type()] {
		x.str("skip " + e.Type().String())
		return
	}
	x.str(e.Type().String())
	x.value(e)
}

// omits caches omitted's answers, by struct type.
var omits sync.Map

// omitted says which fields of struct type t are tagged `statehash:"-"`:
// bookkeeping that is no part of the state (which process moved last, in
// a scheduler: what a bound on preemptions counts from, which the search
// keys on itself); nil if none is.
func omitted(t reflect.Type) []bool {
	if o, ok := omits.Load(t); ok {
		return o.([]bool)
	}
	var o []bool
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("statehash") == "-" {
			if o == nil {
				o = make([]bool, t.NumField())
			}
			o[i] = true
		}
	}
	omits.Store(t, o)
	return o
}

// mapValue hashes a map's entries in the order of their keys' own
// fingerprints (each taken alone), not the map's random order.
func (x *Hasher) mapValue(v reflect.Value) {
	if v.IsNil() {
		x.u64(0)
		return
	}
	if !x.ref(v.Pointer()) {
		return
	}
	if x.ordering[v.Pointer()] {
		// A key being ordered leads back to its own map: what the
		// map holds is hashed where the walk met it first.
		x.u64(0xc1c1e)
		return
	}
	type entry struct {
		key  Sum
		k, e reflect.Value
	}
	entries := make([]entry, 0, v.Len())
	if x.ordering == nil {
		x.ordering = map[uintptr]bool{}
	}
	x.ordering[v.Pointer()] = true
	sub := &Hasher{skip: x.skip, ordering: x.ordering}
	it := v.MapRange()
	for it.Next() {
		entries = append(entries, entry{k: it.Key(), e: it.Value()})
		sub.h = fnv.New128a()
		sub.seen = map[uintptr]uint64{}
		sub.value(it.Key())
		copy(entries[len(entries)-1].key[:], sub.h.Sum(nil))
	}
	delete(x.ordering, v.Pointer())
	slices.SortFunc(entries, func(a, b entry) int {
		for i := range a.key {
			if c := cmp.Compare(a.key[i], b.key[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	x.u64(uint64(len(entries)))
	for _, e := range entries {
		x.value(e.k)
		x.value(e.e)
	}
}
