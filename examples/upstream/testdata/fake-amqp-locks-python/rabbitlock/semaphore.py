"""A test double of rabbitlock.semaphore.Semaphore (see ../README.md)."""

from rabbitlock._base import Base, al


class Semaphore(Base):
    def _forget(self):
        self._slot = None

    def _held_semaphore(self):
        return self._slot

    def ensure_semaphore_held(self):
        c = self._live()
        if self._slot is not None:
            if al.Semaphore(c, self.name).verify(self._slot):
                return self._slot
            self._slot = None
            return None
        try:
            self._slot = al.Semaphore(c, self.name).acquire()
        except (al.Unavailable, al.Contended):
            return False
        return self._slot

    def ensure_semaphore_released(self):
        slot, self._slot = self._slot, None
        al.Semaphore(self._client, self.name).release(slot)

    def _get_max_semaphore(self, overshoot=0):
        return al.Admin(self._live(), self.name)._count() + overshoot

    def _ping(self, suffix):
        slot = int(suffix.rsplit("-", 1)[1])
        return self._live()._exists(al.holder_queue(self.name, slot))

    def adjust_semaphore(self, num):
        if not self._ensure_mutex_acquired():
            return False
        try:
            before = self._get_max_semaphore()
            after = max(0, before + num)
            for slot in range(before + 1, after + 1):
                self._client._declare_durable(al.slot_queue(self.name, slot))
            al.Admin(self._client, self.name)._delete_slots(after + 1, before)
        finally:
            self._ensure_mutex_released()
        return True

    def ensure_semaphore_destroyed(self):
        if not self._ensure_mutex_acquired():
            return
        try:
            before = self._get_max_semaphore(overshoot=100) - 100
            al.Admin(self._client, self.name)._delete_slots(1, before)
        finally:
            self._ensure_mutex_released()
