package redlockrun

import (
	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"pgregory.net/rapid"
)

// draw draws a plan with rapid, so that rapid can shrink a failing plan to
// a minimal one: fewer clients, fewer operations, fewer faults, simpler
// schedules.
func draw(t *rapid.T, c Config) *Plan {
	p := &Plan{Version: PlanVersion, Kind: Kind, Key: "lp", Mutant: c.Mutant, Servers: c.Servers, Persistence: c.Persistence, Limit: c.Limit}
	if c.Priority {
		p.Kind = PriorityKind
	}
	if p.Servers == 0 {
		choice := []int{1, 3, 2}
		if m := MutantNamed(c.Mutant); m != nil && m.servers != nil {
			choice = m.servers
		}
		p.Servers = rapid.SampledFrom(choice).Draw(t, "servers")
	}
	if p.Persistence == "" {
		p.Persistence = rapid.SampledFrom([]string{PersistAlways, PersistNone}).Draw(t, "persistence")
	}
	p.TTLMs = c.TTLMs
	switch {
	case p.TTLMs > 0:
	case c.real():
		// Real rounds take milliseconds, and more on a busy machine: a
		// ttl of a second keeps a round's timeout (half of it) far above
		// them.
		p.TTLMs = 1000
	default:
		p.TTLMs = rapid.SampledFrom([]int{100, 300, 1000}).Draw(t, "ttl_ms")
	}
	ttl := p.TTLMs
	// Short pauses, and pauses on the scale of the ttl, so that leases
	// expire under their holders: some about the ttl, where a lease is
	// just over or not yet, and some up to three.
	sleep := leaserun.Sleeps(ttl/2, ttl+ttl/2, 3*ttl)
	p.Clients = leaserun.DrawScripts(t, c.Clients, c.Ops, sleep, nil)
	if c.Priority {
		drawPriorities(t, c, p)
	}
	if kinds := drawable(c.Faults, p.Persistence, c.AnyRestart); len(kinds) > 0 {
		p.Nemesis = drawNemesis(t, c, kinds, p)
	}
	p.Schedule = rapid.SliceOfN(rapid.IntRange(0, 7), 0, 300).Draw(t, "schedule")
	p.ScheduleSeed = rapid.Uint64().Draw(t, "schedule_seed")
	return p
}

// drawable are the faults of faults a plan of persistence may draw: a
// restart only of servers that persist every write (see the package
// documentation), unless any restart goes.
func drawable(faults []string, persistence string, anyRestart bool) []string {
	var out []string
	for _, f := range faults {
		if f != histories.RestartBroker || persistence == PersistAlways || anyRestart {
			out = append(out, f)
		}
	}
	return out
}

// drawNemesis draws a plan's faults, of the kinds given (at least one).
func drawNemesis(t *rapid.T, c Config, kinds []string, p *Plan) []Fault {
	// Swarm testing: each plan draws the fault kinds it may use, so that
	// some plans are all partitions, some all restarts, and so on.
	kinds = rapid.SliceOfNDistinct(rapid.SampledFrom(kinds), 1, len(kinds), rapid.ID[string]).Draw(t, "fault_kinds")
	procs, ttl := p.processes(), p.TTLMs
	fault := rapid.Custom(func(t *rapid.T) Fault {
		f := Fault{Fault: rapid.SampledFrom(kinds).Draw(t, "fault")}
		client, server := aims(f.Fault)
		if client {
			f.Target = rapid.SampledFrom(procs).Draw(t, "target")
		}
		if server {
			f.Server = rapid.IntRange(1, p.Servers).Draw(t, "server")
		}
		f.At = rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(0, 3*ttl)).Draw(t, "at_ms")
		switch f.Fault {
		case histories.Partition, histories.Pause:
			f.For = rapid.IntRange(0, 4*ttl).Draw(t, "for_ms")
		case histories.RestartBroker:
			f.For = rapid.IntRange(c.MinDownMs, max(c.MinDownMs, 2*ttl)).Draw(t, "down_ms")
		case histories.ClockJump:
			f.OffsetMs = rapid.IntRange(1, 3*ttl).Draw(t, "offset_ms")
			if !c.real() && rapid.Bool().Draw(t, "behind") {
				f.OffsetMs = -f.OffsetMs
			}
		}
		return f
	})
	return rapid.SliceOfN(fault, 0, c.MaxFaults).Draw(t, "nemesis")
}

// drawPriorities draws each client's priority, and maybe a ttl of its own:
// few levels, so that equal priorities (which never steal) are common, as
// are steals; at times a ladder, each client above the last, arriving in
// turn, so that a thief is robbed while it waits for its own victim (a
// chain). A client's own ttl may be shorter than its victim's time left.
func drawPriorities(t *rapid.T, c Config, p *Plan) {
	m := MutantNamed(c.Mutant)
	ladder := len(p.Clients) > 1 && (m != nil && m.ladder || rapid.IntRange(0, 3).Draw(t, "ladder") == 0)
	for i := range p.Clients {
		pr := int64(i + 1)
		if !ladder {
			pr = int64(rapid.IntRange(0, 3).Draw(t, "priority"))
		}
		p.Priorities = append(p.Priorities, pr)
	}
	if ladder {
		// Arrivals a few ms apart: each steals while the last still waits.
		for i := range p.Clients {
			script := p.Clients[i]
			if len(script) > 0 && script[0].Op == Sleep {
				script = script[1:]
			}
			if i > 0 {
				script = append([]Step{{Op: Sleep, Ms: i * rapid.IntRange(1, 5).Draw(t, "ladder_ms")}}, script...)
			}
			p.Clients[i] = script
		}
	}
	ttls := []int{100, 300, 1000}
	if c.real() {
		// Real rounds take milliseconds, and a client's first acquire
		// dials its servers: 127 ms of a ttl of 100 ms once, on a machine
		// loaded by other work, with no fault in force. The shortest ttl
		// is five times the simulator's there.
		ttls = []int{500, 1000, 2000}
	}
	switch {
	case c.TTLMs != 0:
	case m != nil && m.ownTTLs:
		// The first client's lease outlives the others' ttls: a thief's
		// ttl shorter than its victim's time left.
		for i := range p.Clients {
			p.TTLs = append(p.TTLs, ttls[0])
			if i == 0 {
				p.TTLs[i] = ttls[2]
			}
		}
	case rapid.Bool().Draw(t, "own ttls"):
		for range p.Clients {
			p.TTLs = append(p.TTLs, rapid.SampledFrom(ttls).Draw(t, "client_ttl_ms"))
		}
	}
}
