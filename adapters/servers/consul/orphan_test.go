package consul

import (
	"context"
	"testing"

	"github.com/lockprover/lockprover/adapters/host/proc/proctest"
)

// childEnv, when set, makes the test binary proctest's child: it starts a
// private agent in the directory it names and waits to be killed (TestMain).
const childEnv = "LOCKPROVER_CONSUL_TEST_CHILD"

// startChild starts the child's agent in dir.
func startChild(dir string) (int, error) {
	s, err := Start(context.Background(), dir, Options{})
	if err != nil {
		return 0, err
	}
	return s.PID(), nil
}

// An agent dies with the process that started it, even one killed
// without a chance to Stop it.
func TestAgentDiesWithItsParent(t *testing.T) {
	if _, err := Find(); err != nil {
		t.Skip(err)
	}
	proctest.DiesWithParent(t, childEnv, "agent")
}
