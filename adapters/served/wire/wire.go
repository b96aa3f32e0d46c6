// Package wire is what every simulator served on the wire shares
// (adapters/served: amqpserve, redisserve): the run's Record (each
// process's steps, what was refused, where a replay left its log, what was
// not served) and the loopback Ports a process's implementation connects
// to, closed while the server behind one is down and opened again at the
// same address.
package wire

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lockprover/lockprover/adapters/host/proc"
)

// A Record is what a served run noted, safe for concurrent use: each
// process's steps in order (what a replay takes again), and the problems
// that make the run say nothing of the implementation.
type Record struct {
	mu       sync.Mutex
	log      map[string][]string
	refused  []string
	diverged []string
	unserved []string
	// undecided: where a search's process was silent and could not be
	// read as waiting (Undecide).
	undecided []string
}

// Log is every process's steps, by name, in order: what a replay's
// script takes again.
func (r *Record) Log() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]string, len(r.log))
	for k, v := range r.log {
		out[k] = slices.Clone(v)
	}
	return out
}

// Refused are what the served server refused of the processes' side,
// each named with what came (a connection that did not speak its
// protocol, a wrong password, a frame that could not be read).
func (r *Record) Refused() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.refused)
}

// Diverged says where a replay's implementation did what its log did not,
// from which step on the run was a new one.
func (r *Record) Diverged() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.diverged)
}

// Unserved are what processes sent that the served server does not serve
// (each once), answered as the real server answers what it does not know:
// a run that has any says nothing of the implementation.
func (r *Record) Unserved() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.unserved)
}

// Ended is what a served run recorded, once its serving has closed: its
// Log, Refused and Diverged, and, if processes sent anything Unserved, an
// error made of unserved, a format whose one verb gets their names (the
// run says nothing of the implementation: where to run it instead).
func (r *Record) Ended(unserved string) (log map[string][]string, refused, diverged []string, err error) {
	if m := r.Unserved(); len(m) > 0 {
		err = fmt.Errorf(unserved, strings.Join(m, ", "))
	}
	return r.Log(), r.Refused(), r.Diverged(), err
}

// Refuse notes a refusal (Refused).
func (r *Record) Refuse(format string, args ...any) {
	r.mu.Lock()
	r.refused = append(r.refused, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// Diverge notes where a replay left its log (Diverged).
func (r *Record) Diverge(format string, args ...any) {
	r.mu.Lock()
	r.diverged = append(r.diverged, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// Unserve notes what was not served, once (Unserved).
func (r *Record) Unserve(what string) {
	r.mu.Lock()
	if !slices.Contains(r.unserved, what) {
		r.unserved = append(r.unserved, what)
	}
	r.mu.Unlock()
}

// Undecide notes that a process was silent where the protocol did not
// show it waiting, in a run whose order must be the schedule's alone (an
// exhaustive search's): the run says nothing either way.
func (r *Record) Undecide(format string, args ...any) {
	r.mu.Lock()
	r.undecided = append(r.undecided, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// Undecided are what Undecide noted, in order.
func (r *Record) Undecided() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.undecided)
}

// Took logs process's next step.
func (r *Record) Took(process, step string) {
	r.mu.Lock()
	if r.log == nil {
		r.log = map[string][]string{}
	}
	r.log[process] = append(r.log[process], step)
	r.mu.Unlock()
}

// Steps is how many steps process has logged.
func (r *Record) Steps(process string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.log[process])
}

// Left is what process has still to replay of script (a served run's
// Script: the log of a run to take again), after the steps it logged: a
// restarted process's new incarnation goes on where the last one ended.
func (r *Record) Left(script map[string][]string, process string) []string {
	if all, n := script[process], r.Steps(process); len(all) > n {
		return all[n:]
	}
	return nil
}

// A Port is a loopback port a process's implementation connects to: on a
// server of several, that server's (its Key). Its listener is closed while
// the server refuses connections, so that a dial is refused before any
// byte as a real one's is, and opened again at the same address after.
// Its listener is read and set under its owner's lock.
type Port[K comparable] struct {
	Key  K
	Addr string
	Ln   net.Listener // nil while closed
	port int          // its number, reserved until it ends (0: none)
}

// Listen opens a loopback port for each key, in order; none if one
// cannot be had (what names what could not is the error).
func Listen[K comparable](what string, keys []K) ([]*Port[K], error) {
	var ports []*Port[K]
	for _, k := range keys {
		ln, n, err := listen()
		if err != nil {
			Close(ports)
			return nil, fmt.Errorf("a port for %s: %w", what, err)
		}
		ports = append(ports, &Port[K]{Key: k, Addr: ln.Addr().String(), Ln: ln, port: n})
	}
	return ports, nil
}

// Close ends the ports for good: their listeners close, and their numbers
// may be given out again.
func Close[K comparable](ports []*Port[K]) {
	for _, pt := range ports {
		pt.End()
	}
}

// End closes the port for good (Follow opens it no more after), and
// gives its number back.
func (pt *Port[K]) End() {
	if pt.Ln != nil {
		pt.Ln.Close()
		pt.Ln = nil
	}
	if pt.port != 0 {
		proc.ReleasePorts(pt.port)
		pt.port = 0
	}
}

// listen opens a loopback port of a number reserved until the Port ends
// (proc.FreePorts: below the kernel's ephemeral range, and reserved
// against every lockprover process). A port is closed while its server
// is down and opened again at the same address after; a number the
// kernel handed out for ":0" it hands out again as the local port of
// somebody's outgoing connection, and the port could not be opened again
// (bind: address already in use: seen in an exhaustive search's broker
// restarts, at a few hundred connections a second). Where no number can
// be reserved, the kernel picks one.
func listen() (net.Listener, int, error) {
	for range 5 {
		ports, err := proc.FreePorts(1, false)
		if err != nil {
			break
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])))
		if err == nil {
			return ln, ports[0], nil
		}
		proc.ReleasePorts(ports[0])
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	return ln, 0, err
}

// URL is the port's address as an URL of scheme (amqp://guest:guest@,
// redis://): scheme, then host:port, then "/".
func (pt *Port[K]) URL(scheme string) string { return scheme + pt.Addr + "/" }

// Follow opens or closes the port as its server takes connections (up)
// or refuses them; accept serves a listener opened again. It says what
// went wrong opening it again (the address taken meanwhile), or nil.
func (pt *Port[K]) Follow(up bool, accept func(net.Listener)) error {
	switch {
	case !up && pt.Ln != nil:
		pt.Ln.Close()
		pt.Ln = nil
	case up && pt.Ln == nil:
		ln, err := net.Listen("tcp", pt.Addr)
		if err != nil {
			return err
		}
		pt.Ln = ln
		accept(ln)
	}
	return nil
}
