package docker

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// serve runs handler as an engine on a unix socket and returns its
// DOCKER_HOST.
func serve(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "unix://" + sock
}

func TestConnectSaysWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	t.Setenv("DOCKER_TLS_VERIFY", "")

	_, err := Connect(ctx, "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	if !errors.Is(err, ErrNoEngine) || !strings.Contains(err.Error(), "install Docker") {
		t.Errorf("no socket: %v, want ErrNoEngine saying to install Docker", err)
	}

	// A socket file nobody listens on: a refused connection.
	dead := filepath.Join(t.TempDir(), "dead.sock")
	l, err := net.Listen("unix", dead)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	_, err = Connect(ctx, "unix://"+dead)
	if !errors.Is(err, ErrNoEngine) || !strings.Contains(err.Error(), "start Docker") {
		t.Errorf("refused: %v, want ErrNoEngine saying to start Docker", err)
	}

	notDocker := serve(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "teapot", http.StatusTeapot) })
	_, err = Connect(ctx, notDocker)
	if !errors.Is(err, ErrNotAnswer) || !strings.Contains(err.Error(), "418") {
		t.Errorf("not an engine: %v, want ErrNotAnswer naming the answer", err)
	}

	if _, err := Connect(ctx, "ssh://host"); err == nil || !strings.Contains(err.Error(), "unix:///path or tcp://host:port") {
		t.Errorf("ssh://: %v, want the schemes it takes", err)
	}
	t.Setenv("DOCKER_TLS_VERIFY", "1")
	if _, err := Connect(ctx, notDocker); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("DOCKER_TLS_VERIFY: %v, want a refusal naming TLS", err)
	}
}

// TestMissingImage: an engine without the image and a registry that
// cannot give it; both errors wrap ErrNoImage and name the image.
func TestMissingImage(t *testing.T) {
	host := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/_ping":
			w.Write([]byte("OK"))
		case strings.HasPrefix(r.URL.Path, "/images/") && strings.HasSuffix(r.URL.Path, "/json"):
			http.Error(w, `{"message":"No such image"}`, http.StatusNotFound)
		case r.URL.Path == "/images/create":
			if r.URL.Query().Get("fromImage") != "example/rabbit" || r.URL.Query().Get("tag") != "3.10" {
				t.Errorf("pull asked for %v", r.URL.Query())
			}
			w.Write([]byte(`{"status":"Pulling"}` + "\n" + `{"error":"Get https://registry-1.docker.io/v2/: dial tcp: i/o timeout"}` + "\n"))
		case r.URL.Path == "/containers/create":
			http.Error(w, `{"message":"No such image: example/rabbit:3.10"}`, http.StatusNotFound)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			http.NotFound(w, r)
		}
	})
	ctx := context.Background()
	e, err := Connect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.HasImage(ctx, "example/rabbit:3.10"); ok || err != nil {
		t.Errorf("HasImage = %v, %v; want false, nil", ok, err)
	}
	err = e.Pull(ctx, "example/rabbit:3.10")
	if !errors.Is(err, ErrNoImage) || !strings.Contains(err.Error(), "i/o timeout") {
		t.Errorf("Pull: %v, want ErrNoImage with the registry's error", err)
	}
	_, err = e.Run(ctx, Spec{Image: "example/rabbit:3.10", Port: "5672/tcp", Label: "test"})
	if !errors.Is(err, ErrNoImage) || !strings.Contains(err.Error(), "example/rabbit:3.10") {
		t.Errorf("Run: %v, want ErrNoImage naming the image", err)
	}
}
