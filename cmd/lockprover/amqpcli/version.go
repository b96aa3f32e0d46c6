package amqpcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
)

// serverVersionFlag is --server-version: a private node of that RabbitMQ
// for the run (--target rabbitmq), or the version of the cluster's nodes
// (--target rabbitmq-cluster).
var serverVersionFlag = serverversion.Flag(family.Prove|family.Replay|family.Conform,
	"amqp-locks: on --target sim, the release the simulator behaves as ("+strings.Join(rabbitmqsim.Versions, ", ")+": 4.3.6 may answer a connection's close before its exclusive queues are gone); on --target rabbitmq (and conform), a private single RabbitMQ node of this version for the run, in a network lab of its own (needs root), removed at its end; on --target rabbitmq-cluster, the version of its nodes: "+
		strings.Join(versions.Choices("rabbitmq"), ", ")+
		" ("+serverversion.Default("rabbitmq").Name+" is the machine's rabbitmq-server; "+serverversion.Others+")")

// versionConflicts refuses the flags that name another broker than the
// private node --server-version starts.
func versionConflicts(s family.Settings) error {
	for _, name := range []string{"amqp-url", "docker-image"} {
		if s.Given(name) {
			return family.Usagef("--server-version starts a private node for the run: not with --%s", name)
		}
	}
	if s.Flag("docker") == dockerAlways {
		return family.Usagef("--server-version starts a private node for the run: not with --docker always")
	}
	return nil
}

// A nodeBox is the private node of one run (--server-version): a
// network lab of one host and a RabbitMQ node of the version in it,
// started by start and gone, lab, node, epmd and files, after stop.
type nodeBox struct {
	v      versions.Version
	stderr io.Writer

	mu    sync.Mutex
	s     *rabbitmq.Single
	leave func()
}

func newNodeBox(s family.Settings, v versions.Version) *nodeBox {
	b := &nodeBox{v: v, stderr: s.Stderr}
	if b.stderr == nil {
		b.stderr = io.Discard
	}
	return b
}

// where says what the box runs, in words.
func (b *nodeBox) where() string {
	from := "the machine's rabbitmq-server"
	if b.v.Rooted() {
		from = "from Debian " + b.v.Release + "'s root"
	}
	return fmt.Sprintf("a private RabbitMQ %s node (%s)", b.v.Name, from)
}

// start makes the root if need be, then the lab and the node, saying so
// and how long it took; a machine that cannot is a *family.UsageError
// naming what it lacks.
func (b *nodeBox) start(ctx context.Context) error {
	if err := rabbitmq.ClusterPreflightOf(b.v); err != nil {
		return family.Usagef("--server-version %s: %v", b.v.Name, err)
	}
	if err := serverversion.Have(ctx, b.v, b.stderr); err != nil {
		return err
	}
	t0 := time.Now()
	fmt.Fprintf(b.stderr, "lockprover: starting %s in a network lab of its own\n", b.where())
	leave := prover.Leave(fmt.Sprintf("the RabbitMQ %s node's network lab (ip netns list: namespaces beginning with lp; lockprover removes a dead run's lab when it next makes one)", b.v.Name))
	s, err := rabbitmq.StartSingle(ctx, "", rabbitmq.ClusterOptions{Version: b.v})
	if err != nil {
		leave()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, debroot.ErrUnavailable) {
			return family.Usagef("--server-version %s: %v", b.v.Name, err)
		}
		return fmt.Errorf("--server-version %s: %w", b.v.Name, err)
	}
	b.mu.Lock()
	b.s, b.leave = s, leave
	b.mu.Unlock()
	fmt.Fprintf(b.stderr, "lockprover: started RabbitMQ %s node %s at %s (network lab %s) in %.1fs; it is removed when the run ends\n",
		b.v.Name, s.Name, s.Addr, s.Lab.ID, time.Since(t0).Seconds())
	return nil
}

// stop stops the node and removes its lab and files; it may be called
// more than once.
func (b *nodeBox) stop() {
	b.mu.Lock()
	s, leave := b.s, b.leave
	b.s, b.leave = nil, nil
	b.mu.Unlock()
	if s == nil {
		return
	}
	if err := s.Stop(); err != nil {
		fmt.Fprintf(b.stderr, "lockprover: stopping the RabbitMQ %s node: %v\n", b.v.Name, err)
		return
	}
	leave()
	fmt.Fprintf(b.stderr, "lockprover: removed the RabbitMQ %s node and its network lab\n", b.v.Name)
}

// url is the node's AMQP URL, once started.
func (b *nodeBox) url() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.s == nil {
		return ""
	}
	return b.s.URL()
}

// ctl is the rabbitmqctl command of the node, once started.
func (b *nodeBox) ctl() ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.s == nil {
		return nil, errors.New("the node is not started")
	}
	return b.s.CtlCommand()
}

// target is the real target on the node, once started.
func (b *nodeBox) target(restart bool) (amqprun.RabbitMQ, error) {
	ctl, err := b.ctl()
	if err != nil {
		return amqprun.RabbitMQ{}, err
	}
	return amqprun.RabbitMQ{URL: b.url(), Ctl: ctl, AllowRestart: restart}, nil
}
