#!/usr/bin/env python3
"""A priority Redlock in Python, standard library only, and a server that
lets lockprover prove it over the process protocol (docs/protocol.md,
"Priority Redlock").

A lease lock on N independent Redis servers (a majority must grant it):
an acquirer of strictly higher priority takes the lock from its holder
(the victim), and acts on it only once the victim knows, or could no
longer hold. The design is docs/redlock.md's ("Priority Redlock"),
written here anew:

- On each server the lock on key k is the hash {k}:lock (the holder's
  token, priority and fence, and the chain of the victims a steal kept
  aside: vn of them, the i-th's token, priority, fence and deadline
  vacq<i>, vprio<i>, vfence<i>, vdl<i>, and told, how many of the chain
  already know), and {k}:fence, the counter of grants.
- obtain (a script, on every server at once): a free key is granted; a
  holder of strictly lower priority is replaced, the key living the longer
  of the victim's time left and the ttl; otherwise refused. A majority of
  grants and steals wins; without one, what was done is undone (a steal
  gives the key back to its victim).
- A steal tells every victim (the holder, and the chain's earlier victims
  not yet told) by RPUSH of the thief's token on the list
  {k}:note:<victim> of each server that named it (a list keeps the note
  until it is read, unlike pub/sub), and waits (BLPOP on its own
  {k}:ack:<thief>) until each acknowledged or could no longer hold (its
  time left plus drift). It then checks that it still holds (settle,
  which also marks the chain told).
- Every lease has a watcher per server, a thread in BLPOP on its note list
  (and its wake list, to stop it). On a note the lease is marked lost
  (refresh and release answer expired), the lost notice is written to
  stdout, and only then is the acknowledgement pushed on every server.

Grants claim their ttl from the acquire's start, less the time taken and
the drift (1% and 2 ms); a fence orders them. Tokens are 16 random bytes.

As a lockprover server (one process per client; JSON lines on stdin and
stdout, logs on stderr; exits 0 at EOF):

    /usr/bin/python3 examples/python/priority_redlock.py

LP_PRIORITY_DEFECT, if set, makes a known defect, for a test to show it
is caught: equal-steals (an acquirer of equal priority steals) or
no-ack-wait (the thief returns right after the steal, without waiting for
its victims).
"""

import json
import os
import socket
import sys
import threading
import time

DEFECT = os.environ.get("LP_PRIORITY_DEFECT", "")
if DEFECT not in ("", "equal-steals", "no-ack-wait"):
    sys.exit("LP_PRIORITY_DEFECT: want equal-steals or no-ack-wait, got %r" % DEFECT)


def now_ms():
    return time.monotonic() * 1000.0


def drift(ttl_ms):
    return ttl_ms * 0.01 + 2.0


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


# ---------------------------------------------------------------- RESP2


class RedisError(Exception):
    """An error reply of the server (the command was refused)."""


class Conn:
    """One RESP2 connection to a server at host:port, opened on first use
    and closed on any failure (the next call opens a new one)."""

    def __init__(self, addr):
        host, _, port = addr.rpartition(":")
        self.addr = (host, int(port))
        self.sock = None
        self.buf = b""

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock, self.buf = None, b""

    def call(self, timeout, *args):
        """Sends a command and returns its reply within timeout seconds;
        OSError (socket.timeout among them) if it could not."""
        try:
            if self.sock is None:
                self.sock = socket.create_connection(self.addr, timeout=timeout)
            self.sock.settimeout(timeout)
            out = [b"*%d\r\n" % len(args)]
            for a in args:
                b = a if isinstance(a, bytes) else str(a).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(b), b))
            self.sock.sendall(b"".join(out))
            return self._reply()
        except (OSError, ValueError, IndexError):
            self.close()
            raise OSError("connection to %s:%d failed" % self.addr)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValueError("bad reply %r" % line)


# ---------------------------------------------------------------- scripts

# obtain: KEYS lock, fence; ARGV token, priority, ttl ms, equal-steals.
# {1, fence} granted; {2, fence, victim, its ms left, the key's life, then
# each earlier victim not told and its ms left} stolen; {0, prio} refused.
OBTAIN = """
local lock, holder = KEYS[1], redis.call('HGET', KEYS[1], 'acq')
local ttl = tonumber(ARGV[3])
if not holder then
  local f = redis.call('INCR', KEYS[2])
  redis.call('HSET', lock, 'acq', ARGV[1], 'prio', ARGV[2], 'fence', f)
  redis.call('PEXPIRE', lock, ttl)
  return {1, f}
end
local cur = redis.call('HMGET', lock, 'prio', 'fence', 'vn', 'told')
local hp, asked = tonumber(cur[1]), tonumber(ARGV[2])
if not (hp < asked or (ARGV[4] == '1' and hp == asked)) then return {0, hp} end
local left = redis.call('PTTL', lock)
local clock = redis.call('TIME')
local at = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local f = redis.call('INCR', KEYS[2])
local n, told = (tonumber(cur[3]) or 0) + 1, tonumber(cur[4]) or 0
local life = math.max(left, ttl)
local answer = {2, f, holder, left, life}
for i = told + 1, n - 1 do
  local e = redis.call('HMGET', lock, 'vacq' .. i, 'vdl' .. i)
  table.insert(answer, e[1])
  table.insert(answer, tonumber(e[2]) - at)
end
redis.call('HSET', lock, 'acq', ARGV[1], 'prio', ARGV[2], 'fence', f, 'vn', n,
  'vacq' .. n, holder, 'vprio' .. n, cur[1], 'vfence' .. n, cur[2], 'vdl' .. n, at + left)
redis.call('PEXPIRE', lock, life)
return answer
"""

# undo: KEYS lock; ARGV token, fresh. Gives a stolen key back to the last
# victim of the chain until its deadline (or deletes it once that passed),
# deletes a grant; where another holds the key and token's was the chain's
# first (a fresh grant, ARGV[2] = 1), its claim is given up (deadline 0).
UNDO = """
local lock = KEYS[1]
local holder = redis.call('HGET', lock, 'acq')
if holder ~= ARGV[1] then
  if holder and ARGV[2] == '1' and redis.call('HGET', lock, 'vacq1') == ARGV[1] then
    redis.call('HSET', lock, 'vdl1', 0)
  end
  return 0
end
local n = tonumber(redis.call('HGET', lock, 'vn'))
if not n then redis.call('DEL', lock) return 1 end
local e = redis.call('HMGET', lock, 'vacq' .. n, 'vprio' .. n, 'vfence' .. n, 'vdl' .. n)
local clock = redis.call('TIME')
local at = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local left = tonumber(e[4]) - at
if left <= 0 then redis.call('DEL', lock) return 1 end
redis.call('HDEL', lock, 'vacq' .. n, 'vprio' .. n, 'vfence' .. n, 'vdl' .. n)
redis.call('HSET', lock, 'acq', e[1], 'prio', e[2], 'fence', e[3], 'vn', n - 1)
local told = tonumber(redis.call('HGET', lock, 'told'))
if told and told > n - 1 then redis.call('HSET', lock, 'told', n - 1) end
if n == 1 then redis.call('HDEL', lock, 'vn', 'told') end
redis.call('PEXPIRE', lock, left)
return 2
"""

# settle: KEYS lock; ARGV token. 1 (and the chain marked told) if token
# holds the key, -1 if another does, 0 if nobody.
SETTLE = """
local e = redis.call('HMGET', KEYS[1], 'acq', 'vn')
if e[1] ~= ARGV[1] then return e[1] and -1 or 0 end
if e[2] then redis.call('HSET', KEYS[1], 'told', e[2]) end
return 1
"""

# refresh: KEYS lock; ARGV token, ttl ms. 1, -1 (another holds), 0 (free).
REFRESH = """
local holder = redis.call('HGET', KEYS[1], 'acq')
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if holder then return -1 end
return 0
"""

# release: KEYS lock, note list; ARGV token. 1 (deleted, with its note
# list), -1 (another holds: the note list stays for the watchers), 0.
RELEASE = """
local holder = redis.call('HGET', KEYS[1], 'acq')
if holder == ARGV[1] then redis.call('DEL', KEYS[1], KEYS[2]) return 1 end
if holder then return -1 end
return 0
"""

# raise: KEYS fence; ARGV fence. The counter raised to at least ARGV[1].
RAISE = """
if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
"""


# ---------------------------------------------------------------- the lock


class Holding:
    """A lease's watchers: one thread per server listens for thieves until
    the lease's end (until, ms) once its acquire is settled."""

    def __init__(self, token, ttl, until, settled):
        self.token, self.ttl, self.until = token, ttl, until
        self.settled, self.stopped, self.acked = threading.Event(), threading.Event(), threading.Event()
        if settled:
            self.settled.set()
        self.mu = threading.Lock()
        self.lost = False
        self.handled = False
        self.threads = []


class PriorityRedlock:
    def __init__(self, key, addrs, out):
        self.key, self.addrs, self.out = key, addrs, out
        self.conns = [Conn(a) for a in addrs]
        self.n, self.q = len(addrs), len(addrs) // 2 + 1
        self.holds = {}  # token -> Holding
        self.mu = threading.Lock()
        self.leases = {}  # token -> (valid until ms, ttl ms)

    def k(self, what, token=None):
        base = "{%s}:%s" % (self.key, what)
        return base if token is None else base + ":" + token

    # each runs f(i, conn) on every server at once (a thread each), and
    # returns the answers (an exception object for a failure).
    def each(self, f, conns=None, servers=None):
        conns = conns or self.conns
        servers = range(self.n) if servers is None else servers
        out = [None] * self.n
        def run(i):
            try:
                out[i] = f(i, conns[i])
            except Exception as e:  # a failure of that server only
                out[i] = e
        ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in servers]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out

    def script(self, src, keys, args, timeout, conns=None, servers=None):
        return self.each(lambda i, c: c.call(timeout, "EVAL", src, len(keys), *keys, *args), conns, servers)

    # ---- acquire

    def acquire(self, ttl, prio):
        token = os.urandom(16).hex()
        timeout = max(ttl / 2, 100) / 1000.0
        start = now_ms()
        res = self.script(OBTAIN, [self.k("lock"), self.k("fence")],
                          [token, prio, ttl, "1" if DEFECT == "equal-steals" else "0"], timeout)
        won = refused = 0
        fence, life, failed = 0, ttl, None
        victims, stolen_on, fresh = {}, {}, [False] * self.n
        for i, r in enumerate(res):
            if not isinstance(r, list):
                failed = failed or r
                continue
            if r[0] == 0:
                refused += 1
                continue
            won += 1
            fence = max(fence, r[1])
            fresh[i] = r[0] == 1
            if r[0] == 2:
                life = max(life, r[4])
                pairs = [(r[2], r[3])] + [(r[j], r[j + 1]) for j in range(5, len(r), 2)]
                for v, left in pairs:
                    victims[v] = max(victims.get(v, left), left)
                    stolen_on.setdefault(v, []).append(i)
        if won < self.q:
            if won > 0 or failed is not None:
                self.undo(token, fresh)
                self.listen_after_failure(token, ttl)
            if refused > self.n - self.q and failed is None:
                return {"type": "acquire_fail", "reason": "held"}
            return error("obtained on %d of %d servers (%s)" % (won, self.n, failed))
        if self.n > 1:
            raised = self.script(RAISE, [self.k("fence")], [fence], timeout)
            if sum(1 for x in raised if x == 1) < self.q:
                self.undo(token, fresh)
                self.listen_after_failure(token, ttl)
                return error("the fence reached too few servers")
        until = start + ttl - drift(ttl)
        if not victims:
            self.watch(token, ttl, until, True)
            return self.granted(token, fence, until, ttl, start)
        h = self.watch(token, ttl, start + life + drift(life), False)
        longest = 0
        for v in sorted(victims):
            left = victims[v]
            wait = max(left, 0) + drift(max(left, 0))
            longest = max(longest, wait)
            self.notify(v, token, stolen_on[v], wait)
        if DEFECT != "no-ack-wait":
            self.await_acks(token, victims, now_ms() + longest)
        h.settled.set()
        res = self.script(SETTLE, [self.k("lock")], [token], timeout)
        held = sum(1 for x in res if x == 1)
        robbed = sum(1 for x in res if x == -1)
        if held >= self.q and not h.lost:
            with h.mu:
                h.until = max(h.until, until)
            return self.granted(token, fence, until, ttl, start)
        if robbed > 0 or h.lost:
            h.acked.wait(timeout)  # let the watchers acknowledge the robber
        self.drop(h)
        self.undo(token, None)
        self.listen_after_failure(token, ttl)
        return error("the steal did not hold: %d of %d servers after the wait" % (held, self.n))

    def granted(self, token, fence, until, ttl, start):
        end = now_ms()
        if until <= end:
            h = self.holds.get(token)
            if h is not None:
                self.drop(h)
            self.undo(token, None)
            self.listen_after_failure(token, ttl)
            return error("no validity left: the acquire took %.1f ms" % (end - start))
        self.leases[token] = (until, ttl)
        return {"type": "acquire_ok", "token": token, "fence": fence,
                "validity_ms": until - end, "elapsed_ms": end - start}

    def undo(self, token, fresh):
        self.each(lambda i, c: c.call(0.5, "EVAL", UNDO, 1, self.k("lock"), token,
                                      "1" if fresh and fresh[i] else "0"))

    def notify(self, victim, thief, servers, wait):
        note = self.k("note", victim)
        life = int(wait + 1000)
        def push(i, c):
            c.call(0.5, "MULTI")
            c.call(0.5, "RPUSH", note, thief)
            c.call(0.5, "PEXPIRE", note, life)
            return c.call(0.5, "EXEC")
        self.each(push, servers=servers)

    def await_acks(self, token, victims, deadline):
        pending = set(victims)
        got = []
        cond = threading.Condition()
        over = threading.Event()
        acks = self.k("ack", token)
        def listen(i):
            c = Conn(self.addrs[i])
            while not over.is_set():
                left = deadline - now_ms()
                if left < 1:
                    break
                wait = min(left, 1000) / 1000.0
                try:
                    r = c.call(wait + 1.0, "BLPOP", acks, "%.3f" % wait)
                except OSError:
                    over.wait(0.01)
                    continue
                if isinstance(r, list):
                    with cond:
                        got.append(r[1])
                        cond.notify_all()
            c.close()
        ts = [threading.Thread(target=listen, args=(i,), daemon=True) for i in range(self.n)]
        for t in ts:
            t.start()
        with cond:
            while pending:
                while got:
                    pending.discard(got.pop())
                left = deadline - now_ms()
                if not pending or left <= 0:
                    break
                cond.wait(left / 1000.0)
        over.set()
        self.each(lambda i, c: c.call(0.5, "DEL", acks))

    # ---- watchers

    def watch(self, token, ttl, until, settled):
        h = Holding(token, ttl, until, settled)
        with self.mu:
            self.holds[token] = h
        for i in range(self.n):
            t = threading.Thread(target=self.watcher, args=(h, i), daemon=True)
            h.threads.append(t)
            t.start()
        return h

    def watcher(self, h, i):
        c = Conn(self.addrs[i])
        note, wake = self.k("note", h.token), self.k("wake", h.token)
        while not h.stopped.is_set():
            with h.mu:
                left = h.until - now_ms()
            if left <= 0 and h.settled.is_set():
                h.stopped.set()
                self.forget(h)
                break
            wait = min(max(left, 10), 1000) / 1000.0
            try:
                r = c.call(wait + 1.5, "BLPOP", note, wake, "%.3f" % wait)
            except OSError:
                h.stopped.wait(0.1)
                continue
            if isinstance(r, list) and r[0] == note:
                with h.mu:
                    first = not h.handled
                    h.handled = True
                if first:
                    self.theft(h, r[1])
                elif (h.acked.wait(h.ttl / 1000.0)):
                    self.ack(h, r[1])
        c.close()

    def theft(self, h, thief):
        while not h.settled.wait(0.05):  # its own acquire still waits for its victims
            if h.stopped.is_set():
                return
        with h.mu:
            h.lost = True
        self.out.write({"type": "lost", "token": h.token, "thief": thief})
        self.ack(h, thief)
        h.acked.set()

    def ack(self, h, thief):
        """Pushes the acknowledgement on every server until one took it,
        or the thief can no longer be waiting."""
        end = now_ms() + h.ttl
        lst = self.k("ack", thief)
        conns = [Conn(a) for a in self.addrs]
        def push(i, c):
            c.call(0.5, "MULTI")
            c.call(0.5, "RPUSH", lst, h.token)
            c.call(0.5, "PEXPIRE", lst, int(h.ttl + 1000))
            return c.call(0.5, "EXEC")
        while now_ms() < end:
            if any(isinstance(x, list) for x in self.each(push, conns)):
                break
            time.sleep(0.01)
        for c in conns:
            c.close()

    def drop(self, h):
        h.stopped.set()
        wake = self.k("wake", h.token)
        def push(i, c):
            c.call(0.5, "MULTI")
            c.call(0.5, "RPUSH", wake, "stop")
            c.call(0.5, "PEXPIRE", wake, 10000)
            return c.call(0.5, "EXEC")
        self.each(push)
        for t in h.threads:
            if t is not threading.current_thread():
                t.join(3)
        self.each(lambda i, c: c.call(0.5, "DEL", wake))
        self.forget(h)

    def forget(self, h):
        with self.mu:
            if self.holds.get(h.token) is h:
                del self.holds[h.token]

    def listen_after_failure(self, token, ttl):
        """A failed acquire (or a release that found its key taken) listens
        for a ttl: a thief of a key it set hears from it at once."""
        with self.mu:
            watched = token in self.holds
        if not watched:
            self.watch(token, ttl, now_ms() + ttl + drift(ttl), True)

    # ---- refresh and release

    def refresh(self, token, ttl):
        with self.mu:
            h = self.holds.get(token)
        if h is not None and h.lost:
            return expired("refresh")
        timeout = max(ttl / 2, 100) / 1000.0
        start = now_ms()
        res = self.script(REFRESH, [self.k("lock")], [token, ttl], timeout)
        yes, other, none, failed = count(res)
        if h is not None and h.lost:
            return expired("refresh")
        if yes < self.q:
            if other + none > self.n - self.q:
                valid_until = self.leases.get(token, (0, 0))[0]
                if yes > 0 and start >= valid_until:
                    self.release_keys(token)  # a key it revived past its end
                return expired("refresh")
            return error("refreshed on %d of %d servers (%s)" % (yes, self.n, failed))
        until = start + ttl - drift(ttl)
        if h is not None:
            with h.mu:
                h.until = max(h.until, until)
        else:
            self.watch(token, ttl, until, True)
        end = now_ms()
        if until <= end:
            return error("no validity left: the refresh took %.1f ms" % (end - start))
        self.leases[token] = (until, ttl)
        return {"type": "refresh_ok", "validity_ms": until - end, "elapsed_ms": end - start}

    def release_keys(self, token):
        return count(self.script(RELEASE, [self.k("lock"), self.k("note", token)], [token], 0.5))

    def release(self, token):
        with self.mu:
            h = self.holds.get(token)
        valid_until, ttl = self.leases.pop(token, (0, 0))
        began = now_ms()
        yes, other, none, failed = self.release_keys(token)
        if h is not None:
            self.drop(h)
        if other > 0:
            self.listen_after_failure(token, max(h.ttl if h else ttl, 500))
        lost = h is not None and h.lost
        if yes >= self.q:
            return {"type": "release_ok"}
        if other + none > self.n - self.q:
            if yes > 0 and began < valid_until and not lost:
                return error("released on %d of %d servers within its validity" % (yes, self.n))
            return expired("release")
        return error("released on %d of %d servers (%s)" % (yes, self.n, failed))

    def close(self):
        with self.mu:
            hs = list(self.holds.values())
        for h in hs:
            h.stopped.set()
        for c in self.conns:
            c.close()


def count(res):
    yes = other = none = 0
    failed = None
    for x in res:
        if x == 1:
            yes += 1
        elif x == -1:
            other += 1
        elif x == 0:
            none += 1
        elif failed is None:
            failed = x
    return yes, other, none, failed


def error(text, definite=False):
    m = {"type": "error", "code": "redis", "text": text}
    if definite:
        m["definite"] = True
    return m


def expired(op):
    return {"type": op + "_fail", "reason": "expired"}


# ---------------------------------------------------------------- server


class Out:
    """stdout, one JSON object a line, flushed, one writer at a time: the
    replies, and the watchers' lost notices."""

    def __init__(self):
        self.mu = threading.Lock()

    def write(self, m):
        line = json.dumps(m) + "\n"
        with self.mu:
            sys.stdout.write(line)
            sys.stdout.flush()


def field(req, name, kind):
    v = req.get(name)
    if not isinstance(v, kind) or isinstance(v, bool):
        raise ValueError("field %r: want %s, got %r" % (name, kind.__name__, v))
    return v


def serve():
    out = Out()
    lock = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            rid = req.get("id", 0)
            typ = req.get("type")
        except (ValueError, AttributeError):
            out.write({"id": 0, "type": "error", "code": "bad request", "text": "not a JSON object", "definite": True})
            continue
        try:
            if typ == "init":
                if field(req, "lock", str) != "priority-redlock":
                    reply = error("this serves priority-redlock only", True)
                    reply["code"] = "unsupported"
                else:
                    lock = PriorityRedlock(field(req, "name", str), field(req, "addrs", list), out)
                    reply = {"type": "init_ok"}
            elif lock is None:
                reply = error("the first request must be init", True)
            elif typ == "acquire":
                reply = lock.acquire(field(req, "ttl_ms", int), field(req, "priority", int))
            elif typ == "refresh":
                reply = lock.refresh(field(req, "token", str), field(req, "ttl_ms", int))
            elif typ == "release":
                reply = lock.release(field(req, "token", str))
            else:
                reply = {"type": "error", "code": "unsupported", "text": "no request type %r" % typ, "definite": True}
        except ValueError as e:
            reply = {"type": "error", "code": "bad request", "text": str(e), "definite": True}
        except Exception as e:  # a bug of ours: the outcome is unknown
            log("%s: %r" % (typ, e))
            reply = error("internal: %r" % e)
            reply["code"] = "internal"
        if reply.get("code") == "redis":
            log("%s: %s" % (typ, reply["text"]))
        reply["id"] = rid
        out.write(reply)
    if lock is not None:
        lock.close()


if __name__ == "__main__":
    serve()
