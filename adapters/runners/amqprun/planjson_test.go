package amqprun

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"pgregory.net/rapid"
)

// anyString is any string, valid UTF-8 or not, HTML's characters and
// control characters included: what encoding/json escapes.
func anyString() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.SampledFrom([]string{"", "acquire", "n1", "c1", "a<b>&c", "\"q\"\\", "\u2028\u2029", "tab\there", "é"}),
		rapid.String(),
		rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) }),
	)
}

func maybeNil[T any](t *rapid.T, g *rapid.Generator[[]T], label string) []T {
	if rapid.IntRange(0, 3).Draw(t, label+" nil") == 0 {
		return nil
	}
	return g.Draw(t, label)
}

// anyPlan is a Plan with every field drawn, nil and empty slices apart.
func anyPlan(t *rapid.T) *Plan {
	str := anyString()
	step := rapid.Custom(func(t *rapid.T) Step {
		return Step{Op: str.Draw(t, "op"), Ms: rapid.Int().Draw(t, "ms"), Delta: rapid.Int().Draw(t, "delta"), Slot: rapid.Int().Draw(t, "slot")}
	})
	script := rapid.Custom(func(t *rapid.T) []Step { return maybeNil(t, rapid.SliceOfN(step, 0, 3), "script") })
	fault := rapid.Custom(func(t *rapid.T) Fault {
		return Fault{At: rapid.Int().Draw(t, "at"), AfterCalls: rapid.IntRange(0, 3).Draw(t, "after"), Fault: str.Draw(t, "fault"),
			Target: str.Draw(t, "target"), Node: str.Draw(t, "node"), Cut: str.Draw(t, "cut"), For: rapid.IntRange(-1, 3).Draw(t, "for")}
	})
	o := Options{DeleteOrder: str.Draw(t, "delete order"), Overshoot: rapid.IntRange(-2, 2).Draw(t, "overshoot"),
		ScanStart: str.Draw(t, "scan start"), ContentionRetries: rapid.Int().Draw(t, "retries"), JitterMs: rapid.IntRange(0, 5).Draw(t, "jitter"),
		SkipVerifyAfterAcquire: rapid.Bool().Draw(t, "skip"), VerifyMethod: str.Draw(t, "verify"), NoAdminMutex: rapid.Bool().Draw(t, "nam"),
		TransientSlots: rapid.Bool().Draw(t, "ts"), NoLengthLimit: rapid.Bool().Draw(t, "nll"), LazyConnect: rapid.Bool().Draw(t, "lazy"),
		Channels: str.Draw(t, "channels"), Reconnect: rapid.Bool().Draw(t, "reconnect"), PlainFailure: rapid.Bool().Draw(t, "plain"),
		TidyVerify: rapid.Bool().Draw(t, "tidy")}
	if rapid.Bool().Draw(t, "heartbeat") {
		o.HeartbeatMs = Ms(rapid.IntRange(-1, 20000).Draw(t, "heartbeat ms"))
	}
	p := &Plan{Version: rapid.Int().Draw(t, "version"), Kind: str.Draw(t, "kind"), Lock: str.Draw(t, "lock"), Slots: rapid.Int().Draw(t, "slots"),
		Options: o, Mutant: str.Draw(t, "mutant"),
		Clients: maybeNil(t, rapid.SliceOfN(script, 0, 3), "clients"), Admins: maybeNil(t, rapid.SliceOfN(script, 0, 2), "admins"),
		Nemesis: maybeNil(t, rapid.SliceOfN(fault, 0, 3), "nemesis"), Cluster: maybeNil(t, rapid.SliceOfN(str, 0, 3), "cluster"),
		PartitionHandling: str.Draw(t, "mode"),
		Decisions:         run.Decisions{Schedule: maybeNil(t, rapid.SliceOfN(rapid.Int(), 0, 5), "schedule"), ScheduleSeed: rapid.Uint64().Draw(t, "seed")},
		JudgedBy:          prover.JudgedBy{Model: str.Draw(t, "model"), Properties: maybeNil(t, rapid.SliceOfN(str, 0, 3), "properties")},
	}
	if rapid.Bool().Draw(t, "nodes") {
		p.Nodes = rapid.MapOfN(str, str, 0, 3).Draw(t, "node map")
	}
	return p
}

// AppendJSON writes what encoding/json's Encoder writes, byte for byte, on
// plans with every field drawn (strings of every kind, nil and empty
// slices and maps), and on plans as searches draw them, of every kind.
func TestAppendJSONIsEncodingJSON(t *testing.T) {
	same := func(t *rapid.T, p *Plan) {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(p); err != nil {
			t.Fatal(err)
		}
		if got := p.AppendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("AppendJSON:\n%s\nencoding/json:\n%s", got, want.Bytes())
		}
	}
	t.Run("every field", rapid.MakeCheck(func(t *rapid.T) { same(t, anyPlan(t)) }))
	for _, c := range []Config{{}, {Kind: histories.Mutex}, {Scope: prover.Scope{Mutant: "skip-b-probe"}},
		{Options: Options{HeartbeatMs: Ms(0), ScanStart: "random", Channels: "per-purpose"}}} {
		t.Run("drawn", rapid.MakeCheck(func(t *rapid.T) { same(t, Draw(t, c)) }))
	}
}
