package descriptor

import (
	"strings"
	"testing"

	"github.com/lockprover/lockprover/family"
)

// --target rabbitmq-cluster's flags are refused where they mean nothing
// or say something wrong, each naming the flag.
func TestClusterSetupRefusals(t *testing.T) {
	for _, tt := range []struct {
		name, target, faults string
		flags                map[string]string
		err                  string
	}{
		{"mode without the cluster", "sim", "all", map[string]string{"partition-handling": "autoheal"}, "--partition-handling is for a cluster: add --target rabbitmq-cluster"},
		{"ticktime on a broker", "rabbitmq", "all", map[string]string{"net-ticktime": "5s"}, "--net-ticktime is for a cluster"},
		{"bad mode", clusterTarget, "all", map[string]string{"partition-handling": "pause_majority"}, `--partition-handling: want ignore, pause_minority or autoheal, not "pause_majority"`},
		{"part seconds", clusterTarget, "all", map[string]string{"net-ticktime": "2500ms"}, "--net-ticktime: want whole seconds"},
		{"URL on the cluster", clusterTarget, "all", map[string]string{"amqp-url": "amqp://u:p@h:5672/"}, "--amqp-url is not for --target rabbitmq-cluster"},
		{"cluster fault on the simulator", "sim", "isolate-node", nil, "--faults: isolate-node strikes a cluster: add --target rabbitmq-cluster"},
		{"broker restart on the cluster", clusterTarget, "restart-broker", nil, "restart-node restarts a node"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			flags := map[string]string{"partition-handling": "ignore", "net-ticktime": "5s", "docker": dockerAuto}
			given := map[string]bool{}
			for k, v := range tt.flags {
				flags[k], given[k] = v, true
			}
			s := family.Settings{Kind: "semaphore", Target: tt.target, Faults: tt.faults,
				Flag: func(n string) string { return flags[n] }, Given: func(n string) bool { return given[n] }}
			_, err := amqpSetup(s)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("err = %v, want one saying %q", err, tt.err)
			}
		})
	}
}
