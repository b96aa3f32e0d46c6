package rabbitmq

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// A broker VM of a node that outlived its stop (here a stand-in whose
// command line looks like one: it names the node's home and boots
// rabbit) is waited for, then killed, before the node starts again; one
// that only names the home (a rabbitmqctl's VM) is left alone, and a node
// with none starts at once.
func TestClearOldKillsAnOutlivingVM(t *testing.T) {
	dir := t.TempDir()
	n := &Node{Name: "rabbit@test", dir: dir}
	home := filepath.Join(dir, "home")
	vm := exec.Command("sh", "-c", "sleep 60", "beam.smp", "-home", home, "--", "-s", "rabbit", "boot")
	ctl := exec.Command("sh", "-c", "sleep 60", "beam.smp", "-home", home, "--", "rabbitmqctl")
	for _, c := range []*exec.Cmd{vm, ctl} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	go vm.Wait() // reaped once killed: no zombie left to see
	if got := n.brokerVMs(); !slices.Equal(got, []int{vm.Process.Pid}) {
		t.Fatalf("broker VMs %v, want only %d (not the rabbitmqctl's %d)", got, vm.Process.Pid, ctl.Process.Pid)
	}
	start := time.Now()
	if err := n.clearOld(context.Background(), 200*time.Millisecond, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("cleared in %v, before its grace", took)
	}
	if got := n.brokerVMs(); len(got) != 0 {
		t.Errorf("broker VMs %v left", got)
	}
	if err := syscall.Kill(ctl.Process.Pid, 0); err != nil {
		t.Errorf("the rabbitmqctl stand-in was killed too: %v", err)
	}
	if err := n.clearOld(context.Background(), time.Second, time.Second); err != nil {
		t.Errorf("a node with no VM: %v", err)
	}
}
