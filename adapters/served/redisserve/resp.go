package redisserve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lockprover/lockprover/sim/redissim"
)

// RESP, as redis-server 7.0 reads and writes it (networking.c).

// A protoError is what redis-server refuses to read: it replies the
// error and closes the connection.
type protoError string

func (e protoError) Error() string { return "ERR Protocol error: " + string(e) }

const (
	maxInline    = 64 * 1024         // PROTO_INLINE_MAX_SIZE
	maxMultibulk = 1024 * 1024       // the longest count line
	maxBulk      = 512 * 1024 * 1024 // proto-max-bulk-len's default
)

// readCommand reads the next command: a multibulk (*N then N bulks), or
// an inline command (words on a line); an empty one (*0, a blank line) is
// skipped, as Redis skips it.
func readCommand(r *bufio.Reader) ([]string, error) {
	for {
		b, err := r.Peek(1)
		if err != nil {
			return nil, err
		}
		var args []string
		if b[0] == '*' {
			args, err = readMultibulk(r)
		} else {
			args, err = readInline(r)
		}
		if err != nil || len(args) > 0 {
			return args, err
		}
	}
}

// readLine reads a line up to CRLF (an inline command may end in LF
// alone), at most max bytes.
func readLine(r *bufio.Reader, max int, tooBig string) (string, error) {
	var sb strings.Builder
	for {
		frag, err := r.ReadSlice('\n')
		sb.Write(frag)
		if sb.Len() > max {
			return "", protoError(tooBig)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return "", err
		}
	}
	line := strings.TrimSuffix(sb.String(), "\n")
	return strings.TrimSuffix(line, "\r"), nil
}

func readMultibulk(r *bufio.Reader) ([]string, error) {
	line, err := readLine(r, maxMultibulk, "too big mbulk count string")
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(line[1:], 10, 64)
	if err != nil || n > 1024*1024 {
		return nil, protoError("invalid multibulk length")
	}
	args := make([]string, 0, max(n, 0))
	for i := int64(0); i < n; i++ {
		line, err := readLine(r, maxMultibulk, "too big bulk count string")
		if err != nil {
			return nil, err
		}
		if line == "" || line[0] != '$' {
			got := byte(0)
			if line != "" {
				got = line[0]
			}
			return nil, protoError(fmt.Sprintf("expected '$', got '%c'", got))
		}
		m, err := strconv.ParseInt(line[1:], 10, 64)
		if err != nil || m < 0 || m > maxBulk {
			return nil, protoError("invalid bulk length")
		}
		buf := make([]byte, m+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args = append(args, string(buf[:m]))
	}
	return args, nil
}

// readInline splits a line as sdssplitargs does: spaces between words,
// double quotes with escapes, single quotes.
func readInline(r *bufio.Reader) ([]string, error) {
	line, err := readLine(r, maxInline, "too big inline request")
	if err != nil {
		return nil, err
	}
	args, ok := splitArgs(line)
	if !ok {
		return nil, protoError("unbalanced quotes in request")
	}
	return args, nil
}

func splitArgs(line string) ([]string, bool) {
	var args []string
	i := 0
	for {
		for i < len(line) && strings.IndexByte(" \t\r\n\v\f", line[i]) >= 0 {
			i++
		}
		if i >= len(line) {
			return args, true
		}
		var cur strings.Builder
		switch q := line[i]; q {
		case '"', '\'':
			i++
			for {
				if i >= len(line) {
					return nil, false
				}
				c := line[i]
				if c == '\\' && q == '"' && i+1 < len(line) {
					i++
					switch line[i] {
					case 'n':
						cur.WriteByte('\n')
					case 'r':
						cur.WriteByte('\r')
					case 't':
						cur.WriteByte('\t')
					default:
						cur.WriteByte(line[i])
					}
				} else if c == '\\' && q == '\'' && i+1 < len(line) && line[i+1] == '\'' {
					i++
					cur.WriteByte('\'')
				} else if c == q {
					i++
					if i < len(line) && strings.IndexByte(" \t\r\n\v\f", line[i]) < 0 {
						return nil, false // a closing quote must be followed by a space
					}
					break
				} else {
					cur.WriteByte(c)
				}
				i++
			}
		default:
			for i < len(line) && strings.IndexByte(" \t\r\n\v\f", line[i]) < 0 {
				cur.WriteByte(line[i])
				i++
			}
		}
		args = append(args, cur.String())
	}
}

// status is a status reply (+OK), where a plain string is a bulk one.
type status string

// nullArray is RESP2's *-1, a BLPOP's answer once it timed out (RESP3's
// null).
type nullArray struct{}

// push is a message the server sends unasked (a subscription's): an
// array in RESP2, a push in RESP3.
type push []any

// double is a score (ZSCORE's, ZADD INCR's), as Redis 7.0 writes it
// ("1.5", "inf"): a bulk string in RESP2, a double in RESP3.
type double string

// scored is a range's answer WITHSCORES, members and scores in turn (the
// scores doubles): a flat array in RESP2, an array of [member, score]
// pairs in RESP3.
type scored []any

// respMap is a map reply, its keys and values in turn: a flat array in
// RESP2 (HELLO's answer).
type respMap []any

// appendReply appends v in RESP2 (resp 2) or RESP3 (resp 3): nil a null,
// int64 an integer, a string a bulk, a status a status, an error an error
// reply (its newlines made spaces, as Redis makes them), a []any an
// array, a respMap a map, a double and scored as they say.
func appendReply(b []byte, v any, resp int) []byte {
	switch v := v.(type) {
	case nil:
		if resp == 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "$-1\r\n"...)
	case nullArray:
		if resp == 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "*-1\r\n"...)
	case int64:
		return append(strconv.AppendInt(append(b, ':'), v, 10), "\r\n"...)
	case status:
		return append(append(append(b, '+'), oneLine.Replace(string(v))...), "\r\n"...)
	case string:
		b = strconv.AppendInt(append(b, '$'), int64(len(v)), 10)
		return append(append(append(b, "\r\n"...), v...), "\r\n"...)
	case redissim.Error:
		return append(append(append(b, '-'), oneLine.Replace(string(v))...), "\r\n"...)
	case error:
		return appendReply(b, redissim.Error(v.Error()), resp)
	case double:
		if resp != 3 {
			return appendReply(b, string(v), resp)
		}
		return append(append(append(b, ','), v...), "\r\n"...)
	case scored:
		if resp != 3 {
			return appendReply(b, []any(v), resp)
		}
		b = append(strconv.AppendInt(append(b, '*'), int64(len(v)/2), 10), "\r\n"...)
		for i := 0; i+1 < len(v); i += 2 {
			b = appendReply(append(b, "*2\r\n"...), v[i], resp)
			b = appendReply(b, v[i+1], resp)
		}
		return b
	case respMap:
		if resp != 3 {
			return appendReply(b, []any(v), resp)
		}
		b = append(strconv.AppendInt(append(b, '%'), int64(len(v)/2), 10), "\r\n"...)
		for _, x := range v {
			b = appendReply(b, x, resp)
		}
		return b
	case push:
		if resp != 3 {
			return appendReply(b, []any(v), resp)
		}
		b = append(strconv.AppendInt(append(b, '>'), int64(len(v)), 10), "\r\n"...)
		for _, x := range v {
			b = appendReply(b, x, resp)
		}
		return b
	case []any:
		b = append(strconv.AppendInt(append(b, '*'), int64(len(v)), 10), "\r\n"...)
		for _, x := range v {
			b = appendReply(b, x, resp)
		}
		return b
	}
	return appendReply(b, redissim.Error(fmt.Sprintf("ERR redisserve: a reply of type %T", v)), resp)
}

var oneLine = strings.NewReplacer("\r", " ", "\n", " ")
