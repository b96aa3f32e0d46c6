"""A deliberately wrong Redlock implementation of the process protocol,
for redlockprotocol's tests: it keeps its lock in its own memory (it never
talks to Redis) and misbehaves as MODE says:

  whole-ttl   every grant claims the whole ttl as its validity, with no
              elapsed time (a lock that subtracts neither the time the
              grant took nor the drift);
  no-token    acquire_ok without a token (a protocol error);
  exit-after-acquire
              the process exits right after its first acquire_ok.
"""
import json
import sys
import uuid

mode = sys.argv[1]
held = {}
for line in sys.stdin:
    req = json.loads(line)
    t, rid = req["type"], req["id"]
    if t == "init":
        out = {"type": "init_ok"}
    elif t == "acquire":
        token = uuid.uuid4().hex
        held[token] = True
        out = {"type": "acquire_ok", "token": token}
        if mode == "whole-ttl":
            out.update(validity_ms=req["ttl_ms"], elapsed_ms=0)
        if mode == "no-token":
            del out["token"]
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
