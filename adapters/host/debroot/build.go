package debroot

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

// realPreflight checks, in seconds, what a build needs, so that a build that
// cannot succeed fails before minutes are spent: root, debootstrap and its
// script for the release, a mirror that answers, and every package (at its
// exact version, when pinned) in the release's package index.
func realPreflight(ctx context.Context, release, mirror string, packages []string, log io.Writer) error {
	if geteuid() != 0 {
		return &UnavailableError{What: "building a Debian root as a non-root user",
			Fix: "debootstrap, mount and chroot need root: run as root (sudo)"}
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		if _, err2 := os.Stat(debootstrapPath); err2 != nil {
			return &UnavailableError{What: "debootstrap", Fix: "install it: apt-get install debootstrap"}
		}
	}
	scripts := "/usr/share/debootstrap/scripts"
	if d := os.Getenv("DEBOOTSTRAP_DIR"); d != "" {
		scripts = filepath.Join(d, "scripts")
	}
	if _, err := os.Stat(filepath.Join(scripts, release)); err != nil {
		return &UnavailableError{What: fmt.Sprintf("a debootstrap script for %q", release),
			Fix: "this debootstrap does not know the release; install a newer debootstrap (e.g. from backports)"}
	}
	if err := checkMirror(ctx, mirror, release); err != nil {
		return err
	}
	idx, err := fetchIndex(ctx, mirror, release, debArch())
	if err != nil {
		// apt-get will still say it, only later.
		fmt.Fprintf(log, "debroot: package index not checked before the build: %v\n", err)
		return nil
	}
	return idx.check(release, packages)
}

// Seams for the tests.
var (
	geteuid         = os.Geteuid
	debootstrapPath = "/usr/sbin/debootstrap" // where it is when /usr/sbin is not on PATH
	mirrorTimeout   = 8 * time.Second
)

// checkMirror asks the mirror for the release's Release file with a short
// timeout: a mirror that does not answer fails here in seconds.
func checkMirror(ctx context.Context, mirror, release string) error {
	url := strings.TrimSuffix(mirror, "/") + "/dists/" + release + "/Release"
	ctx, cancel := context.WithTimeout(ctx, mirrorTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return fmt.Errorf("debroot: bad mirror %q: %w", mirror, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &UnavailableError{What: "the Debian mirror " + mirror, Err: err,
			Fix: fmt.Sprintf("no answer to HEAD %s within %v; check the network, or set LOCKPROVER_DEBIAN_MIRROR to a mirror that answers", url, mirrorTimeout)}
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return &UnavailableError{What: fmt.Sprintf("release %q at %s", release, mirror),
			Fix: url + " is 404: check the release name (e.g. trixie, forky, sid)"}
	case resp.StatusCode != http.StatusOK:
		return &UnavailableError{What: "the Debian mirror " + mirror,
			Fix: fmt.Sprintf("HEAD %s answered %s", url, resp.Status)}
	}
	return nil
}

// debArch maps GOARCH to Debian's architecture name.
func debArch() string {
	switch runtime.GOARCH {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	case "ppc64le":
		return "ppc64el"
	}
	return runtime.GOARCH
}

// index is a release's package list: name -> versions, plus virtual names.
type index struct {
	versions map[string][]string
	provided map[string]bool
}

// fetchIndex downloads and parses dists/<release>/main/binary-<arch>/Packages.gz.
func fetchIndex(ctx context.Context, mirror, release, arch string) (*index, error) {
	url := fmt.Sprintf("%s/dists/%s/main/binary-%s/Packages.gz", strings.TrimSuffix(mirror, "/"), release, arch)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseIndex(zr)
}

// parseIndex reads a Packages file.
func parseIndex(r io.Reader) (*index, error) {
	idx := &index{versions: map[string][]string{}, provided: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Package: "):
			name = strings.TrimSpace(line[9:])
		case strings.HasPrefix(line, "Version: ") && name != "":
			idx.versions[name] = append(idx.versions[name], strings.TrimSpace(line[9:]))
		case strings.HasPrefix(line, "Provides: "):
			for _, p := range strings.Split(line[10:], ",") {
				if f := strings.Fields(p); len(f) > 0 {
					idx.provided[f[0]] = true
				}
			}
		}
	}
	return idx, sc.Err()
}

// check returns an UnavailableError naming every missing package or version,
// and what the release has instead.
func (idx *index) check(release string, packages []string) error {
	var missing, fixes []string
	for _, p := range packages {
		name, ver, pinned := strings.Cut(p, "=")
		vs, ok := idx.versions[name]
		switch {
		case !ok && idx.provided[name] && !pinned:
			// A virtual package: apt resolves it.
		case !ok:
			missing = append(missing, fmt.Sprintf("package %q", name))
			if alt := idx.similar(name); len(alt) > 0 {
				fixes = append(fixes, fmt.Sprintf("%s has %s", release, strings.Join(alt, ", ")))
			} else {
				fixes = append(fixes, fmt.Sprintf("%s has no %s", release, name))
			}
		case pinned && !contains(vs, ver):
			missing = append(missing, fmt.Sprintf("%s version %q", name, ver))
			fixes = append(fixes, fmt.Sprintf("%s has %s %s", release, name, strings.Join(vs, ", ")))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &UnavailableError{What: strings.Join(missing, ", ") + " in Debian " + release,
		Fix: strings.Join(fixes, "; ")}
}

// similar lists the release's packages named like name with other numbers
// (postgresql-18 -> postgresql-17), each with its versions.
func (idx *index) similar(name string) []string {
	pat := regexp.MustCompile(`[0-9]+`).ReplaceAllString(regexp.QuoteMeta(name), `[0-9]+`)
	re := regexp.MustCompile("^" + pat + "$")
	var out []string
	for n, vs := range idx.versions {
		if re.MatchString(n) {
			out = append(out, n+" "+strings.Join(vs, ", "))
		}
	}
	sort.Strings(out)
	return out
}

// realBuild makes a complete root (without its marker) in spec.Dir:
// debootstrap (or a copy of spec.From), policy-rc.d, /etc/hosts, the mount
// point, apt-get update and install. Every child runs in private mount and
// PID namespaces, so a killed build leaves no mount and no process behind.
func realBuild(ctx context.Context, spec buildSpec) ([]Step, error) {
	b := &builder{ctx: ctx, spec: spec}
	if err := b.base(); err != nil {
		return b.steps, err
	}
	if err := b.prepare(); err != nil {
		return b.steps, err
	}
	return b.steps, b.install()
}

// A builder runs the steps of one build, timing each.
type builder struct {
	ctx   context.Context
	spec  buildSpec
	steps []Step
}

// timed runs f as the step name, and records how long it took.
func (b *builder) timed(name string, f func() error) error {
	t0 := time.Now()
	err := f()
	s := Step{Name: name, Seconds: time.Since(t0).Seconds(), LoadAvg: loadAvg()}
	b.steps = append(b.steps, s)
	fmt.Fprintf(b.spec.Log, "debroot: %s: %.1f s (load %s)\n", name, s.Seconds, s.LoadAvg)
	return err
}

// run runs argv chrooted in the new root with o, or on the host when o is
// nil; its output goes to the build log, and its last lines into the
// error.
func (b *builder) run(argv []string, o *RunOptions) error {
	fmt.Fprintf(b.spec.BuildLog, "\n$ %s\n", strings.Join(argv, " "))
	tail := &tailBuffer{max: 40}
	var cmd *exec.Cmd
	var err error
	if o == nil {
		cmd = hostCommand(b.ctx, argv...)
	} else if cmd, err = command(b.ctx, b.spec.Dir, *o, argv...); err != nil {
		return err
	}
	cmd.Stdout = io.MultiWriter(b.spec.BuildLog, tail)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return &stepError{argv: argv, err: err, tail: tail.String()}
	}
	return nil
}

// base makes the new root's base system: debootstrap, or a copy of the
// root it adds packages to.
func (b *builder) base() error {
	spec := b.spec
	if spec.From == "" {
		err := b.timed("debootstrap", func() error {
			return b.run([]string{"debootstrap", "--variant=minbase", spec.Release, spec.Dir, spec.Mirror}, nil)
		})
		if err != nil {
			return fmt.Errorf("debroot: debootstrap %s: %w (full output: %s)", spec.Release, err, logName(spec.BuildLog))
		}
		return nil
	}
	err := b.timed("copy", func() error {
		return b.run([]string{"cp", "-a", "--reflink=auto", spec.From, spec.Dir}, nil)
	})
	if err != nil {
		return fmt.Errorf("debroot: copying %s: %w", spec.From, err)
	}
	// The copy is not complete until its own marker is written.
	os.Remove(filepath.Join(spec.Dir, MarkerName))
	return nil
}

// prepare writes what every root needs before apt runs: no service
// starts at install, localhost resolves, and the run's mount point.
func (b *builder) prepare() error {
	files := map[string]string{
		"usr/sbin/policy-rc.d": "#!/bin/sh\n# debroot: no service starts when a package is installed.\nexit 101\n",
		"etc/hosts":            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(b.spec.Dir, name), []byte(text), 0o755); err != nil {
			return fmt.Errorf("debroot: %w", err)
		}
	}
	os.Chmod(filepath.Join(b.spec.Dir, "etc/hosts"), 0o644)
	if err := os.MkdirAll(filepath.Join(b.spec.Dir, MountPoint), 0o755); err != nil {
		return fmt.Errorf("debroot: %w", err)
	}
	return nil
}

// install runs apt in the new root: the index, then the packages (a
// package or version apt does not have is an UnavailableError).
func (b *builder) install() error {
	spec := b.spec
	// apt alone may look names up: the mirror's
	apt := &RunOptions{Writable: true, Env: []string{"DEBIAN_FRONTEND=noninteractive"}, resolve: true}
	err := b.timed("apt-get update", func() error {
		return b.run([]string{"apt-get", "-o", "Acquire::Check-Valid-Until=false", "update"}, apt)
	})
	if err != nil {
		return fmt.Errorf("debroot: apt-get update in %s: %w", spec.Release, err)
	}
	args := append([]string{"apt-get", "-o", "Acquire::Check-Valid-Until=false", "install", "-y", "--no-install-recommends"}, spec.Packages...)
	if err = b.timed("apt-get install", func() error { return b.run(args, apt) }); err != nil {
		var se *stepError
		if errors.As(err, &se) {
			if u := aptUnavailable(spec.Release, se.tail); u != nil {
				return u
			}
		}
		return fmt.Errorf("debroot: apt-get install in %s: %w", spec.Release, err)
	}
	b.run([]string{"apt-get", "clean"}, apt)
	return nil
}

// aptUnavailable turns apt's "no such package / version" lines into an UnavailableError.
func aptUnavailable(release, out string) error {
	var what []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "Unable to locate package") ||
			(strings.Contains(line, "Version '") && strings.Contains(line, "was not found")) ||
			strings.Contains(line, "has no installation candidate") {
			what = append(what, strings.TrimSpace(strings.TrimPrefix(line, "E: ")))
		}
	}
	if len(what) == 0 {
		return nil
	}
	return &UnavailableError{What: "a package in Debian " + release, Err: errors.New(strings.Join(what, "; ")),
		Fix: "apt-cache policy NAME inside the root lists what it has"}
}

// stepError is a failed child process, with the end of its output.
type stepError struct {
	argv []string
	err  error
	tail string
}

func (e *stepError) Error() string {
	return fmt.Sprintf("%s: %v; last output:\n%s", e.argv[0], e.err, e.tail)
}

func (e *stepError) Unwrap() error { return e.err }

// tailBuffer keeps the last max lines written to it.
type tailBuffer struct {
	max   int
	lines []string
	part  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		t.lines = append(t.lines, string(t.part[:i]))
		t.part = t.part[i+1:]
		if len(t.lines) > t.max {
			t.lines = t.lines[len(t.lines)-t.max:]
		}
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	return strings.Join(append(t.lines, string(t.part)), "\n")
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func logName(w io.Writer) string {
	if f, ok := w.(*os.File); ok {
		return f.Name()
	}
	return "the build log"
}
