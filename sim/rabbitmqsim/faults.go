package rabbitmqsim

import (
	"fmt"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// Faults name their target: a process, or a connection by the name it was
// dialled with (broker.Config.Name). Kill and Pause act on processes only.
// Called from a running process, a fault is a scheduled step; outside Run it
// applies at once.

// Kill crashes a process as a host would: it stops at once, its in-flight
// call never returns, and its sockets go silent, so the broker releases its
// exclusive queues only when heartbeats time out (never if they are off).
func (w *World) Kill(name string) error {
	return w.fault(name, true, func(p *process, _ []*conn) {
		if p == w.sched.Running() {
			panic("sim: a process cannot kill itself")
		}
		w.sched.Kill(&p.proc, func() {
			p.deadline.Cancel()
			if p.dialWait != nil {
				p.dialWait.timer.Cancel()
				p.dialWait = nil
			}
			for _, c := range p.conns {
				c.outbox = nil
				c.finPending = false
				w.sense(c)
			}
			if w.trace != nil {
				w.tracef("%s killed", p.name)
			}
		})
	})
}

// Pause freezes a process (SIGSTOP): it neither runs nor sends heartbeats;
// the broker may time it out meanwhile.
func (w *World) Pause(name string) error {
	return w.fault(name, true, func(p *process, _ []*conn) {
		p.proc.Pause()
		for _, c := range p.conns {
			w.sense(c)
		}
		if w.trace != nil {
			w.tracef("%s paused", p.name)
		}
	})
}

// Resume wakes a paused process (SIGCONT). A read deadline that passed while
// it slept fires at once, as Go's timers do.
func (w *World) Resume(name string) error {
	return w.fault(name, true, func(p *process, _ []*conn) {
		if !p.proc.Paused() {
			return
		}
		p.proc.Resume()
		if w.trace != nil {
			w.tracef("%s resumed", p.name)
		}
		for _, c := range p.conns {
			expired := c.expired
			c.expired = false
			if expired && c.clientErr == nil {
				w.clientDetect(c)
			}
			w.sense(c)
			if c.clientErr == nil && !c.held() {
				if c.pendingClose != nil {
					w.clientClose(c, c.pendingClose)
				} else if !c.brokerOpen {
					w.clientClose(c, errReset)
				}
			}
		}
	})
}

// Partition stops every byte between the target and the broker, both ways,
// with sockets left open; new connections hang until Heal.
func (w *World) Partition(name string) error {
	return w.fault(name, false, func(p *process, cs []*conn) {
		if p != nil {
			p.partitioned = true
		}
		for _, c := range cs {
			if !c.down && (c.clientErr == nil || c.brokerOpen) {
				c.down = true
				w.sense(c)
			}
		}
		if w.trace != nil {
			w.tracef("%s partitioned", name)
		}
	})
}

// Heal ends a partition: held bytes are delivered, in order.
func (w *World) Heal(name string) error {
	return w.fault(name, false, func(p *process, cs []*conn) {
		if w.trace != nil {
			w.tracef("%s healed", name)
		}
		for _, c := range cs {
			if c.down {
				w.heal(c)
			}
		}
		if p == nil {
			return
		}
		p.partitioned = false
		w.endDialWait(p)
	})
}

// endDialWait completes p's dial held by a partition or a paused node,
// once neither holds it.
func (w *World) endDialWait(p *process) {
	dw := p.dialWait
	if dw == nil {
		return
	}
	n := w.nodeOf(p, dw.cfg)
	if p.partitioned || n != nil && n.frozen {
		return
	}
	p.dialWait = nil
	dw.timer.Cancel()
	if !w.up || n != nil && !n.serving() {
		p.proc.Deliver(reply{err: fmt.Errorf("dial: %w", broker.ErrRefused)})
	} else {
		p.proc.Deliver(reply{conn: w.open(p, dw.cfg)})
	}
}

// ForceClose closes the target's connections from the broker with 320
// CONNECTION_FORCED, as rabbitmqctl close_connection does: exclusive queues
// go at once.
func (w *World) ForceClose(name string) error {
	return w.fault(name, false, func(_ *process, cs []*conn) {
		for _, c := range cs {
			if c.brokerOpen {
				w.brokerClose(c, "forced")
				w.notifyClose(c, &broker.Error{Code: broker.ConnectionForced, Reason: "CONNECTION_FORCED - Closed via lockprover", Server: true, Connection: true})
			}
		}
	})
}

// CloseSocket closes the target's sockets with no AMQP close, as the kernel
// does for a SIGKILLed process: the client sees its connections fail and the
// broker releases them a few milliseconds later.
func (w *World) CloseSocket(name string) error {
	return w.fault(name, false, func(_ *process, cs []*conn) {
		for _, c := range cs {
			if c.clientErr == nil {
				w.clientClose(c, &broker.Error{Code: broker.FrameError, Reason: "use of closed network connection", Connection: true})
				w.fin(c)
			}
		}
	})
}

// DropReply arms a fault on a process: the broker applies its next method
// but the reply never arrives; the connection then dies (the client sees a
// reset, the broker a closed socket).
func (w *World) DropReply(name string) error {
	return w.fault(name, true, func(p *process, _ []*conn) { p.dropNext = true })
}

// RestartBroker stops the broker and starts it again after the World's
// restart downtime. From a process it returns once the broker is back;
// outside Run the restart completes when Advance passes the downtime.
func (w *World) RestartBroker() error {
	if w.cl != nil {
		return errNoBroker
	}
	if caller := w.sched.Running(); caller != nil {
		return caller.call(&request{kind: reqFault, deadline: noDeadline, fault: func() (reply, bool) {
			w.stop()
			w.sched.After(w.downtime, func() {
				w.start()
				caller.proc.Deliver(reply{})
			})
			return reply{}, true
		}}).err
	}
	w.stop()
	w.sched.After(w.downtime, w.start)
	return nil
}

// Up reports whether the broker is up: not stopped, nor restarting.
// On a cluster: no node is being started or restarted.
func (w *World) Up() bool { return w.up && (w.cl == nil || !w.cl.booting()) }

// StopBroker stops the broker (rabbitmqctl stop_app): every connection is
// closed with 320, transient and exclusive queues vanish, durable queues
// keep their persistent messages, and dials are refused until StartBroker.
func (w *World) StopBroker() error { return w.brokerFault(w.stop) }

// StartBroker starts a stopped broker (rabbitmqctl start_app).
func (w *World) StartBroker() error { return w.brokerFault(w.start) }

// errNoBroker is the error of a fault on the one broker of a World that
// is a cluster: a fault there names a node.
var errNoBroker = fmt.Errorf("sim: on a cluster, a restart-broker restarts a node: name it")

func (w *World) brokerFault(f func()) error {
	if w.cl != nil {
		return errNoBroker
	}
	if caller := w.sched.Running(); caller != nil {
		return caller.call(&request{kind: reqFault, deadline: noDeadline, fault: func() (reply, bool) {
			f()
			return reply{}, false
		}}).err
	}
	f()
	return nil
}

func (w *World) stop() {
	if !w.up {
		return
	}
	if w.trace != nil {
		w.tracef("broker stopping")
	}
	for _, p := range w.procs {
		for _, c := range p.conns {
			if c.brokerOpen {
				w.brokerClose(c, "shutdown")
				w.notifyClose(c, &broker.Error{Code: broker.ConnectionForced, Reason: "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'", Server: true, Connection: true})
			}
		}
	}
	w.restartQueues()
	w.up = false
}

func (w *World) start() {
	if !w.up {
		w.up = true
		if w.trace != nil {
			w.tracef("broker up")
		}
	}
}

// Strike applies the fault named fault (kill, pause, resume, partition,
// heal, force-close, close-socket, drop-reply, restart-broker, stop-broker,
// start-broker) to target, as the fault methods do; restarts and broker
// stops and starts take no target.
func (w *World) Strike(fault, target string) error {
	if w.cl != nil {
		if handled, err := w.strikeCluster(fault, target); handled {
			return err
		}
	}
	switch fault {
	case "kill":
		return w.Kill(target)
	case "pause":
		return w.Pause(target)
	case "resume":
		return w.Resume(target)
	case "partition":
		return w.Partition(target)
	case "heal":
		return w.Heal(target)
	case "force-close":
		return w.ForceClose(target)
	case "close-socket":
		return w.CloseSocket(target)
	case "drop-reply":
		return w.DropReply(target)
	case "restart-broker":
		return w.RestartBroker()
	case "stop-broker":
		return w.StopBroker()
	case "start-broker":
		return w.StartBroker()
	}
	return fmt.Errorf("sim: no fault named %q", fault)
}

// Advance moves the virtual clock on by d outside Run, firing the timers
// that fall due.
func (w *World) Advance(d time.Duration) {
	if w.sched.InRun() {
		panic("sim: Advance during Run; processes use Sleep")
	}
	w.sched.Advance(d)
}

// fault applies f to the target, as a scheduled step when a process calls
// it. procOnly faults refuse connection targets.
func (w *World) fault(name string, procOnly bool, f func(*process, []*conn)) error {
	apply := func() error {
		p, cs := w.target(name)
		switch {
		case p == nil && cs == nil:
			return fmt.Errorf("sim: no running process or open connection named %q", name)
		case p == nil && procOnly:
			return fmt.Errorf("sim: %q is a connection; this fault acts on processes", name)
		case p != nil && procOnly && p.proc.Ended():
			return fmt.Errorf("sim: process %q has ended", name)
		}
		f(p, cs)
		return nil
	}
	if caller := w.sched.Running(); caller != nil {
		return caller.call(&request{kind: reqFault, deadline: noDeadline, fault: func() (reply, bool) {
			return reply{err: apply()}, false
		}}).err
	}
	return apply()
}

// target resolves a fault's target: a live process and its connections, or
// the connections dialled with that name.
func (w *World) target(name string) (*process, []*conn) {
	if p := w.byName[name]; p != nil {
		return p, p.conns
	}
	var cs []*conn
	for _, p := range w.procs {
		for _, c := range p.conns {
			if c.name == name {
				cs = append(cs, c)
			}
		}
	}
	return nil, cs
}
