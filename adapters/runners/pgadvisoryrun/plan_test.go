package pgadvisoryrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The plan in testdata reads back; a wrong plan is refused, naming the
// field.
func TestReadPlan(t *testing.T) {
	p, err := ReadPlan("testdata/force-close.json")
	if err != nil {
		t.Fatal(err)
	}
	if p.TTLMs != 2000 || len(p.Clients) != 2 || len(p.Nemesis) != 1 {
		t.Fatalf("read %+v", p)
	}
	good, _ := os.ReadFile("testdata/force-close.json")
	for _, tc := range []struct{ from, to, field string }{
		{`"ttl_ms": 2000`, `"ttl_ms": 5`, "ttl_ms"},
		{`"target": "c1"`, `"target": "c9"`, "nemesis[0].target"},
		{`"fault": "force-close"`, `"fault": "drop-reply"`, "nemesis[0].fault"},
		{`{"op": "refresh"}`, `{"op": "verify"}`, "clients[0][2].op"},
		{`"kind": "pg-advisory"`, `"kind": "redlock"`, "kind"},
		{`"ttl_ms": 2000`, `"ttl_ms": 2000, "ttl": 1`, "ttl"},
	} {
		path := filepath.Join(t.TempDir(), "plan.json")
		os.WriteFile(path, []byte(strings.Replace(string(good), tc.from, tc.to, 1)), 0o644)
		_, err := ReadPlan(path)
		if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "plan.json") {
			t.Errorf("%s -> %s: %v, want an error naming the file and %s", tc.from, tc.to, err, tc.field)
		}
	}
}
