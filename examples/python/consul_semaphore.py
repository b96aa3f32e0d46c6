#!/usr/bin/env python3
"""Consul's semaphore recipe in Python, on Consul's HTTP API with only the
standard library, and a server that lets lockprover prove it over the
process protocol (docs/protocol.md, "Consul's semaphore").

At most `limit` holders of a prefix at a time. Each grant holds a session
of its own, which Consul invalidates unless it is renewed within its TTL
(between one and two TTLs after the last renewal); the session's
Behavior is "delete", so its contender key goes with it. The recipe, as
Consul's guide "Semaphore" gives it:

  acquire  create a session; put the contender key <prefix>/<session>
           with ?acquire=<session>; read every key under the prefix
           (consistent); drop from the lock key's holders those whose
           contender key no longer has their session (dead holders); if
           fewer than limit are left, add ours and write the lock key
           <prefix>/.lock with a check-and-set on the ModifyIndex read,
           in one transaction with a check that our session still holds
           its contender key; a lost check-and-set reads again.
  refresh  renew the session (404: it is gone, the lease expired).
  verify   a consistent read: held while our session holds its contender
           key and is among the lock key's holders.
  release  take our holder out of the lock key (check-and-set, with the
           same check of our session), delete the contender key, destroy
           the session.

The fence of a grant is the lock key's ModifyIndex after the grant's
write (the transaction answers it): Consul's index increases with every
write, so later grants have larger fences. The lock key's value is the
one Consul's Go client (api/semaphore.go) writes: {"Limit": n,
"Holders": {session: true}}. The first acquire of a prefix sets its
limit; an acquire that asks another is refused (Mismatch).

Written from Consul's HTTP API documentation and the recipe, not from
lockprover's Go reference (package consulsem). Every HTTP call has a
timeout of its own (a partition holds the bytes both ways: the call must
not hang), one new connection a call.

Library use:

    sem = ConsulSemaphore("127.0.0.1:8500", "service/jobs")
    token, fence = sem.acquire(limit=3, ttl_ms=10000)  # raises Full, Mismatch
    sem.refresh(token)                                 # raises Expired
    held = sem.verify(token)
    sem.release(token)                                 # raises Expired

As a lockprover server (one process per client; JSON lines on stdin and
stdout, logs on stderr; exits 0 at EOF):

    python3 examples/python/consul_semaphore.py [--plain-put]

--plain-put is a deliberately broken variant, for tests that lockprover
catches it: the lock key is written without its check-and-set (a "set",
not a "cas"), so two contenders that read the same holders are both
granted the last slot. Only the consul backend is served: etcd is
refused with a definite "unsupported".
"""

import base64
import http.client
import json
import logging
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request

from lockprover_serve import BadRequest, int_field, serve, token_field

log = logging.getLogger("consul_semaphore")

# The flags Consul's Go client marks a semaphore's keys with
# (api.SemaphoreFlagValue).
FLAGS = 0xE0F69A2BAA414DE0

# How many check-and-sets an acquire or a release may lose to other
# writers before it gives up.
CAS_ATTEMPTS = 8

LOCK_KEY = ".lock"


class Failed(Exception):
    """The operation certainly did not take effect."""

    code = "failed"


class Full(Failed):
    """limit holders were alive."""

    code = "full"


class Expired(Failed):
    """The lease is not held: its session is gone, or it is not among the
    holders (released, pruned, never granted)."""

    code = "expired"


class Mismatch(Failed):
    """The lock key says another limit, or is not a semaphore's."""

    code = "mismatch"


class NotGranted(Failed):
    """The acquire took no slot, for a reason other than a full semaphore."""

    code = "not-granted"


class Unknown(Exception):
    """The outcome is unknown: a request went unanswered."""

    code = "unknown"


class HTTPFailure(Exception):
    """Consul answered a status the call did not expect."""


class ConsulSemaphore:
    """A client of the semaphore at prefix on the Consul agent at addr
    (host:port of its HTTP API). timeout bounds each HTTP call, in
    seconds."""

    def __init__(self, addr, prefix, timeout=2.0, plain_put=False):
        self.base = "http://" + addr
        self.prefix = prefix
        self.timeout = timeout
        self.plain_put = plain_put

    # -- HTTP --------------------------------------------------------------

    def call(self, method, path, query=None, body=None, ok=(200,)):
        """One HTTP call: the status and the decoded JSON body (None when
        empty). A status outside ok (and 404, 409, which callers read)
        raises HTTPFailure; a network error or timeout raises OSError."""
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (http.client.HTTPException, socket.timeout) as e:
            raise OSError(f"{method} {path}: {e}") from e
        if status not in ok and status not in (404, 409):
            raise HTTPFailure(f"{method} {path}: {status} {raw[:200]!r}")
        if not raw:
            return status, None
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def read(self):
        """Every key under the prefix, in one consistent read: the lock
        key's entry (None if absent) and, by key, the contender keys'
        sessions."""
        status, entries = self.call("GET", f"/v1/kv/{self.prefix}/", {"recurse": "", "consistent": ""})
        lock, sessions = None, {}
        for e in (entries if status == 200 and entries else []):
            if e["Key"] == f"{self.prefix}/{LOCK_KEY}":
                lock = e
            else:
                sessions[e["Key"]] = e.get("Session") or ""
        return lock, sessions

    def contender(self, token):
        return f"{self.prefix}/{token}"

    def write_lock(self, token, value, index):
        """Writes the lock key in a transaction that first checks that
        token's session holds its contender key: the new ModifyIndex;
        Expired if the session no longer holds it; None if the
        check-and-set lost (the index moved)."""
        kv = {"Verb": "cas", "Key": f"{self.prefix}/{LOCK_KEY}", "Flags": FLAGS, "Index": index,
              "Value": base64.b64encode(json.dumps(value).encode()).decode()}
        if self.plain_put:
            kv["Verb"] = "set"  # the deliberate defect: no check-and-set
            del kv["Index"]
        ops = [{"KV": {"Verb": "check-session", "Key": self.contender(token), "Session": token}}, {"KV": kv}]
        status, body = self.call("PUT", "/v1/txn", body=ops)
        if status == 200:
            for r in body.get("Results") or []:
                if r.get("KV", {}).get("Key") == kv["Key"]:
                    return r["KV"]["ModifyIndex"]
            raise HTTPFailure(f"PUT /v1/txn: no result for {kv['Key']}: {body!r}")
        if status == 409 and isinstance(body, dict):
            if any(e.get("OpIndex") == 0 for e in body.get("Errors") or []):
                raise Expired(f"session {token} no longer holds {self.contender(token)}")
            return None
        raise HTTPFailure(f"PUT /v1/txn: {status} {body!r}")

    def destroy(self, token):
        """Ends a session, its contender key with it, on a best-effort
        basis (a session left behind expires)."""
        try:
            self.call("PUT", f"/v1/session/destroy/{urllib.parse.quote(token, safe='')}")
        except (OSError, HTTPFailure) as e:
            log.warning("destroying session %s: %s (it expires)", token, e)

    # -- the semaphore -------------------------------------------------------

    def lock_value(self, lock, limit):
        """The lock key's holders and index, or Mismatch."""
        if lock is None:
            return {"Limit": limit, "Holders": {}}, 0
        try:
            value = json.loads(base64.b64decode(lock.get("Value") or ""))
            holders = value["Holders"] or {}
            theirs = value["Limit"]
        except (ValueError, KeyError, TypeError) as e:
            raise Mismatch(f"{lock['Key']} is not a semaphore's lock key ({e})") from e
        if lock.get("Flags") != FLAGS:
            raise Mismatch(f"{lock['Key']} has flags {lock.get('Flags')}, not a semaphore's")
        if theirs != limit:
            raise Mismatch(f"{lock['Key']} says limit {theirs}, not {limit}")
        return {"Limit": theirs, "Holders": dict(holders)}, lock["ModifyIndex"]

    def acquire(self, limit, ttl_ms):
        """Takes a slot: (token, fence). Full when limit holders are alive;
        Mismatch, NotGranted when it certainly took none; Unknown when the
        grant's write went unanswered."""
        try:
            _, session = self.call("PUT", "/v1/session/create", body={
                "Name": f"consul_semaphore.py {self.prefix}", "TTL": f"{ttl_ms}ms",
                "Behavior": "delete", "LockDelay": "0s"})
            token = session["ID"]
        except (OSError, HTTPFailure, KeyError, TypeError) as e:
            # No lock key write was sent: no slot taken (a session created
            # unanswered expires by itself).
            raise NotGranted(f"creating the session: {e}") from e
        try:
            return token, self.contend(token, limit)
        except Failed:
            self.destroy(token)
            raise
        except (OSError, HTTPFailure) as e:
            # Before the grant's write: certainly no slot.
            self.destroy(token)
            raise NotGranted(str(e)) from e

    def contend(self, token, limit):
        """The acquire once its session exists: the fence of the grant."""
        _, put = self.call("PUT", f"/v1/kv/{self.contender(token)}", {"acquire": token, "flags": FLAGS}, body={})
        if put is not True:
            raise NotGranted(f"Consul refused {self.contender(token)} to session {token}")
        for _ in range(CAS_ATTEMPTS):
            lock, sessions = self.read()
            value, index = self.lock_value(lock, limit)
            alive = {s for s in sessions.values() if s}
            value["Holders"] = {h: True for h in value["Holders"] if h in alive}  # prune the dead
            if len(value["Holders"]) >= limit:
                raise Full(f"{len(value['Holders'])} of {limit} slots held")
            value["Holders"][token] = True
            try:
                fence = self.write_lock(token, value, index)
            except Expired as e:
                raise NotGranted(str(e)) from e
            except (OSError, HTTPFailure) as e:
                raise Unknown(f"the grant's write went unanswered: {e}") from e
            if fence is not None:
                return fence
        raise NotGranted(f"lost the check-and-set of the lock key {CAS_ATTEMPTS} times")

    def refresh(self, token):
        """Renews the lease's session; Expired when it is gone."""
        status, _ = self.call("PUT", f"/v1/session/renew/{urllib.parse.quote(token, safe='')}")
        if status == 404:
            raise Expired(f"session {token} is gone")

    def verify(self, token):
        """Whether the lease is held: its session holds its contender key
        and it is among the holders, in one consistent read."""
        lock, sessions = self.read()
        if lock is None or sessions.get(self.contender(token)) != token:
            return False
        try:
            holders = json.loads(base64.b64decode(lock.get("Value") or ""))["Holders"] or {}
        except (ValueError, KeyError, TypeError):
            return False
        return token in holders

    def release(self, token):
        """Takes the holder out, deletes its contender key, destroys its
        session; Expired when it was not held."""
        for _ in range(CAS_ATTEMPTS):
            lock, sessions = self.read()
            if lock is None or sessions.get(self.contender(token)) != token:
                raise Expired(f"session {token} does not hold {self.contender(token)}")
            try:
                value = json.loads(base64.b64decode(lock.get("Value") or ""))
                holders = value["Holders"] or {}
            except (ValueError, KeyError, TypeError) as e:
                raise Expired(f"{lock['Key']} is not a semaphore's lock key") from e
            if token not in holders:
                raise Expired(f"{token} is not among the holders")
            value["Holders"] = {h: True for h in holders if h != token}
            if self.write_lock(token, value, lock["ModifyIndex"]) is not None:
                # Released: what is left is tidying up, which its session's
                # end (Behavior delete) would do too.
                try:
                    self.call("DELETE", f"/v1/kv/{self.contender(token)}")
                except (OSError, HTTPFailure) as e:
                    log.warning("deleting %s: %s (its session's end deletes it)", self.contender(token), e)
                self.destroy(token)
                return
        raise Unknown(f"lost the check-and-set of the lock key {CAS_ATTEMPTS} times")


# -- the lockprover server -----------------------------------------------------


class Server:
    """One lockprover process: a client of one prefix."""

    def __init__(self, plain_put=False):
        self.plain_put = plain_put
        self.sem = None

    def answer(self, req):
        rid, kind = req.get("id"), req.get("type")
        if not isinstance(rid, int) or isinstance(rid, bool):
            return {"id": 0, "type": "error", "code": "bad request", "text": "id must be an integer", "definite": True}
        try:
            reply = self.serve(kind, req)
        except BadRequest as e:
            reply = {"type": "error", "code": "bad request", "text": str(e), "definite": True}
        except Full:
            reply = {"type": "acquire_fail", "reason": "full"}
        except Expired:
            reply = {"type": f"{kind}_fail", "reason": "expired"}
        except Failed as e:  # Mismatch, NotGranted: certainly no effect
            log.warning("%s #%s: %s", kind, rid, e)
            reply = {"type": "error", "code": e.code, "text": str(e), "definite": True}
        except (Unknown, OSError, HTTPFailure) as e:
            log.warning("%s #%s: outcome unknown: %s", kind, rid, e)
            reply = {"type": "error", "code": "unknown", "text": str(e)}
        except Exception as e:  # a bug here: outcome unknown
            log.exception("%s #%s failed", kind, rid)
            reply = {"type": "error", "code": "internal", "text": f"{type(e).__name__}: {e}"}
        return {"id": rid, **reply}

    def serve(self, kind, req):
        if kind == "init":
            return self.start(req)
        if self.sem is None:
            return {"type": "error", "code": "not initialised", "text": "the first request must be init", "definite": True}
        if kind == "acquire":
            int_field(req, "limit")
            self.sem.timeout = call_timeout(int_field(req, "ttl_ms"))
            token, fence = self.sem.acquire(req["limit"], req["ttl_ms"])
            return {"type": "acquire_ok", "token": token, "fence": fence}
        if kind == "refresh":
            self.sem.refresh(token_field(req))
            return {"type": "refresh_ok"}
        if kind == "verify":
            return {"type": "verify_ok", "held": self.sem.verify(token_field(req))}
        if kind == "release":
            self.sem.release(token_field(req))
            return {"type": "release_ok"}
        return {"type": "error", "code": "unsupported", "text": f"unsupported request type {kind!r}", "definite": True}

    def start(self, req):
        if self.sem is not None:
            raise BadRequest("init was already received")
        for field in ("client", "name", "backend", "addr"):
            if not isinstance(req.get(field), str) or not req[field]:
                raise BadRequest(f"init needs a non-empty string {field!r}")
        if req.get("lock") != "consul-semaphore":
            return {"type": "error", "code": "unsupported",
                    "text": f"lock kind {req.get('lock')!r}: this server serves consul-semaphore", "definite": True}
        if req["backend"] != "consul":
            return {"type": "error", "code": "unsupported",
                    "text": f"backend {req['backend']!r}: this implementation speaks Consul's HTTP API only", "definite": True}
        int_field(req, "limit")
        self.sem = ConsulSemaphore(req["addr"], req["name"], call_timeout(int_field(req, "ttl_ms")), self.plain_put)
        return {"type": "init_ok"}


def call_timeout(ttl_ms):
    """Each HTTP call's bound: the session's TTL, at least a second and at
    most five; a call held longer than a TTL would answer too late to
    matter."""
    return min(max(ttl_ms / 1000, 1.0), 5.0)


def main(argv):
    plain_put = "--plain-put" in argv[1:]
    unknown = [a for a in argv[1:] if a != "--plain-put"]
    if unknown:
        print(f"usage: consul_semaphore.py [--plain-put] (unknown {unknown})", file=sys.stderr)
        return 2
    return serve(Server(plain_put))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
