"""The pika 0.x API that zbentley/amqp-locks-python was written against,
where pika 1.x changed it. Nothing here is about locking.

amqp-locks-python (2016) calls pika's BlockingConnection API as pika 0.10
and 0.11 had it. Going through every pika call the library makes
(rabbitlock/mutex.py, rabbitlock/semaphore.py at 7da8e94) against pika 1.x,
one changed its meaning; apply() restores it, and only it:

1. BlockingChannel.basic_publish on a channel in confirm mode
   (the library calls confirm_delivery() on every channel it opens, and
   publishes with mandatory=True in _InternalMutex._ping):
   - pika 0.10/0.11: returns True if the broker acked the message and did
     not return it, False if it returned it (basic.return: no queue had the
     routing key) or nacked it. The library relies on this: `if
     self._ping(...)` is "the queue exists".
   - pika 1.x: returns None on success and raises
     pika.exceptions.UnroutableError (returned) or NackError (nacked);
     BlockingChannel.publish, 0.x's raising variant, is gone.
   apply() wraps 1.x's basic_publish: True where it returns, False where it
   raises UnroutableError or NackError; anything else propagates unchanged.

The other calls the library makes are unchanged in meaning between 0.10 and
1.x, and are left alone: BlockingConnection(parameters), connection.channel(),
channel.confirm_delivery(), queue_declare(queue=..., durable=...,
exclusive=..., auto_delete=..., arguments=...), queue_delete(queue) (0.x's
first parameter was also queue), channel.close(), connection.close(),
is_open on both, BasicProperties(delivery_mode=1), and the exceptions
ChannelClosed (args[0] is the reply code in both: 405 RESOURCE_LOCKED) and
ConnectionClosed (args[0] is the reply code in both). Not bridged, and
noted in docs/verdicts.md: pika 1.x reports a connection that broke under a
call as StreamLostError (not a ConnectionClosed), and a call on a closed
channel as ChannelWrongStateError; the library's `except ConnectionClosed`
clauses do not see those. The adapter reports every exception the library
lets out as an unknown outcome, whatever its class.
"""

import pika
import pika.exceptions
from pika.adapters import blocking_connection

_applied = False


def apply():
    """Make BlockingChannel.basic_publish return pika 0.x's bool."""
    global _applied
    if _applied:
        return
    original = blocking_connection.BlockingChannel.basic_publish

    def basic_publish(self, *args, **kwargs):
        try:
            original(self, *args, **kwargs)
        except (pika.exceptions.UnroutableError, pika.exceptions.NackError):
            return False
        return True

    basic_publish.__doc__ = "pika 0.x's basic_publish: True if delivered, False if returned or nacked."
    blocking_connection.BlockingChannel.basic_publish = basic_publish
    _applied = True
