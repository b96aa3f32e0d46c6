package amqprun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
)

// RabbitMQCluster runs plans on a RabbitMQ cluster: each node in a host
// of a network lab (adapters/host/netns), each process of a plan connecting,
// through a fault proxy of its own, to the node the plan gives it
// (Plan.NodeOf). Beside the single broker's faults, a plan's faults may
// kill, pause and restart nodes and cut the links between them, silently
// (the lab's router drops the packets). After the plan's faults end, the
// run brings the cluster back to one (rabbitmq.Cluster.Recover: heal,
// continue, start, and for a cluster that stays split the operator's
// restart of the side given up) before the quiescent probe, so that the
// next plan finds the cluster as the first did: the cluster is reused
// from plan to plan, never restarted whole.
//
// Plans run one at a time (Config.Alone): a cut between nodes strikes
// every plan on the cluster.
type RabbitMQCluster struct {
	Cluster *rabbitmq.Cluster
	Lab     *netns.Lab
	// OpTimeout ends an operation that takes longer with an unknown
	// outcome; 0 means 30 s, and on a Khepri cluster 15 s more than
	// Khepri's own 30 s (rabbitmq.KhepriCommandTimeout): a declare through
	// a node cut off from the majority then ends as the broker ends it,
	// its connection closed with a 541 the history records, rather than
	// by the client giving up on it at the same moment.
	OpTimeout time.Duration
	// Log hears what each recovery had to do (nil: nothing).
	Log io.Writer

	// dirty, shared by the target's copies, says the last plan did not
	// end with the cluster made one again (it was interrupted, by a
	// search's deadline say, or its recovery failed): the next plan
	// recovers it first.
	dirty *dirtyFlag
}

type dirtyFlag struct {
	sync.Mutex
	set bool
}

// NewRabbitMQCluster is the target of a started cluster in its lab.
func NewRabbitMQCluster(c *rabbitmq.Cluster, lab *netns.Lab, log io.Writer) RabbitMQCluster {
	return RabbitMQCluster{Cluster: c, Lab: lab, Log: log, dirty: &dirtyFlag{}}
}

// Nodes are the cluster's nodes, by their hosts' names: what a plan's
// cluster field names.
func (t RabbitMQCluster) Nodes() []string {
	var out []string
	for _, n := range t.Cluster.Nodes {
		out = append(out, n.Host)
	}
	return out
}

// Preflight connects to every node once.
func (t RabbitMQCluster) Preflight(ctx context.Context) error {
	for _, n := range t.Cluster.Nodes {
		if err := rabbitmq.Preflight(ctx, n.URL(), 0); err != nil {
			return fmt.Errorf("node %s: %w", n.Host, err)
		}
	}
	return nil
}

// Run runs p on the cluster, whose nodes must be those p's cluster names.
func (t RabbitMQCluster) Run(ctx context.Context, p *Plan, impl Impl) (*prover.Result, error) {
	if !slices.Equal(p.Cluster, t.Nodes()) {
		return nil, fmt.Errorf("the plan's cluster is [%s]; the target's nodes are [%s]", strings.Join(p.Cluster, " "), strings.Join(t.Nodes(), " "))
	}
	for _, f := range p.Nemesis {
		if f.Fault == histories.RestartBroker && f.Node == "" {
			return nil, errors.New("on a cluster, a restart-broker restarts a node: name it (node)")
		}
	}
	first := t.Cluster.Nodes[0]
	ctl, err := first.CtlCommand()
	if err != nil {
		return nil, err
	}
	c := &clusterRun{t: t, plan: p, cuts: map[string][][2]string{}}
	if t.dirty != nil {
		t.dirty.Lock()
		defer t.dirty.Unlock() // plans on a cluster run one at a time
		if t.dirty.set {
			if err := c.settle(ctx); err != nil {
				return nil, fmt.Errorf("the cluster could not be made one again after the last plan: %w", err)
			}
		}
		t.dirty.set = true // until this plan's recovery succeeds
	}
	// A restart-broker on a cluster restarts a node (clusterRun.fault).
	timeout := t.OpTimeout
	if timeout == 0 && t.Cluster.Options().PartitionHandling == rabbitmq.Khepri {
		timeout = rabbitmq.KhepriCommandTimeout + 15*time.Second
	}
	return RabbitMQ{URL: first.URL(), Ctl: ctl, OpTimeout: timeout, AllowRestart: true, cluster: c}.Run(ctx, p, impl)
}

// A clusterRun is one plan's run on a cluster: where its processes
// connect, and the faults it strikes on nodes and links.
type clusterRun struct {
	t    RabbitMQCluster
	plan *Plan

	mu   sync.Mutex
	cuts map[string][][2]string // the directions each partition in force cut
}

// proxies is a proxy per process, each in front of the process's node.
func (c *clusterRun) proxies() *amqpproxy.Set {
	return amqpproxy.NewRoutedSet(func(name string) string {
		return c.node(c.plan.NodeOf(name)).URL()
	})
}

func (c *clusterRun) node(host string) *rabbitmq.Node {
	if n := c.t.Cluster.Node(host); n != nil {
		return n
	}
	return c.t.Cluster.Nodes[0]
}

// fault strikes a fault aimed at the cluster (a node, or a cut between
// nodes); handled says whether aim was one.
func (c *clusterRun) fault(ctx context.Context, fault, aim string) (handled bool, err error) {
	if strings.Contains(aim, ">") {
		return true, c.partition(ctx, fault, aim)
	}
	n := c.t.Cluster.Node(aim)
	if n == nil {
		return false, nil
	}
	defer func() {
		if err != nil && c.t.Log != nil && ctx.Err() == nil {
			fmt.Fprintf(c.t.Log, "cluster: %s of node %s failed: %v\n", fault, aim, err)
		}
	}()
	switch fault {
	case histories.Kill:
		return true, n.Crash()
	case histories.Pause:
		return true, n.Pause()
	case histories.Resume:
		return true, n.Resume()
	case histories.RestartBroker:
		if !n.Up() {
			return true, n.Start(ctx)
		}
		return true, n.Restart(ctx)
	}
	return true, fmt.Errorf("%s cannot strike node %s", fault, aim)
}

// partition cuts the directions of cut, or restores them (a heal): only
// those it cut itself, so that two partitions in force that share a
// direction keep it cut until both have healed.
func (c *clusterRun) partition(ctx context.Context, fault, cut string) error {
	v := histories.Fault{Cut: cut}
	dirs := v.Directions()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch fault {
	case histories.Partition:
		var made [][2]string
		for _, d := range dirs {
			if c.cutBy(d) {
				continue
			}
			if err := c.t.Lab.Cut(ctx, d[0], d[1]); err != nil {
				return err
			}
			made = append(made, d)
		}
		c.cuts[cut] = append(c.cuts[cut], made...)
		return nil
	case histories.Heal:
		made := c.cuts[cut]
		delete(c.cuts, cut)
		for _, d := range made {
			if c.cutBy(d) {
				continue
			}
			if err := c.t.Lab.Restore(ctx, d[0], d[1]); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s cannot strike the links %s", fault, cut)
}

// cutBy says whether a partition in force has cut direction d.
func (c *clusterRun) cutBy(d [2]string) bool {
	for _, made := range c.cuts {
		if slices.Contains(made, d) {
			return true
		}
	}
	return false
}

// settle brings the cluster back to one (rabbitmq.Cluster.Recover) and
// says what it did on the target's Log.
func (c *clusterRun) settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c.mu.Lock()
	clear(c.cuts)
	c.mu.Unlock()
	t0 := time.Now()
	did, err := c.t.Cluster.Recover(ctx, c.t.Lab)
	if errors.Is(err, rabbitmq.ErrStillSplit) {
		// Made anew for the next plan; this one cannot be judged: its
		// queues are gone with the data, which no fault of its did.
		if rerr := c.t.Cluster.Reset(ctx); rerr != nil {
			err = fmt.Errorf("%w; made anew: %v", err, rerr)
		} else {
			err = fmt.Errorf("%w (the cluster was made anew, its data wiped, for the next plan: this plan cannot be judged)", err)
			if c.t.dirty != nil {
				c.t.dirty.set = false
			}
		}
	}
	if err == nil && c.t.dirty != nil {
		c.t.dirty.set = false // (its lock is the plan's)
	}
	if ctx.Err() != nil {
		return err // interrupted (a Ctrl-C, a search's deadline): the next plan recovers it
	}
	if c.t.Log != nil && (did.Restarted() || err != nil) { // an operator's restart, or a failure
		if err != nil {
			fmt.Fprintf(c.t.Log, "cluster: recovery failed after %.1fs: %v\n", time.Since(t0).Seconds(), err)
		} else {
			fmt.Fprintf(c.t.Log, "cluster: %s; one cluster again after %.1fs (%s)\n", did, time.Since(t0).Seconds(), did.Times())
		}
	}
	return err
}
