package conform

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/host/netns"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// The cluster differential holds the simulated RabbitMQ cluster
// (rabbitmqsim.ClusterOptions) to a real one: drawn sequences of queue methods,
// each through a client connected to one node (A to n1, B to n2, C to
// n3), and cluster faults (a node cut off from the others, both ways or
// one; a bridge; a node killed and started, paused and continued,
// restarted; the heal), run on both and compared step by step. A fault
// is followed by a wait of two net_ticktimes (ClusterSettle), so that what
// the steps after it observe no longer hangs on when each node noticed
// (a last step's is not: nothing after it observes); the differential
// judges what the cluster does, not how fast. In mode khepri the real side
// is a RabbitMQ 4.3.6 cluster (rabbitmq.Khepri) and the simulated one
// runs rabbitmqsim.Khepri: a write through a cut-off node gets no answer
// within a step's 2 s there (it waits Khepri's 30 s), and the sequences
// take longer.

// A ClusterStep is one step of a cluster sequence: a method of a client
// (On is A, B or C) on a queue, or a fault on the cluster (On is "").
type ClusterStep struct {
	On  string `json:"on,omitempty"`
	Do  string `json:"do"`            // a method (clusterMethods) or a fault (clusterFaults)
	Arg string `json:"arg,omitempty"` // the method's queue (q1, q2, d1), the fault's node
}

// clusterMethods are what a client does: an exclusive declare, a passive
// one, a delete, a mandatory publish under confirms, a durable declare,
// a new connection.
var clusterMethods = []string{"declare-exclusive", "declare-passive", "delete", "publish", "declare-durable", "reconnect"}

// clusterFaults are what strikes the cluster, as the cluster target's
// faults do (isolate-node, cut-one-way, bridge, kill-node, pause-node,
// restart-node), and their ends.
var clusterFaults = []string{"isolate", "cut-one-way", "bridge", "kill", "pause", "restart", "heal", "resume", "start"}

// clusterClients are the clients and their nodes.
var clusterClients = map[string]string{"A": "n1", "B": "n2", "C": "n3"}

// ClusterNodeOf is the node a sequence's client (its connection's name,
// broker.Config.Name) connects to: A to n1, B to n2, C to n3.
func ClusterNodeOf(client string) string { return clusterClients[client] }

var clusterNodes = []string{"n1", "n2", "n3"}

func (s ClusterStep) String() string {
	if s.On == "" {
		return s.Do + " " + s.Arg
	}
	return fmt.Sprintf("%s(%s) %s %s", s.On, clusterClients[s.On], s.Do, s.Arg)
}

// cut is the directions a fault on node cuts ("" for none).
func (s ClusterStep) cut() string {
	var others []string
	for _, n := range clusterNodes {
		if n != s.Arg {
			others = append(others, n)
		}
	}
	var d []string
	switch s.Do {
	case "isolate":
		for _, o := range others {
			d = append(d, s.Arg+">"+o, o+">"+s.Arg)
		}
	case "cut-one-way":
		for _, o := range others {
			d = append(d, s.Arg+">"+o)
		}
	case "bridge":
		d = append(d, others[0]+">"+others[1], others[1]+">"+others[0])
	}
	return strings.Join(d, " ")
}

// DrawClusterSteps draws a sequence of n steps from r: mostly methods,
// and up to three faults, a node killed or paused ended later in the
// sequence or by the settle after it.
func DrawClusterSteps(r *rand.Rand, n int) []ClusterStep {
	var out []ClusterStep
	faults := 0
	killed, paused, cuts := "", "", 0
	queues := []string{"q1", "q2", "q1", "d1"}
	for range n {
		if faults < 3 && r.IntN(3) == 0 {
			var options []ClusterStep
			node := clusterNodes[r.IntN(len(clusterNodes))]
			if killed == "" && paused == "" && cuts == 0 {
				for _, f := range []string{"isolate", "cut-one-way", "bridge", "kill", "pause", "restart"} {
					options = append(options, ClusterStep{Do: f, Arg: node})
				}
			}
			if cuts > 0 {
				options = append(options, ClusterStep{Do: "heal"})
			}
			if killed != "" {
				options = append(options, ClusterStep{Do: "start", Arg: killed})
			}
			if paused != "" {
				options = append(options, ClusterStep{Do: "resume", Arg: paused})
			}
			if len(options) > 0 {
				s := options[r.IntN(len(options))]
				switch s.Do {
				case "isolate", "cut-one-way", "bridge":
					cuts++
				case "heal":
					cuts = 0
				case "kill":
					killed = s.Arg
				case "start":
					killed = ""
				case "pause":
					paused = s.Arg
				case "resume":
					paused = ""
				}
				out = append(out, s)
				faults++
				continue
			}
		}
		on := []string{"A", "B", "C"}[r.IntN(3)]
		m := clusterMethods[r.IntN(len(clusterMethods))]
		q := queues[r.IntN(len(queues))]
		switch m {
		case "declare-exclusive":
			q = []string{"q1", "q2"}[r.IntN(2)]
		case "declare-durable":
			q = "d1"
		case "reconnect":
			q = ""
		}
		out = append(out, ClusterStep{On: on, Do: m, Arg: q})
	}
	return out
}

// A ClusterEnv is where a sequence runs: the simulated cluster or a real
// one.
type ClusterEnv interface {
	broker.Broker
	// Timeout bounds one method.
	Timeout(d time.Duration) (context.Context, context.CancelFunc)
	// Fault strikes a fault: partition or heal of a cut ("n1>n2 ..."),
	// kill, pause, resume or restart-broker (which starts a killed node)
	// of a node.
	Fault(fault, target string) error
}

// ClusterSettle is how long a sequence waits after a fault before its
// next step: two net_ticktimes of 5 s, past the latest a node declares a
// silent peer down (1.25 of it) and what a mode then does.
const ClusterSettle = 10 * time.Second

// clusterOpTimeout bounds one method of a sequence: one through a paused
// node, or on a queue whose node is cut off and not yet declared down,
// gets no answer.
const clusterOpTimeout = 2 * time.Second

// RunClusterSteps runs steps on e and says what each step observed:
// where a sequence meets a cluster other than conform's own (the
// simulated one served on the wire). prefix names the sequence's queues.
func RunClusterSteps(e ClusterEnv, prefix string, steps []ClusterStep, steady time.Duration) []string {
	r := &clusterRun{e: e, prefix: prefix, steady: steady, clients: map[string]*clusterClient{}, cuts: map[string]bool{}, stopped: map[string]bool{}}
	for i, s := range steps {
		if s.On == "" {
			// (After the last step nothing is observed: the real
			// cluster's recovery follows at once.)
			r.fault(s, i < len(steps)-1)
		} else {
			r.method(s)
		}
	}
	for _, c := range r.clients {
		if c != nil {
			c.conn.Close()
		}
	}
	return r.out
}

// clusterRun is a sequence under way on a cluster: its clients'
// connections, the cuts and the stopped nodes in force, and what each
// step observed so far.
type clusterRun struct {
	e       ClusterEnv
	prefix  string // names the sequence's queues
	steady  time.Duration
	clients map[string]*clusterClient // by name; nil: none (its connection was lost)
	cuts    map[string]bool
	stopped map[string]bool // nodes killed or paused, until started or resumed
	out     []string
}

// clusterClient is a client's connection and its channel, in confirm
// mode.
type clusterClient struct {
	conn broker.Conn
	ch   broker.Channel
}

// dial connects client name, with a channel in confirm mode; or says
// why it could not.
func (r *clusterRun) dial(name string) (*clusterClient, string) {
	ctx, cancel := r.e.Timeout(clusterOpTimeout)
	defer cancel()
	conn, err := r.e.Dial(ctx, broker.Config{Name: name, Heartbeat: 2 * time.Second})
	if err != nil {
		return nil, "dial: " + observe(err)
	}
	ch, err := conn.Channel(ctx)
	if err == nil {
		err = ch.Confirm(ctx)
	}
	if err != nil {
		conn.Close()
		return nil, "channel: " + observe(err)
	}
	return &clusterClient{conn, ch}, ""
}

// fault strikes fault step s and observes "done" (or why it failed);
// then, settle, waits ClusterSettle, and, with no fault left in force,
// until every node serves again (NotServing if one did not).
func (r *clusterRun) fault(s ClusterStep, settle bool) {
	err := r.strike(s)
	switch s.Do {
	case "kill", "pause":
		r.stopped[s.Arg] = true
	case "start", "resume":
		delete(r.stopped, s.Arg)
	}
	observed := "done"
	if err != nil {
		observed = "fault failed: " + err.Error()
	}
	if settle {
		r.e.Sleep(context.Background(), ClusterSettle)
		if len(r.cuts) == 0 && len(r.stopped) == 0 && !awaitServing(r.e, r.steady) && observed == "done" {
			observed = NotServing
		}
	}
	r.out = append(r.out, observed)
}

// strike strikes fault step s on the cluster: a cut (noted until the
// heal), the heal of every cut, a node's restart or start, or another
// fault on a node.
func (r *clusterRun) strike(s ClusterStep) error {
	switch s.Do {
	case "isolate", "cut-one-way", "bridge":
		cut := s.cut()
		r.cuts[cut] = true
		return r.e.Fault("partition", cut)
	case "heal":
		var err error
		for _, cut := range slices.Sorted(maps.Keys(r.cuts)) {
			if e := r.e.Fault("heal", cut); e != nil && err == nil {
				err = e
			}
		}
		clear(r.cuts)
		return err
	case "restart", "start":
		return r.e.Fault("restart-broker", s.Arg)
	}
	return r.e.Fault(s.Do, s.Arg)
}

// method runs method step s through its client, connecting it first
// if its connection was lost (or at a reconnect), and observes what it
// answered.
func (r *clusterRun) method(s ClusterStep) {
	c := r.clients[s.On]
	if c != nil && c.conn.Err() != nil {
		c.conn.Close()
		c, r.clients[s.On] = nil, nil
	}
	if s.Do == "reconnect" {
		if c != nil {
			c.conn.Close()
		}
		var why string
		r.clients[s.On], why = r.dial(s.On)
		r.out = append(r.out, cmp.Or(why, "ok"))
		return
	}
	if c == nil {
		var why string
		if c, why = r.dial(s.On); c == nil {
			r.out = append(r.out, why)
			return
		}
		r.clients[s.On] = c
	}
	what, err := r.send(c, s)
	if err != nil {
		what = observe(err)
		if c.conn.Err() == nil {
			// The broker closed the channel: a fresh one for the next
			// method.
			r.freshChannel(c, s.On)
		}
	}
	r.out = append(r.out, cmp.Or(what, "ok"))
}

// send sends method step s on c's channel: what a publish's
// confirmation said ("" for any other method), or the method's error.
func (r *clusterRun) send(c *clusterClient, s ClusterStep) (string, error) {
	q := r.prefix + s.Arg
	ctx, cancel := r.e.Timeout(clusterOpTimeout)
	defer cancel()
	var err error
	switch s.Do {
	case "declare-exclusive":
		_, err = c.ch.Declare(ctx, q, broker.DeclareOptions{Exclusive: true})
	case "declare-passive":
		_, err = c.ch.Declare(ctx, q, broker.DeclareOptions{Passive: true})
	case "declare-durable":
		_, err = c.ch.Declare(ctx, q, broker.DeclareOptions{Durable: true})
	case "delete":
		_, err = c.ch.Delete(ctx, q, broker.DeleteOptions{})
	case "publish":
		var conf broker.Confirmation
		conf, err = c.ch.Publish(ctx, broker.Publishing{Key: q, Mandatory: true})
		switch {
		case err != nil:
		case conf.Returned:
			return "returned", nil
		case conf.Acked:
			return "acked", nil
		default:
			return "nacked", nil
		}
	}
	return "", err
}

// freshChannel opens c a fresh channel, in confirm mode, after the
// broker closed its last; if it cannot, it closes c's connection and
// forgets client on's.
func (r *clusterRun) freshChannel(c *clusterClient, on string) {
	ctx, cancel := r.e.Timeout(clusterOpTimeout)
	ch, err := c.conn.Channel(ctx)
	if err == nil {
		err = ch.Confirm(ctx)
	}
	cancel()
	if err != nil {
		c.conn.Close()
		r.clients[on] = nil
	} else {
		c.ch = ch
	}
}

// ServingTries bounds awaitServing: this many rounds of dials, a second
// apart.
const ServingTries = 240

// NotServing is what a fault step observed (for "done") when, after it,
// no fault in force, some node still refused connections after
// ServingTries rounds. On the real cluster that leaves the sequence
// inconclusive from there (the differential's premise, a cluster settled
// before the next step, broke): its steps before it must agree, those
// after it are not compared (unsettled). On a loaded machine an
// autoheal's loser that waits a minute for its winner (broker-semantics.md
// C.19) and then boots for as long again can outlast the wait.
const NotServing = "done, but a node did not serve again within the wait"

// awaitServing waits, after a settle that leaves no fault in force (no
// cut, no node killed or paused), until every node takes connections
// again, and has taken them in every round for steady since, for at most
// ServingTries rounds a second apart (and the steady ones after them).
// Every mode ends there, but not always within a settle: a node that
// autoheal or pause_minority stops when the partition ends starts its
// application again some seconds later, 0.4 s on the simulated cluster
// and up to 20 s on a real one under load (a dial refused 10 s after a
// resume, conform seed 20261128, sequence 1), and over a minute when an
// autoheal's loser waits 60 s for a safe-to-start message its winner
// never sends (broker-semantics.md C.19; 90 rounds were too few for seed
// 20261128's sequences 221 and 254 at a load average of 30). And a node
// seen serving may stop after: on a loaded machine an autoheal decided,
// or decided a second time, after the wait had seen every node serve
// (seed 20261129's sequences 42 and 63: a node refusing connections a
// step or more after the wait, on the real cluster alone, a loser's
// restart in 42's rerun log), hence steady (ClusterSteady). The
// differential judges what the cluster does, not how fast, so the next
// step waits for it, on both sides. It says whether every node served.
func awaitServing(e ClusterEnv, steady time.Duration) bool {
	var served time.Duration // for how long every round has served
	for range ServingTries + int(steady/time.Second) {
		all := true
		for _, name := range slices.Sorted(maps.Keys(clusterClients)) {
			ctx, cancel := e.Timeout(clusterOpTimeout)
			conn, err := e.Dial(ctx, broker.Config{Name: name, Heartbeat: 2 * time.Second})
			cancel()
			if err != nil {
				all = false
				break
			}
			conn.Close()
		}
		switch {
		case !all:
			served = 0
		case served >= steady:
			return true
		default:
			served += time.Second
		}
		e.Sleep(context.Background(), time.Second)
	}
	return false
}

// ClusterSteady is how long every node must have served, a round each
// second, before a step that follows the end of the last fault in force
// (awaitServing): past a late autoheal decision. Records of the
// differential made before it (2026-11-26) waited for one round that
// served (steady 0); a record says which it used, and the simulated
// cluster waits the same.
const ClusterSteady = 15 * time.Second

// unsettled is the first step at which real observed NotServing, or -1.
func unsettled(real []string) int { return slices.Index(real, NotServing) }

// observe is what an error says, in terms both sides share: its AMQP code
// (404 split by its two reasons), a lost connection, a timeout, a refused
// dial.
func observe(err error) string {
	var e *broker.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, broker.ErrRefused):
		return "refused"
	case errors.As(err, &e) && e.Server && e.Code == broker.NotFound && strings.Contains(e.Reason, "home node"):
		return "404 home node down"
	case errors.As(err, &e) && e.Server:
		return fmt.Sprint(e.Code)
	case broker.ConnectionLost(err):
		return "connection lost"
	}
	return "error"
}

// simClusterEnv runs a sequence on a simulated cluster, from a process
// whose connections go to their clients' nodes (rabbitmqsim.ClusterOptions.
// NodeOfConn).
type simClusterEnv struct {
	broker.Broker
	w *rabbitmqsim.World
}

func (e simClusterEnv) Timeout(d time.Duration) (context.Context, context.CancelFunc) {
	return e.w.WithTimeout(context.Background(), d)
}

func (e simClusterEnv) Fault(fault, target string) error { return e.w.Strike(fault, target) }

// RunSimCluster runs steps on a fresh simulated cluster in mode, with
// net_ticktime tick, waiting steady for a cluster whose faults ended
// (awaitServing), and says what each step observed.
func RunSimCluster(mode, version string, tick, steady time.Duration, seed uint64, steps []ClusterStep) ([]string, error) {
	w := rabbitmqsim.New(rabbitmqsim.Options{Decider: rabbitmqsim.Seeded(seed), Version: version, Cluster: &rabbitmqsim.ClusterOptions{
		Nodes: clusterNodes, PartitionHandling: mode, NetTicktime: tick,
		NodeOfConn: func(conn string) string { return clusterClients[conn] }}})
	var out []string
	w.Go("driver", func(b broker.Broker) {
		out = RunClusterSteps(simClusterEnv{b, w}, "cd-", steps, steady)
	})
	err := w.Run()
	return out, err
}

// SimSeeds is how many runs of the simulated cluster a sequence's real
// observations are matched against: where the real cluster's outcome hangs
// on a race (which of two nodes that lose each other notices first, on
// their own tick timers) or on a view (autoheal deciding on part of the
// partitions), the simulator picks one side of it by its seed, and the
// real cluster's outcome must be one the simulator can give. Some need
// four or five such picks to fall one way (autoheal, seed 20261128,
// sequences 22 and 37: a partial view, the node it sets apart, no second
// decision, and a bridge's draw; 1 seed in 12 to 36), so 256, not 32: a
// sequence that agrees is matched in a few runs, a divergence costs 256
// (a tenth of a second).
const SimSeeds = 256

// SimClusterMatch runs steps on the simulated cluster under SimSeeds seeds
// and returns the observations of the first that gives real, with -1; if
// none does, the observations that agree with real longest, and the step
// where they first differ. Where real is unsettled, only its steps before
// that one are compared.
func SimClusterMatch(mode, version string, tick, steady time.Duration, steps []ClusterStep, real []string) ([]string, int, error) {
	return ClusterMatchOn(RunSimCluster, mode, version, tick, steady, steps, real)
}

// A ClusterRunner runs a sequence's steps on a fresh simulated cluster of
// mode (version's behaviour set, net_ticktime tick) whose decisions come
// from seed, and says what each step observed: RunSimCluster, or the
// cluster served on the wire.
type ClusterRunner func(mode, version string, tick, steady time.Duration, seed uint64, steps []ClusterStep) ([]string, error)

// ClusterMatchOn is SimClusterMatch with the simulated cluster run by run.
func ClusterMatchOn(run ClusterRunner, mode, version string, tick, steady time.Duration, steps []ClusterStep, real []string) ([]string, int, error) {
	var best []string
	bestAt := -1
	upTo := len(steps)
	if u := unsettled(real); u >= 0 {
		upTo = u
	}
	for seed := range uint64(SimSeeds) {
		sim, err := run(mode, version, tick, steady, seed, steps)
		if err != nil {
			return nil, -1, err
		}
		k := diffAt(real[:upTo], sim[:min(upTo, len(sim))])
		if k < 0 {
			return sim, -1, nil
		}
		if k > bestAt {
			best, bestAt = sim, k
		}
	}
	return best, bestAt, nil
}

// RealCluster is a started RabbitMQ cluster in its lab, as the
// differential's other side.
type RealCluster struct {
	Cluster *rabbitmq.Cluster
	Lab     *netns.Lab
}

// realClusterEnv runs a sequence on a real cluster, its clients dialling
// their nodes directly.
type realClusterEnv struct {
	rc    RealCluster
	ctx   context.Context
	made  map[string][][2]string // each partition's directions it cut
	spent clusterTimes
}

// clusterTimes is where a sequence's time on the real cluster went: its
// faults (a node's start and restart wait until it runs), the settles
// after them (ClusterSettle each), and making the cluster one again after
// it (recovery: rabbitmq.Cluster.Recover, whose own split is recovered,
// and the cleanup); the rest is its methods.
type clusterTimes struct {
	faults, settles, recovery time.Duration
	recovered                 rabbitmq.Recovery
}

func (t clusterTimes) String() string {
	did := ""
	if len(t.recovered.Did) > 0 {
		did = " (" + t.recovered.String() + ")"
	}
	return fmt.Sprintf("faults %.0fs, settles %.0fs, recovery %.0fs%s: %s", t.faults.Seconds(), t.settles.Seconds(), t.recovery.Seconds(), did, t.recovered.Times())
}

func (e *realClusterEnv) Dial(ctx context.Context, cfg broker.Config) (broker.Conn, error) {
	n := e.rc.Cluster.Node(clusterClients[cfg.Name])
	return rabbitmq.New(n.URL()).Dial(ctx, cfg)
}

func (e *realClusterEnv) Sleep(ctx context.Context, d time.Duration) error {
	defer func(t0 time.Time) { e.spent.settles += time.Since(t0) }(time.Now())
	select {
	case <-time.After(d):
		return nil
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
}

func (e *realClusterEnv) Timeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, d)
}

func (e *realClusterEnv) Fault(fault, target string) error {
	defer func(t0 time.Time) { e.spent.faults += time.Since(t0) }(time.Now())
	if strings.Contains(target, ">") {
		var dirs [][2]string
		for _, d := range strings.Fields(target) {
			from, to, _ := strings.Cut(d, ">")
			dirs = append(dirs, [2]string{from, to})
		}
		switch fault {
		case "partition":
			for _, d := range dirs {
				if err := e.rc.Lab.Cut(e.ctx, d[0], d[1]); err != nil {
					return err
				}
			}
			e.made[target] = dirs
		case "heal":
			for _, d := range e.made[target] {
				if err := e.rc.Lab.Restore(e.ctx, d[0], d[1]); err != nil {
					return err
				}
			}
			delete(e.made, target)
		}
		return nil
	}
	n := e.rc.Cluster.Node(target)
	if n == nil {
		return fmt.Errorf("no node %q", target)
	}
	switch fault {
	case "kill":
		return n.Crash()
	case "pause":
		return n.Pause()
	case "resume":
		return n.Resume()
	case "restart-broker":
		if !n.Up() {
			return n.Start(e.ctx)
		}
		return n.Restart(e.ctx)
	}
	return fmt.Errorf("%s cannot strike node %s", fault, target)
}

// runRealCluster runs steps on the real cluster, its queues' names
// beginning with prefix (a prefix of its own for each run: a durable
// queue of a node that rejoins comes back a while after the cluster
// agrees again, after any cleanup), then makes it one again
// (rabbitmq.Cluster.Recover) and deletes the queues it can. It says
// where the time went.
func runRealCluster(ctx context.Context, rc RealCluster, prefix string, steps []ClusterStep) ([]string, clusterTimes, error) {
	e := &realClusterEnv{rc: rc, ctx: ctx, made: map[string][][2]string{}}
	// A sequence starts, as on the simulated cluster, with every node
	// serving, steadily: the last recovery saw the nodes agree, but a node
	// may stop after that (an autoheal deciding late: seed 20261131's
	// sequence 77 found n1 refusing at its first step, and so did the
	// shrinker's runs after it). The wait counts as recovery.
	t0 := time.Now()
	if !awaitServing(e, ClusterSteady) {
		if ctx.Err() != nil {
			return nil, e.spent, ctx.Err()
		}
		return nil, e.spent, fmt.Errorf("before the sequence a node did not serve for %s within %d rounds", ClusterSteady, ServingTries)
	}
	e.spent = clusterTimes{recovery: time.Since(t0)}
	out := RunClusterSteps(e, prefix, steps, ClusterSteady)
	if ctx.Err() != nil {
		return nil, e.spent, ctx.Err()
	}
	t0 = time.Now()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var err error
	if e.spent.recovered, err = rc.Cluster.Recover(rctx, rc.Lab); err != nil {
		if errors.Is(err, rabbitmq.ErrStillSplit) {
			if rerr := rc.Cluster.Reset(rctx); rerr != nil {
				return nil, e.spent, fmt.Errorf("%w; made anew: %v", err, rerr)
			}
		} else {
			return nil, e.spent, err
		}
	}
	// The sequence's durable queue goes, through the first node, where
	// it can (exclusive ones went with their connections; the names are
	// the run's own either way).
	if conn, err := rabbitmq.New(rc.Cluster.Nodes[0].URL()).Dial(rctx, broker.Config{}); err == nil {
		if ch, err := conn.Channel(rctx); err == nil {
			ch.Delete(rctx, prefix+"d1", broker.DeleteOptions{})
		}
		conn.Close()
	}
	e.spent.recovery += time.Since(t0)
	return out, e.spent, nil
}

// ClusterDiffOptions configure ClusterDifferential.
type ClusterDiffOptions struct {
	Mode string // the cluster's partition handling
	// Version is the real cluster's RabbitMQ release, whose behaviour
	// the simulated cluster takes (rabbitmqsim.Options.Version; "" is
	// its default).
	Version   string
	KeepGoing bool // count a divergence and go on, shrinking none
	Sequences int
	Seed      uint64
	First     int           // the index of the first sequence drawn from Seed
	Steps     int           // per sequence; 0 means 10
	Shrink    time.Duration // time to spend shrinking a divergence
	Out       io.Writer     // a line per sequence
	// Record, if set, is given a ClusterRecord of each drawn sequence
	// (not of the shrinker's), as a line of JSON.
	Record io.Writer
}

// A ClusterRecord is what the real cluster observed on one sequence of
// the differential: a corpus of them holds the simulated cluster to every
// real run made so far, in seconds and with no cluster
// (MatchClusterRecords; conform --cluster --recorded).
type ClusterRecord struct {
	Mode string `json:"mode"`
	// Version is the real cluster's RabbitMQ release; empty in records
	// made before there was one: 3.10.8 under Mnesia's modes, 4.3.6
	// under khepri.
	Version     string        `json:"version,omitempty"`
	NetTicktime string        `json:"net_ticktime"`
	Seed        uint64        `json:"seed"`
	Sequence    int           `json:"sequence"`
	Steps       []ClusterStep `json:"steps"`
	Real        []string      `json:"real"`
	// Steady is the ClusterSteady its run waited ("15s"); empty in
	// records made before there was one, which waited none.
	Steady string `json:"steady,omitempty"`
	Agreed bool   `json:"agreed"` // with the simulated cluster of the run that recorded it
	At     string `json:"at"`     // when it ran (RFC 3339)
}

// ReadClusterRecords reads a corpus of ClusterRecords, one JSON object a
// line (blank lines skipped); an error names the line and what is wrong.
func ReadClusterRecords(r io.Reader, name string) ([]ClusterRecord, error) {
	var out []ClusterRecord
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec ClusterRecord
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		if err := rec.valid(); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return out, nil
}

// steady is the record's Steady.
func (rec ClusterRecord) steady() (time.Duration, error) {
	if rec.Steady == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(rec.Steady)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("steady %q: a duration such as 15s, or none", rec.Steady)
	}
	return d, nil
}

// tick is the record's net_ticktime.
func (rec ClusterRecord) tick() (time.Duration, error) {
	d, err := time.ParseDuration(rec.NetTicktime)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("net_ticktime %q: a positive duration such as 5s", rec.NetTicktime)
	}
	return d, nil
}

func (rec ClusterRecord) valid() error {
	if !slices.Contains(rabbitmq.Modes, rec.Mode) {
		return fmt.Errorf("mode %q: one of %s", rec.Mode, strings.Join(rabbitmq.Modes, ", "))
	}
	if _, err := rec.tick(); err != nil {
		return err
	}
	if _, err := rec.steady(); err != nil {
		return err
	}
	if len(rec.Steps) == 0 || len(rec.Real) != len(rec.Steps) {
		return fmt.Errorf("%d steps and %d observations: want as many, at least one", len(rec.Steps), len(rec.Real))
	}
	for i, st := range rec.Steps {
		switch {
		case st.On == "" && slices.Contains(clusterFaults, st.Do):
		case clusterClients[st.On] != "" && slices.Contains(clusterMethods, st.Do):
		default:
			return fmt.Errorf("step %d: %q on %q is neither a fault (%s) nor a method (%s) of client A, B or C", i+1, st.Do, st.On, strings.Join(clusterFaults, ", "), strings.Join(clusterMethods, ", "))
		}
	}
	return nil
}

// A ClusterTally counts the sequences a differential compared: those
// that agreed, and those inconclusive (the real cluster unsettled: a
// node had not served again within the wait, NotServing), which agreed
// up to there.
type ClusterTally struct {
	Agreed, Inconclusive int
	// Diverged counts the sequences that diverged, where the differential
	// went on after them (ClusterDiffOptions.KeepGoing); First is the
	// first of them.
	Diverged int
	First    *ClusterDivergence
}

// Compared is every sequence the tally counts.
func (t ClusterTally) Compared() int { return t.Agreed + t.Inconclusive + t.Diverged }

func (t *ClusterTally) add(real []string) {
	if unsettled(real) >= 0 {
		t.Inconclusive++
	} else {
		t.Agreed++
	}
}

// MatchClusterRecords holds the simulated cluster to each record (as the
// differential does: one of SimSeeds seeds must give the real
// observations). It returns the tally of those that agree, and the first
// that does not as a divergence (its Seq the record's sequence), or nil.
func MatchClusterRecords(recs []ClusterRecord) (t ClusterTally, d *ClusterDivergence, err error) {
	return MatchClusterRecordsOn(RunSimCluster, recs)
}

// MatchClusterRecordsOn is MatchClusterRecords with the simulated cluster
// run by run.
func MatchClusterRecordsOn(run ClusterRunner, recs []ClusterRecord) (t ClusterTally, d *ClusterDivergence, err error) {
	for _, rec := range recs {
		tick, err := rec.tick()
		if err != nil {
			return t, nil, err
		}
		steady, err := rec.steady()
		if err != nil {
			return t, nil, err
		}
		sim, k, err := ClusterMatchOn(run, rec.Mode, rec.Version, tick, steady, rec.Steps, rec.Real)
		if err != nil {
			return t, nil, fmt.Errorf("%s seed %d sequence %d: %w", rec.Mode, rec.Seed, rec.Sequence, err)
		}
		if k >= 0 {
			return t, &ClusterDivergence{Seq: rec.Sequence, Steps: rec.Steps, Real: rec.Real, Sim: sim, Step: k}, nil
		}
		t.add(rec.Real)
	}
	return t, nil, nil
}

// A ClusterDivergence is a sequence on which the simulated cluster and
// the real one observed differently, from its first differing step.
type ClusterDivergence struct {
	Seq         int
	Steps       []ClusterStep
	Real, Sim   []string
	Step        int // the first step that differs
	ShrunkSteps []ClusterStep
}

func (d *ClusterDivergence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sequence %d, step %d differs:\n", d.Seq, d.Step+1)
	for i, s := range d.Steps {
		mark := "  "
		if i == d.Step {
			mark = "> "
		}
		fmt.Fprintf(&b, "%s%2d %-36s real: %-22s sim: %s\n", mark, i+1, s, obsAt(d.Real, i), obsAt(d.Sim, i))
	}
	if d.ShrunkSteps != nil {
		fmt.Fprintf(&b, "shrunk to %d steps:\n", len(d.ShrunkSteps))
		for i, s := range d.ShrunkSteps {
			fmt.Fprintf(&b, "  %2d %s\n", i+1, s)
		}
	}
	return b.String()
}

func obsAt(obs []string, i int) string {
	if i < len(obs) {
		return obs[i]
	}
	return "-"
}

// diffAt is the first step at which real and sim differ, or -1.
func diffAt(real, sim []string) int {
	for i := range max(len(real), len(sim)) {
		if obsAt(real, i) != obsAt(sim, i) {
			return i
		}
	}
	return -1
}

// ClusterDifferential runs o.Sequences drawn sequences on the real
// cluster and on the simulated one and compares them step by step; it
// stops at the first divergence, which it shrinks for o.Shrink (fewer
// steps, still diverging), and returns it with the tally of the sequences
// before it. With o.KeepGoing it runs every sequence (a record of a
// hundred on a real cluster takes over an hour), counts the divergences
// in the tally and returns the first, unshrunk.
func ClusterDifferential(ctx context.Context, rc RealCluster, o ClusterDiffOptions) (t ClusterTally, d *ClusterDivergence, err error) {
	if o.Steps <= 0 {
		o.Steps = 10
	}
	tick := rc.Cluster.Options().NetTicktime
	runs := 0
	var spent clusterTimes
	diverges := func(steps []ClusterStep) ([]string, []string, int, error) {
		runs++
		real, t, err := runRealCluster(ctx, rc, fmt.Sprintf("cd%d-%d-", o.Seed%1000, runs), steps)
		spent = t
		if err != nil {
			return nil, nil, -1, err
		}
		sim, k, err := SimClusterMatch(o.Mode, o.Version, tick, ClusterSteady, steps, real)
		return real, sim, k, err
	}
	for i := o.First; i < o.First+o.Sequences; i++ {
		r := rand.New(rand.NewPCG(o.Seed, uint64(i)))
		steps := DrawClusterSteps(r, o.Steps)
		t0 := time.Now()
		real, sim, k, err := diverges(steps)
		if err != nil {
			return t, nil, fmt.Errorf("sequence %d: %w", i, err)
		}
		u := unsettled(real)
		if o.Record != nil {
			line, _ := json.Marshal(ClusterRecord{Mode: o.Mode, Version: o.Version, NetTicktime: tick.String(), Seed: o.Seed, Sequence: i,
				Steps: steps, Real: real, Steady: ClusterSteady.String(), Agreed: k < 0 && u < 0, At: t0.UTC().Format(time.RFC3339)})
			if _, err := o.Record.Write(append(line, '\n')); err != nil {
				return t, nil, fmt.Errorf("recording sequence %d: %w", i, err)
			}
		}
		if o.Out != nil {
			verdict := "agrees"
			switch {
			case k >= 0:
				verdict = "DIVERGES"
			case u >= 0:
				verdict = fmt.Sprintf("inconclusive (agrees up to step %d, after which a node did not serve again within the wait)", u+1)
			}
			fmt.Fprintf(o.Out, "sequence %d (%s): %s in %.0fs (%s)\n", i, o.Mode, verdict, time.Since(t0).Seconds(), spent)
		}
		if k < 0 {
			t.add(real)
			continue
		}
		d = &ClusterDivergence{Seq: i, Steps: steps, Real: real, Sim: sim, Step: k}
		if o.KeepGoing {
			t.Diverged++
			if t.First == nil {
				t.First = d
			}
			continue
		}
		d.ShrunkSteps = shrinkCluster(ctx, steps[:k+1], o.Shrink, func(s []ClusterStep) bool {
			_, _, k, err := diverges(s)
			return err == nil && k >= 0
		})
		return t, d, nil
	}
	return t, t.First, nil
}

// shrinkCluster removes steps one at a time while the sequence still
// diverges, for at most budget.
func shrinkCluster(ctx context.Context, steps []ClusterStep, budget time.Duration, diverges func([]ClusterStep) bool) []ClusterStep {
	if budget <= 0 {
		return nil
	}
	end := time.Now().Add(budget)
	cur := steps
	for i := 0; i < len(cur)-1 && time.Now().Before(end) && ctx.Err() == nil; {
		try := append(append([]ClusterStep{}, cur[:i]...), cur[i+1:]...)
		if diverges(try) {
			cur = try
			continue
		}
		i++
	}
	return cur
}
