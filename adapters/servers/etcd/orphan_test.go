package etcd

import (
	"context"
	"testing"

	"github.com/lockprover/lockprover/adapters/host/proc/proctest"
)

// childEnv, when set, makes the test binary proctest's child: it starts a
// private etcd in the directory it names and waits to be killed (TestMain).
const childEnv = "LOCKPROVER_ETCD_TEST_CHILD"

// startChild starts the child's etcd in dir.
func startChild(dir string) (int, error) {
	s, err := Start(context.Background(), dir, Options{})
	if err != nil {
		return 0, err
	}
	return s.PID(), nil
}

// A private etcd dies with the process that started it, even one killed
// without a chance to Stop it.
func TestServerDiesWithItsParent(t *testing.T) {
	if _, err := Find(); err != nil {
		t.Skip(err)
	}
	proctest.DiesWithParent(t, childEnv, "etcd")
}
