package consulsemrun

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// ConformCluster is the cluster as the real side of the cluster
// differential (consulconform.ClusterDifferential).
func (c *Cluster) ConformCluster() ConformCluster { return ConformCluster{c} }

// A ConformCluster is a cluster as the real side of the cluster
// differential: it has the methods of adapters/conform/consulconform's
// ClusterTarget, which a family's runner does not import (conform is
// generic machinery), so that the CLI hands it to the differential.
type ConformCluster struct{ c *Cluster }

// Kind is the cluster's server.
func (t ConformCluster) Kind() consulsim.Kind { return kindOf(t.c.Backend) }

// Server is the first application node's server and version ("consul
// 1.20.2"), or the backend's name if it does not say.
func (t ConformCluster) Server(ctx context.Context) string {
	var v string
	var err error
	if t.c.etc != nil {
		var cli *clientv3.Client
		if cli, err = t.client(t.c.AppAddr()); err == nil {
			v, err = etcd.ServerVersion(ctx, cli, t.c.AppAddr())
			cli.Close()
		}
	} else {
		v, err = consul.AgentVersion(ctx, t.c.AppAddr())
	}
	if err != nil {
		return t.c.Backend
	}
	return v
}

func (t ConformCluster) client(addr string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
}

// Client is a client of the recipe's calls talking to node only.
func (t ConformCluster) Client(node string) (consulsem.Backend, func(), error) {
	addr := t.c.addr(node)
	if t.c.etc == nil {
		b, err := consulsem.ConsulBackend(addr, nil)
		if err != nil {
			return nil, nil, err
		}
		return b, func() { b.Close() }, nil
	}
	cli, err := t.client(addr)
	if err != nil {
		return nil, nil, err
	}
	b, err := consulsem.EtcdBackend(cli)
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return b, func() { cli.Close() }, nil
}

// Strike: a partition or heal of a cut, a pause or resume of a node, a
// kill (SIGKILL) or restart-broker (SIGTERM) of a node started again at
// once, returning once it answers (two minutes at most).
func (t ConformCluster) Strike(ctx context.Context, fault, target string) error {
	switch fault {
	case "partition", "heal":
		return t.c.cut(ctx, target, fault == "heal")
	case "pause":
		t.c.touch()
		return t.c.member(target).Pause()
	case "resume":
		return t.c.member(target).Resume()
	case "kill", "restart-broker":
		t.c.touch()
		bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if fault == "kill" {
			return t.c.member(target).Crash(bctx, 0)
		}
		return t.c.member(target).Restart(bctx, 0)
	}
	return fmt.Errorf("no fault %q on a cluster", fault)
}

// Whole waits until the cluster is whole (Cluster.whole: on Consul also
// every server a voter and every agent answered through each server), two
// minutes at most.
func (t ConformCluster) Whole(ctx context.Context) error {
	if err := t.c.whole(ctx, 2*time.Minute); err != nil {
		return fmt.Errorf("the cluster is not whole two minutes after its fault ended: %w", err)
	}
	return nil
}
