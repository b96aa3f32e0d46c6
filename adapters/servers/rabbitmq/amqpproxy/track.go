package amqpproxy

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// session is the protocol state of one proxied connection that DropReply
// needs: per channel, the requests still waiting for their reply. Both
// directions of the connection update it.
type session struct {
	mu    sync.Mutex
	chans map[uint16]*chanState
	marks int // requests chosen by DropReply still waiting, over all channels

	// What ServerEvents reports of the connection: the client asked to
	// close it; the broker began a close; which direction's source ended
	// first (-1: none yet), and when.
	clientClose bool
	brokerClose *ServerEvent
	firstEnded  int
	endedAt     time.Time
	local       string // the proxy's address on the connection to the broker
	client      string // the client's address on its connection to the proxy
	// reported: the broker's end of the connection has been reported
	// already, when its socket ended (see Proxy.brokerEnded).
	reported bool
	// heard and said are when the broker and the client last sent a byte
	// on the connection (when the connection began, before they have), in
	// Unix nanoseconds; gapEnd and gapLen the client's last silence of
	// half a second or more that its bytes ended (when they came, and how
	// long it had been), in nanoseconds.
	heard, said    atomic.Int64
	gapEnd, gapLen atomic.Int64
}

type chanState struct {
	pending   []pending // synchronous requests in the order sent; the broker answers them in that order
	confirm   bool      // confirm.select was sent: publishes are numbered from 1
	published uint64    // publishes since confirm.select: the delivery tag of the last one
	markedTag uint64    // delivery tag of the publish whose confirm is to be dropped (0: none)
	marks     int       // chosen requests waiting on this channel
}

type pending struct {
	m         *methodInfo
	marked    bool   // chosen by DropReply: its reply is dropped
	queue     string // a queue.declare's queue
	exclusive bool   // a queue.declare's exclusive bit
}

func newSession() *session {
	s := &session{chans: map[uint16]*chanState{}, firstEnded: -1}
	now := time.Now().UnixNano()
	s.heard.Store(now)
	s.said.Store(now)
	return s
}

// lastByte notes that direction dir's source sent a byte at now (Unix
// nanoseconds).
func (s *session) lastByte(dir int, now int64) {
	if dir == toClient {
		s.heard.Store(now)
		return
	}
	if gap := now - s.said.Swap(now); gap >= int64(500*time.Millisecond) {
		s.gapEnd.Store(now)
		s.gapLen.Store(gap)
	}
}

// clientSilence is how long the client had been silent when its source
// ended at end: since its last byte, or its last long silence if that
// ended less than its own length before (a process a loaded machine did
// not run may, when it runs again, send a heartbeat just before it finds
// its read deadline passed and closes).
func (s *session) clientSilence(end time.Time) time.Duration {
	silent := end.Sub(time.Unix(0, s.said.Load()))
	gap, gapEnd := time.Duration(s.gapLen.Load()), time.Unix(0, s.gapEnd.Load())
	if end.Sub(gapEnd) <= gap {
		silent = max(silent, gap)
	}
	return silent
}

// sourceEnded notes that direction dir's source ended (its reader got an
// error), if it is the first to.
func (s *session) sourceEnded(dir int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstEnded < 0 {
		s.firstEnded, s.endedAt = dir, time.Now()
	}
}

// verdict is what happens to a frame from the broker.
type verdict uint8

const (
	pass verdict = iota
	drop         // the chosen reply: drop it and everything after, kill the connection
	hold         // a basic.return that may belong to the chosen publish: hold it until its confirm shows
)

// fromClient records a method the client sends.
func (s *session) fromClient(ch uint16, id methodID, m *methodInfo, args []byte, take func(methodID) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.chans[ch]
	if cs == nil || id == channelOpen {
		if cs != nil {
			s.marks -= cs.marks
		}
		cs = &chanState{}
		s.chans[ch] = cs
	}
	switch {
	case id == basicPublish:
		// Only a publish on a confirm channel has a reply to drop.
		if cs.confirm {
			cs.published++
			if cs.markedTag == 0 && take(id) {
				cs.markedTag = cs.published
				cs.marks++
				s.marks++
			}
		}
	case id == channelCloseOk:
		// The client acknowledges the broker's channel.close: the channel is gone.
		s.marks -= cs.marks
		delete(s.chans, ch)
	case id == connectionClose:
		s.clientClose = true
	case m != nil && m.replies != nil && !isNoWait(m, args):
		p := pending{m: m, marked: take(id)}
		if id == queueDeclareID {
			p.queue, p.exclusive = declared(args)
		}
		if p.marked {
			cs.marks++
			s.marks++
		}
		cs.pending = append(cs.pending, p)
	}
	if id == confirmSelect {
		cs.confirm = true
	}
}

// fromBroker decides a method the broker sends.
func (s *session) fromBroker(ch uint16, id methodID, args []byte) verdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.chans[ch]
	switch id {
	case connectionClose:
		if !s.clientClose && s.brokerClose == nil {
			code, text := closed(args)
			s.brokerClose = &ServerEvent{At: time.Now(), What: ServerClose, Code: code, Text: text}
		}
		// Closes every channel: it answers every waiting request.
		if s.marks > 0 {
			return drop
		}
		return pass
	case channelClose:
		// A channel exception answers the channel's waiting requests
		// (the failing one, and the publishes whose confirms will
		// never come).
		if cs == nil {
			return pass
		}
		if cs.marks > 0 {
			return drop
		}
		cs.pending = nil
		return pass
	case basicAck, basicNack:
		if cs != nil && cs.markedTag != 0 && confirms(args, cs.markedTag) {
			return drop
		}
		return pass
	case basicReturn:
		if cs != nil && cs.markedTag != 0 {
			return hold
		}
		return pass
	}
	if cs == nil || len(cs.pending) == 0 || !slices.Contains(cs.pending[0].m.replies, id) {
		return pass
	}
	head := cs.pending[0]
	cs.pending = slices.Delete(cs.pending, 0, 1)
	if head.marked {
		return drop
	}
	if id == channelCloseOk {
		delete(s.chans, ch)
	}
	return pass
}

// confirms reports whether a basic.ack or basic.nack (args: delivery-tag,
// then the bit octet whose bit 0 is "multiple") covers the delivery tag.
func confirms(args []byte, tag uint64) bool {
	if len(args) < 9 {
		return false
	}
	t := binary.BigEndian.Uint64(args)
	multiple := args[8]&1 != 0
	return t == tag || multiple && (t == 0 || t > tag)
}

// maxHold bounds how much the proxy holds after a basic.return while it
// waits for the confirm that tells whose return it is. Past it, the return
// is let through and only the confirm can be dropped.
const maxHold = 16 << 20

// stream is one direction of a proxied connection: the bytes read and not
// yet forwarded, the parser, and the frames' fate.
type stream struct {
	dir   int // toBroker or toClient
	sess  *session
	count *counters
	take  func(methodID) bool // takes the DropReply arm for a request of that method
	sent  func()              // counts a method from the client (AfterMethods); may be nil
	p     parser

	buf     []byte // bytes read and not yet forwarded: buf[:n]
	n       int
	scanned int // buf[:scanned] is decided; the rest is the start of an undecided frame
	base    int // offset in buf of the slice being scanned

	holdFrom int // offset in buf where held frames start; -1 when nothing is held
	holdCh   uint16
	held     []tally // counts of the held frames, applied when they are let through

	visitFn func(int, frame) bool
}

func newStream(dir int, sess *session, c *counters, take func(methodID) bool, buf []byte) *stream {
	st := &stream{dir: dir, sess: sess, count: c, take: take, buf: buf, holdFrom: -1}
	st.p.wantHeader = dir == toBroker
	st.visitFn = st.visit
	return st
}

// process decides the bytes read since the last call. It returns how many
// leading bytes of buf may be forwarded now and whether the connection must
// then be killed (a reply was dropped: the bytes from it on are never
// forwarded). A framing error means the stream is not AMQP 0-9-1.
func (st *stream) process() (release int, kill bool, err error) {
	st.base = st.scanned
	n, stopped, err := st.p.scan(st.buf[st.scanned:st.n], st.visitFn)
	st.scanned += n
	switch {
	case err != nil:
		return 0, false, err
	case stopped:
		if st.holdFrom >= 0 {
			return st.holdFrom, true, nil
		}
		return st.scanned, true, nil
	case st.holdFrom >= 0 && st.n-st.holdFrom > maxHold:
		st.letHeldGo()
	case st.holdFrom >= 0:
		return st.holdFrom, false, nil
	}
	return st.scanned, false, nil
}

// consumed forgets the first k bytes of buf, which were written or now
// belong to the writer, carrying what is left into next (buf itself, if it
// was written).
func (st *stream) consumed(k int, next []byte) {
	rest := st.n - k
	if rest > len(next) {
		next = make([]byte, max(2*rest, len(next)))
	}
	copy(next, st.buf[k:st.n])
	st.buf, st.n = next, rest
	st.scanned -= k
	if st.holdFrom >= 0 {
		st.holdFrom -= k
	}
}

func (st *stream) visit(off int, f frame) bool {
	switch f.typ {
	case frameHeartbeat:
		st.tally(tally{heartbeat: true})
		return true
	case frameMethod:
	default:
		return true
	}
	id := methodID(binary.BigEndian.Uint32(f.payload))
	idx, m := lookup(id)
	t := tally{index: idx, id: id}
	args := f.payload[4:]
	if st.dir == toBroker {
		st.sess.fromClient(f.channel, id, m, args, st.take)
		st.tally(t)
		if st.sent != nil {
			st.sent()
		}
		return true
	}
	switch st.sess.fromBroker(f.channel, id, args) {
	case drop:
		st.count.dropped.Add(1)
		return false
	case hold:
		if st.holdFrom < 0 {
			st.holdFrom, st.holdCh = st.base+off, f.channel
		}
	case pass:
		if st.holdFrom >= 0 && f.channel == st.holdCh && (id == basicAck || id == basicNack) {
			// The confirm after the return is not the chosen
			// publish's: the return was someone else's.
			st.tally(t)
			st.letHeldGo()
			return true
		}
	}
	st.tally(t)
	return true
}

func (st *stream) tally(t tally) {
	if st.holdFrom >= 0 {
		st.held = append(st.held, t)
		return
	}
	st.count.add(st.dir, t)
}

func (st *stream) letHeldGo() {
	st.holdFrom = -1
	for _, t := range st.held {
		st.count.add(st.dir, t)
	}
	st.held = st.held[:0]
}
