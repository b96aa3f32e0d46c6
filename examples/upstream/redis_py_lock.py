#!/usr/bin/env python3
"""lockprover's process protocol for Redlock (docs/protocol.md, "Redlock")
served by redis-py's Lock (redis.lock.Lock, Debian python3-redis 4.3.4),
called through its public API and unchanged: one process is one
lockprover client of one key.

    lockprover validate-impl --kind redlock --impl '/usr/bin/python3 examples/upstream/redis_py_lock.py'
    lockprover prove --target redis --kind redlock --servers 1 --impl '/usr/bin/python3 examples/upstream/redis_py_lock.py'

redis-py's Lock is a single-instance lock: the adapter connects to the
first address of init's addrs only (every client of a plan does); prove
it with --servers 1, so that every fault drawn falls on its server. The
client is redis.Redis(host, port, socket_timeout=10): redis-py has no
timeout by default, and a command stuck on a partitioned server must
answer before lockprover gives up on the process (30 s).

Each acquire makes a new Lock, as a user does for each lock taken:
Lock(client, name, timeout=ttl_ms/1000, blocking=False) and acquire()
(the protocol's acquire never waits); True is acquire_ok, its token the
Lock's own (lock.local.token, uuid1 hex), False acquire_fail held. The
Lock of each grant is kept by token: refresh sets its timeout to the
request's ttl and calls reacquire() (--extend: extend(ttl, replace_ttl=True);
--extend-add: extend(ttl), the library's default, which adds ttl to what the
key has left), release calls release(). LockNotOwnedError is refresh_fail or release_fail
expired; any other error (redis.exceptions.ConnectionError, TimeoutError)
an error without definite: an unknown outcome. redis-py claims no
validity (it keeps no clock for a lease): no validity_ms; tokens are
random: no fence. A refresh or release of a token this process never
granted answers expired without calling the library.
"""
import json
import sys

import redis
from redis.exceptions import LockNotOwnedError

EXTEND = "--extend" in sys.argv[1:]
EXTEND_ADD = "--extend-add" in sys.argv[1:]


class Adapter:
    def __init__(self):
        self.client = None
        self.name = None
        self.locks = {}

    def init(self, req):
        if req.get("lock") != "redlock":
            return {"type": "error", "code": "unsupported", "definite": True,
                    "text": "lock kind %r: this adapter serves redlock" % req.get("lock")}
        addrs = req.get("addrs") or []
        if not req.get("name") or not addrs:
            return {"type": "error", "code": "bad request", "definite": True,
                    "text": 'init needs "name" and "addrs"'}
        host, port = addrs[0].rsplit(":", 1)
        self.client = redis.Redis(host=host, port=int(port), socket_timeout=10)
        self.name = req["name"]
        return {"type": "init_ok"}

    def acquire(self, req):
        lock = self.client.lock(self.name, timeout=req["ttl_ms"] / 1000, blocking=False)
        if not lock.acquire():
            return {"type": "acquire_fail", "reason": "held"}
        token = lock.local.token.decode()
        self.locks[token] = lock
        return {"type": "acquire_ok", "token": token}

    def refresh(self, req):
        lock = self.locks.get(req["token"])
        if lock is None:
            return {"type": "refresh_fail", "reason": "expired"}
        # A Lock that released forgot its token: extend and reacquire
        # raise LockError without asking Redis.
        if lock.local.token is None:
            return {"type": "refresh_fail", "reason": "expired"}
        try:
            if EXTEND:
                lock.extend(req["ttl_ms"] / 1000, replace_ttl=True)
            elif EXTEND_ADD:
                lock.extend(req["ttl_ms"] / 1000)
            else:
                lock.timeout = req["ttl_ms"] / 1000
                lock.reacquire()
        except LockNotOwnedError:
            return {"type": "refresh_fail", "reason": "expired"}
        return {"type": "refresh_ok"}

    def release(self, req):
        lock = self.locks.get(req["token"])
        if lock is None:
            return {"type": "release_fail", "reason": "expired"}
        # release() forgets the token before it asks Redis (even when the
        # command then fails): a second release of this Lock raises
        # LockError without asking Redis, which is expired too.
        if lock.local.token is None:
            return {"type": "release_fail", "reason": "expired"}
        try:
            lock.release()
        except LockNotOwnedError:
            return {"type": "release_fail", "reason": "expired"}
        return {"type": "release_ok"}

    def handle(self, req):
        kind = req.get("type")
        if kind == "init":
            if self.client is not None:
                return {"type": "error", "code": "bad request", "definite": True, "text": "init was already received"}
            return self.init(req)
        if kind not in ("acquire", "refresh", "release"):
            return {"type": "error", "code": "unsupported", "definite": True, "text": "request type %r" % kind}
        if self.client is None:
            return {"type": "error", "code": "not initialised", "definite": True, "text": "the first request must be init"}
        if kind != "acquire" and not (isinstance(req.get("token"), str) and req["token"]):
            return {"type": "error", "code": "bad request", "definite": True, "text": '"token" must be a non-empty string'}
        if kind != "release" and not (isinstance(req.get("ttl_ms"), int) and req["ttl_ms"] > 0):
            return {"type": "error", "code": "bad request", "definite": True, "text": '"ttl_ms" must be a positive integer'}
        try:
            return getattr(self, kind)(req)
        except redis.exceptions.RedisError as e:
            # Whether the command took effect is not known: no definite.
            sys.stderr.write("%s: %s: %r\n" % (self.name, kind, e))
            return {"type": "error", "code": "redis", "text": repr(e)}


def main():
    sys.stderr.write("redis-py Lock adapter: redis-py %s, refresh by %s\n"
                     % (redis.__version__, "extend(replace_ttl=True)" if EXTEND else "extend()" if EXTEND_ADD else "reacquire()"))
    a = Adapter()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            rid = req["id"]
        except (ValueError, KeyError, TypeError):
            sys.stderr.write("a request that is not a JSON object with an id: %s" % line)
            continue
        reply = a.handle(req)
        reply["id"] = rid
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
