"""A test double of rabbitlock.mutex.Mutex (see ../README.md)."""

from rabbitlock._base import Base, al


class Mutex(Base):
    def _forget(self):
        self._held = False

    def _has_lock(self, num=0):
        return self._held

    def ensure_acquired(self):
        c = self._live()
        if self._held:
            return al.Mutex(c, self.name).verify()
        try:
            al.Mutex(c, self.name).acquire()
        except al.Held:
            return False
        self._held = True
        return True

    def ensure_released(self):
        self._held = False
        al.Mutex(self._client, self.name).release()
