package amqpproxy

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// A ServerEvent is something the broker did, or a side of a connection
// did, that the proxy saw and lockprover did not cause through the proxy:
// the evidence a verdict on a real broker attributes a lost hold by
// (RabbitMQ closing a connection itself, a client's socket closing with an
// exclusive queue.declare in flight, which RabbitMQ before 4.2.3 can answer
// by deleting another connection's queue of the same name).
type ServerEvent struct {
	At   time.Time
	What string // ServerClose, ServerEOF, ClientEnd or DeclareInFlight
	// Code and Text are a ServerClose's reply code and text
	// (320 "CONNECTION_FORCED - ...").
	Code int
	Text string
	// Queue is a DeclareInFlight's queue, and Exclusive whether it was
	// declared exclusive; Killed says the proxy itself ended that
	// connection (a fault lockprover struck), else the client's socket
	// closed on its own.
	Queue     string
	Exclusive bool
	Killed    bool
	// Local is the proxy's address on the connection to the broker:
	// the broker names the connection "LOCAL -> BROKER", in its log too
	// (rabbitmq.LogReasons). Empty if it never reached the broker.
	Local string
	// Client is the client's address on its connection to the proxy, as
	// the client's own errors name their local end ("read tcp
	// CLIENT->PROXY: i/o timeout"): which connection an error of a
	// process's was about, where the process has had several.
	Client string
	// Silence is, for a ClientEnd, how long the broker had sent nothing
	// on the connection when the client's socket ended (since the
	// connection began, if it never sent anything); ClientSilence how long
	// the client had sent nothing (or, if it sent a byte just before it
	// ended, how long it had before that); Stalled the longest time this
	// process (the proxy's own) did not run, of the stalls that ended less
	// than a second before the end (nothing passed through the proxy then,
	// and a proxy that does not run notices the client's end only as it
	// runs again: a stall long before the end did not cause it).
	Silence, ClientSilence, Stalled time.Duration
}

// What a ServerEvent reports.
const (
	// ServerClose: the broker sent connection.close on its own (the client
	// had not asked to close).
	ServerClose = "server-close"
	// ServerEOF: the broker closed its socket first, with no
	// connection.close, and lockprover had not killed the connection (a
	// missed heartbeat, a broker going down).
	ServerEOF = "server-eof"
	// ClientEnd: the client closed its socket first, with no
	// connection.close, and lockprover had not killed the connection: a
	// client library gives up a connection on which it has heard nothing
	// past its heartbeats (amqp091-go after three), because the broker
	// was silent or because its own process did not run (a loaded
	// machine: it sent nothing either). Silence and ClientSilence say how
	// long each side had been silent.
	ClientEnd = "client-end"
	// DeclareInFlight: the connection ended while a queue.declare of it had
	// no reply yet.
	DeclareInFlight = "declare-in-flight"
)

// String says what happened, for a verdict.
func (e ServerEvent) String() string {
	switch e.What {
	case ServerClose:
		return fmt.Sprintf("the broker closed the connection: %d %s", e.Code, e.Text)
	case ServerEOF:
		return "the broker closed the connection's socket without a connection.close"
	case ClientEnd:
		said := fmt.Sprintf("the client closed the connection's socket without a connection.close, %v after the broker's last byte on it and %v after its own", e.Silence.Round(time.Millisecond), e.ClientSilence.Round(time.Millisecond))
		if e.Stalled > 0 {
			said += fmt.Sprintf(", after lockprover's own process did not run for %v", e.Stalled.Round(time.Millisecond))
		}
		return said
	}
	excl, how := "a", "its socket closed"
	if e.Exclusive {
		excl = "an exclusive"
	}
	if e.Killed {
		how = "lockprover killed it"
	}
	return fmt.Sprintf("the connection ended (%s) with %s queue.declare of %s in flight", how, excl, e.Queue)
}

// ServerEvents lists what the proxy saw the broker (or a connection's end)
// do, in the order seen.
func (p *Proxy) ServerEvents() []ServerEvent {
	p.evMu.Lock()
	defer p.evMu.Unlock()
	return slices.Clone(p.events)
}

func (p *Proxy) record(e ServerEvent) {
	p.evMu.Lock()
	p.events = append(p.events, e)
	p.evMu.Unlock()
}

// Trace (faultnet.Tracer's) lists, in the order seen, each connection's
// opening and how it ended (which side first, after what silences, with
// what in flight): what a reader of a counterexample needs to tell the
// broker's doing from the client's and from a fault's, beyond the events
// ServerEvents judges by.

// ended reports how one connection ended, once both its directions have:
// a close the broker began, the broker's socket ending first with no
// close, and every queue.declare still waiting for its reply.
func (p *Proxy) ended(s *session, killed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	first := map[int]string{toBroker: "the client's side", toClient: "the broker's side", -1: "neither side"}[s.firstEnded]
	how := ""
	switch {
	case s.clientClose:
		how = ", the client having asked to close"
	case s.brokerClose != nil:
		how = fmt.Sprintf(", the broker having sent connection.close %d %q", s.brokerClose.Code, s.brokerClose.Text)
	}
	for _, ch := range sortedChannels(s.chans) {
		for _, pd := range s.chans[ch].pending {
			if pd.m.id == queueDeclareID {
				how += fmt.Sprintf("; a queue.declare of %s (exclusive: %v) in flight", pd.queue, pd.exclusive)
			}
		}
	}
	p.Note("connection %s ended (killed by lockprover: %v): %s first, at %s%s; the broker silent %v and the client %v then; the proxy's longest stall in the second before %v",
		s.local, killed, first, s.endedAt.Format("15:04:05.000"), how, s.endedAt.Sub(time.Unix(0, s.heard.Load())).Round(time.Millisecond),
		s.clientSilence(s.endedAt).Round(time.Millisecond), stalledBefore(s.endedAt, time.Second).Round(time.Millisecond))
	if !s.reported {
		p.reportBrokerEnd(s, killed)
	}
	if s.firstEnded == toBroker && !killed && !s.clientClose && s.brokerClose == nil {
		heard := time.Unix(0, s.heard.Load())
		p.record(ServerEvent{At: s.endedAt, What: ClientEnd, Silence: s.endedAt.Sub(heard), ClientSilence: s.clientSilence(s.endedAt),
			Stalled: stalledBefore(s.endedAt, time.Second), Local: s.local, Client: s.client})
	}
	for _, ch := range sortedChannels(s.chans) {
		for _, pd := range s.chans[ch].pending {
			if pd.m.id == queueDeclareID {
				p.record(ServerEvent{At: now, What: DeclareInFlight, Queue: pd.queue, Exclusive: pd.exclusive, Killed: killed, Local: s.local})
			}
		}
	}
}

// brokerEnded reports, as soon as the broker's side of a connection has
// ended, how it did (a close the broker began, or its socket ending first
// with no close), unless lockprover killed the connection: the client's
// side may stay open long after (a paused process, or one that never
// closes a dead socket), and what the broker did must be known when the
// run ends, not only once both sides have.
func (p *Proxy) brokerEnded(s *session, killed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.reported && s.firstEnded == toClient && !killed {
		p.reportBrokerEnd(s, killed)
	}
}

// reportBrokerEnd records how the broker ended s, if it did; s.mu held.
func (p *Proxy) reportBrokerEnd(s *session, killed bool) {
	switch {
	case s.brokerClose != nil:
		e := *s.brokerClose
		e.Local = s.local
		p.record(e)
		s.reported = true
	case s.firstEnded == toClient && !killed && !s.clientClose:
		p.record(ServerEvent{At: s.endedAt, What: ServerEOF, Local: s.local})
		s.reported = true
	}
}

func sortedChannels(m map[uint16]*chanState) []uint16 {
	chs := make([]uint16, 0, len(m))
	for ch := range m {
		chs = append(chs, ch)
	}
	slices.Sort(chs)
	return chs
}

// queueDeclareID is queue.declare's id.
var queueDeclareID = mid(50, 10)

// declared reads a queue.declare's arguments (reserved short, queue name,
// then the bits passive, durable, exclusive, auto-delete, no-wait).
func declared(args []byte) (queue string, exclusive bool) {
	if len(args) < 3 {
		return "", false
	}
	n := int(args[2])
	if len(args) < 3+n+1 {
		return "", false
	}
	return string(args[3 : 3+n]), args[3+n]&(1<<2) != 0
}

// closed reads a connection.close's reply code and text.
func closed(args []byte) (code int, text string) {
	if len(args) < 3 {
		return 0, ""
	}
	code = int(binary.BigEndian.Uint16(args))
	n := int(args[2])
	if len(args) < 3+n {
		return code, ""
	}
	return code, string(args[3 : 3+n])
}
