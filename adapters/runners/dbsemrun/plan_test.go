package dbsemrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A plan file that is wrong is refused with the file and the field, and a
// right one is read back as written.
func TestReadPlan(t *testing.T) {
	good := `{"version": 1, "kind": "db-semaphore", "key": "lp", "max": 1, "ttl_ms": 100,
  "clients": [[{"op": "acquire"}, {"op": "sleep", "ms": 5}, {"op": "release"}], [{"op": "acquire"}]],
  "nemesis": [%s]}`
	for _, c := range []struct{ name, fault, want string }{
		{"partition", `{"at_ms": 1, "fault": "partition", "target": "c1", "for_ms": 50}`, ""},
		{"clock", `{"at_ms": 1, "fault": "clock-skew", "target": "c2", "offset_ms": -30, "for_ms": 50}`, ""},
		{"restart", `{"at_ms": 1, "fault": "restart-broker"}`, ""},
		{"unknown fault", `{"at_ms": 1, "fault": "flood", "target": "c1"}`, `nemesis[0].fault`},
		{"no target", `{"at_ms": 1, "fault": "partition"}`, `nemesis[0].target: partition needs a target`},
		{"no such client", `{"at_ms": 1, "fault": "kill", "target": "c3"}`, `nemesis[0].target`},
		{"offset of a kill", `{"at_ms": 1, "fault": "kill", "target": "c1", "offset_ms": 5}`, `nemesis[0].offset_ms: only a clock fault has an offset, not kill`},
		{"a kill that lasts", `{"at_ms": 1, "fault": "kill", "target": "c1", "for_ms": 5}`, `nemesis[0].for_ms: only a pause, a partition or a clock fault lasts, not kill`},
		{"clock without offset", `{"at_ms": 1, "fault": "clock-jump"}`, `nemesis[0].offset_ms`},
		{"negative time", `{"at_ms": -1, "fault": "pause", "target": "c1"}`, `nemesis[0]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "plan.json")
			if err := os.WriteFile(path, []byte(strings.Replace(good, "%s", c.fault, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := ReadPlan(path)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "":
				if len(p.Nemesis) != 1 || len(p.Clients) != 2 {
					t.Fatalf("read back as %+v", p)
				}
			case err == nil:
				t.Fatalf("accepted; want an error naming %s", c.want)
			case !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path):
				t.Fatalf("error %q; want the file and %q", err, c.want)
			}
		})
	}
}
