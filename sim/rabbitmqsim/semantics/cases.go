package semantics

import (
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

var (
	none      = broker.DeclareOptions{}
	excl      = broker.DeclareOptions{Exclusive: true}
	durable   = broker.DeclareOptions{Durable: true}
	mandatory = broker.Publishing{Mandatory: true}
)

func args(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func with(o broker.DeclareOptions, f func(*broker.DeclareOptions)) broker.DeclareOptions {
	f(&o)
	return o
}

// exclusive queue X held by connection A, declared on A's first channel
var heldByA = Step{On: "A", Do: Declare("X", excl), Want: "ok"}

// Cases are the rows of broker-semantics.md (RabbitMQ 3.10.8, amqp091-go
// v1.16.0). IDs are the document's row numbers.
var Cases = []Case{
	{ID: "1.1", Title: "exclusive declare of a queue another connection holds", Steps: []Step{
		heldByA,
		{On: "B", Do: Declare("X", excl), Want: "405 channel"},
		{On: "B", Do: Passive("X", none), Want: "504 channel"},
		{On: "B.2", Do: Passive("Y", none), Want: "404 channel"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=0 consumers=0"},
	}},
	{ID: "1.2", Title: "another channel of the owner connection redeclares exclusively", Steps: []Step{
		heldByA,
		{On: "A.2", Do: Declare("X", excl), Want: "ok"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=0 consumers=0"},
	}},
	{ID: "1.3", Title: "durable is dropped on exclusive declares", Steps: []Step{
		heldByA,
		{On: "A.2", Do: Declare("X", with(excl, func(o *broker.DeclareOptions) { o.Durable = true })), Want: "ok"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=0 consumers=0"},
	}},
	{ID: "1.3b", Title: "the owner still gets 406 for other inequivalent fields", Steps: []Step{
		heldByA,
		{On: "A", Do: Declare("X", with(excl, func(o *broker.DeclareOptions) { o.AutoDelete = true })), Want: "406 channel"},
		{On: "A.2", Do: Declare("X", with(excl, func(o *broker.DeclareOptions) { o.Args = args("x-max-length", 0) })), Want: "406 channel"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=0 consumers=0"},
	}},
	{ID: "1.4/1.5", Title: "405 comes before 406 for another connection", Steps: []Step{
		heldByA,
		{On: "B", Do: Declare("X", with(excl, func(o *broker.DeclareOptions) { o.Durable = true })), Want: "405 channel"},
		{On: "B.2", Do: Declare("X", with(excl, func(o *broker.DeclareOptions) { o.Args = args("x-max-length", 0) })), Want: "405 channel"},
	}},
	{ID: "2.1", Title: "non-exclusive declare of another connection's exclusive queue", Steps: []Step{
		heldByA,
		{On: "B", Do: Declare("X", none), Want: "405 channel"},
	}},
	{ID: "2.2", Title: "the owner's non-exclusive declare of its own exclusive queue", Steps: []Step{
		heldByA,
		{On: "A.2", Do: Declare("X", none), Want: "405 channel"},
	}},
	{ID: "2.4/2.5/2.6", Title: "exclusive declare of a durable shared queue, by anyone", Steps: []Step{
		{On: "A", Do: Declare("Y", durable), Want: "ok"},
		{On: "B", Do: Declare("Y", excl), Want: "405 channel"},
		{On: "A.2", Do: Declare("Y", excl), Want: "405 channel"},
		{On: "B.2", Do: Declare("Y", durable), Want: "ok"},
		{Do: Inspect("Y"), Want: "exists durable messages=0 consumers=0"},
		{On: "A.3", Do: Delete("Y", broker.DeleteOptions{}), Want: "ok n=0"},
	}},
	{ID: "3.1", Title: "passive declare of a missing queue", Steps: []Step{
		{On: "A", Do: Passive("M", none), Want: "404 channel"},
		{On: "A", Do: Passive("M", none), Want: "504 channel"},
		{Do: Inspect("M"), Want: "gone"},
	}},
	{ID: "3.2/3.7", Title: "passive declare of another connection's exclusive queue", Steps: []Step{
		heldByA,
		{On: "B", Do: Passive("X", none), Want: "405 channel"},
		{On: "B.2", Do: Passive("X", excl), Want: "405 channel"},
	}},
	{ID: "3.3/3.4", Title: "passive declare of the owner's own exclusive queue", Steps: []Step{
		heldByA,
		{On: "A", Do: Passive("X", none), Want: "ok"},
		{On: "A.2", Do: Passive("X", none), Want: "ok"},
	}},
	{ID: "3.5/3.6", Title: "passive declare ignores every field but the name", Steps: []Step{
		{On: "A", Do: Declare("Y", durable), Want: "ok"},
		{On: "B", Do: Passive("Y", broker.DeclareOptions{AutoDelete: true, Args: args("x-max-length", 5)}), Want: "ok"},
		{On: "B", Do: Passive("Y", excl), Want: "ok"},
		{On: "A", Do: Delete("Y", broker.DeleteOptions{}), Want: "ok n=0"},
	}},
	{ID: "4.1", Title: "mandatory publish to a missing queue: return, then ack", Steps: []Step{
		{On: "A", Do: Publish("M", mandatory), Want: "return+ack"},
		{Do: Inspect("M"), Want: "gone"},
	}},
	{ID: "4.2", Title: "publishing into another connection's exclusive queue is routed", Steps: []Step{
		heldByA,
		{On: "B", Do: Publish("X", mandatory), Want: "ack"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=1 consumers=0"},
	}},
	{ID: "4.3", Title: "x-max-length 0 with drop-head: ack, message dropped", Steps: []Step{
		{On: "A", Do: Declare("Q", broker.DeclareOptions{Exclusive: true, Args: args("x-max-length", 0)}), Want: "ok"},
		{On: "B", Do: Publish("Q", mandatory), Want: "ack"},
		{Do: Inspect("Q"), Want: "exists exclusive=A messages=0 consumers=0"},
	}},
	{ID: "4.4/4.4b/4.5/4.6", Title: "reject-publish turns the ack into a nack, mandatory or not", Steps: []Step{
		{On: "A", Do: Declare("R", broker.DeclareOptions{Exclusive: true, Args: args("x-max-length", 0, "x-overflow", "reject-publish")}), Want: "ok"},
		{On: "A", Do: Publish("R", mandatory), Want: "nack"},
		{On: "A", Do: Publish("R", broker.Publishing{}), Want: "nack"},
		{On: "B", Do: Publish("R", mandatory), Want: "nack"},
		{On: "A", Do: Declare("D", broker.DeclareOptions{Exclusive: true, Args: args("x-max-length", 0, "x-overflow", "reject-publish-dlx")}), Want: "ok"},
		{On: "A", Do: Publish("D", mandatory), Want: "nack"},
		{Do: Inspect("R"), Want: "exists exclusive=A messages=0 consumers=0"},
	}},
	{ID: "4.7/4.8", Title: "mandatory publish to a durable queue, transient and persistent", Steps: []Step{
		{On: "A", Do: Declare("Y", durable), Want: "ok"},
		{On: "A", Do: Publish("Y", mandatory), Want: "ack"},
		{On: "A", Do: Publish("Y", broker.Publishing{Mandatory: true, Persistent: true}), Want: "ack"},
		{Do: Inspect("Y"), Want: "exists durable messages=2 consumers=0"},
		{On: "A", Do: Delete("Y", broker.DeleteOptions{}), Want: "ok n=2"},
	}},
	{ID: "4.9", Title: "non-mandatory publish to a missing queue: ack only", Steps: []Step{
		{On: "A", Do: Publish("M", broker.Publishing{}), Want: "ack"},
	}},
	{ID: "4.10", Title: "confirms stay attributed to their publish: missing, routed, missing, rejected", Steps: []Step{
		heldByA,
		{On: "A", Do: Declare("R", broker.DeclareOptions{Exclusive: true, Args: args("x-max-length", 0, "x-overflow", "reject-publish")}), Want: "ok"},
		{On: "A", Do: Publish("M", mandatory), Want: "return+ack"},
		{On: "A", Do: Publish("X", mandatory), Want: "ack"},
		{On: "A", Do: Publish("M2", mandatory), Want: "return+ack"},
		{On: "A", Do: Publish("R", mandatory), Want: "nack"},
	}},
	{ID: "4.11", Title: "publish to the owner's exclusive queue from another channel", Steps: []Step{
		heldByA,
		{On: "A.2", Do: Publish("X", mandatory), Want: "ack"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=1 consumers=0"},
	}},
	{ID: "4.12", Title: "publish to a missing exchange closes the channel", Steps: []Step{
		{On: "A", Do: Publish("M", broker.Publishing{Exchange: "lockprover-missing-exchange", Mandatory: true}), Want: "404 channel"},
		{On: "A", Do: Publish("M", mandatory), Want: "504 channel"},
	}},
	{ID: "4.13", Title: "immediate=true closes the connection with 540", Steps: []Step{
		heldByA,
		{On: "A.2", Do: Publish("X", broker.Publishing{Mandatory: true, Immediate: true}), Want: "540 connection"},
		{Do: Inspect("X"), Want: "gone"},
		{On: "A", Do: Passive("X", none), Want: "504 connection"},
	}},
	{ID: "5.1", Title: "deleting a missing queue succeeds", Steps: []Step{
		{On: "A", Do: Delete("M", broker.DeleteOptions{}), Want: "ok n=0"},
		{On: "A", Do: Delete("M", broker.DeleteOptions{IfUnused: true, IfEmpty: true}), Want: "ok n=0"},
		{On: "A", Do: Publish("M", mandatory), Want: "return+ack"},
	}},
	{ID: "5.2", Title: "delete of another connection's exclusive queue: 405 before if-unused/if-empty", Steps: []Step{
		heldByA,
		{On: "B", Do: Delete("X", broker.DeleteOptions{}), Want: "405 channel"},
		{On: "B.2", Do: Delete("X", broker.DeleteOptions{IfUnused: true, IfEmpty: true}), Want: "405 channel"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=0 consumers=0"},
	}},
	{ID: "5.5", Title: "delete if-unused with a consumer present", Steps: []Step{
		{On: "A", Do: Declare("Y", excl), Want: "ok"},
		{On: "A", Do: Consume("Y", false), Want: "ok"},
		{On: "A.2", Do: Delete("Y", broker.DeleteOptions{IfUnused: true}), Want: "406 channel"},
		{Do: Inspect("Y"), Want: "exists exclusive=A messages=0 consumers=1"},
	}},
	{ID: "5.8", Title: "delete if-empty with a ready message", Steps: []Step{
		{On: "A", Do: Declare("Y", excl), Want: "ok"},
		{On: "A", Do: Publish("Y", mandatory), Want: "ack"},
		{On: "A.2", Do: Delete("Y", broker.DeleteOptions{IfEmpty: true}), Want: "406 channel"},
		{Do: Inspect("Y"), Want: "exists exclusive=A messages=1 consumers=0"},
	}},
	{ID: "5.6", Title: "if-empty counts ready messages only", Steps: []Step{
		{On: "A", Do: Declare("Y", excl), Want: "ok"},
		{On: "A", Do: Publish("Y", mandatory), Want: "ack"},
		{On: "A.2", Do: Get("Y"), Want: "ok"},
		{On: "A.3", Do: Delete("Y", broker.DeleteOptions{IfEmpty: true}), Want: "ok n=0"},
		{Do: Inspect("Y"), Want: "gone"},
	}},
	{ID: "5.9", Title: "the owner deletes its exclusive queue from another channel", Steps: []Step{
		heldByA,
		{On: "A", Do: Publish("X", mandatory), Want: "ack"},
		{On: "A.2", Do: Delete("X", broker.DeleteOptions{}), Want: "ok n=1"},
		{Do: Inspect("X"), Want: "gone"},
	}},
	{ID: "12.14", Title: "deleting a consumed queue cancels the consumer; its channel stays open", Steps: []Step{
		{On: "A", Do: Declare("Y", none), Want: "ok"},
		{On: "A", Do: Consume("Y", false), Want: "ok"},
		{On: "B", Do: Delete("Y", broker.DeleteOptions{}), Want: "ok n=0"},
		{On: "A", Do: Passive("Y", none), Want: "404 channel"},
		{Do: Inspect("Y"), Want: "gone"},
	}},
	{ID: "6.1", Title: "closing the declaring channel does not release an exclusive queue", Steps: []Step{
		heldByA,
		{On: "A", Do: CloseChannel, Want: "ok"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=0 consumers=0"},
		{On: "B", Do: Declare("X", excl), Want: "405 channel"},
		{On: "A.2", Do: Passive("X", none), Want: "ok"},
		{On: "A.2", Do: Delete("X", broker.DeleteOptions{}), Want: "ok n=0"},
	}},
	{ID: "6.5", Title: "a channel error on the declaring channel does not release it", Steps: []Step{
		heldByA,
		{On: "A", Do: Passive("M", none), Want: "404 channel"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=0 consumers=0"},
	}},
	{ID: "6.8", Title: "connection.close releases exclusive queues before close-ok", Steps: []Step{
		heldByA,
		{On: "A", Do: CloseConn, Want: "ok"},
		{On: "B", Do: Declare("X", excl), Want: "ok"},
		{On: "C", Do: Passive("X", none), Want: "405 channel"},
	}},
	{ID: "7a", Title: "a socket closed with no AMQP close releases a few milliseconds later", Steps: []Step{
		heldByA,
		{On: "B", Do: Dial, Want: "ok"},
		{On: "A", Do: Mark, Want: "ok"},
		{On: "A", Do: CloseSocket, Want: "ok"},
		// A probe, not a declare: a declare that won would hold X and the
		// wait for it to go would never end.
		{On: "B", Do: Passive("X", none), Want: "405 channel|404 channel"},
		{Do: AwaitGone("X"), Want: "gone", Within: [2]time.Duration{0, 100 * time.Millisecond}},
		{On: "A", Do: Passive("X", none), Want: "501 connection|504 connection"},
	}},
	partitionCase("7b T=1s", time.Second, false),
	partitionCase("7b T=2s", 2*time.Second, false),
	partitionCase("7b T=5s", 5*time.Second, true),
	partitionCase("7b T=10s", 10*time.Second, true),
	{ID: "7b T=60s", Title: "heartbeat 0 proposed against the broker's 60 s negotiates 60 s", SimOnly: true, Steps: []Step{
		{On: "A", Do: Heartbeat(0), Want: "ok"},
		heldByA,
		{On: "A", Do: Mark, Want: "ok"},
		{On: "A", Do: Partition, Want: "ok"},
		{On: "A", Do: Passive("X", none), Want: "501 connection", Within: [2]time.Duration{60 * time.Second, 90 * time.Second}},
		{Do: AwaitGone("X"), Want: "gone", Within: [2]time.Duration{90 * time.Second, 180 * time.Second}},
	}},
	{ID: "7b T=0", Title: "heartbeats off on both sides: a partitioned holder keeps its queue until its socket closes", SimOnly: true, ServerHeartbeat: -1, Steps: []Step{
		{On: "A", Do: Heartbeat(0), Want: "ok"},
		heldByA,
		{On: "A", Do: Partition, Want: "ok"},
		{Do: Wait(200 * time.Second), Want: "ok"},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=0 consumers=0"},
		{On: "A", Do: Heal, Want: "ok"},
		{On: "A", Do: Mark, Want: "ok"},
		{On: "A", Do: CloseSocket, Want: "ok"},
		{Do: AwaitGone("X"), Want: "gone", Within: [2]time.Duration{0, 40 * time.Millisecond}},
	}},
	{ID: "8", Title: "broker restart: 320 to every connection; durable queues and persistent messages survive", SimOnly: true, Steps: []Step{
		{On: "A", Do: Declare("Y", durable), Want: "ok"},
		{On: "A", Do: Publish("Y", mandatory), Want: "ack"},
		{On: "A", Do: Publish("Y", broker.Publishing{Mandatory: true, Persistent: true}), Want: "ack"},
		heldByA,
		{On: "A", Do: Declare("X2", broker.DeclareOptions{Exclusive: true, Durable: true}), Want: "ok"},
		{On: "A", Do: Declare("T", none), Want: "ok"},
		{On: "A", Do: Declare("D", broker.DeclareOptions{Durable: true, AutoDelete: true}), Want: "ok"},
		{On: "B", Do: Consume("D", false), Want: "ok"},
		{Do: Stop, Want: "ok"},
		{On: "A", Do: ConnError, Want: "320 connection"},
		{On: "B", Do: ConnError, Want: "320 connection"},
		{On: "C", Do: Dial, Want: "refused"},
		{Do: Start, Want: "ok"},
		{On: "A", Do: Redial, Want: "ok"},
		{Do: Inspect("Y"), Want: "exists durable messages=1 consumers=0"},
		{Do: Inspect("X"), Want: "gone"},
		{Do: Inspect("X2"), Want: "gone"},
		{Do: Inspect("T"), Want: "gone"},
		{Do: Inspect("D"), Want: "gone"},
		{On: "A", Do: Delete("Y", broker.DeleteOptions{}), Want: "ok n=1"},
	}},
	{ID: "9.2/9.3/9.4", Title: "redeclaring a durable A queue with other flags or arguments", Steps: []Step{
		{On: "A", Do: Declare("Y", durable), Want: "ok"},
		{On: "A", Do: Declare("Y", none), Want: "406 channel"},
		{On: "A.2", Do: Declare("Y", broker.DeclareOptions{Durable: true, AutoDelete: true}), Want: "406 channel"},
		{On: "A.3", Do: Declare("Y", broker.DeclareOptions{Durable: true, Args: args("x-max-length", 0)}), Want: "406 channel"},
		{On: "A.4", Do: Delete("Y", broker.DeleteOptions{}), Want: "ok n=0"},
	}},
	{ID: "9.5/9.6/9.9", Title: "classic equals absent, unknown arguments are ignored, numbers compare by value", Steps: []Step{
		{On: "A", Do: Declare("Y", broker.DeclareOptions{Durable: true, Args: args("x-max-length", int32(0))}), Want: "ok"},
		{On: "A", Do: Declare("Y", broker.DeclareOptions{Durable: true, Args: args("x-max-length", int32(0), "x-queue-type", "classic")}), Want: "ok"},
		{On: "A", Do: Declare("Y", broker.DeclareOptions{Durable: true, Args: args("x-max-length", int32(0), "x-foo", "bar")}), Want: "ok"},
		{On: "A", Do: Declare("Y", broker.DeclareOptions{Durable: true, Args: args("x-max-length", int64(0))}), Want: "ok"},
		{On: "A", Do: Delete("Y", broker.DeleteOptions{}), Want: "ok n=0"},
	}},
	{ID: "9.8/9.10", Title: "an argument missing on either side is a mismatch", Steps: []Step{
		{On: "A", Do: Declare("R", broker.DeclareOptions{Durable: true, Args: args("x-max-length", 0, "x-overflow", "reject-publish")}), Want: "ok"},
		{On: "A", Do: Declare("R", durable), Want: "406 channel"},
		{On: "A.2", Do: Declare("R", broker.DeclareOptions{Durable: true, Args: args("x-max-length", 0)}), Want: "406 channel"},
		{On: "A.3", Do: Delete("R", broker.DeleteOptions{}), Want: "ok n=0"},
	}},
	{ID: "9.11", Title: "exclusive declare of a durable A queue is 405, not 406", Steps: []Step{
		{On: "A", Do: Declare("Y", durable), Want: "ok"},
		{On: "B", Do: Declare("Y", with(excl, func(o *broker.DeclareOptions) { o.Durable = true })), Want: "405 channel"},
		{On: "A", Do: Delete("Y", broker.DeleteOptions{}), Want: "ok n=0"},
	}},
	{ID: "10", Title: "a forced close gives 320 and releases exclusive queues at once", Steps: []Step{
		heldByA,
		{On: "A", Do: ForceClose, Want: "ok"},
		{On: "A", Do: ConnError, Want: "320 connection"},
		{On: "A", Do: Passive("X", none), Want: "504 connection"},
		{Do: Inspect("X"), Want: "gone"},
	}},
	{ID: "12.1/12.2", Title: "server-named queues and the reserved amq. prefix", Steps: []Step{
		{On: "A", Do: Declare("", excl), Want: "ok server-named"},
		{On: "A", Do: Declare("amq.lockprover", none), Want: "403 channel"},
	}},
	{ID: "12.3-12.6", Title: "consume, get, purge and bind on another connection's exclusive queue", Steps: []Step{
		heldByA,
		{On: "B", Do: Consume("X", false), Want: "405 channel"},
		{On: "B.2", Do: Get("X"), Want: "405 channel"},
		{On: "B.3", Do: Purge("X"), Want: "405 channel"},
		{On: "B.4", Do: Bind("X", "amq.direct"), Want: "405 channel"},
		{On: "A", Do: Bind("X", "amq.direct"), Want: "ok"},
		{On: "A", Do: Purge("X"), Want: "ok n=0"},
		{On: "A", Do: Get("X"), Want: "empty"},
	}},
	{ID: "12.8", Title: "a queue name over 255 bytes kills the whole connection client-side", Steps: []Step{
		heldByA,
		{On: "A.2", Do: Mark, Want: "ok"},
		{On: "A.2", Do: Declare("LONG", none), Want: "501 connection"},
		{On: "A", Do: Passive("X", none), Want: "504 connection"},
		{Do: AwaitGone("X"), Want: "gone", Within: [2]time.Duration{0, 100 * time.Millisecond}},
	}},
	{ID: "12.9-12.11", Title: "an exclusive consumer shuts out every other consumer", Steps: []Step{
		{On: "A", Do: Declare("Y", excl), Want: "ok"},
		{On: "A", Do: Consume("Y", true), Want: "ok"},
		{On: "A.2", Do: Consume("Y", false), Want: "403 channel"},
		{On: "A.3", Do: Consume("Y", true), Want: "403 channel"},
		{On: "A.4", Do: Declare("Z", excl), Want: "ok"},
		{On: "A.4", Do: Consume("Z", false), Want: "ok"},
		{On: "A.5", Do: Consume("Z", true), Want: "403 channel"},
	}},
}

// partitionCase is case 7b for one negotiated heartbeat T: the client
// notices T to 1.5T after a partition starts, the broker releases the
// holder's queue 1.5T to 3T after it.
func partitionCase(id string, t time.Duration, simOnly bool) Case {
	return Case{ID: id, Title: "a silent partition is detected by heartbeats", SimOnly: simOnly, Steps: []Step{
		{On: "A", Do: Heartbeat(t), Want: "ok"},
		heldByA,
		{On: "B", Do: Dial, Want: "ok"},
		{On: "A", Do: Mark, Want: "ok"},
		{On: "A", Do: Partition, Want: "ok"},
		{On: "A", Do: Passive("X", none), Want: "501 connection", Within: [2]time.Duration{t, t * 3 / 2}},
		{Do: Inspect("X"), Want: "exists exclusive=A messages=0 consumers=0"},
		{Do: AwaitGone("X"), Want: "gone", Within: [2]time.Duration{t * 3 / 2, 3 * t}},
		{On: "A", Do: Heal, Want: "ok"},
	}}
}
