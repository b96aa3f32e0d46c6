package rabbitmqsim

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// A queue as the broker holds it.
type queue struct {
	name        string
	durable     bool
	autoDelete  bool
	owner       *conn // the exclusive owner, or nil
	args        map[string]any
	msgs        []message // ready messages
	consumers   []*consumer
	hadConsumer bool
	bindings    []binding
	home        *node // on a cluster, the node it lives on
	// Khepri mode: busy says its process is in a delete that waits for
	// Khepri; wedged, that it has no process (its delete timed out, or
	// its node went down), its record kept; freed (4.0.5's khepri_db),
	// that the majority deleted its record while its process lived on
	// at its node (cluster.freeLost).
	busy, wedged, freed bool
}

type consumer struct {
	tag       string
	ch        *channel
	q         *queue
	exclusive bool
}

type binding struct{ exchange, key string }

// A message is one message of a queue: persistent or not, and its body
// (read back by a served client's basic.get only).
type message struct {
	persistent, redelivered bool
	body                    []byte
}

// exchanges RabbitMQ declares in every vhost; "" is the default exchange.
var exchanges = map[string]string{
	"amq.direct": "direct", "amq.fanout": "fanout", "amq.topic": "topic",
	"amq.headers": "headers", "amq.match": "headers",
}

func chanErr(code int, format string, args ...any) reply {
	return reply{err: &broker.Error{Code: code, Reason: fmt.Sprintf(format, args...), Server: true}, cost: latChanError}
}

func locked(name string) reply {
	return chanErr(broker.ResourceLocked, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '%s' in vhost '/'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", name)
}

func notFound(name string) reply {
	return chanErr(broker.NotFound, "NOT_FOUND - no queue '%s' in vhost '/'", name)
}

// lookup is the queue named name in c's broker's records, for a method
// that needs it (a passive declare, a consume, a get, a purge, a bind);
// or, not ok, the answer that refuses the method: 404 (on a cluster, the
// "home node down" of a durable queue whose home c's node declared down:
// absent), or 405 for another connection's exclusive queue.
func (w *World) lookup(c *conn, name string) (q *queue, r reply, ok bool) {
	q = w.view(c)[name]
	switch {
	case q == nil && w.cl != nil:
		return nil, w.absent(c, name), false
	case q == nil:
		return nil, notFound(name), false
	case heldByOther(q, c):
		return nil, locked(name), false
	}
	return q, reply{}, true
}

// heldByOther reports whether q is exclusive to a connection other than c.
func heldByOther(q *queue, c *conn) bool { return q.owner != nil && q.owner != c }

func (w *World) declare(c *conn, name string, o broker.DeclareOptions) reply {
	if o.Passive {
		q, r, ok := w.lookup(c, name)
		if !ok {
			return r
		}
		return reply{queue: broker.Queue{Name: name, Messages: len(q.msgs), Consumers: len(q.consumers)}, cost: latLookup}
	}
	if name == "" {
		name = w.serverName()
	} else if strings.HasPrefix(name, "amq.") {
		return chanErr(broker.AccessRefused, "ACCESS_REFUSED - queue name '%s' contains reserved prefix 'amq.*'", name)
	}
	durable := o.Durable && !o.Exclusive // 3.10 drops durable on exclusive declares
	if q := w.view(c)[name]; q != nil {
		// Exclusivity first (405), then equivalence (406).
		if heldByOther(q, c) || o.Exclusive != (q.owner != nil) {
			return locked(name)
		}
		if q.durable != durable {
			return inequivalent(name, "durable", durable, q.durable)
		}
		if q.autoDelete != o.AutoDelete {
			return inequivalent(name, "auto_delete", o.AutoDelete, q.autoDelete)
		}
		if r, bad := argsDiffer(name, o.Args, q.args); bad {
			return r
		}
		return reply{queue: broker.Queue{Name: name, Messages: len(q.msgs), Consumers: len(q.consumers)}, cost: latLookup}
	}
	if r, bad := invalidArgs(o.Args); bad {
		return r
	}
	if w.cl != nil {
		if r, gone := w.homeDown(c, name); gone {
			return r
		}
	}
	q := &queue{name: name, durable: durable, autoDelete: o.AutoDelete, args: w.sharedArgs(o.Args)}
	if o.Exclusive {
		q.owner = c
		c.owned = append(c.owned, q)
	}
	w.addQueue(c, q)
	c.p.effects = append(c.p.effects, Effect{Time: w.now, Queue: name, Created: true})
	if w.cl != nil && w.cl.khepri() {
		if r, ghost := w.ghostDeclare(c, name); ghost {
			return r
		}
	}
	return reply{queue: broker.Queue{Name: name}, cost: latCreate}
}

func inequivalent(name, field string, got, current bool) reply {
	return chanErr(broker.PreconditionFailed, "PRECONDITION_FAILED - inequivalent arg '%s' for queue '%s' in vhost '/': received '%v' but current is '%v'", field, name, got, current)
}

// equivalenceArgs are the x-arguments RabbitMQ 3.10 compares on redeclare;
// any other key is ignored.
var equivalenceArgs = []string{
	"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-delivery-limit", "x-expires",
	"x-max-in-memory-bytes", "x-max-in-memory-length", "x-max-length", "x-max-length-bytes",
	"x-max-priority", "x-message-ttl", "x-overflow", "x-queue-master-locator", "x-queue-mode",
	"x-queue-type", "x-single-active-consumer",
}

// argsDiffer compares declared arguments with a queue's: a key missing on
// one side is a mismatch, numbers compare by value whatever their width, and
// x-queue-type "classic" equals its absence.
func argsDiffer(name string, got, current map[string]any) (reply, bool) {
	for _, k := range equivalenceArgs {
		g, gok := normArg(k, got)
		c, cok := normArg(k, current)
		if gok == cok && (!gok || g == c) {
			continue
		}
		return chanErr(broker.PreconditionFailed, "PRECONDITION_FAILED - inequivalent arg '%s' for queue '%s' in vhost '/': received %s but current is %s", k, name, argText(g, gok), argText(c, cok)), true
	}
	return reply{}, false
}

func normArg(k string, args map[string]any) (any, bool) {
	v, ok := args[k]
	if !ok {
		return nil, false
	}
	if k == "x-queue-type" && v == "classic" {
		return nil, false
	}
	if n, isInt := toInt(v); isInt {
		return n, true
	}
	return v, true
}

func argText(v any, ok bool) string {
	switch {
	case !ok:
		return "none"
	case isInt64(v):
		return fmt.Sprintf("the value '%v' of type 'signedint'", v)
	}
	return fmt.Sprintf("the value '%v' of type 'longstr'", v)
}

func isInt64(v any) bool { _, ok := v.(int64); return ok }

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

func invalidArgs(args map[string]any) (reply, bool) {
	if v, ok := args["x-max-length"]; ok {
		if n, isInt := toInt(v); !isInt || n < 0 {
			return chanErr(broker.PreconditionFailed, "PRECONDITION_FAILED - invalid arg 'x-max-length' for queue: %v", v), true
		}
	}
	if v, ok := args["x-overflow"]; ok {
		switch v {
		case "drop-head", "reject-publish", "reject-publish-dlx":
		default:
			return chanErr(broker.PreconditionFailed, "PRECONDITION_FAILED - invalid arg 'x-overflow' for queue: %v", v), true
		}
	}
	return reply{}, false
}

func copyArgs(a map[string]any) map[string]any {
	if len(a) == 0 {
		return nil
	}
	c := make(map[string]any, len(a))
	for k, v := range a {
		c[k] = v
	}
	return c
}

// sharedArgs is a copy of a for a new queue to keep: the copy made for the
// queue declared before if its arguments were the same (no queue changes
// its arguments, so queues may share them), else a fresh one. A client
// declares its queues with the same arguments over and over.
func (w *World) sharedArgs(a map[string]any) map[string]any {
	if len(a) == 0 {
		return nil
	}
	if !sameArgs(w.lastArgs, a) {
		w.lastArgs = copyArgs(a)
	}
	return w.lastArgs
}

// sameArgs reports whether x holds exactly y's keys, with values equal
// and of a type that == compares safely (a number, a string or a bool).
func sameArgs(x, y map[string]any) bool {
	if len(x) != len(y) {
		return false
	}
	for k, v := range y {
		u, ok := x[k]
		if !ok {
			return false
		}
		switch v.(type) {
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, string, bool:
			if u != v {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// serverName makes a name like RabbitMQ's amq.gen-<22 characters>.
func (w *World) serverName() string {
	w.gen++
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], uint64(w.gen)*0x9e3779b97f4a7c15)
	binary.BigEndian.PutUint64(b[8:], uint64(w.gen)*0xc2b2ae3d27d4eb4f)
	return "amq.gen-" + base64.RawURLEncoding.EncodeToString(b[:])[:22]
}

func (w *World) deleteQ(c *conn, name string, o broker.DeleteOptions) reply {
	q := w.view(c)[name]
	switch {
	case q == nil && w.cl != nil:
		if r, gone := w.homeDown(c, name); gone {
			return r
		}
		return reply{cost: latLookup}
	case q == nil:
		return reply{cost: latLookup}
	case heldByOther(q, c):
		return locked(name)
	case o.IfUnused && len(q.consumers) > 0:
		return chanErr(broker.PreconditionFailed, "PRECONDITION_FAILED - queue '%s' in vhost '/' in use", name)
	case o.IfEmpty && len(q.msgs) > 0:
		return chanErr(broker.PreconditionFailed, "PRECONDITION_FAILED - queue '%s' in vhost '/' not empty", name)
	}
	n := len(q.msgs)
	if w.cl != nil && w.cl.khepri() {
		w.cl.leaveGhost(c.node, q)
	}
	w.deleteQueue(q)
	c.p.effects = append(c.p.effects, Effect{Time: w.now, Queue: name})
	return reply{n: n, cost: latDelete}
}

// deleteQueue removes q, cancelling its consumers (their channels stay
// open) and forgetting its unacknowledged messages.
func (w *World) deleteQueue(q *queue) {
	w.dropRecord(q)
	if o := q.owner; o != nil {
		for i, x := range o.owned {
			if x == q {
				o.owned = append(o.owned[:i], o.owned[i+1:]...)
				break
			}
		}
	}
	q.dropConsumers()
}

// dropConsumers cancels q's consumers: each leaves its channel.
func (q *queue) dropConsumers() {
	for _, cs := range q.consumers {
		cs.ch.consumers = removeConsumer(cs.ch.consumers, cs)
	}
	q.consumers = nil
}

// keepPersistent keeps q's persistent messages only: what a durable
// queue keeps when its broker or node stops.
func (q *queue) keepPersistent() {
	kept := q.msgs[:0]
	for _, m := range q.msgs {
		if m.persistent {
			kept = append(kept, m)
		}
	}
	q.msgs = kept
}

func removeConsumer(list []*consumer, cs *consumer) []*consumer {
	for i, x := range list {
		if x == cs {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// closeChannel closes ch on the broker's side: its consumers go and its
// unacknowledged messages return to their queues.
func (w *World) closeChannel(ch *channel) {
	if !ch.open {
		return
	}
	ch.open = false
	for i := len(ch.unacked) - 1; i >= 0; i-- {
		d := ch.unacked[i]
		if w.exists(d.q) {
			d.m.redelivered = true
			d.q.msgs = append([]message{d.m}, d.q.msgs...)
		}
	}
	requeued := ch.unacked
	ch.unacked = nil
	for _, cs := range ch.consumers {
		q := cs.q
		q.consumers = removeConsumer(q.consumers, cs)
		if q.autoDelete && len(q.consumers) == 0 && w.exists(q) {
			w.deleteQueue(q)
		}
	}
	ch.consumers = nil
	// What came back goes on to a consumer its queue still has, as
	// RabbitMQ delivers requeued messages.
	for _, d := range requeued {
		if q := d.q; w.exists(q) && len(q.consumers) > 0 && len(q.msgs) > 0 {
			cs := q.consumers[0]
			for _, m := range q.msgs {
				cs.ch.deliver(q, m, cs.tag)
			}
			q.msgs = nil
		}
	}
}

func (w *World) publish(c *conn, ch *channel, pb broker.Publishing) reply {
	if pb.Immediate {
		err := &broker.Error{Code: broker.NotImplemented, Reason: "NOT_IMPLEMENTED - immediate=true", Server: true, Connection: true}
		w.brokerClose(c, "immediate=true")
		return reply{err: err, cost: latChanError}
	}
	targets, r, bad := w.targets(c, pb)
	if bad {
		return r
	}
	return w.deliver(pb, targets, len(targets) > 0)
}

// targets are the queues pb routes to in c's view of the broker; bad
// says r is the error instead. They are the caller's until the next call.
func (w *World) targets(c *conn, pb broker.Publishing) (targets []*queue, r reply, bad bool) {
	if pb.Exchange == "" {
		if q := w.view(c)[pb.Key]; q != nil {
			w.routed[0] = q
			targets = w.routed[:]
		}
		return targets, reply{}, false
	}
	kind, ok := exchanges[pb.Exchange]
	if !ok {
		return nil, chanErr(broker.NotFound, "NOT_FOUND - no exchange '%s' in vhost '/'", pb.Exchange), true
	}
	return w.route(w.view(c), pb.Exchange, kind, pb.Key), reply{}, false
}

// deliver enqueues pb on targets; routed false means it routed nowhere.
func (w *World) deliver(pb broker.Publishing, targets []*queue, routed bool) reply {
	if !routed {
		return reply{conf: broker.Confirmation{Returned: pb.Mandatory, Acked: true}, cost: latPublish}
	}
	acked, cost := true, latPublish
	for _, q := range targets {
		if q.wedged || q.busy {
			// A Khepri queue whose process is gone (its node killed or
			// stopped, or its delete timed out) or going (its deletion
			// waits for Khepri): the record routes, the message is
			// rejected (the differential's sequences on 4.3.6: a publish
			// to a queue of a killed n3, and to one whose owner's
			// connection had closed through a node cut one way, nacked).
			acked = false
			continue
		}
		if !w.enqueue(q, message{persistent: pb.Persistent, body: pb.Body}) {
			acked = false
		}
		if pb.Persistent && q.durable {
			cost = latPersist
		}
	}
	return reply{conf: broker.Confirmation{Acked: acked}, cost: cost}
}

// route finds the queues bound to a named exchange: every binding for
// fanout, an equal routing key otherwise (topic patterns are not modelled).
func (w *World) route(view map[string]*queue, exchange, kind, key string) []*queue {
	var names []string
	for name, q := range view {
		for _, b := range q.bindings {
			if b.exchange == exchange && (kind == "fanout" || b.key == key) {
				names = append(names, name)
				break
			}
		}
	}
	sort.Strings(names)
	qs := make([]*queue, len(names))
	for i, n := range names {
		qs[i] = view[n]
	}
	return qs
}

// enqueue adds a message to q, applying x-max-length and x-overflow; it
// reports false for a rejected publish (a nack).
func (w *World) enqueue(q *queue, m message) bool {
	max := int64(-1)
	if v, ok := q.args["x-max-length"]; ok {
		max, _ = toInt(v)
	}
	overflow, _ := q.args["x-overflow"].(string)
	if len(q.consumers) > 0 && max != 0 {
		cs := q.consumers[0]
		cs.ch.deliver(q, m, cs.tag)
		return true
	}
	if max >= 0 && int64(len(q.msgs)) >= max && overflow != "" && overflow != "drop-head" {
		return false
	}
	q.msgs = append(q.msgs, m)
	for max >= 0 && int64(len(q.msgs)) > max {
		q.msgs = q.msgs[1:]
	}
	return true
}

func (w *World) consume(c *conn, ch *channel, name string, exclusive bool) reply {
	q, r, ok := w.lookup(c, name)
	switch {
	case !ok:
		return r
	case exclusive && len(q.consumers) > 0, len(q.consumers) > 0 && q.consumers[0].exclusive:
		return chanErr(broker.AccessRefused, "ACCESS_REFUSED - queue '%s' in vhost '/' in exclusive use", name)
	}
	w.gen++
	cs := &consumer{tag: fmt.Sprintf("ctag-%d", w.gen), ch: ch, q: q, exclusive: exclusive}
	q.consumers = append(q.consumers, cs)
	q.hadConsumer = true
	ch.consumers = append(ch.consumers, cs)
	for _, m := range q.msgs {
		ch.deliver(q, m, cs.tag)
	}
	q.msgs = nil
	return reply{tag: cs.tag, cost: latSmall}
}

func (w *World) get(c *conn, ch *channel, name string) reply {
	q, r, ok := w.lookup(c, name)
	switch {
	case !ok:
		return r
	case len(q.msgs) == 0:
		return reply{cost: latSmall}
	}
	ch.deliver(q, q.msgs[0], "")
	q.msgs = q.msgs[1:]
	return reply{ok: true, n: len(q.msgs), cost: latSmall}
}

// settle is basic.ack (ack), or basic.nack and reject (requeue or
// drop): the deliveries of ch up to tag (multiple; tag 0, all of them) or
// tag alone. A tag the channel has not delivered, or has settled, is a
// channel error, as on RabbitMQ (measured: "unknown delivery tag").
func (w *World) settle(ch *channel, tag uint64, multiple, ack, requeue bool) reply {
	var settled, kept []delivery
	for _, d := range ch.unacked {
		if d.tag == tag || multiple && (tag == 0 || d.tag <= tag) {
			settled = append(settled, d)
		} else {
			kept = append(kept, d)
		}
	}
	if len(settled) == 0 {
		return chanErr(broker.PreconditionFailed, "PRECONDITION_FAILED - unknown delivery tag %d", tag)
	}
	ch.unacked = kept
	for i := len(settled) - 1; i >= 0 && !ack && requeue; i-- {
		if d := settled[i]; w.exists(d.q) {
			d.m.redelivered = true
			d.q.msgs = append([]message{d.m}, d.q.msgs...)
		}
	}
	return reply{cost: latSmall}
}

// cancel is basic.cancel: ch's consumer tag goes (an auto-delete queue
// with it, once its last consumer has gone); a tag the channel does not
// have is no error, as on RabbitMQ.
func (w *World) cancel(ch *channel, tag string) reply {
	for _, cs := range ch.consumers {
		if cs.tag != tag {
			continue
		}
		ch.consumers = removeConsumer(ch.consumers, cs)
		q := cs.q
		q.consumers = removeConsumer(q.consumers, cs)
		if q.autoDelete && len(q.consumers) == 0 && w.exists(q) {
			w.deleteQueue(q)
		}
		break
	}
	return reply{cost: latSmall}
}

func (w *World) purge(c *conn, name string) reply {
	q, r, ok := w.lookup(c, name)
	if !ok {
		return r
	}
	n := len(q.msgs)
	q.msgs = nil
	return reply{n: n, cost: latSmall}
}

func (w *World) bind(c *conn, name, exchange, key string) reply {
	q, r, ok := w.lookup(c, name)
	switch {
	case !ok:
		return r
	case exchange == "":
		return chanErr(broker.AccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange")
	}
	if _, ok := exchanges[exchange]; !ok {
		return chanErr(broker.NotFound, "NOT_FOUND - no exchange '%s' in vhost '/'", exchange)
	}
	q.bindings = append(q.bindings, binding{exchange, key})
	return reply{cost: latSmall}
}

// QueueInfo describes a queue the way `rabbitmqctl list_queues` would.
type QueueInfo struct {
	Name                string
	Durable, AutoDelete bool
	Owner               string // the owning connection's name if exclusive
	Node                string // on a cluster, the node the queue lives on
	Messages, Consumers int
	Args                map[string]any
}

// Queue returns the broker's view of the queue named name (on a cluster,
// the first node's that has it).
func (w *World) Queue(name string) (QueueInfo, bool) {
	if w.cl != nil {
		for _, qi := range w.Queues() {
			if qi.Name == name {
				return qi, true
			}
		}
		return QueueInfo{}, false
	}
	q := w.queues[name]
	if q == nil {
		return QueueInfo{}, false
	}
	return q.info(), true
}

// Queues returns every queue, sorted by name; on a cluster, every queue a
// node holds a record of (a name twice when a split cluster's sides each
// have a queue of that name).
func (w *World) Queues() []QueueInfo {
	if w.cl != nil {
		return w.cl.queues()
	}
	names := make([]string, 0, len(w.queues))
	for n := range w.queues {
		names = append(names, n)
	}
	sort.Strings(names)
	qs := make([]QueueInfo, len(names))
	for i, n := range names {
		qs[i] = w.queues[n].info()
	}
	return qs
}

func (q *queue) info() QueueInfo {
	i := QueueInfo{Name: q.name, Durable: q.durable, AutoDelete: q.autoDelete, Messages: len(q.msgs), Consumers: len(q.consumers), Args: copyArgs(q.args)}
	if q.owner != nil {
		i.Owner = q.owner.name
	}
	if q.home != nil {
		i.Node = q.home.name
	}
	return i
}

// restartQueues is what a broker restart keeps: durable queues, with their
// persistent messages only.
func (w *World) restartQueues() {
	for _, qi := range w.Queues() {
		q := w.queues[qi.Name]
		if !q.durable {
			w.deleteQueue(q)
			continue
		}
		q.keepPersistent()
	}
}
