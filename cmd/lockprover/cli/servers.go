package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// runServers is `lockprover servers`: the server versions real targets
// run on (--server-version), where each comes from, and whether it is
// made here; --make makes the roots of the versions it names.
func runServers(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(verbHelp{verb: "servers", sections: []section{{title: "Flags", flags: "[--make SERVER-VERSION,...|all]"}}, about: `Lists the versions of every server real targets run on (a family's
--server-version names one): the machine's own package, or a Debian
release's root that lockprover makes once per machine with debootstrap
(root, debootstrap and the Debian mirror needed; some minutes each, nothing
after) and keeps in $XDG_CACHE_HOME/lockprover (default ~/.cache). --make
makes the roots of the versions named (rabbitmq-4.3.6,valkey-9.1.2), or of
every version (all), as the first run that needs one would. A version
that cannot be had (no debootstrap, the mirror not answering, a package
the release no longer has) is named with what is missing, exit 2.`}, stderr)
	mk := fs.String("make", "", "comma-separated SERVER-VERSION to make the roots of (rabbitmq-4.3.6, valkey-9.1.2, ...), or all")
	pos, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if !noArgs("servers", pos, stderr) {
		return exitUsage
	}
	var want []versions.Version
	for _, name := range strings.Split(*mk, ",") {
		switch name = strings.TrimSpace(name); {
		case name == "":
		case name == "all":
			for _, s := range versions.Servers() {
				want = append(want, versions.Of(s)...)
			}
		default:
			server, version, _ := strings.Cut(name, "-")
			v, err := versions.Lookup(server, version)
			if err != nil {
				fmt.Fprintf(stderr, "servers: --make: %v\n", err)
				return exitUsage
			}
			want = append(want, v)
		}
	}
	ctx, stop := interrupts(stderr, nil)
	defer stop()
	for _, v := range want {
		if !v.Rooted() {
			continue
		}
		if _, err := v.Root(ctx, stderr); err != nil {
			fmt.Fprintf(stderr, "servers: %s: %v\n", v, err)
			if errors.Is(err, context.Canceled) {
				return exitInterrupted
			}
			return exitUsage // what cannot be had (debroot.ErrUnavailable), named
		}
	}
	listServers(stdout)
	return exitOK
}

// listServers prints the catalogue, a version a line.
func listServers(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "server\tversion\tfrom\tmade here")
	for _, s := range versions.Servers() {
		for _, v := range versions.Of(s) {
			from := "the machine's package " + v.Package
			if d, ok := v.Installed(); ok {
				from += " " + d
			}
			if v.Rooted() {
				from = fmt.Sprintf("Debian %s's %s %s", v.Release, v.Package, v.Debian)
			}
			if v.Built() {
				from = "lockprover's build (" + v.Build + ")"
			}
			made := "yes"
			switch {
			case !v.Made() && v.Built():
				made = "no (" + v.Build + ")"
			case !v.Made() && v.Rooted():
				made = "no (made at first use, or with --make)"
			case !v.Made():
				made = "no (apt-get install " + v.Package + ")"
			}
			name := v.Name
			if v.Default {
				name += " (default)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s, name, from, made)
		}
	}
	tw.Flush()
}
