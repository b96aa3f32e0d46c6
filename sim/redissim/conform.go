package redissim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockprover/lockprover/internal/rapidbatch"
)

// A Report is what Differential found.
type Report struct {
	Server string // redis-server's version ("7.0.15")
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
	ver, err := version(ctx, clients[0])
	if err != nil {
		return Report{}, err
	}
	d := &differ{clients: clients, n: n, seed: seed, progress: progress}
	vs, first, err := d.run(ctx)
	if err == nil && first != nil {
		err = first.replay(ctx, clients[0], replays)
	}
	rep := Report{Server: ver}
	for _, v := range vs {
		if v == nil {
			break
		}
		rep.Sequences++
		if v.slow {
			rep.Inconclusive++
		} else {
			rep.Commands += len(v.steps)
		}
		if v == first {
			rep.Divergence = v.String(seed)
			break
		}
	}
	rep.Elapsed = time.Since(start)
	if ctx.Err() != nil {
		return rep, fmt.Errorf("redissim: differential: %w", ctx.Err())
	}
	return rep, err
}

// version is redis-server's version, from INFO.
func version(ctx context.Context, c *goredis.Client) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("redissim: INFO server: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", errors.New("redissim: INFO server gives no redis_version")
}

// differ runs a Differential's sequences: one goroutine draws them, in
// order, and hands each to the first of the servers' goroutines free.
type differ struct {
	clients  []*goredis.Client
	n        int
	seed     uint64
	progress io.Writer
}

// judged is a server's goroutine's word on a sequence.
type judged struct {
	v   verdict
	err error
}

// run runs the sequences until all have run, one diverges, or an error
// (the first) stops them. It returns the verdicts by number (nil for
// those not run; all those before a divergence have run) and the first
// divergence, nil if none.
func (d *differ) run(ctx context.Context) (vs []*verdict, first *verdict, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	halt := sync.OnceFunc(func() { close(stop) })
	defer halt()
	jobs := make(chan verdict)
	var drawErr error
	go func() {
		defer close(jobs)
		drawErr = d.draw(jobs, stop)
	}()
	vs = make([]*verdict, d.n)
	var ran, commands, slow int
	for j := range d.judgeAll(ctx, jobs) {
		switch {
		case j.err != nil:
			if err == nil {
				err = j.err
			}
			halt()
			cancel()
			continue
		case j.v.first >= 0 && (first == nil || j.v.n < first.n):
			first = &j.v
			halt()
		}
		vs[j.v.n] = &j.v
		ran++
		if j.v.slow {
			slow++
		} else {
			commands += len(j.v.steps)
		}
		if d.progress != nil && ran%max(d.n/10, 1) == 0 && ran < d.n && first == nil && err == nil {
			fmt.Fprintf(d.progress, "  %d/%d sequences, %d commands, %d inconclusive\n", ran, d.n, commands, slow)
		}
	}
	if err == nil {
		err = drawErr // read once jobs is closed, before done was
	}
	return vs, first, err
}

// draw draws the sequences in order and sends them on jobs, until stop
// is closed.
func (d *differ) draw(jobs chan<- verdict, stop <-chan struct{}) error {
	k := 0
	_, _, _, err := rapidbatch.Cases(d.seed, d.n, diffBatch, drawSequence, func(steps []step) bool {
		select {
		case jobs <- verdict{n: k, steps: steps}:
			k++
			return false
		case <-stop:
			return true
		}
	})
	return err
}

// judgeAll judges the sequences of jobs, one at a time on each server,
// and sends each verdict on the channel it returns, closed once jobs is
// closed and every sequence is judged.
func (d *differ) judgeAll(ctx context.Context, jobs <-chan verdict) <-chan judged {
	done := make(chan judged)
	var wg sync.WaitGroup
	for _, c := range d.clients {
		wg.Go(func() {
			for j := range jobs {
				v, err := judge(ctx, c, j.n, j.steps)
				done <- judged{v, err}
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}
