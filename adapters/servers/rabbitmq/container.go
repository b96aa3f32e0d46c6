package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/host/docker"
)

const (
	// ContainerLabel marks the broker containers lockprover's verbs start;
	// its value is the pid of the lockprover that started one.
	ContainerLabel = "org.lockprover.broker"
	// ContainerImage is the image a broker container is made from unless
	// told otherwise: RabbitMQ 4.3, what users deploy now (Khepri, no
	// Mnesia), from Docker Hub; the reference holds on 4.3.6
	// (docs/amqp-locks.md). Where no registry is reachable, .ci/docker
	// builds lockprover/rabbitmq:4.3.6-1-1 from Debian's packages (`up
	// 4.3.6`), and the 3.10.8 image the suite runs on (`up`).
	ContainerImage = "rabbitmq:4.3-management"
	// containerReady bounds a broker container's boot (RabbitMQ takes about
	// 5 s here).
	containerReady = 2 * time.Minute
)

// A Container is a private RabbitMQ broker in a Docker container.
type Container struct {
	c *docker.Container
	// URL reaches the broker at the container's address on the engine's
	// bridge, so that the broker sees each client's own address (which
	// force-close needs), not the port publisher's; at the port published
	// on 127.0.0.1 when the bridge cannot be reached from here.
	URL string
	// Ctl runs rabbitmqctl on the container's node (docker exec).
	Ctl []string
	// Node is the broker's node name, rabbit@ and the container's host
	// name.
	Node string
	// Image is the image it runs.
	Image string
}

// ID is the container's ID, shortened as docker ps shows it.
func (c *Container) ID() string { return c.c.ID[:12] }

// StartContainer starts a RabbitMQ broker in a container of image (pulled
// if the engine lacks it) and returns once it accepts AMQP connections.
// Errors say what is missing and how to get it: the docker CLI (rabbitmqctl
// on the broker goes through docker exec), the image (wrapping
// docker.ErrNoImage), a broker that did not start (with the end of its
// log). On an error nothing is left running.
func StartContainer(ctx context.Context, e *docker.Engine, image string) (*Container, error) {
	cli, err := exec.LookPath("docker")
	if err != nil {
		return nil, errors.New("a broker container needs the docker CLI (rabbitmqctl runs in it through docker exec, for force-close and the clean-up): install it beside the engine")
	}
	has, err := e.HasImage(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", e.Host(), err)
	}
	if !has {
		if err := e.Pull(ctx, image); err != nil {
			return nil, fmt.Errorf("%w\nthe image %s is not in the Docker engine at %s and could not be pulled: docker pull it, or build lockprover's own from Debian's packages (.ci/docker up 4.3.6, as root, builds %s) and name it with --docker-image", err, image, e.Host(), "lockprover/rabbitmq:4.3.6-1-1")
		}
	}
	dc, err := e.Run(ctx, docker.Spec{Image: image, Port: "5672/tcp", Label: ContainerLabel})
	if err != nil {
		return nil, err
	}
	c := &Container{c: dc, Image: image, Node: "rabbit@" + dc.Hostname,
		Ctl: []string{cli, "-H", e.Host(), "exec", "-i", dc.ID, "rabbitmqctl"}}
	fail := func(err error) (*Container, error) {
		c.Remove()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, containerReady)
	defer cancel()
	for {
		// The bridge address first: reachable from the engine's host on
		// Linux; the published port otherwise (Docker Desktop).
		for _, addr := range []string{net.JoinHostPort(dc.IP, "5672"), dc.Published} {
			if dc.IP == "" && addr != dc.Published {
				continue
			}
			u := "amqp://guest:guest@" + addr + "/"
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			err = Preflight(pctx, u, 2*time.Second)
			pcancel()
			if err == nil {
				c.URL = u
				return c, nil
			}
		}
		if !dc.Running(ctx) {
			return fail(fmt.Errorf("the RabbitMQ container %s (%s) stopped before it accepted connections; the end of its log:\n%s", c.ID(), image, lastLines(dc.Logs(context.WithoutCancel(ctx), 20))))
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fail(fmt.Errorf("the RabbitMQ container %s (%s) did not accept AMQP connections within %v (last: %v); the end of its log:\n%s", c.ID(), image, containerReady, err, lastLines(dc.Logs(context.WithoutCancel(ctx), 20))))
			}
			return fail(ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Remove removes the container (within 30 s); it may be called more than
// once.
func (c *Container) Remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.c.Remove(ctx)
}

func lastLines(s string) string {
	return strings.TrimRight(s, "\n")
}
