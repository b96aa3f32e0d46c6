package cli

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/docker"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/quick"
)

// dockerImage is the broker image the --docker tests use.
func dockerImage() string {
	if img := os.Getenv("LOCKPROVER_RABBITMQ_IMAGE"); img != "" {
		return img
	}
	return rabbitmq.ContainerImage
}

// TestProveDockerInterrupted proves the reference on a private broker
// container (--docker always: a broker answers here on 127.0.0.1:5672,
// where users' CI has none), interrupts the run once it has started, and
// checks that it exits 130 having removed its container.
func TestProveDockerInterrupted(t *testing.T) {
	quick.Skip(t, "Docker")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := docker.Connect(ctx, "")
	if err != nil {
		t.Skipf("%v (as root, .ci/docker up starts one and prints its DOCKER_HOST)", err)
	}
	if ok, err := e.HasImage(ctx, dockerImage()); err != nil || !ok {
		t.Skipf("the engine has no %s (%v): set LOCKPROVER_RABBITMQ_IMAGE to one it has (.ci/docker up builds one)", dockerImage(), err)
	}
	bin := builtBinary(t)
	cmd := exec.Command(bin, "prove", "--target", "rabbitmq", "--docker", "always", "--docker-image", dockerImage(),
		"--time", "2m", "--seed", "7", "--out", filepath.Join(t.TempDir(), "out"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var said strings.Builder
	started := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			said.WriteString(sc.Text() + "\n")
			if rest, ok := strings.CutPrefix(sc.Text(), "lockprover: started RabbitMQ container "); ok {
				started <- strings.Fields(rest)[0]
			}
		}
		close(started)
	}()
	var id string
	select {
	case id = <-started:
	case <-time.After(2 * time.Minute):
		t.Fatal("no container started within 2 minutes")
	}
	if id == "" {
		cmd.Wait()
		t.Fatalf("prove ended without starting a container:\n%s", said.String())
	}
	time.Sleep(2 * time.Second) // plans run
	cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("prove: %v, want exit %d; stderr:\n%s", err, exitInterrupted, said.String())
	}
	if !strings.Contains(said.String(), "removed RabbitMQ container "+id) {
		t.Errorf("prove did not say it removed container %s:\n%s", id, said.String())
	}
	ids, err := e.Labelled(ctx, rabbitmq.ContainerLabel, strconv.Itoa(cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 0 {
		t.Fatalf("containers %v left after the interrupted run:\n%s", ids, said.String())
	}
}

// fakeEngine answers as a Docker engine that holds no image and whose
// registry is out of reach.
func fakeEngine(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/_ping":
			w.Write([]byte("OK"))
		case r.URL.Path == "/images/create":
			w.Write([]byte(`{"error":"dial tcp: lookup registry-1.docker.io: no such host"}` + "\n"))
		default:
			http.Error(w, `{"message":"No such image"}`, http.StatusNotFound)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "unix://" + sock
}

// TestProveDockerSaysWhatIsMissing: with --docker and no engine, an
// engine that does not answer, or an image neither there nor pullable,
// prove exits 2 naming what is missing and how to get it.
func TestProveDockerSaysWhatIsMissing(t *testing.T) {
	quick.Skip(t, "the lockprover binary")
	bin := builtBinary(t)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker CLI: a broker container needs it, and prove says so before it asks the engine")
	}
	teapot := filepath.Join(t.TempDir(), "teapot.sock")
	l, err := net.Listen("unix", teapot)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusTeapot) })}
	go srv.Serve(l)
	defer srv.Close()
	for _, tt := range []struct {
		name, host string
		want       []string
	}{
		{"no engine", "unix://" + filepath.Join(t.TempDir(), "none.sock"), []string{"--docker always", "no Docker engine", "install Docker"}},
		{"engine not answering", "unix://" + teapot, []string{"does not answer", "418"}},
		{"image missing", fakeEngine(t), []string{"example/rabbitmq:none", "could not be pulled", ".ci/docker up", "--docker-image"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, "prove", "--target", "rabbitmq", "--docker", "always", "--docker-image", "example/rabbitmq:none", "--runs", "1", "--out", filepath.Join(t.TempDir(), "out"))
			cmd.Env = append(os.Environ(), "DOCKER_HOST="+tt.host)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
				t.Fatalf("prove: %v, want exit %d\n%s", err, exitUsage, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestDockerFlagsRefused: bad --docker values and combinations are usage
// errors, named.
func TestDockerFlagsRefused(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", "rabbitmq", "--docker", "sometimes"}, "--docker: want auto, always or off"},
		{[]string{"--target", "rabbitmq", "--docker", "always", "--amqp-url", "amqp://guest:guest@127.0.0.1:5672/"}, "not with --amqp-url"},
		{[]string{"--target", "rabbitmq", "--docker", "off", "--docker-image", "x:1"}, "not with --docker off"},
		{[]string{"--docker", "always"}, "--docker is for a real broker"},
	} {
		var stdout, stderr strings.Builder
		code := Run(append([]string{"prove", "--runs", "1"}, tt.args...), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("prove %v: exit %d, stderr %q; want exit %d saying %q", tt.args, code, stderr.String(), exitUsage, tt.want)
		}
	}
}

// TestProveDockerAuto runs prove as a user's CI runs it: no broker named,
// none on 127.0.0.1:5672, only Docker. The machine here has a broker on
// 127.0.0.1:5672, so prove runs inside a container of the broker image
// (its own loopback, nothing on 5672) with the engine's socket, a static
// lockprover and the docker CLI mounted in; given no --docker flag, it
// must start a broker container of its own, prove on it, and remove it.
//
// The binary is the Dockerfile's (staticBinary: make static runs this
// test), built before the run's deadline starts: the build took minutes
// beside the suite, and once ate the 3 minutes meant for prove.
func TestProveDockerAuto(t *testing.T) {
	quick.Skip(t, "Docker")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := docker.Connect(ctx, "")
	if err != nil {
		t.Skipf("%v (as root, .ci/docker up starts one and prints its DOCKER_HOST)", err)
	}
	sock, ok := strings.CutPrefix(e.Host(), "unix://")
	if !ok {
		t.Skipf("DOCKER_HOST %s is not a unix socket to mount into the container", e.Host())
	}
	image := dockerImage()
	if ok, err := e.HasImage(ctx, image); err != nil || !ok {
		t.Skipf("the engine has no %s (%v): set LOCKPROVER_RABBITMQ_IMAGE to one it has (.ci/docker up builds one)", image, err)
	}
	cli, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker CLI to run the container with")
	}
	bin := staticBinary(t)
	// A bound for a wedged engine, not a measure: the container's prove of
	// three plans takes seconds.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, cli, "run", "--rm", "--user", "root", "--entrypoint", "lockprover",
		"-v", bin+":/usr/local/bin/lockprover:ro", "-v", cli+":/usr/local/bin/docker:ro", "-v", sock+":/run/docker.sock",
		"-e", "DOCKER_HOST=unix:///run/docker.sock", "-e", "LOCKPROVER_RABBITMQ_IMAGE="+image, "-w", "/tmp",
		image, "prove", "--target", "rabbitmq", "--runs", "3", "--seed", "5")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("prove in a container: %v\n%s", err, out)
	}
	for _, w := range []string{"none answers at amqp://guest:xxxxx@127.0.0.1:5672/", "started RabbitMQ container", "every property held", "removed RabbitMQ container"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("prove did not say %q:\n%s", w, out)
		}
	}
	_, rest, _ := strings.Cut(string(out), "started RabbitMQ container ")
	id, _, _ := strings.Cut(rest, " ")
	left, err := e.Labelled(ctx, rabbitmq.ContainerLabel, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		if id != "" && strings.HasPrefix(l, id) {
			t.Errorf("container %s is left after the run", id)
		}
	}
}
