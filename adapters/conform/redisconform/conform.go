package redisconform

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockprover/lockprover/internal/diffrun"
)

// A Report is what Differential found.
type Report struct {
	// Name is the server's, as INFO says it (server_name: "valkey"),
	// "redis" where INFO has none; Server its version ("7.0.15",
	// "9.1.2": valkey_version for Valkey, whose redis_version is the
	// Redis it is compatible with, 7.2.4).
	Name, Server string
	// Sequences counts the sequences run (up to and including the first
	// divergence), Commands the commands of those judged, Inconclusive
	// those the machine was too slow to judge on every try.
	Sequences, Commands, Inconclusive int
	Elapsed                           time.Duration
	// Divergence is the first sequence on which the simulator and Redis
	// answered differently, step by step with both answers, and the seed
	// and number that draw it again; "" if none did.
	Divergence string
}

func (r Report) String() string {
	return fmt.Sprintf("%d sequences, %d commands, %d inconclusive, %.1fs", r.Sequences, r.Commands, r.Inconclusive, r.Elapsed.Seconds())
}

// diffBatch is how many sequences each of rapidbatch's batches holds.
const diffBatch = 100

// replays is how many more times a diverging sequence runs.
const replays = 3

// Differential runs n sequences drawn from seed of the commands and
// scripts the Redlock reference sends, with sleeps, on a simulated server
// and on the redis-servers at addrs (private ones: it empties their script
// caches), and compares the answers step by step (see differential.go for
// what is compared, with what tolerance, and when a sequence is
// inconclusive). A sequence's sleeps are real time, so the servers run a
// sequence each, side by side. The first divergence (the lowest-numbered
// sequence that diverges) runs again on Redis a few times, and is
// described in Report.Divergence. Progress lines go to progress (nil: none).
//
// The same seed draws the same sequences, as rapid draws them
// (internal/rapidbatch): Differential needs none of rapid's settings, and
// does not shrink. An error is the harness's (Redis could not be asked,
// the simulator failed); if ctx ends, it wraps ctx's error.
func Differential(ctx context.Context, addrs []string, n int, seed uint64, progress io.Writer) (Report, error) {
	start := time.Now()
	if len(addrs) == 0 || n <= 0 {
		return Report{}, fmt.Errorf("redissim: differential of %d sequences on %d servers", n, len(addrs))
	}
	var clients []*goredis.Client
	for _, a := range addrs {
		c := client(a)
		defer c.Close()
		clients = append(clients, c)
	}
	name, ver, err := version(ctx, clients[0])
	if err != nil {
		return Report{}, err
	}
	vs, first, err := diffrun.Run(ctx, diffrun.Config[[]step, verdict]{
		N: n, Batch: diffBatch, Seed: seed, Draw: drawSequence, Workers: len(clients),
		Judge: func(ctx context.Context, worker, k int, steps []step) (verdict, error) {
			return judge(ctx, clients[worker], k, steps)
		},
		Progress: progressTo(progress, n),
	})
	if err == nil && first != nil {
		err = first.replay(ctx, clients[0], replays)
	}
	rep := Report{Name: name, Server: ver}
	var reached bool
	rep.Sequences, rep.Commands, rep.Inconclusive, reached = diffrun.Tally(vs, first)
	if reached {
		rep.Divergence = first.String(seed)
	}
	rep.Elapsed = time.Since(start)
	if ctx.Err() != nil {
		return rep, fmt.Errorf("redissim: differential: %w", ctx.Err())
	}
	return rep, err
}

// version is the server's name and version, from INFO: Redis's
// redis_version, or Valkey's valkey_version (its server_name valkey).
func version(ctx context.Context, c *goredis.Client) (name, ver string, err error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", "", fmt.Errorf("redissim: INFO server: %w", err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	name = fields["server_name"]
	if name == "" {
		name = "redis"
	}
	if ver = fields[name+"_version"]; ver == "" {
		return "", "", fmt.Errorf("redissim: INFO server gives no %s_version", name)
	}
	return name, ver, nil
}

// progressTo writes a Differential's progress lines to w (nil: none).
func progressTo(w io.Writer, n int) func(ran, commands, inconclusive int) {
	if w == nil {
		return nil
	}
	return func(ran, commands, inconclusive int) {
		fmt.Fprintf(w, "  %d/%d sequences, %d commands, %d inconclusive\n", ran, n, commands, inconclusive)
	}
}

// Diverged, Inconclusive and Steps make a verdict a diffrun.Verdict.
func (v verdict) Diverged() bool     { return v.first >= 0 }
func (v verdict) Inconclusive() bool { return v.slow }
func (v verdict) Steps() int         { return len(v.steps) }
