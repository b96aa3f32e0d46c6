// Package netnstest gives a test a network lab of its own (adapters/host/netns)
// and checks, when the test ends, that nothing of it is left.
package netnstest

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/host/netns"
)

// Lab builds a lab of the named hosts for t, or skips t saying what this
// machine lacks (root, ip: netns.Preflight). When t ends the lab is closed
// (after whatever t registered later, such as a cluster's Stop, since
// cleanups run last first), and t fails if one of its namespaces is still
// listed.
func Lab(t testing.TB, hosts ...string) *netns.Lab {
	t.Helper()
	if err := netns.Preflight(); err != nil {
		t.Skipf("no network lab here: %v", err)
	}
	lab, err := netns.New(context.Background(), hosts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("lab %s: Close: %v", lab.ID, err)
		}
		ns, _ := exec.Command("ip", "netns", "list").Output()
		if strings.Contains(string(ns), lab.ID) {
			t.Errorf("lab %s left behind: %s", lab.ID, ns)
		}
	})
	return lab
}
