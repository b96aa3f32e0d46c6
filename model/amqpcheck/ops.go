package amqpcheck

import (
	"math"
	"sort"

	"github.com/lockprover/lockprover/histories"
)

// never is the return time of an operation whose outcome is unknown: it may
// take effect at any time after its invoke.
const never = math.MaxInt64

// An op is one operation of a history: an invoke and its completion.
type op struct {
	index  int // the invoke's index
	done   int // the completion's index, or -1 if it never completed
	proc   int // 1-based process number
	who    int // the incarnation: proc*incarnations + how many kills of it came before
	name   string
	f      string
	typ    histories.Type // the completion's type; "" if none
	call   int64
	ret    int64 // completion time; never when the outcome is unknown
	arg    *Value
	res    *Value
	err    string // what the process said went wrong (an event's error)
	client int    // porcupine client id
}

// unknown reports whether the operation's outcome is unknown.
func (o *op) unknown() bool { return o.typ == histories.Info || o.typ == "" }

// patched reports whether the outcome was settled from ground truth after
// the process saw it as unknown.
func (o *op) patched() bool { return o.res != nil && o.res.Patched }

// A fault is a nemesis event with the processes whose connections it may
// cost, and when holds taken after it are safe from it.
type fault struct {
	index   int
	f       string
	target  int // process number; 0 for the whole broker
	call    int64
	end     int64 // when it is in place (its info), or never
	immune  int64 // holds whose acquire began after this are safe from it
	healIdx int   // index of the heal/resume that ended it, or -1
	// said is what its completion's error says: who struck it, where not
	// lockprover (the broker closing a connection on its own, say).
	said string
}

// A lockHistory is one lock's operations and the faults of the history.
type lockHistory struct {
	name   string
	kind   string
	ops    []*op // in invoke order
	faults []*fault
	procs  []string // process names by number-1
	max    int      // the highest slot any operation mentions
	// fresh: the lock's first admin operation is a create that succeeded,
	// so the semaphore did not exist before it: the history begins with no
	// A queue at all, and slots above the count do not exist until an admin
	// adds them. A lock that pre-existed (its create failed exists, or
	// there is none) may begin with any slots in place.
	fresh bool
	// keepHolds: no fault ends a hold (model.Options.Jepsen, Knossos's mutex
	// model), which explanations say.
	keepHolds bool
}

// split groups a validated history by lock.
func split(h []histories.Event) ([]*lockHistory, []string) {
	procNum := map[string]int{}
	var procs []string
	num := func(p string) int {
		if n, ok := procNum[p]; ok {
			return n
		}
		procs = append(procs, p)
		procNum[p] = len(procs)
		return len(procs)
	}
	locks := map[string]*lockHistory{}
	var order []string
	inflight := map[string]*op{}
	ops := arena[op]{chunk: make([]op, 0, len(h)/2)} // an invoke and a completion each
	var faults []*fault
	openFault := map[string]*fault{}
	for _, e := range h {
		if e.Process == "nemesis" {
			key := e.F + "/" + target(e)
			if e.Type == histories.Invoke {
				f := &fault{index: e.Index, f: e.F, call: e.Time, end: never, healIdx: -1}
				// A restart of the broker strikes every process; of one
				// node of a cluster, only what the history names as struck
				// through it (the node is a target no operation has).
				if e.F != histories.RestartBroker || target(e) != "" {
					f.target = num(target(e))
				}
				faults = append(faults, f)
				openFault[key] = f
			} else if f := openFault[key]; f != nil {
				delete(openFault, key)
				if e.Type == histories.Info {
					f.end = e.Time
				}
				f.said = e.Error
			}
			continue
		}
		lh := locks[e.Lock]
		if lh == nil {
			lh = &lockHistory{name: e.Lock, kind: histories.Semaphore}
			locks[e.Lock] = lh
			order = append(order, e.Lock)
		}
		if e.Kind != "" {
			lh.kind = e.Kind
		}
		lh.mention(ValueOf(&e))
		if e.Type == histories.Invoke {
			o := ops.new(op{index: e.Index, done: -1, proc: num(e.Process), name: e.Process, f: e.F, call: e.Time, ret: never, arg: ValueOf(&e)})
			lh.ops = append(lh.ops, o)
			inflight[e.Process] = o
			continue
		}
		o := inflight[e.Process]
		delete(inflight, e.Process)
		o.done, o.typ, o.res, o.err = e.Index, e.Type, ValueOf(&e), e.Error
		if e.Type != histories.Info {
			o.ret = e.Time
		}
	}
	immunity(faults)
	incarnate(locks, faults)
	out := make([]*lockHistory, len(order))
	for i, name := range order {
		lh := locks[name]
		lh.faults, lh.procs = faults, procs
		lh.fresh = firstCreates(lh.ops)
		clients(lh.ops)
		out[i] = lh
	}
	return out, procs
}

// firstCreates reports whether the first admin operation of ops is a
// create that succeeded.
func firstCreates(ops []*op) bool {
	for _, o := range ops {
		switch o.f {
		case histories.Create, histories.Change, histories.Destroy, histories.Count:
			return o.f == histories.Create && o.typ == histories.Ok
		}
	}
	return false
}

// target is what a fault event aims at: a process, a node, or the
// directions a partition between nodes cuts.
func target(e histories.Event) string {
	if f := histories.FaultOf(&e); f != nil {
		if f.Process == "" {
			return f.Cut
		}
		return f.Process
	}
	return ""
}

func (lh *lockHistory) mention(v *Value) {
	if v == nil {
		return
	}
	for _, p := range []*int{v.Slot, v.Slots, v.From, v.To} {
		if p != nil && *p > lh.max {
			lh.max = *p
		}
	}
	if v.Delta != nil && lh.max+*v.Delta > lh.max {
		lh.max += *v.Delta
	}
}

// immunity sets when holds become safe from each fault: a kill, a forced
// close or a restart cannot cost a hold whose acquire began after the fault
// was in place (it was taken on a newer connection); a pause or a partition
// cannot once the matching resume or heal is in place. A dropped reply fires
// at the target's next method, whenever that is, so nothing is safe from it.
func immunity(faults []*fault) {
	for i, f := range faults {
		switch f.f {
		case histories.Kill, histories.ForceClose, histories.RestartBroker, histories.QueueDeleted:
			f.immune = f.end
		case histories.Pause, histories.Partition:
			f.immune = never
			ender := histories.EndOf(f.f)
			for _, g := range faults[i+1:] {
				if g.f == ender && g.target == f.target {
					f.immune, f.healIdx = g.end, g.index
					break
				}
			}
		default:
			f.immune = never
		}
	}
}

// incarnations bounds the kills one process may survive in a history.
const incarnations = 1 << 16

// incarnate numbers each operation's incarnation: a process killed and run
// again is a new client under the same name, which does not hold what its
// predecessor held.
func incarnate(locks map[string]*lockHistory, faults []*fault) {
	for _, lh := range locks {
		for _, o := range lh.ops {
			o.who = o.proc * incarnations
			for _, f := range faults {
				if f.f == histories.Kill && f.target == o.proc && f.end < o.call {
					o.who++
				}
			}
		}
	}
}

// procOf is the process of an incarnation.
func procOf(who int) int { return who / incarnations }

// costsHolds reports whether a fault may end connections (and so holds).
func costsHolds(f *fault) bool {
	switch f.f {
	case histories.Kill, histories.Pause, histories.Partition, histories.ForceClose, histories.RestartBroker, histories.DropReply, histories.QueueDeleted:
		return true
	}
	return false
}

// clients gives each operation a porcupine client id: one per process, and
// a fresh one after every operation whose outcome is unknown, so that each
// id's operations stay sequential.
func clients(ops []*op) {
	next := 0
	id := map[int]int{}
	for _, o := range ops {
		c, ok := id[o.proc]
		if !ok {
			c = next
			next++
		}
		o.client = c
		if o.ret == never {
			id[o.proc] = next
			next++
		} else {
			id[o.proc] = c
		}
	}
}

// maxClient is the number of client ids ops use.
func maxClient(ops []*op) int {
	m := 0
	for _, o := range ops {
		m = max(m, o.client+1)
	}
	return m
}

// overlaps reports whether o's interval meets [a, b].
func (o *op) overlaps(a, b int64) bool { return o.call <= b && a <= o.ret }

// faultsOf returns the faults that may cost process p its holds, by start.
func (lh *lockHistory) faultsOf(p int) []*fault {
	var fs []*fault
	for _, f := range lh.faults {
		if costsHolds(f) && (f.target == p || f.target == 0) {
			fs = append(fs, f)
		}
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].call < fs[j].call })
	return fs
}
