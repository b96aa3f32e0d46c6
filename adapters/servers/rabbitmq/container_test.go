package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/docker"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/internal/quick"
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

// containerImage is the image the container tests use.
func containerImage() string {
	if img := os.Getenv("LOCKPROVER_RABBITMQ_IMAGE"); img != "" {
		return img
	}
	return rabbitmq.ContainerImage
}

// startContainer starts a broker container for a test, removed at its
// end, or skips the test saying what is missing.
func startContainer(t *testing.T) *rabbitmq.Container {
	t.Helper()
	quick.Skip(t, "Docker")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := docker.Connect(ctx, "")
	if err != nil {
		t.Skipf("%v (as root, .ci/docker up starts one and prints its DOCKER_HOST)", err)
	}
	c, err := rabbitmq.StartContainer(ctx, e, containerImage())
	if errors.Is(err, docker.ErrNoImage) {
		t.Skipf("%v (set LOCKPROVER_RABBITMQ_IMAGE to an image the engine has)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Remove(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// TestContainerForceClose starts a broker container as prove --docker
// does and checks what a run needs of it: its URL reaches the container's
// node (cluster_name), the broker sees a client at the client's own
// address (not the port publisher's), so that rabbitmqctl through docker
// exec (Container.Ctl) closes exactly that client's connection; and
// Remove leaves no container behind.
func TestContainerForceClose(t *testing.T) {
	c := startContainer(t)
	conn, err := amqp.Dial(c.URL)
	if err != nil {
		t.Fatalf("dial %s: %v", c.URL, err)
	}
	defer conn.Close()
	if got := fmt.Sprint(conn.Properties["cluster_name"]); got != c.Node {
		t.Fatalf("the broker at %s is %q, not the container's node %q", c.URL, got, c.Node)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctl := rabbitmq.NewCtl(c.Ctl, "/", true)
	defer ctl.Close()
	if err := ctl.CloseConnectionsFrom(ctx, []string{conn.LocalAddr().String()}, "lockprover test"); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced {
			t.Fatalf("connection closed with %v, want 320 CONNECTION_FORCED", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("rabbitmqctl %v did not close the connection from %s", c.Ctl, conn.LocalAddr())
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	e, err := docker.Connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := e.Labelled(ctx, rabbitmq.ContainerLabel, strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 0 {
		t.Fatalf("containers %v are left after Remove", ids)
	}
}
