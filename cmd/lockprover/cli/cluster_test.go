package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/quick"
)

// A run on a RabbitMQ cluster interrupted while the cluster starts, and
// one interrupted in the middle of its plans, exit 130 and leave nothing:
// no namespace of their network lab, no process of their nodes (beam,
// epmd: every one runs from the cluster's files), no files.
func TestClusterInterrupted(t *testing.T) {
	quick.Long(t, "a cluster of three RabbitMQ 3.10 nodes")
	quick.Skip(t, "a RabbitMQ cluster")
	t.Parallel()
	if err := rabbitmq.ClusterPreflight(); err != nil {
		t.Skipf("no RabbitMQ cluster here: %v", err)
	}
	bin := builtBinary(t)
	started := regexp.MustCompile(`network lab (lp[0-9a-f]+), files under (\S+)`)
	for _, tc := range []struct {
		name string
		wait time.Duration
	}{
		{"while it starts", 2 * time.Second},
		{"during its plans", 45 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, took, stderr := interruptAfter(t, bin, started, tc.wait, "prove", "--target", "rabbitmq-cluster", "--partition-handling", "pause_minority",
				"--faults", "isolate-node,kill-node,pause-node", "--runs", "50", "--seed", "1", "--out", t.TempDir())
			if code != 130 {
				t.Errorf("exit %d after SIGINT, want 130; stderr:\n%s", code, stderr)
			}
			m := started.FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("stderr does not say which lab and files the run made:\n%s", stderr)
			}
			t.Logf("exited %v after SIGINT; lab %s, files %s", took.Round(time.Millisecond), m[1], m[2])
			nothingLeft(t, stderr, m[1], m[2])
		})
	}
}

// The same of a run on a Consul or etcd cluster (--target consul-cluster,
// etcd-cluster): interrupted while the cluster starts, or in the middle of
// its plans, it exits 130 and leaves no namespace, no agent or member, no
// files.
func TestLeaseClusterInterrupted(t *testing.T) {
	quick.Long(t, "clusters of three etcd and of three Consul servers")
	quick.Skip(t, "Consul and etcd clusters")
	t.Parallel()
	bin := builtBinary(t)
	started := regexp.MustCompile(`network lab (lp[0-9a-f]+), files under (\S+)`)
	for _, tc := range []struct {
		backend, target string
		wait            time.Duration
	}{
		{consulsemrun.Etcd, consulsemrun.EtcdCluster, 300 * time.Millisecond}, // while its members start
		{consulsemrun.Etcd, consulsemrun.EtcdCluster, 15 * time.Second},
		{consulsemrun.Consul, consulsemrun.ConsulCluster, 20 * time.Second},
	} {
		t.Run(fmt.Sprintf("%s after %v", tc.target, tc.wait), func(t *testing.T) {
			if err := consulsemrun.ClusterPreflight(tc.backend); err != nil {
				t.Skipf("no %s cluster here: %v", tc.backend, err)
			}
			code, took, stderr := interruptAfter(t, bin, started, tc.wait, "prove", "--kind", consulsemrun.Kind, "--target", tc.target,
				"--runs", "50", "--seed", "1", "--out", t.TempDir())
			if code != 130 {
				t.Errorf("exit %d after SIGINT, want 130; stderr:\n%s", code, stderr)
			}
			m := started.FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("stderr does not say which lab and files the run made:\n%s", stderr)
			}
			t.Logf("exited %v after SIGINT; lab %s, files %s", took.Round(time.Millisecond), m[1], m[2])
			nothingLeft(t, stderr, m[1], m[2])
		})
	}
}

// nothingLeft fails t if an interrupted cluster run (its stderr) left its
// lab's namespaces, its files under dir or a process running from them,
// or said it left anything.
func nothingLeft(t *testing.T, stderr, lab, dir string) {
	t.Helper()
	if strings.Contains(stderr, "left behind") {
		t.Errorf("stderr says something was left behind, though the run removed it all:\n%s", stderr)
	}
	if ns, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(ns), lab) {
		t.Errorf("namespaces of lab %s left: %s", lab, ns)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cluster's files %s left (%v)", dir, err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir) {
			t.Errorf("a process of the cluster left: %s: %s", p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}
