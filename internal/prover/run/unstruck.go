package run

import (
	"slices"
	"strings"

	"github.com/lockprover/lockprover/histories"
)

// NotStruck begins the error of every fault a run on a real server records
// that lockprover did not strike: one the server struck on its own (a
// broker closing a connection), or the machine (a server or a client that
// did not run in time), known only from what the run measured, once it
// has ended. The rest of the error says what was measured.
const NotStruck = "not struck by lockprover: "

// FaultPair is a fault's invoke and info, at the same time, the info
// saying why: a fault the run learned of after the fact (NotStruck), for
// WithFaults.
func FaultPair(f, proc string, at int64, why string) []histories.Event {
	v := &histories.Fault{Process: proc}
	return []histories.Event{
		{Time: at, Process: "nemesis", Type: histories.Invoke, F: f, Value: v},
		{Time: at, Process: "nemesis", Type: histories.Info, F: f, Value: v, Error: why},
	}
}

// WithFaults merges faults (pairs, FaultPair's) into h by time, after any
// nemesis operation in flight, and numbers the events again; moved gives
// each old index its new one (nil when there was nothing to merge, h then
// returned as it is).
func WithFaults(h, faults []histories.Event) (merged []histories.Event, moved map[int]int) {
	if len(faults) == 0 {
		return h, nil
	}
	slices.SortStableFunc(faults, func(a, b histories.Event) int { return int(min(max(a.Time-b.Time, -1), 1)) })
	moved = map[int]int{}
	merged = make([]histories.Event, 0, len(h)+len(faults))
	nemesisOpen := false
	next := 0
	for i := 0; i <= len(h); i++ {
		for next+1 < len(faults) && !nemesisOpen && (i == len(h) || faults[next].Time < h[i].Time) {
			for _, f := range faults[next : next+2] {
				if len(merged) > 0 {
					f.Time = max(f.Time, merged[len(merged)-1].Time)
				}
				merged = append(merged, f)
			}
			next += 2
		}
		if i == len(h) {
			break
		}
		e := h[i]
		if e.Process == "nemesis" {
			nemesisOpen = e.Type == histories.Invoke
		}
		moved[e.Index] = len(merged)
		merged = append(merged, e)
	}
	for i := range merged {
		merged[i].Index = i
	}
	return merged, moved
}

// TimedOut finds, in an operation's error, the connection whose op ("read"
// or "write") timed out, as Go's net package names it ("read tcp
// 127.0.0.1:36324->127.0.0.1:46051: i/o timeout": local 127.0.0.1:36324,
// peer 127.0.0.1:46051); ok is false if err names none. Through a run's
// proxies the local end is the client's and the peer a proxy's: which of
// a process's connections gave up waiting, the evidence of a stall of the
// machine a run records after the fact.
func TimedOut(err, op string) (local, peer string, ok bool) {
	for rest := err; ; {
		_, after, found := strings.Cut(rest, op+" tcp ")
		if !found {
			return "", "", false
		}
		rest = after
		ends, tail, found := strings.Cut(after, ": ")
		if !found || !strings.HasPrefix(tail, "i/o timeout") {
			continue
		}
		local, peer, found = strings.Cut(ends, "->")
		if found && !strings.Contains(ends, " ") {
			return local, peer, true
		}
	}
}
