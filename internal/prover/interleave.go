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
	m := &meetings{seen: make(map[uint64]struct{}, 64)}
	m.addProcs(h)
	for i := range h {
		e := &h[i]
		switch {
		case isProbe(e.Process) || histories.IsNotice(e):
		case e.Process == "nemesis":
			m.fault(e)
		default:
			m.event(e)
		}
	}
	return m.out
}

// meetings is what Interleavings knows as it walks a history: the names
// of the operations, the kinds of those that succeeded, each process's
// place, and the meetings seen so far.
type meetings struct {
	ops   []string   // the operations' and faults' names, numbered as they first appear
	kinds []opKind   // by index
	procs []meetProc // in order of first appearance, so that the output's order is fixed
	seen  map[uint64]struct{}
	out   []Interleaving
}

// opKind is an operation that succeeded, with who did it: its name (in
// meetings.ops) and its process's role.
type opKind struct{ f, role int }

// meetProc is one process of the history, as Interleavings follows it.
type meetProc struct {
	name    string
	role    int    // roleClient or roleAdmin
	last    int    // kind of its last operation that succeeded, or -1
	since   uint64 // kinds of others' operations that succeeded since its last one began
	pending int    // the operation it has begun and not ended (ops), or -1
}

// isProbe says whether a process is one of the run's final checks.
func isProbe(name string) bool { return strings.HasPrefix(name, "probe") }

// op is f's number, numbering it if it is new.
func (m *meetings) op(f string) int {
	for i, o := range m.ops {
		if o == f {
			return i
		}
	}
	m.ops = append(m.ops, f)
	return len(m.ops) - 1
}

// kindOf is k's number, numbering it if it is new.
func (m *meetings) kindOf(k opKind) int {
	for i, o := range m.kinds {
		if o == k {
			return i
		}
	}
	m.kinds = append(m.kinds, k)
	return len(m.kinds) - 1
}

// find is the index of the process named name, or -1.
func (m *meetings) find(name string) int {
	for i := range m.procs {
		if m.procs[i].name == name {
			return i
		}
	}
	return -1
}

// addProcs notes every process of h but the nemesis and the probes, in
// order of first appearance, with its role.
func (m *meetings) addProcs(h []histories.Event) {
	for i := range h {
		e := &h[i]
		if e.Process != "nemesis" && !isProbe(e.Process) && m.find(e.Process) < 0 {
			role := roleClient
			if Role(e.Process) == "admin" {
				role = roleAdmin
			}
			m.procs = append(m.procs, meetProc{name: e.Process, role: role, last: -1, pending: -1})
		}
	}
}

// saw notes that x met y, how, by whose operations (who: whoNames).
func (m *meetings) saw(x, y int, how How, who int) {
	key := uint64(x) | uint64(y)<<24 | uint64(how)<<48 | uint64(who)<<56
	if _, ok := m.seen[key]; !ok {
		m.seen[key] = struct{}{}
		m.out = append(m.out, Interleaving{X: m.ops[x], Y: m.ops[y], How: how, Who: whoNames[who]})
	}
}

// fault notes the nemesis's event e: a fault that strikes (Struck) the
// pending operation of its target, or of every process for a fault of
// no process of the plan's (a server's, or none's).
func (m *meetings) fault(e *histories.Event) {
	if e.Type != histories.Invoke || e.F == histories.Resume || e.F == histories.Heal {
		return // a fault's end is no fault
	}
	target, y := -1, e.F
	if f, ok := e.Value.(*histories.Fault); ok && f != nil {
		target = m.find(f.Process)
		if f.Cut != "" {
			y = e.F + " of nodes" // links cut between a cluster's nodes, not a client's
		}
	}
	var yk int
	struck := false
	for k := range m.procs {
		if q := &m.procs[k]; q.pending >= 0 && (target < 0 || target == k) {
			if !struck {
				yk, struck = m.op(y), true
			}
			m.saw(q.pending, yk, Struck, 4+q.role)
		}
	}
}

// event notes a process's event e: an invoke meets what succeeded
// since its process's last (After), that last (AfterOwn) and what the
// others have pending (During); an ok is what the others' next invokes
// meet; a failure or an unknown outcome ends the process's operation and
// leaves it nothing of its own to follow.
func (m *meetings) event(e *histories.Event) {
	pi := m.find(e.Process)
	p := &m.procs[pi]
	switch e.Type {
	case histories.Invoke:
		x := m.op(e.F)
		for k, o := range m.kinds {
			if p.since&(1<<k) != 0 {
				m.saw(x, o.f, After, met2(p.role, o.role))
			}
		}
		if p.last >= 0 {
			m.saw(x, m.kinds[p.last].f, AfterOwn, met2(p.role, p.role))
		}
		for k := range m.procs {
			if q := &m.procs[k]; k != pi && q.pending >= 0 {
				m.saw(x, q.pending, During, met2(p.role, q.role))
			}
		}
		p.since, p.pending = 0, x
	case histories.Ok:
		p.pending = -1
		k := m.kindOf(opKind{m.op(e.F), p.role})
		if k >= 64 {
			return
		}
		p.last = k
		for q := range m.procs {
			if q != pi {
				m.procs[q].since |= 1 << k
			}
		}
	default:
		p.pending, p.last = -1, -1
	}
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
