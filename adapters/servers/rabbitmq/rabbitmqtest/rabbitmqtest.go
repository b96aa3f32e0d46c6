// Package rabbitmqtest finds a RabbitMQ broker for tests.
//
// Import it only from _test.go files: it imports package testing and
// testcontainers-go (with Docker's client, OpenTelemetry and testify behind
// it), which must not end up in a non-test binary.
//
// URL looks, in this order, for:
//
//  1. the environment variable LOCKPROVER_AMQP_URL, used as is (not probed);
//  2. a broker on 127.0.0.1:5672, if a TCP connection to it succeeds within
//     500 ms; the URL is then amqp://guest:guest@127.0.0.1:5672/;
//  3. a RabbitMQ container started with testcontainers-go's rabbitmq module,
//     when a Docker engine answers a health check. The image is
//     $LOCKPROVER_RABBITMQ_IMAGE, else DefaultImage. At most one container
//     is started per test binary and it is shared by every test that asks
//     (the module writes its configuration to a fixed temporary path, so
//     concurrent starts would race). It carries the label
//     org.lockprover.rabbitmqtest=<pid of the test binary>, and a detached
//     watcher (sh and the docker CLI, no image) removes it once the test
//     binary has exited, however it ended: testcontainers-go's own reaper,
//     Ryuk, needs an image of its own that a machine without a registry
//     lacks (TESTCONTAINERS_RYUK_DISABLED=true turns it off; with Ryuk on,
//     both remove it). A container that fails to start is removed with
//     testcontainers.CleanupContainer at the end of the test that tried,
//     and that test fails (Docker works, so this is a real failure), unless
//     the image is neither in the engine nor pullable: then the test is
//     skipped, saying how to provide one;
//  4. nothing: the test is skipped with a message that says how to provide a
//     broker (set LOCKPROVER_AMQP_URL, start RabbitMQ on 127.0.0.1:5672, or
//     install Docker).
//
// LOCKPROVER_AMQP_CONTAINER=1 skips steps 1 and 2: the tests then use a
// container even where a broker answers on 127.0.0.1:5672, which is how CI
// here runs the path users' CI takes when it has Docker and no broker
// (.ci/run). Node reports the container's RabbitMQ node, for tests that
// assert which broker they used.
//
// The measured behaviour the adapter is tested against is RabbitMQ 3.10's,
// hence 3.10 images.
package rabbitmqtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/docker"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/testcontainers/testcontainers-go"
	tcrabbitmq "github.com/testcontainers/testcontainers-go/modules/rabbitmq"
)

const (
	// EnvVar names the environment variable that overrides discovery.
	EnvVar = "LOCKPROVER_AMQP_URL"
	// ContainerEnvVar, set to 1, makes URL use a container even where a
	// broker answers locally.
	ContainerEnvVar = "LOCKPROVER_AMQP_CONTAINER"
	// ImageEnvVar names the environment variable that chooses the image.
	ImageEnvVar = "LOCKPROVER_RABBITMQ_IMAGE"
	// DefaultImage is the image used when ImageEnvVar is unset: the official
	// one, pulled from Docker Hub. Where no registry is reachable, .ci/docker
	// builds lockprover/rabbitmq:3.10.8-deb12u1-1 from Debian's packages.
	DefaultImage = "rabbitmq:3.10-management-alpine"

	// label marks the containers URL starts; its value is the test
	// binary's process id.
	label = "org.lockprover.rabbitmqtest"

	localAddr    = "127.0.0.1:5672"
	localURL     = rabbitmq.DefaultURL
	probeTimeout = 500 * time.Millisecond
	startTimeout = 3 * time.Minute // image pull and broker boot

	skipMessage = "no RabbitMQ broker for this test: set " + EnvVar +
		" (e.g. amqp://guest:guest@host:5672/), or start RabbitMQ on " + localAddr +
		", or install Docker so that testcontainers-go can start a RabbitMQ 3.10 container" +
		" (" + ImageEnvVar + ", default " + DefaultImage + "; .ci/docker up starts an engine and builds one here)"
	containerSkipMessage = ContainerEnvVar + "=1 asks for a RabbitMQ container, but no Docker engine answers: " +
		"install Docker, or run .ci/docker up as root and export the DOCKER_HOST it prints"
)

// URL returns the URL of a RabbitMQ broker for a test, or skips the test
// saying how to provide one. Under -short (make check) it skips the test:
// the quick loop leaves real brokers to make test.
func URL(t testing.TB) string {
	t.Helper()
	quick.Skip(t, "RabbitMQ")
	if os.Getenv(ContainerEnvVar) == "1" {
		if !dockerAvailable() {
			t.Skip(containerSkipMessage)
		}
		u, err := sharedContainer(t)
		if errors.Is(err, docker.ErrNoImage) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatalf("rabbitmqtest: %s=1 and Docker answers, but the RabbitMQ container did not start: %v", ContainerEnvVar, err)
		}
		return u
	}
	return resolve(t, os.LookupEnv, localAddr, dockerAvailable, sharedContainer)
}

// Node returns the RabbitMQ node name of the container this test binary
// started ("rabbit@" and the container's host name, which is also what the
// broker announces as its cluster_name), its address on the Docker network,
// and whether a container was started at all.
func Node() (node, ip string, ok bool) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started || shared.err != nil {
		return "", "", false
	}
	return shared.node, shared.ip, true
}

// resolve is URL with its environment injected: lookupEnv reads the
// environment, probeAddr is the address probed for a local broker (the URL
// returned for it is amqp://guest:guest@probeAddr/), dockerOK reports whether
// a Docker engine is usable, and start starts (or reuses) a container and
// returns its AMQP URL.
func resolve(tb testing.TB,
	lookupEnv func(string) (string, bool),
	probeAddr string,
	dockerOK func() bool,
	start func(testing.TB) (string, error),
) string {
	tb.Helper()
	if u, ok := lookupEnv(EnvVar); ok && u != "" {
		return u
	}
	if probe(probeAddr) {
		if probeAddr == localAddr {
			return localURL
		}
		return "amqp://guest:guest@" + probeAddr + "/"
	}
	if dockerOK() {
		u, err := start(tb)
		if errors.Is(err, docker.ErrNoImage) {
			tb.Skip(err)
		}
		if err != nil {
			tb.Fatalf("rabbitmqtest: Docker is available but the RabbitMQ container did not start: %v", err)
		}
		return u
	}
	tb.Skip(skipMessage)
	return "" // not reached: Skip stops the test
}

// probe reports whether a TCP connection to addr succeeds within probeTimeout.
func probe(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// dockerAvailable reports whether testcontainers-go finds a healthy Docker
// engine. Like testcontainers.SkipIfProviderIsNotHealthy, it recovers the
// panics some provider paths raise when there is no Docker.
func dockerAvailable() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	provider, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return false
	}
	defer provider.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return provider.Health(ctx) == nil
}

var shared struct {
	mu      sync.Mutex
	started bool
	url     string
	node    string // RabbitMQ node name, rabbit@<container host name>
	ip      string // the container's address on its Docker network
	err     error
}

// sharedContainer starts the test binary's one RabbitMQ container, or
// returns the outcome of the first attempt.
func sharedContainer(tb testing.TB) (string, error) {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.started {
		return shared.url, shared.err
	}
	shared.started = true
	shared.url, shared.err = startContainer(tb)
	return shared.url, shared.err
}

func image() string {
	if img := os.Getenv(ImageEnvVar); img != "" {
		return img
	}
	return DefaultImage
}

func startContainer(tb testing.TB) (string, error) {
	tb.Helper()
	img := image()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := ensureImage(ctx, img); err != nil {
		return "", err
	}
	c, err := tcrabbitmq.Run(ctx, img,
		testcontainers.WithLabels(map[string]string{label: strconv.Itoa(os.Getpid())}))
	if c != nil {
		// Started, maybe half: removed when this binary exits, whatever
		// follows.
		if werr := watch(os.Getpid(), c.GetContainerID()); werr != nil {
			tb.Logf("rabbitmqtest: %v; remove container %s by hand (docker rm -f; label %s)", werr, c.GetContainerID(), label)
		}
	}
	if err != nil {
		// Run can return a half-started container with its error.
		testcontainers.CleanupContainer(tb, c)
		return "", fmt.Errorf("start %s: %w (if the reaper's image cannot be pulled, set TESTCONTAINERS_RYUK_DISABLED=true: rabbitmqtest removes its container itself)", img, err)
	}
	u, err := c.AmqpURL(ctx)
	if err != nil {
		testcontainers.CleanupContainer(tb, c)
		return "", fmt.Errorf("AMQP URL of %s: %w", img, err)
	}
	info, err := c.Inspect(ctx)
	if err != nil {
		testcontainers.CleanupContainer(tb, c)
		return "", fmt.Errorf("inspect the %s container: %w", img, err)
	}
	shared.node = "rabbit@" + info.Config.Hostname
	shared.ip, _ = c.ContainerIP(ctx)
	tb.Logf("rabbitmqtest: started %s, container %.12s, node %s, address %s, at %s", img, c.GetContainerID(), shared.node, shared.ip, u)
	// Shared by later tests; the watcher removes it when the binary exits.
	return u, nil
}

// ensureImage pulls img if the engine lacks it; an error wrapping
// docker.ErrNoImage (URL skips the test then) says how to provide it.
func ensureImage(ctx context.Context, img string) error {
	e, err := docker.Connect(ctx, "")
	if err != nil {
		return err
	}
	if ok, err := e.HasImage(ctx, img); err != nil || ok {
		return err
	}
	if err := e.Pull(ctx, img); err != nil {
		return fmt.Errorf("%w; set %s to an image the engine has (.ci/docker up builds one from Debian's packages where no registry is reachable)", err, ImageEnvVar)
	}
	return nil
}

// watch starts a detached watcher that removes container id once process
// pid (this test binary) has exited: a reaper without an image. It polls
// the process once a second with kill -0 and then runs docker rm -f -v with
// this process's DOCKER_HOST. Its output goes nowhere, so go test does not
// wait for it.
func watch(pid int, id string) error {
	docker, err := exec.LookPath("docker")
	if err != nil {
		return fmt.Errorf("no docker CLI to remove the container when the tests end: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c",
		`while kill -0 "$1" 2>/dev/null; do sleep 1; done; "$2" rm -f -v "$3" >/dev/null 2>&1`,
		"rabbitmqtest-watch", strconv.Itoa(pid), docker, id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the watcher that removes the container: %w", err)
	}
	return cmd.Process.Release()
}
