"""What the fake Semaphore and Mutex share: a connection made from pika
ConnectionParameters, as upstream's _SingleChannelConnection takes them, and
made again at the next operation once it is lost (as upstream does)."""

import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "python"))
import amqp_locks as al  # noqa: E402


def url_of(params):
    creds = params.credentials
    vhost = urllib.parse.quote(params.virtual_host, safe="")
    return (f"amqp://{urllib.parse.quote(creds.username, safe='')}:{urllib.parse.quote(creds.password, safe='')}"
            f"@{params.host}:{params.port}/{vhost}")


class Base:
    def __init__(self, name, parameters, paranoid=True, release_on_destroy=False):
        self.name = name
        self.parameters = parameters
        self._client = None
        self._live()

    def _live(self):
        if self._client is None or not self._client.is_open:
            if self._client is not None:
                self._client.close()
            self._forget()
            self._client = al.Client(url_of(self.parameters), heartbeat=self.parameters.heartbeat)
        return self._client

    def _forget(self):
        pass

    @property
    def _connection(self):
        return self._client._conn if self._client is not None else None

    def _clear_channel(self):
        if self._client is not None:
            self._client.close()
        self._forget()

    def _ensure_mutex_acquired(self):
        return self._live()._declare_exclusive(self.name)

    def _ensure_mutex_released(self):
        if self._client is not None and self._client.is_open:
            self._client._delete(self.name)
