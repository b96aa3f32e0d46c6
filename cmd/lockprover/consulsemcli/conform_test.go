package consulsemcli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/quick"
)

// conform --kind consul-semaphore compares the simulator with a private
// etcd (Consul's agent is compared the same way; the package's tests in
// adapters/conform/consulconform run both at length), and --backend is
// read strictly.
func TestConsulConform(t *testing.T) {
	quick.Skip(t, "a private Consul agent")
	if _, err := etcd.Find(); err != nil {
		t.Skipf("skipped: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	given := func(name string) bool { return name == "backend" }
	backend := "etcd"
	flag := func(name string) string {
		if name == "backend" {
			return backend
		}
		return "" // --cluster and every other flag unset: the single server
	}
	s := family.Settings{Kind: "consul-semaphore", Flag: flag, Given: given}
	var out bytes.Buffer
	res, err := consulConform(ctx, s, family.ConformConfig{Sequences: 20, Seed: 1}, &out)
	if err != nil || res == family.Diverge {
		t.Fatalf("conform: %v, %v\n%s", res, err, out.String())
	}
	if !strings.Contains(out.String(), "consulsim against a private etcd: 20 sequences") || !strings.Contains(out.String(), "etcd 3.") {
		t.Errorf("the output does not say what ran:\n%s", out.String())
	}
	backend = "zookeeper"
	_, err = consulConform(ctx, s, family.ConformConfig{Sequences: 20, Seed: 1}, &out)
	var ue *family.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `--backend "zookeeper"`) {
		t.Errorf("--backend zookeeper: %v, want a usage error naming the flag", err)
	}
}
