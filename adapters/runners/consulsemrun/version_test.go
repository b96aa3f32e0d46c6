package consulsemrun

import (
	"os"
	"testing"

	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/prover"
)

// The reference holds on a few drawn plans on etcd 3.5.30 from Debian
// sid's root (each plan's own server; kills, pauses, partitions, lost
// replies, restarts, force-closes): the newest etcd the catalogue has, in
// the default suite wherever CI made sid's root. It skips, saying how to
// get it, where the root is not made. The machine's etcd is made
// unusable ($LOCKPROVER_ETCD), so that a run on it instead fails.
func TestRealReferenceHoldsOnNewestEtcd(t *testing.T) {
	onReal(t, Etcd)
	v, err := versions.Lookup(Etcd, "3.5.30")
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skipf("%v runs from a Debian root: needs root", v)
	}
	if !v.Made() {
		t.Skipf("%v: its Debian %s root is not made here (lockprover servers --make etcd-%s: minutes, once)", v, v.Release, v.Name)
	}
	t.Setenv("LOCKPROVER_ETCD", "/bin/false")
	c := Config{Scope: prover.Scope{Clients: 3, Ops: 5}, Target: Etcd, TTLMs: 2000, Version: v}
	if got := c.String(); got != "the reference on a private real etcd 3.5.30" {
		t.Errorf("String() = %q", got)
	}
	safeOn(t, c, 3, 3)
}
