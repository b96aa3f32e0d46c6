#!/usr/bin/env python3
"""lockprover's amqp-locks process protocol (docs/protocol.md) served by
zbentley/amqp-locks-python, run as it is.

amqp-locks-python (github.com/zbentley/amqp-locks-python) is the only
implementation the amqp-locks README names. This process imports its package
`rabbitlock` from a checkout (--checkout PATH or
$LOCKPROVER_AMQP_LOCKS_PYTHON) and answers one lockprover client or admin
with it. The library is not changed. With --pika-compat, pika_compat.apply()
first restores the one pika 0.x behaviour the library relies on that pika
1.x changed (basic_publish's return value under confirms; see
pika_compat.py); without it, the library runs on pika 1.x as it is.

How requests map onto the library (Semaphore(name, parameters) and
Mutex(name, parameters), both with their defaults: paranoid=True,
release_on_destroy=False; one object per process, made at init, which is
when the library connects):

semaphore
  acquire        ensure_semaphore_held(): a slot number is acquire_ok with
                 that slot; False or None (no slot; the library does not say
                 why) is acquire_fail "unavailable", the spec's plain
                 lock-acquire failure.
  verify {slot}  held:false if the library does not hold that slot
                 (_held_semaphore(), its own record; ensure_semaphore_held()
                 would acquire one otherwise); else ensure_semaphore_held(),
                 held if it answers that slot (the library re-verifies A[slot]
                 and lets go of B[slot] if A[slot] is gone).
  release {slot} a definite "not held" if the library does not hold that
                 slot (its ensure_semaphore_released() would release whatever
                 it holds, or raise KeyError); else ensure_semaphore_released().
  create {slots} adjust_semaphore(slots): the library has no create, and adds
                 slots to any it finds (test_locks.py's --change). False (it
                 did not get the administration mutex) is a definite
                 "contended".
  change {delta} adjust_semaphore(delta); from is the count the library read
                 under its mutex (its _get_max_semaphore(), observed, not
                 changed), to is max(0, from + delta).
  count          the library has no count: its own primitives in
                 adjust_semaphore's order: _ensure_mutex_acquired(),
                 _get_max_semaphore(), _ensure_mutex_released().
  wait {slot}    the library has no wait: _ping("-B-<slot>") (its existence
                 probe) every 100 ms until it says the queue is gone.
  destroy        ensure_semaphore_destroyed(); from is the count it read
                 (_get_max_semaphore(overshoot=100), observed, minus 100).
                 If it did not get the mutex it silently does nothing: a
                 definite "contended".
mutex
  acquire        ensure_acquired(): True is acquire_ok, False acquire_fail
                 "held".
  verify         held:false if the library does not hold it (_has_lock());
                 else ensure_acquired() (paranoid: declares the queue again).
  release        "not held" if it does not hold it; else ensure_released().

Every exception the library lets out is an unknown outcome (an error without
"definite", code "library", with its class and text). The library's queues
are N-A-<L> (slots), N-B-<L> (holders) and N (the administration mutex, and
the true mutex).

Needs pika (apt install python3-pika; Debian 12 ships 1.2).
"""

import argparse
import logging
import math
import os
import sys
import time

# The process protocol's serve loop, which examples/python shares.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
from lockprover_serve import BadRequest, int_field, serve  # noqa: E402

log = logging.getLogger("amqp_locks_python")

WAIT_POLL = 0.1
WAIT_LIMIT = 80.0  # lockprover gives a wait 90 s


def checkout_dir(arg):
    path = arg or os.environ.get("LOCKPROVER_AMQP_LOCKS_PYTHON", "")
    if not path:
        raise SystemExit("amqp_locks_python.py: give the checkout of zbentley/amqp-locks-python "
                         "with --checkout PATH or $LOCKPROVER_AMQP_LOCKS_PYTHON")
    if not os.path.isfile(os.path.join(path, "rabbitlock", "semaphore.py")):
        raise SystemExit(f"amqp_locks_python.py: {path} has no rabbitlock/semaphore.py: "
                         "not a checkout of zbentley/amqp-locks-python")
    return path


class Definite(Exception):
    def __init__(self, code, text):
        super().__init__(text)
        self.code = code


class Recorder:
    """Observes what a method of the library returns (with its arguments),
    calling it unchanged."""

    def __init__(self, obj, name):
        self.calls = []
        original = getattr(obj, name)

        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            self.calls.append((args, kwargs, result))
            return result

        setattr(obj, name, wrapper)
        self.undo = lambda: delattr(obj, name)


class Server:
    def __init__(self, pika, rabbitlock_semaphore, rabbitlock_mutex):
        self.pika = pika
        self.Semaphore = rabbitlock_semaphore.Semaphore
        self.Mutex = rabbitlock_mutex.Mutex
        self.init = None
        self.lock = None

    # --- serve's hooks ------------------------------------------------------

    def answer(self, req):
        rid, kind = req.get("id"), req.get("type")
        try:
            if not isinstance(rid, int) or isinstance(rid, bool):
                return {"id": 0, "type": "error", "code": "bad request", "text": "id must be an integer",
                        "definite": True}
            if kind == "init":
                reply = self.start(req)
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
        except Definite as e:
            reply = {"type": "error", "code": e.code, "text": str(e), "definite": True}
        except Exception as e:  # whatever the library or pika let out: outcome unknown
            log.warning("%s #%s: outcome unknown: %s: %s", kind, rid, type(e).__name__, e)
            reply = {"type": "error", "code": "library", "text": f"{type(e).__module__}.{type(e).__name__}: {e!r}"}
        return {"id": rid, **reply}

    def idle(self):
        """Let pika send heartbeats and notice a closed connection between
        requests (the library never does: it is not a long-running server)."""
        conn = getattr(self.lock, "_connection", None) if self.lock is not None else None
        if conn is not None and conn.is_open:
            try:
                conn.process_data_events(0)
            except Exception as e:
                log.warning("while idle: %s: %s", type(e).__name__, e)

    def close(self):
        if self.lock is not None:
            try:
                self.lock._clear_channel()  # the library's own close of channel and connection
            except Exception:
                pass

    # --- init ---------------------------------------------------------------

    def start(self, req):
        if self.init is not None:
            raise BadRequest("init was already received")
        for field in ("client", "name", "url"):
            if not isinstance(req.get(field), str):
                raise BadRequest(f"init needs a string {field!r}")
        if req.get("lock") not in ("semaphore", "mutex"):
            return {"type": "error", "code": "unsupported", "definite": True,
                    "text": f"unknown lock kind {req.get('lock')!r}"}
        self.init = req
        try:
            self.made()
        except Exception as e:
            # The library connects when it is made; a fault may strike then.
            # Answer init_ok anyway (docs/protocol.md allows connecting
            # later): the first operation makes it again.
            log.warning("init: %s: %s", type(e).__name__, e)
        return {"type": "init_ok"}

    def parameters(self):
        params = self.pika.URLParameters(self.init["url"])
        ms = self.init.get("heartbeat_ms", 0) or 0
        params.heartbeat = math.ceil(ms / 1000) if ms else None
        params.connection_attempts = 1
        params.socket_timeout = 5
        params.client_properties = {"connection_name": f"lockprover {self.init['client']} {self.init['name']}"}
        return params

    def made(self):
        """The library's lock object, made (and so connected) if need be."""
        if self.lock is None:
            cls = self.Mutex if self.init["lock"] == "mutex" else self.Semaphore
            self.lock = cls(self.init["name"], self.parameters())
        return self.lock

    def handlers(self):
        if self.init["lock"] == "mutex":
            return {"acquire": self.mutex_acquire, "verify": self.mutex_verify, "release": self.mutex_release}
        return {"acquire": self.acquire, "verify": self.verify, "release": self.release,
                "create": self.create, "change": self.change, "count": self.count,
                "wait": self.wait, "destroy": self.destroy}

    # --- semaphore: clients -------------------------------------------------

    def acquire(self, req):
        slot = self.made().ensure_semaphore_held()
        if slot:
            return {"type": "acquire_ok", "slot": int(slot)}
        log.info("acquire: the library answered %r", slot)
        return {"type": "acquire_fail", "reason": "unavailable"}

    def verify(self, req):
        slot = int_field(req, "slot", 1)
        if self.lock is None or self.lock._held_semaphore() != slot:
            return {"type": "verify_ok", "held": False}
        return {"type": "verify_ok", "held": self.lock.ensure_semaphore_held() == slot}

    def release(self, req):
        slot = int_field(req, "slot", 1)
        if self.lock is None or self.lock._held_semaphore() != slot:
            raise Definite("not held", f"the library does not hold slot {slot}")
        self.lock.ensure_semaphore_released()
        return {"type": "release_ok"}

    # --- semaphore: admins --------------------------------------------------

    def adjust(self, delta):
        lock = self.made()
        rec = Recorder(lock, "_get_max_semaphore")
        try:
            ok = lock.adjust_semaphore(delta)
        finally:
            rec.undo()
        if not ok:
            raise Definite("contended", "the library did not get the administration mutex")
        before = rec.calls[0][2]
        return before, max(0, before + delta)

    def create(self, req):
        self.adjust(int_field(req, "slots", 0))
        return {"type": "create_ok"}

    def change(self, req):
        before, after = self.adjust(int_field(req, "delta", None))
        return {"type": "change_ok", "from": before, "to": after}

    def count(self, req):
        lock = self.made()
        try:
            if not lock._ensure_mutex_acquired():
                raise Definite("contended", "the library did not get the administration mutex")
            slots = lock._get_max_semaphore()
        finally:
            lock._ensure_mutex_released()
        return {"type": "count_ok", "slots": slots}

    def wait(self, req):
        slot = int_field(req, "slot", 1)
        lock = self.made()
        deadline = time.monotonic() + WAIT_LIMIT
        while lock._ping("-B-%d" % slot):
            if time.monotonic() > deadline:
                return {"type": "error", "code": "timeout", "text": f"B[{slot}] still exists"}
            time.sleep(WAIT_POLL)
        return {"type": "wait_ok"}

    def destroy(self, req):
        lock = self.made()
        rec = Recorder(lock, "_get_max_semaphore")
        try:
            lock.ensure_semaphore_destroyed()
        finally:
            rec.undo()
        if not rec.calls:
            raise Definite("contended", "the library did not get the administration mutex")
        args, kwargs, result = rec.calls[0]
        return {"type": "destroy_ok", "from": max(0, result - kwargs.get("overshoot", 0))}

    # --- true mutex ---------------------------------------------------------

    def mutex_acquire(self, req):
        if self.made().ensure_acquired():
            return {"type": "acquire_ok"}
        return {"type": "acquire_fail", "reason": "held"}

    def mutex_verify(self, req):
        if self.lock is None or not self.lock._has_lock(0):
            return {"type": "verify_ok", "held": False}
        return {"type": "verify_ok", "held": bool(self.lock.ensure_acquired())}

    def mutex_release(self, req):
        if self.lock is None or not self.lock._has_lock(0):
            raise Definite("not held", "the library does not hold the mutex")
        self.lock.ensure_released()
        return {"type": "release_ok"}


def main(argv=None):
    p = argparse.ArgumentParser(description="amqp-locks-python over lockprover's process protocol")
    p.add_argument("--checkout", help="a checkout of zbentley/amqp-locks-python (default $LOCKPROVER_AMQP_LOCKS_PYTHON)")
    p.add_argument("--pika-compat", action="store_true",
                   help="restore pika 0.x's basic_publish return value first (pika_compat.py)")
    opts = p.parse_args(argv)
    checkout = checkout_dir(opts.checkout)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("pika").setLevel(logging.CRITICAL)

    import pika
    if opts.pika_compat:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import pika_compat
        pika_compat.apply()
    sys.path.insert(0, os.path.abspath(checkout))
    import rabbitlock.mutex
    import rabbitlock.semaphore
    log.info("rabbitlock from %s, pika %s%s", os.path.dirname(rabbitlock.semaphore.__file__),
             pika.__version__, " with pika_compat" if opts.pika_compat else "")
    # The library prints ("Deleting 3", "Race condition victim!"), though
    # not as it loads: serve gives the replies a private copy of stdout,
    # and points file descriptor 1 at stderr.
    return serve(Server(pika, rabbitlock.semaphore, rabbitlock.mutex))


if __name__ == "__main__":
    sys.exit(main())
