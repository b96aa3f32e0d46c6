package debroot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeBuilder replaces the network-bound hooks: preflight passes, and build
// writes a dpkg status file listing the packages (version "1.0" unless
// pinned), after an optional delay. It counts its builds.
type fakeBuilder struct {
	builds atomic.Int32
	delay  time.Duration
	fail   error
	specs  []buildSpec
	mu     sync.Mutex
}

func (f *fakeBuilder) install(t *testing.T) {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	oldP, oldB := preflight, build
	preflight = func(context.Context, string, string, []string, io.Writer) error { return nil }
	build = f.build
	t.Cleanup(func() { preflight, build = oldP, oldB })
}

func (f *fakeBuilder) build(ctx context.Context, spec buildSpec) ([]Step, error) {
	f.builds.Add(1)
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	f.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(spec.Dir, "var/lib/dpkg"), 0o755); err != nil {
		return nil, err
	}
	time.Sleep(f.delay)
	if f.fail != nil {
		return nil, f.fail
	}
	var b strings.Builder
	for _, p := range spec.Packages {
		name, ver, ok := strings.Cut(p, "=")
		if !ok {
			ver = "1.0"
		}
		fmt.Fprintf(&b, "Package: %s\nStatus: install ok installed\nVersion: %s\n\n", name, ver)
	}
	// A package removed but not purged must not count as installed.
	b.WriteString("Package: gone\nStatus: deinstall ok config-files\nVersion: 9\n\n")
	return []Step{{Name: "fake", Seconds: f.delay.Seconds()}}, os.WriteFile(filepath.Join(spec.Dir, "var/lib/dpkg/status"), []byte(b.String()), 0o644)
}

func TestEnsureBuildsOnceThenUsesCache(t *testing.T) {
	f := &fakeBuilder{}
	f.install(t)
	ctx := context.Background()
	r, err := Ensure(ctx, "trixie", []string{"redis-server", "etcd-server=3.5.16-4"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := CacheBase()
	if r.Dir != filepath.Join(base, "debian-trixie") {
		t.Fatalf("root at %s", r.Dir)
	}
	if v, ok := r.Version("etcd-server"); !ok || v != "3.5.16-4" {
		t.Fatalf("Version(etcd-server) = %q %v", v, ok)
	}
	if _, ok := r.Version("gone"); ok {
		t.Fatal("a deinstalled package counts as installed")
	}
	r2, err := Ensure(ctx, "trixie", []string{"redis-server"}, nil)
	if err != nil || r2.Dir != r.Dir {
		t.Fatal(r2, err)
	}
	if n := f.builds.Load(); n != 1 {
		t.Fatalf("%d builds, want 1", n)
	}
	// No temporary directory is left beside the root.
	left, _ := filepath.Glob(filepath.Join(base, "debian-trixie.*-*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if o, err := Open("trixie"); err != nil || o.Dir != r.Dir {
		t.Fatal("Open:", o, err)
	}
}

func TestHalfMadeRootIsRebuilt(t *testing.T) {
	f := &fakeBuilder{}
	f.install(t)
	base, _ := CacheBase()
	dir := filepath.Join(base, "debian-sid")
	// A root without its marker, a dead build, and a marker that lists nothing.
	os.MkdirAll(filepath.Join(dir, "etc"), 0o755)
	os.MkdirAll(dir+".tmp-1-2/var", 0o755)
	if _, err := Open("sid"); err == nil {
		t.Fatal("Open accepted a root without a marker")
	}
	os.WriteFile(filepath.Join(dir, MarkerName), []byte(`{"release":"sid"}`), 0o644)
	if _, err := ReadMarker(dir); err == nil {
		t.Fatal("an empty marker was accepted")
	}
	r, err := Ensure(context.Background(), "sid", []string{"valkey-server"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.builds.Load() != 1 || f.specs[0].From != "" {
		t.Fatalf("builds %d, from %q: want one fresh build", f.builds.Load(), f.specs[0].From)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "etc")); err == nil {
		t.Fatal("the half-made root's content survived")
	}
	left, _ := filepath.Glob(filepath.Join(base, "debian-sid.*-*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestFailedBuildLeavesNoRoot(t *testing.T) {
	f := &fakeBuilder{fail: errors.New("apt-get exploded")}
	f.install(t)
	_, err := Ensure(context.Background(), "sid", []string{"redis-server"}, nil)
	if err == nil || !strings.Contains(err.Error(), "exploded") {
		t.Fatalf("err = %v", err)
	}
	base, _ := CacheBase()
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		if e.IsDir() {
			t.Fatalf("left a directory: %s", e.Name())
		}
	}
	if _, err := Open("sid"); err == nil {
		t.Fatal("Open found a root after a failed build")
	}
}

func TestAddingPackagesBuildsFromTheExistingRoot(t *testing.T) {
	f := &fakeBuilder{}
	f.install(t)
	ctx := context.Background()
	if _, err := Ensure(ctx, "trixie", []string{"redis-server=1"}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := Ensure(ctx, "trixie", []string{"postgresql-17"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.builds.Load() != 2 {
		t.Fatalf("%d builds", f.builds.Load())
	}
	s := f.specs[1]
	if s.From != r.Dir || strings.Join(s.Packages, " ") != "postgresql-17 redis-server=1" {
		t.Fatalf("second build: from %q packages %v", s.From, s.Packages)
	}
	// A new pin replaces the old one of the same name.
	if _, err := Ensure(ctx, "trixie", []string{"redis-server=2"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.specs[2].Packages, " "); got != "postgresql-17 redis-server=2" {
		t.Fatalf("third build packages %q", got)
	}
	r, _ = Open("trixie")
	if v, _ := r.Version("redis-server"); v != "2" {
		t.Fatalf("redis-server %q", v)
	}
}

func TestConcurrentEnsureBuildsOnce(t *testing.T) {
	f := &fakeBuilder{delay: 300 * time.Millisecond}
	f.install(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	dirs := make([]string, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := Ensure(context.Background(), "sid", []string{"rabbitmq-server"}, nil)
			errs[i], dirs[i] = err, r.Dir
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || dirs[i] != dirs[0] {
			t.Fatalf("call %d: %v %q", i, err, dirs[i])
		}
	}
	if n := f.builds.Load(); n != 1 {
		t.Fatalf("%d builds, want 1", n)
	}
}

func TestWaitingForTheLockHonoursContext(t *testing.T) {
	f := &fakeBuilder{}
	f.install(t)
	base, _ := CacheBase()
	os.MkdirAll(base, 0o755)
	unlock, err := lockFile(context.Background(), filepath.Join(base, "debian-sid.lock"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var log bytes.Buffer
	_, err = Ensure(ctx, "sid", []string{"redis-server"}, &log)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(log.String(), "waiting for") {
		t.Fatalf("err %v, log %q", err, log.String())
	}
}

// TestConcurrentEnsureAcrossProcesses starts two copies of the test binary
// that call Ensure at once: the flock must make the second wait and find the
// root made by the first.
func TestConcurrentEnsureAcrossProcesses(t *testing.T) {
	if os.Getenv("DEBROOT_HELPER") == "1" {
		t.Skip("helper")
	}
	cache := t.TempDir()
	count := filepath.Join(cache, "builds")
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 2 {
		c := exec.Command(os.Args[0], "-test.run=^TestHelperEnsure$", "-test.v")
		c.Env = append(os.Environ(), "DEBROOT_HELPER=1", "XDG_CACHE_HOME="+cache, "DEBROOT_COUNT="+count)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, c), append(outs, &out)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i])
		}
	}
	b, _ := os.ReadFile(count)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Fatalf("%d builds across two processes, want 1\n%s\n%s", n, outs[0], outs[1])
	}
	if !strings.Contains(outs[0].String()+outs[1].String(), "waiting for") {
		t.Fatalf("neither process waited:\n%s\n%s", outs[0], outs[1])
	}
}

func TestHelperEnsure(t *testing.T) {
	if os.Getenv("DEBROOT_HELPER") != "1" {
		t.Skip("run by TestConcurrentEnsureAcrossProcesses")
	}
	f := &fakeBuilder{delay: time.Second}
	oldB := build
	build = func(ctx context.Context, s buildSpec) ([]Step, error) {
		fd, _ := os.OpenFile(os.Getenv("DEBROOT_COUNT"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		fmt.Fprintln(fd, os.Getpid())
		fd.Close()
		return f.build(ctx, s)
	}
	preflight = func(context.Context, string, string, []string, io.Writer) error { return nil }
	defer func() { build = oldB }()
	r, err := Ensure(context.Background(), "trixie", []string{"etcd-server"}, os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Version("etcd-server"); !ok {
		t.Fatal("no etcd-server in the marker")
	}
}

func TestBadNames(t *testing.T) {
	f := &fakeBuilder{}
	f.install(t)
	for _, c := range []struct{ rel, pkg string }{{"Trixie", "a1"}, {"../x", "a1"}, {"sid", "rm -rf"}, {"sid", "-o=x"}} {
		if _, err := Ensure(context.Background(), c.rel, []string{c.pkg}, nil); err == nil {
			t.Errorf("Ensure(%q, %q) accepted", c.rel, c.pkg)
		}
	}
	if f.builds.Load() != 0 {
		t.Fatal("built with a bad name")
	}
}

const packagesText = `Package: postgresql-17
Version: 17.12-0+deb13u1

Package: postgresql-client-17
Version: 17.12-0+deb13u1

Package: rabbitmq-server
Version: 4.0.5-6+deb13u2

Package: mariadb-server
Version: 1:11.8.9+ds-0+deb13u1
Provides: virtual-mysql-server
`

func TestUnavailableErrorsNameWhatTheReleaseHas(t *testing.T) {
	idx, err := parseIndex(strings.NewReader(packagesText))
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.check("trixie", []string{"postgresql-17", "rabbitmq-server=4.0.5-6+deb13u2", "virtual-mysql-server"}); err != nil {
		t.Fatal(err)
	}
	err = idx.check("trixie", []string{"postgresql-18", "rabbitmq-server=4.3.6-1", "etcd-server"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("not ErrUnavailable: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`package "postgresql-18"`, "trixie has postgresql-17 17.12-0+deb13u1",
		`rabbitmq-server version "4.3.6-1"`, "trixie has rabbitmq-server 4.0.5-6+deb13u2",
		`package "etcd-server"`, "trixie has no etcd-server", "cannot be had",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "postgresql-client-17") {
		t.Errorf("suggested an unrelated package: %s", msg)
	}
}

func TestErrorKinds(t *testing.T) {
	var u *UnavailableError
	e := fmt.Errorf("wrapped: %w", &UnavailableError{What: "debootstrap", Fix: "install it: apt-get install debootstrap"})
	if !errors.Is(e, ErrUnavailable) || !errors.As(e, &u) {
		t.Fatal("a wrapped UnavailableError is not ErrUnavailable")
	}
	if got := u.Error(); got != "debroot: debootstrap cannot be had (install it: apt-get install debootstrap)" {
		t.Fatalf("message %q", got)
	}
	if errors.Is(errors.New("disk full"), ErrUnavailable) {
		t.Fatal("any error is ErrUnavailable")
	}
	apt := "Reading package lists...\nE: Unable to locate package postgresql-99\nE: Version '9' for 'redis-server' was not found\n"
	if err := aptUnavailable("sid", apt); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "postgresql-99") || !strings.Contains(err.Error(), "Version '9'") {
		t.Fatalf("aptUnavailable: %v", err)
	}
	if aptUnavailable("sid", "E: Sub-process /usr/bin/dpkg returned an error code (1)") != nil {
		t.Fatal("a dpkg failure taken for a missing package")
	}
}

func TestMirrorNotAnsweringFailsFast(t *testing.T) {
	t0 := time.Now()
	// A closed local port refuses at once: the check must say so, naming the fix.
	err := checkMirror(context.Background(), "http://127.0.0.1:9/debian", "sid")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "LOCKPROVER_DEBIAN_MIRROR") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(t0) > 9*time.Second {
		t.Fatalf("took %v", time.Since(t0))
	}
}

func TestMirrorThatHangsFailsWithinTheTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept and never answer
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	old := mirrorTimeout
	mirrorTimeout = 300 * time.Millisecond
	defer func() { mirrorTimeout = old }()
	t0 := time.Now()
	err = checkMirror(context.Background(), "http://"+ln.Addr().String()+"/debian", "trixie")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no answer to HEAD") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestPreflightNamesWhatIsMissing(t *testing.T) {
	oldE, oldP := geteuid, debootstrapPath
	defer func() { geteuid, debootstrapPath = oldE, oldP }()
	ctx := context.Background()

	geteuid = func() int { return 1000 }
	err := realPreflight(ctx, "trixie", "http://127.0.0.1:9/debian", []string{"redis-server"}, io.Discard)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "run as root") {
		t.Fatalf("not root: %v", err)
	}

	geteuid = func() int { return 0 }
	t.Setenv("PATH", t.TempDir())
	debootstrapPath = "/nonexistent/debootstrap"
	err = realPreflight(ctx, "trixie", "http://127.0.0.1:9/debian", []string{"redis-server"}, io.Discard)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "apt-get install debootstrap") {
		t.Fatalf("no debootstrap: %v", err)
	}

	debootstrapPath = "/bin/sh" // any file: "debootstrap is installed"
	t.Setenv("DEBOOTSTRAP_DIR", t.TempDir())
	err = realPreflight(ctx, "trixie", "http://127.0.0.1:9/debian", []string{"redis-server"}, io.Discard)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "newer debootstrap") {
		t.Fatalf("no script: %v", err)
	}
}

func TestLookupUser(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/bash\npostgres:x:100:102:PostgreSQL:/var/lib/postgresql:/bin/bash\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("postgres:x:102:\nssl-cert:x:101:postgres\n"), 0o644)
	u, err := LookupUser(root, "postgres")
	if err != nil || u.Uid != 100 || u.Gid != 102 || fmt.Sprint(u.Groups) != "[102 101]" || u.Home != "/var/lib/postgresql" {
		t.Fatal(u, err)
	}
	if u, err := LookupUser(root, "100"); err != nil || u.Name != "postgres" {
		t.Fatal(u, err)
	}
	if _, err := LookupUser(root, "rabbitmq"); err == nil || !strings.Contains(err.Error(), "is its package installed") {
		t.Fatal(err)
	}
}
