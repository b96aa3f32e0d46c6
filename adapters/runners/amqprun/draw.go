package amqprun

import (
	"cmp"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"
	"pgregory.net/rapid"
)

// Draw draws a plan with rapid, so that rapid can shrink a failing plan to
// a minimal one: fewer clients, fewer operations, fewer faults, simpler
// schedules. Plans lean toward what breaks locks: every client tries for
// the lock, mostly several clients and admins meet, mostly something
// fails, and an admin-crash mostly strikes between two queue writes of a
// change.
//
// Plans also reach the interleavings a defect needs: every process paces
// its operations by the plan's beat (a pause of up to beat milliseconds
// before each), so that the processes' operations spread over the same
// stretch of time and each kind of one process's operations comes after
// each kind of another's, again and again, on the simulator and on a real
// broker alike (where an admin unpaced finished its steps within some
// 50 ms of its create, before another began); and clients mostly go
// through several cycles, releasing mostly, so that most acquires are not
// a process's first.
func Draw(t *rapid.T, c Config) *Plan {
	c = c.withDefaults()
	p := &Plan{Version: PlanVersion, Kind: c.Kind, Lock: "lp", Options: c.Options, Mutant: c.Mutant}
	hb := p.Options.Heartbeat().Milliseconds()
	if hb == 0 {
		hb = 60000 // the broker's
	}
	// Mostly short pauses; now and then one on the scale of heartbeats, so
	// that holds outlast detection and zombies wake up to verify.
	long := rapid.IntRange(1, int(3*hb)) // made once a plan: see intRange
	sleep := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: Sleep, Ms: intRange(1, 50).Draw(t, "ms")} }),
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: Sleep, Ms: long.Draw(t, "long_ms")} }))
	// Half the plans unpaced (beat 0), where operations bunch up and race.
	beat := 0
	if b := intRange(1, 400).Draw(t, "beat_ms"); aBool.Draw(t, "paced") {
		beat = b
	}
	paces := rapid.IntRange(0, beat) // made once a plan: see intRange
	pace := rapid.Custom(func(t *rapid.T) Step { return Step{Op: Sleep, Ms: paces.Draw(t, "pace_ms")} })
	p.Clients = drawClients(t, c, sleep, pace)
	if p.Kind == histories.Semaphore {
		p.Slots = intRange(1, 3).Draw(t, "slots")
		p.Admins = drawAdmins(t, c, sleep, pace)
	}
	switch ct := c.Target.(type) {
	case RabbitMQCluster:
		drawNodes(t, p, ct.Nodes())
		p.PartitionHandling = ct.Cluster.Options().PartitionHandling
	case Simulator:
		if len(ct.Cluster) > 0 {
			drawNodes(t, p, ct.Cluster)
			p.PartitionHandling = cmp.Or(ct.PartitionHandling, rabbitmqsim.Ignore)
		}
	}
	p.Nemesis = drawNemesis(t, c, p, hb)
	p.Schedule = rapid.SliceOfN(rapid.IntRange(0, 7), 0, 300).Draw(t, "schedule")
	p.ScheduleSeed = rapid.Uint64().Draw(t, "schedule_seed")
	return p
}

// paced appends op to steps after a pause drawn from pace (none if 0).
func paced(t *rapid.T, steps []Step, pace *rapid.Generator[Step], op Step) []Step {
	if s := pace.Draw(t, "pace"); s.Ms > 0 {
		steps = append(steps, s)
	}
	return append(steps, op)
}

// drawClients draws the clients' scripts.
func drawClients(t *rapid.T, c Config, sleep, pace *rapid.Generator[Step]) [][]Step {
	// A client works as lock users do: try for the lock a few times, work
	// and verify now and then, let go (or not), again. (An acquire while
	// the client believes it holds the lock is skipped.)
	cycle := rapid.Custom(func(t *rapid.T) []Step {
		var steps []Step
		// Now and then after a while: clients do not all arrive at once.
		// (Drawn either way, so that shrinking it away shifts nothing.)
		if think := sleep.Draw(t, "think"); aBool.Draw(t, "thinks") {
			steps = append(steps, think)
		}
		steps = paced(t, steps, pace, Step{Op: histories.Acquire})
		for i := intRange(0, 2).Draw(t, "retries"); i > 0; i-- {
			steps = append(steps, sleep.Draw(t, "backoff"))
			steps = paced(t, steps, pace, Step{Op: histories.Acquire})
		}
		for i := intRange(0, 3).Draw(t, "verifies"); i > 0; i-- {
			steps = append(steps, sleep.Draw(t, "work"))
			steps = paced(t, steps, pace, Step{Op: histories.Verify})
		}
		// Mostly let go, so that the next cycle's acquire is not the
		// client's first.
		if intRange(0, 3).Draw(t, "release") > 0 {
			steps = paced(t, steps, pace, Step{Op: histories.Release})
		}
		return steps
	})
	// Every client does at least one cycle, mostly two or more.
	script := rapid.Custom(func(t *rapid.T) []Step {
		least := 1
		if intRange(0, 3).Draw(t, "again") > 0 {
			least = 2
		}
		var steps []Step
		for _, cy := range rapid.SliceOfN(cycle, least, max(2, c.Ops/3)).Draw(t, "cycles") {
			steps = append(steps, cy...)
		}
		return steps
	})
	// Mostly more than one, so that they contend.
	least := 1
	if c.Clients > 1 && intRange(0, 2).Draw(t, "crowd") > 0 {
		least = 2
	}
	return rapid.SliceOfN(script, least, c.Clients).Draw(t, "clients")
}

// drawAdmins draws a semaphore's admins' scripts.
func drawAdmins(t *rapid.T, c Config, sleep, pace *rapid.Generator[Step]) [][]Step {
	var out [][]Step
	change := rapid.Custom(func(t *rapid.T) Step {
		d := intRange(1, 2).Draw(t, "delta")
		if aBool.Draw(t, "remove") {
			d = -d
		}
		return Step{Op: histories.Change, Delta: d}
	})
	count := rapid.Just(Step{Op: histories.Count})
	// Changes and counts twice as often as waits and pauses: what one
	// admin changes, another counts.
	adminStep := rapid.OneOf(change, count,
		rapid.Custom(func(t *rapid.T) Step { return Step{Op: histories.Wait, Slot: intRange(1, 3).Draw(t, "slot")} }),
		sleep, change, count)
	// Mostly more than one, so that their changes meet.
	admins := 1
	if c.Admins > 1 {
		if more := intRange(2, c.Admins).Draw(t, "admins"); intRange(0, 3).Draw(t, "more_admins") > 0 {
			admins = more
		}
	}
	for i := 0; i < admins; i++ {
		var script []Step
		for _, s := range rapid.SliceOfN(adminStep, 1, 6).Draw(t, "admin") {
			if s.Op == Sleep {
				script = append(script, s)
			} else {
				script = paced(t, script, pace, s)
			}
		}
		out = append(out, script)
	}
	return out
}

// drawNemesis draws the plan's faults: at a time, or right after a
// process's n-th method (inside an operation).
func drawNemesis(t *rapid.T, c Config, p *Plan, hb int64) []Fault {
	procs := p.processes()
	// An admin-crash strikes inside a change: only admins that change the
	// semaphore can suffer one.
	var changers []int
	for a, script := range p.Admins {
		if slices.ContainsFunc(script, func(s Step) bool { return s.Op == histories.Change }) {
			changers = append(changers, a)
		}
	}
	var faults []string
	for _, f := range c.Faults {
		if f != AdminCrash || len(changers) > 0 {
			faults = append(faults, f)
		}
	}
	if len(p.Cluster) == 0 {
		faults = slices.DeleteFunc(faults, func(f string) bool { return slices.Contains(ClusterFaultNames, f) })
	}
	crashes := map[int]int{} // admin-crashes drawn so far, per admin
	fault := rapid.Custom(func(t *rapid.T) Fault {
		f := Fault{Fault: rapid.SampledFrom(faults).Draw(t, "fault")}
		if slices.Contains(ClusterFaultNames, f.Fault) {
			return drawClusterFault(t, p, f.Fault, procs)
		}
		if f.Fault == AdminCrash {
			a := rapid.SampledFrom(changers).Draw(t, "admin")
			f.Target = adminName(a)
			// It strikes the admin's next change: mostly between two of
			// that change's queue writes, where a crash leaves the slots
			// half changed; else anywhere in its first methods.
			from, to := nthChange(p, a, crashes[a])
			crashes[a]++
			if writes := max(from, to) - min(from, to); writes > 1 && intRange(0, 3).Draw(t, "between_writes") > 0 {
				f.AfterCalls = methodsBeforeWrites(p, from) + intRange(1, writes-1).Draw(t, "writes_done")
			} else {
				f.AfterCalls = intRange(1, 8).Draw(t, "after_calls")
			}
			return f
		}
		if aBool.Draw(t, "mid-operation") {
			// Right after the target's n-th method: inside an operation.
			f.AfterCalls = intRange(1, 40).Draw(t, "after_calls")
			f.Target = rapid.SampledFrom(procs).Draw(t, "target")
		} else {
			f.At = rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(0, int(3*hb))).Draw(t, "at_ms")
			if f.Fault != histories.RestartBroker {
				f.Target = rapid.SampledFrom(procs).Draw(t, "target")
			}
		}
		if f.Fault == histories.Pause || f.Fault == histories.Partition {
			f.For = intRange(0, int(4*hb)).Draw(t, "for_ms")
		}
		return f
	})
	if len(faults) == 0 {
		return nil
	}
	// Mostly at least one fault; now and then none.
	least := 0
	if intRange(0, 3).Draw(t, "faulty") > 0 {
		least = 1
	}
	return rapid.SliceOfN(fault, least, c.MaxFaults).Draw(t, "nemesis")
}

// nthChange predicts the slots before and after admin a's n-th change
// (from 0; 0 and 0 if it has fewer): the plan's slots plus the admin's own
// earlier deltas (other admins may change them meanwhile).
func nthChange(p *Plan, a, n int) (from, to int) {
	from = p.Slots
	for _, s := range p.Admins[a] {
		if s.Op != histories.Change {
			continue
		}
		to = max(0, from+s.Delta)
		if n == 0 {
			return from, to
		}
		n--
		from = to
	}
	return 0, 0
}

// methodsBeforeWrites is how many methods the reference's change from
// slots sends before its first queue write: the administration mutex's
// declare, then the count's probes of A[1]..A[from+1].
func methodsBeforeWrites(p *Plan, from int) int {
	n := from + 1
	if !p.Options.NoAdminMutex {
		n++
	}
	return n
}

// The faults a plan on a cluster may hold beside a single broker's, as
// --faults names them: a node cut off from the others both ways
// (isolate-node), or one way (cut-one-way: its packets to the others are
// dropped, theirs reach it); a bridge (two nodes cut off from each other,
// the third seeing both); a node's VM killed (kill-node) and started
// again after a while, paused (SIGSTOP) and continued (pause-node), or
// restarted cleanly (restart-node). A plan records each as the fault a
// history names (partition with the directions cut, kill, pause,
// restart-broker aimed at the node).
var ClusterFaultNames = run.Listed(run.IsolateNode, run.CutOneWay, run.Bridge, run.KillNode, run.PauseNode, run.RestartNode)

// drawNodes draws the node each process of p connects to.
func drawNodes(t *rapid.T, p *Plan, nodes []string) {
	p.Cluster = slices.Clone(nodes)
	p.Nodes = map[string]string{}
	for _, name := range p.processes() {
		p.Nodes[name] = rapid.SampledFrom(nodes).Draw(t, "node_of_"+name)
	}
}

// drawClusterFault draws a fault of the ClusterFaultNames kind on p's
// cluster: mostly long enough (up to 20 s) for the nodes to notice it,
// which takes 0.75 to 1.25 net_ticktimes (5 s by default), at a time in the
// plan's first seconds or while a process is in the middle of an
// operation (after_calls of a process).
func drawClusterFault(t *rapid.T, p *Plan, kind string, procs []string) Fault {
	var f Fault
	if aBool.Draw(t, "mid-operation") {
		f.Target = rapid.SampledFrom(procs).Draw(t, "target")
		f.AfterCalls = intRange(1, 40).Draw(t, "after_calls")
	} else {
		f.At = intRange(0, 8000).Draw(t, "at_ms")
	}
	lasts := rapid.OneOf(rapid.IntRange(0, 3000), rapid.IntRange(3000, 20000)).Draw(t, "for_ms")
	node := rapid.SampledFrom(p.Cluster).Draw(t, "node")
	var others []string
	for _, n := range p.Cluster {
		if n != node {
			others = append(others, n)
		}
	}
	var cut []string
	switch kind {
	case run.IsolateNode:
		for _, o := range others {
			cut = append(cut, node+">"+o, o+">"+node)
		}
	case run.CutOneWay:
		for _, o := range others {
			cut = append(cut, node+">"+o)
		}
	case run.Bridge:
		// node is the bridge: the two others are cut off from each other.
		if len(others) >= 2 {
			cut = append(cut, others[0]+">"+others[1], others[1]+">"+others[0])
		} else {
			cut = append(cut, node+">"+others[0], others[0]+">"+node)
		}
	case run.KillNode:
		f.Fault, f.Node, f.For = histories.Kill, node, lasts
	case run.PauseNode:
		f.Fault, f.Node, f.For = histories.Pause, node, lasts
	case run.RestartNode:
		f.Fault, f.Node = histories.RestartBroker, node
	}
	if cut != nil {
		f.Fault, f.Cut, f.For = histories.Partition, strings.Join(cut, " "), lasts
	}
	return f
}

// intRange is rapid.IntRange(min, max), for a draw of its own (Draw):
// the same value from the same bits, but the generators of the ranges
// every plan draws from are made once (ranges) rather than again for each
// of some hundred draws a plan (three allocations and a map lookup each).
// A rapid generator keeps nothing a draw changes; the label it gives the
// draw for shrinking is empty unless its String has been called, which
// only a generator put inside another (SliceOf, OneOf) gets: those are
// made with rapid.IntRange still.
func intRange(min, max int) *rapid.Generator[int] {
	if g := ranges[[2]int{min, max}]; g != nil {
		return g
	}
	return rapid.IntRange(min, max)
}

// ranges are the generators intRange shares: the constant ranges of the
// draws, and whatever else any draw of a plan uses often.
var ranges = func() map[[2]int]*rapid.Generator[int] {
	m := map[[2]int]*rapid.Generator[int]{}
	for _, r := range [][2]int{{0, 2}, {0, 3}, {0, 30}, {0, 4000}, {0, 8000}, {1, 2}, {1, 3}, {1, 4}, {1, 8}, {1, 40}, {1, 50}, {1, 400}, {20, 200}} {
		m[r] = rapid.IntRange(r[0], r[1])
	}
	return m
}()

// aBool is rapid.Bool(), made once for the same reason as ranges.
var aBool = rapid.Bool()
