#!/usr/bin/env python3
"""A minimal lock implementation proven by lockprover: a lease lock on one
Redis server, with its adapter to lockprover's process protocol, in one
file and the Python standard library alone.

The lock: acquire is SET key token NX PX ttl; refresh and release run a
script that touches the key only while it still holds our token.
With --unsafe-release, release is a plain DEL (a common bug: it deletes
whoever holds the lock now); lockprover catches it.

Run it as lockprover does, one process per client (prove on the simulated
Redis servers served on the wire; validate-impl, and prove --target redis,
on private redis-servers):
    lockprover prove --kind redlock --servers 1 --impl 'python3 examples/minimal/redis_lock.py'
    lockprover validate-impl --kind redlock --impl 'python3 examples/minimal/redis_lock.py'
The protocol (docs/protocol.md, "Redlock"): one JSON request a line on
stdin, one reply a line on stdout, each echoing the request's id.
"""
import json
import os
import socket
import sys
import time

UNSAFE_RELEASE = "--unsafe-release" in sys.argv[1:]

REFRESH = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end"
RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"


class Redis:
    """Just enough of a Redis client: one connection, RESP2 commands."""

    def __init__(self, addr, timeout):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.buf = self.sock.makefile("rb")

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self.read()

    def read(self):
        line = self.buf.readline()
        if not line:
            raise ConnectionError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.buf.read(n + 2)[:-2].decode()
        raise ConnectionError("unexpected reply %r" % line)


class Lock:
    """The lock itself: what an application would import."""

    def __init__(self, addr, key):
        self.addr, self.key, self.conn = addr, key, None

    def redis(self):
        if self.conn is None:
            self.conn = Redis(self.addr, timeout=2)
        return self.conn

    def run(self, *cmd):
        try:
            return self.redis().call(*cmd)
        except (OSError, ConnectionError):
            self.conn = None  # connect again at the next call
            raise

    def acquire(self, ttl_ms):
        token = os.urandom(16).hex()
        ok = self.run("SET", self.key, token, "NX", "PX", ttl_ms)
        return token if ok == "OK" else None

    def refresh(self, token, ttl_ms):
        return self.run("EVAL", REFRESH, 1, self.key, token, ttl_ms) == 1

    def release(self, token):
        if UNSAFE_RELEASE:
            return self.run("DEL", self.key) == 1
        return self.run("EVAL", RELEASE, 1, self.key, token) == 1


def serve(requests, reply):
    """The adapter: lockprover's requests to the lock's calls."""
    lock = None
    for line in requests:
        req = json.loads(line)
        rid, kind = req["id"], req["type"]
        try:
            if kind == "init":
                if req["lock"] != "redlock":
                    reply(rid, "error", code="unsupported", definite=True)
                    continue
                lock = Lock(req["addrs"][0], req["name"])
                reply(rid, "init_ok")
            elif kind == "acquire":
                start = time.monotonic()
                token = lock.acquire(req["ttl_ms"])
                if token is None:
                    reply(rid, "acquire_fail", reason="held")
                else:
                    # The lease is ours for ttl from before we sent SET,
                    # less 1% for the clocks' drift.
                    elapsed = (time.monotonic() - start) * 1000
                    validity = req["ttl_ms"] * 0.99 - elapsed
                    if validity > 0:
                        reply(rid, "acquire_ok", token=token, elapsed_ms=elapsed,
                              validity_ms=validity)
                    else:
                        # SET took the whole ttl: the key may have expired
                        # already and gone to another. Claim nothing; the
                        # key is left to expire (no definite: it may stay).
                        reply(rid, "error", code="no_validity",
                              text="SET took %.0f ms of a ttl of %d ms" % (elapsed, req["ttl_ms"]))
            elif kind == "refresh":
                if lock.refresh(req["token"], req["ttl_ms"]):
                    reply(rid, "refresh_ok")
                else:
                    reply(rid, "refresh_fail", reason="expired")
            elif kind == "release":
                if lock.release(req["token"]):
                    reply(rid, "release_ok")
                else:
                    reply(rid, "release_fail", reason="expired")
            else:
                reply(rid, "error", code="unsupported", definite=True)
        except (OSError, ConnectionError) as e:
            # Whether the command took effect is not known: no definite.
            reply(rid, "error", code="redis", text=str(e))


def main():
    def reply(rid, kind, **fields):
        sys.stdout.write(json.dumps(dict(id=rid, type=kind, **fields)) + "\n")
        sys.stdout.flush()

    serve(sys.stdin, reply)


if __name__ == "__main__":
    main()
