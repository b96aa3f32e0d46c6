package run

import (
	"errors"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/histories"
)

// A Target is where a run's plans run (docs/glossary.md): a family's
// simulator or a real server, as every family's runner sees it. It is the
// one contract every runner's places keep, simulated and real alike: the
// clock the history is recorded on, and the faults it strikes and ends,
// every one of a family's faults on its places (a restart and a clock
// fault too: what they need beyond their aim, the Aim carries). A
// family's own interface for its targets, its place (amqprun's, the lease
// runners', consulsemrun's: each named place, with simPlace and the real
// ones implementing it), embeds it and adds only what is the family's
// own: how a process runs, how a client opens, how the server settles.
type Target interface {
	// Now is the clock the history is recorded on, in nanoseconds
	// (virtual time on a simulator; since the run began on a real
	// server).
	Now() int64
	// Strike strikes a.Fault, a name of the fault table (Faults), at what
	// a aims at. An error says it did not strike; a target that cannot
	// tell says nothing.
	Strike(a Aim) error
	// End ends a.Fault, a fault that lasts until it is ended (a pause,
	// a partition), at what a aims at: it resumes or heals (Fault.EndedBy).
	End(a Aim) error
}

// An Aim is one fault aimed: what a Target's Strike and End are told.
// Which fields a fault reads is the fault's (Fault.Strikes) and the
// target's own: a client's process, a server among several, a node of a
// cluster or the links between its nodes.
type Aim struct {
	// Fault is the fault's name (Faults).
	Fault string
	// Process is the process struck, as the target names it: a client's
	// current incarnation ("c1", "c1#2"), a node of a cluster, or the
	// directions cut between nodes ("n1>n2 n2>n1"); "" for the server.
	Process string
	// Client is the plan's client the process runs for ("c1"), where the
	// target tells the two apart; "" where it does not.
	Client string
	// Server is the server struck, from 0, where the target has several
	// (Redlock's N).
	Server int
	// Offset is a clock fault's: how far a clock-jump moves the clock,
	// or the offset from true time a clock-skew sets it to.
	Offset time.Duration
	// Down is a restart's downtime: how long the server stays down.
	Down time.Duration
	// Wait, if set, is the striker's sleep (its process's, in virtual
	// time on a simulator): the striker waits until a restart is over,
	// the server up again, and the place sleeps out the downtime with
	// Wait where it does not wait for a real server instead. Nil: the
	// place strikes the restart and returns at once.
	Wait func(time.Duration)
	// Struck, if set, is how the striker records the fault as begun
	// (Runner.Began): the place calls it at the moment the fault is
	// under way, which each place says (a simulated server once it is
	// down; a real one as it begins to stop, or, where a process's
	// completion could otherwise be recorded first, once it is down,
	// with the runner's lock held). A fault whose Strike never calls it
	// did not begin.
	Struck func()
}

// ErrStruckNothing is Strike's error for a fault that struck nothing,
// and so is not recorded: a force-close of a client with no connection
// open, or while the server is down for a restart, which ended them.
var ErrStruckNothing = errors.New("run: the fault struck nothing")

// CannotStrike is a Target's error for a fault it does not strike (or,
// from End, one it does not end): a plan's faults are refused before the
// run (Refuse), so a run that meets it has a runner's mistake.
func CannotStrike(a Aim) error {
	return fmt.Errorf("%s: the target does not strike it (aimed at %q, server %d)", a.Fault, a.Process, a.Server)
}

// Apply has t strike fault at process, as a history names both (a
// runner that records before it strikes), or, for an end (resume, heal),
// end the fault it ends.
func Apply(t Target, fault, process string) error {
	if struck := Ended(fault); struck != "" {
		return t.End(Aim{Fault: struck, Process: process})
	}
	return t.Strike(Aim{Fault: fault, Process: process})
}

// Ended is the fault end ends (pause for resume, partition for heal), ""
// when end ends none: histories.EndOf turned round.
func Ended(end string) string {
	switch end {
	case histories.Resume:
		return histories.Pause
	case histories.Heal:
		return histories.Partition
	}
	return ""
}

// StrikeProcess strikes a, a kill, pause or partition of the process it
// names, with a target's own methods for each: what the places of a
// family that strikes its clients' processes alike share.
func StrikeProcess(a Aim, kill, pause, partition func(process string)) error {
	switch a.Fault {
	case histories.Kill:
		kill(a.Process)
	case histories.Pause:
		pause(a.Process)
	case histories.Partition:
		partition(a.Process)
	default:
		return CannotStrike(a)
	}
	return nil
}

// EndProcess ends a, a pause or a partition of the process it names, with
// a target's own resume and heal.
func EndProcess(a Aim, resume, heal func(process string)) error {
	switch a.Fault {
	case histories.Pause:
		resume(a.Process)
	case histories.Partition:
		heal(a.Process)
	default:
		return CannotStrike(a)
	}
	return nil
}

// A Spawner starts an implementation's processes ahead of a run, side by
// side, and, once the run is over, ends those no client took and frees
// those it may give another run (process.Launcher's Spawn and Drain): a
// runner on a simulator, whose clock stands still while processes start,
// calls them where the implementation has them.
type Spawner interface {
	Spawn(run string, n int)
	Drain(run string)
}
