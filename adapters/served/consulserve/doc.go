// Package consulserve serves the simulated Consul agent (sim/consulsim)
// on the wire, over HTTP/1.1, so that an unmodified client of Consul's
// HTTP API in any language, and the lock recipes built on it (consul/api's
// Semaphore and Lock among them), run on the simulator as the recipe's
// own reference does.
//
// It is redisserve's design for Consul. Each process of the World gets a
// loopback port of its own (Process.Addr), which its implementation is
// told as the agent's address. The simulator still moves one process at a
// time: the requests that arrive at a process's port are taken into the
// World only by that process's coroutine, one at a time, each a step of
// the World (consulsim's Process.Send), while the runner waits on the
// process's answer (a process.Waiter); so whose request the agent takes
// next is the World's Decider's choice. A connection has one request in
// the World at a time, as HTTP/1.1 has. A blocking query (?index) waits
// in the World's virtual time, and its answer is written when the World
// gives it, whatever the process is doing then; a process silent for a
// while is idle and lets virtual time pass for the others (Options.Idle).
// Every step is logged (Broker.Log); a replay given the log
// (Options.Script) takes the same steps in the same order, holding a
// request that comes early, waiting a bounded time for one that is late,
// and noting where the client did what the log did not. A blocking
// query's ?wait, which a client may compute from its own clock (consul/api's
// SemaphoreTryOnce does), is matched whatever its value, and the logged
// one is what the World waits.
//
// What is served (api.go): sessions (PUT /v1/session/create, renew,
// destroy; GET /v1/session/info), keys (GET /v1/kv with ?recurse, ?index
// and ?wait, ?consistent and ?stale; PUT with ?cas, ?acquire, ?release,
// ?flags; DELETE with ?cas and ?recurse), with Consul's status codes,
// bodies and headers (X-Consul-Index, X-Consul-KnownLeader,
// X-Consul-LastContact), its words for the errors it makes of bad
// requests, and JSON as a -dev agent writes it. Anything else is
// answered as Consul answers a path it does not know (404, "Invalid URL
// path: not a recognized HTTP API endpoint") and named (Broker.Unserved):
// such a run says nothing of the implementation.
//
// Faults are the World's and reach the wire as on a real agent: an agent
// that is down refuses at the port (its listener closes, and opens again
// at the same address once it is up) and its crash resets the
// connections made before; a lost reply resets the connection; a
// force-close resets the process's connections. A crash or force-close
// struck by another process (the nemesis) reaches the wire when it
// strikes if the runner calls Broker.Flush, else at the struck process's
// next step. Requests a client sends together are taken at one virtual
// time and in one order (Options.Gather, Settle).
package consulserve
