package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/internal/prover"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
)

// exitInterrupted is the exit status of a command stopped by Ctrl-C (SIGINT)
// or SIGTERM, as shells report a process killed by SIGINT (128+2).
const exitInterrupted = 130

// newFlags makes a verb's flag set: errors go to stderr, and its help
// (writeHelp: the usage line, what the verb does, its flags under their
// headings) to whatever output parseFlags picks.
func newFlags(u verbHelp, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(u.verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { writeHelp(fs.Output(), u, fs) }
	madeFlags(fs, u)
	return fs
}

// parseFlags parses args with flags before, between and after the
// positional arguments (a "--" ends the flags), which it returns. -h,
// -help and --help print the verb's usage on stdout: ok false, code 0. A
// bad flag is named on stderr, with what is wrong with its value (a
// duration without its unit, a number that is none) and a pointer to the
// usage: ok false, code 2.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	help := fs.Usage
	fs.Usage = func() {} // the flag package calls it on every error
	out := fs.Output()
	fs.SetOutput(io.Discard) // and prints the error, which is said below
	defer func() { fs.Usage = help; fs.SetOutput(out) }()
	var bad error
	checkValues(fs, &bad)
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			help()
			return nil, exitOK, false
		}
		if err != nil {
			if bad != nil {
				err = bad
			}
			fmt.Fprintf(stderr, "%s: %v\n(lockprover help %s shows its flags)\n", fs.Name(), err, fs.Name())
			return nil, exitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, exitOK, true
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), exitOK, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// noArgs refuses positional arguments for a verb that takes none.
func noArgs(name string, pos []string, stderr io.Writer) bool {
	if len(pos) == 0 {
		return true
	}
	fmt.Fprintf(stderr, "%s: unexpected argument %q (it takes flags only; lockprover help %s)\n", name, pos[0], name)
	return false
}

// given reports whether the flag was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// checks collects what is wrong with a verb's flag values, each message
// naming its flag.
type checks []string

func (c *checks) add(bad bool, format string, args ...any) {
	if bad {
		*c = append(*c, fmt.Sprintf(format, args...))
	}
}

func (c *checks) positive(name string, v int) {
	c.add(v < 1, "--%s must be at least 1, not %d", name, v)
}

func (c *checks) nonNegative(name string, v int) {
	c.add(v < 0, "--%s must not be negative, not %d", name, v)
}

func (c *checks) duration(name string, d time.Duration, zeroOK bool) {
	switch {
	case d < 0:
		c.add(true, "--%s must not be negative, not %v", name, d)
	case d == 0 && !zeroOK:
		c.add(true, "--%s must be more than 0", name)
	}
}

func (c *checks) oneOf(name, v string, allowed ...string) {
	c.add(!known(v, allowed), "--%s must be %s, not %q", name, strings.Join(allowed, " or "), v)
}

// report prints every problem and says whether there was none.
func (c checks) report(verb string, stderr io.Writer) bool {
	for _, m := range c {
		fmt.Fprintf(stderr, "%s: %s\n", verb, m)
	}
	return len(c) == 0
}

// interrupts turns the first SIGINT or SIGTERM into the context's
// cancellation (the command stops, cleans up and exits 130), and a second
// into an exit at once. onFirst, if set, runs at the first (to kill child
// processes at once, say). stop ends the handling and, after an
// interrupt, says what the clean-up could not remove (prover.Leave).
func interrupts(stderr io.Writer, onFirst func()) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var interrupted atomic.Bool
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-ch:
		case <-done:
			return
		}
		fmt.Fprintln(stderr, "\ninterrupted: stopping and cleaning up (interrupt again to quit at once)")
		interrupted.Store(true)
		cancel()
		if onFirst != nil {
			onFirst()
		}
		select {
		case <-ch:
			fmt.Fprintln(stderr, "interrupted again: quitting without cleaning up")
			for _, what := range prover.LeftBehind() {
				fmt.Fprintf(stderr, "left behind: %s\n", what)
			}
			os.Exit(exitInterrupted)
		case <-done:
		}
	}()
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel()
			if interrupted.Load() {
				for _, what := range prover.LeftBehind() {
					fmt.Fprintf(stderr, "left behind: %s\n", what)
				}
			}
		})
	}
}

// redactingWriter hides the password of every URL written through it.
type redactingWriter struct{ w io.Writer }

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, rabbitmq.Redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(verbHelp{verb: "version", about: "Prints lockprover's module version, the VCS revision it was built from, and the Go version."}, stderr)
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("version", pos, stderr) {
		return exitUsage
	}
	fmt.Fprintln(stdout, versionLine())
	return exitOK
}

// versionLine is "lockprover VERSION, revision REV of TIME[ with local
// changes], GOVERSION".
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "lockprover (devel) (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	rev := "revision unknown (built without VCS information: go run, or -buildvcs=false)"
	if r := s["vcs.revision"]; r != "" {
		rev = "revision " + r
		if t := s["vcs.time"]; t != "" {
			rev += " of " + t
		}
		if s["vcs.modified"] == "true" {
			rev += " with local changes"
		}
	}
	return fmt.Sprintf("lockprover %s, %s, %s", v, rev, bi.GoVersion)
}

// interrupted says what a family's verb said when interrupted: its error,
// less the context's "context canceled" ("interrupted" when that is all).
func interrupted(err error) string {
	msg := strings.TrimSuffix(strings.TrimSuffix(err.Error(), context.Canceled.Error()), ": ")
	if msg == "" {
		return "interrupted"
	}
	return msg
}
