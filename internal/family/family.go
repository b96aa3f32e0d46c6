// Package family declares what a lock family brings to lockprover, and
// keeps the list of the families a program proves.
//
// A lock design lockprover proves is a family: amqp-locks, the database
// semaphore, and the next ones. Each registers one Descriptor (from an
// init function of its package); a program links the families it proves
// in with one blank import of cmd/lockprover/all. cmd/lockprover then parses
// flags and loops over the registry: it imports no family, and learns
// from the descriptors which --kind selects which family, which flags a
// family's targets take, which properties, mutants and faults it has, how
// its plan files read, and how it serves its reference over the process
// protocol.
//
// A prover.Subject is one proof of a family (its plans, on one target,
// against one implementation); a Descriptor is the family itself, and
// makes prover.Families from what a command line says (Descriptor.Setup).
package family

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/internal/prover/explore"
)

// A Descriptor is a lock family: everything lockprover does with it that
// is not the same for every family.
type Descriptor struct {
	// Name names the family in messages and docs ("amqp-locks").
	Name string
	// Kinds are the --kind values that select the family, the default
	// first; a plan file names one of them in its "kind" field, and a
	// history's events name theirs (the checker's kinds, see
	// model.Register).
	Kinds []string
	// Properties are what the family's checker judges, in the order a
	// report lists them.
	Properties []string
	// Mutants are the deliberately broken variants of the family's
	// reference, in the order `lockprover mutants` lists them.
	Mutants []Mutant
	// Faults are the faults its plans may hold, in the order --faults
	// lists them.
	Faults []string
	// Targets are where its plans run; the first is its simulator.
	Targets []Target
	// Flags are the flags its targets take beyond every family's
	// (--amqp-url, --dsn, ...). A flag two families take is declared by
	// both, alike; a program registers it once (RegisterFlags).
	Flags []Flag
	// Models are the judging models its checker offers besides the
	// standard one, which every family has: amqp-locks' "strict"
	// (acquire-exact judged at every acquire, over the whole semaphore).
	// --model takes one of them, or standard; a plan records the one it
	// was judged by, and the family's prover.Judging is told it.
	Models []string
	// Judging, if set, gives the options the family's checker takes (a
	// value of the type it declares, for model.Options.Family) for the
	// histories check judges, from check's flags by name (--model, and
	// the family's Flags with the Check verb: the lease families'
	// --drift): the CLI, which knows no family, hands them on. prove and
	// replay take them from the prover.Subject (prover.Judging).
	Judging func(flag func(name string) string) any
	// CheckFlags, if set, is what check does with the family's Flags with
	// the Check verb beyond handing them to Judging: it refuses their bad
	// values, and may judge imported histories through a lens they switch
	// on (the lease families' --lease-ttl).
	CheckFlags *CheckFlags
	// Setup makes what prove proves from what the command line says:
	// the prover.Subject, where it runs, and what must start and stop with
	// the run. An error names the flag that is wrong.
	Setup func(s Settings) (*Setup, error)
	// ReadPlan reads a plan file the family wrote (plan.json), strictly:
	// an error names the file, line and field.
	ReadPlan func(path string) (prover.Plan, error)
	// Replay makes a plan read back ready to run again, as Setup makes a
	// search: on the target and against the implementation s names, with
	// s.Mutant ("reference" for none) replacing the plan's mutant.
	Replay func(p prover.Plan, s Settings) (*Setup, error)
	// Serve serves the family's reference (or mutant) over the process
	// protocol on in and out (serve-reference); options are the
	// reference's, as --options gives them. A mistake in mutant or
	// options is a *UsageError.
	Serve func(in io.Reader, out, log io.Writer, mutant, options string) error
	// Validate checks an implementation's handling of the process
	// protocol (validate-impl) on the backend s's flags name, printing a
	// line per check on out: passed says whether every check passed. A
	// *UsageError means the backend (or s.Options) cannot be used, and
	// the implementation was not tried.
	Validate func(ctx context.Context, command string, s Settings, out io.Writer) (passed bool, err error)
	// Explore, if set, proves the family's open choices side by side on
	// its simulator and writes its tables (`lockprover explore`): an
	// error wrapping context.Canceled means it was interrupted.
	Explore func(ctx context.Context, c explore.Config) (inconclusive bool, err error)
	// Bench, if set, measures the family's reference on its real backend
	// beside the floor (`lockprover bench`) and writes its tables to out:
	// a *UsageError means the backend or a flag cannot be used; an error
	// wrapping context.Canceled means it was interrupted (what it made
	// is removed all the same).
	Bench func(ctx context.Context, s Settings, c bench.Config, out io.Writer) error
	// Conform, if set, runs the family's simulators against its real
	// backends (`lockprover conform`): c.Sequences drawn sequences from
	// c.Seed, and whatever else the family checks, written to out. A
	// *UsageError means the backend or a flag cannot be used; an error
	// wrapping context.Canceled means it was interrupted.
	Conform func(ctx context.Context, s Settings, c ConformConfig, out io.Writer) (Conformance, error)
}

// ConformConfig is what every family's conform takes.
type ConformConfig struct {
	Sequences int
	Seed      uint64
	Log       io.Writer
}

// A Conformance is how a conform run ended.
type Conformance int

const (
	Agree        Conformance = iota // the simulators agree with the real backend
	Inconclusive                    // the harness failed (a tool, the cleanup): nothing decided
	Diverge                         // they disagree: the divergence is written out
)

// A Mutant is a deliberately broken variant of a family's reference: the
// defect, the property that must catch it, and the proof of it on the
// family's simulator.
type Mutant struct {
	Name, Property, Defect string
	Prove                  prover.Subject
}

// A Target is where a family's plans run: its simulator, or a real backend.
type Target struct {
	Name string // the --target value: "sim", "rabbitmq", "mariadb"
	// Real says the target is a real server (plans run in real time).
	Real bool
	// Served says a simulator that serves its server's protocol on the
	// wire (adapters/served), so that an implementation's processes
	// (--impl) run on it as on a real server.
	Served bool
	// Faults are the faults it strikes, as --faults names them (the
	// fault table's names, run.Faults): docs/faults.md lists each
	// fault's targets from them.
	Faults []string
}

// A Flag is a flag of a family's targets. Bool flags take no value;
// Default is what the usage shows, and what Settings.Flag gives when the
// flag is not given. Verbs are the verbs that take it.
//
// Usage's first line is what `lockprover help` shows of the flag (kept
// short: the help is read on a terminal); the lines after it, if any, are
// details that the command line's reference, docs/cli.md, adds. Usage
// starts with the family's name ("redlock: ...") so that a list of every
// family's flags says whose each is.
type Flag struct {
	Name, Usage, Default string
	// Arg names the flag's value in help and usage lines (--servers N,
	// --backend consul|etcd); empty for a Bool flag. Int, Float and
	// Duration are checked as the command line is parsed, so that a value
	// that is none is refused naming the flag ("--ttl 5: a duration needs a
	// unit"); any other Arg is text the family reads as it likes.
	Arg  string
	Bool bool
	// Real says the flag names or shapes a real server (its address, a
	// private one, its version, what a run may do to it): help lists it
	// with the real servers rather than with the family's own flags.
	Real  bool
	Verbs Verbs
}

// The Args of a Flag that the command line checks as it parses them (an
// empty value stays allowed: it is the flag not given).
const (
	Int      = "N" // a whole number: 3, -1
	Float    = "R" // a number: 0.01, 20
	Duration = "D" // a length of time with its unit: 500ms, 5s, 2m
)

// Verbs is a set of the verbs a family flag goes with.
type Verbs uint8

const (
	Prove    Verbs = 1 << iota // prove (and explore's searches)
	Replay                     // replay
	Validate                   // validate-impl
	Bench                      // bench
	Conform                    // conform
	Check                      // check (the histories it judges: CheckFlags)

	// Server is what a flag naming a real server (--amqp-url, --dsn) goes
	// with: every verb that talks to one.
	Server = Prove | Replay | Validate | Bench | Conform
	// Runs is what a flag saying how plans may run there goes with
	// (--allow-restart, --private-server).
	Runs = Prove | Replay
)

// Settings are what a command line says of a run, for Setup and Replay.
type Settings struct {
	Kind   string // the --kind given (one of the family's Kinds)
	Target string // --target; "" when not given
	Impl   string // --impl: an implementation's command, "" for the reference
	// InitTimeout is how long each of Impl's processes may take to answer
	// init (--init-timeout); 0 for the protocol's 10 s.
	InitTimeout time.Duration
	Mutant      string // --mutant
	Options     string // --options
	Faults      string // --faults: "all", "none" or a comma-separated list
	Clients     int    // --clients
	Ops         int    // --ops
	MaxFaults   int    // --max-faults
	Heartbeat   string // --heartbeat as given ("" when not given)
	Trace       io.Writer
	// Flag is the value of one of the family's Flags ("true" for a bool
	// flag given), its Default when not given; Given says whether a flag
	// of any family, or of the verb, was given.
	Flag  func(name string) string
	Given func(name string) bool
	// Stdout hears what the setup starts (a private server), unless Quiet.
	Stdout io.Writer
	Quiet  bool
	// Stderr, if set, hears what the setup starts in the user's stead when
	// nothing was named (a broker container), even under Quiet.
	Stderr io.Writer
}

// A Setup is a run made ready: what it proves, where, and what must start
// before the first plan and stop after the last.
type Setup struct {
	Prove prover.Subject
	// Target is the target chosen ("sim" unless a flag or --impl chose
	// another); Where says it in words: "the simulator", "RabbitMQ at ...";
	// What says what runs: "the reference", "mutant ...", a command.
	Target, Where, What string
	// Real says the target is a real server; Server says which, with its
	// version, as adapters/servers/versions names it ("rabbitmq 4.3.6"), for the
	// results and the report ("" on a simulator).
	Real   bool
	Server string
	// Replay are the flags a replay of a plan of this run needs (its
	// target, server, implementation), quoted for a shell.
	Replay []string
	// Start, if set, runs once before the first plan: it checks the
	// target and the implementation (and starts a private server), and
	// replaces Prove with the proof on what it started. A *UsageError
	// means the run cannot start (the server or implementation cannot be
	// used).
	Start func(ctx context.Context) error
	// Interrupt, if set, ends the implementation's processes at once, at
	// the first Ctrl-C (the run then cleans up and ends); Stop, if set,
	// ends what the run started (processes, servers) once it is over.
	// Either may be called more than once.
	Interrupt, Stop func()
}

// A UsageError is a mistake in what the user asked for (a flag, a plan
// that cannot run there, a server that cannot be used), as opposed to a
// failure of the run: commands exit 2 for it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// An ImplError is an implementation given with --impl that cannot start
// (it failed its preflight): commands exit 2 for it and point to
// validate-impl.
type ImplError struct {
	Err     error
	Command string
	// Kind, if set, is the --kind validate-impl needs for it (where it is
	// not validate-impl's default).
	Kind string
}

func (e *ImplError) Error() string {
	return "the implementation failed its preflight: " + e.Err.Error()
}
func (e *ImplError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

var registry struct {
	sync.RWMutex
	list []*Descriptor
}

// Register adds a family to the registry. A family registers itself from
// an init function; registering a family whose name or one of whose kinds
// is taken, or one without a name, kinds or Setup, is a programming error
// and panics.
func Register(d *Descriptor) {
	registry.Lock()
	defer registry.Unlock()
	switch {
	case d.Name == "" || len(d.Kinds) == 0:
		panic("family.Register: a family needs a name and kinds")
	case d.Setup == nil || d.ReadPlan == nil || d.Replay == nil:
		panic("family.Register: family " + d.Name + " needs Setup, ReadPlan and Replay")
	case len(d.Targets) == 0:
		panic("family.Register: family " + d.Name + " has no target")
	}
	for _, o := range registry.list {
		if o.Name == d.Name {
			panic("family.Register: family " + d.Name + " registered twice")
		}
		for _, k := range d.Kinds {
			if slices.Contains(o.Kinds, k) {
				panic("family.Register: kind " + k + " of " + d.Name + " is " + o.Name + "'s")
			}
		}
	}
	i, _ := slices.BinarySearchFunc(registry.list, d.Name, func(o *Descriptor, name string) int { return strings.Compare(o.Name, name) })
	registry.list = slices.Insert(registry.list, i, d)
}

// All lists the registered families by name (amqp-locks first): the
// order every list of kinds, targets and flags follows, whatever order
// Go ran their packages' init functions in.
func All() []*Descriptor {
	registry.RLock()
	defer registry.RUnlock()
	return slices.Clone(registry.list)
}

// Of returns the family that kind selects, or nil.
func Of(kind string) *Descriptor {
	for _, d := range All() {
		if slices.Contains(d.Kinds, kind) {
			return d
		}
	}
	return nil
}

// Model is the judging model --model names for d's plans, as prover.Config
// and a plan record it: "" for standard, which every family has, or one
// of d.Models. Any other is an error that names the flag and what d
// offers: a model nobody judges by is never accepted silently.
func (d *Descriptor) Model(name string) (string, error) {
	switch {
	case name == "standard" || name == "":
		return "", nil
	case slices.Contains(d.Models, name):
		return name, nil
	}
	return "", fmt.Errorf("--model %s: --kind %s is judged by %s", name, d.Name, strings.Join(append([]string{"standard"}, d.Models...), " or "))
}

// ModelNames lists every judging model a registered family offers,
// standard first, each once.
func ModelNames() []string {
	names := []string{"standard"}
	for _, d := range All() {
		for _, m := range d.Models {
			if !slices.Contains(names, m) {
				names = append(names, m)
			}
		}
	}
	return names
}

// Kinds lists every registered kind, family by family.
func Kinds() []string {
	var ks []string
	for _, d := range All() {
		ks = append(ks, d.Kinds...)
	}
	return ks
}

// TargetNames lists every registered family's target names, each once.
func TargetNames() []string {
	var ts []string
	for _, d := range All() {
		for _, t := range d.Targets {
			if !slices.Contains(ts, t.Name) {
				ts = append(ts, t.Name)
			}
		}
	}
	return ts
}

// Target returns the family's target called name, or false.
func (d *Descriptor) Target(name string) (Target, bool) {
	for _, t := range d.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

// MutantNamed returns the family's mutant called name, or nil.
func (d *Descriptor) MutantNamed(name string) *Mutant {
	for i := range d.Mutants {
		if d.Mutants[i].Name == name {
			return &d.Mutants[i]
		}
	}
	return nil
}

// Flagged returns the families that take the flag, for a message that
// says which family a flag belongs to; none when no family takes it.
func Flagged(name string) []*Descriptor {
	var out []*Descriptor
	for _, d := range All() {
		for _, f := range d.Flags {
			if f.Name == name {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// Flags lists every registered family's flags, each name once (the first
// family's declaration of it, in registration order), its usage joining
// every family's own where they differ: a flag two families read means
// what each says. It goes with every verb any family gives it.
func Flags() []Flag {
	var out []Flag
	at := map[string]int{}
	for _, d := range All() {
		for _, f := range d.Flags {
			i, ok := at[f.Name]
			if !ok {
				at[f.Name] = len(out)
				out = append(out, f)
				continue
			}
			if f.Usage != "" && !strings.Contains(out[i].Usage, f.Usage) {
				out[i].Usage += "; " + f.Usage
			}
			out[i].Verbs |= f.Verbs
		}
	}
	return out
}

// FamilyKinds lists each registered family's first (default) kind: one
// name per family.
func FamilyKinds() []string {
	var ks []string
	for _, d := range All() {
		ks = append(ks, d.Kinds[0])
	}
	return ks
}

// KindList says the registered kinds for a message: "semaphore, mutex or
// db-semaphore".
func KindList() string { return orList(Kinds()) }

func orList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Quote quotes s for a POSIX shell.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ReplaceMutant applies a replay's --mutant to a plan's mutant: none keeps
// it, "reference" clears it, a name the family knows (known) replaces it;
// unknown is the message for a name it does not know (with a %q).
func ReplaceMutant(planMutant *string, mutant string, known bool, unknown string) error {
	switch {
	case mutant == "":
	case mutant == "reference":
		*planMutant = ""
	case !known:
		return fmt.Errorf("--mutant: "+unknown, mutant)
	default:
		*planMutant = mutant
	}
	return nil
}

// A Header is what every family's plan file says of itself: its kind
// (which family reads it), and how it was judged when it was found ("strict"
// or "" for the model, the properties that counted, none for all), so that a
// replay judges it the same way.
type Header struct {
	Kind       string   `json:"kind"`
	Model      string   `json:"model"`
	Properties []string `json:"properties"`
}

// ReadHeader reads a plan file's header; a file that cannot be read, or is
// not a JSON object, gives the zero Header (the family's reader then says
// what is wrong).
func ReadHeader(path string) Header {
	var h Header
	data, err := os.ReadFile(path)
	if err == nil {
		json.Unmarshal(data, &h)
	}
	return h
}
