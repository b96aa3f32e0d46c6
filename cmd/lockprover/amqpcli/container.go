package amqpcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/lockprover/lockprover/adapters/host/docker"
	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
)

// The --docker modes: a private broker container when no broker is named
// and none answers at the default address (auto), always, or never.
const (
	dockerAuto   = "auto"
	dockerAlways = "always"
	dockerOff    = "off"
)

// imageEnvVar names the environment variable that chooses the broker
// container's image when --docker-image is not given (the tests'
// rabbitmqtest reads it too).
const imageEnvVar = "LOCKPROVER_RABBITMQ_IMAGE"

// containerChoice says whether the run starts a private broker container
// (--docker, --docker-image, --amqp-url, $LOCKPROVER_AMQP_URL and whether a
// broker answers at rabbitmq.DefaultURL, as up says), and from which
// image.
func containerChoice(s family.Settings, up func(url string) bool) (bool, string, error) {
	mode, image := s.Flag("docker"), s.Flag("docker-image")
	if mode == "" {
		mode = dockerAuto
	}
	named := s.Given("amqp-url") || os.Getenv("LOCKPROVER_AMQP_URL") != ""
	switch {
	case mode != dockerAuto && mode != dockerAlways && mode != dockerOff:
		return false, "", fmt.Errorf("--docker: want auto, always or off, not %q", mode)
	case mode == dockerAlways && s.Given("amqp-url"):
		return false, "", errors.New("--docker always starts a broker of the run's own: not with --amqp-url")
	case mode == dockerOff && s.Given("docker-image"):
		return false, "", errors.New("--docker-image names the image of a broker container: not with --docker off")
	}
	if image == "" {
		image = os.Getenv(imageEnvVar)
	}
	if image == "" {
		image = rabbitmq.ContainerImage
	}
	switch mode {
	case dockerAlways:
		return true, image, nil
	case dockerOff:
		return false, image, nil
	}
	return !named && !up(rabbitmq.DefaultURL), image, nil
}

// answers reports whether a TCP connection to the URL's host and port
// succeeds within 500 ms.
func answers(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	c, err := net.DialTimeout("tcp", u.Host, 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// A brokerBox is the broker container of one run, once started.
type brokerBox struct {
	image  string
	stderr io.Writer
	c      *rabbitmq.Container
	leave  func()
}

func newBox(s family.Settings, image string) *brokerBox {
	b := &brokerBox{image: image, stderr: s.Stderr}
	if b.stderr == nil {
		b.stderr = io.Discard
	}
	return b
}

// start starts the container (a *family.UsageError says what is missing:
// Docker, its engine, the image) and says so on stderr.
func (b *brokerBox) start(ctx context.Context, always bool) error {
	why := "no RabbitMQ broker was named (--amqp-url, $LOCKPROVER_AMQP_URL) and none answers at " + rabbitmq.RedactURL(rabbitmq.DefaultURL) + ", so lockprover starts one in Docker (--docker off: never)"
	if always {
		why = "--docker always starts a RabbitMQ broker in Docker"
	}
	e, err := docker.Connect(ctx, "")
	if err != nil {
		return family.Usagef("%s, but: %v", why, err)
	}
	fmt.Fprintf(b.stderr, "lockprover: %s: starting %s on %s\n", why, b.image, e.Host())
	started := time.Now()
	c, err := rabbitmq.StartContainer(ctx, e, b.image)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return family.Usagef("%s, but: %v", why, err)
	}
	b.c = c
	b.leave = prover.Leave(fmt.Sprintf("the RabbitMQ container %s (docker rm -f %s)", c.ID(), c.ID()))
	fmt.Fprintf(b.stderr, "lockprover: started RabbitMQ container %s (node %s) at %s in %.1fs; it is removed when the run ends\n",
		c.ID(), c.Node, rabbitmq.RedactURL(c.URL), time.Since(started).Seconds())
	return nil
}

// stop removes the container, if one was started; it may be called more
// than once.
func (b *brokerBox) stop() {
	if b.c == nil {
		return
	}
	c := b.c
	b.c = nil
	if err := c.Remove(); err != nil {
		fmt.Fprintf(b.stderr, "lockprover: %v\n", err)
		return
	}
	b.leave()
	fmt.Fprintf(b.stderr, "lockprover: removed RabbitMQ container %s\n", c.ID())
}

// target is the real target on the container's broker.
func (b *brokerBox) target(restart bool) amqprun.RabbitMQ {
	return amqprun.RabbitMQ{URL: b.c.URL, Ctl: b.c.Ctl, AllowRestart: restart}
}
