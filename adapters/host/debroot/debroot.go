// Package debroot makes, caches and runs Debian release roots.
//
// lockprover must run servers (RabbitMQ, etcd, Redis, Valkey, PostgreSQL,
// MariaDB) at versions newer than the host's own Debian packages. No package
// of a newer release installs beside the host's libraries, so each release
// gets a root of its own, made once per machine with debootstrap and kept in
// ${XDG_CACHE_HOME:-$HOME/.cache}/lockprover/debian-<release>.
//
// Ensure returns such a root with the wanted packages installed, building it
// only when needed; Root.Command runs a program from it in private mount and
// PID namespaces, so that nothing (mounts, daemons, forked children) outlives
// the run, not even when the launching process is killed with SIGKILL.
//
// Everything here needs root (debootstrap, mount, chroot), except the fast
// path of Ensure that only reads a complete cached root.
package debroot

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"
)

// MarkerName is the file, at the top of a root, that says the root is
// complete. It is written last, before the root is renamed into place, so a
// root without it is half-made and is never used.
const MarkerName = ".debroot-complete.json"

// MountPoint is the directory inside every root onto which Command binds the
// run's own data directory.
const MountPoint = "/lockprover"

// DefaultMirror is the Debian mirror used unless LOCKPROVER_DEBIAN_MIRROR is set.
const DefaultMirror = "http://deb.debian.org/debian"

// ErrUnavailable is matched (errors.Is) by every error that says a root
// cannot be had on this machine as it is: no debootstrap, not root, the
// mirror not answering, a package or version the release does not have.
// A CLI should exit 2 on it: it is an environment's "no", not a bug.
var ErrUnavailable = errors.New("cannot be had here")

// UnavailableError says what is missing and how to get it.
type UnavailableError struct {
	What string // what is missing, e.g. `package "postgresql-18" in trixie`
	Fix  string // how to get it, or what exists instead
	Err  error  // the underlying error, if any
}

func (e *UnavailableError) Error() string {
	s := "debroot: " + e.What + " cannot be had"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Fix != "" {
		s += " (" + e.Fix + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the underlying error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Step is one timed step of a build, kept in the marker for the record.
type Step struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	LoadAvg string  `json:"loadavg"` // /proc/loadavg when the step ended
}

// Marker is the content of MarkerName: what the root is and what it holds.
type Marker struct {
	Release   string            `json:"release"`
	Mirror    string            `json:"mirror"`
	Built     time.Time         `json:"built"`
	Requested []string          `json:"requested"` // every package ever asked for, as asked ("name" or "name=version")
	Packages  map[string]string `json:"packages"`  // every installed package -> its dpkg version
	Steps     []Step            `json:"steps,omitempty"`
	SizeBytes int64             `json:"size_bytes,omitempty"` // disk use of the root when it was built
}

// Root is a complete Debian release root.
type Root struct {
	Release string // e.g. "trixie"
	Dir     string // absolute path of the root
	Marker  Marker
}

// Version returns the dpkg version of an installed package, from the marker.
func (r Root) Version(pkg string) (string, bool) {
	v, ok := r.Marker.Packages[pkg]
	return v, ok
}

// CacheBase returns the directory holding the cached roots:
// ${XDG_CACHE_HOME:-$HOME/.cache}/lockprover.
func CacheBase() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "lockprover"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("debroot: no cache directory: %w", err)
	}
	return filepath.Join(home, ".cache", "lockprover"), nil
}

// buildSpec is what a builder gets: make a complete root in Dir.
type buildSpec struct {
	Release  string
	Mirror   string
	Packages []string // everything to install, as asked
	Dir      string   // the temporary directory to fill (does not exist yet)
	From     string   // an existing complete root to start from, or ""
	BuildLog io.Writer
	Log      io.Writer
}

// Hooks replaced by the tests: preflight checks the machine and the mirror
// before minutes are spent; build fills spec.Dir and returns the timed steps.
var (
	preflight = realPreflight
	build     = realBuild
)

var (
	releaseRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	packageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+:~-]+)?$`)
)

// Ensure returns the cached root of a Debian release (e.g. "trixie", "sid")
// holding packages, building or extending it when needed. A package is
// "name" or "name=version" (an exact dpkg version). Progress lines go to log
// (nil for none); the full output of debootstrap and apt goes to
// <cache>/debian-<release>.build.log.
//
// A complete root that already has the packages is returned at once. Else
// the root is made in a temporary directory beside the cache directory (a
// copy of the existing root when packages are added), the marker is written
// last, and the directory is renamed into place, so a half-made root is never
// seen. Callers for the same release serialise on an flock of
// <cache>/debian-<release>.lock: the second waits, then finds the root ready.
func Ensure(ctx context.Context, release string, packages []string, log io.Writer) (Root, error) {
	if log == nil {
		log = io.Discard
	}
	if !releaseRE.MatchString(release) {
		return Root{}, fmt.Errorf("debroot: bad release name %q", release)
	}
	for _, p := range packages {
		if !packageRE.MatchString(p) {
			return Root{}, fmt.Errorf("debroot: bad package %q (want name or name=version)", p)
		}
	}
	base, err := CacheBase()
	if err != nil {
		return Root{}, err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return Root{}, fmt.Errorf("debroot: %w", err)
	}
	dir := filepath.Join(base, "debian-"+release)

	unlock, err := lockFile(ctx, dir+".lock", log)
	if err != nil {
		return Root{}, err
	}
	defer unlock()

	m, err := ReadMarker(dir)
	complete := err == nil
	if complete && m.Has(packages) {
		// Old roots kept while servers ran from them go once unused.
		cleanLeftovers(base, release, log)
		return Root{Release: release, Dir: dir, Marker: m}, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(log, "debroot: %s is not a complete root (%v): rebuilding it\n", dir, err)
	}

	// We hold the lock, so any temporary directory left beside the root
	// is a dead build: remove it. Old roots go only when no process has
	// its root inside them.
	cleanLeftovers(base, release, log)

	mirror := os.Getenv("LOCKPROVER_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = DefaultMirror
	}
	want := packages
	from := ""
	if complete {
		want = union(m.Requested, packages)
		from = dir
	}
	if err := preflight(ctx, release, mirror, want, log); err != nil {
		return Root{}, err
	}

	nm, err := buildRoot(ctx, buildSpec{Release: release, Mirror: mirror, Packages: want, From: from, Log: log}, dir, packages)
	if err != nil {
		return Root{}, err
	}
	fmt.Fprintf(log, "debroot: %s ready (%.0f MB)\n", dir, float64(nm.SizeBytes)/1e6)
	return Root{Release: release, Dir: dir, Marker: nm}, nil
}

// buildRoot builds spec's root in a temporary directory beside dir, checks
// that it holds packages, writes its marker and swaps it into place at
// dir; on any error the temporary directory goes, and dir is untouched.
// The caller holds dir's lock.
func buildRoot(ctx context.Context, spec buildSpec, dir string, packages []string) (Marker, error) {
	spec.Dir = fmt.Sprintf("%s.tmp-%d-%d", dir, os.Getpid(), time.Now().UnixNano())
	blog, err := os.Create(dir + ".build.log")
	if err != nil {
		return Marker{}, fmt.Errorf("debroot: %w", err)
	}
	defer blog.Close()
	spec.BuildLog = blog
	fmt.Fprintf(spec.Log, "debroot: building %s in %s (packages: %s)\n", dir, spec.Dir, strings.Join(spec.Packages, " "))
	nm, err := completeRoot(ctx, spec, packages)
	if err == nil {
		err = swapInto(spec.Dir, dir, spec.Log)
	}
	if err != nil {
		removeTree(spec.Dir)
		return Marker{}, err
	}
	return nm, nil
}

// completeRoot builds spec.Dir and writes its marker, once it holds
// packages.
func completeRoot(ctx context.Context, spec buildSpec, packages []string) (Marker, error) {
	steps, err := build(ctx, spec)
	if err != nil {
		return Marker{}, err
	}
	nm := Marker{Release: spec.Release, Mirror: spec.Mirror, Built: time.Now().UTC(), Requested: spec.Packages, Steps: steps}
	if nm.Packages, err = InstalledPackages(spec.Dir); err != nil {
		return Marker{}, fmt.Errorf("debroot: reading the new root's dpkg status: %w", err)
	}
	if !nm.Has(packages) {
		return Marker{}, fmt.Errorf("debroot: build of %s ended without all of %v installed", spec.Release, packages)
	}
	nm.SizeBytes = diskUsage(spec.Dir)
	return nm, writeMarker(spec.Dir, nm)
}

// Open returns the cached root of a release if it is complete, without
// building anything and without taking the lock.
func Open(release string) (Root, error) {
	base, err := CacheBase()
	if err != nil {
		return Root{}, err
	}
	dir := filepath.Join(base, "debian-"+release)
	m, err := ReadMarker(dir)
	if err != nil {
		return Root{}, fmt.Errorf("debroot: no complete root for %s in %s (Ensure builds it): %w", release, dir, err)
	}
	return Root{Release: release, Dir: dir, Marker: m}, nil
}

// Has reports whether the marker satisfies every package as asked: a name
// that was asked for before, or is installed; a name=version installed at
// exactly that version.
func (m Marker) Has(packages []string) bool {
	for _, p := range packages {
		name, ver, pinned := strings.Cut(p, "=")
		got, ok := m.Packages[name]
		switch {
		case pinned && (!ok || got != ver):
			return false
		case !pinned && !ok && !contains(m.Requested, p):
			return false
		}
	}
	return true
}

// ReadMarker reads and checks the marker of a root directory. An absent
// marker gives an error matching os.ErrNotExist.
func ReadMarker(dir string) (Marker, error) {
	var m Marker
	b, err := os.ReadFile(filepath.Join(dir, MarkerName))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("debroot: bad marker in %s: %w", dir, err)
	}
	if len(m.Packages) == 0 {
		return m, fmt.Errorf("debroot: marker in %s lists no packages", dir)
	}
	return m, nil
}

// writeMarker writes the marker through a temporary file, synced, then renamed.
func writeMarker(dir string, m Marker) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(dir, MarkerName)
	f, err := os.Create(p + ".tmp")
	if err != nil {
		return fmt.Errorf("debroot: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(p+".tmp", p)
	}
	if err != nil {
		return fmt.Errorf("debroot: writing marker: %w", err)
	}
	return nil
}

// InstalledPackages parses ROOT/var/lib/dpkg/status and returns every
// package whose status is "install ok installed", with its version.
func InstalledPackages(root string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	var name, version, status string
	flush := func() {
		if name != "" && status == "install ok installed" {
			out[name] = version
		}
		name, version, status = "", "", ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "Package: "):
			name = strings.TrimSpace(line[len("Package: "):])
		case strings.HasPrefix(line, "Version: "):
			version = strings.TrimSpace(line[len("Version: "):])
		case strings.HasPrefix(line, "Status: "):
			status = strings.TrimSpace(line[len("Status: "):])
		}
	}
	flush()
	return out, sc.Err()
}

// lockFile takes an exclusive flock on path, waiting (and saying so once)
// while another process holds it, until ctx ends.
func lockFile(ctx context.Context, path string, log io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("debroot: lock: %w", err)
	}
	said := false
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("debroot: flock %s: %w", path, err)
		}
		if !said {
			fmt.Fprintf(log, "debroot: waiting for %s (another process is building this root)\n", path)
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("debroot: waiting for %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// swapInto renames the new root tmp to dir. An existing root is first
// renamed aside (.old-*) and removed only if no process still runs in it.
func swapInto(tmp, dir string, log io.Writer) error {
	old := ""
	if _, err := os.Lstat(dir); err == nil {
		old = fmt.Sprintf("%s.old-%d", dir, time.Now().UnixNano())
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("debroot: moving the old root aside: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return fmt.Errorf("debroot: renaming the new root into place: %w", err)
	}
	if old != "" {
		if err := removeUnused(old); err != nil {
			fmt.Fprintf(log, "debroot: kept %s: %v (a later Ensure removes it once unused)\n", old, err)
		}
	}
	return nil
}

// cleanLeftovers removes the dead builds (.tmp-*) and unused old roots
// (.old-*) of a release. Call it only with the release's lock held.
func cleanLeftovers(base, release string, log io.Writer) {
	for _, pat := range []string{".tmp-*", ".old-*"} {
		ms, _ := filepath.Glob(filepath.Join(base, "debian-"+release+pat))
		for _, p := range ms {
			if err := removeUnused(p); err != nil {
				fmt.Fprintf(log, "debroot: left %s: %v\n", p, err)
			} else {
				fmt.Fprintf(log, "debroot: removed leftover %s\n", p)
			}
		}
	}
	// A directory without a marker in the root's own place is half-made.
	dir := filepath.Join(base, "debian-"+release)
	if _, err := os.Lstat(dir); err == nil {
		if _, err := ReadMarker(dir); err != nil {
			old := fmt.Sprintf("%s.old-%d", dir, time.Now().UnixNano())
			if os.Rename(dir, old) == nil {
				if err := removeUnused(old); err != nil {
					fmt.Fprintf(log, "debroot: left %s: %v\n", old, err)
				}
			}
		}
	}
}

// removeUnused removes a tree unless a process runs chrooted inside it or
// something is mounted under it (in this mount namespace).
func removeUnused(dir string) error {
	if pids := processesRootedIn(dir); len(pids) > 0 {
		return fmt.Errorf("still in use by pids %v", pids)
	}
	return removeTree(dir)
}

// removeTree removes a tree after checking that nothing is mounted under it
// (a bind of /dev there must never be walked into).
func removeTree(dir string) error {
	if mps := mountsUnder(dir); len(mps) > 0 {
		return fmt.Errorf("debroot: not removing %s: mounted under it: %v", dir, mps)
	}
	return os.RemoveAll(dir)
}

// mountsUnder lists the mount points at or below dir in this process's mount namespace.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// processesRootedIn lists the pids whose root directory (/proc/PID/root) is
// dir or below it: the servers still running from an old root.
func processesRootedIn(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		l, err := os.Readlink(filepath.Join("/proc", e.Name(), "root"))
		if err != nil {
			continue
		}
		l = strings.TrimSuffix(l, " (deleted)")
		if l == dir || strings.HasPrefix(l, dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// diskUsage adds up the allocated blocks of the regular files under dir
// (hard links counted once), like du -s.
func diskUsage(dir string) int64 {
	var n int64
	seen := map[uint64]bool{}
	var dev uint64
	if st, err := os.Lstat(dir); err == nil {
		dev = st.Sys().(*syscall.Stat_t).Dev
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if d.IsDir() && st.Dev != dev {
			return filepath.SkipDir
		}
		if st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		n += st.Blocks * 512
		return nil
	})
	return n
}

// union merges two package lists; a later entry replaces an earlier one of
// the same name (so "pkg=2" after "pkg=1" keeps only "pkg=2").
func union(a, b []string) []string {
	byName := map[string]string{}
	for _, s := range append(append([]string{}, a...), b...) {
		name, _, _ := strings.Cut(s, "=")
		byName[name] = s
	}
	out := make([]string, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
