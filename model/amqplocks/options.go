package amqplocks

import (
	"math/rand/v2"
	"time"
)

// Options are the choices the amqp-locks spec leaves open. The zero value is
// the spec's recommendation for every one of them.
type Options struct {
	// Heartbeat is the heartbeat the client proposes: 0 means 10 s (the
	// amqp091-go default), a negative value proposes none (the broker's
	// value then applies). The broker notices a dead holder 2 to 3
	// heartbeats after its last byte, so this bounds how long a crashed
	// holder keeps its slot.
	Heartbeat time.Duration

	// DeleteOrder is the order in which admins delete A queues.
	// Descending (the default) keeps the slots a contiguous 1..C even if the
	// admin crashes midway; Ascending is the spec's "swiss cheese" option.
	DeleteOrder Order

	// Overshoot makes admins also delete stray A queues up to Overshoot
	// above the semaphore's maximum after create, change and destroy.
	Overshoot int

	// ScanStart is where acquire starts looking for a free slot.
	ScanStart Start

	// ContentionRetries bounds how many times acquire restarts its scan
	// after losing a race for a B queue (RESOURCE_LOCKED): 0 means 3, a
	// negative value means none.
	ContentionRetries int

	// Jitter, if positive, makes acquire sleep a random time in [0, Jitter)
	// before each restart after a lost race.
	Jitter time.Duration

	// Rand is the source for jitter and random scan starts; nil means a
	// randomly seeded one. Simulations pass a seeded source.
	Rand *rand.Rand

	// SkipVerifyAfterAcquire returns a slot as soon as its B queue is
	// declared; by default acquire first verifies the slot still exists.
	SkipVerifyAfterAcquire bool

	// VerifyMethod is how verify probes A[L].
	VerifyMethod VerifyMethod

	// NoAdminMutex lets admins change a semaphore without holding its
	// administration mutex.
	NoAdminMutex bool

	// TransientSlots declares A queues non-durable, so a broker restart
	// deletes every slot (RabbitMQ 4.3 refuses such queues altogether).
	TransientSlots bool

	// NoLengthLimit declares queues without x-max-length 0, so that
	// probes and verifies accumulate messages in them.
	NoLengthLimit bool

	// PollInterval is how often an admin's Wait probes a B queue, and how
	// often an admin retries a busy administration mutex: 0 means 100 ms.
	PollInterval time.Duration
	// LazyConnect makes Dial connect nothing: the client opens its
	// connection at its first operation instead. The protocol's init says
	// "connect to the broker (or prepare to)"; both are correct.
	LazyConnect bool

	// Channels is how the client uses channels: one for everything (the
	// default), or one per purpose, each opened when first needed.
	Channels ChannelUse

	// Reconnect makes the client open a new connection at the start of
	// its next acquire or admin operation after losing one, instead of
	// failing every operation from then on. Everything it held is lost
	// with the old connection, and it says so: it never reports a hold from
	// before. An operation that loses its connection midway fails; it never
	// goes on over a new one.
	Reconnect bool

	// TidyVerify makes a verify that finds the lock gone (its A queue
	// deleted) let go of it at once: it deletes the client's B queue
	// before it answers, so a release after it has nothing to delete
	// (ErrLost). By default the client keeps the B queue until its
	// release. Either way the lock is relinquished, as the spec names a
	// failed verify: no later verify says held until the client acquires
	// again.
	TidyVerify bool

	// PlainFailure makes acquire fail with ErrUnavailable where it would
	// say ErrFull or ErrAbsent: the spec's acquire says only "return
	// lock-acquire failure", and an implementation that follows it to the
	// letter cannot tell the two apart.
	PlainFailure bool
}

// ChannelUse is how a client uses channels.
type ChannelUse int

const (
	// OneChannel: one channel in confirm mode for every operation.
	OneChannel ChannelUse = iota
	// ChannelPerPurpose: probes and verifies on a channel in confirm mode,
	// declares and deletes on a plain one, and an admin's work on a third,
	// kept apart from the client's (as a driver that cannot mix confirm
	// mode with RPCs, or an application with an admin thread, would).
	ChannelPerPurpose
)

// Order is an order of A queue deletion.
type Order int

const (
	Descending Order = iota // from the highest slot down: the spec's recommendation
	Ascending               // from the lowest slot up: faster client failures, swiss cheese on a crash
)

// Start is where acquire's scan begins.
type Start int

const (
	FromFirst     Start = iota // slot 1, the spec's recommendation
	FromLastKnown              // the slot this client last held or reached
	FromRandom                 // a random slot up to one past the largest this client has seen
)

// VerifyMethod is how verify checks that A[L] still exists.
type VerifyMethod int

const (
	// VerifyPublish publishes a mandatory message to A[L] under confirms: a
	// return means A[L] is gone. It never breaks the channel.
	VerifyPublish VerifyMethod = iota
	// VerifyPassive passively declares A[L]: a 404 means it is gone, and
	// closes the channel.
	VerifyPassive
)

// ProposedHeartbeat is the heartbeat a client with these options proposes
// when it connects: Heartbeat, 10 s for 0, and 0 (none) for a negative one.
func (o Options) ProposedHeartbeat() time.Duration {
	switch {
	case o.Heartbeat == 0:
		return 10 * time.Second
	case o.Heartbeat < 0:
		return 0
	}
	return o.Heartbeat
}

func (o Options) retries() int {
	switch {
	case o.ContentionRetries == 0:
		return 3
	case o.ContentionRetries < 0:
		return 0
	}
	return o.ContentionRetries
}

func (o Options) poll() time.Duration {
	if o.PollInterval <= 0 {
		return 100 * time.Millisecond
	}
	return o.PollInterval
}

func (o Options) queueArgs() map[string]any {
	if o.NoLengthLimit {
		return nil
	}
	return lengthLimit
}

// lengthLimit is the arguments of every queue the reference declares,
// shared by all its declares (which only read them) rather than made anew
// for each.
var lengthLimit = map[string]any{"x-max-length": int32(0)}
