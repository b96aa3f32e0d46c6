// Package leaserun is what the lease families' plans (db-semaphore,
// redlock, consul-semaphore) share: how a plan file is written and read,
// how their clients are named, and how a plan's scripts and lists are
// checked, naming the field that is wrong. Each family keeps its own plan
// struct and its own rules; what differs between them (the operations a
// script may hold, how long a sleep may be) is a parameter here, so that
// the three read, write and complain alike.
//
// It stands beside the lease checker (package lease), not in it: the
// checker judges histories and knows nothing of plans; leaserun uses the
// checker's words for a script (lease.Sleep), never the other way round.
package leaserun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/lease"
)

// Faulted is the tail every lease family's plan ends with, after its
// clients' scripts (and what the family says of each client): the faults
// of type F, the simulator's scheduling decisions, and how the plan was
// judged. A plan embeds it as its last field, so that encoding/json
// flattens these fields where each plan always had them and the plan
// files stay as they were, byte for byte.
type Faulted[F any] struct {
	// Nemesis lists the faults.
	Nemesis []F `json:"nemesis"`
	// Decisions are the simulator's scheduling decisions.
	run.Decisions
	// JudgedBy is how the plan was judged when it was found.
	prover.JudgedBy
}

// Write writes plan as indented JSON, as every lease family's plan files
// have always been written (plan.json, testdata).
func Write(w io.Writer, plan any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(plan)
}

// Read reads the plan file at path as strictly as every plan is read
// (prover.ParsePlan), and validates it with its Validate: a wrong value,
// an unknown field or a field twice is an error naming the file, line,
// column and field.
func Read[T any, P interface {
	*T
	Validate() error
}](path string) (*T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var plan T
	if err := prover.ParsePlan(path, data, &plan, P(&plan).Validate); err != nil {
		return nil, err
	}
	return &plan, nil
}

// ClientName is the process name of a plan's i-th client (from 0): c1,
// c2, ...
func ClientName(i int) string { return fmt.Sprintf("c%d", i+1) }

// Processes are the process names of a plan's n clients.
func Processes(n int) []string {
	var out []string
	for i := range n {
		out = append(out, ClientName(i))
	}
	return out
}

// Bad is a *prover.PlanError: what is wrong with field.
func Bad(field, format string, args ...any) error {
	return &prover.PlanError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Header says what is wrong with a plan's version and kind, naming the
// field: the format's version is want, and its kinds are kinds (one or
// two).
func Header(version, want int, kind string, kinds ...string) error {
	switch {
	case version != want:
		return Bad("version", "want %d, got %d", want, version)
	case !slices.Contains(kinds, kind):
		q := make([]string, len(kinds))
		for i, k := range kinds {
			q[i] = strconv.Quote(k)
		}
		return Bad("kind", "want %s, got %q", strings.Join(q, " or "), kind)
	}
	return nil
}

// Each checks n items of the list field name with check, which names
// fields within item i from its own place: ".target", "" (the item as a
// whole), "[j]..." (an item of a nested list). A *prover.PlanError it
// returns is moved into the list (nemesis[2].target); the first error
// ends the checking.
func Each(name string, n int, check func(i int) error) error {
	for i := range n {
		if err := check(i); err != nil {
			var pe *prover.PlanError
			if errors.As(err, &pe) {
				pe.Field = fmt.Sprintf("%s[%d]%s", name, i, pe.Field)
			}
			return err
		}
	}
	return nil
}

// Scripts checks every step of the clients' scripts with check, naming
// the step's field as clients[i][j]....
func Scripts[S any](clients [][]S, check func(S) error) error {
	return Each("clients", len(clients), func(i int) error {
		return Each("", len(clients[i]), func(j int) error { return check(clients[i][j]) })
	})
}

// Steps are a family's rules for one step of a client's script: one of
// Ops, or a sleep (lease.Sleep) of 1 to MaxMs milliseconds.
type Steps struct {
	// Ops are the operations a script may hold, sleep aside, in the
	// order the error messages name them.
	Ops []string
	// MaxMs bounds a sleep; 0: no bound.
	MaxMs int
	// OpMs lets an operation carry ms too (ignored): db-semaphore's
	// plans have always allowed it; the others' say it is a mistake.
	OpMs bool
}

// Check says what is wrong with a step of operation op and ms ms; the
// field it names starts with ".".
func (s Steps) Check(op string, ms int) error {
	switch {
	case op == lease.Sleep:
		if s.MaxMs == 0 && ms < 1 {
			return Bad(".ms", "want at least 1, got %d", ms)
		}
		if s.MaxMs != 0 && (ms < 1 || ms > s.MaxMs) {
			return Bad(".ms", "want 1 to %d, got %d", s.MaxMs, ms)
		}
	case !slices.Contains(s.Ops, op):
		return Bad(".op", "want %s or %s, got %q", strings.Join(s.Ops, ", "), lease.Sleep, op)
	case !s.OpMs && ms != 0:
		return Bad(".ms", "only a sleep has ms, not %s", op)
	}
	return nil
}

// BusyMs are the whole milliseconds of h in which one of its clients has
// an operation in flight (the nemesis and the probe aside), and 0: where
// an exhaustive scope places its faults, in the run of a plan without
// them.
func BusyMs(h []histories.Event) []int {
	ms := map[int]bool{0: true}
	invoked := map[string]int64{}
	for _, e := range h {
		if e.Process == "nemesis" || strings.HasPrefix(e.Process, "probe") {
			continue
		}
		if e.Type == histories.Invoke {
			invoked[e.Process] = e.Time
			continue
		}
		for t := invoked[e.Process] / 1e6; t <= e.Time/1e6; t++ {
			ms[int(t)] = true
		}
	}
	return slices.Sorted(maps.Keys(ms))
}

// Size is a lease plan's operations and faults, by which an exhaustive
// search orders its plans (prover.Exhaustive's Size: the shortest
// counterexample has the fewest).
func Size[S, F any](clients [][]S, nemesis []F) int {
	n := len(nemesis)
	for _, sc := range clients {
		n += len(sc)
	}
	return n
}

// Clients says n clients in words, as a scope is spelled out ("1 client",
// "2 clients").
func Clients(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", n)
}

// Exhaustible is what an exhaustive search of a lease family needs of
// its plan type T, a struct whose clients' scripts are of steps S and
// which embeds Faulted[F]: how to reach that Faulted and those scripts,
// and how to run a plan on the family's simulator. With it the four lease
// families search alike: the same places for faults, the same copies.
type Exhaustible[T, S, F any] struct {
	// Faulted reaches a plan's faults and the simulator's decisions.
	Faulted func(p *T) *Faulted[F]
	// Clients reaches a plan's clients' scripts.
	Clients func(p *T) [][]S
	// Simulate runs a plan on the family's simulator (no trace).
	Simulate func(p *T) (*prover.Result, error)
}

// InFlight are the whole milliseconds in which one of p's clients has an
// operation in flight (BusyMs: from its invocation to its completion,
// both included) in its run without faults, every choice of the
// simulator its first, in order: 0 and the places a fault can strike a
// client between its calls, or at the start or end of a sleep (a fault
// inside a sleep would only fall later in the same quiet stretch). Where
// an exhaustive scope places its faults.
func (x Exhaustible[T, S, F]) InFlight(p *T) ([]int, error) {
	q := *p
	f := x.Faulted(&q)
	f.Nemesis, f.Decisions = nil, run.Decisions{Chooser: prover.FirstChoice}
	res, err := x.Simulate(&q)
	if err != nil {
		return nil, fmt.Errorf("the scope's plan without faults: %w", err)
	}
	return BusyMs(res.History), nil
}

// WithNemesis makes copies of p (one of a scope's skeletons) that hold
// the faults given (prover.WithFaults' with).
func (x Exhaustible[T, S, F]) WithNemesis(p T) func(nemesis []F) prover.Plan {
	return func(nemesis []F) prover.Plan {
		q := p
		x.Faulted(&q).Nemesis = nemesis
		return any(&q).(prover.Plan)
	}
}

// WithFaults are the plans of skeleton p in a scope of at most most
// faults: p with each subset of the faults places puts at the
// milliseconds in flight of p's run without faults (InFlight), no fault
// first; without faults to place, p alone, and p is not run.
func (x Exhaustible[T, S, F]) WithFaults(p T, faults []string, most int, places func(p *T, faults []string, times []int) []F) ([]prover.Plan, error) {
	var at []F
	if len(faults) > 0 {
		times, err := x.InFlight(&p)
		if err != nil {
			return nil, err
		}
		at = places(&p, faults, times)
	}
	return prover.WithFaults(at, most, x.WithNemesis(p)), nil
}

// Places are the faults of an exhaustive scope of n clients that strike
// at instants: each of faults at every millisecond of times (InFlight's),
// at every client (a restart of the server at the server, target ""), a
// pause or a partition lasting until the clients are done (length 0) or
// lasting ms; place makes each fault of the family's type.
func Places[F any](faults []string, n int, times []int, lasting int, place func(at int, fault, target string, length int) F) []F {
	var out []F
	for _, f := range faults {
		targets := Processes(n)
		if f == histories.RestartBroker {
			targets = []string{""}
		}
		lengths := []int{0}
		if histories.EndOf(f) != "" {
			lengths = append(lengths, lasting)
		}
		for _, target := range targets {
			for _, length := range lengths {
				for _, at := range times {
					out = append(out, place(at, f, target, length))
				}
			}
		}
	}
	return out
}

// Size is a plan's operations and faults (prover.Exhaustive's Size).
func (x Exhaustible[T, S, F]) Size(p prover.Plan) int {
	q := any(p).(*T)
	return Size(x.Clients(q), x.Faulted(q).Nemesis)
}

// Scheduled is a copy of p that takes its choices from ch, or from
// schedule (prover.Exhaustive's Scheduled).
func (x Exhaustible[T, S, F]) Scheduled(p prover.Plan, schedule []int, ch prover.Chooser) prover.Plan {
	q := *any(p).(*T)
	f := x.Faulted(&q)
	f.Decisions = f.Decisions.Choosing(schedule, ch)
	return any(&q).(prover.Plan)
}

// NoAdmins says what is wrong with an exhaustive scope s for a lease
// family of kind (which has clients and no admins), naming the flag.
func NoAdmins(kind string, s prover.ExhaustScope) error {
	switch {
	case s.Clients < 1:
		return fmt.Errorf("--clients: an exhaustive search needs at least one client, got %d", s.Clients)
	case s.AdminOps > 0:
		return fmt.Errorf("--admin-ops: a %s has no admins (give --admin-ops 0)", kind)
	case s.Admins != 0:
		return fmt.Errorf("--admins: a %s has no admins", kind)
	}
	return nil
}
