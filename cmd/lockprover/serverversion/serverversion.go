// Package serverversion is --server-version as every family's descriptor
// declares and reads it: the flag, each family saying only what differs
// (its servers, where the flag applies); the version a real target's
// private servers run (adapters/servers/versions), and the making of what
// that version needs (a Debian release's root, lockprover's build of a
// binary), with what cannot be had refused as bad input (exit 2) saying
// how to get it.
package serverversion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/family"
)

// Flag is --server-version as a family declares it, going with verbs:
// usage names the family's kinds, says where the flag applies and lists
// the versions it takes (Choices words them). Help shows Summary, which
// every family's declaration starts with; usage is the family's details,
// in docs/cli.md.
func Flag(verbs family.Verbs, usage string) family.Flag {
	return family.Flag{Name: "server-version", Arg: "VERSION", Real: true, Verbs: verbs, Usage: Summary + "\n; " + usage}
}

// Summary is what help says of --server-version, for every family.
const Summary = "the version of the servers a run starts (amqp-locks: or the simulator behaves as); lockprover servers lists them"

// Others says where a server's versions other than the machine's own come
// from, as every family's usage of the flag says it.
const Others = "the others run from a Debian root lockprover makes once, some minutes: lockprover servers"

// Default is the version of server a private server runs without
// --server-version: the machine's own.
func Default(server string) versions.Version {
	v, _ := versions.Lookup(server, "")
	return v
}

// Choices lists the versions a target that runs servers takes (its own
// first, then any other it also runs), with its default, the machine's
// package own, and where the others come from: "15, 17, 18 (default: 15,
// the machine's postgresql; the others run from ...)".
func Choices(own string, servers ...string) string {
	return strings.Join(versions.Choices(servers...), ", ") +
		" (default: " + Default(servers[0]).Name + ", the machine's " + own + "; " + Others + ")"
}

// PrivateWhere says where a run's plans run on a private server of the
// run's own (server names it: "MariaDB"), with the version and, where it
// has one, its Debian root when --server-version named it.
func PrivateWhere(s family.Settings, server string, v versions.Version) string {
	where := "a private " + server + Named(s, v) + " of the run's own"
	if s.Flag("server-version") != "" && v.Rooted() {
		where += " (Debian " + v.Release + "'s " + v.Package + " " + v.Debian + ")"
	}
	return where
}

// Named is " 18" when --server-version named v, "" without it (what a
// run without the flag said before it).
func Named(s family.Settings, v versions.Version) string {
	if s.Flag("server-version") == "" {
		return ""
	}
	return " " + v.Name
}

// Parse reads s's --server-version for a target that runs servers (its
// own first, then any other it also runs: redis, then valkey): "" is the
// first's default; an unknown value is a *family.UsageError listing every
// version the target takes.
func Parse(s family.Settings, servers ...string) (versions.Version, error) {
	v, err := versions.Parse(s.Flag("server-version"), servers...)
	if err != nil {
		return v, family.Usagef("--server-version: %v", err)
	}
	return v, nil
}

// Have makes v's root where v runs from one and it is not made yet (some
// minutes, once per machine, its steps told to log, which may be nil), or
// finds lockprover's build of it: a version that cannot be had here is a
// *family.UsageError saying what is missing and how to get it. The
// machine's own version needs nothing.
func Have(ctx context.Context, v versions.Version, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	var err error
	switch {
	case v.Rooted():
		_, err = v.Root(ctx, log)
	case v.Built():
		_, err = v.Binary()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, debroot.ErrUnavailable):
		return family.Usagef("--server-version: %s cannot be had here: %v", v, err)
	}
	return fmt.Errorf("--server-version: %s: %w", v, err)
}
