package upstream_test

// The Redlock adapters of examples/upstream (redsync/, node-redlock/), built
// and run through lockprover's validation on private redis-servers, so that
// they cannot rot. Unlike the other adapters, these run the upstream code
// itself: the test fetches it (the Go module proxy, npm) into the caches,
// and skips, saying why, where it cannot (no network, no node or npm, no
// redis-server). Where the upstream code fails a check by its own defect,
// the test asserts exactly those failures, so that it fails if the verdict
// (docs/verdicts.md) changes.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/redlockrun/redlockprotocol"
	"github.com/lockprover/lockprover/adapters/servers/redis"
)

// validateRedlock runs validate-impl --kind redlock on command and returns
// its output; it skips without redis-server.
func validateRedlock(t *testing.T, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	// A runtime started beside the whole suite may take more than the
	// protocol's 10 s to answer init.
	_, err := redlockprotocol.Validate(ctx, command, time.Minute, "", &out, false)
	if errors.Is(err, redis.ErrNoRedis) {
		t.Skipf("needs redis-server (apt-get install redis-server): %v", err)
	}
	if err != nil {
		t.Fatalf("validate-impl: %v", err)
	}
	t.Logf("validate-impl --kind redlock --impl %q:\n%s", command, out.String())
	return out.String()
}

// buildRedsync builds examples/upstream/redsync against the redsync of
// modfile ("" for go.mod's, the current release) with tags, and returns
// the binary.
func buildRedsync(t *testing.T, modfile, tags string) string {
	t.Helper()
	return buildModule(t, "redsync", ".", modfile, tags)
}

// buildModule builds package pkg of the Go module in dir (an adapter's
// own module, whose dependencies lockprover's go.mod does not have), with
// modfile ("" for go.mod) and tags, and returns the binary. It skips if
// the modules cannot be downloaded (into the module cache: once, then the
// build cache makes it quick).
func buildModule(t *testing.T, dir, pkg, modfile, tags string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("needs the go command to build the adapter in %s (its own module)", dir)
	}
	var flags []string
	if modfile != "" {
		flags = append(flags, "-modfile="+modfile)
	}
	dlFlags := flags
	if tags != "" {
		flags = append(flags, "-tags="+tags)
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
	// Compiling a module's dependencies for the first time, beside the
	// other adapters' builds on a loaded machine, took over 3 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// The nested module's dependencies come from the module proxy into the
	// module cache; no network (and an empty cache) skips.
	dl := exec.CommandContext(ctx, "go", append([]string{"mod", "download"}, dlFlags...)...)
	dl.Dir, dl.Env = dir, env
	if out, err := dl.CombinedOutput(); err != nil {
		t.Skipf("cannot download the modules of the adapter in %s (the Go module proxy out of reach?): %v\n%s", dir, err, out)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(filepath.Join(dir, pkg))+"-adapter")
	build := exec.CommandContext(ctx, "go", append(append([]string{"build"}, flags...), "-o", bin, pkg)...)
	build.Dir, build.Env = dir, env
	if out, err := build.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "dial tcp") || strings.Contains(string(out), "lookup ") {
			t.Skipf("cannot download the modules of the adapter in %s: %v\n%s", dir, err, out)
		}
		t.Fatalf("go build %s %s in %s: %v\n%s", strings.Join(flags, " "), pkg, dir, err, out)
	}
	return bin
}

// wantFailures checks that a validation failed exactly the checks want.
func wantFailures(t *testing.T, out string, want ...string) {
	t.Helper()
	got := failures(out)
	var names []string
	for _, f := range got {
		names = append(names, strings.TrimSpace(f))
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("failed checks %q, want exactly %q", names, want)
	}
}

// redsync's current release passes every check; v4.0.3 answers ok to a
// release and a refresh of a lease it no longer holds (its Unlock and
// Extend counted every server's answer as a success, fixed in v4.0.4);
// WithSetNXOnExtend revives a released lease (its extend sets the key
// anew where it is missing), which then holds the lock against c2 and c1
// itself.
func TestRedsyncAdapter(t *testing.T) {
	for _, tc := range []struct {
		name, modfile, tags, flags string
		want                       []string
	}{
		{name: "current"},
		{name: "setnx-on-extend", flags: " --setnx-on-extend", want: []string{
			"c1's refresh after its release answers expired",
			"c2's acquire after the release is granted",
			"c1's acquire with a ttl of 500ms is granted",
		}},
		{name: "v4.0.3", modfile: "go.v4.0.3.mod", tags: "redsync_v4_0_3", want: []string{
			"c1's second release answers expired",
			"c1's refresh after its release answers expired",
			"c1's refresh 800ms after its grant (no revival) answers expired",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin := buildRedsync(t, tc.modfile, tc.tags)
			out := validateRedlock(t, bin+tc.flags)
			wantFailures(t, out, tc.want...)
			if len(tc.want) == 0 && !strings.Contains(out, "ok    c1's acquire of the free lock is granted: the validity claimed is within the ttl") {
				t.Error("no validity claimed, or not checked")
			}
			if len(tc.want) == 0 && !strings.Contains(out, "ok    c1's acquire of the free lock is granted: started_ms lies within the call") {
				t.Error("no started_ms said (redsync's own start, measured), or not checked")
			}
		})
	}
}

// npm redlock 4.2.0 on ioredis passes every check. node_modules is not in
// the repository: the test installs package-lock.json's packages with
// npm ci into the user's cache (once per lock file) and points NODE_PATH
// there; a node_modules of the adapter's own directory, from the README's
// npm ci, comes first.
func TestNodeRedlockAdapter(t *testing.T) {
	t.Parallel()
	node, modules := npmModules(t, "node-redlock", "redlock")
	out := validateRedlock(t, "NODE_PATH="+modules+" "+node+" "+abs(t, "node-redlock/adapter.js"))
	wantFailures(t, out)
	if !strings.Contains(out, "ok    c1's acquire of the free lock is granted: the validity claimed is within the ttl") {
		t.Error("no validity claimed, or not checked")
	}
}

// The lost release reply (docs/verdicts.md), in npm redlock and in
// redsync alike: the reply to c1's release from one server of two is lost
// and its connection cut; the client library (ioredis, go-redis) sends
// the release again, which finds no key, and the lock library says the
// lease had expired (npm redlock's LockError, redsync's
// ErrLockAlreadyExpired): the adapter's expired, and c1's next grant
// overlaps the lease it freed. The trace must show the resend answering
// no key (0, or redsync's -1), so that the failure is the one the report
// describes.
func TestLostReleaseReply(t *testing.T) {
	for _, tc := range []struct {
		name, resent string
		// also is a property that may fail beside lease-exclusive: npm
		// redlock's validity-sound on a loaded machine, where a slow grant
		// shows the adapter's head start on the library's clock (an
		// artefact, docs/verdicts.md's npm redlock row).
		also string
	}{
		{"npm-redlock", "c1->redis1: <- EVAL :0", "validity-sound"},
		{"redsync", "c1->redis1: <- EVAL :-1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var impl string
			if tc.name == "redsync" {
				impl = buildRedsync(t, "", "")
			} else {
				node, modules := npmModules(t, "node-redlock", "redlock")
				impl = "NODE_PATH=" + modules + " " + node + " " + abs(t, "node-redlock/adapter.js")
			}
			code, out := lockprover("replay", "--target", "redis", "--impl", impl,
				"--init-timeout", "30s", "--times", "1", "--trace", "plans/redlock-lost-release-reply.json")
			if strings.Contains(out, "no redis-server") {
				t.Skipf("needs redis-server (apt-get install redis-server): %s", out)
			}
			lost := strings.Index(out, "c1->redis1: <- EVAL :1 LOST (drop-reply)")
			failed := failedProperties(out)
			slices.Sort(failed)
			want := slices.Equal(failed, []string{"lease-exclusive"}) ||
				tc.also != "" && slices.Equal(failed, []string{"lease-exclusive", tc.also})
			if code == 0 || !want || lost < 0 || !strings.Contains(out[lost:], tc.resent) {
				t.Errorf("exit %d, failed %q: want lease-exclusive to fail (and nothing else but %q), the release's lost reply followed by a resend answering %q:\n%s", code, failed, tc.also, tc.resent, out)
			}
		})
	}
}

// npmModules installs the packages of dir's package-lock.json with npm ci
// into the user's cache (once per lock file) and returns node and that
// node_modules; it skips without node or npm, or when npm ci fails (the
// registry out of reach). probe is a package the lock file installs.
//
// Tests that share a lock file install it once, one at a time (a lock on
// a file beside the cache's directory, which other test processes honour
// too), and npm ci runs in a directory of its own whose node_modules is
// moved into place whole: a test never reads a node_modules that another
// is still writing (npm writes a probe's package.json before the rest;
// CI once parsed a package.json cut short).
func npmModules(t *testing.T, dir, probe string) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("needs node and npm (apt-get install nodejs npm) for the adapter in %s", dir)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("needs npm (apt-get install npm) to install the packages of the adapter in %s", dir)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(lock)
	inst := filepath.Join(cache, "lockprover", dir+"-"+hex.EncodeToString(sum[:6]))
	modules = filepath.Join(inst, "node_modules")
	installed := func() bool {
		_, err := os.Stat(filepath.Join(modules, probe, "package.json"))
		return err == nil
	}
	if installed() {
		return node, modules
	}
	if err := os.MkdirAll(inst, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock := lockFile(t, inst+".lock")
	defer unlock()
	if installed() { // another test installed it meanwhile
		return node, modules
	}
	work, err := os.MkdirTemp(filepath.Dir(inst), filepath.Base(inst)+"-npm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ci := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	ci.Dir = work
	if out, err := ci.CombinedOutput(); err != nil {
		t.Skipf("npm ci of the packages of the adapter in %s failed (the npm registry out of reach?): %v\n%s", dir, err, out)
	}
	if err := os.RemoveAll(modules); err != nil { // what a killed install left
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(work, "node_modules"), modules); err != nil {
		t.Fatal(err)
	}
	return node, modules
}

// lockFile takes an exclusive lock on the file at path (made if missing),
// waiting for it, and returns its release.
func lockFile(t *testing.T, path string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() { f.Close() } // closing releases the lock
}
