package amqpserve_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/adapters/conform"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/internal/rapidbatch"
)

// The wire differential's sequences through pika and amqplib, which frame
// differently from amqp091-go and from each other (consumer tags chosen by
// the client or by the broker, x-arguments as int or byte, a passive
// declare with or without its flags, channels closed before their
// connection): each sequence runs through the library on the served
// simulator and on RabbitMQ (conform's harness, the library dialling
// through its fault proxies), and the two must observe the same, step by
// step. Through the library on RabbitMQ it must also observe what
// amqp091-go does there, up to where a known behaviour of the library's
// own (clientsOwn) makes them part.
//
// $LOCKPROVER_WIRE_CLIENT picks the libraries (pika, amqplib, all: the
// default), $LOCKPROVER_WIRE_SEQUENCES how many sequences (8 by default:
// docs/served.md gives the measured runs), $LOCKPROVER_WIRE_SEED the seed.
func TestWireDifferentialClients(t *testing.T) {
	quick.Skip(t, "a RabbitMQ broker, and pika and amqplib in processes of their own")
	libs := wireClientLibs(t)
	var missing []string
	for _, lib := range libs {
		if _, why := clientCommand(lib); why != "" {
			missing = append(missing, why)
		}
	}
	if len(missing) == len(libs) {
		t.Skip(strings.Join(missing, "; "))
	}
	url, ctl := wireBroker(t)
	ctx := context.Background()
	ref, err := conform.Open(ctx, conform.Options{URL: url, Ctl: ctl})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	seed, n := wireSeed(t), wireSequences(t, 8)
	refs := map[int][]string{} // amqp091-go's observations on RabbitMQ, by sequence
	for _, lib := range libs {
		t.Run(lib, func(t *testing.T) {
			c := startClient(t, lib)
			tg, err := conform.Open(ctx, conform.Options{URL: url, Ctl: ctl, Client: c.at})
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			start, steps, own := time.Now(), 0, 0
			for i := range n {
				ops, ok := rapidbatch.Case(seed, 0, i, func(rt *rapid.T) []conform.Op { return conform.DrawOps(rt, 24) })
				if !ok {
					continue
				}
				steps += len(ops)
				served, err := runWire(ops, c.at)
				if err != nil {
					t.Fatalf("sequence %d (seed %d) through %s on the served simulator: %v\n%s's events:\n%s", i, seed, lib, err, lib, c.Events())
				}
				real, err := tg.RunOps(ctx, ops)
				if err != nil {
					t.Fatalf("sequence %d (seed %d) through %s on RabbitMQ: the harness: %v", i, seed, lib, err)
				}
				if refs[i] == nil {
					if refs[i], err = ref.RunOps(ctx, ops); err != nil {
						t.Fatalf("sequence %d (seed %d) through amqp091-go on RabbitMQ: the harness: %v", i, seed, err)
					}
				}
				whys, err := compareClient(lib, ops, served, real, refs[i])
				if err != nil {
					t.Fatalf("sequence %d of seed %d: %v", i, seed, err)
				}
				if i == 0 {
					// The comparison can fail: one step observed otherwise is caught.
					mutant := slices.Clone(served)
					mutant[len(mutant)-1] += " (mutated)"
					if _, err := compareClient(lib, ops, mutant, real, refs[i]); err == nil {
						t.Fatalf("sequence 0 through %s: a mutated observation of its last step was not caught", lib)
					}
				}
				if len(whys) > 0 {
					own++
					t.Logf("sequence %d: through %s on RabbitMQ, not amqp091-go's observations, by %s's own behaviour: %s", i, lib, lib, strings.Join(whys, "; "))
				}
			}
			if err := c.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, seed %d: %d sequences, %d steps: the served simulator observed through %s what RabbitMQ did, and RabbitMQ through %s what it did through amqp091-go in %d of them (the others part by %s's own behaviour), in %v",
				c.version, seed, n, steps, lib, lib, n-own, lib, time.Since(start).Round(time.Second))
		})
	}
}

// wireClientLibs are the libraries $LOCKPROVER_WIRE_CLIENT names: pika,
// amqplib, or all (the default).
func wireClientLibs(t *testing.T) []string {
	switch v := os.Getenv("LOCKPROVER_WIRE_CLIENT"); v {
	case "", "all":
		return clientLibs
	default:
		if !slices.Contains(clientLibs, v) {
			t.Fatalf("LOCKPROVER_WIRE_CLIENT=%q: want pika, amqplib or all", v)
		}
		return []string{v}
	}
}

// compareClient judges one sequence run through lib: served (on the
// served simulator) must equal real (on RabbitMQ), and real must equal
// ref (amqp091-go on RabbitMQ) but at the steps one of lib's own
// behaviours explains (clientsOwn), whose explanations it returns.
func compareClient(lib string, ops []conform.Op, served, real, ref []string) ([]string, error) {
	if !slices.Equal(served, real) {
		return nil, fmt.Errorf("through %s, the served simulator diverges from RabbitMQ:\n%s", lib, table(ops, "served", served, "rabbitmq", real))
	}
	var whys []string
	for j := firstDiff(real, ref, 0); j >= 0; j = firstDiff(real, ref, j+1) {
		why, after := explain(lib, ops, real, ref, j)
		if why == "" {
			return whys, fmt.Errorf("on RabbitMQ, %s observed at step %d what amqp091-go did not, and no behaviour of %s's own (clientsOwn) explains it:\n%s",
				lib, j+1, lib, table(ops, lib, real, "amqp091-go", ref))
		}
		whys = append(whys, fmt.Sprintf("step %d: %s", j+1, why))
		if !after {
			break
		}
	}
	return whys, nil
}

// explain is the first of lib's own behaviours that explains step j.
func explain(lib string, ops []conform.Op, real, ref []string, j int) (why string, after bool) {
	for _, own := range clientsOwn[lib] {
		if why, after := own(ops, real, ref, j); why != "" {
			return why, after
		}
	}
	return "", false
}

// firstDiff is the first step from the from-th on whose observations
// differ, or -1.
func firstDiff(a, b []string, from int) int {
	for i := from; i < max(len(a), len(b)); i++ {
		if at(a, i) != at(b, i) {
			return i
		}
	}
	return -1
}

// A clientOwn explains why a library's observation on RabbitMQ at step j
// (0-based) is not amqp091-go's, by a behaviour of the library's own: it
// says which, and whether the later steps still compare (the behaviour
// left the broker as amqp091-go did) or not (every later step may
// differ); why is "" where it does not explain step j.
type clientOwn func(ops []conform.Op, real, ref []string, j int) (why string, after bool)

// clientsOwn are the behaviours of each library's own that make RabbitMQ
// observe through it what it does not through amqp091-go
// (docs/served.md, the wire differential).
var clientsOwn = map[string][]clientOwn{
	"pika": {pikaGetOnClosedChannel, pikaDuplicateGet},
}

// pikaGetOnClosedChannel: pika 1.2's basic_get on a channel that is
// closed (by the broker's error or its own close) sends basic.get all the
// same (pika/channel.py's Channel.basic_get writes the method without
// checking the channel's state), and raises ChannelWrongStateError: the
// step observes 504 on the channel, as through amqp091-go, which sends
// nothing; but RabbitMQ answers the method on a channel not open with
// connection.close 504 CHANNEL_ERROR, so the connection is gone, and its
// exclusive queues, its consumers and its unacknowledged messages with
// it: any later step may differ.
func pikaGetOnClosedChannel(ops []conform.Op, real, _ []string, j int) (string, bool) {
	for i := range j {
		if ops[i].Kind == "get" && real[i] == "504 channel" {
			return fmt.Sprintf("after step %d's get on a closed channel, which pika sends (RabbitMQ closes %s's connection: 504 CHANNEL_ERROR)", i+1, connOf(ops[i].On)), false
		}
	}
	return "", false
}

// pikaDuplicateGet: a basic_get on a channel whose earlier basic_get the
// broker answered with a channel error raises DuplicateGetOkCallback
// (pika's Channel keeps the get-ok callback of a get the close cut short),
// before anything is sent: as amqp091-go sends nothing on a closed
// channel (504), so the broker is left as it was.
func pikaDuplicateGet(ops []conform.Op, real, ref []string, j int) (string, bool) {
	if ops[j].Kind == "get" && strings.Contains(real[j], "DuplicateGetOkCallback") && strings.HasPrefix(ref[j], "504 ") {
		return "a get on a channel an earlier get's error closed: pika raises DuplicateGetOkCallback, sending nothing, where amqp091-go gives 504", true
	}
	return "", false
}

func connOf(on string) string {
	c, _, _ := strings.Cut(on, ".")
	return c
}

// compareClient catches what it is there to catch: a served simulator
// that observes one step differently from RabbitMQ (a mutated list), and
// a library that observes on RabbitMQ what amqp091-go does not, unless
// one of that library's own behaviours explains it (pika's, not
// amqplib's).
func TestCompareClientCatchesMutants(t *testing.T) {
	ops := []conform.Op{
		{On: "A", Kind: "declare", Queue: "Q1", Exclusive: true},
		{On: "B", Kind: "declare", Queue: "Q1"},
		{On: "B", Kind: "get", Queue: "Q1"},
		{On: "B", Kind: "publish", Queue: "Q1", Mandatory: true},
		{On: "C", Kind: "declare", Queue: "Q1", Exclusive: true},
	}
	real := []string{"ok", "405 channel", "504 channel", "504 channel", "405 channel"}
	if whys, err := compareClient("amqplib", ops, real, real, real); err != nil || whys != nil {
		t.Fatalf("the same observations everywhere: %v, %v; want no divergence", whys, err)
	}
	mutant := slices.Clone(real)
	mutant[3] = "ack"
	_, err := compareClient("amqplib", ops, mutant, real, real)
	if err == nil || !strings.Contains(err.Error(), "!!  4.") {
		t.Fatalf("served observed ack at step 4, RabbitMQ 504: got %v, want the divergence shown at step 4", err)
	}
	// Through pika, B's get on its closed channel (step 3) goes out and
	// RabbitMQ closes B's connection: the steps after it may differ from
	// amqp091-go's, and only pika's behaviour explains that.
	pika := slices.Clone(real)
	pika[3], pika[4] = "504 connection", "ok"
	whys, err := compareClient("pika", ops, pika, pika, real)
	if err != nil || len(whys) != 1 || !strings.Contains(whys[0], "step 4: after step 3's get") {
		t.Fatalf("pika after its get on a closed channel: %q, %v; want it explained from step 4", whys, err)
	}
	if _, err := compareClient("amqplib", ops, pika, pika, real); err == nil {
		t.Fatal("amqplib observing what only pika's get explains: no error")
	}
	// Served and RabbitMQ still must agree through pika after its own
	// behaviour parts them from amqp091-go.
	served := slices.Clone(pika)
	served[4] = "405 channel"
	if _, err := compareClient("pika", ops, served, pika, real); err == nil {
		t.Fatal("through pika, served 405 where RabbitMQ said ok at step 5: no error")
	}
}
