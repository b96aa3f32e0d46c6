"""Tests of amqp_locks and lockprover_impl against a real RabbitMQ.

    cd examples/python && /usr/bin/python3 -m unittest -v

The broker is AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/); every
test is skipped when it is unreachable. Each test works on queues with a name
of its own and deletes them afterwards.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid

import pika

import amqp_locks as al

URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
HERE = os.path.dirname(os.path.abspath(__file__))


def setUpModule():
    try:
        al.Client(URL, connect_timeout=3).close()
    except al.ConnectionLost as e:
        raise unittest.SkipTest(f"no broker at {URL}: {e}")


class BrokerTest(unittest.TestCase):
    """Gives each test a unique lock name, clients that are closed after the
    test, and a cleanup of every queue the name can have made."""

    def setUp(self):
        self.name = f"lp-pytest-{uuid.uuid4().hex[:8]}"
        self.clients = []
        self.addCleanup(self.cleanup)

    def client(self, **kwargs):
        c = al.Client(URL, heartbeat=5, **kwargs)
        self.clients.append(c)
        return c

    def start(self, client, lock="semaphore", args=(), url=URL):
        """A lockprover_impl process (with args) as client of this test's
        lock, past its init."""
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "lockprover_impl.py"), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1)
        self.addCleanup(stop, proc)
        server = Session(proc)
        self.assertEqual(server.ask({"type": "init", "client": client, "lock": lock, "name": self.name,
                                     "url": url, "heartbeat_ms": 1000}),
                         {"id": 1, "type": "init_ok"})
        return server

    def cleanup(self):
        for c in self.clients:
            c.close()
        conn = pika.BlockingConnection(pika.URLParameters(URL))
        names = [al.slot_queue(self.name, slot) for slot in range(1, 11)]
        names += [al.holder_queue(self.name, slot) for slot in range(1, 11)]
        for name in names + [self.name]:
            # An exclusive queue of a process that just ended stays its
            # connection's until the broker has closed it: RESOURCE_LOCKED
            # meanwhile (once in CI beside the suite). Try again for 5 s.
            for attempt in range(50):
                ch = conn.channel()
                try:
                    ch.queue_delete(name)
                    ch.close()
                    break
                except pika.exceptions.ChannelClosedByBroker as e:
                    if e.reply_code != 405 or attempt == 49:
                        raise
                    time.sleep(0.1)
        conn.close()


class SemaphoreTest(BrokerTest):

    def test_slots_give_holders_then_full(self):
        al.Admin(self.client(), self.name).create(3)
        sems = [al.Semaphore(self.client(), self.name) for _ in range(4)]
        self.assertEqual([s.acquire() for s in sems[:3]], [1, 2, 3])
        with self.assertRaises(al.Full):
            sems[3].acquire()
        self.assertTrue(all(s.verify(slot) for s, slot in zip(sems, [1, 2, 3])))
        self.assertEqual(al.Admin(self.client(), self.name).count(), 3)
        # A released slot is the next one taken.
        sems[1].release(2)
        self.assertFalse(sems[1].verify(2))
        self.assertEqual(sems[3].acquire(), 2)

    def test_absent_without_slots(self):
        with self.assertRaises(al.Absent):
            al.Semaphore(self.client(), self.name).acquire()

    def test_release_of_a_slot_not_held(self):
        al.Admin(self.client(), self.name).create(1)
        sem = al.Semaphore(self.client(), self.name)
        with self.assertRaises(al.NotHeld):
            sem.release(1)
        self.assertFalse(sem.verify(1))

    def test_removed_slot_is_lost_to_its_holder(self):
        admin = al.Admin(self.client(), self.name)
        admin.create(2)
        first, second = al.Semaphore(self.client(), self.name), al.Semaphore(self.client(), self.name)
        self.assertEqual((first.acquire(), second.acquire()), (1, 2))
        self.assertEqual(admin.change(-1), (2, 1))
        self.assertTrue(first.verify(1))
        self.assertFalse(second.verify(2))
        # wait returns once the holder of the removed slot lets go.
        releaser = threading.Timer(0.3, second.release, args=(2,))
        releaser.start()
        started = time.monotonic()
        admin.wait(2)
        releaser.join()
        self.assertGreaterEqual(time.monotonic() - started, 0.25)
        self.assertEqual(admin.change(+2), (1, 3))
        self.assertEqual(admin.destroy(), 3)
        self.assertFalse(first.verify(1))
        with self.assertRaises(al.Absent):
            al.Semaphore(self.client(), self.name).acquire()

    def test_a_failed_verify_relinquishes_the_slot(self):
        # The spec's "lock-relinquished": once a verify found the slot gone,
        # no later verify says held, even after the slot is created again.
        admin = al.Admin(self.client(), self.name)
        admin.create(1)
        sem = al.Semaphore(self.client(), self.name)
        self.assertEqual(sem.acquire(), 1)
        admin.change(-1)
        self.assertFalse(sem.verify(1))
        admin.change(+1)
        self.assertFalse(sem.verify(1))
        # It kept its B queue: no one else takes the slot until it releases.
        other = al.Semaphore(self.client(), self.name)
        with self.assertRaises(al.Full):
            other.acquire()
        sem.release(1)
        self.assertEqual(other.acquire(), 1)

    def test_tidy_verify_lets_go_at_once(self):
        admin = al.Admin(self.client(), self.name)
        admin.create(1)
        sem = al.Semaphore(self.client(tidy_verify=True), self.name)
        self.assertEqual(sem.acquire(), 1)
        admin.change(-1)
        self.assertFalse(sem.verify(1))
        admin.change(+1)
        other = al.Semaphore(self.client(), self.name)
        self.assertEqual(other.acquire(), 1)
        self.assertFalse(sem.verify(1))
        with self.assertRaises(al.NotHeld):
            sem.release(1)
        self.assertTrue(other.verify(1))

    def test_create_twice_is_exists(self):
        admin = al.Admin(self.client(), self.name)
        admin.create(2)
        with self.assertRaises(al.Exists):
            admin.create(1)
        self.assertEqual(admin.count(), 2)

    def test_change_never_goes_below_zero(self):
        admin = al.Admin(self.client(), self.name)
        admin.create(2)
        self.assertEqual(admin.change(-5), (2, 0))
        self.assertEqual(admin.count(), 0)

    def test_racing_clients_one_winner(self):
        al.Admin(self.client(), self.name).create(1)
        for _ in range(10):
            sems = [al.Semaphore(self.client(), self.name) for _ in range(2)]
            barrier = threading.Barrier(len(sems))
            results = [None] * len(sems)

            def race(i):
                barrier.wait()
                try:
                    results[i] = sems[i].acquire()
                except al.Failed as e:
                    results[i] = e.reason

            threads = [threading.Thread(target=race, args=(i,)) for i in range(len(sems))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(results.count(1), 1, results)
            self.assertTrue(set(results) <= {1, "full", "contended"}, results)
            winner = sems[results.index(1)]
            self.assertTrue(winner.verify(1))
            winner.release(1)

    def test_lost_races_end_contended(self):
        al.Admin(self.client(), self.name).create(1)
        holder = al.Semaphore(self.client(), self.name)
        self.assertEqual(holder.acquire(), 1)
        loser_client = self.client()
        loser = al.Semaphore(loser_client, self.name, retries=2)
        # Make the loser's probes miss the holder's B queue, so that it
        # declares it and meets RESOURCE_LOCKED on every scan.
        exists = loser_client._exists
        loser_client._exists = lambda q: False if q.endswith("-B") else exists(q)
        with self.assertRaises(al.Contended):
            loser.acquire()
        # Each 405 cost a channel, which was reopened: the client still works.
        del loser_client._exists
        self.assertTrue(loser_client.is_open)
        with self.assertRaises(al.Full):
            loser.acquire()
        self.assertTrue(holder.verify(1))

    def test_admin_mutex_held_is_contended(self):
        al.Admin(self.client(), self.name).create(1)
        al.Mutex(self.client(), self.name).acquire()  # the administration mutex
        with self.assertRaises(al.Contended):
            al.Admin(self.client(), self.name, retries=1, poll_interval=0.05).count()

    def test_plain_failure_says_unavailable(self):
        # The spec's step 2 to the letter: no slot to take is one failure,
        # whether the semaphore is full or has no slots.
        plain = al.Semaphore(self.client(), self.name, plain_failure=True)
        with self.assertRaises(al.Unavailable) as absent:
            plain.acquire()
        al.Admin(self.client(), self.name).create(1)
        holder = al.Semaphore(self.client(), self.name, plain_failure=True)
        self.assertEqual(holder.acquire(), 1)
        with self.assertRaises(al.Unavailable) as full:
            plain.acquire()
        for failure in (absent.exception, full.exception):
            self.assertIs(type(failure), al.Unavailable)
            self.assertEqual(failure.reason, "unavailable")
        # The precise failures are kinds of Unavailable.
        with self.assertRaises(al.Unavailable) as precise:
            al.Semaphore(self.client(), self.name).acquire()
        self.assertIsInstance(precise.exception, al.Full)
        # A slot let go is taken as before.
        holder.release(1)
        self.assertEqual(plain.acquire(), 1)
        self.assertTrue(plain.verify(1))

    def test_plain_failure_of_a_persistent_mutex(self):
        al.Admin(self.client(), self.name).create(2)
        first = al.Semaphore(self.client(), self.name, max_slots=1, plain_failure=True)
        second = al.Semaphore(self.client(), self.name, max_slots=1, plain_failure=True)
        self.assertEqual(first.acquire(), 1)
        with self.assertRaises(al.Unavailable) as failure:
            second.acquire()
        self.assertIs(type(failure.exception), al.Unavailable)

    def test_persistent_mutex_uses_slot_one_only(self):
        al.Admin(self.client(), self.name).create(2)
        first = al.Semaphore(self.client(), self.name, max_slots=1)
        second = al.Semaphore(self.client(), self.name, max_slots=1)
        self.assertEqual(first.acquire(), 1)
        with self.assertRaises(al.Full):
            second.acquire()

    def test_lost_connection_loses_the_slot(self):
        al.Admin(self.client(), self.name).create(1)
        proxy = Proxy(URL)
        self.addCleanup(proxy.close)
        victim_client = al.Client(proxy.url, heartbeat=5)
        self.clients.append(victim_client)
        victim = al.Semaphore(victim_client, self.name)
        self.assertEqual(victim.acquire(), 1)
        proxy.cut()
        # The broker sees the socket close and deletes the B queue.
        other = al.Semaphore(self.client(), self.name)
        self.assertEqual(eventually(other.acquire), 1)
        self.assertFalse(victim.verify(1))
        self.assertFalse(victim_client.is_open)
        with self.assertRaises(al.NotHeld):
            victim.release(1)
        with self.assertRaises(al.ConnectionLost):
            victim.acquire()

    @unittest.skipUnless(shutil.which("rabbitmqctl"), "needs rabbitmqctl")
    def test_forced_close_is_noticed_while_idle(self):
        al.Admin(self.client(), self.name).create(1)
        c = self.client(name=f"{self.name}-victim")
        self.assertEqual(al.Semaphore(c, self.name).acquire(), 1)
        force_close(f"{self.name}-victim")
        self.assertTrue(eventually(lambda: not c.process_events()))
        self.assertFalse(al.Semaphore(c, self.name).verify(1))


class MutexTest(BrokerTest):

    def test_true_mutex(self):
        first, second = al.Mutex(self.client(), self.name), al.Mutex(self.client(), self.name)
        first.acquire()
        with self.assertRaises(al.Held):
            second.acquire()
        self.assertTrue(first.verify())
        self.assertFalse(second.verify())
        with self.assertRaises(al.NotHeld):
            second.release()
        first.release()
        self.assertFalse(first.verify())
        second.acquire()
        self.assertTrue(second.verify())


class ServerTest(BrokerTest):
    """lockprover_impl end to end, as lockprover drives it."""

    def test_semaphore_session(self):
        admin, c1 = self.start("admin"), self.start("c1")
        self.assertEqual(c1.ask({"type": "acquire"}), {"id": 2, "type": "acquire_fail", "reason": "absent"})
        self.assertEqual(admin.ask({"type": "create", "slots": 1}), {"id": 2, "type": "create_ok"})
        reply = admin.ask({"type": "create", "slots": 1})
        self.assertEqual((reply["type"], reply["code"], reply["definite"]), ("error", "exists", True))
        self.assertEqual(admin.ask({"type": "count"}), {"id": 4, "type": "count_ok", "slots": 1})
        self.assertEqual(c1.ask({"type": "acquire"}), {"id": 3, "type": "acquire_ok", "slot": 1})
        time.sleep(3.5)  # idle for more than three heartbeats: the connection must survive
        self.assertEqual(c1.ask({"type": "verify", "slot": 1}), {"id": 4, "type": "verify_ok", "held": True})
        self.assertEqual(c1.ask({"type": "release", "slot": 1}), {"id": 5, "type": "release_ok"})
        reply = c1.ask({"type": "release", "slot": 1})
        self.assertEqual((reply["type"], reply["code"], reply["definite"]), ("error", "not held", True))
        self.assertEqual(c1.ask({"type": "verify", "slot": 1}), {"id": 7, "type": "verify_ok", "held": False})
        self.assertEqual(admin.ask({"type": "change", "delta": 1}),
                         {"id": 5, "type": "change_ok", "from": 1, "to": 2})
        self.assertEqual(admin.ask({"type": "wait", "slot": 1}), {"id": 6, "type": "wait_ok"})
        reply = admin.ask({"type": "frobnicate"})
        self.assertEqual((reply["id"], reply["type"], reply["code"], reply["definite"]),
                         (7, "error", "unsupported", True))
        self.assertEqual(admin.ask({"type": "destroy"}), {"id": 8, "type": "destroy_ok", "from": 2})
        for server in (admin, c1):
            self.assertEqual(server.end(), 0)

    def test_mutex_session(self):
        m1, m2 = self.start("m1", "mutex"), self.start("m2", "mutex")
        self.assertEqual(m1.ask({"type": "acquire"}), {"id": 2, "type": "acquire_ok"})
        self.assertEqual(m2.ask({"type": "acquire"}), {"id": 2, "type": "acquire_fail", "reason": "held"})
        self.assertEqual(m1.ask({"type": "verify"}), {"id": 3, "type": "verify_ok", "held": True})
        self.assertEqual(m2.ask({"type": "verify"}), {"id": 3, "type": "verify_ok", "held": False})
        reply = m1.ask({"type": "count"})
        self.assertEqual((reply["type"], reply["code"], reply["definite"]), ("error", "unsupported", True))
        self.assertEqual(m1.ask({"type": "release"}), {"id": 5, "type": "release_ok"})
        self.assertEqual(m2.ask({"type": "acquire"}), {"id": 4, "type": "acquire_ok"})
        self.assertEqual(m1.end(), 0)
        self.assertEqual(m2.end(), 0)

    def test_pipelined_requests_and_eof(self):
        # Requests that arrive together, as from a pipe, are all answered.
        self.assertEqual(run_server([
            {"id": 1, "type": "init", "client": "c1", "lock": "semaphore", "name": self.name,
             "url": URL, "heartbeat_ms": 0},
            {"id": 2, "type": "acquire"},
            {"id": 3, "type": "verify", "slot": 1},
        ]), [
            {"id": 1, "type": "init_ok"},
            {"id": 2, "type": "acquire_fail", "reason": "absent"},
            {"id": 3, "type": "verify_ok", "held": False},
        ])

    def test_unreachable_broker_at_init(self):
        # init answers init_ok; the operations that need the broker then
        # report it, and verify and release know that nothing is held.
        url = f"amqp://guest:guest@127.0.0.1:{free_port()}/"
        replies = run_server([
            {"id": 1, "type": "init", "client": "c1", "lock": "semaphore", "name": self.name,
             "url": url, "heartbeat_ms": 1000},
            {"id": 2, "type": "acquire"},
            {"id": 3, "type": "verify", "slot": 1},
            {"id": 4, "type": "release", "slot": 1},
        ])
        self.assertEqual(replies[0], {"id": 1, "type": "init_ok"})
        self.assertEqual((replies[1]["id"], replies[1]["type"], replies[1]["code"]), (2, "error", "broker"))
        self.assertNotIn("definite", replies[1])
        self.assertEqual(replies[2], {"id": 3, "type": "verify_ok", "held": False})
        self.assertEqual((replies[3]["type"], replies[3]["code"], replies[3]["definite"]),
                         ("error", "not held", True))

    def test_malformed_init_is_an_error_and_an_exit(self):
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "lockprover_impl.py")],
            input=json.dumps({"id": 1, "type": "init", "client": "c1", "lock": "rwlock",
                              "name": self.name, "url": URL}) + "\n",
            capture_output=True, text=True, timeout=30)
        self.assertEqual(proc.returncode, 1)
        reply = json.loads(proc.stdout)
        self.assertEqual((reply["id"], reply["type"], reply["definite"]), (1, "error", True))

    def test_reconnects_after_a_lost_connection(self):
        admin, c1 = self.start("admin"), self.start("c1")
        admin.ask({"type": "create", "slots": 1})
        self.assertEqual(c1.ask({"type": "acquire"})["type"], "acquire_ok")
        if not shutil.which("rabbitmqctl"):
            self.skipTest("needs rabbitmqctl")
        force_close(f"lockprover c1 {self.name}")
        time.sleep(0.5)  # the server notices while idle
        self.assertEqual(c1.ask({"type": "verify", "slot": 1}), {"id": 3, "type": "verify_ok", "held": False})
        # The next acquire connects again, with a connection that holds nothing.
        self.assertEqual(c1.ask({"type": "acquire"}), {"id": 4, "type": "acquire_ok", "slot": 1})
        self.assertEqual(c1.end(), 0)


class VariantServerTest(BrokerTest):
    """lockprover_impl's --lazy-connect and --plain-failure, which are as
    correct by the spec as its defaults."""

    def proxy(self):
        proxy = Proxy(URL)
        self.addCleanup(proxy.close)
        return proxy

    def test_default_connects_at_init_and_at_once_after_a_loss(self):
        proxy = self.proxy()
        c1 = self.start("c1", url=proxy.url)
        self.assertEqual(proxy.accepted, 1)
        proxy.cut()
        self.assertTrue(eventually(lambda: proxy.accepted == 2))
        self.assertEqual(c1.end(), 0)

    def test_lazy_connect_waits_for_an_operation_that_needs_the_broker(self):
        proxy = self.proxy()
        admin = self.start("admin")
        c1 = self.start("c1", args=["--lazy-connect"], url=proxy.url)
        self.assertEqual(proxy.accepted, 0)
        # verify and release know without a connection that nothing is held.
        self.assertEqual(c1.ask({"type": "verify", "slot": 1}), {"id": 2, "type": "verify_ok", "held": False})
        reply = c1.ask({"type": "release", "slot": 1})
        self.assertEqual((reply["type"], reply["code"], reply["definite"]), ("error", "not held", True))
        self.assertEqual(proxy.accepted, 0)
        # The first acquire connects; the next ones use that connection.
        self.assertEqual(c1.ask({"type": "acquire"}), {"id": 4, "type": "acquire_fail", "reason": "absent"})
        self.assertEqual(proxy.accepted, 1)
        admin.ask({"type": "create", "slots": 1})
        self.assertEqual(c1.ask({"type": "acquire"}), {"id": 5, "type": "acquire_ok", "slot": 1})
        self.assertEqual(c1.ask({"type": "verify", "slot": 1}), {"id": 6, "type": "verify_ok", "held": True})
        self.assertEqual(proxy.accepted, 1)
        # A lost connection is not replaced until an operation needs one.
        proxy.cut()
        time.sleep(0.6)  # the server notices while idle, and waits
        self.assertEqual(proxy.accepted, 1)
        self.assertEqual(c1.ask({"type": "verify", "slot": 1}), {"id": 7, "type": "verify_ok", "held": False})
        self.assertEqual(proxy.accepted, 1)
        self.assertEqual(eventually(lambda: c1.ask({"type": "acquire"}).get("slot")), 1)
        self.assertEqual(proxy.accepted, 2)
        self.assertEqual(c1.end(), 0)

    def test_lazy_connect_answers_init_without_a_broker(self):
        # That init does not wait for the broker is shown by connections
        # counted, not by time (a timed bound failed on a loaded machine):
        # test_lazy_connect_waits_for_an_operation_that_needs_the_broker
        # sees none made by init. Here: with no broker at all, init still
        # succeeds and the first operation that needs one says why it fails.
        replies = run_server([
            {"id": 1, "type": "init", "client": "c1", "lock": "semaphore", "name": self.name,
             "url": f"amqp://guest:guest@127.0.0.1:{free_port()}/", "heartbeat_ms": 1000},
            {"id": 2, "type": "acquire"},
        ], args=["--lazy-connect"])
        self.assertEqual(replies[0], {"id": 1, "type": "init_ok"})
        self.assertEqual((replies[1]["type"], replies[1]["code"]), ("error", "broker"))
        self.assertNotIn("definite", replies[1])

    def test_plain_failure_says_unavailable_for_full_and_absent(self):
        admin = self.start("admin")
        c1, c2 = (self.start(c, args=["--plain-failure"]) for c in ("c1", "c2"))
        unavailable = {"type": "acquire_fail", "reason": "unavailable"}
        self.assertEqual(c1.ask({"type": "acquire"}), {"id": 2, **unavailable})
        admin.ask({"type": "create", "slots": 1})
        self.assertEqual(c1.ask({"type": "acquire"}), {"id": 3, "type": "acquire_ok", "slot": 1})
        self.assertEqual(c2.ask({"type": "acquire"}), {"id": 2, **unavailable})
        self.assertEqual(c1.ask({"type": "release", "slot": 1}), {"id": 4, "type": "release_ok"})
        self.assertEqual(c2.ask({"type": "acquire"}), {"id": 3, "type": "acquire_ok", "slot": 1})
        # A true mutex still says held: the option is about slots.
        m1, m2 = (self.start(m, "mutex", args=["--plain-failure"]) for m in ("m1", "m2"))
        self.assertEqual(m1.ask({"type": "acquire"}), {"id": 2, "type": "acquire_ok"})
        self.assertEqual(m2.ask({"type": "acquire"}), {"id": 2, "type": "acquire_fail", "reason": "held"})

    def test_both_options_together(self):
        c1 = self.start("c1", args=["--lazy-connect", "--plain-failure"])
        self.assertEqual(c1.ask({"type": "acquire"}), {"id": 2, "type": "acquire_fail", "reason": "unavailable"})
        self.assertEqual(c1.end(), 0)

    def test_unknown_option_is_refused(self):
        proc = subprocess.run([sys.executable, os.path.join(HERE, "lockprover_impl.py"), "--lazy"],
                              input="", capture_output=True, text=True, timeout=30)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stdout, "")
        self.assertIn("unrecognized arguments: --lazy", proc.stderr)


class Session:
    """A lockprover_impl process and the ids of its requests."""

    def __init__(self, proc):
        self.proc = proc
        self.next_id = 1

    def ask(self, request):
        request = {"id": self.next_id, **request}
        self.next_id += 1
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"no reply to {request}: {self.proc.stderr.read()}")
        return json.loads(line)

    def end(self):
        """Close stdin; the exit status, once the process has exited."""
        self.proc.stdin.close()
        code = self.proc.wait(timeout=10)
        rest = self.proc.stdout.read()
        if rest:
            raise AssertionError(f"more on stdout after the last reply: {rest!r}")
        return code


def run_server(requests, args=()):
    """Pipe requests into a server (with args) at once; its replies, once it
    exited 0 at the end of its input."""
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "lockprover_impl.py"), *args],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"exit status {proc.returncode}: {proc.stderr}")
    return [json.loads(line) for line in proc.stdout.splitlines()]


def stop(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()


def eventually(f, timeout=5.0):
    """f()'s first result that is neither an exception nor false."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = f()
            if result:
                return result
        except al.LockError:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def force_close(connection_name, looks=5):
    """Close the broker connection of that name: 320 CONNECTION_FORCED.

    Beside the whole suite in CI, one listing held no connection of that
    name although the victim's acquire had just succeeded (why is not
    known; rabbitmqctl took some 16 s a command then). So the connection
    is looked for up to five times before that is a failure."""
    for look in range(1, looks + 1):
        listing = subprocess.run(["rabbitmqctl", "-q", "list_connections", "pid", "client_properties"],
                                 capture_output=True, text=True, check=True, timeout=120).stdout
        pids = [line.split("\t")[0] for line in listing.splitlines() if f'"{connection_name}"' in line]
        if len(pids) > 1 or (not pids and look == looks):
            raise AssertionError(f"{len(pids)} connections named {connection_name!r} in {look} listings")
        if pids:
            break
        time.sleep(1)
    subprocess.run(["rabbitmqctl", "-q", "close_connection", pids[0], "test says bye"],
                   capture_output=True, check=True, timeout=120)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """A TCP forwarder to the broker whose connections can be cut, as a
    crashed client's kernel would close its socket."""

    def __init__(self, url):
        params = pika.URLParameters(url)
        self.target = (params.host, params.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        port = self.listener.getsockname()[1]
        self.url = url.replace(f":{params.port}/", f":{port}/", 1)
        self.sockets = []
        self.accepted = 0  # connections accepted so far
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def cut(self):
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.listener.close()
        self.cut()


if __name__ == "__main__":
    unittest.main()
