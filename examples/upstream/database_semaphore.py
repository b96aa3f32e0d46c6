#!/usr/bin/env python3
"""lockprover's lease protocol (docs/protocol.md, "Lease locks") served by
zimingd/database-semaphore's own stored procedures, run as they are.

database-semaphore (github.com/zimingd/database-semaphore) keeps its logic in
MySQL stored procedures (src/main/resources/schema/*.ddl.sql), which its Java
class CountingSemaphoreImpl installs and calls. This process does what that
class does, in Python with PyMySQL, one process per lockprover client:

- it installs the table and the four procedures from the checkout's .ddl.sql
  files, as CountingSemaphoreImpl's constructor does (the table with CREATE
  TABLE IF NOT EXISTS; each procedure ignoring "PROCEDURE ... already
  exists"), with one change: every name the files define (the table
  SEMAPHORE_LOCK and the procedures attemptToAcquireSemaphoreLock,
  bootstrapLockKeyRows, refreshSemaphoreLock, releaseSemaphoreLock) is
  rewritten to start with the run's table prefix, wherever it occurs, so
  that runs do not share them. Nothing else in the files is changed.
- acquire is `CALL attemptToAcquireSemaphoreLock(key, timeoutSec, max)`, and
  the token is the first column of the first row it returns (Java:
  queryForObject(..., String.class, key, timeoutSec, maxLockCount)); a null
  token is "no lock available": acquire_fail full.
- refresh is `CALL refreshSemaphoreLock(token, timeoutSec)` and release
  `CALL releaseSemaphoreLock(token)`; their integer result goes through
  Utils.validateResults: 0 throws LockReleaseFailedException ("has
  expired"): refresh_fail / release_fail expired; below 0 throws
  LockKeyNotFoundException: reported as an error (outcome unknown to
  lockprover, which knows no definite failure of these but expired); above 0
  succeeds.
- the connection is as Connector/J's defaults make it: autocommit on (the
  procedures run START TRANSACTION and COMMIT themselves, and set the
  isolation level), and CLIENT_FOUND_ROWS (Connector/J's
  useAffectedRows=false), so that ROW_COUNT() after an UPDATE counts the
  rows matched, not only those changed.
- timeoutSec is whole seconds (a Java long, refused below 1): the protocol's
  ttl_ms is rounded up to whole seconds, at least 1. A lease lockprover asks
  for 100 or 300 ms is granted for 1 s, and acquire_ok and refresh_ok say so
  ("ttl_ms": 1000): lockprover judges by the lease granted.
- upstream has no fencing tokens: an init with "fencing": true is refused
  (definite unsupported). It has one layout: init's "design" is ignored.
- upstream does not agree on max: each acquire's max is passed as given.

The checkout is given by --checkout PATH or $LOCKPROVER_DATABASE_SEMAPHORE
(a directory holding src/main/resources/schema). Procedures are not tables,
so lockprover's clean-up (which drops the prefix's tables) leaves them: each
process drops, at init, the prefixed procedures of earlier runs whose table
is gone, and `--clean-up URL` drops every such procedure and exits.

Needs PyMySQL (apt install python3-pymysql).
"""

import argparse
import hashlib
import logging
import math
import os
import re
import sys
import urllib.parse

import pymysql
from pymysql.constants import CLIENT

# The process protocol's serve loop, which examples/python shares.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
from lockprover_serve import BadRequest, int_field, serve, token_field  # noqa: E402

log = logging.getLogger("database_semaphore")

TABLE = "SEMAPHORE_LOCK"
PROCEDURES = ["bootstrapLockKeyRows", "attemptToAcquireSemaphoreLock",
              "releaseSemaphoreLock", "refreshSemaphoreLock"]  # CountingSemaphoreImpl's order
NAMES = [TABLE] + PROCEDURES
SCHEMA = os.path.join("src", "main", "resources", "schema")
MAX_IDENT = 64  # MySQL's and MariaDB's limit on a name

# Client errors that mean the connection is gone.
CONNECTION_LOST = {2003, 2006, 2013, 2014, 2055}


def checkout_dir(arg):
    path = arg or os.environ.get("LOCKPROVER_DATABASE_SEMAPHORE", "")
    if not path:
        raise SystemExit("database_semaphore.py: give the checkout of zimingd/database-semaphore "
                         "with --checkout PATH or $LOCKPROVER_DATABASE_SEMAPHORE")
    if not os.path.isdir(os.path.join(path, SCHEMA)):
        raise SystemExit(f"database_semaphore.py: {path} has no {SCHEMA}: "
                         "not a checkout of zimingd/database-semaphore")
    return path


def renamed(prefix, name):
    """The name `name` gets under the run's prefix: prefix + name, or, if
    that exceeds 64 characters (a procedure's name is long), a short name
    made from a hash of the prefix."""
    full = prefix + name
    if len(full) <= MAX_IDENT:
        return full
    return "lpu" + hashlib.sha1(prefix.encode()).hexdigest()[:10] + "_" + name


def load_ddl(checkout, prefix):
    """The DDL statements in CountingSemaphoreImpl's order, each with its
    defined names rewritten to carry the prefix: [(name, text)]."""
    pattern = re.compile(r"\b(" + "|".join(NAMES) + r")\b")
    out = []
    for name in [TABLE] + PROCEDURES:
        file = "SemaphoreLock.ddl.sql" if name == TABLE else name + ".ddl.sql"
        with open(os.path.join(checkout, SCHEMA, file), encoding="utf-8") as f:
            text = f.read()
        out.append((name, pattern.sub(lambda m: renamed(prefix, m.group(1)), text)))
    return out


def parse_url(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "mysql" or not u.hostname:
        raise ValueError(f"want a mysql://user:pass@host:port/db URL, got {redact(url)!r}")
    return dict(host=u.hostname, port=u.port or 3306,
                user=urllib.parse.unquote(u.username or ""), password=urllib.parse.unquote(u.password or ""),
                database=urllib.parse.unquote(u.path.lstrip("/")) or None)


def connect(url, connect_timeout=5):
    """A connection as Connector/J's defaults make one: autocommit, found
    rows. No read timeout: Connector/J's socketTimeout defaults to none, so
    a statement waits as long as the server (or a partition) makes it; a
    process lockprover gives up on (30 s) is killed."""
    return pymysql.connect(**parse_url(url), autocommit=True, client_flag=CLIENT.FOUND_ROWS,
                           connect_timeout=connect_timeout)


def redact(url):
    return re.sub(r"(://[^:@/]*):[^@/]*@", r"\1:xxxxx@", url)


def install(conn, checkout, prefix):
    """What CountingSemaphoreImpl's constructor does, under the prefix."""
    with conn.cursor() as cur:
        for name, text in load_ddl(checkout, prefix):
            try:
                cur.execute(text)
            except pymysql.err.MySQLError as e:
                # createProcedureIfDoesNotExist: "PROCEDURE %s already exists" is fine.
                if name != TABLE and f"PROCEDURE {renamed(prefix, name)} already exists" in str(e):
                    continue
                raise


def orphans(conn):
    """Procedures of this adapter (a prefixed upstream name) whose table is
    gone: left by finished runs."""
    with conn.cursor() as cur:
        cur.execute("SELECT ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES"
                    " WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE'")
        routines = cur.fetchall()
        cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
        tables = {r[0] for r in cur.fetchall()}
    out = []
    for name, body in routines:
        if name in PROCEDURES or not any(name.endswith(p) for p in PROCEDURES):
            continue
        m = re.search(r"\b(\w+" + TABLE + r")\b", body or "")
        if m and m.group(1) != TABLE and m.group(1) not in tables:
            out.append(name)
    return out


def drop_orphans(conn):
    with conn.cursor() as cur:
        for name in orphans(conn):
            try:
                cur.execute(f"DROP PROCEDURE IF EXISTS `{name}`")
            except pymysql.err.MySQLError as e:
                log.warning("dropping %s: %s", name, e)


class Expired(Exception):
    """LockReleaseFailedException: the procedure matched no row."""


class NotFound(Exception):
    """LockKeyNotFoundException: a negative result."""


def validate_results(result):
    """Utils.validateResults."""
    if result < 0:
        raise NotFound("Key not found")
    if result == 0:
        raise Expired("has expired")


class Semaphore:
    """CountingSemaphoreImpl's three calls, on one connection."""

    def __init__(self, conn, prefix):
        self.conn = conn
        self.acquire_proc = renamed(prefix, "attemptToAcquireSemaphoreLock")
        self.refresh_proc = renamed(prefix, "refreshSemaphoreLock")
        self.release_proc = renamed(prefix, "releaseSemaphoreLock")

    def _call(self, proc, *args):
        with self.conn.cursor() as cur:
            cur.execute(f"CALL `{proc}`({', '.join(['%s'] * len(args))})", args)
            row = cur.fetchone()
            while cur.nextset():  # the CALL's own status
                pass
        return None if row is None else row[0]

    def attempt_to_acquire_lock(self, key, timeout_sec, max_lock_count):
        token = self._call(self.acquire_proc, key, timeout_sec, max_lock_count)
        return None if token is None else (token.decode() if isinstance(token, bytes) else str(token))

    def refresh_lock_timeout(self, key, token, timeout_sec):
        validate_results(int(self._call(self.refresh_proc, token, timeout_sec)))

    def release_lock(self, key, token):
        validate_results(int(self._call(self.release_proc, token)))


def timeout_sec(ttl_ms):
    """The protocol's ttl in ms as upstream's whole seconds, rounded up."""
    return max(1, math.ceil(ttl_ms / 1000))


def granted(reply, ttl_ms):
    """reply, saying the lease upstream granted (whole seconds) where it is
    not the ttl_ms asked for: lockprover judges by what was granted."""
    if timeout_sec(ttl_ms) * 1000 != ttl_ms:
        reply["ttl_ms"] = timeout_sec(ttl_ms) * 1000
    return reply


def is_connection_error(e):
    return isinstance(e, (pymysql.err.OperationalError, pymysql.err.InterfaceError)) and \
        (not e.args or not isinstance(e.args[0], int) or e.args[0] in CONNECTION_LOST or e.args[0] < 1000)


class Server:
    """One lockprover client of one key."""

    def __init__(self, checkout):
        self.checkout = checkout
        self.init = None
        self.conn = None
        self.sem = None

    def answer(self, req):
        rid, kind = req.get("id"), req.get("type")
        try:
            if not isinstance(rid, int) or isinstance(rid, bool):
                return {"id": 0, "type": "error", "code": "bad request", "text": "id must be an integer",
                        "definite": True}
            if kind == "init":
                reply = self.start(req)
            elif self.init is None:
                reply = {"type": "error", "code": "not initialised", "text": "the first request must be init",
                         "definite": True}
            elif kind == "acquire":
                reply = self.acquire(req)
            elif kind == "refresh":
                ttl_ms = int_field(req, "ttl_ms")
                self.connected(kind).refresh_lock_timeout(self.init["name"], token_field(req), timeout_sec(ttl_ms))
                reply = granted({"type": "refresh_ok"}, ttl_ms)
            elif kind == "release":
                self.connected(kind).release_lock(self.init["name"], token_field(req))
                reply = {"type": "release_ok"}
            else:
                reply = {"type": "error", "code": "unsupported", "text": f"unsupported request type {kind!r}",
                         "definite": True}
        except BadRequest as e:
            reply = {"type": "error", "code": "bad request", "text": str(e), "definite": True}
        except Expired:
            reply = {"type": f"{kind}_fail", "reason": "expired"}
        except NotFound as e:
            reply = {"type": "error", "code": "key not found", "text": str(e)}
        except CannotConnect as e:
            # Nothing was sent: an acquire certainly did nothing.
            reply = {"type": "error", "code": "database", "text": str(e)}
            if kind == "acquire":
                reply["definite"] = True
        except pymysql.err.MySQLError as e:
            # The CALL was sent: whatever the error, it may have committed.
            log.warning("%s #%s: outcome unknown: %s", kind, rid, e)
            if is_connection_error(e) or (self.conn is not None and not self.conn.open):
                self.close()
            reply = {"type": "error", "code": "database", "text": str(e)}
        except Exception as e:
            log.exception("%s #%s failed", kind, rid)
            reply = {"type": "error", "code": "internal", "text": f"{type(e).__name__}: {e}"}
        return {"id": rid, **reply}

    def start(self, req):
        if self.init is not None:
            raise BadRequest("init was already received")
        for field in ("client", "name", "url", "prefix"):
            if not isinstance(req.get(field), str):
                raise BadRequest(f"init needs a string {field!r}")
        if req.get("lock") != "db-semaphore":
            return {"type": "error", "code": "unsupported", "definite": True,
                    "text": f"lock kind {req.get('lock')!r}: database-semaphore is a db-semaphore"}
        if req.get("fencing"):
            return {"type": "error", "code": "unsupported", "definite": True,
                    "text": "database-semaphore issues no fencing tokens"}
        if not re.fullmatch(r"[A-Za-z0-9_]{0,50}", req["prefix"]):
            raise BadRequest(f"prefix {req['prefix']!r}: letters, digits and '_' only, at most 50")
        self.init = req
        try:
            self.connect()
        except pymysql.err.MySQLError as e:
            log.warning("init: %s", e)
            self.init = None
            self.close()
            return {"type": "error", "code": "database", "text": str(e)}
        return {"type": "init_ok"}

    def connect(self):
        log.info("connecting to %s", redact(self.init["url"]))
        self.conn = connect(self.init["url"])
        try:
            drop_orphans(self.conn)
        except pymysql.err.MySQLError as e:
            log.warning("clean-up of earlier runs' procedures: %s", e)
        install(self.conn, self.checkout, self.init["prefix"])
        self.sem = Semaphore(self.conn, self.init["prefix"])

    def connected(self, op):
        if self.conn is None or not self.conn.open:
            self.close()
            try:
                self.connect()
            except pymysql.err.MySQLError as e:
                self.close()
                raise CannotConnect(f"cannot connect: {e}") from e
        return self.sem

    def acquire(self, req):
        max_count, ttl_ms = int_field(req, "max"), int_field(req, "ttl_ms")
        token = self.connected("acquire").attempt_to_acquire_lock(self.init["name"], timeout_sec(ttl_ms), max_count)
        if token is None:
            return {"type": "acquire_fail", "reason": "full"}
        return granted({"type": "acquire_ok", "token": token}, ttl_ms)

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
        self.conn = self.sem = None


class CannotConnect(Exception):
    pass


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkout", help="a checkout of zimingd/database-semaphore "
                                      "(default $LOCKPROVER_DATABASE_SEMAPHORE)")
    p.add_argument("--clean-up", metavar="URL",
                   help="drop the procedures of finished runs (mysql://user:pass@host:port/db) and exit")
    opts = p.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if opts.clean_up:
        conn = connect(opts.clean_up)
        names = orphans(conn)
        drop_orphans(conn)
        print(f"dropped {len(names)} procedures: {' '.join(names)}", file=sys.stderr)
        return 0
    return serve(Server(checkout_dir(opts.checkout)))


if __name__ == "__main__":
    sys.exit(main())
