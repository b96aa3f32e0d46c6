package amqpproxy

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// arm, in a client script, calls DropReply before the next frame is read.
type arm string

// dropScenario is one connection: what the client sends (with DropReply
// calls in between), then what the broker answers, and where the proxy must
// cut the broker's stream.
type dropScenario struct {
	name   string
	client []any    // []byte frames, or arm
	broker [][]byte // frames (or frame groups) the broker sends
	dropAt int      // index in broker of the first group not forwarded; -1: all pass
	// received, when set, are the methods the client must have received.
	received map[string]int
}

func (sc dropScenario) run(t *testing.T) {
	t.Helper()
	// Each way of cutting the broker's stream into reads must agree: one
	// read, one read per group, one byte per read.
	all := cat(sc.broker...)
	bytewise := make([][]byte, len(all))
	for i := range all {
		bytewise[i] = all[i : i+1]
	}
	for _, reads := range [][][]byte{{all}, sc.broker, bytewise} {
		p := newProxy("")
		sess := newSession()
		steps := script{{data: protocolHeader}}
		for _, x := range sc.client {
			switch v := x.(type) {
			case []byte:
				steps = append(steps, step{data: v})
			case arm:
				steps = append(steps, step{before: func() {
					if err := p.DropReply(string(v)); err != nil {
						t.Fatal(err)
					}
				}})
			}
		}
		cr := runScript(t, p, sess, toBroker, steps)
		if cr.killed || !cr.eof {
			t.Fatalf("client side killed=%v eof=%v", cr.killed, cr.eof)
		}
		br := runDir(t, p, sess, toClient, reads)
		want, wantKill := all, false
		if sc.dropAt >= 0 {
			want, wantKill = cat(sc.broker[:sc.dropAt]...), true
		}
		if !bytes.Equal(br.out, want) || br.killed != wantKill {
			t.Fatalf("%d reads: forwarded %d bytes (killed %v), want %d (killed %v)", len(reads), len(br.out), br.killed, len(want), wantKill)
		}
		c := p.Counts()
		if wantKill != (c.Dropped == 1) {
			t.Fatalf("Dropped = %d", c.Dropped)
		}
		for name, n := range sc.received {
			if c.Received[name] != n {
				t.Fatalf("Received[%s] = %d, want %d (all: %v)", name, c.Received[name], n, c.Received)
			}
		}
	}
}

func TestDropReplyChoosesTheRightReply(t *testing.T) {
	open1 := method(1, "channel.open", shortstr(""))
	openOk1 := method(1, "channel.open-ok", long(0))
	open2 := method(2, "channel.open", shortstr(""))
	openOk2 := method(2, "channel.open-ok", long(0))
	declareOk := func(ch uint16) []byte {
		return method(ch, "queue.declare-ok", shortstr("q"), long(0), long(0))
	}
	confirm := method(1, "confirm.select", octet(0))
	confirmOk := method(1, "confirm.select-ok")

	for _, sc := range []dropScenario{{
		name:   "declare-ok",
		client: []any{arm("queue.declare"), open1, queueDeclare(1, "q", false)},
		broker: [][]byte{openOk1, heartbeat(), declareOk(1), heartbeat()},
		dropAt: 2,
		received: map[string]int{
			"channel.open-ok": 1, "queue.declare-ok": 0,
		},
	}, {
		name:   "no-wait request is not chosen",
		client: []any{arm("queue.declare"), open1, queueDeclare(1, "a", true), queueDeclare(1, "b", false), queueDeclare(1, "c", false)},
		broker: [][]byte{openOk1, declareOk(1), declareOk(1)},
		dropAt: 1,
	}, {
		name:   "a request sent before arming is not chosen",
		client: []any{open1, queueDeclare(1, "a", false), arm("queue.declare"), queueDeclare(1, "b", false)},
		broker: [][]byte{openOk1, declareOk(1), declareOk(1)},
		dropAt: 2,
	}, {
		name:   "the reply on another channel passes",
		client: []any{open1, open2, arm("queue.declare"), queueDeclare(1, "a", false), queueDeclare(2, "b", false)},
		broker: [][]byte{openOk1, openOk2, declareOk(2), declareOk(1)},
		dropAt: 3,
	}, {
		name:   "channel.close caused by the request",
		client: []any{open1, arm("queue.declare"), queueDeclare(1, "q", false)},
		broker: [][]byte{openOk1, channelCloseFrame(1, 404, 50, 10)},
		dropAt: 1,
		received: map[string]int{
			"channel.close": 0,
		},
	}, {
		name:   "channel.close of another channel passes",
		client: []any{open1, open2, arm("queue.declare"), queueDeclare(1, "a", false), queueDeclare(2, "b", false)},
		broker: [][]byte{openOk1, openOk2, channelCloseFrame(2, 404, 50, 10), declareOk(1)},
		dropAt: 3,
	}, {
		name:   "connection.close",
		client: []any{open1, arm("queue.declare"), queueDeclare(1, "a", false)},
		broker: [][]byte{openOk1, method(0, "connection.close", short(320), shortstr("CONNECTION_FORCED"), short(0), short(0))},
		dropAt: 1,
	}, {
		name:   "channel.open-ok",
		client: []any{arm("channel.open"), open1},
		broker: [][]byte{openOk1},
		dropAt: 0,
	}, {
		name:   "connection handshake: start-ok is answered by tune",
		client: []any{arm("connection.start-ok"), method(0, "connection.start-ok", emptyTable(), shortstr("PLAIN"), long(0), shortstr("en_US"))},
		broker: [][]byte{method(0, "connection.start", octet(0), octet(9), emptyTable(), long(0), long(0)), method(0, "connection.tune", short(2047), long(131072), short(60))},
		dropAt: 1,
	}, {
		name:   "basic.get-empty",
		client: []any{open1, arm("basic.get"), method(1, "basic.get", short(0), shortstr("q"), octet(0))},
		broker: [][]byte{openOk1, method(1, "basic.get-empty", shortstr(""))},
		dropAt: 1,
	}, {
		name:   "publish: its ack, not an earlier one",
		client: []any{open1, confirm, publish(1, "q"), arm("basic.publish"), publish(1, "q"), publish(1, "q")},
		broker: [][]byte{openOk1, confirmOk, ack(1, "basic.ack", 1, false), ack(1, "basic.ack", 3, false), ack(1, "basic.ack", 2, false)},
		dropAt: 4,
		received: map[string]int{
			"basic.ack": 2,
		},
	}, {
		name:   "publish: a multiple ack that covers it",
		client: []any{open1, confirm, arm("basic.publish"), publish(1, "q"), publish(1, "q"), publish(1, "q")},
		broker: [][]byte{openOk1, confirmOk, ack(1, "basic.ack", 3, true)},
		dropAt: 2,
	}, {
		name:   "publish: a multiple ack below it passes",
		client: []any{open1, confirm, publish(1, "q"), arm("basic.publish"), publish(1, "q"), publish(1, "q")},
		broker: [][]byte{openOk1, confirmOk, ack(1, "basic.ack", 1, true), ack(1, "basic.ack", 3, true)},
		dropAt: 3,
	}, {
		name:   "publish: nack",
		client: []any{open1, confirm, arm("basic.publish"), publish(1, "q")},
		broker: [][]byte{openOk1, confirmOk, ack(1, "basic.nack", 1, true)},
		dropAt: 2,
	}, {
		name:   "publish: its return and ack",
		client: []any{open1, confirm, arm("basic.publish"), publish(1, "missing")},
		broker: [][]byte{openOk1, confirmOk, returnFrames(1, "missing"), heartbeat(), ack(1, "basic.ack", 1, false)},
		dropAt: 2,
		received: map[string]int{
			"basic.return": 0, "basic.ack": 0,
		},
	}, {
		name:   "publish: another publish's return passes",
		client: []any{open1, open2, confirm, arm("basic.publish"), publish(1, "q"), publish(1, "missing")},
		broker: [][]byte{openOk1, openOk2, confirmOk, returnFrames(1, "missing"), declareOk(2), ack(1, "basic.ack", 2, false), ack(1, "basic.ack", 1, false)},
		dropAt: 6,
		received: map[string]int{
			"basic.return": 1, "basic.ack": 1, "queue.declare-ok": 1,
		},
	}, {
		name:   "publish: the channel.close that ends its channel",
		client: []any{open1, confirm, arm("basic.publish"), publish(1, "q")},
		broker: [][]byte{openOk1, confirmOk, channelCloseFrame(1, 404, 60, 40)},
		dropAt: 2,
	}, {
		name:   "publish: not on a channel without confirms",
		client: []any{open1, arm("basic.publish"), publish(1, "q"), publish(1, "q")},
		broker: [][]byte{openOk1, returnFrames(1, "q"), ack(1, "basic.ack", 1, false)},
		dropAt: -1,
	}, {
		name:   "nothing armed",
		client: []any{open1, confirm, queueDeclare(1, "q", false), publish(1, "q")},
		broker: [][]byte{openOk1, confirmOk, declareOk(1), ack(1, "basic.ack", 1, false), channelCloseFrame(1, 404, 50, 10)},
		dropAt: -1,
	}} {
		t.Run(sc.name, sc.run)
	}
}

func TestConfirms(t *testing.T) {
	args := func(tag uint64, bits byte) []byte { return append(binary.BigEndian.AppendUint64(nil, tag), bits) }
	for _, tc := range []struct {
		args []byte
		tag  uint64
		want bool
	}{
		{args(5, 0), 5, true},
		{args(6, 0), 5, false},
		{args(4, 1), 5, false},
		{args(5, 1), 5, true},
		{args(9, 1), 5, true},
		{args(0, 1), 5, true}, // multiple with tag 0: everything outstanding
		{args(0, 0), 5, false},
		{args(5, 0)[:8], 5, false}, // truncated
	} {
		if got := confirms(tc.args, tc.tag); got != tc.want {
			t.Errorf("confirms(% x, %d) = %v, want %v", tc.args, tc.tag, got, tc.want)
		}
	}
}

func TestDropReplyRefusesMethodsWithoutReply(t *testing.T) {
	p := newProxy("")
	for _, name := range []string{"queue.declare-ok", "basic.ack", "connection.tune-ok", "basic.reject", "queue.nonsense", "Queue.Declare"} {
		if err := p.DropReply(name); err == nil {
			t.Errorf("DropReply(%q) accepted", name)
		}
	}
	for _, name := range []string{"queue.declare", "basic.publish", "channel.open", "confirm.select", "basic.get", "connection.open", ""} {
		if err := p.DropReply(name); err != nil {
			t.Errorf("DropReply(%q): %v", name, err)
		}
	}
}
