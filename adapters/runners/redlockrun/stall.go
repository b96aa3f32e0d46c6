package redlockrun

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/redis"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
)

// A machine under load may not run a server, or lockprover's own process,
// for a tenth of a second or more: the reference's round, bounded by its
// per-server timeout (a tenth of the ttl, at least 50 ms), then gives up
// on a server that had nothing wrong with it, and its operation ends
// unknown though lockprover struck no fault (the soak of issue 55:
// available failed on one private Redis at a load of 10, "i/o timeout").
// What the proxies saw says so after the fact: the answer to a command the
// operation sent reached the proxy only after the client had given the
// connection up.

// proxyRounds are the Rounds one proxy saw: of process proc (the
// history's name: an incarnation's, c1#2, is c1's) to server (redis2).
type proxyRounds struct {
	proc, server string
	addr         string // where the proxy listens: the client's peer
	rounds       []redis.Round
}

// roundsOf are the Rounds every proxy of the run saw.
func (b *redisPlace) roundsOf() []proxyRounds {
	out := make([]proxyRounds, 0, len(b.traced))
	for _, tp := range b.traced {
		proc, server, _ := strings.Cut(tp.name, "->")
		proc, _, _ = strings.Cut(proc, "#")
		out = append(out, proxyRounds{proc: proc, server: server, addr: tp.px.Addr(), rounds: tp.px.Rounds()})
	}
	return out
}

// machineStalls are the faults a loaded machine struck on a run of the
// reference, as run.FaultPairs to merge into its history h (whose clock
// started at start): for each operation that ended unknown (not killed),
// the command it sent that took the longest of those answered only after
// the client had given their connection up (Round.Gone: go-redis closes a
// connection whose read timed out), if any, as a force-close of its
// process from when the command was sent: the server, or lockprover's
// process carrying its answer, did not run for longer than the reference
// waits.
// An operation whose error is a write to one of its process's proxies
// timing out ("write tcp CLIENT->PROXY: i/o timeout") is a force-close of
// its process too, from just after its invoke: a command of a few bytes
// written on the loopback to a proxy that reads it does not wait for
// room, so the write's deadline passed before the client ran to write it
// (the suite beside two busy loops: the probe of TestMachineStallRecorded,
// 2 s after the server it had stopped was running again).
// A command while a fault lockprover struck was in force on its process
// or its server (a partition holds it, a pause stops the server) is no
// evidence: that fault explains it. Only the reference's: an
// implementation's timeouts are its own to answer for.
func machineStalls(h []histories.Event, start time.Time, seen []proxyRounds) []histories.Event {
	at := func(t time.Time) int64 { return int64(t.Sub(start)) }
	struck := struckSpans(h)
	explained := func(proc, server string, from, to int64) bool {
		for _, f := range struck {
			if (f.target == proc || f.target == server) && f.from <= to && from <= f.to {
				return true
			}
		}
		return false
	}
	invoked := map[string]histories.Event{}
	var out []histories.Event
	for _, e := range h {
		switch {
		case e.Process == "nemesis":
		case e.Type == histories.Invoke:
			invoked[e.Process] = e
		case e.Type == histories.Info && e.Error != "killed":
			inv, ok := invoked[e.Process]
			if !ok {
				continue
			}
			var late *redis.Round
			var server string
			for _, pr := range seen {
				if pr.proc != e.Process {
					continue
				}
				for i := range pr.rounds {
					r := &pr.rounds[i]
					if !r.Gone || at(r.Sent) < inv.Time || at(r.Sent) > e.Time ||
						explained(e.Process, pr.server, at(r.Sent), at(r.Answered)) {
						continue
					}
					if late == nil || r.Answered.Sub(r.Sent) > late.Answered.Sub(late.Sent) {
						late, server = r, pr.server
					}
				}
			}
			if late == nil {
				if pr := writeTimedOut(e.Error, e.Process, seen); pr != nil && !explained(e.Process, pr.server, inv.Time, e.Time) {
					why := fmt.Sprintf("%s's %s ended %q at %.3f s: its client's write to its proxy for %s timed out, a few bytes on the loopback that wait for no room, so its process did not run before the write's deadline passed, a stall of the machine",
						e.Process, e.F, e.Error, time.Duration(e.Time).Seconds(), pr.server)
					out = append(out, run.FaultPair(histories.ForceClose, e.Process, inv.Time+1, run.NotStruck+why)...)
				}
				continue
			}
			why := fmt.Sprintf("%s answered %s's %s %v after the proxy passed it on (at %.3f s), after %s's client had given that connection up, its deadline passed (its %s ended %q at %.3f s): the server, or lockprover's own process carrying the answer, did not run in time, a stall of the machine",
				server, e.Process, late.Command, late.Answered.Sub(late.Sent).Round(time.Millisecond), time.Duration(at(late.Sent)).Seconds(),
				e.Process, e.F, e.Error, time.Duration(e.Time).Seconds())
			out = append(out, run.FaultPair(histories.ForceClose, e.Process, at(late.Sent), run.NotStruck+why)...)
		}
	}
	return out
}

// writeTimedOut is the proxy of proc's that err names as the peer of a
// write that timed out (run.TimedOut), nil if err names no such write.
func writeTimedOut(err, proc string, seen []proxyRounds) *proxyRounds {
	_, peer, ok := run.TimedOut(err, "write")
	if !ok {
		return nil
	}
	for i := range seen {
		if seen[i].proc == proc && seen[i].addr == peer {
			return &seen[i]
		}
	}
	return nil
}

// A struckSpan is a fault lockprover struck, on target (a process, or a
// server: redis2), in force from..to: a pause or partition until its
// resume or heal (the run's end if none), any other from its invoke to
// its completion.
type struckSpan struct {
	target   string
	from, to int64
}

// struckSpans are the faults h records, but those struck by nobody
// (run.NotStruck), as spans.
func struckSpans(h []histories.Event) []struckSpan {
	var out []struckSpan
	open := map[[2]string]int64{} // the fault's end (histories.EndOf) or the fault, target -> its invoke
	for _, e := range h {
		v := histories.FaultOf(&e)
		if e.Process != "nemesis" || v == nil || strings.HasPrefix(e.Error, run.NotStruck) {
			continue
		}
		end := histories.EndOf(e.F) // a pause lasts until its resume, a partition until its heal
		switch {
		case e.Type == histories.Invoke && end != "":
			if _, ok := open[[2]string{end, v.Process}]; !ok {
				open[[2]string{end, v.Process}] = e.Time
			}
		case e.Type == histories.Invoke:
			if _, ok := open[[2]string{e.F, v.Process}]; !ok {
				open[[2]string{e.F, v.Process}] = e.Time
			}
		case end == "":
			// The completion of a fault in place, or of a resume or a
			// heal: either ends what its name opened.
			if from, ok := open[[2]string{e.F, v.Process}]; ok {
				out = append(out, struckSpan{v.Process, from, e.Time})
				delete(open, [2]string{e.F, v.Process})
			}
		}
	}
	for k, from := range open {
		out = append(out, struckSpan{k[1], from, math.MaxInt64})
	}
	return out
}
