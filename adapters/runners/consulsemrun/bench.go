package consulsemrun

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/model/consulsem"
)

// The bench's series: the reference's operations and their floors.
const (
	cbAcquire, cbRefresh, cbRelease = "acquire", "refresh", "release"
	cfAcquire, cfRefresh, cfRelease = "F1", "F2", "F3"
)

// The bench's semaphore: limit 1 and a TTL long enough that nothing
// expires while it runs.
const (
	benchLimit = 1
	benchTTL   = time.Minute
)

// Bench is bench --kind consul-semaphore on each backend named (Consul,
// Etcd), one after the other: a private server started as a real target's
// is (startServer), the reference (package consulsem) on it, beside
// floors: the round trips the recipe needs for each operation, sent raw
// with the client library the reference uses (net/http for Consul's HTTP
// API, go.etcd.io/etcd/client/v3 for etcd), with no lock library. What
// both send is counted on the wire side of their clients (an HTTP
// transport, gRPC interceptors), by request. Each server is stopped
// however it ends; an interrupted run's error wraps ctx's.
func Bench(ctx context.Context, backends []string, c bench.Config, out io.Writer) error {
	for i, b := range backends {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := BenchVersion(ctx, b, versions.Version{}, c, out); err != nil {
			return err
		}
	}
	return nil
}

// BenchVersion is the bench on a private server of backend of version v
// (the zero value: Bench's).
func BenchVersion(ctx context.Context, backend string, v versions.Version, c bench.Config, out io.Writer) error {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "bench: starting a private %s\n", backend)
	}
	srv, err := startServer(ctx, &Plan{Backend: backend}, v)
	if err != nil {
		return err
	}
	defer srv.stop()
	cl, err := dialBench(ctx, backend, srv.addrs[0])
	if err != nil {
		return err
	}
	defer cl.close()
	b := &semBench{ctx: ctx, run: bench.New(c), cl: cl}
	err = b.measure()
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted; its private %s is stopped: %w", backend, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", backend, err)
	}
	b.report(out)
	return nil
}

// semBench is one backend's bench: its clients and the run.
type semBench struct {
	ctx context.Context
	run *bench.Run
	cl  *benchClients
}

// The prefixes of the bench's semaphores: one per series of the
// reference, one for the floors.
const (
	bpAcquire, bpRefresh, bpRelease, bpFloor = "lpbench/acquire", "lpbench/refresh", "lpbench/release", "lpbench/floor"
)

// measure runs each operation and its floor, in a fresh random order each
// iteration.
func (b *semBench) measure() error {
	return b.run.Loop(b.ctx, "consul-semaphore on "+b.cl.server, b.acquire, b.refresh, b.release, b.floorAcquire, b.floorRefreshRelease)
}

// time runs f as one measured operation of series key, with what c sent
// during it.
func (b *semBench) time(key string, c *sentCounter, f func() error) error {
	c.take()
	return b.run.Time(key, f, c.take)
}

// acquire: a free slot's acquire (then, untimed, its release).
func (b *semBench) acquire() error {
	var l consulsem.Lease
	if err := b.time(cbAcquire, b.cl.refSent, func() (err error) {
		l, err = b.cl.ref.Acquire(b.ctx, bpAcquire, benchLimit, benchTTL)
		return err
	}); err != nil {
		return err
	}
	return b.cl.ref.Release(b.ctx, bpAcquire, l.Token)
}

// refresh of a held lease (acquired, and then released, untimed).
func (b *semBench) refresh() error {
	l, err := b.cl.ref.Acquire(b.ctx, bpRefresh, benchLimit, benchTTL)
	if err != nil {
		return err
	}
	if err := b.time(cbRefresh, b.cl.refSent, func() error { return b.cl.ref.Refresh(b.ctx, bpRefresh, l.Token) }); err != nil {
		return err
	}
	return b.cl.ref.Release(b.ctx, bpRefresh, l.Token)
}

// release of a held lease (acquired untimed).
func (b *semBench) release() error {
	l, err := b.cl.ref.Acquire(b.ctx, bpRelease, benchLimit, benchTTL)
	if err != nil {
		return err
	}
	return b.time(cbRelease, b.cl.refSent, func() error { return b.cl.ref.Release(b.ctx, bpRelease, l.Token) })
}

// floorAcquire (F1): the floor's grant of a free slot, then, untimed, its
// release.
func (b *semBench) floorAcquire() error {
	var l floorLease
	if err := b.time(cfAcquire, b.cl.floorSent, func() (err error) {
		l, err = b.cl.floor.acquire(b.ctx, bpFloor)
		return err
	}); err != nil {
		return err
	}
	return b.cl.floor.release(b.ctx, bpFloor, l)
}

// floorRefreshRelease (F2, F3): the floor's refresh and release of a
// grant of its own (made untimed).
func (b *semBench) floorRefreshRelease() error {
	l, err := b.cl.floor.acquire(b.ctx, bpFloor)
	if err != nil {
		return err
	}
	if err := b.time(cfRefresh, b.cl.floorSent, func() error { return b.cl.floor.refresh(b.ctx, l) }); err != nil {
		return err
	}
	return b.time(cfRelease, b.cl.floorSent, func() error { return b.cl.floor.release(b.ctx, bpFloor, l) })
}

// report prints the tables: each operation beside its floor, what it sent
// beyond it, and the floors.
func (b *semBench) report(w io.Writer) {
	fmt.Fprintf(w, "lockprover bench --kind consul-semaphore: the reference (consulsem, default options) on a private %s on this machine, limit %d, TTL %v; %d iterations after %d warm-up; seed %d\n\n",
		b.cl.server, benchLimit, benchTTL, b.run.N, b.run.Warmup, b.run.Seed)
	fmt.Fprintln(w, "| operation | p50 | p99 | mean | sent/op | floor (p50) | ratio | beyond the floor |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --- | --- | --: | --- |")
	for _, r := range [][3]string{
		{"acquire, slot free", cbAcquire, cfAcquire},
		{"refresh, lease held", cbRefresh, cfRefresh},
		{"release, lease held", cbRelease, cfRelease},
	} {
		s, f := b.run.Stats(r[1]), b.run.Stats(r[2])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s: %s | %.2fx | %s |\n", r[0], bench.US(s.P50), bench.US(s.P99), bench.US(s.Mean), s.Sent,
			r[2], bench.US(f.P50), bench.Ratio(s.P50, f.P50), bench.Beyond(b.run.Series[r[1]], b.run.Series[r[2]]))
	}
	fmt.Fprintf(w, "\nsent/op counts the %s the client sent, by kind. Floors: the round trips the recipe needs, sent raw with %s (a client of their own), no lock library:\n", b.cl.unit, b.cl.library)
	fmt.Fprintln(w, "\n| floor | what | p50 | p99 | sent/op |")
	fmt.Fprintln(w, "| --- | --- | --: | --: | --- |")
	for _, f := range b.cl.floor.describe() {
		s := b.run.Stats(f[0])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", f[0], f[1], bench.US(s.P50), bench.US(s.P99), s.Sent)
	}
}
