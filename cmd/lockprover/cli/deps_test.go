package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// The lockprover binary links neither rabbitmqtest nor testcontainers-go
// (and Docker's client behind it): only tests find brokers in containers.
func TestBinaryDoesNotLinkTestcontainers(t *testing.T) {
	out, err := exec.Command("go", "list", "-pgo=off", "-deps", "../../../cmd/lockprover").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, d := range deps {
		if strings.Contains(d, "testcontainers") || strings.HasSuffix(d, "/rabbitmqtest") || strings.Contains(d, "docker/docker") {
			t.Errorf("the lockprover binary depends on %s", d)
		}
	}
}
