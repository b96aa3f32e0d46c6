"""The process protocol's serve loop, shared by every Python server here.

lockprover runs one process per client and speaks JSON lines to it: a
request on stdin, its reply on stdout, logs on stderr
(docs/protocol.md). serve() is that loop around a server object whose
answer(request) returns the reply: it keeps a private copy of stdout for
the replies (file descriptor 1 and sys.stdout then point at stderr, so
that nothing else can reach the reply stream), exits on SIGTERM (which
lockprover sends to a process that outlives its stdin), answers a line
that is not a JSON object with a definite "bad request", and closes the
server (if it has a close method) once stdin closes.

A server may have three more hooks, each optional: idle(), called
whenever no request has come for IDLE_POLL seconds (a client library
that must send heartbeats, or notice a lost connection between
requests); replied(), called once each reply is written; and exit_code,
which, once not None after a reply, ends the loop with that status.

BadRequest, int_field and token_field are the request checks the servers
share. The examples in examples/upstream import this file from here, by
a path computed from their own.
"""

import json
import logging
import os
import select
import signal
import sys

log = logging.getLogger("lockprover_serve")

# How long serve waits for a request before it calls a server's idle():
# well under half the shortest heartbeat lockprover asks for (1 s).
IDLE_POLL = 0.2


def serve(server):
    """Answers each request on stdin with server.answer(request) until
    stdin closes, or until server.exit_code is set; returns the process's
    exit status (exit_code, else 0)."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    idle = getattr(server, "idle", None)
    replied = getattr(server, "replied", None)
    reader = LineReader(sys.stdin.fileno())
    try:
        while getattr(server, "exit_code", None) is None:
            try:
                line = reader.readline(IDLE_POLL if idle is not None else None)
            except EOFError:
                log.info("stdin closed: exiting")
                break
            if line is None:
                idle()
                continue
            if not line.strip():
                continue
            replies.write(json.dumps(reply_to(server, line), separators=(",", ":")) + "\n")
            replies.flush()
            if replied is not None:
                replied()
    finally:
        close = getattr(server, "close", None)
        if close is not None:
            close()
    return getattr(server, "exit_code", None) or 0


def reply_to(server, line):
    """The reply to one line: server's answer to the request on it, or a
    definite "bad request" if it is not a JSON object."""
    try:
        req = json.loads(line)
    except ValueError:
        req = None
    if isinstance(req, dict):
        return server.answer(req)
    log.error("not a JSON object: %r", line[:200])
    return {"id": 0, "type": "error", "code": "bad request",
            "text": "a request must be one JSON object", "definite": True}


class LineReader:
    """Reads lines from a file descriptor, with a timeout. It keeps its own
    buffer, so that several lines arriving at once are all seen (a
    buffered sys.stdin would hide them from select)."""

    def __init__(self, fd):
        self.fd, self.buf, self.eof = fd, b"", False

    def readline(self, timeout):
        """The next line without its newline; None if no whole line
        arrived within timeout (None: no limit); raises EOFError once the
        input is exhausted."""
        while b"\n" not in self.buf:
            if self.eof:
                if not self.buf:
                    raise EOFError
                line, self.buf = self.buf, b""  # a last line without newline
                return line
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            self.buf += chunk
            self.eof = not chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line


class BadRequest(Exception):
    """A malformed request, which lockprover should never send: answered
    with a definite "bad request" error."""


def int_field(req, field, minimum=1):
    """The request's field, an integer of at least minimum (None: any
    integer), or BadRequest."""
    value = req.get(field)
    if type(value) is not int or (minimum is not None and value < minimum):
        raise BadRequest(f"{req.get('type')} needs an integer {field!r}"
                         + (f" >= {minimum}" if minimum is not None else ""))
    return value


def token_field(req):
    """The request's token, a non-empty string, or BadRequest."""
    value = req.get("token")
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{req.get('type')} needs a non-empty string 'token'")
    return value
