package amqpcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/conform"
	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
)

// clusterTarget is the --target of a RabbitMQ cluster.
const clusterTarget = amqprun.ClusterTarget

// simClusterTarget is the --target of the simulated RabbitMQ cluster
// (rabbitmqsim.ClusterOptions): plans drawn as for clusterTarget, run on the
// simulator.
const simClusterTarget = amqprun.SimClusterTarget

// clusterOptions reads --partition-handling and --net-ticktime.
func clusterOptions(s family.Settings) (rabbitmq.ClusterOptions, error) {
	var o rabbitmq.ClusterOptions
	if s.Given("partition-handling") {
		o.PartitionHandling = s.Flag("partition-handling")
		if !slices.Contains(rabbitmq.Modes, o.PartitionHandling) {
			return o, fmt.Errorf("--partition-handling: want ignore, pause_minority, autoheal or khepri, not %q", o.PartitionHandling)
		}
	}
	d, err := time.ParseDuration(s.Flag("net-ticktime"))
	if err != nil || d < time.Second || d%time.Second != 0 {
		return o, fmt.Errorf("--net-ticktime: want whole seconds, at least 1s (5s by default), not %q", s.Flag("net-ticktime"))
	}
	o.NetTicktime = d
	if s.Given("server-version") {
		v, err := serverversion.Parse(s, "rabbitmq")
		if err != nil {
			return o, err
		}
		o.Version = v
	}
	// Not given, the version's own: ignore (RabbitMQ's default) where
	// Mnesia's modes exist, khepri from 4.3 on.
	mode, err := o.Mode()
	if err != nil {
		return o, fmt.Errorf("--partition-handling: %w", err)
	}
	o.PartitionHandling = mode
	return o, nil
}

// A clusterBox is the private cluster of one run: a network lab of three
// hosts (n1, n2, n3) and a RabbitMQ node in each, started by start and
// gone, lab, nodes, epmd and files, after stop.
type clusterBox struct {
	o      rabbitmq.ClusterOptions
	stderr io.Writer

	mu    sync.Mutex
	lab   *netns.Lab
	c     *rabbitmq.Cluster
	tg    *amqprun.RabbitMQCluster
	dir   string
	leave func()
}

func newClusterBox(s family.Settings, o rabbitmq.ClusterOptions) *clusterBox {
	b := &clusterBox{o: o, stderr: s.Stderr}
	if b.stderr == nil {
		b.stderr = io.Discard
	}
	return b
}

// start makes the lab and starts the cluster, saying so and how long it
// took; a machine that cannot is a *family.UsageError naming what it
// lacks.
func (b *clusterBox) start(ctx context.Context) error {
	if err := rabbitmq.ClusterPreflightOf(b.o.Version); err != nil {
		return family.Usagef("--target %s: %v", clusterTarget, err)
	}
	if err := serverversion.Have(ctx, b.o.Version, b.stderr); err != nil {
		return err
	}
	t0 := time.Now()
	dir, err := os.MkdirTemp("", "lockprover-cluster-")
	if err != nil {
		return err
	}
	lab, err := netns.New(ctx, "n1", "n2", "n3")
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("--target %s: %w", clusterTarget, err)
	}
	b.mu.Lock()
	b.lab, b.dir = lab, dir
	b.leave = prover.Leave(fmt.Sprintf("the RabbitMQ cluster's network lab %s (ip netns list: its namespaces begin with %s) and %s", lab.ID, lab.ID, dir))
	b.mu.Unlock()
	fmt.Fprintf(b.stderr, "lockprover: starting a RabbitMQ cluster of 3 nodes in the network lab %s, files under %s\n", lab.ID, dir)
	c, err := rabbitmq.StartCluster(ctx, lab, dir, b.o)
	if err != nil {
		b.stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("--target %s: %w", clusterTarget, err)
	}
	b.mu.Lock()
	b.c = c
	b.mu.Unlock()
	fmt.Fprintf(b.stderr, "lockprover: started a RabbitMQ cluster of 3 nodes (%s, net_ticktime %v) in the network lab %s in %.1fs; it is removed when the run ends\n",
		b.o.PartitionHandling, c.Options().NetTicktime, lab.ID, time.Since(t0).Seconds())
	return nil
}

// stop stops the nodes, closes the lab and removes the nodes' files; it
// may be called more than once.
func (b *clusterBox) stop() {
	b.mu.Lock()
	c, lab, dir, leave := b.c, b.lab, b.dir, b.leave
	b.c, b.lab, b.dir, b.leave = nil, nil, "", nil
	b.mu.Unlock()
	if c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(b.stderr, "lockprover: stopping the cluster: %v\n", err)
		}
	}
	if lab != nil {
		if err := lab.Close(); err != nil {
			fmt.Fprintf(b.stderr, "lockprover: %v\n", err)
			return
		}
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	if leave != nil {
		leave()
		fmt.Fprintf(b.stderr, "lockprover: removed the RabbitMQ cluster and its network lab\n")
	}
}

// target is the cluster as a target, once started.
func (b *clusterBox) target() amqprun.RabbitMQCluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tg == nil {
		t := amqprun.NewRabbitMQCluster(b.c, b.lab, b.stderr)
		b.tg = &t
	}
	return *b.tg
}

// url is the first node's URL, once started.
func (b *clusterBox) url() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c.Nodes[0].URL()
}

// clusterReplayFlags are the flags a replay on the cluster needs.
func clusterReplayFlags(o rabbitmq.ClusterOptions) []string {
	f := []string{"--target", clusterTarget, "--partition-handling", o.PartitionHandling, "--net-ticktime", strconv.Itoa(int(o.NetTicktime/time.Second)) + "s"}
	if o.Version.Server != "" {
		f = append(f, "--server-version", o.Version.Name)
	}
	return f
}

// clusterSetup finishes amqpSetup for --target rabbitmq-cluster: the
// cluster starts before the first plan (and the implementation's
// preflight, on its first node), and stops after the implementation.
func clusterSetup(s family.Settings, a amqprun.Config, setup *family.Setup, box *clusterBox) (*family.Setup, error) {
	var pi interface {
		Preflight(ctx context.Context, url, kind string) error
		Stop()
	}
	if s.Impl != "" {
		p := amqpprotocol.NewProcesses(s.Impl)
		p.InitTimeout = s.InitTimeout
		a.Impl, pi = p, p
	}
	setup.Start = func(ctx context.Context) error {
		if err := box.start(ctx); err != nil {
			return err
		}
		a.Target = box.target()
		setup.Prove = a
		if pi != nil {
			if err := pi.Preflight(ctx, box.url(), a.Kind); err != nil {
				return &family.ImplError{Err: err, Command: s.Impl}
			}
		}
		return nil
	}
	setup.Stop = func() {
		if pi != nil {
			pi.Stop()
		}
		box.stop()
	}
	setup.Prove = a
	return setup, nil
}

// clusterReplay makes a plan ready to run again on a cluster of its own.
func clusterReplay(p *amqprun.Plan, s family.Settings) (*family.Setup, error) {
	for _, name := range []string{"amqp-url", "allow-restart", "docker", "docker-image"} {
		if s.Given(name) {
			return nil, fmt.Errorf("--%s is not for --target %s, whose nodes the run starts", name, clusterTarget)
		}
	}
	if len(p.Cluster) == 0 {
		return nil, fmt.Errorf("the plan has no cluster: replay it on the simulator or --target rabbitmq")
	}
	o, err := clusterOptions(s)
	if err != nil {
		return nil, err
	}
	mode := o.PartitionHandling
	if !s.Given("partition-handling") && p.PartitionHandling != "" {
		// The mode the plan was found under, where the version has it; a
		// plan found under a Mnesia mode runs on 4.3 as Khepri has it,
		// and says so.
		found := o
		found.PartitionHandling = p.PartitionHandling
		if m, err := found.Mode(); err == nil {
			o.PartitionHandling, mode = m, m
		} else {
			mode = fmt.Sprintf("%s; the plan was found under %s, which RabbitMQ %s does not have", o.PartitionHandling, p.PartitionHandling, o.Version.Name)
		}
	}
	a := amqprun.Config{Scope: prover.Scope{Mutant: p.Mutant}, Kind: p.Kind} // the kind an implementation's preflight is asked for
	setup := &family.Setup{Target: clusterTarget, Real: true, Where: fmt.Sprintf("a private RabbitMQ cluster of 3 nodes (%s)", mode)}
	out, err := clusterSetup(s, a, setup, newClusterBox(s, o))
	if err != nil {
		return nil, err
	}
	out.What = a.String()
	if s.Impl != "" {
		out.What = fmt.Sprintf("%q", s.Impl)
	}
	return out, nil
}

// clusterConform is conform --cluster: the simulated cluster against a
// private real one in the mode --partition-handling names (a divergence
// shrunk for at most shrink).
func clusterConform(ctx context.Context, s family.Settings, c family.ConformConfig, shrink time.Duration, out io.Writer) (family.Conformance, error) {
	if path := s.Flag("recorded"); path != "" {
		for _, name := range []string{"record", "first", "partition-handling", "net-ticktime", "seed", "sequences", "keep-going"} {
			if s.Given(name) {
				return 0, family.Usagef("--%s is not for --recorded, whose file says what was run", name)
			}
		}
		return recordedConform(path, out)
	}
	o, err := clusterOptions(s)
	if err != nil {
		return 0, family.Usagef("%v", err)
	}
	first, err := strconv.Atoi(s.Flag("first"))
	if err != nil || first < 0 {
		return 0, family.Usagef("--first: a sequence's index, 0 or more, not %q", s.Flag("first"))
	}
	var record io.Writer
	if path := s.Flag("record"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return 0, family.Usagef("--record: %v", err)
		}
		defer f.Close()
		record = f
	}
	box := newClusterBox(s, o)
	box.stderr = c.Log
	if box.stderr == nil {
		box.stderr = io.Discard
	}
	if err := box.start(ctx); err != nil {
		return 0, err
	}
	defer box.stop()
	from := ""
	if first > 0 {
		from = fmt.Sprintf(" from its sequence %d", first)
	}
	fmt.Fprintf(out, "conform --cluster: %d sequences of 10 steps, seed %d%s, %s, net_ticktime %v\n", c.Sequences, c.Seed, from, o.PartitionHandling, box.c.Options().NetTicktime)
	t0 := time.Now()
	tally, d, err := conform.ClusterDifferential(ctx, conform.RealCluster{Cluster: box.c, Lab: box.lab},
		conform.ClusterDiffOptions{Mode: o.PartitionHandling, Version: box.c.Options().Version.Name, KeepGoing: s.Flag("keep-going") == "true",
			Sequences: c.Sequences, Seed: c.Seed, First: first, Shrink: shrink, Out: out, Record: record})
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(out, "interrupted after %s\n", sequencesBefore(tally))
		return 0, ctx.Err()
	case err != nil:
		fmt.Fprintf(c.Log, "conform: the harness failed after %s, nothing more is decided: %v\n", sequencesBefore(tally), err)
		return family.Inconclusive, nil
	case d != nil && tally.Diverged > 0:
		fmt.Fprintf(out, "%d sequences (%s): %d diverged, %d agreed, %d inconclusive, in %.0fs; the first that diverged:\n\n%s", tally.Compared(), o.PartitionHandling, tally.Diverged, tally.Agreed, tally.Inconclusive, time.Since(t0).Seconds(), d)
		return family.Diverge, nil
	case d != nil:
		fmt.Fprintf(out, "%s; the simulated cluster diverges from the real one (%s) in %.0fs\n\n%s", sequencesBefore(tally), o.PartitionHandling, time.Since(t0).Seconds(), d)
		return family.Diverge, nil
	case tally.Inconclusive > 0:
		fmt.Fprintf(out, "%d sequences (%s): the simulated cluster agrees with the real one on %d; %s, in %.0fs\n", tally.Compared(), o.PartitionHandling, tally.Agreed, unsettledNote(tally), time.Since(t0).Seconds())
		return family.Inconclusive, nil
	}
	fmt.Fprintf(out, "%d sequences (%s): the simulated cluster agrees with the real one, in %.0fs\n", tally.Agreed, o.PartitionHandling, time.Since(t0).Seconds())
	return family.Agree, nil
}

// sequencesBefore says what a differential's tally held before it ended.
func sequencesBefore(t conform.ClusterTally) string {
	s := fmt.Sprintf("%d sequences that agreed", t.Agreed)
	if t.Inconclusive > 0 {
		s += fmt.Sprintf(" (and %d inconclusive)", t.Inconclusive)
	}
	return s
}

// unsettledNote says how many sequences were inconclusive, and why.
func unsettledNote(t conform.ClusterTally) string {
	return fmt.Sprintf("%d inconclusive (a node of the real cluster had not served again within the wait after a fault: the steps before it agreed, those after it are not compared)", t.Inconclusive)
}

// recordedConform is conform --cluster --recorded FILE: the simulated
// cluster held to every sequence the real one ran and FILE recorded.
func recordedConform(path string, out io.Writer) (family.Conformance, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, family.Usagef("--recorded: %v", err)
	}
	defer f.Close()
	recs, err := conform.ReadClusterRecords(f, path)
	if err != nil {
		return 0, family.Usagef("--recorded: %v", err)
	}
	if len(recs) == 0 {
		return 0, family.Usagef("--recorded: %s holds no sequence", path)
	}
	t0 := time.Now()
	modes := map[string]int{}
	for _, r := range recs {
		modes[r.Mode]++
	}
	var per []string
	for _, m := range rabbitmq.Modes {
		if modes[m] > 0 {
			per = append(per, fmt.Sprintf("%s %d", m, modes[m]))
		}
	}
	for _, r := range recs {
		if r.Version == "4.0.5" {
			modes["4.0.5 "+r.Mode]++
		}
	}
	for _, m := range rabbitmq.Modes {
		if n := modes["4.0.5 "+m]; n > 0 {
			per = append(per, fmt.Sprintf("of them on 4.0.5 %s %d", m, n))
		}
	}
	tally, d, err := conform.MatchClusterRecords(recs)
	switch {
	case err != nil:
		return 0, err
	case d != nil:
		next := recs[tally.Compared()]
		fmt.Fprintf(out, "%d recorded sequences agreed; the simulated cluster cannot give what the real one observed on the next (%s, seed %d):\n\n%s", tally.Compared(), next.Mode, next.Seed, d)
		return family.Diverge, nil
	case tally.Inconclusive > 0:
		fmt.Fprintf(out, "%d recorded sequences (%s): the simulated cluster gives what the real one observed on each of %d; %s, in %.1fs\n", tally.Compared(), strings.Join(per, ", "), tally.Agreed, unsettledNote(tally), time.Since(t0).Seconds())
		return family.Agree, nil
	}
	fmt.Fprintf(out, "%d recorded sequences (%s): the simulated cluster gives what the real one observed on each, in %.1fs\n", tally.Agreed, strings.Join(per, ", "), time.Since(t0).Seconds())
	return family.Agree, nil
}
