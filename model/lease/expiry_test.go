package lease

import (
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// A backend that lets a lease outlive its ttl twice (Consul invalidates a
// session only after 2×TTL) is judged with that horizon: a refresh 1.5 ttl
// after the grant, which a backend that expires at one ttl may not
// answer ok (no-revival), is no revival at twice; and a refusal 2.2 ttl
// after the grant, which recovers forbids at one ttl (plus its margin), is
// allowed at twice. The certainly-valid span does not change.
func TestExpiryFactor(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	ev := func(t int64, p string, typ histories.Type, f string, v *Value) histories.Event {
		return histories.Event{Time: ms(t), Process: p, Type: typ, F: f, Lock: "k", Kind: Kind, Value: v}
	}
	grant := &Value{Max: histories.Int(1), TTLMs: histories.Int(1000)}
	refresh := []histories.Event{
		ev(0, "c1", histories.Invoke, Acquire, grant),
		ev(10, "c1", histories.Ok, Acquire, &Value{Token: "a"}),
		ev(1500, "c1", histories.Invoke, Refresh, &Value{Token: "a", TTLMs: histories.Int(1000)}),
		ev(1510, "c1", histories.Ok, Refresh, nil),
	}
	refused := []histories.Event{
		ev(0, "c1", histories.Invoke, Acquire, grant),
		ev(10, "c1", histories.Ok, Acquire, &Value{Token: "a"}),
		ev(2200, "c2", histories.Invoke, Acquire, grant),
		ev(2210, "c2", histories.Fail, Acquire, &Value{Reason: Full}),
	}
	for _, h := range [][]histories.Event{refresh, refused} {
		for i := range h {
			h[i].Index = i
		}
	}
	judge := func(h []histories.Event, o model.Options, property string) verdict.Verdict {
		for _, v := range Check(h, o) {
			if v.Property == property {
				return v
			}
		}
		t.Fatalf("no %s verdict", property)
		return verdict.Verdict{}
	}
	if v := judge(refresh, model.Options{}, NoRevival); v.Status != verdict.Fail || !strings.Contains(v.Detail, "its last grant's return plus ttl(1+drift)") {
		t.Errorf("one ttl: no-revival %s: %s", v.Status, v.Detail)
	}
	if v := judge(refresh, model.Options{Family: []any{Options{Expiry: 2}}}, NoRevival); v.Status != verdict.Pass {
		t.Errorf("twice the ttl: no-revival %s: %s", v.Status, v.Detail)
	}
	if v := judge(refused, model.Options{}, Recovers); v.Status != verdict.Fail || !strings.Contains(v.Detail, "ttl(1+drift) and a margin") {
		t.Errorf("one ttl: recovers %s: %s", v.Status, v.Detail)
	}
	if v := judge(refused, model.Options{Family: []any{Options{Expiry: 2}}}, Recovers); v.Status != verdict.Pass {
		t.Errorf("twice the ttl: recovers %s: %s", v.Status, v.Detail)
	}
	refused[2].Time, refused[3].Time = ms(3100), ms(3110) // past 2·ttl(1+drift) and the margin
	if v := judge(refused, model.Options{Family: []any{Options{Expiry: 2}}}, Recovers); v.Status != verdict.Fail || !strings.Contains(v.Detail, "2·ttl(1+drift) and a margin") {
		t.Errorf("twice the ttl, refused after it: recovers %s: %s", v.Status, v.Detail)
	}
}

// A restart of a backend that keeps its leases renews them from when it is
// back (Options.RestartKeeps): a refresh after the lease's last grant plus
// ttl(1+r), but within that of the restart's completion, is no revival
// there, and is one where the backend is not said to renew.
func TestRestartKeeps(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	ev := func(t int64, p string, typ histories.Type, f string, v *Value) histories.Event {
		return histories.Event{Time: ms(t), Process: p, Type: typ, F: f, Lock: "k", Kind: Kind, Value: v}
	}
	restart := &histories.Fault{Process: "server"}
	h := []histories.Event{
		ev(0, "c1", histories.Invoke, Acquire, &Value{Max: histories.Int(1), TTLMs: histories.Int(1000)}),
		ev(10, "c1", histories.Ok, Acquire, &Value{Token: "a"}),
		{Time: ms(500), Process: "nemesis", Type: histories.Invoke, F: histories.RestartBroker, Value: restart},
		{Time: ms(1500), Process: "nemesis", Type: histories.Info, F: histories.RestartBroker, Value: restart},
		ev(2000, "c1", histories.Invoke, Refresh, &Value{Token: "a", TTLMs: histories.Int(1000)}),
		ev(2010, "c1", histories.Ok, Refresh, nil),
	}
	for i := range h {
		h[i].Index = i
	}
	noRevival := func(o Options) verdict.Verdict {
		for _, v := range Check(h, model.Options{Family: []any{o}}) {
			if v.Property == NoRevival {
				return v
			}
		}
		t.Fatal("no no-revival verdict")
		return verdict.Verdict{}
	}
	if v := noRevival(Options{}); v.Status != verdict.Fail {
		t.Errorf("without RestartKeeps: no-revival %s: %s", v.Status, v.Detail)
	}
	if v := noRevival(Options{RestartKeeps: true}); v.Status != verdict.Pass {
		t.Errorf("with RestartKeeps: no-revival %s: %s", v.Status, v.Detail)
	}
	h[4].Time, h[5].Time = ms(2600), ms(2610) // past the restart's completion plus ttl(1+r)
	if v := noRevival(Options{RestartKeeps: true}); v.Status != verdict.Fail {
		t.Errorf("with RestartKeeps, after its horizon: no-revival %s: %s", v.Status, v.Detail)
	}
	if v := noRevival(Options{RestartKeeps: true, RestartGrace: 500 * time.Millisecond}); v.Status != verdict.Pass {
		t.Errorf("with RestartKeeps and a grace: no-revival %s: %s", v.Status, v.Detail)
	}
}

// Where a kill ends a lease (Options.KillEnds: a session lock freed when
// its holder's connection closes), another taking the lock right after its
// holder was killed is no double hold; elsewhere it is one.
func TestKillEnds(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	ev := func(t int64, p string, typ histories.Type, f string, v *Value) histories.Event {
		return histories.Event{Time: ms(t), Process: p, Type: typ, F: f, Lock: "k", Kind: Kind, Value: v}
	}
	kill := &histories.Fault{Process: "c1"}
	h := []histories.Event{
		ev(0, "c1", histories.Invoke, Acquire, &Value{Max: histories.Int(1), TTLMs: histories.Int(1000)}),
		ev(10, "c1", histories.Ok, Acquire, &Value{Token: "a"}),
		{Time: ms(100), Process: "nemesis", Type: histories.Invoke, F: histories.Kill, Value: kill},
		{Time: ms(100), Process: "nemesis", Type: histories.Info, F: histories.Kill, Value: kill},
		ev(200, "c2", histories.Invoke, Acquire, &Value{Max: histories.Int(1), TTLMs: histories.Int(1000)}),
		ev(210, "c2", histories.Ok, Acquire, &Value{Token: "b"}),
	}
	for i := range h {
		h[i].Index = i
	}
	exclusive := func(o Options) verdict.Verdict {
		for _, v := range Check(h, model.Options{Family: []any{o}}) {
			if v.Property == LeaseExclusive {
				return v
			}
		}
		t.Fatal("no lease-exclusive verdict")
		return verdict.Verdict{}
	}
	if v := exclusive(Options{}); v.Status != verdict.Fail {
		t.Errorf("without KillEnds: lease-exclusive %s: %s", v.Status, v.Detail)
	}
	if v := exclusive(Options{KillEnds: true}); v.Status != verdict.Pass {
		t.Errorf("with KillEnds: lease-exclusive %s: %s", v.Status, v.Detail)
	}
	h[2].Time, h[3].Time = ms(300), ms(300) // the kill after c2's grant
	if v := exclusive(Options{KillEnds: true}); v.Status != verdict.Fail {
		t.Errorf("with KillEnds, killed after the overlap: lease-exclusive %s: %s", v.Status, v.Detail)
	}
}

// On a cluster (Options.Elections), a partition between its nodes may
// bring an election, which renews every lease from when it is over: a
// refresh past the lease's last grant plus ttl(1+r), but within that of
// the heal, is no revival; without Elections it is one. Two partitions
// of different links end at their own heals (their cuts), not at the
// first heal of any.
func TestElections(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	ev := func(t int64, p string, typ histories.Type, f string, v *Value) histories.Event {
		return histories.Event{Time: ms(t), Process: p, Type: typ, F: f, Lock: "k", Kind: Kind, Value: v}
	}
	nem := func(t int64, typ histories.Type, f, cut string) histories.Event {
		return histories.Event{Time: ms(t), Process: "nemesis", Type: typ, F: f, Value: &histories.Fault{Cut: cut}}
	}
	a, b := "e1>e2 e2>e1 e1>e3 e3>e1", "e2>e3 e3>e2"
	servers := []string{"e1", "e2", "e3"}
	h := []histories.Event{
		ev(0, "c1", histories.Invoke, Acquire, &Value{Max: histories.Int(1), TTLMs: histories.Int(1000)}),
		ev(10, "c1", histories.Ok, Acquire, &Value{Token: "a"}),
		nem(400, histories.Invoke, histories.Partition, b),
		nem(410, histories.Info, histories.Partition, b),
		nem(500, histories.Invoke, histories.Partition, a),
		nem(510, histories.Info, histories.Partition, a),
		nem(1500, histories.Invoke, histories.Heal, a),
		nem(1510, histories.Info, histories.Heal, a),
		ev(2000, "c1", histories.Invoke, Refresh, &Value{Token: "a", TTLMs: histories.Int(1000)}),
		ev(2010, "c1", histories.Ok, Refresh, nil),
		nem(3000, histories.Invoke, histories.Heal, b),
		nem(3010, histories.Info, histories.Heal, b),
		ev(3500, "c1", histories.Invoke, Refresh, &Value{Token: "a", TTLMs: histories.Int(1000)}),
		ev(3510, "c1", histories.Ok, Refresh, nil),
	}
	for i := range h {
		h[i].Index = i
	}
	noRevival := func(o Options) verdict.Verdict {
		for _, v := range Check(h, model.Options{Family: []any{o}}) {
			if v.Property == NoRevival {
				return v
			}
		}
		t.Fatal("no no-revival verdict")
		return verdict.Verdict{}
	}
	if v := noRevival(Options{RestartKeeps: true}); v.Status != verdict.Fail {
		t.Errorf("without Elections: no-revival %s: %s", v.Status, v.Detail)
	}
	if v := noRevival(Options{Elections: servers}); v.Status != verdict.Pass {
		t.Errorf("with Elections: no-revival %s: %s", v.Status, v.Detail)
	}
	// The refresh at 3.5 s passed only if b was in force until its own
	// heal (3 s), not a's (1.5 s: the lease renewed at 2 s would end by
	// 3.1 s). Past b's heal plus ttl(1+r), a refresh is a revival.
	h[12].Time, h[13].Time = ms(4200), ms(4210)
	if v := noRevival(Options{Elections: servers}); v.Status != verdict.Fail {
		t.Errorf("with Elections, past the last heal plus ttl(1+r): no-revival %s: %s", v.Status, v.Detail)
	}
	if v := noRevival(Options{Elections: servers, RestartGrace: time.Second}); v.Status != verdict.Pass {
		t.Errorf("with Elections and a grace: no-revival %s: %s", v.Status, v.Detail)
	}
	// Links cut between a server and other nodes (with e1 the only
	// server, no cut joins two) bring no election: the refresh at 2 s is
	// a revival.
	if v := noRevival(Options{Elections: []string{"e1"}}); v.Status != verdict.Fail {
		t.Errorf("with e1 no server: no-revival %s: %s", v.Status, v.Detail)
	}
}
