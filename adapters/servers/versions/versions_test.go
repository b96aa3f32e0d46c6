package versions

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/internal/quick"
)

func TestLookup(t *testing.T) {
	v, err := Lookup("rabbitmq", "")
	if err != nil || v.Name != "3.10.8" || v.Rooted() {
		t.Errorf(`Lookup("rabbitmq", "") = %v, %v: want the machine's own 3.10.8`, v, err)
	}
	v, err = Lookup("rabbitmq", "4.3.6")
	if err != nil || v.Release != "sid" || v.Debian != "4.3.6-1" {
		t.Errorf("Lookup 4.3.6 = %+v, %v", v, err)
	}
	_, err = Lookup("rabbitmq", "4.1.0")
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "3.10.8, 4.0.5, 4.3.6") {
		t.Errorf("an unknown version: %v, want ErrUnknown listing the known ones", err)
	}
	if _, err := Lookup("memcached", ""); !errors.Is(err, ErrUnknown) {
		t.Errorf("an unknown server: %v", err)
	}
	if n := Newest("valkey"); n.Name != "9.1.2" {
		t.Errorf("valkey's newest is %v", n)
	}
}

// Each server has one default, the machine's own, and a release's root
// holds every server of that release, pinned.
func TestCatalogue(t *testing.T) {
	for _, s := range Servers() {
		defaults := 0
		for _, v := range Of(s) {
			if v.Default {
				defaults++
				if v.Rooted() {
					t.Errorf("%v: a default from a root (a target without --server-version would build one)", v)
				}
			}
			if v.Rooted() != (v.Debian != "") {
				t.Errorf("%v: a root's version is pinned, the machine's is not", v)
			}
			if v.Built() && (v.Rooted() || v.Package != "") {
				t.Errorf("%v: a version lockprover builds comes from no root and no package", v)
			}
		}
		if defaults > 1 || defaults == 0 && s != "valkey" {
			t.Errorf("%s has %d defaults", s, defaults)
		}
	}
	p := packages("sid")
	for _, want := range []string{"rabbitmq-server=4.3.6-1", "etcd-server=3.5.30-2", "valkey-server=9.1.2-1", "postgresql-18=18.6-3", "redis-tools"} {
		if !slices.Contains(p, want) {
			t.Errorf("sid's root lacks %s: %v", want, p)
		}
	}
}

// A rooted version runs from its root, sees its data directory inside,
// and leaves nothing when stopped: Redis 8.0.6 from sid's root, asked
// INFO over its own port.
func TestRunFromARoot(t *testing.T) {
	quick.Skip(t, "a Debian root")
	if os.Geteuid() != 0 {
		t.Skip("runs from a Debian root: needs root")
	}
	v, _ := Lookup("redis", "8.0.6")
	if !v.Made() {
		t.Skipf("%v: its root is not made here (a build takes minutes; lockprover makes it when a target asks)", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := v.Prepare(ctx, t.TempDir(), "redis", "", nil, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if run.In(run.Data+"/dump") != debroot.MountPoint+"/dump" {
		t.Errorf("In(%s/dump) = %s", run.Data, run.In(run.Data+"/dump"))
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd, err := run.Command(ctx, "/usr/bin/redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", run.In(run.Data), "--daemonize", "no")
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer debroot.Stop(cmd, 10*time.Second)
	var c net.Conn
	for c == nil && ctx.Err() == nil {
		if c, err = net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if c == nil {
		t.Fatalf("redis-server 8.0.6 never listened: %v", err)
	}
	defer c.Close()
	c.Write([]byte("INFO server\r\n"))
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("INFO: %v", err)
		}
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			if strings.TrimSpace(v) != "8.0.6" {
				t.Fatalf("the server says redis_version %s, want 8.0.6", v)
			}
			return
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"", "redis 7.0.15"}, {"8.0.6", "redis 8.0.6"}, {"valkey-9.1.2", "valkey 9.1.2"},
	} {
		if v, err := Parse(c.value, "redis", "valkey"); err != nil || v.String() != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", c.value, v, err, c.want)
		}
	}
	for _, bad := range []string{"9.1.2", "valkey-7.0.15", "redis-8.0.6", "latest"} {
		_, err := Parse(bad, "redis", "valkey")
		if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "7.0.15, 8.0.2, 8.0.6, valkey-8.1.1, valkey-9.1.2") {
			t.Errorf("Parse(%q): %v, want ErrUnknown listing what redis takes", bad, err)
		}
	}
}

// Consul is a version lockprover builds: no root, no package, its binary
// in the cache where .ci/consul puts it, and "cannot be had" (naming the
// command that builds it) until it is there.
func TestBuilt(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	v, err := Lookup("consul", "")
	if err != nil || v.Name != "1.16.3" || !v.Built() || v.Rooted() || v.Package != "" {
		t.Fatalf(`Lookup("consul", "") = %+v, %v: want 1.16.3, built`, v, err)
	}
	if _, ok := v.Installed(); ok {
		t.Error("a built version says it is an installed package")
	}
	_, err = v.Binary()
	if !errors.Is(err, debroot.ErrUnavailable) || !strings.Contains(err.Error(), ".ci/consul 1.16.3") {
		t.Errorf("Binary with nothing built: %v, want ErrUnavailable naming .ci/consul 1.16.3", err)
	}
	if v.Made() {
		t.Error("Made with nothing built")
	}
	want := os.Getenv("XDG_CACHE_HOME") + "/lockprover/consul-v1.16.3/consul"
	if err := os.MkdirAll(want[:strings.LastIndex(want, "/")], 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Binary(); !errors.Is(err, debroot.ErrUnavailable) {
		t.Errorf("Binary of a file that is not executable: %v", err)
	}
	os.Chmod(want, 0o755)
	if got, err := v.Binary(); err != nil || got != want || !v.Made() {
		t.Errorf("Binary = %q, %v (Made %v); want %s", got, err, v.Made(), want)
	}
	if v, err := Parse("1.20.2", "consul"); err != nil || !v.Built() || v.Default {
		t.Errorf(`Parse("1.20.2", "consul") = %+v, %v`, v, err)
	}
	if e, _ := Lookup("etcd", "3.5.30"); e.Built() {
		t.Error("etcd 3.5.30 says it is built")
	} else if _, err := e.Binary(); err == nil {
		t.Error("Binary of a version from a root answered no error")
	}
}
