"""redis-py's own Lock (redis.lock.Lock) against one Redis server.

Usage: redispy_lock.py HOST:PORT

Acquires, extends, reacquires and releases a lock with the library's Lua
scripts (EVALSHA, falling back to SCRIPT LOAD), sees a second lock refused
while it is held and a second release refused once it is not, and prints
what each step gave, one line of JSON.
"""
import json
import sys

import redis
from redis.exceptions import LockNotOwnedError

host, port = sys.argv[1].rsplit(":", 1)
r = redis.Redis(host=host, port=int(port), socket_timeout=5)
out = {"version": redis.__version__}
lock = r.lock("res", timeout=2, blocking_timeout=1)
out["acquire"] = lock.acquire()
out["owned"] = lock.owned()
out["extend"] = lock.extend(1)
out["pttl_after_extend"] = r.pttl("res")
other = r.lock("res", timeout=2, blocking_timeout=0.05)
out["other_acquire"] = other.acquire()
out["reacquire"] = lock.reacquire()
out["pttl_after_reacquire"] = r.pttl("res")
token = lock.local.token
lock.release()
out["exists_after_release"] = r.exists("res")
try:
    lock.local.token = token  # released: the script must refuse it
    lock.release()
    out["second_release"] = "released"
except LockNotOwnedError:
    out["second_release"] = "LockNotOwnedError"
print(json.dumps(out, sort_keys=True))
