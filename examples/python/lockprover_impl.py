#!/usr/bin/env python3
"""lockprover process-protocol server for amqp_locks.

lockprover (docs/protocol.md) starts one of these per client or admin of a
run. It reads one JSON request per line on stdin and writes one JSON reply per
line on stdout; logs go to stderr. Run it as:

    /usr/bin/python3 examples/python/lockprover_impl.py [--lazy-connect] [--plain-failure]
        [--tidy-verify] [--defect verify-from-cache]

The first request is init, which connects to the broker (trying for a few
seconds, then answering init_ok anyway and leaving it to the first operation
that needs the broker). A connection lost later is reported by the operation
that meets it (an error, or held:false for a verify), and the server connects
again at once, with a new connection that holds nothing: before the reply,
except for a verify, or as soon as it notices the loss while idle. If that
fails, the next operation that needs the broker tries again. At EOF on stdin
the server closes its connection and exits 0.

Three options make variants that are just as correct by the spec:

--lazy-connect   init answers init_ok without connecting ("connect to the
                 broker, or prepare to"); the first operation that needs the
                 broker connects, and after a lost connection the next one
                 that needs it connects again.
--plain-failure  acquire follows the spec's step 2 to the letter: when it
                 finds no slot it fails with the reason "unavailable" (full
                 or absent) instead of telling "full" from "absent".
--tidy-verify    a verify that finds its slot gone deletes the client's B
                 queue before it answers held:false (the spec's
                 "lock-relinquished"), so that a re-created slot is free for
                 others at once; a release after it answers "not held".

--defect NAME seeds one defect, for showing that lockprover catches it:
  verify-from-cache  verify answers held for the slot (or the mutex) this
                     server's last acquire got, until its release, without
                     asking the broker (as the reference's mutant of that
                     name): it says held after the slot was removed, or after
                     the connection that held it was lost.
"""

import argparse
import logging
import math
import sys
import time

import amqp_locks as al
from lockprover_serve import BadRequest, int_field, serve

log = logging.getLogger("lockprover_impl")

# Bounds a connection attempt (TCP connect and AMQP handshake), well within
# lockprover's 30 s per operation.
CONNECT_TIMEOUT = 5.0

# How long init keeps trying to connect (lockprover gives init 10 s), and
# the pause between attempts.
INIT_PATIENCE = 6.0
RETRY_PAUSE = 0.2

# The reasons an acquire_fail may carry; other definite failures are errors.
ACQUIRE_FAIL_REASONS = {"full", "absent", "unavailable", "contended", "held"}


class Server:
    """One lockprover process: a client (or admin) of one lock, served by
    lockprover_serve.serve, which calls idle() every 0.2 s without a
    request and recover() (as replied) after each reply.

    lazy_connect: connect only when an operation needs the broker, not at
    init nor at once after a lost connection. plain_failure: acquire fails
    "unavailable" where it would say "full" or "absent".
    """

    def __init__(self, lazy_connect=False, plain_failure=False, tidy_verify=False, defect=None,
                 reuse=False):
        self.reuse = reuse     # init_ok declares "reuse": reset ends a run, not stdin
        self.lazy_connect = lazy_connect
        self.plain_failure = plain_failure
        self.tidy_verify = tidy_verify
        self.defect = defect
        self.cached = None     # verify-from-cache: what the last acquire got
        self.init = None       # the init request
        self.client = None     # the current amqp_locks.Client, once connected
        self.exit_code = None  # set when the server must stop after a reply

    def answer(self, req):
        """Answer one request (a dict) with one reply (a dict).

        An operation that lost the connection connects again before it
        answers, so that the connection is not counted against the next
        operation; a verify answers first, since lockprover judges what a
        verify sends (serve then connects again: replied).
        """
        reply = self.reply(req)
        if req.get("type") != "verify":
            self.recover()
        return reply

    def reply(self, req):
        rid, kind = req.get("id"), req.get("type")
        try:
            if kind == "init":
                reply = self.start(req)
            elif kind == "reset" and self.reuse:
                reply = self.reset()
            elif self.init is None:
                raise BadRequest("the first request must be init")
            else:
                handler = self.handlers().get(kind)
                if handler is None:
                    return {"id": rid, "type": "error", "code": "unsupported",
                            "text": f"unsupported request type {kind!r}", "definite": True}
                reply = handler(req)
        except BadRequest as e:
            reply = {"type": "error", "code": "bad request", "text": str(e), "definite": True}
        except al.Failed as e:
            if kind == "acquire" and e.reason in ACQUIRE_FAIL_REASONS:
                reply = {"type": "acquire_fail", "reason": e.reason}
            else:
                reply = {"type": "error", "code": e.reason, "text": str(e), "definite": True}
        except al.BrokerError as e:
            log.warning("%s #%s: outcome unknown: %s", kind, rid, e)
            reply = {"type": "error", "code": "broker", "text": str(e)}
        except Exception as e:  # a bug here or in pika: outcome unknown
            log.exception("%s #%s failed", kind, rid)
            reply = {"type": "error", "code": "internal", "text": f"{type(e).__name__}: {e}"}
        return {"id": rid, **reply}

    def handlers(self):
        if self.init["lock"] == "mutex":
            return {"acquire": self.mutex_acquire, "verify": self.mutex_verify,
                    "release": self.mutex_release}
        return {"acquire": self.acquire, "verify": self.verify, "release": self.release,
                "create": self.create, "change": self.change, "count": self.count,
                "wait": self.wait, "destroy": self.destroy}

    # --- connection ---------------------------------------------------------

    def start(self, req):
        if self.init is not None:
            raise BadRequest("init was already received")
        for field in ("client", "name", "url"):
            if not isinstance(req.get(field), str):
                self.exit_code = 1
                raise BadRequest(f"init needs a string {field!r}")
        if req.get("lock") not in ("semaphore", "mutex"):
            self.exit_code = 1
            raise BadRequest(f"unknown lock kind {req.get('lock')!r}")
        self.init = req
        ok = {"type": "init_ok", "reuse": True} if self.reuse else {"type": "init_ok"}
        if self.lazy_connect:
            log.info("lazy: the first operation that needs the broker connects")
            return ok
        # A fault can strike during the handshake (a dropped reply kills the
        # connection): try again for a while, then answer anyway and leave
        # it to the first operation that needs the broker.
        deadline = time.monotonic() + INIT_PATIENCE
        while self.client is None:
            try:
                self.client = self.connect(min(CONNECT_TIMEOUT, max(deadline - time.monotonic(), 1.0)))
            except al.ConnectionLost as e:
                log.warning("init: %s", e)
                if time.monotonic() + RETRY_PAUSE >= deadline:
                    break
                time.sleep(RETRY_PAUSE)
        return ok

    def reset(self):
        """The run is over (--reuse): close the connection as at the end of
        stdin, forget the run, and wait for the next init."""
        self.close()
        self.init, self.client, self.cached = None, None, None
        return {"type": "reset_ok"}

    def connect(self, timeout=CONNECT_TIMEOUT):
        ms = self.init.get("heartbeat_ms", 0)
        # 0 proposes none: pika's None accepts the broker's value (pika's 0
        # would disable heartbeats altogether). pika counts whole seconds.
        heartbeat = math.ceil(ms / 1000) if ms else None
        name = f"lockprover {self.init['client']} {self.init['name']}"
        log.info("connecting to %s (heartbeat %s s)", self.init["url"], heartbeat)
        return al.Client(self.init["url"], heartbeat=heartbeat, name=name,
                         connect_timeout=timeout, tidy_verify=self.tidy_verify)

    def connected(self):
        """The client, connecting first if it has no connection; raises
        ConnectionLost if it cannot connect."""
        if self.client is not None and not self.client.is_open:
            self.client.close()
            self.client = None
        if self.client is None:
            self.client = self.connect()
        return self.client

    def recover(self):
        """After a connection loss, connect again at once, so that the next
        operation finds a connection (lockprover charges an acquire or a
        verify for a connection it opens). One attempt per loss: if it
        fails, the next operation that needs the broker tries again. A lazy
        server leaves it to that operation in any case."""
        if self.lazy_connect or self.client is None or self.client.is_open:
            return
        try:
            self.connected()
        except al.ConnectionLost as e:
            log.warning("connecting again: %s", e)

    replied = recover  # after a verify that found the connection lost

    def idle(self):
        """Between requests: keep heartbeats flowing, and notice a lost
        connection early."""
        if self.client is not None and self.client.is_open:
            try:
                if not self.client.process_events():
                    log.info("the connection was lost while idle")
                    self.recover()
            except al.BrokerError as e:
                log.warning("while idle: %s", e)

    def close(self):
        if self.client is not None:
            self.client.close()

    # --- handles ----------------------------------------------------------
    # verify and release work on the current client even when its
    # connection is gone: they then answer held:false and "not held" without
    # connecting (a new connection would hold nothing anyway).

    def semaphore(self, client):
        return al.Semaphore(client, self.init["name"], plain_failure=self.plain_failure)

    def admin(self):
        return al.Admin(self.connected(), self.init["name"])

    def mutex(self, client):
        return al.Mutex(client, self.init["name"])

    def holder(self):
        """The client for verify and release; NotHeld if it never connected."""
        if self.client is None:
            raise al.NotHeld("never connected: nothing is held")
        return self.client

    # --- persistent semaphore: clients -------------------------------------

    def acquire(self, req):
        slot = self.semaphore(self.connected()).acquire()
        self.cached = slot
        return {"type": "acquire_ok", "slot": slot}

    def verify(self, req):
        slot = int_field(req, "slot", 1)
        if self.defect == "verify-from-cache" and self.cached == slot:
            return {"type": "verify_ok", "held": True}
        held = self.client is not None and self.semaphore(self.client).verify(slot)
        return {"type": "verify_ok", "held": held}

    def release(self, req):
        slot = int_field(req, "slot", 1)
        self.cached = None
        self.semaphore(self.holder()).release(slot)
        return {"type": "release_ok"}

    # --- persistent semaphore: admins --------------------------------------

    def create(self, req):
        self.admin().create(int_field(req, "slots", 0))
        return {"type": "create_ok"}

    def change(self, req):
        before, after = self.admin().change(int_field(req, "delta", None))
        return {"type": "change_ok", "from": before, "to": after}

    def count(self, req):
        return {"type": "count_ok", "slots": self.admin().count()}

    def wait(self, req):
        self.admin().wait(int_field(req, "slot", 1))
        return {"type": "wait_ok"}

    def destroy(self, req):
        return {"type": "destroy_ok", "from": self.admin().destroy()}

    # --- true mutex ----------------------------------------------------------

    def mutex_acquire(self, req):
        self.mutex(self.connected()).acquire()
        self.cached = 0
        return {"type": "acquire_ok"}

    def mutex_verify(self, req):
        if self.defect == "verify-from-cache" and self.cached == 0:
            return {"type": "verify_ok", "held": True}
        held = self.client is not None and self.mutex(self.client).verify()
        return {"type": "verify_ok", "held": held}

    def mutex_release(self, req):
        self.cached = None
        self.mutex(self.holder()).release()
        return {"type": "release_ok"}


def options(argv):
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        description="lockprover process-protocol server for amqp_locks (docs/protocol.md).")
    parser.add_argument("--lazy-connect", action="store_true",
                        help="do not connect at init: the first operation that needs the broker "
                             "connects (and, after a lost connection, the next one)")
    parser.add_argument("--plain-failure", action="store_true",
                        help='an acquire that finds no slot fails "unavailable", '
                             'not "full" or "absent"')
    parser.add_argument("--tidy-verify", action="store_true",
                        help="a verify that finds its slot gone deletes the client's B queue "
                             "at once (a release after it answers not held)")
    parser.add_argument("--defect", choices=["verify-from-cache"],
                        help="seed a defect: verify-from-cache (verify answers held from the last "
                             "acquire, without asking the broker)")
    parser.add_argument("--reuse", action="store_true",
                        help='take another run when one ends: init_ok says "reuse", and a '
                             "reset request closes the connection and forgets the run")
    return parser.parse_args(argv)


def main(argv=None):
    opts = options(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # pika warns about every returned message (which is how probes find a
    # missing queue) and logs tracebacks for every lost connection; the
    # errors it raises are logged here, in one line each.
    logging.getLogger("pika").setLevel(logging.CRITICAL)
    if opts.defect:
        log.info("seeded defect: %s", opts.defect)
    return serve(Server(lazy_connect=opts.lazy_connect, plain_failure=opts.plain_failure,
                        tidy_verify=opts.tidy_verify, defect=opts.defect, reuse=opts.reuse))


if __name__ == "__main__":
    sys.exit(main())
