package cli

import (
	"strings"
	"testing"
)

// TestSmoke is the quick loop's one short run per real server (make check
// runs it beside go test -short, which skips every other test that needs a
// real server): the reference of each family proves two plans on each of
// its real targets, through the command line a user types. A target whose
// server is missing here is skipped with what the command said of it
// (exit 2, naming what is missing and how to get it); any other answer
// than "every property held" fails.
func TestSmoke(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		// missing is what the command says, with exit 2, when the
		// target's server cannot be had here: the subtest skips then.
		missing []string
	}{
		{"rabbitmq", []string{"--target", "rabbitmq"}, []string{"cannot use the broker"}},
		{"mariadb", []string{"--kind", "db-semaphore", "--target", "mariadb"}, []string{"(name another with --dsn"}},
		{"redis", []string{"--kind", "redlock", "--target", "redis", "--servers", "1"}, []string{"no redis-server on this machine"}},
		{"consul", []string{"--kind", "consul-semaphore", "--target", "consul"}, []string{"no consul binary"}},
		{"etcd", []string{"--kind", "consul-semaphore", "--target", "etcd"}, []string{"no etcd binary"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"prove", "--runs", "2", "--seed", "1", "--quiet", "--out", t.TempDir()}, c.args...)
			code, out, errOut := lockprover(args...)
			if code == exitUsage {
				for _, m := range c.missing {
					if strings.Contains(errOut, m) {
						t.Skipf("skipped: %s", strings.TrimSpace(errOut))
					}
				}
			}
			if code != exitOK || !strings.Contains(out, "every property held") {
				t.Fatalf("lockprover %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
			}
		})
	}
}
