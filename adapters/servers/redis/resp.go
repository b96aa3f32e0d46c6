package redis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Do sends one command to the server on a connection of its own, closed
// afterwards, and returns the reply: a string (simple or bulk), an int64,
// nil (a null reply) or a []any of those; an error reply is returned as an
// error whose text is Redis's. It is for harness chores (a readiness
// check, counting keys, the clock jump), not for the lock's traffic.
func (s *Server) Do(ctx context.Context, args ...string) (any, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("redis: empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("redis: unexpected reply %q", line)
}

// Keys is the number of keys the server holds (DBSIZE), for checking that
// a run left nothing behind.
func (s *Server) Keys(ctx context.Context) (int64, error) {
	r, err := s.Do(ctx, "DBSIZE")
	if err != nil {
		return 0, err
	}
	n, ok := r.(int64)
	if !ok {
		return 0, fmt.Errorf("redis: DBSIZE answered %v", r)
	}
	return n, nil
}

// jumpScript shortens the remaining life of every key that has one by
// ARGV[1] ms, deleting those with no more than that left, and returns how
// many keys it changed. Keys without expiry are left alone.
const jumpScript = `
local d = tonumber(ARGV[1])
local n = 0
for _, k in ipairs(redis.call('KEYS', '*')) do
  local t = redis.call('PTTL', k)
  if t >= 0 then
    if t <= d then redis.call('DEL', k) else redis.call('PEXPIRE', k, t - d) end
    n = n + 1
  end
end
return n
`

// ClockJump applies to the server's keys what a jump forward of its clock
// by d (whole milliseconds, at least one) does to them, and returns how
// many keys it changed. Redis expires a key when its clock (wall-clock
// milliseconds) passes the key's absolute deadline, so a clock that jumps
// forward by d brings every deadline d closer: each key's remaining life
// (PTTL) shrinks by d, and a key with at most d left expires at once. One
// Lua script does exactly that, atomically (no command runs in between),
// from a separate connection.
//
// It stands in for moving the server's real clock, which Debian's
// redis-server does not allow (libfaketime makes it exit at start:
// "Unexpected recursive calls to clock_gettime()"). What it does not
// reproduce: a deadline set after the jump by a relative command (SET PX,
// PEXPIRE) is the same either way, but absolute ones (PEXPIREAT, SET PXAT,
// and what an append-only file replays) would be read against the moved
// clock, and TIME does not move: lockprover's locks set only relative
// deadlines, but the priority lock's scripts keep the deadlines of a
// key's chain of victims in ms of TIME (vdl), which a real jump would
// bring closer and this one does not. A jump backwards
// (lengthening lives) is not offered: the lock's scripts never depend on
// one being absent, and Kleppmann's case is the forward jump.
func (s *Server) ClockJump(ctx context.Context, d time.Duration) (int64, error) {
	ms := d.Milliseconds()
	if ms < 1 {
		return 0, fmt.Errorf("redis: clock jump of %v: must be at least 1ms forward", d)
	}
	r, err := s.Do(ctx, "EVAL", jumpScript, "0", strconv.FormatInt(ms, 10))
	if err != nil {
		return 0, fmt.Errorf("redis: clock jump: %w", err)
	}
	n, _ := r.(int64)
	return n, nil
}
