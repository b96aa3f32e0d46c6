package mariadb

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
)

// conn is the protocol side of one client connection and its server
// connection (fc, the fault layer's). Two goroutines read them, one per
// side, each writing what it read to the other side; they share the
// protocol state below.
type conn struct {
	p  *Proxy
	fc *faultnet.Conn

	mu sync.Mutex
	id uint32 // the server's connection id; 0 until its greeting

	smu          sync.Mutex
	phase        phase
	deprecateEOF bool              // the client set CLIENT_DEPRECATE_EOF
	pending      []*request        // commands sent whose replies are not complete, in order
	stmts        map[uint32]string // prepared statements' texts by id
	infile       bool              // the server asked for a local file: the client's packets are its contents until an empty one
}

type phase uint8

const (
	phaseGreeting phase = iota // waiting for the server's greeting
	phaseAuth                  // handshake response and authentication exchange
	phaseCommand               // commands and their replies
)

// A request is a command sent to the server that has a reply.
type request struct {
	cmd       byte
	text      string // a COM_STMT_PREPARE's statement, remembered under its id
	n         int64  // the client's statement number (AfterStatements); 0 if not a statement
	injected  bool   // Skew's SET: its reply is swallowed
	drop      bool   // DropCommitReply chose it
	unfollow  bool   // a command the proxy cannot follow: from its reply on, pass bytes unread
	reply     replyParser
	held      []byte // reply bytes read and not yet forwarded
	prepSaved bool
}

// maxHold bounds how much of a reply is held until the reply is complete;
// past it, what was read is forwarded (the client still cannot complete
// the statement before its last packet).
const maxHold = 1 << 20

func newConn(p *Proxy, fc *faultnet.Conn) *conn {
	return &conn{p: p, fc: fc, stmts: map[uint32]string{}}
}

// connID is the server's connection id, 0 until its greeting.
func (c *conn) connID() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// Serve reads both sides, each to its end, which kills the connection.
// Each side's packets are written to the other (Pipe.Deliver) once no
// partition holds, and its reader waits for that before it reads on.
func (c *conn) Serve(fc *faultnet.Conn) {
	fc.Run(func(toServer *faultnet.Pipe) {
		defer fc.Kill()
		c.fromClient(bufio.NewReaderSize(toServer, 16<<10), toServer)
	}, func(toClient *faultnet.Pipe) {
		defer fc.Kill()
		c.fromServer(bufio.NewReaderSize(toClient, 16<<10), toClient)
	})

	// Statements whose replies never came: their hooks strike now,
	// unless the proxy is closing.
	closed := c.p.fn.Closed()
	for _, r := range c.pending {
		if r.n == 0 || closed {
			continue
		}
		c.p.runHooks(r.n)
	}
}

func (c *conn) getPhase() phase {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.phase
}

func (c *conn) setPhase(ph phase) {
	c.smu.Lock()
	c.phase = ph
	c.smu.Unlock()
}

// A pktFate says what a reader does with a packet it has looked at.
type pktFate uint8

const (
	pktForward pktFate = iota // write the packet, as read, to the other side
	pktHandled                // the packet was dealt with (held, forwarded or swallowed)
	pktStop                   // the connection ends
)

// next reads a side's next packet once no partition holds; false when the
// side ends (a packet over maxPacket counts as malformed).
func (c *conn) next(r *bufio.Reader) (packet, bool) {
	if !c.fc.WaitHealed() {
		return packet{}, false
	}
	pk, err := readPacket(r)
	if err != nil {
		if errors.Is(err, errPacketSize) {
			c.p.counts.malformed.Add(1)
		}
		return pk, false
	}
	return pk, true
}

// fromClient reads the client's packets and forwards them, deciding the
// commands.
func (c *conn) fromClient(r *bufio.Reader, server *faultnet.Pipe) {
	responded := false // the client's handshake response was read
	unfollowed := false
	skewed := false // the proxy set @@timestamp on this session
	for {
		pk, ok := c.next(r)
		if !ok {
			return
		}
		if unfollowed {
			if !server.Deliver(pk.raw) {
				return
			}
			continue
		}
		fate := pktForward
		switch c.getPhase() {
		case phaseGreeting:
			// Clients wait for the greeting; pass whatever this is.
		case phaseAuth:
			if !responded {
				responded = true
				fate = c.clientResponse(pk)
			}
		case phaseCommand:
			fate = c.clientCommand(pk, server, &unfollowed, &skewed)
		}
		if fate == pktStop {
			return
		}
		if !server.Deliver(pk.raw) {
			return
		}
	}
}

// clientResponse reads the client's handshake response for its
// capabilities: whether replies will end without EOF packets. A response
// that cannot be read is refused.
func (c *conn) clientResponse(pk packet) pktFate {
	caps, ok := clientCaps(pk.payload)
	if !ok {
		c.p.counts.refused.Add(1)
		return pktStop
	}
	c.smu.Lock()
	c.deprecateEOF = caps&capDeprecateEOF != 0
	c.smu.Unlock()
	return pktForward
}

// clientCommand handles a packet of the command phase: a local file's
// contents pass; a command is counted and queued for its reply, after
// Skew's SET if Skew wants one sent first. unfollowed is set when the
// proxy cannot follow the command's reply; skewed is as for skewSet.
func (c *conn) clientCommand(pk packet, server *faultnet.Pipe, unfollowed, skewed *bool) pktFate {
	p := c.p
	c.smu.Lock()
	infile := c.infile
	if infile && len(pk.payload) == 0 {
		c.infile = false // the file's end
	}
	c.smu.Unlock()
	if infile {
		return pktForward
	}
	if len(pk.payload) == 0 {
		p.counts.malformed.Add(1)
		return pktStop
	}
	req, text, err := c.command(pk.payload)
	if err != nil {
		p.counts.malformed.Add(1)
		return pktStop
	}
	if req == nil {
		return pktForward
	}
	if req.unfollow {
		*unfollowed = true
		p.counts.unfollowed.Add(1)
	}
	if req.n > 0 && !c.injectSkew(server, text, skewed) {
		return pktStop
	}
	if req.cmd == comResetConnection {
		*skewed = false // the server resets @@timestamp
	}
	c.push(req)
	return pktForward
}

// injectSkew sends Skew's SET before the statement text, if Skew wants
// one (see skewSet), queueing a request whose reply is swallowed; false if
// the server connection is dead.
func (c *conn) injectSkew(server *faultnet.Pipe, text string, skewed *bool) bool {
	set := c.skewSet(text, skewed)
	if set == "" {
		return true
	}
	inj := &request{cmd: comQuery, injected: true, reply: replyParser{kind: replyResult}}
	c.push(inj)
	c.p.counts.injected.Add(1)
	return server.Deliver(commandPacket(comQuery, set))
}

// command reads one command of the client, counts it, and returns the
// request awaiting its reply (nil for a command without one) and, for a
// statement, its text.
func (c *conn) command(p []byte) (*request, string, error) {
	cmd := p[0]
	req := &request{cmd: cmd}
	var text, kind string
	switch cmd {
	case comQuery:
		text = string(p[1:])
		req.reply = replyParser{kind: replyResult, infile: true}
	case comStmtExecute:
		if len(p) < 10 {
			return nil, "", errors.New("short COM_STMT_EXECUTE")
		}
		c.smu.Lock()
		t, ok := c.stmts[binary.LittleEndian.Uint32(p[1:])]
		c.smu.Unlock()
		text = t
		if !ok {
			kind = KindOther
		}
		req.reply = replyParser{kind: replyResult}
		if p[5] != 0 { // a cursor: the rows come by COM_STMT_FETCH
			req.unfollow = true
		}
	case comStmtPrepare:
		req.text = string(p[1:])
		req.reply = replyParser{kind: replyPrepare}
	case comStmtClose:
		if len(p) >= 5 {
			c.smu.Lock()
			delete(c.stmts, binary.LittleEndian.Uint32(p[1:]))
			c.smu.Unlock()
		}
		req = nil
	case comStmtSendLongData, comQuit:
		req = nil
	case comFieldList:
		req.reply = replyParser{kind: replyFieldList}
	case comProcessInfo:
		req.reply = replyParser{kind: replyResult}
	case comResetConnection:
		c.smu.Lock()
		clear(c.stmts)
		c.smu.Unlock()
		req.reply = replyParser{kind: replyOne}
	case comInitDB, comCreateDB, comDropDB, comRefresh, comShutdown, comStatistics, comProcessKill,
		comDebug, comPing, comStmtReset, comSetOption:
		req.reply = replyParser{kind: replyOne}
	default:
		req.unfollow = true
	}
	if cmd == comQuery || cmd == comStmtExecute {
		if kind == "" {
			kind = Kind(text)
		}
		req.n = c.p.sent.Add(1)
		if kind == KindCommit && c.p.takeDrop() {
			req.drop = true
		}
	}
	c.p.counts.command(cmd, kind)
	return req, text, nil
}

// skewSet is the statement Skew wants sent before the client's statement
// text, or "". skewed says whether the session's @@timestamp is the
// proxy's, and is updated.
func (c *conn) skewSet(text string, skewed *bool) string {
	off := time.Duration(c.p.skew.Load())
	if off == 0 && !*skewed {
		return ""
	}
	if strings.Contains(strings.ToUpper(text), "ROW_COUNT") {
		return ""
	}
	if off == 0 {
		*skewed = false
		return "SET @@timestamp = DEFAULT"
	}
	*skewed = true
	us := time.Now().Add(off).UnixMicro()
	return fmt.Sprintf("SET @@timestamp = %d.%06d", us/1e6, us%1e6)
}

func (c *conn) push(r *request) {
	c.smu.Lock()
	r.reply.deprecateEOF = c.deprecateEOF
	c.pending = append(c.pending, r)
	c.smu.Unlock()
}

func (c *conn) head() *request {
	c.smu.Lock()
	defer c.smu.Unlock()
	if len(c.pending) == 0 {
		return nil
	}
	return c.pending[0]
}

func (c *conn) pop() {
	c.smu.Lock()
	c.pending = c.pending[1:]
	c.smu.Unlock()
}

// fromServer reads the server's packets and forwards them, deciding the
// replies.
func (c *conn) fromServer(r *bufio.Reader, client *faultnet.Pipe) {
	unfollowed := false
	for {
		pk, ok := c.next(r)
		if !ok {
			return
		}
		if unfollowed || len(pk.payload) == 0 {
			if !client.Deliver(pk.raw) {
				return
			}
			continue
		}
		fate := pktForward
		switch c.getPhase() {
		case phaseGreeting:
			fate = c.serverGreeting(pk)
		case phaseAuth:
			if pk.payload[0] == iOK {
				c.setPhase(phaseCommand)
			}
		case phaseCommand:
			fate = c.serverReply(pk, client, &unfollowed)
		}
		switch fate {
		case pktStop:
			return
		case pktHandled:
			continue
		}
		if !client.Deliver(pk.raw) {
			return
		}
	}
}

// serverGreeting reads the server's greeting for its connection id, and
// moves on to authentication; an ERR instead (too many connections...)
// just passes. The greeting is rewritten in pk.raw as rewriteGreeting
// does.
func (c *conn) serverGreeting(pk packet) pktFate {
	if pk.payload[0] == iERR { // an ERR: refused (too many connections...)
		return pktForward
	}
	g, err := rewriteGreeting(pk.raw)
	if err != nil || len(pk.raw) != 4+len(pk.payload) {
		c.p.counts.malformed.Add(1)
		return pktStop
	}
	c.mu.Lock()
	c.id = g.connID
	c.mu.Unlock()
	c.setPhase(phaseAuth)
	return pktForward
}

// serverReply feeds a packet of the command phase to the reply of the
// oldest pending request. A reply is held until it is complete (or too
// large to hold, or asking for a local file), so that its statement's
// hooks run before the client can see it; an injected SET's reply is
// swallowed. unfollowed is set at the reply of a command the proxy cannot
// follow.
func (c *conn) serverReply(pk packet, client *faultnet.Pipe, unfollowed *bool) pktFate {
	req := c.head()
	if req == nil {
		return pktForward // unsolicited: an error before the server closes the connection
	}
	if req.unfollow {
		// A command the proxy cannot follow: from its reply
		// on, everything passes unread.
		*unfollowed = true
		return pktForward
	}
	done, infile, err := req.reply.feed(pk.payload)
	if err != nil {
		c.p.counts.malformed.Add(1)
		return pktStop
	}
	if req.injected {
		if done {
			c.pop()
			if pk.payload[0] == iERR {
				c.p.counts.injectFailed.Add(1)
			}
		}
		return pktHandled
	}
	if req.reply.prepared && !req.prepSaved {
		req.prepSaved = true
		c.smu.Lock()
		c.stmts[req.reply.stmtID] = req.text
		c.smu.Unlock()
	}
	req.held = append(req.held, pk.raw...)
	switch {
	case infile:
		c.smu.Lock()
		c.infile = true
		c.smu.Unlock()
		fallthrough
	case !done && len(req.held) > maxHold:
		if !client.Deliver(req.held) {
			return pktStop
		}
		req.held = nil
		return pktHandled
	case !done:
		return pktHandled
	}
	return c.replyDone(req, client)
}

// replyDone ends req, whose reply is complete: its statement's hooks run,
// then the reply is forwarded, or lost with the connection if
// DropCommitReply chose it.
func (c *conn) replyDone(req *request, client *faultnet.Pipe) pktFate {
	c.pop()
	if req.n > 0 {
		c.p.runHooks(req.n)
	}
	if req.drop {
		c.p.counts.dropped.Add(1)
		return pktStop // the reply is lost with the connection
	}
	if !client.Deliver(req.held) {
		return pktStop
	}
	return pktHandled
}

// replyParser follows the packets of one reply to see where it ends.
type replyParser struct {
	kind         replyKind
	infile       bool // a local infile request may come (COM_QUERY)
	deprecateEOF bool
	stage        stage
	left         int // packets left in this stage
	cols         int // a prepared statement's columns

	prepared bool // a COM_STMT_PREPARE_OK was read
	stmtID   uint32
}

type replyKind uint8

const (
	replyOne       replyKind = iota // one packet, whatever it is
	replyResult                     // OK, ERR, a local infile request or result sets, possibly several
	replyPrepare                    // COM_STMT_PREPARE_OK and its definitions, or ERR
	replyFieldList                  // column definitions up to an EOF, or ERR
)

type stage uint8

const (
	stFirst          stage = iota
	stColumns              // column definitions
	stColumnsEOF           // the EOF after them, without CLIENT_DEPRECATE_EOF
	stRows                 // rows up to an EOF (or an OK with header 0xFE), or ERR
	stParams               // a prepared statement's parameter definitions
	stParamsEOF            // and their EOF
	stPrepColumns          // its column definitions
	stPrepColumnsEOF       // and their EOF
)

var errReply = errors.New("mysql proxy: a reply packet out of place")

// feed takes the next packet of the reply: done when it is the reply's
// last; infile when it asks the client for a local file (whose contents
// come next, and then the rest of the reply).
func (r *replyParser) feed(p []byte) (done, infile bool, err error) {
	switch r.kind {
	case replyOne:
		return true, false, nil
	case replyFieldList:
		return p[0] == iEOF || p[0] == iERR, false, nil
	case replyPrepare:
		done, err = r.prepare(p)
		return done, false, err
	}
	return r.result(p)
}

func (r *replyParser) result(p []byte) (done, infile bool, err error) {
	switch r.stage {
	case stFirst:
		switch p[0] {
		case iOK:
			st, ok := okStatus(p)
			if !ok {
				return false, false, errReply
			}
			return st&statusMoreResults == 0, false, nil
		case iERR:
			return true, false, nil
		case iInfile:
			if !r.infile {
				return false, false, errReply
			}
			return false, true, nil
		}
		n, _, ok := lenenc(p)
		if !ok || n == 0 {
			return false, false, errReply
		}
		r.stage, r.left = stColumns, int(n)
	case stColumns:
		if r.left--; r.left == 0 {
			r.stage = stRows
			if !r.deprecateEOF {
				r.stage = stColumnsEOF
			}
		}
	case stColumnsEOF:
		if p[0] == iERR {
			return true, false, nil
		}
		st, ok := eofStatus(p)
		if p[0] != iEOF || !ok {
			return false, false, errReply
		}
		if st&statusCursorExists != 0 {
			return true, false, nil // the rows come by COM_STMT_FETCH
		}
		r.stage = stRows
	case stRows:
		switch {
		case p[0] == iERR:
			return true, false, nil
		case p[0] == iEOF && len(p) < maxFrame:
			st, ok := eofStatus(p)
			if r.deprecateEOF {
				st, ok = okStatus(p)
			}
			if !ok {
				return false, false, errReply
			}
			if st&statusMoreResults != 0 {
				r.stage = stFirst
				return false, false, nil
			}
			return true, false, nil
		}
	}
	return false, false, nil
}

func (r *replyParser) prepare(p []byte) (bool, error) {
	switch r.stage {
	case stFirst:
		if p[0] == iERR {
			return true, nil
		}
		if p[0] != iOK || len(p) < 9 {
			return false, errReply
		}
		r.prepared = true
		r.stmtID = binary.LittleEndian.Uint32(p[1:])
		r.cols = int(binary.LittleEndian.Uint16(p[5:]))
		if params := int(binary.LittleEndian.Uint16(p[7:])); params > 0 {
			r.stage, r.left = stParams, params
			return false, nil
		}
		return r.columns(), nil
	case stParams:
		if r.left--; r.left > 0 {
			return false, nil
		}
		if !r.deprecateEOF {
			r.stage = stParamsEOF
			return false, nil
		}
		return r.columns(), nil
	case stParamsEOF:
		return r.columns(), nil
	case stPrepColumns:
		if r.left--; r.left > 0 {
			return false, nil
		}
		if !r.deprecateEOF {
			r.stage = stPrepColumnsEOF
			return false, nil
		}
		return true, nil
	case stPrepColumnsEOF:
		return true, nil
	}
	return false, errReply
}

// columns moves on to a prepared statement's column definitions, if it
// has any; true if it has none (the reply is complete).
func (r *replyParser) columns() bool {
	if r.cols == 0 {
		return true
	}
	r.stage, r.left = stPrepColumns, r.cols
	return false
}
