// Package versions is the catalogue of server versions lockprover runs
// its real targets on, and where each comes from: the machine's own
// Debian package, a binary lockprover builds once (Consul), or a root of a
// newer Debian release that lockprover makes once per machine with
// debootstrap and caches (adapters/host/debroot). One root per release holds
// every server of that release, so a machine pays for each release once.
//
// A target takes a version by name (--server-version): Lookup finds it,
// Root makes its release's root (or finds it made), and Command runs one
// of its programs, from the root or from the machine, alike.
package versions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/adapters/host/debroot"
)

// A Version is one version of one server.
type Version struct {
	// Server is what runs: rabbitmq, etcd, redis, valkey, postgresql,
	// mariadb, consul.
	Server string
	// Name is how a command line names it: "4.3.6", "3.5.30", "18".
	Name string
	// Release is the Debian release whose root holds it; "" for the
	// machine's own package (or, for Consul, a binary lockprover builds).
	Release string
	// Package is its Debian package, and Debian the package's exact
	// version in Release (a root must hold that one; "" for the
	// machine's own). Both "" for a version lockprover builds.
	Package, Debian string
	// Build, for a version no Debian package has (Consul), is the
	// command that builds it into lockprover's cache, once per machine
	// (".ci/consul 1.16.3"): Binary says where. "" for the others.
	Build string
	// Default says a target without --server-version runs this one.
	Default bool
}

// ErrUnknown is matched by the error of a version the catalogue does not
// hold.
var ErrUnknown = errors.New("unknown server version")

// catalogue is every version, oldest first for each server. The
// machine's own (Release "") are Debian 12's, whatever point release the
// machine has; trixie's and sid's are the exact packages their roots pin.
// A server's newest is the last of its rows.
var catalogue = []Version{
	{Server: "rabbitmq", Name: "3.10.8", Package: "rabbitmq-server", Default: true},
	{Server: "rabbitmq", Name: "4.0.5", Release: "trixie", Package: "rabbitmq-server", Debian: "4.0.5-6+deb13u2"},
	{Server: "rabbitmq", Name: "4.3.6", Release: "sid", Package: "rabbitmq-server", Debian: "4.3.6-1"},

	{Server: "etcd", Name: "3.4.23", Package: "etcd-server", Default: true},
	{Server: "etcd", Name: "3.5.16", Release: "trixie", Package: "etcd-server", Debian: "3.5.16-4"},
	{Server: "etcd", Name: "3.5.30", Release: "sid", Package: "etcd-server", Debian: "3.5.30-2"},

	{Server: "redis", Name: "7.0.15", Package: "redis-server", Default: true},
	{Server: "redis", Name: "8.0.2", Release: "trixie", Package: "redis-server", Debian: "5:8.0.2-3+deb13u3"},
	{Server: "redis", Name: "8.0.6", Release: "sid", Package: "redis-server", Debian: "5:8.0.6-3"},
	{Server: "valkey", Name: "8.1.1", Release: "trixie", Package: "valkey-server", Debian: "8.1.1+dfsg1-3+deb13u3"},
	{Server: "valkey", Name: "9.1.2", Release: "sid", Package: "valkey-server", Debian: "9.1.2-1"},

	{Server: "postgresql", Name: "15", Package: "postgresql-15", Default: true},
	{Server: "postgresql", Name: "17", Release: "trixie", Package: "postgresql-17", Debian: "17.12-0+deb13u1"},
	{Server: "postgresql", Name: "18", Release: "sid", Package: "postgresql-18", Debian: "18.6-3"},

	{Server: "mariadb", Name: "10.11", Package: "mariadb-server", Default: true},
	{Server: "mariadb", Name: "11.8", Release: "trixie", Package: "mariadb-server", Debian: "1:11.8.9+ds-0+deb13u1"},

	// Consul has no Debian package: .ci/consul builds it from its Go
	// module. 1.16.3 is its last release under the MPL (1.17 on are
	// under the BUSL); 1.20.2 is what lockprover ran on before.
	{Server: "consul", Name: "1.16.3", Build: ".ci/consul 1.16.3", Default: true},
	{Server: "consul", Name: "1.20.2", Build: ".ci/consul 1.20.2"},
}

// companions are the packages a release's root holds beside its servers
// (their clients, for the tests and for readiness checks).
var companions = map[string][]string{
	"trixie": {"etcd-client", "redis-tools", "valkey-tools", "mariadb-client"},
	"sid":    {"etcd-client", "redis-tools", "valkey-tools"},
}

// Servers are the servers the catalogue knows, in its order.
func Servers() []string {
	var out []string
	for _, v := range catalogue {
		if !slices.Contains(out, v.Server) {
			out = append(out, v.Server)
		}
	}
	return out
}

// Of is every version of server, oldest first.
func Of(server string) []Version {
	var out []Version
	for _, v := range catalogue {
		if v.Server == server {
			out = append(out, v)
		}
	}
	return out
}

// Names is the names of server's versions, oldest first.
func Names(server string) []string {
	var out []string
	for _, v := range Of(server) {
		out = append(out, v.Name)
	}
	return out
}

// Lookup finds server's version name; "" is its default (the machine's
// own). An unknown one is an error that lists the known ones.
func Lookup(server, name string) (Version, error) {
	vs := Of(server)
	if len(vs) == 0 {
		return Version{}, fmt.Errorf("%w: no server %q (known: %s)", ErrUnknown, server, strings.Join(Servers(), ", "))
	}
	for _, v := range vs {
		if v.Name == name || name == "" && v.Default {
			return v, nil
		}
	}
	return Version{}, fmt.Errorf("%w: %s %q (known: %s)", ErrUnknown, server, name, strings.Join(Names(server), ", "))
}

// Newest is server's newest version.
func Newest(server string) Version {
	vs := Of(server)
	return vs[len(vs)-1]
}

// Rooted says the version runs from a Debian release's root.
func (v Version) Rooted() bool { return v.Release != "" }

// Built says lockprover builds the version itself into its cache (Build
// says how; Binary says where).
func (v Version) Built() bool { return v.Build != "" }

// Binary is where the binary of a version lockprover builds lives:
// $XDG_CACHE_HOME/lockprover/<server>-v<name>/<server> (~/.cache by
// default), as Build puts it there. An error for a version that is not
// built; one matching debroot.ErrUnavailable, naming Build, when the
// binary is not there (yet).
func (v Version) Binary() (string, error) {
	if !v.Built() {
		return "", fmt.Errorf("versions: %s is not one lockprover builds", v)
	}
	p, err := v.binaryPath()
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", &debroot.UnavailableError{What: fmt.Sprintf("%s (no executable %s)", v, p),
			Fix: "build it once: " + v.Build}
	}
	return p, nil
}

// binaryPath is where Binary looks.
func (v Version) binaryPath() (string, error) {
	base, err := debroot.CacheBase()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, v.Server+"-v"+v.Name, v.Server), nil
}

// String is "rabbitmq 4.3.6".
func (v Version) String() string { return v.Server + " " + v.Name }

// packages is what a release's root holds: every server of the release,
// pinned, and their companions.
func packages(release string) []string {
	var out []string
	for _, v := range catalogue {
		if v.Release == release {
			p := v.Package
			if v.Debian != "" {
				p += "=" + v.Debian
			}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return append(out, companions[release]...)
}

// Root makes the version's root once per machine (every server of its
// release in it: some minutes the first time, with log hearing of each
// step) and returns it; a root made already is returned at once. An
// error that says what cannot be had matches debroot.ErrUnavailable.
func (v Version) Root(ctx context.Context, log io.Writer) (debroot.Root, error) {
	if !v.Rooted() {
		return debroot.Root{}, fmt.Errorf("versions: %s is the machine's own, with no root", v)
	}
	return debroot.Ensure(ctx, v.Release, packages(v.Release), log)
}

// Made says whether the version can run without making anything: the
// machine's own package installed, its root made already, or its binary
// built. (It reads only the cache and dpkg's status.)
func (v Version) Made() bool {
	if v.Built() {
		_, err := v.Binary()
		return err == nil
	}
	if !v.Rooted() {
		_, ok := v.Installed()
		return ok
	}
	r, err := debroot.Open(v.Release)
	return err == nil && r.Marker.Has(packages(v.Release))
}

// A Run is one program of a version: where its data lives as the program
// sees it, and how to start it.
type Run struct {
	Version Version
	// Data is the run's data directory on the machine; Inside is the
	// same directory as the program sees it (/lockprover under a root).
	Data, Inside string
	root         debroot.Root
	user, netns  string
	env          []string
}

// Prepare readies a run of v with data as its data directory, owned by
// user (a user of the root; "" for root), in network namespace netns
// ("" for the machine's), making the root first where v has one.
func (v Version) Prepare(ctx context.Context, data, user, netns string, env []string, log io.Writer) (*Run, error) {
	r := &Run{Version: v, Data: data, Inside: data, user: user, netns: netns, env: env}
	if !v.Rooted() {
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		return r, nil
	}
	root, err := v.Root(ctx, log)
	if err != nil {
		return nil, err
	}
	if err := root.MkdirData(data, user); err != nil {
		return nil, err
	}
	r.root, r.Inside = root, debroot.MountPoint
	return r, nil
}

// In is path (under the run's data directory on the machine) as the
// program sees it.
func (r *Run) In(path string) string {
	rel, err := filepath.Rel(r.Data, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return path
	}
	return filepath.Join(r.Inside, rel)
}

// Command is argv as a command of the run: from the root (in private
// namespaces, nothing outliving it) or from the machine (in netns, when
// set, as `ip netns exec`). argv[0] is a path the version's package
// installs (for a version lockprover builds, its Binary).
func (r *Run) Command(ctx context.Context, argv ...string) (*exec.Cmd, error) {
	if r.Version.Rooted() {
		return r.root.Command(ctx, debroot.RunOptions{Data: r.Data, User: r.user, NetNS: r.netns, Env: r.env}, argv...)
	}
	if r.netns != "" {
		argv = append([]string{"ip", "netns", "exec", r.netns}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), r.env...)
	return cmd, nil
}

// Launcher is the run's programs as proc.Proc.Command starts them: argv
// from bin and args, as Command makes it, living until the server is
// stopped (not bound to a context). Nil for a nil run: the machine's own
// program, started by proc.Proc itself.
func (r *Run) Launcher() func(bin string, args []string) (*exec.Cmd, error) {
	if r == nil {
		return nil
	}
	return func(bin string, args []string) (*exec.Cmd, error) {
		return r.Command(context.Background(), append([]string{bin}, args...)...)
	}
}

// Parse reads a --server-version value for a target that runs servers
// (its own first, then any it also runs: redis, then valkey): "8.0.6" is
// a version of the first, "valkey-9.1.2" a version of another, "" the
// first's default. What it cannot read is an error that lists every
// version the target takes.
func Parse(value string, servers ...string) (Version, error) {
	if len(servers) == 0 {
		return Version{}, errors.New("versions: Parse of no server")
	}
	server, name := servers[0], value
	for _, s := range servers[1:] {
		if n, ok := strings.CutPrefix(value, s+"-"); ok {
			server, name = s, n
		}
	}
	v, err := Lookup(server, name)
	if err != nil {
		return Version{}, fmt.Errorf("%w: %q (%s takes %s)", ErrUnknown, value, strings.Join(servers, " or "), strings.Join(Choices(servers...), ", "))
	}
	return v, nil
}

// Choices are the values Parse takes for servers, as a command line
// gives them.
func Choices(servers ...string) []string {
	var out []string
	for i, s := range servers {
		for _, n := range Names(s) {
			if i > 0 {
				n = s + "-" + n
			}
			out = append(out, n)
		}
	}
	return out
}

// Installed is the Debian version of the machine's own package of v
// (dpkg's status), for a version that is the machine's own.
func (v Version) Installed() (string, bool) {
	if v.Rooted() || v.Package == "" {
		return "", false
	}
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Status} ${Version}", v.Package).Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) < 4 || f[2] != "installed" {
		return "", false
	}
	return f[3], true
}
