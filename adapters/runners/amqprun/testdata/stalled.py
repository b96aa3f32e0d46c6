#!/usr/bin/env python3
"""The Python example (examples/python, on PYTHONPATH) with the top-down
scan (top_down.py, beside this file), whose client c1, once it has answered
its first acquire_ok, does not run for STALL seconds (default 9): no reads,
no heartbeats, as a process starved on a loaded machine does. lockprover is
not told. With --lying, its verify answers from its own memory (held if it
acquired the slot and did not release it), as a wrong implementation
would.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockprover_impl as impl  # noqa: E402
import top_down  # noqa: E402,F401  (installs the top-down scan)

STALL = float(os.environ.get("STALL", "9"))
LYING = "--lying" in sys.argv
if LYING:
    sys.argv.remove("--lying")

handle, recover = impl.Server.handle, impl.Server.recover
held = set()


def stalling_handle(self, req):
    if LYING and req.get("type") == "verify":
        return {"id": req["id"], "type": "verify_ok", "held": req.get("slot") in held}
    reply = handle(self, req)
    kind = reply.get("type")
    if kind == "acquire_ok":
        held.add(reply["slot"])
        if self.init and self.init.get("client") == "c1" and not getattr(impl, "stalled", False):
            impl.stalled = True
            self.stall_next = True
    if kind == "release_ok" or req.get("type") == "release" and reply.get("code") == "not held":
        held.discard(req.get("slot"))
    return reply


def stalling_recover(self):
    # recover runs after each reply is written: the stall comes after c1
    # has answered its acquire.
    if getattr(self, "stall_next", False):
        self.stall_next = False
        time.sleep(STALL)
    return recover(self)


impl.Server.handle, impl.Server.recover = stalling_handle, stalling_recover

if __name__ == "__main__":
    sys.exit(impl.main())
