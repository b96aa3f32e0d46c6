// Package amqpserve serves the simulated RabbitMQ (sim/rabbitmqsim) on the
// wire, over AMQP 0-9-1, so that an implementation in any language, with
// its unmodified client (pika, amqplib, amqp091-go), runs on the simulator
// as lockprover's own reference does.
//
// Each process of a run gets a loopback port of its own (Process.URL), so
// that what arrives there is that process's; on a cluster, a port per
// node (Process.URLs), each connecting to its node, closed while its node
// refuses connections. The simulator still moves one
// process at a time: a process's frames are taken into the World only by
// that process's coroutine, while the runner waits on the process's answer
// (a process.Waiter), so which process's frame the broker takes next is the
// World's Decider's choice, as for the reference. What the coroutine can
// not know is whether a silent process is about to send or waits on
// something (a reply on stdin, its own timer): a process silent for a
// while (Options.Grace after it was answered, Options.Quiet after that)
// is idle, and its coroutine lets virtual time pass (Options.Idle) for the
// others. Every step of each process (a frame taken, an idle turn, the
// process's answer) is logged (Broker.Log); a replay given the log
// (Options.Script) takes the same steps in the same order, holding a frame
// that comes early, waiting a bounded time for one that is late, and
// noting where the implementation did what the log did not.
//
// Clocks: the broker's time is the World's virtual time, which moves by
// the latencies of the methods it serves and by idle turns; the clients'
// heartbeats are answered on the wire in real time, and the World, which
// models a connection's silence only where a fault (pause, partition,
// kill) makes it, never times a live client out however fast its clock
// runs. What a client notices by its own clock (a heartbeat timeout) the
// World decides in virtual time and the served broker makes true on the
// wire, by closing the socket.
package amqpserve
