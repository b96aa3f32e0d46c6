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
//  3. a RabbitMQ container (image Image) started with testcontainers-go's
//     rabbitmq module, when a Docker engine answers a health check. At most
//     one container is started per test binary and it is shared by every test
//     that asks (the module writes its configuration to a fixed temporary
//     path, so concurrent starts would race). It is left running until the
//     test binary exits, when testcontainers-go's reaper (Ryuk) removes it;
//     with TESTCONTAINERS_RYUK_DISABLED=true it is left behind and must be
//     removed by hand (docker ps --filter label=org.testcontainers=true). A
//     container that fails to start is removed with
//     testcontainers.CleanupContainer at the end of the test that tried, and
//     that test fails (Docker works, so this is a real failure);
//  4. nothing: the test is skipped with a message that says how to provide a
//     broker (set LOCKPROVER_AMQP_URL, start RabbitMQ on 127.0.0.1:5672, or
//     install Docker).
//
// The measured behaviour the adapter is tested against is RabbitMQ 3.10's,
// hence a 3.10 image.
package rabbitmqtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/backends/rabbitmq"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/testcontainers/testcontainers-go"
	tcrabbitmq "github.com/testcontainers/testcontainers-go/modules/rabbitmq"
)

const (
	// EnvVar names the environment variable that overrides discovery.
	EnvVar = "LOCKPROVER_AMQP_URL"
	// Image is the container image used when a container has to be started.
	Image = "rabbitmq:3.10-management-alpine"

	localAddr    = "127.0.0.1:5672"
	localURL     = rabbitmq.DefaultURL
	probeTimeout = 500 * time.Millisecond
	startTimeout = 3 * time.Minute // image pull and broker boot

	skipMessage = "no RabbitMQ broker for this test: set " + EnvVar +
		" (e.g. amqp://guest:guest@host:5672/), or start RabbitMQ on " + localAddr +
		", or install Docker so that testcontainers-go can start " + Image
)

// URL returns the URL of a RabbitMQ broker for a test, or skips the test
// saying how to provide one. Under -short (make check) it skips the test:
// the quick loop leaves real brokers to make test.
func URL(t testing.TB) string {
	t.Helper()
	quick.Skip(t, "RabbitMQ")
	return resolve(t, os.LookupEnv, localAddr, dockerAvailable, sharedContainer)
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

func startContainer(tb testing.TB) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := tcrabbitmq.Run(ctx, Image)
	if err != nil {
		// Run can return a half-started container with its error.
		testcontainers.CleanupContainer(tb, c)
		return "", fmt.Errorf("start %s: %w", Image, err)
	}
	u, err := c.AmqpURL(ctx)
	if err != nil {
		testcontainers.CleanupContainer(tb, c)
		return "", fmt.Errorf("AMQP URL of %s: %w", Image, err)
	}
	// Shared by later tests; the reaper removes it when the binary exits.
	return u, nil
}
