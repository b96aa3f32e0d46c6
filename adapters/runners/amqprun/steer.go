package amqprun

import (
	"slices"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"pgregory.net/rapid"
)

// The operations steering places: a client's, an admin's (an admin's
// create is the first admin's first operation, never placed).
var (
	clientOps = []string{histories.Acquire, histories.Release, histories.Verify}
	adminOps  = []string{histories.Change, histories.Count, histories.Wait}
)

// Goals are the interleavings c's plans can reach and DrawToward aims at
// (prover.Steerable), the most wanted first: two admins' operations at
// once and one after the other (what an administration without its mutex,
// or an admin answering from its cache, gets wrong), then an admin's with
// a client's, two clients', a process's two in a row, and every fault c
// strikes inside every operation. Left out are those no plan can show: a
// client's acquire right after its own acquire or verify (skipped, as the
// client believes it holds the lock), its verify or release after its own
// release (it holds nothing) or after another's create (clients begin once
// the create is done, and acquire first), on a mutex a client's verify or
// release during another's (a mutex has one holder), and those of
// processes c has one of at most.
func (c Config) Goals() []prover.Interleaving {
	c = c.withDefaults()
	var roles []string
	if c.Kind == histories.Semaphore && c.Admins > 0 {
		roles = append(roles, "admin")
	}
	roles = append(roles, "client")
	ops := func(role string) []string {
		if role == "admin" {
			return adminOps
		}
		return clientOps
	}
	many := func(role string) bool {
		if role == "admin" {
			return c.Admins > 1
		}
		return c.Clients > 1
	}
	var out []prover.Interleaving
	// Two processes' operations: X's role, then Y's.
	for _, pair := range [][2]string{{"admin", "admin"}, {"admin", "client"}, {"client", "admin"}, {"client", "client"}} {
		xr, yr := pair[0], pair[1]
		if !slices.Contains(roles, xr) || !slices.Contains(roles, yr) || xr == yr && !many(xr) {
			continue
		}
		who := xr + "/" + yr
		for _, how := range []prover.How{prover.During, prover.After} {
			for _, x := range ops(xr) {
				ys := ops(yr)
				if yr == "admin" && how == prover.After && (xr == "admin" || x == histories.Acquire) {
					ys = append(slices.Clone(ys), histories.Create)
				}
				for _, y := range ys {
					if c.Kind == histories.Mutex && how == prover.During && holds(x) && holds(y) {
						continue // a mutex has one holder
					}
					out = append(out, prover.Interleaving{X: x, Y: y, How: how, Who: who})
				}
			}
		}
	}
	// A process's two in a row.
	for _, role := range roles {
		for _, x := range ops(role) {
			ys := ops(role)
			if role == "admin" {
				ys = append(slices.Clone(ys), histories.Create)
			}
			for _, y := range ys {
				if role == "client" && !ownFollows(x, y) {
					continue
				}
				out = append(out, prover.Interleaving{X: x, Y: y, How: prover.AfterOwn, Who: role + "/" + role})
			}
		}
	}
	// Faults inside operations (an admin-crash is recorded as a kill).
	for _, f := range c.Faults {
		if slices.Contains(ClusterFaultNames, f) {
			continue // struck on nodes and links, not inside one process's operation
		}
		if f == AdminCrash {
			if !slices.Contains(c.Faults, histories.Kill) && slices.Contains(roles, "admin") {
				out = append(out, prover.Interleaving{X: histories.Change, Y: histories.Kill, How: prover.Struck, Who: "admin"})
			}
			continue
		}
		for _, role := range roles {
			for _, x := range ops(role) {
				out = append(out, prover.Interleaving{X: x, Y: f, How: prover.Struck, Who: role})
			}
		}
	}
	return out
}

// holds says whether a client does op only while it holds the lock.
func holds(op string) bool { return op == histories.Verify || op == histories.Release }

// ownFollows says whether a client's x can follow its own y (which
// succeeded): an acquire only after a release, a verify or a release
// only while it holds (after an acquire or a verify).
func ownFollows(x, y string) bool {
	if x == histories.Acquire {
		return y == histories.Release
	}
	return y != histories.Release
}

// DrawToward draws a plan of c toward g (prover.Steerable).
func (c Config) DrawToward(t *rapid.T, g prover.Interleaving) prover.Plan {
	return DrawToward(t, c, g)
}

// DrawToward draws a plan as Draw does, then leans it toward g: it puts
// g's operations first in two processes' scripts (one's, for a process's
// two in a row or a fault), spaced as g needs, and, for a fault, strikes
// it at one of the operation's methods. Y first, then after a pause of
// tens of milliseconds X, for X after another's Y; three of each, from
// some milliseconds apart, for X during another's Y; so that processes
// that start together (on the simulator and on a broker alike) mostly meet
// as g says.
func DrawToward(t *rapid.T, c Config, g prover.Interleaving) *Plan {
	c = c.withDefaults()
	p := Draw(t, c)
	xr, yr, _ := strings.Cut(g.Who, "/")
	if p.Kind != histories.Semaphore && (xr == "admin" || yr == "admin") {
		return p // a mutex has no admins
	}
	// Y's process first (the first admin for a create), then X's.
	bName := ""
	if g.How == prover.After || g.How == prover.During {
		bName = process(p, yr, "")
	}
	aName := process(p, xr, bName)
	a, b := script(p, aName), script(p, bName)
	switch g.How {
	case prover.After:
		if g.Y != histories.Create {
			*b = append(steps(t, p, yr, g.Y), *b...)
		}
		pause := intRange(20, 200).Draw(t, "steer_pause_ms")
		*a = append(spaced(steps(t, p, xr, g.X), pause), *a...)
	case prover.During:
		leadDuring(t, p, g, a, b)
	case prover.AfterOwn:
		var pre []Step
		if g.Y != histories.Create {
			pre = steps(t, p, xr, g.Y)
		}
		x := steps(t, p, xr, g.X)
		if xr == "client" && g.X != histories.Acquire {
			x = x[len(x)-1:] // Y left the client holding
		}
		*a = append(append(pre, x...), *a...)
	case prover.Struck:
		strikeDuring(t, c, p, g, a, aName)
		return p
	}
	// The faults drawn that would strike the meeting's processes are
	// left out: they would mostly stop it.
	p.Nemesis = slices.DeleteFunc(p.Nemesis, func(f Fault) bool {
		return f.Target == "" || f.Target == aName || f.Target == bName
	})
	return p
}

// leadDuring leans p toward g, an X during another's Y: Y three times
// in a row in b (Y's process's script), X three times in a (X's), each
// after a pause of up to 30 ms. The processes do not start at the same
// moment (the first admin starts right after its create, the others
// once connected some 20 ms later on the simulator), and an operation
// takes some milliseconds. Two changes go the same way, so that both
// mostly extend or both shrink the semaphore from the same count.
func leadDuring(t *rapid.T, p *Plan, g prover.Interleaving, a, b *[]Step) {
	xr, yr, _ := strings.Cut(g.Who, "/")
	var ys, xs []Step
	for range 3 {
		y, x := steps(t, p, yr, g.Y), steps(t, p, xr, g.X)
		if g.X == histories.Change && g.Y == histories.Change && (x[0].Delta > 0) != (y[0].Delta > 0) {
			x[0].Delta = -x[0].Delta
		}
		ys, xs = append(ys, y...), append(xs, x...)
	}
	*b = append(pausedFor(t, ys, "steer_y_pause_ms"), *b...)
	*a = append(pausedFor(t, xs, "steer_pause_ms"), *a...)
}

// strikeDuring leans p toward g, fault Y during X: X first in a (the
// script of aName, X's process), and Y aimed at aName right after one
// of X's methods, first in p's faults (the first of those drawn left
// out if p holds c's most already). An admin's kill where c does not
// strike kills is an admin-crash, within its first writes.
func strikeDuring(t *rapid.T, c Config, p *Plan, g prover.Interleaving, a *[]Step, aName string) {
	xr, _, _ := strings.Cut(g.Who, "/")
	pre := steps(t, p, xr, g.X)
	*a = append(pre, *a...)
	// Right after one of X's methods: those of the process's
	// connection, its create (the first admin's) and the steps before X
	// come first.
	before := connectMethods
	if aName == adminName(0) {
		before += methods(p, Step{Op: histories.Create})
	}
	for _, s := range pre[:len(pre)-1] {
		before += methods(p, s)
	}
	f := Fault{Fault: g.Y, Target: aName,
		AfterCalls: before + rapid.IntRange(1, methods(p, pre[len(pre)-1])).Draw(t, "steer_method")}
	if !slices.Contains(c.Faults, f.Fault) && f.Fault == histories.Kill && xr == "admin" {
		f.Fault, f.AfterCalls = AdminCrash, intRange(1, 4).Draw(t, "steer_writes")
	}
	if f.Fault == histories.Pause || f.Fault == histories.Partition {
		f.For = intRange(0, 4000).Draw(t, "steer_for_ms")
	}
	if len(p.Nemesis) >= c.MaxFaults && len(p.Nemesis) > 0 {
		p.Nemesis = p.Nemesis[1:]
	}
	p.Nemesis = append([]Fault{f}, p.Nemesis...)
}

// process names a process of role (adding one if the plan has none to
// spare) other than the one named not: the first admin or client if it is
// not that one, else the second.
func process(p *Plan, role, not string) string {
	scripts, name := &p.Clients, clientName
	if role == "admin" {
		scripts, name = &p.Admins, adminName
	}
	i := 0
	if not == name(0) {
		i = 1
	}
	for len(*scripts) <= i {
		*scripts = append(*scripts, nil)
	}
	return name(i)
}

// script is the script of the process named name (nil for none).
func script(p *Plan, name string) *[]Step {
	for i := range p.Admins {
		if adminName(i) == name {
			return &p.Admins[i]
		}
	}
	for i := range p.Clients {
		if clientName(i) == name {
			return &p.Clients[i]
		}
	}
	return nil
}

// steps are the steps that do op as a process of role: a client's verify
// or release after an acquire, so that it holds what it verifies or
// releases.
func steps(t *rapid.T, p *Plan, role, op string) []Step {
	switch op {
	case histories.Verify, histories.Release:
		return []Step{{Op: histories.Acquire}, {Op: op}}
	case histories.Change:
		d := intRange(1, 2).Draw(t, "steer_delta")
		if aBool.Draw(t, "steer_remove") {
			d = -d
		}
		return []Step{{Op: op, Delta: d}}
	case histories.Wait:
		return []Step{{Op: op, Slot: intRange(1, max(1, p.Slots)).Draw(t, "steer_slot")}}
	}
	return []Step{{Op: op}}
}

// connectMethods is how many AMQP methods a process of the reference
// sends before its first operation: its connection's and its channel's.
const connectMethods = 5

// methods is about how many AMQP methods the reference sends for step s
// of p on a semaphore that keeps p's slots, no slot held: an acquire's
// scan probes the slots and declares its B queue, a change or a count
// probes every A queue and one more (a change under the administration
// mutex, and writes one), a create declares the slots.
func methods(p *Plan, s Step) int {
	switch s.Op {
	case histories.Acquire:
		return p.Slots + 2
	case histories.Change:
		n := p.Slots + 4
		if p.Options.NoAdminMutex {
			n--
		}
		return n
	case histories.Count, histories.Create:
		return p.Slots + 3
	}
	return 1
}

// pausedFor puts a pause of up to 30 ms (none if 0), drawn as name,
// before steps.
func pausedFor(t *rapid.T, s []Step, name string) []Step {
	if ms := intRange(0, 30).Draw(t, name); ms > 0 {
		return append([]Step{{Op: Sleep, Ms: ms}}, s...)
	}
	return s
}

// spaced puts a pause of ms (none if 0) before the last of steps.
func spaced(s []Step, ms int) []Step {
	if ms == 0 {
		return s
	}
	return append(s[:len(s)-1:len(s)-1], Step{Op: Sleep, Ms: ms}, s[len(s)-1])
}
