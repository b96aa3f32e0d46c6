#!/usr/bin/python3
"""lockprover's process protocol for Redlock (docs/protocol.md, "Redlock")
served by redis-py's Lock (redis.lock.Lock), called through its public API
and unchanged: Debian's python3-redis (4.3.4 on bookworm). One process is
one lockprover client of one key, on the first server init names.

    lockprover validate-impl --kind redlock --impl '/usr/bin/python3 examples/upstream/redis_py_lock.py'
    lockprover prove --kind redlock --servers 1 --impl '/usr/bin/python3 examples/upstream/redis_py_lock.py'

Each acquire makes a new Lock, as a redis-py user does for each lock taken:
redis.Redis(...).lock(name, timeout=ttl) and acquire(blocking=False) (the
protocol's acquire never waits; --blocking-timeout-ms N acquires with
blocking=True, blocking_timeout=N ms instead, the library polling every
--sleep-ms). The token is the one the Lock made (its local.token, a uuid1),
and refresh and release call the Lock that token names:

  --refresh extend     (default) extend(ttl, replace_ttl=True): the key
                       lives ttl from now, as the protocol's refresh means;
  --refresh extend-add extend(ttl), the library's default: ttl is ADDED to
                       what the key had left;
  --refresh reacquire  lock.timeout = ttl, then reacquire(): the key's TTL
                       reset to the lock's timeout.

Results: acquire True is acquire_ok, False acquire_fail held; a refresh or
release that raises LockNotOwnedError is _fail expired; redis.ConnectionError
and redis.TimeoutError (the command may or may not have run) are errors
without definite: unknown outcome. A token released successfully is
forgotten: a refresh or release of it, or of a token this process never
granted, answers expired without calling redis-py. A Lock whose release
failed with an unknown outcome has no token left (redis-py clears it before
it sends the release script), so a refresh or release of it raises
LockError: answered as an error with definite (the library did nothing,
and the lease's state is unknown), and logged on stderr. No validity is
claimed (redis-py claims none) and no fence is given.

Each client is redis.Redis(host, port, socket_timeout=2, socket_connect_timeout=2)
with redis-py's defaults otherwise (no retry); lockprover waits 30 s.
"""
import argparse
import json
import sys

import redis
from redis.exceptions import LockError, LockNotOwnedError


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--refresh", choices=["extend", "extend-add", "reacquire"], default="extend")
    ap.add_argument("--blocking-timeout-ms", type=int, default=0)
    ap.add_argument("--sleep-ms", type=int, default=100)
    args = ap.parse_args()
    sys.stderr.write("redis-py %s Lock adapter: refresh by %s, blocking timeout %d ms\n"
                     % (redis.__version__, args.refresh, args.blocking_timeout_ms))

    client, name, locks = None, None, {}

    def reply(rid, kind, **fields):
        sys.stdout.write(json.dumps(dict(id=rid, type=kind, **fields)) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        try:
            req = json.loads(line)
            rid, kind = req["id"], req["type"]
        except (ValueError, KeyError, TypeError):
            sys.stderr.write("not a request: %r\n" % line)
            continue
        try:
            if kind == "init":
                if req.get("lock") != "redlock" or not req.get("addrs"):
                    reply(rid, "error", code="unsupported", definite=True,
                          text="redis-py's Lock is a lock on one Redis server")
                    continue
                host, port = req["addrs"][0].rsplit(":", 1)
                client = redis.Redis(host=host, port=int(port), socket_timeout=2,
                                     socket_connect_timeout=2)
                name = req["name"]
                reply(rid, "init_ok")
            elif client is None:
                reply(rid, "error", code="not initialised", definite=True)
            elif kind == "acquire":
                lock = client.lock(name, timeout=req["ttl_ms"] / 1000.0,
                                   sleep=args.sleep_ms / 1000.0)
                if args.blocking_timeout_ms > 0:
                    got = lock.acquire(blocking=True, blocking_timeout=args.blocking_timeout_ms / 1000.0)
                else:
                    got = lock.acquire(blocking=False)
                if got:
                    token = lock.local.token.decode()
                    locks[token] = lock
                    reply(rid, "acquire_ok", token=token)
                else:
                    reply(rid, "acquire_fail", reason="held")
            elif kind in ("refresh", "release"):
                lock = locks.get(req.get("token"))
                if lock is None:
                    reply(rid, kind + "_fail", reason="expired")
                    continue
                try:
                    if kind == "release":
                        lock.release()
                        # The Lock holds no token now: later calls on it
                        # raise LockError; the lease is certainly not ours.
                        del locks[req["token"]]
                    elif args.refresh == "extend":
                        lock.extend(req["ttl_ms"] / 1000.0, replace_ttl=True)
                    elif args.refresh == "extend-add":
                        lock.extend(req["ttl_ms"] / 1000.0)
                    else:
                        lock.timeout = req["ttl_ms"] / 1000.0
                        lock.reacquire()
                    reply(rid, kind + "_ok")
                except LockNotOwnedError:
                    reply(rid, kind + "_fail", reason="expired")
                except LockError as e:
                    sys.stderr.write("%s of %s: LockError: %s\n" % (kind, req.get("token"), e))
                    reply(rid, "error", code="lock-error", text=str(e), definite=True)
            else:
                reply(rid, "error", code="unsupported", definite=True)
        except (redis.ConnectionError, redis.TimeoutError) as e:
            # Whether the command took effect is not known: no definite.
            reply(rid, "error", code="redis", text=str(e))


if __name__ == "__main__":
    main()
