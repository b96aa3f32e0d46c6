"""amqp-locks for Python: a persistent semaphore and a true mutex on RabbitMQ.

This module implements the amqp-locks spec (Persistent-Semaphore.md,
True-Mutex.md, Persistent-Mutex.md) with pika's BlockingConnection.

A semaphore named N with C slots is the durable queues N-1-A .. N-C-A (the
slots). A client holds slot L while its connection owns the exclusive queue
N-L-B; RabbitMQ lets exactly one connection own an exclusive queue, so at most
one client holds each slot. Admins add and remove slots by declaring and
deleting A queues under an administration mutex, the exclusive queue N. A true
mutex named N is the exclusive queue N itself.

Queue existence is probed with a mandatory publish under publisher confirms:
a basic.return means the queue does not exist. Unlike a passive declare, a
probe never breaks the channel. Every queue is declared with x-max-length 0,
so the probes' empty messages are dropped instead of piling up.

Usage::

    client = Client("amqp://guest:guest@localhost:5672/", heartbeat=5)
    Admin(client, "jobs").create(3)            # once, by an administrator
    sem = Semaphore(client, "jobs")
    slot = sem.acquire()                       # raises Full, Absent, Contended
    if sem.verify(slot):                       # still held?
        ...
    sem.release(slot)
    client.close()

A Client is one connection and never reconnects: once its connection is lost,
everything it held is lost, and a new Client is needed. pika only sends
heartbeats while it is called, so a program that idles while holding a lock
should call Client.process_events() every so often (more than twice per
heartbeat interval). A Client is not thread-safe; give each thread its own.
"""

import itertools
import logging

import pika
import pika.exceptions

log = logging.getLogger(__name__)

__all__ = [
    "Client", "Semaphore", "Admin", "Mutex",
    "slot_queue", "holder_queue",
    "LockError", "Failed", "Unavailable", "Full", "Absent", "Contended", "Held", "Exists",
    "NotHeld", "BrokerError", "ChannelError", "ConnectionLost",
]

# Every queue is length-limited to 0 (default overflow: drop-head), so that
# the existence probes published to it are acknowledged and then dropped.
QUEUE_ARGS = {"x-max-length": 0}

RESOURCE_LOCKED = 405  # the AMQP reply code for another connection's exclusive queue


def slot_queue(name, slot):
    """The A queue of a slot: it exists while the semaphore has that slot."""
    return f"{name}-{slot}-A"


def holder_queue(name, slot):
    """The B queue of a slot: it exists while some client holds that slot."""
    return f"{name}-{slot}-B"


# --- Errors ----------------------------------------------------------------

class LockError(Exception):
    """Base class of the errors this module raises."""


class Failed(LockError):
    """The operation certainly did not take effect; reason names why."""

    reason = "failed"


class Unavailable(Failed):
    """Acquire found no slot to take: every slot was held, or the semaphore
    has no slots. The spec's plain "lock-acquire failure"; a Semaphore made
    with plain_failure=True raises it as such, otherwise one of its two
    precise subclasses below."""

    reason = "unavailable"


class Full(Unavailable):
    """Every slot of the semaphore was held when acquire looked."""

    reason = "full"


class Absent(Unavailable):
    """The semaphore has no slots: its A[1] does not exist."""

    reason = "absent"


class Contended(Failed):
    """Acquire kept losing races for B queues (RESOURCE_LOCKED), or an admin
    found the administration mutex held, more often than the retries allow."""

    reason = "contended"


class Held(Failed):
    """A true mutex is held by another connection."""

    reason = "held"


class Exists(Failed):
    """Create found that the semaphore already has slots."""

    reason = "exists"


class NotHeld(Failed):
    """Release of a lock this client does not hold (any more)."""

    reason = "not held"


class BrokerError(LockError):
    """The broker failed in a way the spec does not expect. The operation's
    outcome is unknown: it may or may not have taken effect."""


class ChannelError(BrokerError):
    """The broker closed the channel (channel.close); code is the AMQP reply
    code. The connection, and what it holds, survive; the Client has already
    opened a new channel."""

    def __init__(self, code, text):
        super().__init__(f"{code} {text}")
        self.code = code


class ConnectionLost(BrokerError):
    """The connection is gone (or could not be opened). Everything the Client
    held is lost; an operation in progress has an unknown outcome."""


# --- Client ----------------------------------------------------------------

class Client:
    """One amqp-locks client: one AMQP connection and one channel in confirm
    mode, used for any number of locks.

    heartbeat is the heartbeat timeout to propose, in whole seconds; None
    accepts the broker's value and 0 disables heartbeats. The broker releases
    a silent client's locks 2 to 3 heartbeats after its last byte.
    connect_timeout bounds the TCP connect and the AMQP handshake. name, if
    given, is shown as the connection's name in the management UI.

    A verify that finds its lock gone relinquishes it (the spec's
    "lock-relinquished"): later verifies say not held, even once an admin
    creates the slot again, until the client acquires anew. With
    tidy_verify that verify also deletes the client's B queue at once (a
    release after it raises NotHeld); otherwise the client keeps the queue
    until its release.
    """

    def __init__(self, url, heartbeat=None, name=None, connect_timeout=10.0,
                 tidy_verify=False):
        self.tidy_verify = tidy_verify
        params = pika.URLParameters(url)
        params.heartbeat = heartbeat
        params.connection_attempts = 1
        params.socket_timeout = connect_timeout
        params.stack_timeout = connect_timeout
        if name:
            params.client_properties = {"connection_name": name}
        try:
            self._conn = pika.BlockingConnection(params)
        except pika.exceptions.AMQPError as e:
            raise ConnectionLost(f"could not connect: {_describe(e)}") from e
        self._channel = None
        self._held = set()  # the exclusive queues this connection declared
        self._relinquished = set()  # those of them a verify found gone
        self._lost = None   # why the connection is gone, once it is
        try:
            self._reopen_channel()
        except pika.exceptions.AMQPError as e:
            self.close()
            raise ConnectionLost(f"could not open a channel: {_describe(e)}") from e

    @property
    def is_open(self):
        """True while the connection is alive, as far as the client knows."""
        return self._lost is None and self._conn.is_open

    def process_events(self):
        """Let pika send and receive heartbeats and notice a closed
        connection, without blocking. Call it regularly while idle; it returns
        is_open."""
        if self.is_open:
            try:
                self._conn.process_data_events(time_limit=0)
            except pika.exceptions.AMQPError as e:
                if self._conn.is_open:
                    raise BrokerError(_describe(e)) from e
                self._conn_lost(e)
        return self.is_open

    def close(self):
        """Close the connection, which releases everything the client holds.
        RabbitMQ deletes the client's exclusive queues before it confirms the
        close."""
        self._held.clear()
        self._relinquished.clear()
        if self._lost is None:
            self._lost = ConnectionLost("closed by the client")
        if self._conn.is_open:
            try:
                self._conn.close()
            except pika.exceptions.AMQPError as e:
                log.info("closing the connection: %s", _describe(e))

    # The primitives the locks are built from. Each translates pika's
    # exceptions: a channel closed by the broker becomes ChannelError (after
    # the channel was reopened), a dead connection ConnectionLost.

    def _reopen_channel(self):
        self._channel = None
        channel = self._conn.channel()
        channel.confirm_delivery()
        self._channel = channel

    def _conn_lost(self, exc):
        log.info("connection lost: %s", _describe(exc))
        self._lost = exc
        self._channel = None
        self._held.clear()
        self._relinquished.clear()

    def _call(self, what, op):
        """Run op(channel) on the client's channel; what names it in errors."""
        if not self.is_open:
            raise ConnectionLost(f"{what}: the connection is gone: {_describe(self._lost)}")
        try:
            if self._channel is None:
                self._reopen_channel()
            return op(self._channel)
        except (pika.exceptions.UnroutableError, pika.exceptions.NackError):
            raise  # a probe's answer, not a failure: see _exists
        except pika.exceptions.AMQPError as e:
            if not self._conn.is_open:
                self._conn_lost(e)
                raise ConnectionLost(f"{what}: {_describe(e)}") from e
            if isinstance(e, pika.exceptions.ChannelClosedByBroker):
                # Reopen at once, as the spec's acquire does after a
                # RESOURCE_LOCKED; if that fails the next call tries again.
                try:
                    self._reopen_channel()
                except pika.exceptions.AMQPError as again:
                    if not self._conn.is_open:
                        self._conn_lost(again)
                raise ChannelError(e.reply_code, f"{what}: {e.reply_text}") from e
            raise BrokerError(f"{what}: {_describe(e)}") from e

    def _exists(self, queue):
        """Probe queue with a mandatory publish under confirms. A return
        means it does not exist; an ack without a return (or a nack, from a
        queue with x-overflow reject-publish) means it does."""
        try:
            self._call(f"probe {queue}", lambda ch: ch.basic_publish(
                exchange="", routing_key=queue, body=b"", mandatory=True))
        except pika.exceptions.UnroutableError:
            return False
        except pika.exceptions.NackError:
            return True
        return True

    def _declare_exclusive(self, queue):
        """Declare queue exclusively to this connection. Returns False when
        another connection owns it (RESOURCE_LOCKED, which costs a channel)."""
        try:
            self._call(f"declare {queue}", lambda ch: ch.queue_declare(
                queue, exclusive=True, arguments=QUEUE_ARGS))
        except ChannelError as e:
            if e.code == RESOURCE_LOCKED:
                return False
            raise
        self._held.add(queue)
        self._relinquished.discard(queue)
        return True

    def _declare_durable(self, queue):
        self._call(f"declare {queue}", lambda ch: ch.queue_declare(
            queue, durable=True, arguments=QUEUE_ARGS))

    def _delete(self, queue):
        """Delete queue and wait for delete-ok (deleting a missing queue
        succeeds)."""
        self._call(f"delete {queue}", lambda ch: ch.queue_delete(queue))
        self._held.discard(queue)
        self._relinquished.discard(queue)

    def _verify_held(self, held, probe):
        """Whether this client still holds the exclusive queue held: it
        declared it, and a probe of probe is routed on its live connection
        (so the connection, and the queues it owns, are alive)."""
        if held not in self._held or held in self._relinquished or not self.is_open:
            return False
        try:
            if self._exists(probe):
                return True
        except ConnectionLost:
            return False
        self._relinquished.add(held)
        if self.tidy_verify:
            try:
                self._delete(held)
            except BrokerError as e:
                # Still relinquished: a release deletes it.
                log.info("deleting %s after finding its lock gone: %s", held, e)
        return False

    def _release(self, queue):
        if queue not in self._held or not self.is_open:
            raise NotHeld(f"{queue} is not held by this client")
        self._delete(queue)

    def _sleep(self, seconds):
        """Sleep while pika keeps the connection (and heartbeats) going."""
        try:
            self._conn.sleep(seconds)
        except pika.exceptions.AMQPError as e:
            self._conn_lost(e)
            raise ConnectionLost(_describe(e)) from e


def _describe(exc):
    return f"{type(exc).__name__}: {exc}" if exc is not None else "unknown"


# --- Persistent semaphore: clients -------------------------------------------

class Semaphore:
    """A client's handle on the persistent semaphore named name.

    retries bounds how many times acquire restarts its scan after losing a
    race for a B queue. max_slots, if set, is the highest slot acquire
    considers: a persistent mutex is a semaphore with max_slots=1.
    plain_failure=True makes acquire follow the spec's step 2 to the letter:
    it raises Unavailable itself when it finds no slot, without telling
    Full (every slot held) from Absent (no slots).
    """

    def __init__(self, client, name, retries=3, max_slots=None, plain_failure=False):
        self._client = client
        self.name = name
        self._retries = retries
        self._max_slots = max_slots
        self._plain = plain_failure

    def acquire(self):
        """Take a free slot and return its number.

        Follows the spec: for L from 1, if A[L] does not exist fail; if B[L]
        exists try L+1; otherwise declare B[L] exclusively. Losing that
        declare to another client (RESOURCE_LOCKED) costs a channel, and the
        scan restarts from 1, at most `retries` times. A slot taken is
        verified (A[L] still exists) before it is returned.

        Raises Full when every slot is held, Absent when the semaphore has no
        slots (Unavailable for both with plain_failure), Contended when the
        retries run out; any BrokerError leaves the outcome unknown.
        """
        for attempt in itertools.count():
            slot = self._scan()
            if slot is not None:
                return slot
            if attempt >= self._retries:
                raise Contended(f"lost {attempt + 1} races for a slot of {self.name}")
            log.info("lost a race for a slot of %s, scanning again", self.name)

    def _scan(self):
        """One pass over the slots from 1: the slot taken, or None after a
        lost race."""
        c = self._client
        for slot in itertools.count(1):
            if self._max_slots is not None and slot > self._max_slots:
                raise self._missing(slot)
            if not c._exists(slot_queue(self.name, slot)):
                raise self._missing(slot)
            holder = holder_queue(self.name, slot)
            if c._exists(holder):
                continue
            if not c._declare_exclusive(holder):
                return None
            if c._exists(slot_queue(self.name, slot)):
                return slot
            # An admin removed the slot while we took it: give it back.
            c._release(holder)
            raise self._missing(slot)

    def _missing(self, slot):
        """The failure of a scan that found no slot at slot."""
        if self._plain:
            return Unavailable(f"no slot of {self.name} to take")
        if slot == 1:
            return Absent(f"{self.name} has no slots")
        return Full(f"every slot of {self.name} is held")

    def verify(self, slot):
        """Whether the client still holds slot: it acquired it, its
        connection is alive (so it still owns B[slot]) and A[slot] still
        exists. One mandatory publish to A[slot]."""
        return self._client._verify_held(holder_queue(self.name, slot),
                                         slot_queue(self.name, slot))

    def release(self, slot):
        """Give slot back by deleting B[slot]. Raises NotHeld if the client
        does not hold it."""
        self._client._release(holder_queue(self.name, slot))


# --- Persistent semaphore: administration ------------------------------------

class Admin:
    """An administrator's handle on the persistent semaphore named name.

    Every operation but wait runs under the semaphore's administration mutex,
    the exclusive queue named name; an admin that finds it held retries
    `retries` times, poll_interval seconds apart, then raises Contended.
    wait polls every poll_interval seconds.
    """

    def __init__(self, client, name, retries=3, poll_interval=0.1):
        self._client = client
        self.name = name
        self._retries = retries
        self._poll = poll_interval

    def create(self, slots):
        """Create slots A[1]..A[slots]. Raises Exists if the semaphore
        already has slots."""
        def create():
            have = self._count()
            if have > 0:
                raise Exists(f"the semaphore already has {have} slots")
            for slot in range(1, slots + 1):
                self._client._declare_durable(slot_queue(self.name, slot))
        self._locked(create)

    def change(self, delta):
        """Add delta slots above the highest, or remove -delta from the top
        down (never below zero); returns (before, after). Removing a held
        slot does not disturb its holder until it verifies."""
        def change():
            before = self._count()
            after = max(0, before + delta)
            for slot in range(before + 1, after + 1):
                self._client._declare_durable(slot_queue(self.name, slot))
            self._delete_slots(after + 1, before)
            return before, after
        return self._locked(change)

    def count(self):
        """The number of slots: the highest L such that A[1]..A[L] exist."""
        return self._locked(self._count)

    def destroy(self):
        """Delete every slot, from the top down; returns how many there were."""
        def destroy():
            before = self._count()
            self._delete_slots(1, before)
            return before
        return self._locked(destroy)

    def wait(self, slot):
        """Return once slot's holder has let go (B[slot] no longer exists).
        Meaningful once the slot was removed: otherwise another client may
        take it again between two polls."""
        while self._client._exists(holder_queue(self.name, slot)):
            self._client._sleep(self._poll)

    def _count(self):
        for slot in itertools.count(1):
            if not self._client._exists(slot_queue(self.name, slot)):
                return slot - 1

    def _delete_slots(self, low, high):
        """Delete A[high] down to A[low], each delete confirmed before the
        next, so that the slots stay 1..C even if the admin dies midway."""
        for slot in range(high, low - 1, -1):
            self._client._delete(slot_queue(self.name, slot))

    def _locked(self, operation):
        """Run operation() under the administration mutex."""
        c = self._client
        for attempt in itertools.count():
            if c._declare_exclusive(self.name):
                break
            if attempt >= self._retries:
                raise Contended(f"the administration mutex {self.name} is held")
            c._sleep(self._poll)
        try:
            result = operation()
        except BaseException:
            # Keep the operation's error; the mutex goes with the connection
            # if it cannot be deleted.
            if c.is_open:
                try:
                    c._delete(self.name)
                except LockError as e:
                    log.info("releasing the administration mutex: %s", e)
            raise
        c._delete(self.name)
        return result


# --- True mutex ----------------------------------------------------------------

class Mutex:
    """A true mutex: the exclusive queue named name. It exists only while
    held and needs no administration."""

    def __init__(self, client, name):
        self._client = client
        self.name = name

    def acquire(self):
        """Declare the mutex queue exclusively. Raises Held when another
        connection holds it (which costs the client a channel)."""
        if not self._client._declare_exclusive(self.name):
            raise Held(f"{self.name} is held by another client")

    def verify(self):
        """Whether the client still holds the mutex: it acquired it and a
        publish to the queue is routed on its live connection."""
        return self._client._verify_held(self.name, self.name)

    def release(self):
        """Delete the mutex queue. Raises NotHeld if the client does not
        hold the mutex."""
        self._client._release(self.name)
