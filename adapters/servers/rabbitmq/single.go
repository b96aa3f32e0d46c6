package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/lockprover/lockprover/adapters/host/netns"
)

// A Single is one private RabbitMQ node in a network lab of its own (one
// host, n1): a node of any version (ClusterOptions.Version), reachable
// from the caller's namespace at Node.Addr. Stop removes everything it
// made: the node (its VM, epmd, the run's mounts and namespaces), the lab
// and, when StartSingle chose it, the directory.
type Single struct {
	*Node
	Cluster *Cluster
	Lab     *netns.Lab
	dir     string
	tmp     bool
}

// SingleHost is the name of a Single's lab host.
const SingleHost = "n1"

// StartSingle builds a one-host lab and starts one node in it (a cluster
// of one: StartCluster), its files under dir, or under a temporary
// directory of its own if dir is "". On failure it has removed what it
// made.
func StartSingle(ctx context.Context, dir string, o ClusterOptions) (*Single, error) {
	if o.Version.Server != "" && o.Version.Server != "rabbitmq" {
		return nil, fmt.Errorf("rabbitmq node: %s is not a version of RabbitMQ", o.Version)
	}
	if err := ClusterPreflightOf(o.Version); err != nil {
		return nil, fmt.Errorf("rabbitmq node: %w", err)
	}
	s := &Single{dir: dir}
	if dir == "" {
		d, err := os.MkdirTemp("", "lockprover-rabbitmq-")
		if err != nil {
			return nil, err
		}
		s.dir, s.tmp = d, true
	}
	lab, err := netns.New(ctx, SingleHost)
	if err != nil {
		s.removeDir()
		return nil, fmt.Errorf("rabbitmq node: %w", err)
	}
	s.Lab = lab
	c, err := StartCluster(ctx, lab, s.dir, o, SingleHost)
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.Cluster, s.Node = c, c.Nodes[0]
	return s, nil
}

// Dir is where the node's files are.
func (s *Single) Dir() string { return s.dir }

// Stop stops the node, closes the lab (every process left in its
// namespaces killed) and removes the directory StartSingle chose. It
// may be called more than once.
func (s *Single) Stop() error {
	var errs []error
	if s.Cluster != nil {
		errs = append(errs, s.Cluster.Stop())
		s.Cluster = nil
	}
	if s.Lab != nil {
		errs = append(errs, s.Lab.Close())
		s.Lab = nil
	}
	s.removeDir()
	return errors.Join(errs...)
}

func (s *Single) removeDir() {
	if s.tmp && s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}
