package prover

import (
	"sort"
	"strings"

	"github.com/lockprover/lockprover/histories"
)

// An Interleaving is a meeting of two things a history shows, one kind of
// what a search counts and steers toward (Steerable): an order of two
// operations (X after another process's Y, X after its own Y), an overlap
// (X begun while another's Y was pending), or a fault Y that struck while
// an operation X was pending. A defect that needs one process to act after
// another's change (an admin answering count from its own cache: "count
// after another's change"), two admins' changes at once ("change during
// another's change") or a client killed mid-acquire shows only on plans
// that reach that meeting.
type Interleaving struct {
	X, Y string // operations, as histories name them (acquire, count, ...); Y a fault with Struck
	How  How
	// Who says whose operations met: X's process's role, then Y's
	// ("admin/client": an admin's X, a client's Y); with Struck, X's only.
	// A process whose name begins with "admin" is an admin, any other a
	// client.
	Who string
}

// How says how an Interleaving's two meet.
type How uint8

const (
	// After: X is the first operation of its process to begin after
	// another process's Y ended with ok.
	After How = iota
	// AfterOwn: X right after its process's own Y, which ended with ok.
	AfterOwn
	// During: X began while another process's Y was pending.
	During
	// Struck: the nemesis struck fault Y while X, of the fault's target,
	// was pending (or, for a fault aimed at no process of the plan, as a
	// broker restart, any process's X). A partition of a cluster's links
	// (a fault that names a cut) is Y "partition of nodes", told apart
	// from a client's.
	Struck
)

func (i Interleaving) String() string {
	var s string
	switch i.How {
	case AfterOwn:
		s = i.X + " after own " + i.Y
	case During:
		s = i.X + " during another's " + i.Y
	case Struck:
		s = i.Y + " during " + i.X
	default:
		s = i.X + " after another's " + i.Y
	}
	if i.Who != "" {
		s += " (" + i.Who + ")"
	}
	return s
}

// Role is the role of a process by its name: "admin" for a name that
// begins with "admin", "client" for any other.
func Role(process string) string {
	if strings.HasPrefix(process, "admin") {
		return "admin"
	}
	return "client"
}

// Interleavings lists the interleavings h shows (each once, in the order
// first shown). The run's final checks (processes whose names begin with
// "probe") are left out: they are not the plan's; the nemesis's events
// count only as the faults of Struck (a pause's resume and a partition's
// heal, which end one, not at all).
//
// It runs for every plan a search runs: the operations' names are
// numbered as they first appear (ops), and a meeting is told from those
// seen before by a number made of its parts, not by hashing its strings.
func Interleavings(h []histories.Event) []Interleaving {
	var ops []string // the operations' and faults' names, numbered as they first appear
	op := func(f string) int {
		for i, o := range ops {
			if o == f {
				return i
			}
		}
		ops = append(ops, f)
		return len(ops) - 1
	}
	type kind struct{ f, role int } // an operation that succeeded, with who did it
	var kinds []kind                // by index
	kindOf := func(k kind) int {
		for i, o := range kinds {
			if o == k {
				return i
			}
		}
		kinds = append(kinds, k)
		return len(kinds) - 1
	}
	type proc struct {
		name    string
		role    int    // roleClient or roleAdmin
		last    int    // kind of its last operation that succeeded, or -1
		since   uint64 // kinds of others' operations that succeeded since its last one began
		pending int    // the operation it has begun and not ended (ops), or -1
	}
	probe := func(name string) bool { return strings.HasPrefix(name, "probe") }
	var procs []proc // in order of first appearance, so that the output's order is fixed
	find := func(name string) int {
		for i := range procs {
			if procs[i].name == name {
				return i
			}
		}
		return -1
	}
	for i := range h {
		e := &h[i]
		if e.Process != "nemesis" && !probe(e.Process) && find(e.Process) < 0 {
			role := roleClient
			if Role(e.Process) == "admin" {
				role = roleAdmin
			}
			procs = append(procs, proc{name: e.Process, role: role, last: -1, pending: -1})
		}
	}
	seen := make(map[uint64]struct{}, 64)
	var out []Interleaving
	// saw notes that x met y, how, by whose operations (who: whoNames).
	saw := func(x, y int, how How, who int) {
		key := uint64(x) | uint64(y)<<24 | uint64(how)<<48 | uint64(who)<<56
		if _, ok := seen[key]; !ok {
			seen[key] = struct{}{}
			out = append(out, Interleaving{X: ops[x], Y: ops[y], How: how, Who: whoNames[who]})
		}
	}
	for i := range h {
		e := &h[i]
		if probe(e.Process) || histories.IsNotice(e) {
			continue
		}
		if e.Process == "nemesis" {
			if e.Type != histories.Invoke || e.F == histories.Resume || e.F == histories.Heal {
				continue // a fault's end is no fault
			}
			target, y := -1, e.F
			if f, ok := e.Value.(*histories.Fault); ok && f != nil {
				target = find(f.Process)
				if f.Cut != "" {
					y = e.F + " of nodes" // links cut between a cluster's nodes, not a client's
				}
			}
			// (A fault of no process of the plan's, a server's or none's,
			// strikes every process: target -1.)
			var yk int
			struck := false
			for k := range procs {
				if q := &procs[k]; q.pending >= 0 && (target < 0 || target == k) {
					if !struck {
						yk, struck = op(y), true
					}
					saw(q.pending, yk, Struck, 4+q.role)
				}
			}
			continue
		}
		pi := find(e.Process)
		p := &procs[pi]
		switch e.Type {
		case histories.Invoke:
			x := op(e.F)
			for k, o := range kinds {
				if p.since&(1<<k) != 0 {
					saw(x, o.f, After, met2(p.role, o.role))
				}
			}
			if p.last >= 0 {
				saw(x, kinds[p.last].f, AfterOwn, met2(p.role, p.role))
			}
			for k := range procs {
				if q := &procs[k]; k != pi && q.pending >= 0 {
					saw(x, q.pending, During, met2(p.role, q.role))
				}
			}
			p.since, p.pending = 0, x
		case histories.Ok:
			p.pending = -1
			k := kindOf(kind{op(e.F), p.role})
			if k >= 64 {
				continue
			}
			p.last = k
			for q := range procs {
				if q != pi {
					procs[q].since |= 1 << k
				}
			}
		default:
			p.pending, p.last = -1, -1
		}
	}
	return out
}

// The roles of Role, numbered for Interleavings, and the Who of each
// meeting of two (met2) and of one (Struck: the role's own name).
const (
	roleClient = 0
	roleAdmin  = 1
)

var whoNames = [...]string{"client/client", "client/admin", "admin/client", "admin/admin", "client", "admin"}

// met2 is the index in whoNames of the Who of an X of role x and a Y of
// role y; a role alone (Struck) is at 4+role.
func met2(x, y int) int { return x<<1 | y }

// SortedInterleavings is counts' keys, most often reached first (then by
// name).
func SortedInterleavings(counts map[Interleaving]int) []Interleaving {
	out := make([]Interleaving, 0, len(counts))
	for i := range counts {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool {
		if counts[out[a]] != counts[out[b]] {
			return counts[out[a]] > counts[out[b]]
		}
		return out[a].String() < out[b].String()
	})
	return out
}
