package redlockcli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/lockprover/lockprover/adapters/conform/redisconform"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/adapters/served/redisserve"
	redisbk "github.com/lockprover/lockprover/adapters/servers/redis"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/internal/family"
)

func init() { Redlock.Conform = redlockConform }

// redlockConformServers is how many private redis-servers conform --kind
// redlock starts: each runs one sequence at a time, and a sequence spends
// most of its time asleep (its sleeps are real time on Redis).
const redlockConformServers = 8

// redlockConform runs drawn sequences of the commands and scripts the
// Redlock reference sends on the simulated server (sim/redissim) and on
// private redis-servers, started for the run and removed after it, and
// compares the answers step by step (redisconform.Differential). More than a
// tenth of the sequences inconclusive (the machine too slow to judge
// expiry by) makes the run inconclusive.
func redlockConform(ctx context.Context, s family.Settings, c family.ConformConfig, out io.Writer) (family.Conformance, error) {
	if c.Sequences == 0 {
		return 0, family.Usagef("--sequences 0 leaves nothing to run with --kind %s", redlockrun.Kind)
	}
	v, err := serverversion.Parse(s, "redis", "valkey")
	if err != nil {
		return 0, err
	}
	if err := serverversion.Have(ctx, v, c.Log); err != nil {
		return 0, err
	}
	name := v.Server + "-server" // redis-server, valkey-server
	dir, err := os.MkdirTemp("", "lockprover-conform-redis-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	servers, err := redisbk.StartN(ctx, dir, redlockConformServers, redisbk.Options{Version: v})
	switch {
	case ctx.Err() != nil:
		return 0, fmt.Errorf("interrupted while starting %s: %w", name, ctx.Err())
	case err != nil:
		return 0, &family.UsageError{Err: fmt.Errorf("--kind %s runs the simulator against private %ss: %w", redlockrun.Kind, name, err)}
	}
	defer redisbk.StopAll(servers)
	against := name
	if v.Rooted() {
		against += " " + v.Name
	}
	fmt.Fprintf(out, "redissim against %s: %d sequences of the commands and scripts redlock sends, seed %d, on %d private servers\n",
		against, c.Sequences, c.Seed, len(servers))
	redisconform.Scripts = redisserve.NewLua // redis-semaphore's scripts, run as on the wire
	rep, err := redisconform.Differential(ctx, redisbk.Addrs(servers), c.Sequences, c.Seed, out)
	return family.Differential{Report: rep, Server: rep.Name + "-server " + rep.Server, Divergence: rep.Divergence,
		Sequences: rep.Sequences, Inconclusive: rep.Inconclusive, Err: err,
		Stopped: "its private redis-servers are stopped"}.End(ctx, c, out)
}
