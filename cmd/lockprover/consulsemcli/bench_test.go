package consulsemcli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover/bench"
)

// bench --kind consul-semaphore reads --backend strictly, and takes no
// --options, before it starts anything (the bench itself runs in
// adapters/runners/consulsemrun's TestBench).
func TestConsulBenchUsage(t *testing.T) {
	for _, c := range []struct {
		backend, options, want string
	}{
		{"zookeeper", "", `--backend "zookeeper": want consul or etcd`},
		{"etcd", "stale", "--options"},
	} {
		s := family.Settings{Kind: "consul-semaphore", Options: c.options,
			Flag: func(string) string { return c.backend }, Given: func(name string) bool { return name == "backend" }}
		err := consulBench(context.Background(), s, bench.Config{N: 1}, io.Discard)
		var ue *family.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--backend %s --options %q: %v, want a usage error naming %q", c.backend, c.options, err, c.want)
		}
	}
}
