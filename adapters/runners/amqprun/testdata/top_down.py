#!/usr/bin/env python3
"""The Python example (examples/python, on PYTHONPATH) with an acquire that
scans from the top: it finds the highest slot (A[1], A[2], ... up to the
first missing), then tries the slots from there down to 1. The spec allows
scan orders other than "start at 1 and ascend"; validate-impl must take it.
"""

import sys

import amqp_locks as al
import lockprover_impl as impl


class TopDown(al.Semaphore):
    def _scan(self):
        c = self._client
        top = 0
        while c._exists(al.slot_queue(self.name, top + 1)):
            top += 1
        if top == 0:
            raise self._missing(1)
        for slot in range(top, 0, -1):
            holder = al.holder_queue(self.name, slot)
            if c._exists(holder):
                continue
            if not c._declare_exclusive(holder):
                return None
            if c._exists(al.slot_queue(self.name, slot)):
                return slot
            c._release(holder)  # removed while we took it: give it back
            break
        raise self._missing(top + 1)


impl.Server.semaphore = lambda self, client: TopDown(client, self.init["name"], plain_failure=self.plain_failure)

if __name__ == "__main__":
    sys.exit(impl.main())
