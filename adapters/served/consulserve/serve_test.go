package consulserve_test

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/served/consulserve"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// A client is a real client beside the World's process wp, served as sp.
type client func(w *consulsim.World, wp *consulsim.Process, sp *consulserve.Process) error

// serve runs each client, in a goroutine of its own, as the World's
// process of its name (in sorted order of names), and returns what the
// World and the served agent saw.
func serve(t *testing.T, wo consulsim.Options, o consulserve.Options, clients map[string]client) (*consulsim.World, *consulserve.Broker, map[string]error) {
	t.Helper()
	w, err := consulsim.New(wo)
	if err != nil {
		t.Fatal(err)
	}
	s, err := consulserve.New(w, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	errs := map[string]error{}
	names := make([]string, 0, len(clients))
	for n := range clients {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		w.Go(name, func(wp *consulsim.Process) {
			sp, err := s.Process(wp)
			if err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
				return
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				err := clients[name](w, wp, sp)
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}()
			if sp.Await(done, time.After(30*time.Second), nil) != process.Ready {
				mu.Lock()
				errs[name] = errors.New("the client did not finish in 30 s")
				mu.Unlock()
			}
		})
	}
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	return w, s, errs
}

func check(t *testing.T, errs map[string]error) {
	t.Helper()
	for n, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// consulAPI is consul/api's client of sp's agent, as consul/api makes
// it.
func consulAPI(t *testing.T, sp *consulserve.Process) *api.Client {
	c, err := api.NewClient(&api.Config{Address: sp.Addr(), Scheme: "http"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// semaphore acquires consul/api's Semaphore of limit 1 with a session of
// its own, as examples/upstream/consulrecipe's adapter does.
func semaphore(c *api.Client) (*api.Semaphore, <-chan struct{}, string, error) {
	id, _, err := c.Session().Create(&api.SessionEntry{Name: "sem", TTL: "10s", Behavior: api.SessionBehaviorDelete}, nil)
	if err != nil {
		return nil, nil, "", err
	}
	sem, err := c.SemaphoreOpts(&api.SemaphoreOptions{Prefix: "lp", Limit: 1, Session: id, SemaphoreTryOnce: true, SemaphoreWaitTime: 50 * time.Millisecond})
	if err != nil {
		return nil, nil, id, err
	}
	lost, err := sem.Acquire(nil)
	return sem, lost, id, err
}

// TestSemaphoreOnTheServedAgent: consul/api's Semaphore, unmodified, on
// the served agent (semaphoreClients), its grant a check-and-set of the
// lock key.
func TestSemaphoreOnTheServedAgent(t *testing.T) {
	_, s, errs := serve(t, consulsim.Options{}, consulserve.Options{}, semaphoreClients(t))
	check(t, errs)
	if u := s.Unserved(); len(u) > 0 {
		t.Errorf("unserved: %v", u)
	}
	log := s.Log()
	if !slices.ContainsFunc(log["c1"], func(st string) bool { return strings.HasPrefix(st, "PUT /v1/kv/lp/.lock?cas=0&flags=") }) {
		t.Errorf("c1's log has no grant of the lock key: %q", log["c1"])
	}
}

// TestReplayTakesTheLoggedSteps: the run again with its log takes the
// same steps, and the World's trace is the same, byte for byte.
func TestReplayTakesTheLoggedSteps(t *testing.T) {
	var first, again strings.Builder
	_, s, errs := serve(t, consulsim.Options{Trace: &first}, consulserve.Options{}, semaphoreClients(t))
	check(t, errs)
	_, r, errs := serve(t, consulsim.Options{Trace: &again}, consulserve.Options{Script: s.Log()}, semaphoreClients(t))
	check(t, errs)
	if d := r.Diverged(); len(d) > 0 {
		t.Fatalf("the replay left its log: %v", d)
	}
	if first.String() != again.String() {
		t.Errorf("the replay's trace differs:\n%s\n---\n%s", first.String(), again.String())
	}
}

// semaphoreClients: c1 takes the slot, c2 is told full at 1 s (its
// try-once blocking query waits in virtual time), c1 releases at 2 s and
// its channel closes once the monitor sees it, and c2 takes the slot at
// 3 s.
func semaphoreClients(t *testing.T) map[string]client {
	return map[string]client{
		"c1": func(w *consulsim.World, wp *consulsim.Process, sp *consulserve.Process) error {
			sem, lost, _, err := semaphore(consulAPI(t, sp))
			if err != nil || lost == nil {
				return errors.Join(err, errors.New("c1 not granted"))
			}
			sp.Do(func() { wp.Sleep(2 * time.Second) })
			if err := sem.Release(); err != nil {
				return err
			}
			select {
			case <-lost:
			case <-time.After(5 * time.Second):
				return errors.New("c1's channel still open after its release")
			}
			return nil
		},
		"c2": func(w *consulsim.World, wp *consulsim.Process, sp *consulserve.Process) error {
			c := consulAPI(t, sp)
			sp.Do(func() { wp.Sleep(time.Second) })
			if _, lost, _, err := semaphore(c); err != nil || lost != nil {
				return errors.Join(err, errors.New("c2 granted while c1 holds"))
			}
			sp.Do(func() { wp.Sleep(2 * time.Second) })
			if _, lost, _, err := semaphore(c); err != nil || lost == nil {
				return errors.Join(err, errors.New("c2 not granted once c1 released"))
			}
			return nil
		},
	}
}

// TestUnknownPathIsNamed: a path the agent does not serve is answered as
// Consul answers one it does not know, and named.
func TestUnknownPathIsNamed(t *testing.T) {
	_, s, errs := serve(t, consulsim.Options{}, consulserve.Options{}, map[string]client{
		"c1": func(w *consulsim.World, wp *consulsim.Process, sp *consulserve.Process) error {
			resp, err := http.Get("http://" + sp.Addr() + "/v1/agent/self")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 404 || string(b) != "Invalid URL path: not a recognized HTTP API endpoint\n" {
				return errors.New("answered " + resp.Status + ": " + string(b))
			}
			return nil
		},
	})
	check(t, errs)
	if u := s.Unserved(); !slices.Equal(u, []string{"GET /v1/agent/self"}) {
		t.Errorf("unserved %q, want the agent's self", u)
	}
}
