#!/usr/bin/env python3
"""Shows, with amqp-locks-python's own calls and nothing of lockprover's,
what an administrator meets when another holds the administration mutex
(docs/verdicts.md, "available: an admin that meets another admin").

    LOCKPROVER_AMQP_LOCKS_PYTHON=/path/to/checkout /usr/bin/python3 examples/upstream/contended_admin.py [AMQP_URL]

Admin A takes the semaphore's administration mutex (the library's
_ensure_mutex_acquired); admin B then calls adjust_semaphore(1) and
ensure_semaphore_destroyed(). pika_compat is applied first (the library
cannot make a semaphore on pika 1.x without it).
"""

import os
import sys

import pika

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import pika_compat  # noqa: E402

pika_compat.apply()
checkout = os.environ.get("LOCKPROVER_AMQP_LOCKS_PYTHON", "")
if not os.path.isfile(os.path.join(checkout, "rabbitlock", "semaphore.py")):
    sys.exit("set LOCKPROVER_AMQP_LOCKS_PYTHON to a checkout of zbentley/amqp-locks-python")
sys.path.insert(0, os.path.abspath(checkout))
from rabbitlock.semaphore import Semaphore  # noqa: E402

params = pika.URLParameters(sys.argv[1] if len(sys.argv) > 1 else "amqp://guest:guest@127.0.0.1:5672/")
name = "lp-upstream-contended-%d" % os.getpid()
a = Semaphore(name, params)
print("admin A _ensure_mutex_acquired() ->", a._ensure_mutex_acquired())
b = Semaphore(name, params)
for call in ("adjust_semaphore(1)", "ensure_semaphore_destroyed()"):
    try:
        print(f"admin B {call} ->", eval("b." + call))
    except Exception as e:
        print(f"admin B {call} raised {type(e).__name__}: {e}")
a._ensure_mutex_released()  # deletes the mutex and closes A's connection
