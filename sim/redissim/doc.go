// Package redissim is N deterministic, in-memory Redis servers for the
// Redlock reference (package redlock): exactly the commands and scripts
// it sends, keys with millisecond deadlines on each server's own clock,
// virtual time and faults, behind redlock's Env (Process.Env,
// redlock.NewOn), so that the reference runs unchanged on it and a plan
// (clients, faults, a schedule) always gives the same run.
//
// A World is the servers plus the client processes that use them, on the
// scheduler of package sim/sched: each client is a coroutine that moves
// only when handed control, and each round of commands it sends (one
// command to each server at once, as the reference's goroutines send
// them) is a scheduling point. Each server's loop is a process too,
// runnable exactly when a command waits for it: so Options.Decide picks
// which server takes its next command when, and, when several clients'
// commands wait for one server, whose goes first (one client's commands
// arrive in the order sent). Two acquirers can thus split the servers'
// votes. Time is virtual: a command takes 100 µs, and when nobody can
// move the clock jumps to the next timer (a sleep, a round's timeout,
// After). The same decisions give the same trace and results, byte for
// byte (TestSameSeedSameRun): no map order reaches behaviour, and the
// reference on Process.Env starts no goroutine and reads no other clock.
//
// Modelled, as Redis 7.0 does it (held to private redis-servers by the
// differential, adapters/conform/redisconform: drawn sequences of the
// reference's commands and scripts, with sleeps, run on both and compared
// step by step; it backs `lockprover conform --kind redlock`):
//
//   - strings with deadlines: SET key value [NX|XX] [GET] [PX ms|EX s|KEEPTTL], GET, DEL,
//     EXISTS, PEXPIRE (a deadline not in the future deletes), PTTL (-2,
//     -1, or the ms left), INCR (the deadline stays), PING, DBSIZE, TYPE;
//     a key is gone to every command once its server's clock passes its
//     deadline (Redis expires lazily and actively; at the deadline itself
//     it still lives);
//   - the priority lock's types (redlock's Priority): hashes (HSET, HGET,
//     HMGET, HLEN) and lists (RPUSH, LLEN, LRANGE; an emptied list is
//     gone), with deadlines as strings have them, WRONGTYPE across types;
//     TIME (the server's clock, to the microsecond); BLPOP, which waits
//     on the server when its lists are empty (blocking.go: served by a
//     push once the pushing command, script or transaction is done, in
//     the order clients blocked; ended by its timeout on the server's
//     clock; forgotten when its client gives up, through a partition only
//     once it heals); MULTI/EXEC transactions, as go-redis's TxPipelined
//     sends them (one message, run atomically; EXECABORT when a command
//     cannot be queued); PUBLISH and subscriptions (pubsub.go: a message
//     reaches the subscriptions registered when it is published, and no
//     other);
//   - sorted sets (zset.go, zrange.go: npm redis-semaphore's Semaphore
//     and RedlockSemaphore): ZADD with NX, XX, GT, LT, CH and INCR,
//     ZCARD, ZREM, ZREMRANGEBYSCORE, ZSCORE, ZCOUNT, ZRANK, ZRANGE (by
//     rank or BYSCORE, REV, LIMIT, WITHSCORES; not BYLEX) and
//     ZRANGEBYSCORE; members ordered by score then bytes, an emptied set
//     gone; scores read as strtod reads them ("(" excludes, "-inf",
//     "+inf", Redis's refusals of a bad float) and written as "%.17g"
//     (1.5, 1, 1e+20, 0.10000000000000001, inf), -0 kept only by a set
//     Redis keeps as a skip list (over 128 members once, or a member
//     over 64 bytes);
//   - EVAL and EVALSHA of the reference's scripts (model/redlock/scripts.go:
//     acquire, raise, refresh, refreshSetNX, release, and the priority
//     lock's obtain, undo, settle, refreshPrio, releasePrio), implemented natively
//     and recognised by their exact source, then by SHA1 once a server
//     was sent the source (NOSCRIPT before, and after a restart: the env
//     falls back to EVAL as go-redis's Script.Run does); a script runs
//     atomically, an error of a command it calls is its error (what it
//     did before stays, as on Redis);
//   - errors as Redis words them (Error), wrong arguments included; a
//     command or a script the simulator does not model is an error reply
//     naming it, and makes Run fail (served on the wire, it is told to the
//     served broker instead: see below);
//   - faults: Crash and Restart of a server (Persistence None: it comes
//     back empty; Always: with every key it had applied, deadlines kept
//     on its clock; either way its blocked clients' and subscribers'
//     connections reset), Pause and Resume (SIGSTOP: commands wait; keys
//     expire meanwhile; blocked pops time out once it resumes), ClockJump
//     (a server's clock moves, deadlines and blocked pops' timeouts come
//     closer), Partition and Heal of a client from a server (bytes wait
//     both ways; a held command still runs on heal), DropReply (the
//     command runs, its reply is lost and the connection resets), Kill
//     of a client (its commands in flight still run; its blocked pops and
//     subscriptions end with its connections).
//
// The priority lock runs on Process.PriorityEnv (redlock.NewPriorityOn):
// its watchers and its waits for acknowledgements are tasks of the
// client, processes of the World named after it ("c1/3") that share its
// network faults and die with it (killed, or when its program returns);
// its channels and timers are signals and waits in virtual time. So it
// too starts no goroutine and reads no other clock, and a run of it
// depends only on the decisions (TestPrioritySameSeedSameRun).
//
// Served on the wire (wire.go, for adapters/served/redisserve): a command
// given as words is sent without waiting (Process.Send, SendTx), its reply
// handed back when it comes, and Wait lets the sender wait in virtual time
// for one; World.Serve gives the servers a Lua interpreter, on which any
// script the servers do not know natively runs (EVAL, EVALSHA, SCRIPT
// LOAD, EXISTS, FLUSH), atomically, its redis.call run against the same
// keyspace in the same step, and makes what they do not model an error
// reply told to the served broker rather than a failure of Run;
// Process.Subscribe is a connection's SUBSCRIBE, its messages handed to
// callbacks; World.Up
// says whether a server takes connections; Queueable is what MULTI
// answers a command it queues.
//
// Not modelled: other commands and options (SET's EXAT and PXAT;
// absolute deadlines PEXPIREAT and PXAT; DBSIZE counts only live keys,
// where Redis counts those past their deadline its active expiry has not
// collected yet; other list, hash and sorted-set commands;
// BLPOP with a timeout of 0 is modelled, but never sent), other data
// types, replication and failover, Redis's 100 ms cron (a BLPOP's own
// timeout ends exactly on time; Redis answers up to 100 ms later, which
// the reference allows for by giving the server a second more than it
// waits), latency beyond the fixed cost above, connections as such (a
// dial, a pool: a command to a server that is down is refused at once, a
// pooled connection never fails after a restart, as go-redis's pool
// behaves, and a client has as many connections as it needs, so a
// blocked BLPOP holds up none of its other commands; a subscription's
// close and a killed client's end reach its server at once, but for a
// blocked BLPOP through a partition, which a dead client's partition
// never heals), the end of a subscription on the server while a dropped
// reply's connection resets (it is dropped once the client has read the
// error), and the context's deadline (real time: a round's timeout is the
// Env's argument, in virtual time, and a context is looked at only before
// a round or a wait).
package redissim
