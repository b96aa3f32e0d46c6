package rabbitmq_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/lockprover/lockprover/backends/rabbitmq/rabbitmqtest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestBrokerIsContainer checks, when LOCKPROVER_AMQP_CONTAINER=1 (.ci/run
// sets it for one pass over this package on a Docker engine), that the
// broker this package's tests get from rabbitmqtest.URL is the container
// rabbitmqtest started: it announces the container's node as its
// cluster_name. Every test here shares that one URL.
func TestBrokerIsContainer(t *testing.T) {
	if os.Getenv(rabbitmqtest.ContainerEnvVar) != "1" {
		t.Skip(rabbitmqtest.ContainerEnvVar + " is not 1: the tests use whichever broker rabbitmqtest finds first")
	}
	e := newEnv(t)
	node, ip, ok := rabbitmqtest.Node()
	if !ok {
		t.Fatalf("%s=1 but rabbitmqtest started no container", rabbitmqtest.ContainerEnvVar)
	}
	conn, err := amqp.Dial(e.url)
	if err != nil {
		t.Fatalf("dial %s: %v", e.url, err)
	}
	defer conn.Close()
	if got := fmt.Sprint(conn.Properties["cluster_name"]); got != node {
		t.Fatalf("the tests' broker %s is %q, not the container's node %q", e.url, got, node)
	}
	t.Logf("the tests' broker is container node %s at %s (%s)", node, ip, e.url)
}
