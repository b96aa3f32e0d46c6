package redisserve_test

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/served/redisserve"
	"github.com/lockprover/lockprover/sim/redissim"
)

// zscript is a script that reads a score and a range WITHSCORES.
const zscript = "return {redis.call('zscore', KEYS[1], 'a'), redis.call('zrange', KEYS[1], 0, -1, 'withscores')}"

// Scores on the wire, byte for byte as Redis 7.0.15 sent them (its
// replies to these commands, taken from the machine's redis-server): bulk
// strings in RESP2 and in a script, doubles in RESP3, where a range
// WITHSCORES is an array of [member, score] pairs.
func TestScoresOnTheWire(t *testing.T) {
	t.Parallel()
	cmds := [][]string{
		{"ZADD", "z", "1.5", "a", "1e20", "b", "-inf", "c"}, {"ZSCORE", "z", "b"},
		{"ZRANGE", "z", "0", "-1", "WITHSCORES"}, {"ZADD", "z", "INCR", "1", "a"},
		{"EVAL", zscript, "1", "z"}, {"HELLO", "3"}, {"ZSCORE", "z", "c"},
		{"ZRANGE", "z", "0", "-1", "WITHSCORES"}, {"ZADD", "z", "INCR", "1", "a"},
		{"ZSCORE", "z", "none"}, {"EVAL", zscript, "1", "z"},
	}
	resp2 := ":3\r\n$5\r\n1e+20\r\n*6\r\n$1\r\nc\r\n$4\r\n-inf\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$5\r\n1e+20\r\n" +
		"$3\r\n2.5\r\n*2\r\n$3\r\n2.5\r\n*6\r\n$1\r\nc\r\n$4\r\n-inf\r\n$1\r\na\r\n$3\r\n2.5\r\n$1\r\nb\r\n$5\r\n1e+20\r\n"
	resp3 := ",-inf\r\n*3\r\n*2\r\n$1\r\nc\r\n,-inf\r\n*2\r\n$1\r\na\r\n,2.5\r\n*2\r\n$1\r\nb\r\n,1e+20\r\n,3.5\r\n_\r\n" +
		"*2\r\n$3\r\n3.5\r\n*6\r\n$1\r\nc\r\n$4\r\n-inf\r\n$1\r\na\r\n$3\r\n3.5\r\n$1\r\nb\r\n$5\r\n1e+20\r\n"
	var got []byte
	_, _, errs := serve(t, redissim.Options{}, redisserve.Options{}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		nc, err := net.Dial("tcp", sp.Addrs()[0])
		if err != nil {
			return err
		}
		defer nc.Close()
		var b strings.Builder
		for _, c := range cmds {
			fmt.Fprintf(&b, "*%d\r\n", len(c))
			for _, a := range c {
				fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		nc.Write([]byte(b.String()))
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		for !bytes.HasSuffix(got, []byte(resp3)) {
			n, err := nc.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				return err
			}
		}
		return nil
	}})
	check(errs, t)
	if !bytes.HasPrefix(got, []byte(resp2)) || !bytes.HasSuffix(got, []byte(resp3)) {
		t.Errorf("the replies:\n%q\nwant RESP2's\n%q\nthen HELLO's, then RESP3's\n%q", got, resp2, resp3)
	}
}
