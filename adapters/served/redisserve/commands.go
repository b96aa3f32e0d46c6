package redisserve

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockprover/lockprover/sim/redissim"
)

// Version is the redis-server the served servers say they are (INFO's
// redis_version, HELLO's version): the one redissim is held to.
const Version = "7.0.15"

func versionNum() int {
	n := 0
	for _, p := range strings.Split(Version, ".") {
		d, _ := strconv.Atoi(p)
		n = n<<8 | d
	}
	return n
}

// shape is what a server's result for args is on the wire: redissim
// gives a string where Redis sends a status (+OK, +PONG, TYPE's) or a
// double (a score), a flat array of members and scores where RESP3 pairs
// them, and nil where a BLPOP that timed out sends a null array.
func shape(args []string, v any) any {
	name := strings.ToUpper(args[0])
	switch name {
	case "SET":
		if s, ok := v.(string); ok && s == "OK" && !hasWord(args[3:], "GET") {
			return status(s)
		}
	case "PING":
		if len(args) == 1 {
			if s, ok := v.(string); ok {
				return status(s)
			}
		}
	case "TYPE":
		if s, ok := v.(string); ok {
			return status(s)
		}
	case "SCRIPT":
		if s, ok := v.(string); ok && s == "OK" {
			return status(s)
		}
	case "BLPOP":
		if v == nil {
			return nullArray{}
		}
	case "ZSCORE", "ZADD": // ZADD's is a string only with INCR
		if s, ok := v.(string); ok {
			return double(s)
		}
	case "ZRANGE", "ZRANGEBYSCORE":
		if vs, ok := v.([]any); ok && len(args) > 4 && hasWord(args[4:], "WITHSCORES") {
			out := make(scored, len(vs))
			for i, x := range vs {
				out[i] = x
				if s, ok := x.(string); ok && i%2 == 1 {
					out[i] = double(s)
				}
			}
			return out
		}
	}
	return v
}

func hasWord(ws []string, w string) bool {
	for _, x := range ws {
		if strings.EqualFold(x, w) {
			return true
		}
	}
	return false
}

// shapeTx is EXEC's answer on the wire: each command's reply shaped.
func shapeTx(tx [][]string, v any) any {
	vs, ok := v.([]any)
	if !ok || len(vs) != len(tx) {
		return v
	}
	out := make([]any, len(vs))
	for i, x := range vs {
		out[i] = shape(tx[i], x)
	}
	return out
}

// local answers what a connection answers without its server: what
// clients send on connecting, and the transaction's framing. ok is false
// for a command the server takes.
func (c *conn) local(args []string) (reply any, ok bool) {
	name := strings.ToUpper(args[0])
	switch name {
	case "HELLO":
		return c.hello(args), true
	case "CLIENT":
		return c.client(args), true
	case "SELECT":
		if len(args) != 2 {
			return arityError(name), true
		}
		n, err := strconv.Atoi(args[1])
		switch {
		case err != nil:
			return redissim.Error("ERR value is not an integer or out of range"), true
		case n != 0:
			c.p.s.Unserve(fmt.Sprintf("SELECT %d (only database 0 is served)", n))
			return redissim.Error("ERR DB index is out of range"), true
		}
		return status("OK"), true
	case "INFO":
		return c.info(), true
	case "COMMAND":
		return c.commandCmd(args), true
	case "QUIT":
		c.quit = true
		return status("OK"), true
	case "READONLY", "READWRITE":
		return redissim.Error("ERR This instance has cluster support disabled"), true
	case "AUTH":
		return redissim.Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"), true
	}
	return nil, false
}

func arityError(name string) redissim.Error {
	return redissim.Error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(name)))
}

// hello is HELLO [protover [AUTH user pass] [SETNAME name]]: the
// connection speaks RESP2 or RESP3 from then on, and gets the server's
// map (a flat array in RESP2), as Redis 7.0 answers.
func (c *conn) hello(args []string) any {
	resp := c.resp
	if len(args) >= 2 {
		ver, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			return redissim.Error("ERR Protocol version is not an integer or out of range")
		}
		if ver < 2 || ver > 3 {
			return redissim.Error("NOPROTO unsupported protocol version")
		}
		resp = int(ver)
		for i := 2; i < len(args); i++ {
			switch strings.ToUpper(args[i]) {
			case "AUTH":
				if i+2 >= len(args) {
					return redissim.Error(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", args[i]))
				}
				if args[i+1] != "default" {
					return redissim.Error("WRONGPASS invalid username-password pair or user is disabled.")
				}
				i += 2
			case "SETNAME":
				if i+1 >= len(args) {
					return redissim.Error(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", args[i]))
				}
				i++
				c.name = args[i]
			default:
				return redissim.Error(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", args[i]))
			}
		}
	}
	c.resp = resp
	return respMap{"server", "redis", "version", Version, "proto", int64(resp), "id", int64(c.id),
		"mode", "standalone", "role", "master", "modules", []any{}}
}

// client is CLIENT SETNAME, GETNAME, SETINFO, ID, INFO; any other is not
// served.
func (c *conn) client(args []string) any {
	if len(args) < 2 {
		return arityError("client")
	}
	sub := strings.ToUpper(args[1])
	switch {
	case sub == "SETNAME" && len(args) == 3:
		if strings.ContainsAny(args[2], " \n") {
			return redissim.Error("ERR Client names cannot contain spaces, newlines or special characters.")
		}
		c.name = args[2]
		return status("OK")
	case sub == "GETNAME" && len(args) == 2:
		if c.name == "" {
			return nil
		}
		return c.name
	case sub == "SETINFO" || sub == "MAINT_NOTIFICATIONS":
		// Redis 7.2 and 8 have them; 7.0 does not know them, and clients
		// ignore the refusal: answered as 7.0 answers, which is serving
		// them.
		return redissim.Error(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", args[1]))
	case sub == "ID" && len(args) == 2:
		return int64(c.id)
	case sub == "INFO" && len(args) == 2:
		return fmt.Sprintf("id=%d addr=%s laddr=%s fd=8 name=%s db=0 resp=2 cmd=client|info\n", c.id, c.nc.RemoteAddr(), c.nc.LocalAddr(), c.name)
	}
	c.p.s.Unserve("CLIENT " + sub)
	return redissim.Error(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", args[1]))
}

// info is INFO, any section: the server section, enough for a client that
// reads redis_version.
func (c *conn) info() any {
	return fmt.Sprintf("# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nos:Linux (lockprover redisserve)\r\narch_bits:64\r\nprocess_id:1\r\ntcp_port:%d\r\n",
		Version, c.port.tcpPort())
}

// commandCmd is COMMAND (the table of commands), COUNT, INFO and DOCS,
// minimally: clients that ask use it only to route keys (cluster
// clients) or for help text.
func (c *conn) commandCmd(args []string) any {
	if len(args) == 1 {
		return []any{}
	}
	switch strings.ToUpper(args[1]) {
	case "COUNT":
		return int64(0)
	case "DOCS":
		return []any{}
	case "INFO":
		out := make([]any, len(args)-2)
		return out
	}
	c.p.s.Unserve("COMMAND " + strings.ToUpper(args[1]))
	return redissim.Error(fmt.Sprintf("ERR unknown subcommand '%s'. Try COMMAND HELP.", args[1]))
}
