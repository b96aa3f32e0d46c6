"""The process protocol's serve loop, shared by the lease examples.

lockprover runs one process per client and speaks JSON lines to it: a
request on stdin, its reply on stdout, logs on stderr
(docs/protocol.md). serve() is that loop around a server object whose
answer(request) returns the reply: it keeps a private copy of stdout for
the replies (file descriptor 1 and sys.stdout then point at stderr, so
that nothing else can reach the reply stream), exits on SIGTERM (which
lockprover sends to a process that outlives its stdin), answers a line
that is not a JSON object with a definite "bad request", and closes the
server (if it has a close method) once stdin closes. BadRequest,
int_field and token_field are the request checks the examples share.
"""

import json
import logging
import os
import signal
import sys

log = logging.getLogger("lockprover_serve")


def serve(server):
    """Answers each request on stdin with server.answer(request) until
    stdin closes; returns the process's exit status (0)."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        for line in sys.stdin.buffer:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
            except ValueError:
                req = None
            if isinstance(req, dict):
                reply = server.answer(req)
            else:
                log.error("not a JSON object: %r", line[:200])
                reply = {"id": 0, "type": "error", "code": "bad request",
                         "text": "a request must be one JSON object", "definite": True}
            replies.write(json.dumps(reply, separators=(",", ":")) + "\n")
            replies.flush()
        log.info("stdin closed: exiting")
    finally:
        close = getattr(server, "close", None)
        if close is not None:
            close()
    return 0


class BadRequest(Exception):
    """A malformed request, which lockprover should never send: answered
    with a definite "bad request" error."""


def int_field(req, field):
    """The request's field, an integer of at least 1, or BadRequest."""
    value = req.get(field)
    if type(value) is not int or value < 1:
        raise BadRequest(f"{req.get('type')} needs an integer {field!r} >= 1")
    return value


def token_field(req):
    """The request's token, a non-empty string, or BadRequest."""
    value = req.get("token")
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{req.get('type')} needs a non-empty string 'token'")
    return value
