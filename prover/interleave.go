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

// met is an Interleaving's Who for an X of role x and a Y of role y
// (Role's): a constant, not a string built again for every pair of
// operations a history shows.
func met(x, y string) string {
	switch {
	case x == "admin" && y == "admin":
		return "admin/admin"
	case x == "admin" && y == "client":
		return "admin/client"
	case x == "client" && y == "admin":
		return "client/admin"
	case x == "client" && y == "client":
		return "client/client"
	}
	return x + "/" + y
}

// Interleavings lists the interleavings h shows (each once, in no fixed
// order). The run's final checks (processes whose names begin with
// "probe") are left out: they are not the plan's; the nemesis's events
// count only as the faults of Struck (a pause's resume and a partition's
// heal, which end one, not at all).
func Interleavings(h []histories.Event) []Interleaving {
	type op struct{ f, who string }
	var kinds []op // operations that succeeded, with who did them, by index
	kind := func(o op) int {
		for i, k := range kinds {
			if k == o {
				return i
			}
		}
		kinds = append(kinds, o)
		return len(kinds) - 1
	}
	type proc struct {
		role    string
		last    int    // kind of its last operation that succeeded, or -1
		since   uint64 // kinds of others' operations that succeeded since its last one began
		pending string // the operation it has begun and not ended, or ""
	}
	probe := func(name string) bool { return strings.HasPrefix(name, "probe") }
	procs := map[string]*proc{}
	var names []string // in order of first appearance, so that the output's order is fixed
	for _, e := range h {
		if e.Process != "nemesis" && !probe(e.Process) && procs[e.Process] == nil {
			procs[e.Process] = &proc{last: -1, role: Role(e.Process)}
			names = append(names, e.Process)
		}
	}
	seen := map[Interleaving]bool{}
	var out []Interleaving
	saw := func(i Interleaving) {
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	for _, e := range h {
		if probe(e.Process) || histories.IsNotice(&e) {
			continue
		}
		if e.Process == "nemesis" {
			if e.Type != histories.Invoke || e.F == histories.Resume || e.F == histories.Heal {
				continue // a fault's end is no fault
			}
			target, y := "", e.F
			if f, ok := e.Value.(*histories.Fault); ok && f != nil {
				target = f.Process
				if f.Cut != "" {
					y = e.F + " of nodes" // links cut between a cluster's nodes, not a client's
				}
			}
			if procs[target] == nil {
				target = "" // a server's fault, or none's: it strikes every process
			}
			for _, name := range names {
				if q := procs[name]; q.pending != "" && (target == "" || target == name) {
					saw(Interleaving{X: q.pending, Y: y, How: Struck, Who: q.role})
				}
			}
			continue
		}
		p := procs[e.Process]
		switch e.Type {
		case histories.Invoke:
			for k, o := range kinds {
				if p.since&(1<<k) != 0 {
					saw(Interleaving{X: e.F, Y: o.f, Who: met(p.role, o.who)})
				}
			}
			if p.last >= 0 {
				saw(Interleaving{X: e.F, Y: kinds[p.last].f, How: AfterOwn, Who: met(p.role, p.role)})
			}
			for _, name := range names {
				if q := procs[name]; q != p && q.pending != "" {
					saw(Interleaving{X: e.F, Y: q.pending, How: During, Who: met(p.role, q.role)})
				}
			}
			p.since, p.pending = 0, e.F
		case histories.Ok:
			p.pending = ""
			k := kind(op{e.F, p.role})
			if k >= 64 {
				continue
			}
			p.last = k
			for name, q := range procs {
				if name != e.Process {
					q.since |= 1 << k
				}
			}
		default:
			p.pending, p.last = "", -1
		}
	}
	return out
}

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
