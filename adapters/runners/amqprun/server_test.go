package amqprun

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
)

var writeTestdata = flag.Bool("write-testdata", false, "write the attribution histories to testdata/histories (45-49)")

const ms = int64(time.Millisecond)

// twoHolders is a run in which c1 takes slot 1 and, with nothing of
// lockprover's striking c1, c3 tries for slot 1 (and is killed while it
// does) and c2 takes it later: two holders of one slot, unless the broker
// did something on its own.
func twoHolders() []histories.Event {
	h := []histories.Event{
		{Time: 1 * ms, Process: "admin", Type: histories.Invoke, F: histories.Create, Lock: "lp", Value: &amqpcheck.Value{Slots: histories.Int(1)}},
		{Time: 2 * ms, Process: "admin", Type: histories.Ok, F: histories.Create, Lock: "lp"},
		{Time: 10 * ms, Process: "c1", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"},
		{Time: 12 * ms, Process: "c1", Type: histories.Ok, F: histories.Acquire, Lock: "lp", Value: &amqpcheck.Value{Slot: histories.Int(1)}},
		{Time: 20 * ms, Process: "c3", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"},
		{Time: 24 * ms, Process: "nemesis", Type: histories.Invoke, F: histories.Kill, Value: &histories.Fault{Process: "c3"}},
		{Time: 24 * ms, Process: "nemesis", Type: histories.Info, F: histories.Kill, Value: &histories.Fault{Process: "c3"}},
		{Time: 25 * ms, Process: "c3", Type: histories.Info, F: histories.Acquire, Lock: "lp", Error: "connection closed"},
		{Time: 900 * ms, Process: "c2", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"},
		{Time: 905 * ms, Process: "c2", Type: histories.Ok, F: histories.Acquire, Lock: "lp", Value: &amqpcheck.Value{Slot: histories.Int(1)}},
	}
	for i := range h {
		h[i].Index = i
	}
	return h
}

// slotExclusive judges h's slot-exclusive.
func slotExclusive(t *testing.T, h []histories.Event) verdict.Verdict {
	t.Helper()
	for _, v := range model.Check(h, model.Options{}).Verdicts {
		if v.Property == amqpcheck.SlotExclusive {
			return v
		}
	}
	t.Fatal("no slot-exclusive verdict")
	return verdict.Verdict{}
}

// What the broker did on its own reaches the history as the fault it was,
// saying so, and the checker excuses what it explains (and lists the
// excuse); without such evidence the same double hold still fails; a
// close a fault of lockprover's explains adds nothing.
func TestBrokerFaultsAttribute(t *testing.T) {
	heartbeat := serverNote{proc: "c1", at: 500 * ms, ev: amqpproxy.ServerEvent{What: amqpproxy.ServerEOF, Local: "127.0.0.1:37540"},
		logged: "RabbitMQ's log: missed heartbeats from client, timeout: 1s"}
	bug := serverNote{proc: "c3", at: 24 * ms, ev: amqpproxy.ServerEvent{What: amqpproxy.DeclareInFlight, Queue: "lp-1-B", Exclusive: true, Killed: true}}
	for _, tc := range []struct {
		file  string
		notes []serverNote
		want  verdict.Status
		words []string
	}{
		{"45-rabbitmq-closed-the-holder.jsonl", []serverNote{heartbeat}, verdict.Pass,
			[]string{"RabbitMQ closed c1's connection on its own", "without a connection.close", "RabbitMQ's log: missed heartbeats from client, timeout: 1s"}},
		{"46-exclusive-queue-bug.jsonl", []serverNote{bug}, verdict.Pass,
			[]string{"c3's connection ended (lockprover killed it) with an exclusive queue.declare of lp-1-B in flight", "the exclusive-delete race", "c1's"}},
		{"47-no-server-evidence.jsonl", nil, verdict.Fail, nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h, _ := run.WithFaults(twoHolders(), brokerFaults(twoHolders(), "lp", tc.notes, brokerGrace(time.Second), time.Second, noClient, "3.10.8"))
			var b bytes.Buffer
			histories.Write(&b, h)
			if _, err := histories.Read(bytes.NewReader(b.Bytes()), tc.file); err != nil {
				t.Fatalf("the history does not read back: %v\n%s", err, b.String())
			}
			v := slotExclusive(t, h)
			if v.Status != tc.want {
				t.Fatalf("slot-exclusive %s, want %s: %s", v.Status, tc.want, v.Detail)
			}
			var said strings.Builder
			for _, x := range v.Excuses {
				said.WriteString(x.Why + "\n")
			}
			for _, w := range tc.words {
				if !strings.Contains(said.String(), w) {
					t.Errorf("the excuses do not say %q:\n%s", w, said.String())
				}
			}
			if tc.want == verdict.Pass && len(v.Excuses) == 0 {
				t.Errorf("a pass that rests on the broker's fault lists no excuse")
			}
			if *writeTestdata {
				if err := os.WriteFile(filepath.Join("..", "..", "..", "testdata", "histories", tc.file), b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// A partition of c1's by lockprover explains the broker ending c1's
	// connection during it: nothing is added.
	h := twoHolders()
	part := []histories.Event{
		{Time: 100 * ms, Process: "nemesis", Type: histories.Invoke, F: histories.Partition, Value: &histories.Fault{Process: "c1"}},
		{Time: 101 * ms, Process: "nemesis", Type: histories.Info, F: histories.Partition, Value: &histories.Fault{Process: "c1"}},
		{Time: 400 * ms, Process: "nemesis", Type: histories.Invoke, F: histories.Heal, Value: &histories.Fault{Process: "c1"}},
		{Time: 401 * ms, Process: "nemesis", Type: histories.Info, F: histories.Heal, Value: &histories.Fault{Process: "c1"}},
	}
	h, _ = run.WithFaults(h, part)
	if got := brokerFaults(h, "lp", []serverNote{heartbeat}, brokerGrace(time.Second), time.Second, noClient, "3.10.8"); len(got) != 0 {
		t.Errorf("a close lockprover's partition explains was added: %+v", got)
	}
	// A declare in flight of a queue nobody else holds names no one.
	free := serverNote{proc: "c3", at: 24 * ms, ev: amqpproxy.ServerEvent{What: amqpproxy.DeclareInFlight, Queue: "lp-2-B", Exclusive: true}}
	if got := brokerFaults(twoHolders(), "lp", []serverNote{free}, brokerGrace(time.Second), time.Second, noClient, "3.10.8"); len(got) != 0 {
		t.Errorf("a declare of a queue nobody held was blamed: %+v", got)
	}
}

// A close the broker made within a fault's grace, but after the process
// began an operation once the fault was over, is the broker's own (issue
// 55): c1 is paused, acquires slot 1 after its resume (a hold the checker
// takes as safe from the pause), then does not run for two heartbeats on
// a loaded machine, and RabbitMQ closes its connection for missed
// heartbeats, 6.5 s after the resume (within its grace of three 3 s
// heartbeats and a second); c2 then takes slot 1. Recorded, the close
// excuses the second holder (48); left out, as before, the history holds
// a double hold no fault explains (49, a plain FAIL). The same close of a
// c1 that acquired before the pause, and began nothing after it, is the
// pause's and adds nothing; after a kill, the next incarnation's
// connection is no more the kill's than the pause's is.
func TestBrokerCloseAfterFaultOver(t *testing.T) {
	const hb = 3 * time.Second
	fault := func(f, proc string, at int64) []histories.Event {
		return []histories.Event{
			{Time: at, Process: "nemesis", Type: histories.Invoke, F: f, Value: &histories.Fault{Process: proc}},
			{Time: at, Process: "nemesis", Type: histories.Info, F: f, Value: &histories.Fault{Process: proc}},
		}
	}
	// c1's acquire at acquireAt, after faults; c2's at 7 s; c1's verify
	// and release at 8 s.
	history := func(faults []histories.Event, acquireAt int64) []histories.Event {
		h := []histories.Event{
			{Time: 1 * ms, Process: "admin", Type: histories.Invoke, F: histories.Create, Lock: "lp", Value: &amqpcheck.Value{Slots: histories.Int(1)}},
			{Time: 2 * ms, Process: "admin", Type: histories.Ok, F: histories.Create, Lock: "lp"},
		}
		h = append(h, faults...)
		h = append(h,
			histories.Event{Time: acquireAt, Process: "c1", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"},
			histories.Event{Time: acquireAt + 10*ms, Process: "c1", Type: histories.Ok, F: histories.Acquire, Lock: "lp", Value: &amqpcheck.Value{Slot: histories.Int(1)}},
			histories.Event{Time: 7000 * ms, Process: "c2", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"},
			histories.Event{Time: 7010 * ms, Process: "c2", Type: histories.Ok, F: histories.Acquire, Lock: "lp", Value: &amqpcheck.Value{Slot: histories.Int(1)}},
			histories.Event{Time: 8000 * ms, Process: "c1", Type: histories.Invoke, F: histories.Verify, Lock: "lp", Value: &amqpcheck.Value{Slot: histories.Int(1)}},
			histories.Event{Time: 8001 * ms, Process: "c1", Type: histories.Ok, F: histories.Verify, Lock: "lp", Value: &amqpcheck.Value{Held: histories.Bool(false)}},
			histories.Event{Time: 8002 * ms, Process: "c1", Type: histories.Invoke, F: histories.Release, Lock: "lp", Value: &amqpcheck.Value{Slot: histories.Int(1)}},
			histories.Event{Time: 8003 * ms, Process: "c1", Type: histories.Fail, F: histories.Release, Lock: "lp", Value: &amqpcheck.Value{Reason: "not held"}},
		)
		slices.SortStableFunc(h, func(a, b histories.Event) int { return int(min(max(a.Time-b.Time, -1), 1)) })
		for i := range h {
			h[i].Index = i
		}
		return h
	}
	pause := append(fault(histories.Pause, "c1", 100*ms), fault(histories.Resume, "c1", 200*ms)...)
	closed := serverNote{proc: "c1", at: 6700 * ms, ev: amqpproxy.ServerEvent{What: amqpproxy.ServerEOF, Local: "127.0.0.1:45494"},
		logged: "RabbitMQ's log: missed heartbeats from client, timeout: 3s"}
	for _, tc := range []struct {
		name      string
		h         []histories.Event
		recorded  bool
		file, not string
	}{
		{"acquired after the resume", history(pause, 300*ms), true, "48-rabbitmq-closed-after-a-pause.jsonl", "49-close-after-a-pause-unrecorded.jsonl"},
		{"acquired after a kill", history(fault(histories.Kill, "c1", 100*ms), 300*ms), true, "", ""},
		{"acquired before the pause", history(pause, 50*ms), false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faults := brokerFaults(tc.h, "lp", []serverNote{closed}, brokerGrace(hb), hb, noClient, "3.10.8")
			if !tc.recorded {
				if len(faults) != 0 {
					t.Fatalf("a close the pause explains was added: %+v", faults)
				}
				if v := slotExclusive(t, tc.h); v.Status != verdict.Pass {
					t.Fatalf("slot-exclusive %s, want pass (the pause ended c1's hold): %s", v.Status, v.Detail)
				}
				return
			}
			if len(faults) != 2 {
				t.Fatalf("the broker's close after c1's acquire was not recorded: %+v", faults)
			}
			for _, w := range []string{"not struck by lockprover: RabbitMQ closed c1's connection on its own", "missed heartbeats", "c1 began its acquire"} {
				if !strings.Contains(faults[1].Error, w) {
					t.Errorf("the close does not say %q: %s", w, faults[1].Error)
				}
			}
			h, _ := run.WithFaults(tc.h, faults)
			if v := slotExclusive(t, h); v.Status != verdict.Pass {
				t.Errorf("slot-exclusive %s with the close recorded, want pass: %s", v.Status, v.Detail)
			}
			if v := slotExclusive(t, tc.h); v.Status != verdict.Fail {
				t.Errorf("slot-exclusive %s without the close, want FAIL: %s", v.Status, v.Detail)
			}
			if *writeTestdata && tc.file != "" {
				for file, h := range map[string][]histories.Event{tc.file: h, tc.not: tc.h} {
					var b bytes.Buffer
					histories.Write(&b, h)
					if err := os.WriteFile(filepath.Join("..", "..", "..", "testdata", "histories", file), b.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// A connection the client ended after the broker had been silent past two
// heartbeats is a fault the broker struck (amqp091-go gives up after
// three; CI once saw an admin's create come back unknown with nothing
// recorded): the unknown outcome it caused is excused, and the excuse says
// so; as is one the client ended after sending nothing itself for two
// heartbeats (its process did not run: CI's load once made amqp091-go's
// read deadline pass, "read tcp ...: i/o timeout"). A client ending its
// connection with both sides talking, or with heartbeats off, is no
// fault, and the same unknown outcome fails.
func TestSilentBrokerAttribute(t *testing.T) {
	unknownCreate := func() []histories.Event {
		h := []histories.Event{
			{Time: 1 * ms, Process: "admin", Type: histories.Invoke, F: histories.Create, Lock: "lp", Value: &amqpcheck.Value{Slots: histories.Int(3)}},
			{Time: 3500 * ms, Process: "admin", Type: histories.Info, F: histories.Create, Lock: "lp", Error: "Exception (501) Reason: \"read tcp 127.0.0.1:40000->127.0.0.1:5672: i/o timeout\""},
			{Time: 3600 * ms, Process: "admin", Type: histories.Invoke, F: histories.Create, Lock: "lp", Value: &amqpcheck.Value{Slots: histories.Int(3)}},
			{Time: 3610 * ms, Process: "admin", Type: histories.Ok, F: histories.Create, Lock: "lp"},
		}
		for i := range h {
			h[i].Index = i
		}
		return h
	}
	ended := func(silence, own, stalled time.Duration) serverNote {
		return serverNote{proc: "admin", at: 3400 * ms, ev: amqpproxy.ServerEvent{What: amqpproxy.ClientEnd, Silence: silence, ClientSilence: own, Stalled: stalled, Local: "127.0.0.1:40000"}}
	}
	available := func(h []histories.Event) verdict.Verdict {
		for _, v := range model.Check(h, model.Options{}).Verdicts {
			if v.Property == amqpcheck.Available {
				return v
			}
		}
		t.Fatal("no available verdict")
		return verdict.Verdict{}
	}
	const broker = "RabbitMQ sent admin nothing for 3.1s, past two heartbeats of 1s"
	const stalled = "admin sent nothing for 3.1s, past two heartbeats of 1s (its process did not run"
	const proxyStalled = "lockprover's own process, which carries admin's connection through its proxy, did not run for 3.1s, past two heartbeats of 1s"
	const sec, ms = time.Second, time.Millisecond
	for _, tc := range []struct {
		name                  string
		silence, own, stalled time.Duration
		hb                    time.Duration
		want                  verdict.Status
		words                 []string
	}{
		{"the broker silent for 3.1s, heartbeat 1s", 3100 * ms, 200 * ms, 0, sec, verdict.Pass, []string{broker}},
		{"the client silent for 3.1s, heartbeat 1s", 300 * ms, 3100 * ms, 0, sec, verdict.Pass, []string{stalled}},
		{"lockprover stalled for 3.1s, heartbeat 1s", 10 * ms, 10 * ms, 3100 * ms, sec, verdict.Pass, []string{proxyStalled, "after lockprover's own process did not run for 3.1s"}},
		{"both talking, lockprover stalled 1.5s, heartbeat 1s", 300 * ms, 900 * ms, 1500 * ms, sec, verdict.Fail, nil},
		{"all silent for 3.1s, heartbeats off", 3100 * ms, 3100 * ms, 3100 * ms, 0, verdict.Fail, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faults := brokerFaults(unknownCreate(), "lp", []serverNote{ended(tc.silence, tc.own, tc.stalled)}, brokerGrace(time.Second), tc.hb, noClient, "3.10.8")
			h, _ := run.WithFaults(unknownCreate(), faults)
			v := available(h)
			if v.Status != tc.want {
				t.Fatalf("available %s, want %s: %s", v.Status, tc.want, v.Detail)
			}
			if tc.want == verdict.Fail {
				if len(faults) != 0 {
					t.Errorf("a fault was recorded: %+v", faults)
				}
				return
			}
			var said strings.Builder
			for _, x := range v.Excuses {
				said.WriteString(x.Why + "\n")
			}
			for _, w := range append(tc.words, "client closed the connection", "without a connection.close") {
				if !strings.Contains(said.String(), w) {
					t.Errorf("the excuses do not say %q:\n%s", w, said.String())
				}
			}
		})
	}
}

// A probe whose client library gave its connection up when its heartbeat
// read deadline passed, with RabbitMQ and the probe's process each sending
// within two heartbeats (the soak of issue 55, a loaded machine: the
// deadline goroutine did not run), is a force-close of the probe that
// lockprover did not strike: recorded, it excuses the probe's unknown
// change, and available says so; without the i/o timeout, or without the
// client's end, nothing is added and the same history fails available.
func TestHeartbeatDeadlineOfAStalledClient(t *testing.T) {
	const timeout = "amqplocks: delete lp-3576019b: amqp connection error 501: read tcp 127.0.0.1:36324->127.0.0.1:46051: i/o timeout"
	history := func(errText string) []histories.Event {
		h := []histories.Event{
			{Time: 1 * ms, Process: "admin", Type: histories.Invoke, F: histories.Create, Lock: "lp", Value: &amqpcheck.Value{Slots: histories.Int(1)}},
			{Time: 2 * ms, Process: "admin", Type: histories.Ok, F: histories.Create, Lock: "lp"},
			{Time: 5192 * ms, Process: "probe", Type: histories.Invoke, F: histories.Count, Lock: "lp"},
			{Time: 5244 * ms, Process: "probe", Type: histories.Ok, F: histories.Count, Lock: "lp", Value: &amqpcheck.Value{Slots: histories.Int(1)}},
			{Time: 5254 * ms, Process: "probe", Type: histories.Invoke, F: histories.Change, Lock: "lp", Value: &amqpcheck.Value{Delta: histories.Int(-1)}},
			{Time: 6834 * ms, Process: "probe", Type: histories.Info, F: histories.Change, Lock: "lp", Error: errText},
		}
		for i := range h {
			h[i].Index = i
		}
		return h
	}
	end := serverNote{proc: "probe", at: 6833 * ms, ev: amqpproxy.ServerEvent{What: amqpproxy.ClientEnd, Silence: 400 * time.Millisecond, ClientSilence: 300 * time.Millisecond}}
	available := func(h []histories.Event) verdict.Verdict {
		t.Helper()
		for _, v := range model.Check(h, model.Options{}).Verdicts {
			if v.Property == amqpcheck.Available {
				return v
			}
		}
		t.Fatal("no available verdict")
		return verdict.Verdict{}
	}
	faults := brokerFaults(history(timeout), "lp", []serverNote{end}, brokerGrace(time.Second), time.Second, noClient, "3.10.8")
	if len(faults) != 2 || faults[0].F != histories.ForceClose || !strings.Contains(faults[1].Error, "read deadline of three heartbeats") || !strings.HasPrefix(faults[1].Error, run.NotStruck) {
		t.Fatalf("want the probe's force-close, not struck by lockprover, naming the deadline; got %+v", faults)
	}
	h, _ := run.WithFaults(history(timeout), faults)
	if v := available(h); v.Status != verdict.Pass || len(v.Excuses) == 0 {
		t.Errorf("with the force-close recorded: available %s, %d excuses (%s), want a pass that lists its excuse", v.Status, len(v.Excuses), v.Detail)
	}
	if v := available(history(timeout)); v.Status != verdict.Fail {
		t.Errorf("without it: available %s, want FAIL (%s)", v.Status, v.Detail)
	}
	// The answer recorded 5 s after the end (a process's reply read late
	// on a loaded machine): the operation was in flight when the
	// connection ended, and the end is recorded all the same.
	late := history(timeout)
	late[len(late)-1].Time = 11834 * ms
	if got := brokerFaults(late, "lp", []serverNote{end}, brokerGrace(time.Second), time.Second, noClient, "3.10.8"); len(got) != 2 || got[0].F != histories.ForceClose {
		t.Errorf("the answer recorded late: faults %+v, want the probe's force-close", got)
	}
	// The connection ended while the probe was idle, long before its
	// change, which the client library answered with the same error (an
	// idle admin's, in the suite beside two busy loops): the error names
	// the connection by the client's address, and it is recorded.
	named := serverNote{proc: "probe", at: 1000 * ms, ev: end.ev}
	named.ev.Client = "127.0.0.1:36324"
	if got := brokerFaults(history(timeout), "lp", []serverNote{named}, brokerGrace(time.Second), time.Second, noClient, "3.10.8"); len(got) != 2 || got[0].F != histories.ForceClose || got[0].Time != named.at {
		t.Errorf("an idle connection's end that the next error names: faults %+v, want the probe's force-close at %d", got, named.at)
	}
	other := end
	other.ev.Client = "127.0.0.1:40000"
	farOther := serverNote{proc: "probe", at: 1000 * ms, ev: other.ev}
	for _, tc := range []struct {
		name  string
		err   string
		notes []serverNote
		hb    time.Duration
	}{
		{"another error", "amqplocks: delete lp-1: Exception (504) Reason: \"channel/connection is not open\"", []serverNote{end}, time.Second},
		{"another connection's error, at the end", timeout, []serverNote{other}, time.Second},
		{"another connection's error, far from the end", timeout, []serverNote{farOther}, time.Second},
		{"the connection's error, before its end", timeout, []serverNote{{proc: "probe", at: 20000 * ms, ev: named.ev}}, time.Second},
		{"no client end", timeout, nil, time.Second},
		{"heartbeats off", timeout, []serverNote{end}, 0},
		{"far from the end", timeout, []serverNote{{proc: "probe", at: 20000 * ms, ev: end.ev}}, time.Second},
		{"before the operation, far from its answer", timeout, []serverNote{{proc: "probe", at: 1000 * ms, ev: end.ev}}, time.Second},
	} {
		if got := brokerFaults(history(tc.err), "lp", tc.notes, brokerGrace(time.Second), tc.hb, noClient, "3.10.8"); len(got) != 0 {
			t.Errorf("%s: added %+v", tc.name, got)
		}
	}
}

// The reference's client ending its connection while its holder was idle
// (no operation in flight to answer the error, no side silent for two
// heartbeats: its heartbeat goroutine did not run on a loaded machine) is
// a force-close lockprover did not strike, which excuses the verify that
// then finds the hold gone; an implementation's client ending its socket
// so is its own doing and adds nothing, unless its process declared that
// its client does so only when its heartbeat deadline passes; with
// heartbeats off, nothing.
func TestReferenceClientDeadlineWhileIdle(t *testing.T) {
	h := []histories.Event{
		{Time: 1 * ms, Process: "admin", Type: histories.Invoke, F: histories.Create, Lock: "lp", Value: &amqpcheck.Value{Slots: histories.Int(1)}},
		{Time: 2 * ms, Process: "admin", Type: histories.Ok, F: histories.Create, Lock: "lp"},
		{Time: 215 * ms, Process: "c1", Type: histories.Invoke, F: histories.Acquire, Lock: "lp"},
		{Time: 235 * ms, Process: "c1", Type: histories.Ok, F: histories.Acquire, Lock: "lp", Value: &amqpcheck.Value{Slot: histories.Int(1)}},
		{Time: 3225 * ms, Process: "c1", Type: histories.Invoke, F: histories.Verify, Lock: "lp", Value: &amqpcheck.Value{Slot: histories.Int(1)}},
		{Time: 4370 * ms, Process: "c1", Type: histories.Ok, F: histories.Verify, Lock: "lp", Value: &amqpcheck.Value{Held: histories.Bool(false)}},
	}
	for i := range h {
		h[i].Index = i
	}
	end := serverNote{proc: "c1", at: 3100 * ms, ev: amqpproxy.ServerEvent{What: amqpproxy.ClientEnd, Silence: 500 * time.Millisecond, ClientSilence: 900 * time.Millisecond}}
	faults := brokerFaults(h, "lp", []serverNote{end}, brokerGrace(time.Second), time.Second, asReference, "3.10.8")
	if len(faults) != 2 || faults[0].F != histories.ForceClose || !strings.Contains(faults[1].Error, "amqp091-go, lockprover's reference") {
		t.Fatalf("want c1's force-close naming the reference's read deadline, got %+v", faults)
	}
	withIt, _ := run.WithFaults(h, faults)
	if v := slotExclusive(t, withIt); v.Status != verdict.Pass || len(v.Excuses) == 0 {
		t.Errorf("with the close recorded: slot-exclusive %s with %d excuses (%s), want a pass that lists its excuse", v.Status, len(v.Excuses), v.Detail)
	}
	if v := slotExclusive(t, h); v.Status != verdict.Fail {
		t.Errorf("without it: slot-exclusive %s, want FAIL (%s)", v.Status, v.Detail)
	}
	if got := brokerFaults(h, "lp", []serverNote{end}, brokerGrace(time.Second), time.Second, noClient, "3.10.8"); len(got) != 0 {
		t.Errorf("an implementation's own socket end was recorded: %+v", got)
	}
	// A process whose init_ok declared that its client ends a socket so
	// only when its heartbeat deadline passes (the reference served
	// through the protocol) is taken at its word, and the record says so.
	declared := func(proc string) string {
		if proc == "c1" {
			return declaredClient
		}
		return ""
	}
	if got := brokerFaults(h, "lp", []serverNote{end}, brokerGrace(time.Second), time.Second, declared, "3.10.8"); len(got) != 2 || got[0].F != histories.ForceClose || !strings.Contains(got[1].Error, `"abrupt_close": "heartbeat"`) {
		t.Errorf("a declared client's end: %+v, want c1's force-close naming its declaration", got)
	}
	if got := brokerFaults(h, "lp", []serverNote{end}, brokerGrace(time.Second), 0, asReference, "3.10.8"); len(got) != 0 {
		t.Errorf("with heartbeats off: %+v", got)
	}
}

// RabbitMQ deletes the queue a dead connection's exclusive declare named
// when its queue process gets to that declare, which on a loaded machine
// may be after another client took the queue (the soak of issue 55, mutex
// seed 5612: c2 declared the queue 70 ms after c1's connection ended, and
// its verify found it gone). A client that takes the queue within
// lateDelete of the end is struck too, from its acquire's completion, so
// that its hold is not safe from it; one that takes it later is not.
func TestExclusiveQueueBugStrikesALateTaker(t *testing.T) {
	bug := serverNote{proc: "c3", at: 24 * ms, ev: amqpproxy.ServerEvent{What: amqpproxy.DeclareInFlight, Queue: "lp-1-B", Exclusive: true, Killed: true}}
	for _, tc := range []struct {
		name string
		at   int64 // c2's acquire's invoke
		want []string
	}{
		{"70 ms after", 94 * ms, []string{"c1 at 24ms", "c2 at 99ms"}},
		{"after lateDelete", 24*ms + int64(lateDelete) + ms, []string{"c1 at 24ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := twoHolders()
			h[8].Time, h[9].Time = tc.at, tc.at+5*ms
			var got []string
			for _, e := range brokerFaults(h, "lp", []serverNote{bug}, brokerGrace(time.Second), time.Second, noClient, "3.10.8") {
				if e.Type == histories.Info {
					if e.F != histories.QueueDeleted {
						t.Fatalf("a %s recorded", e.F)
					}
					got = append(got, fmt.Sprintf("%s at %v", histories.FaultOf(&e).Process, time.Duration(e.Time)))
					if e.Time > bug.at && !strings.Contains(e.Error, "after that connection ended") {
						t.Errorf("a late taker's fault does not say so: %s", e.Error)
					}
				}
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Errorf("queue-deleted of %v, want %v", got, tc.want)
			}
		})
	}
	// c2's verify finds the queue gone: excused by the late strike.
	h := twoHolders()
	h[8].Time, h[9].Time = 94*ms, 99*ms
	h = append(h,
		histories.Event{Time: 110 * ms, Process: "c2", Type: histories.Invoke, F: histories.Verify, Lock: "lp", Value: &amqpcheck.Value{Slot: histories.Int(1)}},
		histories.Event{Time: 111 * ms, Process: "c2", Type: histories.Ok, F: histories.Verify, Lock: "lp", Value: &amqpcheck.Value{Held: histories.Bool(false)}})
	for i := range h {
		h[i].Index = i
	}
	merged, _ := run.WithFaults(h, brokerFaults(h, "lp", []serverNote{bug}, brokerGrace(time.Second), time.Second, noClient, "3.10.8"))
	if v := slotExclusive(t, merged); v.Status != verdict.Pass {
		t.Errorf("with the late strike: slot-exclusive %s: %s", v.Status, v.Detail)
	}
	// A broker without the race (4.3.6, or a version not known to have
	// it: ""): the declare in flight excuses nothing, and the verify that
	// found the queue gone stands unexcused.
	if got := brokerFaults(h, "lp", []serverNote{bug}, brokerGrace(time.Second), time.Second, noClient, ""); len(got) != 0 {
		t.Errorf("a broker without the race: faults %v, want none", got)
	}
	if v := slotExclusive(t, h); v.Status != verdict.Fail {
		t.Errorf("without the strike: slot-exclusive %s: %s", v.Status, v.Detail)
	}
}

// asReference and noClient say of every process that its client is the
// reference's, and of none (brokerFaults' heartbeatOnly).
func asReference(string) string { return referenceClient }
func noClient(string) string    { return "" }
