package mariadb

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Counts is what passed through a Proxy, over all its connections so far.
// Efficiency properties ("an acquire is N statements") are judged from the
// difference of two snapshots (Sub).
//
// Commands and statements are counted as the client sends them, when the
// proxy reads them, so one held by a partition is already counted, and one
// read just before a Kill may be counted without having reached the
// server. The statements Skew injects are counted in Injected only.
type Counts struct {
	// Statements counts the client's statements by Kind: every COM_QUERY
	// by its text, every COM_STMT_EXECUTE by the text of the statement it
	// executes (the proxy remembers each COM_STMT_PREPARE's text under the
	// statement id the server's reply gave it; an id it never saw prepared
	// is KindOther). Preparing, closing or resetting a statement, pings and
	// the like are not statements. Kinds never seen are absent.
	Statements map[string]int
	// Commands counts every command the client sent by its protocol name
	// ("COM_QUERY", "COM_STMT_PREPARE", "COM_STMT_EXECUTE",
	// "COM_STMT_CLOSE", "COM_PING", "COM_QUIT", ...), statements included.
	Commands map[string]int
	// Connections accepted from the client (a reconnect is a second one).
	Connections int
	// Dropped is how many COMMIT replies DropCommitReply dropped (each
	// killed its connection).
	Dropped int
	// Injected is how many SET @@timestamp statements Skew sent on its
	// own, and InjectFailed how many of them the server refused (the
	// statement that followed then ran on the session's previous clock).
	Injected, InjectFailed int
	// Unfollowed is how many connections the proxy stopped reading after a
	// command it cannot follow (COM_CHANGE_USER, COM_STMT_FETCH and
	// cursors, replication, bulk execute, unknown commands): their bytes
	// still pass, Kill and Partition still apply, but their later
	// statements are not counted, hooked, dropped or skewed.
	Unfollowed int
	// Refused is how many connections were closed because the client
	// asked for what the proxy cannot read (TLS, compression: see
	// Proxy), and Malformed how many because a packet made no sense.
	Refused, Malformed int
}

// Total is the number of statements, of every kind.
func (c Counts) Total() int {
	n := 0
	for _, k := range c.Statements {
		n += k
	}
	return n
}

// Sub returns what c counted beyond an earlier snapshot: what happened
// between the two. Names whose difference is zero are left out.
func (c Counts) Sub(earlier Counts) Counts {
	diff := func(now, then map[string]int) map[string]int {
		d := maps.Clone(now)
		if d == nil {
			d = map[string]int{}
		}
		for name, k := range then {
			d[name] -= k
		}
		maps.DeleteFunc(d, func(_ string, k int) bool { return k == 0 })
		return d
	}
	return Counts{
		Statements:   diff(c.Statements, earlier.Statements),
		Commands:     diff(c.Commands, earlier.Commands),
		Connections:  c.Connections - earlier.Connections,
		Dropped:      c.Dropped - earlier.Dropped,
		Injected:     c.Injected - earlier.Injected,
		InjectFailed: c.InjectFailed - earlier.InjectFailed,
		Unfollowed:   c.Unfollowed - earlier.Unfollowed,
		Refused:      c.Refused - earlier.Refused,
		Malformed:    c.Malformed - earlier.Malformed,
	}
}

// counters are a Proxy's live counts.
type counters struct {
	mu         sync.Mutex
	statements map[string]int
	commands   map[byte]int

	connections, dropped, injected, injectFailed atomic.Int64
	unfollowed, refused, malformed               atomic.Int64
}

func newCounters() *counters {
	return &counters{statements: map[string]int{}, commands: map[byte]int{}}
}

// command counts a command and, if it is a statement, its kind ("" if
// not).
func (c *counters) command(cmd byte, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commands[cmd]++
	if kind != "" {
		c.statements[kind]++
	}
}

func (c *counters) snapshot() Counts {
	c.mu.Lock()
	s := Counts{Statements: maps.Clone(c.statements), Commands: map[string]int{}}
	for cmd, n := range c.commands {
		s.Commands[commandName(cmd)] = n
	}
	c.mu.Unlock()
	s.Connections = int(c.connections.Load())
	s.Dropped = int(c.dropped.Load())
	s.Injected = int(c.injected.Load())
	s.InjectFailed = int(c.injectFailed.Load())
	s.Unfollowed = int(c.unfollowed.Load())
	s.Refused = int(c.refused.Load())
	s.Malformed = int(c.malformed.Load())
	return s
}
