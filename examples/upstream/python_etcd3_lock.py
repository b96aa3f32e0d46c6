#!/usr/bin/python3
"""lockprover's process protocol for Consul's semaphore on etcd
(docs/protocol.md, "Consul's semaphore"; backend etcd, limit 1) served by
python-etcd3's Lock (etcd3.Lock), called through its public API and
unchanged: Debian's python3-etcd3 0.12.0. One process is one lockprover
client of one mutex.

    lockprover validate-impl --kind consul-semaphore --backend etcd --impl '/usr/bin/python3 examples/upstream/python_etcd3_lock.py'
    lockprover prove --kind consul-semaphore --target etcd --impl '/usr/bin/python3 examples/upstream/python_etcd3_lock.py'

Each acquire makes a new Lock on the semaphore's lock key (the Lock class
with its key prefix '/locks/' set to the plan's name, so that its one key
is NAME/.lock, the key lockprover watches) and the request's ttl in whole
seconds (at least 1; acquire_ok says the ttl granted when it differs):

  default         acquire(timeout=0): one try (the protocol's acquire never
                  waits); True is acquire_ok, False acquire_fail full;
  --with S        what `with lock:` does: __enter__, which calls
                  acquire(timeout=S) and ignores its answer; the block is
                  entered either way, so the adapter answers acquire_ok
                  either way (python-etcd3 #599). With Debian's tenacity
                  (8.x) acquire raises TypeError instead once a try failed
                  and it would wait: `with lock:` raises, its block does not
                  run, and the adapter answers a definite error.

The token is the Lock's lease ID (%016x). refresh is lock.refresh() (a
keepalive of the lease): a TTL of 0 in etcd's answer is refresh_fail
expired. verify is lock.is_acquired(). release is lock.release() (a
transaction that deletes the key if it holds this Lock's uuid): False is
release_fail expired; python-etcd3 does not revoke the lease, which
expires by itself. A limit other than 1 is a definite unsupported (a
mutex). Errors of the client (gRPC's, connection failures, timeouts) are
errors without definite: unknown outcomes. Each client has a gRPC timeout
of 2 s.
"""
import json
import sys

import etcd3

WITH = None
if "--with" in sys.argv[1:]:
    WITH = float(sys.argv[sys.argv.index("--with") + 1])


def main():
    sys.stderr.write("python-etcd3 %s Lock adapter: %s\n" % (
        etcd3.__version__, "acquire as `with lock:` (timeout %gs)" % WITH if WITH is not None else "acquire(timeout=0)"))
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
                if req.get("lock") != "consul-semaphore" or req.get("backend") != "etcd":
                    reply(rid, "error", code="unsupported", definite=True,
                          text="python-etcd3's Lock runs on etcd only")
                    continue
                host, port = req["addr"].rsplit(":", 1)
                client = etcd3.client(host=host, port=int(port), timeout=2)
                name = req["name"]
                reply(rid, "init_ok")
            elif client is None:
                reply(rid, "error", code="not initialised", definite=True)
            elif kind == "acquire":
                if req["limit"] != 1:
                    reply(rid, "error", code="unsupported", definite=True,
                          text="limit %d: python-etcd3's Lock is a mutex" % req["limit"])
                    continue
                ttl = max(1, -(-req["ttl_ms"] // 1000))
                lock = etcd3.Lock(".lock", ttl=ttl, etcd_client=client)
                lock.key = name + "/.lock"  # the Lock's one key: its prefix set to the plan's name
                if WITH is not None:
                    # What __enter__ does: its answer is ignored. With
                    # Debian's tenacity, acquire raises TypeError once a try
                    # failed and it would wait (its wait callback has the
                    # signature of older tenacity): `with lock:` then raises
                    # and its block does not run; no key was put.
                    try:
                        lock.acquire(timeout=WITH)
                    except TypeError as e:
                        reply(rid, "error", code="library-error", text=repr(e), definite=True)
                        continue
                    got = True
                else:
                    got = lock.acquire(timeout=0)
                if not got or lock.lease is None:
                    reply(rid, "acquire_fail", reason="full")
                    continue
                token = "%016x" % lock.lease.id
                locks[token] = lock
                fields = {"token": token}
                if ttl * 1000 != req["ttl_ms"]:
                    fields["ttl_ms"] = ttl * 1000
                reply(rid, "acquire_ok", **fields)
            elif kind in ("refresh", "verify", "release"):
                lock = locks.get(req.get("token"))
                if lock is None:
                    if kind == "verify":
                        reply(rid, "verify_ok", held=False)
                    else:
                        reply(rid, kind + "_fail", reason="expired")
                    continue
                if kind == "refresh":
                    resps = lock.refresh()
                    if resps and all(r.TTL > 0 for r in resps):
                        reply(rid, "refresh_ok")
                    else:
                        reply(rid, "refresh_fail", reason="expired")
                elif kind == "verify":
                    reply(rid, "verify_ok", held=bool(lock.is_acquired()))
                else:
                    if lock.release():
                        del locks[req["token"]]
                        reply(rid, "release_ok")
                    else:
                        reply(rid, "release_fail", reason="expired")
            else:
                reply(rid, "error", code="unsupported", definite=True)
        except Exception as e:  # gRPC errors, connection failures, timeouts
            reply(rid, "error", code="etcd", text=repr(e))


if __name__ == "__main__":
    main()
