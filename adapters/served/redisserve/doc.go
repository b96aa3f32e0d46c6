// Package redisserve serves the simulated Redis servers (sim/redissim) on
// the wire, over RESP2 and RESP3, so that an unmodified client in any
// language, and the lock libraries built on it, run on the simulator as
// the Redlock reference does (go-redis and redis-py's own Lock are held
// to it here; the differential holds it to redis-server 7.0 through
// go-redis).
//
// It is amqpserve's design for Redis. Each process of the World gets a
// loopback port per simulated server (Process.Addrs: N servers, N ports),
// and a connection through port i talks to server i. The simulator still
// moves one process at a time: what arrives on a process's sockets is
// taken into the World only by that process's coroutine, one command at
// a time, each a step of the World (redissim's Process.Send), while the
// runner waits on the process's answer (a process.Waiter); so whose
// command a server takes next is the World's Decider's choice. A
// connection has one command in the World at a time, as Redis reads a
// client's next command only once it answered the last (a BLPOP that
// blocks holds its connection, not the others). A process silent for a
// while is idle, and lets virtual time pass for the others
// (Options.Idle); one whose commands wait on their servers lets virtual
// time pass until a reply comes. Every step is logged (Broker.Log); a
// replay given the log (Options.Script) takes the same steps in the same
// order, holding a command that comes early, waiting a bounded time for
// one that is late, and noting where the client did what the log did
// not.
//
// What is served: every command redissim models, with Redis's replies
// (a status where Redis sends one, a null array for a BLPOP that timed
// out, a score a double in RESP3 and a range WITHSCORES its [member,
// score] pairs there); EVAL, EVALSHA and SCRIPT of any Lua script, run by a Lua 5.1
// interpreter (gopher-lua) inside the server's step, with Redis's
// conversions between Lua and RESP (lua.go); MULTI/EXEC, queued on the
// connection and sent to the server as one transaction; SUBSCRIBE and
// UNSUBSCRIBE (messages as arrays in RESP2, pushes in RESP3); and what clients
// send on connecting (HELLO 2 or 3: the connection speaks that protocol;
// CLIENT SETNAME, GETNAME, ID, INFO, and SETINFO refused as 7.0 does;
// SELECT 0; INFO; COMMAND), answered by the connection without a step of
// the server. A command the simulator does not serve gets Redis's own
// refusal and is named (Broker.Unserved); bad RESP gets Redis's protocol
// error, the connection closes, and it is named (Broker.Refused).
//
// Time: a process silent for a while lets virtual time pass (idle
// turns), and where the World's clock jumps (a plan's sleep) it takes no
// real time, unless Options.Speedup bounds it: then a jump of d lasts
// d/Speedup for the processes, whose own clocks see it pass.
//
// Faults are the World's and reach the wire as on a real server: a
// server that is down refuses at its port (its listeners close, and open
// again at the same address once it is up); its crash closes its
// connections with a reset; a paused server leaves commands unanswered; a
// lost reply resets the connection.
package redisserve
