package amqpprotocol

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// nodePorts is a process's view of a served cluster: its own node's URL
// and every node's.
type nodePorts struct {
	broker.Broker
	urls []string
}

func (n nodePorts) URL() string    { return n.urls[0] }
func (n nodePorts) URLs() []string { return n.urls }

// On a served cluster, init names every node's port ("urls", the
// process's own first, as "url"); on one broker it has "url" alone.
func TestInitNamesEveryNodesPort(t *testing.T) {
	for _, tc := range []struct {
		name string
		urls []string
	}{
		{"cluster", []string{"amqp://guest:guest@127.0.0.1:1001/", "amqp://guest:guest@127.0.0.1:1002/", "amqp://guest:guest@127.0.0.1:1003/"}},
		{"one broker", []string{"amqp://guest:guest@127.0.0.1:1001/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := filepath.Join(t.TempDir(), "init")
			// An implementation that keeps its init and answers it.
			impl := NewProcesses("sh -c 'read -r line; printf %s \"$line\" >" + got + `; echo '"'"'{"id":1,"type":"init_ok"}'"'"'; cat >/dev/null'`)
			defer impl.Stop()
			impl.InitTimeout = 10 * time.Second
			p := &amqprun.Plan{Kind: "semaphore", Lock: "lp-init", Slots: 1}
			c, err := impl.Connect(context.Background(), nodePorts{urls: tc.urls}, p, "c1")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			b, err := os.ReadFile(got)
			if err != nil {
				t.Fatal(err)
			}
			var init struct {
				URL  string   `json:"url"`
				URLs []string `json:"urls"`
			}
			if err := json.Unmarshal(b, &init); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			want := tc.urls
			if len(want) == 1 {
				want = nil
			}
			if init.URL != tc.urls[0] || !slices.Equal(init.URLs, want) {
				t.Fatalf("init %s: want url %s and urls %v", b, tc.urls[0], want)
			}
		})
	}
}
