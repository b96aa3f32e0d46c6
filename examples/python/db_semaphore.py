#!/usr/bin/env python3
"""A database counting semaphore (a lease lock) in Python with PyMySQL, and
a server that lets lockprover prove it over the process protocol
(docs/protocol.md, "Lease locks: the database semaphore").

At most `max` holders of a key at a time; each holds a lease that expires
unless refreshed. Every deadline is written and compared by the database's
clock (UTC_TIMESTAMP(6)), never this process's. Tokens are random UUIDs
(uuid4); with fencing, a lease also carries a per-key counter that
increases in the order grants committed. The limit is agreed: the first
acquire of a key records its max (and the design), and an acquire that
asks for another max fails with Mismatch.

Written independently of lockprover's Go reference (package dbsem), with
its own tables and statements. Two designs:

master-row    one row per key in `<prefix>semaphore`, locked by every
              acquire (INSERT ... ON DUPLICATE KEY UPDATE both sets the key
              up and takes the row's lock), which then reads the
              database's clock once, deletes the key's expired leases,
              counts the rest and inserts one into `<prefix>lease` if fewer
              than max are left.
row-per-slot  rows 0..max-1 per key in `<prefix>lease_slot`; an acquire
              takes the first row that is free or expired with a
              conditional UPDATE (which waits for a row another
              transaction has locked and then looks again, so it is never
              fooled by one), one transaction per row tried.

Library use:

    sem = DbSemaphore(pymysql.connect(...), prefix="app_", design="master-row")
    sem.create_tables()
    token, fence = sem.acquire("jobs", max_holders=3, ttl_ms=30000)  # raises Full
    sem.refresh("jobs", token, ttl_ms=30000)                         # raises Expired
    sem.release("jobs", token)                                       # raises Expired

As a lockprover server (one process per client; JSON lines on stdin and
stdout, logs on stderr; exits 0 at EOF):

    /usr/bin/python3 examples/python/db_semaphore.py

Needs PyMySQL (`apt install python3-pymysql` on Debian, or
`pip install pymysql`).
"""

import logging
import re
import sys
import time
import urllib.parse
import uuid

import pymysql
from pymysql.constants import CLIENT

from lockprover_serve import BadRequest, int_field, serve, token_field

log = logging.getLogger("db_semaphore")

MASTER_ROW = "master-row"
ROW_PER_SLOT = "row-per-slot"
DESIGNS = (MASTER_ROW, ROW_PER_SLOT)

MAX_SLOTS = 10000

# Server errors after which the statement (or the whole transaction) was
# rolled back, so that trying again is safe: deadlock, lock wait timeout.
RETRYABLE = {1213, 1205}
ATTEMPTS = 3

# Client errors that mean the connection is gone (can't connect, server
# gone away, lost connection, out of sync, ...).
CONNECTION_LOST = {2003, 2006, 2013, 2014, 2055}

PREFIX_RE = re.compile(r"^[A-Za-z0-9_]{0,50}$")


class Failed(Exception):
    """The operation certainly did not take effect."""
    code = "failed"


class Full(Failed):
    """max leases of the key were live."""
    code = "full"


class Expired(Failed):
    """The lease was not live (its deadline had passed, it was released,
    or it never existed): refresh or release did nothing."""
    code = "expired"


class Mismatch(Failed):
    """The key was set up with another max (or design)."""
    code = "mismatch"


class NotGranted(Failed):
    """An acquire that certainly granted nothing: its transaction was
    rolled back, or never reached the database."""
    code = "database"


class Unknown(Exception):
    """The outcome is unknown: the connection was lost after the operation
    may have taken effect (an acquire's COMMIT sent, a refresh or release
    statement sent)."""
    code = "database"


def is_connection_error(e):
    if isinstance(e, (pymysql.err.InterfaceError, OSError)):
        return True
    return isinstance(e, pymysql.err.OperationalError) and e.args and e.args[0] in CONNECTION_LOST


def retryable(e):
    return isinstance(e, pymysql.err.OperationalError) and e.args and e.args[0] in RETRYABLE


class DbSemaphore:
    """The semaphores kept in one set of tables (one per key), on one
    PyMySQL connection made with connect() below (autocommit on,
    READ COMMITTED, CLIENT.FOUND_ROWS so that an UPDATE counts the rows it
    matched, not only those it changed)."""

    def __init__(self, conn, prefix="dbsempy_", design=MASTER_ROW, fencing=False):
        if not PREFIX_RE.match(prefix):
            raise ValueError(f"prefix {prefix!r}: letters, digits and '_' only, at most 50")
        if design not in DESIGNS:
            raise ValueError(f"design {design!r}: want {MASTER_ROW} or {ROW_PER_SLOT}")
        self.conn = conn
        self.design = design
        self.fencing = fencing
        self.t_sem = f"`{prefix}semaphore`"
        self.t_lease = f"`{prefix}lease`"
        self.t_slot = f"`{prefix}lease_slot`"
        self.agreed = {}  # key -> max, once read (it never changes)

    # --- schema --------------------------------------------------------------

    def create_tables(self):
        """CREATE TABLE IF NOT EXISTS, so every client may do it, at once."""
        stmts = [
            f"CREATE TABLE IF NOT EXISTS {self.t_sem} ("
            " sem_key VARBINARY(255) NOT NULL PRIMARY KEY,"
            " max_holders INT NOT NULL,"
            " design VARCHAR(16) NOT NULL,"
            " last_fence BIGINT NOT NULL DEFAULT 0"
            ") ENGINE=InnoDB",
        ]
        if self.design == MASTER_ROW:
            stmts.append(
                f"CREATE TABLE IF NOT EXISTS {self.t_lease} ("
                " sem_key VARBINARY(255) NOT NULL,"
                " token CHAR(36) CHARACTER SET ascii NOT NULL,"
                " deadline DATETIME(6) NOT NULL,"
                " fence BIGINT NOT NULL DEFAULT 0,"
                " PRIMARY KEY (sem_key, token)"
                ") ENGINE=InnoDB")
        else:
            stmts.append(
                f"CREATE TABLE IF NOT EXISTS {self.t_slot} ("
                " sem_key VARBINARY(255) NOT NULL,"
                " slot INT NOT NULL,"
                " token CHAR(36) CHARACTER SET ascii NULL,"
                " deadline DATETIME(6) NULL,"
                " fence BIGINT NOT NULL DEFAULT 0,"
                " PRIMARY KEY (sem_key, slot)"
                ") ENGINE=InnoDB")
        with self.conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)

    # --- operations ----------------------------------------------------------

    def acquire(self, key, max_holders, ttl_ms):
        """A lease on key for ttl_ms if fewer than max_holders are live:
        (token, fence), fence None without fencing. Raises Full, Mismatch,
        NotGranted (certainly nothing granted) or Unknown."""
        check_key(key)
        if not 1 <= max_holders <= MAX_SLOTS:
            raise NotGranted(f"max {max_holders}: must be 1 to {MAX_SLOTS}")
        if ttl_ms < 1:
            raise NotGranted(f"ttl_ms {ttl_ms}: must be at least 1")
        grant = self._grant_master_row if self.design == MASTER_ROW else self._grant_row_per_slot
        for attempt in range(ATTEMPTS):
            try:
                return grant(key, max_holders, ttl_ms)
            except pymysql.err.MySQLError as e:
                if retryable(e) and attempt + 1 < ATTEMPTS:
                    log.info("acquire: %s: trying again", e)
                    continue
                if is_connection_error(e):
                    raise NotGranted(f"connection lost before COMMIT: {e}") from e
                raise NotGranted(f"rolled back: {e}") from e

    def refresh(self, key, token, ttl_ms):
        """Moves a live lease's deadline to ttl_ms from the database's now.
        Raises Expired, or Unknown."""
        check_key(key)
        table = self.t_lease if self.design == MASTER_ROW else self.t_slot
        self._change(f"UPDATE {table} SET deadline = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND"
                     " WHERE sem_key = %s AND token = %s AND deadline > UTC_TIMESTAMP(6)",
                     (ttl_ms * 1000, key, token))

    def release(self, key, token):
        """Ends a live lease. Raises Expired, or Unknown."""
        check_key(key)
        if self.design == MASTER_ROW:
            q = (f"DELETE FROM {self.t_lease}"
                 " WHERE sem_key = %s AND token = %s AND deadline > UTC_TIMESTAMP(6)")
        else:
            q = (f"UPDATE {self.t_slot} SET token = NULL, deadline = NULL"
                 " WHERE sem_key = %s AND token = %s AND deadline > UTC_TIMESTAMP(6)")
        self._change(q, (key, token))

    # --- master-row ------------------------------------------------------------

    def _grant_master_row(self, key, max_holders, ttl_ms):
        c = self.conn
        c.begin()
        committing = False
        try:
            with c.cursor() as cur:
                # Sets the key up if nobody has, and in any case takes an
                # exclusive lock on its row, held until COMMIT: acquires of
                # one key are serialized from their first statement on.
                cur.execute(f"INSERT INTO {self.t_sem} (sem_key, max_holders, design) VALUES (%s, %s, %s)"
                            " ON DUPLICATE KEY UPDATE sem_key = sem_key",
                            (key, max_holders, self.design))
                cur.execute(f"SELECT max_holders, design, last_fence FROM {self.t_sem}"
                            " WHERE sem_key = %s FOR UPDATE", (key,))
                agreed, design, last_fence = cur.fetchone()
                self._agree(key, max_holders, agreed, design)
                # One reading of the database's clock for the decision and
                # the new deadline.
                cur.execute("SET @lp_now = UTC_TIMESTAMP(6)")
                cur.execute(f"DELETE FROM {self.t_lease} WHERE sem_key = %s AND deadline <= @lp_now", (key,))
                cur.execute(f"SELECT COUNT(*) FROM {self.t_lease} WHERE sem_key = %s", (key,))
                (live,) = cur.fetchone()
                if live >= max_holders:
                    committing = True
                    c.commit()  # keep the expired rows' deletion
                    raise Full(f"{live} of {max_holders} leases of {key!r} are live")
                fence = 0
                if self.fencing:
                    fence = last_fence + 1
                    cur.execute(f"UPDATE {self.t_sem} SET last_fence = %s WHERE sem_key = %s", (fence, key))
                token = str(uuid.uuid4())
                cur.execute(f"INSERT INTO {self.t_lease} (sem_key, token, deadline, fence)"
                            " VALUES (%s, %s, @lp_now + INTERVAL %s MICROSECOND, %s)",
                            (key, token, ttl_ms * 1000, fence))
            committing = True
            self._commit()
            return token, (fence if self.fencing else None)
        except Full:
            raise
        except BaseException:
            if not committing:
                rollback(c)
            raise

    # --- row-per-slot ----------------------------------------------------------

    def _grant_row_per_slot(self, key, max_holders, ttl_ms):
        c = self.conn
        agreed = self._set_up_slots(key, max_holders)
        token = str(uuid.uuid4())
        for slot in range(agreed):
            c.begin()
            committing = False
            try:
                with c.cursor() as cur:
                    # Waits for a transaction that has the row locked, then
                    # looks at the row again: taken only if free or expired.
                    n = cur.execute(
                        f"UPDATE {self.t_slot} SET token = %s,"
                        " deadline = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, fence = 0"
                        " WHERE sem_key = %s AND slot = %s"
                        " AND (token IS NULL OR deadline <= UTC_TIMESTAMP(6))",
                        (token, ttl_ms * 1000, key, slot))
                    if n == 0:
                        rollback(c)
                        continue
                    fence = 0
                    if self.fencing:
                        # The counter row is locked until COMMIT, after the
                        # slot row (every acquire locks in that order).
                        cur.execute(f"UPDATE {self.t_sem} SET last_fence = last_fence + 1 WHERE sem_key = %s", (key,))
                        cur.execute(f"SELECT last_fence FROM {self.t_sem} WHERE sem_key = %s", (key,))
                        (fence,) = cur.fetchone()
                        cur.execute(f"UPDATE {self.t_slot} SET fence = %s WHERE sem_key = %s AND slot = %s",
                                    (fence, key, slot))
                committing = True
                self._commit()
                return token, (fence if self.fencing else None)
            except BaseException:
                if not committing:
                    rollback(c)
                raise
        raise Full(f"all {agreed} slots of {key!r} are held")

    def _set_up_slots(self, key, max_holders):
        """The key's agreed max, after making sure its record and its rows
        0..max-1 exist (once per key and process: rows are never deleted)."""
        agreed = self.agreed.get(key)
        if agreed is None:
            with self.conn.cursor() as cur:
                cur.execute(f"INSERT IGNORE INTO {self.t_sem} (sem_key, max_holders, design) VALUES (%s, %s, %s)",
                            (key, max_holders, self.design))
                cur.execute(f"SELECT max_holders, design FROM {self.t_sem} WHERE sem_key = %s", (key,))
                agreed, design = cur.fetchone()
                self._agree(key, max_holders, agreed, design)
                # Every client that gets here inserts the same rows:
                # idempotent, and done before its first scan.
                values = ", ".join(["(%s, %s)"] * agreed)
                args = [a for n in range(agreed) for a in (key, n)]
                cur.execute(f"INSERT IGNORE INTO {self.t_slot} (sem_key, slot) VALUES {values}", args)
            self.agreed[key] = agreed
        self._agree(key, max_holders, agreed, self.design)
        return agreed

    # --- common ----------------------------------------------------------------

    def _agree(self, key, max_holders, agreed, design):
        if isinstance(design, bytes):
            design = design.decode()
        if design != self.design:
            raise Mismatch(f"key {key!r} was set up with design {design}, this semaphore's is {self.design}")
        if agreed != max_holders:
            raise Mismatch(f"key {key!r} was set up with max {agreed}, the acquire asked for max {max_holders}")

    def _commit(self):
        try:
            self.conn.commit()
        except pymysql.err.MySQLError as e:
            # Sent, but no answer: committed or not, nobody knows.
            raise Unknown(f"COMMIT got no reply: {e}") from e

    def _change(self, q, args):
        """Runs refresh's or release's one autocommit statement: a row
        matched is success, none is Expired."""
        for attempt in range(ATTEMPTS):
            try:
                with self.conn.cursor() as cur:
                    n = cur.execute(q, args)
                break
            except pymysql.err.MySQLError as e:
                if retryable(e) and attempt + 1 < ATTEMPTS:
                    continue
                raise Unknown(str(e)) from e
        if n == 0:
            raise Expired("the lease is not live")


def rollback(conn):
    try:
        conn.rollback()
    except pymysql.err.MySQLError:
        pass  # the connection is gone: the server rolls back


def check_key(key):
    if not 1 <= len(key.encode()) <= 255:
        raise NotGranted(f"key of {len(key.encode())} bytes: must be 1 to 255")


def connect(url, connect_timeout=5, read_timeout=20):
    """A PyMySQL connection to mysql://user:pass@host:port/db, as
    DbSemaphore wants it. The read timeout (under lockprover's 30 s per
    operation) turns a statement stuck behind a partition into an error."""
    u = urllib.parse.urlsplit(url)
    if u.scheme != "mysql" or not u.hostname:
        raise ValueError(f"want a mysql://user:pass@host:port/db URL, got {redact(url)!r}")
    return pymysql.connect(
        host=u.hostname, port=u.port or 3306,
        user=urllib.parse.unquote(u.username or ""), password=urllib.parse.unquote(u.password or ""),
        database=urllib.parse.unquote(u.path.lstrip("/")) or None,
        autocommit=True, client_flag=CLIENT.FOUND_ROWS,
        init_command="SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
        connect_timeout=connect_timeout, read_timeout=read_timeout, write_timeout=read_timeout)


def redact(url):
    return re.sub(r"(://[^:@/]*):[^@/]*@", r"\1:xxxxx@", url)


# --- the lockprover server ----------------------------------------------------


class Server:
    """One lockprover process: a client of one key."""

    def __init__(self):
        self.init = None  # the init request, once served
        self.conn = None  # the connection, None after a lost one
        self.sem = None

    def answer(self, req):
        rid, kind = req.get("id"), req.get("type")
        try:
            if not isinstance(rid, int) or isinstance(rid, bool):
                return {"id": 0, "type": "error", "code": "bad request",
                        "text": "id must be an integer", "definite": True}
            if kind == "init":
                reply = self.start(req)
            elif self.init is None:
                reply = {"type": "error", "code": "not initialised",
                         "text": "the first request must be init", "definite": True}
            elif kind == "acquire":
                reply = self.acquire(req)
            elif kind == "refresh":
                self.connected("refresh").refresh(self.init["name"], token_field(req), int_field(req, "ttl_ms"))
                reply = {"type": "refresh_ok"}
            elif kind == "release":
                self.connected("release").release(self.init["name"], token_field(req))
                reply = {"type": "release_ok"}
            else:
                reply = {"type": "error", "code": "unsupported",
                         "text": f"unsupported request type {kind!r}", "definite": True}
        except BadRequest as e:
            reply = {"type": "error", "code": "bad request", "text": str(e), "definite": True}
        except Full:
            reply = {"type": "acquire_fail", "reason": "full"}
        except Expired:
            reply = {"type": f"{kind}_fail", "reason": "expired"}
        except Failed as e:  # Mismatch, NotGranted: certainly no effect
            log.warning("%s #%s: %s", kind, rid, e)
            self.forget_if_lost(e)
            reply = {"type": "error", "code": e.code, "text": str(e), "definite": True}
        except Unknown as e:
            log.warning("%s #%s: outcome unknown: %s", kind, rid, e)
            self.forget_if_lost(e)
            reply = {"type": "error", "code": e.code, "text": str(e)}
        except Exception as e:  # a bug here or in PyMySQL: outcome unknown
            log.exception("%s #%s failed", kind, rid)
            self.forget_if_lost(e)
            reply = {"type": "error", "code": "internal", "text": f"{type(e).__name__}: {e}"}
        return {"id": rid, **reply}

    def start(self, req):
        if self.init is not None:
            raise BadRequest("init was already received")
        for field in ("client", "name", "url", "prefix", "design"):
            if not isinstance(req.get(field), str):
                raise BadRequest(f"init needs a string {field!r}")
        if req.get("lock") != "db-semaphore":
            return {"type": "error", "code": "unsupported",
                    "text": f"lock kind {req.get('lock')!r}: this server serves db-semaphore", "definite": True}
        if req["design"] not in DESIGNS:
            return {"type": "error", "code": "unsupported",
                    "text": f"design {req['design']!r}: want {MASTER_ROW} or {ROW_PER_SLOT}", "definite": True}
        if not PREFIX_RE.match(req["prefix"]):
            raise BadRequest(f"prefix {req['prefix']!r}: letters, digits and '_' only, at most 50")
        if not isinstance(req.get("fencing"), bool):
            raise BadRequest("init needs a boolean 'fencing'")
        int_field(req, "max")
        int_field(req, "ttl_ms")
        try:
            self.connect(req)
        except pymysql.err.MySQLError as e:
            # Out of reach (a fault, say): lockprover tries again with a
            # new process.
            log.warning("init: %s", e)
            self.close()
            return {"type": "error", "code": "database", "text": str(e)}
        self.init = req
        return {"type": "init_ok"}

    def connect(self, init):
        log.info("connecting to %s", redact(init["url"]))
        self.conn = connect(init["url"])
        self.sem = DbSemaphore(self.conn, prefix=init["prefix"], design=init["design"], fencing=init["fencing"])
        self.sem.create_tables()

    def connected(self, op):
        """The semaphore, connecting again first after a lost connection.
        Failing to connect: an acquire certainly did nothing; a refresh or
        release did nothing either, but only expired is a definite answer
        for those, so it is reported as unknown."""
        if self.conn is None or not self.conn.open:
            try:
                self.close()
                self.connect(self.init)
            except pymysql.err.MySQLError as e:
                self.close()
                if op == "acquire":
                    raise NotGranted(f"cannot connect: {e}") from e
                raise Unknown(f"cannot connect: {e}") from e
        return self.sem

    def acquire(self, req):
        max_holders, ttl_ms = int_field(req, "max"), int_field(req, "ttl_ms")
        token, fence = self.connected("acquire").acquire(self.init["name"], max_holders, ttl_ms)
        reply = {"type": "acquire_ok", "token": token}
        if fence is not None:
            reply["fence"] = fence
        return reply

    def forget_if_lost(self, e):
        """After a lost connection, drop it: the next request connects."""
        cause = e.__cause__ or e
        if is_connection_error(cause) or (self.conn is not None and not self.conn.open):
            self.close()

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
        self.conn = None
        self.sem = None


def main():
    return serve(Server())


if __name__ == "__main__":
    sys.exit(main())
