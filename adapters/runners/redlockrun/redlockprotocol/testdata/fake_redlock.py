"""A deliberately wrong Redlock implementation of the process protocol,
for redlockprotocol's tests: it keeps its lock in its own memory (it never
talks to Redis) and misbehaves as MODE says:

  whole-ttl   every grant claims the whole ttl as its validity, with no
              elapsed time (a lock that subtracts neither the time the
              grant took nor the drift);
  no-token    acquire_ok without a token (a protocol error);
  exit-after-acquire
              the process exits right after its first acquire_ok;
  library-start
              every grant is made by a "library" that starts 20 ms after
              the process's own start and claims ttl(1-0.01) from its own
              start, with no margin (as redsync does): elapsed_ms,
              validity_ms and started_ms say so;
  over-claim-from-start
              the same, but the library claims its whole ttl from its
              start (it subtracts no drift): too much even from there;
  started-after-reply
              as library-start, but started_ms is 5 ms more than
              elapsed_ms (a protocol error);
  started-before-request
              as library-start, but elapsed_ms and started_ms are a
              second more: the process says it started before the request
              came (validate-impl's check of the call's times);
  hang-release
              a release is never answered (the process sleeps);
  reply-read-late
              every grant is honest (elapsed_ms and validity_ms as its
              library measured them, ttl(1-0.01) from the process's start)
              but its reply is written only after that validity ran out:
              as a loaded machine that does not run the reader delays it.
"""
import json
import sys
import time
import uuid

LIBRARY = ("library-start", "over-claim-from-start", "started-after-reply", "started-before-request")


def library_grant(ttl_ms, begin):
    """The claim of a library started 20 ms after begin."""
    time.sleep(0.02)
    lib = time.monotonic()
    until = lib + ttl_ms / 1000 * (1.0 if mode == "over-claim-from-start" else 0.99)
    time.sleep(0.005)  # the servers' round
    now = time.monotonic()
    out = {"validity_ms": (until - now) * 1000, "elapsed_ms": (now - begin) * 1000, "started_ms": (lib - begin) * 1000}
    if mode == "started-after-reply":
        out["started_ms"] = out["elapsed_ms"] + 5
    if mode == "started-before-request":
        out["elapsed_ms"] += 1000
        out["started_ms"] += 1000
    return out


mode = sys.argv[1]
held = {}
for line in sys.stdin:
    req = json.loads(line)
    t, rid = req["type"], req["id"]
    if t == "init":
        out = {"type": "init_ok"}
    elif t == "acquire":
        begin = time.monotonic()
        token = uuid.uuid4().hex
        held[token] = True
        out = {"type": "acquire_ok", "token": token}
        if mode == "whole-ttl":
            out.update(validity_ms=req["ttl_ms"], elapsed_ms=0)
        if mode in LIBRARY:
            out.update(library_grant(req["ttl_ms"], begin))
        if mode == "reply-read-late":
            now = time.monotonic()
            out.update(validity_ms=req["ttl_ms"] * 0.99 - (now - begin) * 1000, elapsed_ms=(now - begin) * 1000)
            time.sleep(req["ttl_ms"] / 1000 + 0.2)
        if mode == "no-token":
            del out["token"]
    elif t == "release" and mode == "hang-release":
        time.sleep(3600)
        continue
    elif t in ("refresh", "release"):
        if held.pop(req["token"], None) if t == "release" else held.get(req["token"]):
            out = {"type": t + "_ok"}
        else:
            out = {"type": t + "_fail", "reason": "expired"}
    else:
        out = {"type": "error", "code": "unsupported", "text": t, "definite": True}
    out["id"] = rid
    print(json.dumps(out), flush=True)
    if mode == "exit-after-acquire" and t == "acquire":
        sys.exit(3)
