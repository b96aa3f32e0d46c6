package consulsemcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/conform/consulconform"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// consulConformFloor is the private Consul agent's session_ttl_min: the
// differential's short sessions have a TTL of one second.
const consulConformFloor = time.Second

// consulConform runs drawn sequences of every call the Consul semaphore
// recipe makes (consulsem) on the simulator (sim/consulsim) and on private
// real servers (a Consul agent, an etcd), started for the run and removed
// after it, and compares the answers step by step
// (consulconform.Differential): the one --backend names, both when it is not
// given. A backend whose binary is missing is a usage error naming
// --backend; more than a tenth of a backend's sequences
// inconclusive (the machine too slow to judge expiry by) makes the run
// inconclusive.
func consulConform(ctx context.Context, s family.Settings, c family.ConformConfig, out io.Writer) (family.Conformance, error) {
	if c.Sequences == 0 {
		return 0, family.Usagef("--sequences 0 leaves nothing to run with --kind %s", s.Kind)
	}
	backends, err := consulBackends(s)
	if err != nil {
		return 0, err
	}
	worst := family.Agree
	for _, b := range backends {
		v, err := serverVersion(s, b)
		if err != nil {
			return 0, err
		}
		if err := serverversion.Have(ctx, v, c.Log); err != nil {
			return 0, err
		}
		if s.Flag("cluster") != "" {
			res, err := clusterConform(ctx, b, v, c, out)
			if err != nil {
				return 0, err
			}
			worst = max(worst, res)
			continue
		}
		k := map[string]consulsim.Kind{consulsemrun.Consul: consulsim.Consul, consulsemrun.Etcd: consulsim.Etcd}[b]
		res, err := consulConformOne(ctx, k, v, c, out)
		if err != nil {
			return 0, err
		}
		worst = max(worst, res)
	}
	return worst, nil
}

// consulBackends are the real servers --backend names for conform and
// bench: the one given, both (Consul, then etcd) when it is not given,
// which --server-version, the version of one, refuses.
func consulBackends(s family.Settings) ([]string, error) {
	backends := []string{consulsemrun.Consul, consulsemrun.Etcd}
	if !s.Given("backend") {
		if v := s.Flag("server-version"); v != "" {
			return nil, family.Usagef("--server-version %s: the version of one server: give --backend etcd or --backend consul", v)
		}
		return backends, nil
	}
	b := s.Flag("backend")
	if !slices.Contains(backends, b) {
		return nil, family.Usagef("--backend %q: want consul or etcd", b)
	}
	return []string{b}, nil
}

// consulBench is bench --kind consul-semaphore: the reference beside its
// floors on a private server of each backend --backend names (both when
// it is not given), whose binaries are looked for first: a missing one is
// a usage error naming --backend.
func consulBench(ctx context.Context, s family.Settings, c bench.Config, out io.Writer) error {
	if s.Options != "" {
		return family.Usagef("--options: consul-semaphore's bench measures the reference with its default options")
	}
	backends, err := consulBackends(s)
	if err != nil {
		return err
	}
	vs := make([]versions.Version, len(backends))
	for i, b := range backends {
		if vs[i], err = serverVersion(s, b); err != nil {
			return err
		}
		if err := serverversion.Have(ctx, vs[i], c.Log); err != nil {
			return err
		}
		if err := consulsemrun.PreflightVersion(b, vs[i]); err != nil {
			return &family.UsageError{Err: fmt.Errorf("--backend: %w", err)}
		}
	}
	for i, b := range backends {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := consulsemrun.BenchVersion(ctx, b, vs[i], c, out); err != nil {
			return err
		}
	}
	return nil
}

// consulConformOne compares the simulator with a private server of kind k
// and version v (the zero Version: the default).
func consulConformOne(ctx context.Context, k consulsim.Kind, v versions.Version, c family.ConformConfig, out io.Writer) (family.Conformance, error) {
	t, stop, err := consulConformServer(ctx, k, v)
	switch {
	case ctx.Err() != nil:
		return 0, fmt.Errorf("interrupted while starting a private server: %w", ctx.Err())
	case errors.Is(err, consul.ErrNoConsul), errors.Is(err, etcd.ErrNoEtcd):
		return 0, &family.UsageError{Err: fmt.Errorf("--backend: %w", err)}
	case err != nil:
		return 0, &family.UsageError{Err: fmt.Errorf("conform --kind consul-semaphore could not start its private server: %w", err)}
	}
	defer stop()
	name := map[consulsim.Kind]string{consulsim.Consul: "a private Consul agent", consulsim.Etcd: "a private etcd"}[k] + named(v)
	fmt.Fprintf(out, "consulsim against %s: %d sequences of the calls the recipe makes, seed %d\n", name, c.Sequences, c.Seed)
	rep, err := consulconform.Differential(ctx, t, c.Sequences, c.Seed, out)
	return family.Differential{Report: rep, Server: rep.Server, Divergence: rep.Divergence, Shrunk: rep.Shrunk,
		Sequences: rep.Sequences, Inconclusive: rep.Inconclusive, Err: err,
		Stopped: "its private server is stopped"}.End(ctx, c, out)
}

// consulConformServer starts a private server of kind k and version v in
// a temporary directory; stop stops it and removes the directory.
func consulConformServer(ctx context.Context, k consulsim.Kind, v versions.Version) (consulconform.Server, func(), error) {
	if k == consulsim.Consul {
		a, stop, err := consul.StartTemp(ctx, consul.Options{SessionTTLMin: consulConformFloor, Version: v})
		if err != nil {
			return consulconform.Server{}, nil, err
		}
		return consulconform.Server{Kind: consulsim.Consul, Addr: a.Addr(), Floor: consulConformFloor}, stop, nil
	}
	s, stop, err := etcd.StartTemp(ctx, etcd.Options{Version: v})
	if err != nil {
		return consulconform.Server{}, nil, err
	}
	return consulconform.Server{Kind: consulsim.Etcd, Addr: s.URL(), Floor: s.MinTTL()}, stop, nil
}

// clusterShrink bounds the shrinking of a cluster divergence: each try
// runs on the real cluster, with its settles.
const clusterShrink = 3 * time.Minute

// clusterConform is conform --cluster: the simulated cluster of backend
// against a private real one, started for the run (as --target
// consul-cluster and etcd-cluster start theirs) and removed after it
// (consulconform.ClusterDifferential). A machine that cannot start it is a
// usage error naming what is missing.
func clusterConform(ctx context.Context, backend string, v versions.Version, c family.ConformConfig, out io.Writer) (family.Conformance, error) {
	if err := consulsemrun.ClusterPreflight(backend); err != nil {
		return 0, &family.UsageError{Err: fmt.Errorf("--cluster: %w", err)}
	}
	if err := consulsemrun.PreflightVersion(backend, v); err != nil {
		return 0, &family.UsageError{Err: fmt.Errorf("--server-version: %w", err)}
	}
	log := c.Log
	if log == nil {
		log = out
	}
	cl, err := consulsemrun.StartClusterVersion(ctx, backend, v, func(lab, dir string) {
		fmt.Fprintf(log, "lockprover: starting a cluster of %s%s in the network lab %s, files under %s\n", backend, named(v), lab, dir)
	})
	if ctx.Err() != nil {
		return 0, fmt.Errorf("interrupted while starting a private cluster: %w", ctx.Err())
	}
	if err != nil {
		return 0, &family.UsageError{Err: fmt.Errorf("conform --cluster could not start its private %s cluster: %w", backend, err)}
	}
	defer func() {
		if err := cl.Stop(); err != nil {
			fmt.Fprintf(log, "conform: stopping the cluster: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "the simulated %s cluster against a private one (%s, started in %.1fs): %d sequences, seed %d\n",
		backend, strings.Join(consulsemrun.ClusterNodes(backend), ", "), cl.Took.Seconds(), c.Sequences, c.Seed)
	rep, err := consulconform.ClusterDifferential(ctx, cl.ConformCluster(), c.Sequences, c.Seed, clusterShrink, out)
	return family.Differential{Report: rep, Server: rep.Server + " cluster", Divergence: rep.Divergence, Shrunk: rep.Shrunk,
		Sequences: rep.Sequences, Err: err, Stopped: "its private cluster is stopped"}.End(ctx, c, out)
}
