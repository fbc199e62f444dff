#!/usr/bin/env python3
"""Failover with real keepalived: three lockcached nodes, each beside a
keepalived running the shipped etc/keepalived.conf, and a fourth namespace
for the clients. While clients write through the virtual IP, and others
hold and contend for named locks, the master's lockcached is killed with
SIGKILL. As root, with keepalived installed:

    LOCKCACHED_BINARY=build/lockcached LOCKCACHED_CLI=build/src/cli/lockcached-cli \\
        python3 test/ha/failover_test.py

The lock service is replicated synchronously (docs/high-availability.md),
so the test holds the new master to that: no grant a client saw is lost
(its session resumes with its locks and tokens), no name is held by two
sessions at once, and fencing tokens grow strictly across the failover.

Prints what it measured (time to a new master, acknowledged cache writes
lost, time to the first lock grant and the sessions resumed); CI runs it in
test/ci/25-high-availability.sh.
"""

import os
import re
import select
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import haclient  # noqa: E402
import netns  # noqa: E402
from haclient import eventually  # noqa: E402

BINARY = os.path.abspath(os.environ.get("LOCKCACHED_BINARY", "build/lockcached"))
CLI = os.path.abspath(os.environ.get("LOCKCACHED_CLI", "build/src/cli/lockcached-cli"))
SERVERS = 3
CLIENT_NODE = 3
# How long a new master may take to serve writes after the old one is
# killed: two failed health checks a second apart, VRRP's hand-over, then
# lockcached's once-a-second look at the address. Measured 3-5 s here.
FAILOVER_BOUND = 10.0
# The lock service's clients (a session resumes within its grace period).
MUTEX = "mutex"            # the name the contenders take turns on
CONTENDERS = 4
LOCK_WAIT = 2              # seconds a contender's `lock` waits
HOLD_SECONDS = 0.01        # how long a contender holds MUTEX
LINGER_LIMIT = 10          # how long the one holding it when the master dies may wait for that
HELD = 5                   # the holder's locks: held:1..held:5
HOLDER_GRACE_MS = 30000
CONTENDER_GRACE_MS = 60000
SESSION_TIMEOUT = FAILOVER_BOUND + 10  # a client's wait for a master to resume on
SOCKET_TIMEOUT = LOCK_WAIT + 3


# The shipped file is for a Raft cluster; a --virtual_ip node's keepalived
# checks that lockcached answers instead, with the priorities and the
# non-preemptive mode yrmcds advises (docs/high-availability.md).
def keepalived_config(cluster, node, priority):
    return haclient.keepalived_config(cluster, node, CLI, [
        (r"--timeout 1 cluster leads", "--timeout 1 stats"),
        (r"(?m)^  fall 1$", "  fall 2"),
        (r"(?m)^  rise 1$", "  rise 2"),
        (r"(?m)^  priority \d+$", "  priority %d\n  nopreempt" % priority),
    ])


class VipClient(threading.Thread):
    """A client in the client node that repeats step() through the virtual
    IP until stopped, connecting again whenever the connection fails (as
    an application would across a failover)."""

    def __init__(self, cluster, port):
        super().__init__(daemon=True)
        self.cluster = cluster
        self.port = port
        self.stop = threading.Event()

    def run(self):
        c = None
        while not self.stop.is_set():
            try:
                if c is None:
                    c = haclient.client(self.cluster, CLIENT_NODE, self.cluster.vip, self.port)
                    c.sock.settimeout(2)
                self.step(c)
            except OSError:
                if c is not None:
                    c.close()
                c = None
                time.sleep(0.05)
        if c is not None:
            c.close()

    def finish(self):
        self.stop.set()
        self.join()


class Writer(VipClient):
    """Sets key:0, key:1, ... as fast as the master answers; remembers which
    writes were acknowledged, and when."""

    def __init__(self, cluster):
        super().__init__(cluster, haclient.CACHE_PORT)
        self.next = 0
        self.acked = []
        self.ack_times = []

    def step(self, c):
        i = self.next
        self.next += 1
        if c.set("key:%d" % i, str(i)) == "STORED":
            self.acked.append(i)
            self.ack_times.append(time.monotonic())

    def first_ack_after(self, moment):
        return next((t for t in self.ack_times if t > moment), None)


class NotMaster(Exception):
    """A lock-service reply of a node that is not the master yet: its "503
    read-only replica" while keepalived has moved the virtual IP there but
    lockcached has not yet seen it and promoted itself."""


def peer_closed(sock):
    """Whether the server has closed this connection (or reset it): read
    without taking anything, and without waiting."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class LockSession:
    """One lock-service session used through the virtual IP, as an
    application keeps one across a failover: its first connection learns its
    id (`conn_id`) and sets its grace period, every later one takes it over
    with `conn_id ID`, which must answer "200 Resumed"."""

    def __init__(self, cluster, grace_ms, cancelled=None):
        self.cluster = cluster
        self.grace_ms = grace_ms
        self.cancelled = cancelled or threading.Event()
        self.c = None
        self.id = None
        self.opened_at = None  # when the live connection was made
        self.resumed_at = []   # when each "200 Resumed" arrived

    def open(self, timeout=None):
        """A new connection, retried until a master answers (refused,
        reset, a replica's 503) for `timeout` seconds; returns whether it
        resumed the session. A refused resume fails the test: the session's
        grace period is far from over, so its id must still work."""
        self.drop()
        deadline = time.monotonic() + (SESSION_TIMEOUT if timeout is None else timeout)
        while not self.cancelled.is_set():
            c = None
            try:
                opened_at = time.monotonic()
                c = haclient.client(self.cluster, CLIENT_NODE, self.cluster.vip,
                                    haclient.LOCK_PORT)
                c.sock.settimeout(SOCKET_TIMEOUT)
                resumed = self.id is not None
                if resumed:
                    self._expect(c, "conn_id " + self.id, r"200 Resumed")
                    self.resumed_at.append(time.monotonic())
                else:
                    session = self._expect(c, "conn_id", r"200 \S+").split()[1]
                    self._expect(c, "set_timeout %d" % self.grace_ms, r"200 Timeout set")
                    self.id = session
                self.c, self.opened_at, c = c, opened_at, None
                return resumed
            except (OSError, NotMaster):
                pass
            finally:
                if c is not None:
                    c.close()
            if time.monotonic() > deadline:
                raise AssertionError("session %s: no master answered within %.0f s"
                                     % (self.id, deadline - opened_at))
            time.sleep(0.05)
        raise ConnectionError("cancelled")

    def _expect(self, c, command, pattern):
        reply = c.call(command)
        if reply.startswith("503 "):
            raise NotMaster(reply)
        if not re.fullmatch(pattern, reply):
            raise AssertionError("session %s: %r answered %r" % (self.id, command, reply))
        return reply

    def call(self, command):
        reply = self.c.call(command)
        if reply.startswith("503 "):
            raise NotMaster(reply)
        return reply

    def drop(self):
        if self.c is not None:
            self.c.close()
        self.c = None


def lock_table(c, prefix=""):
    """`stats locks PREFIX` on the lock port: {name: (session, token)}."""
    c.send(("stats locks %s" % prefix).strip() + "\r\n")
    header = c.line()
    if header != "200 LOCKS":
        raise AssertionError("stats locks answered %r" % header)
    table = {}
    while True:
        line = c.line()
        if line == "END":
            return table
        word, name, session, _held_ms, _waiters, token, _client = line.split(" ")
        if word != "LOCK":
            raise AssertionError("stats locks listed %r" % line)
        table[name] = (session, int(token))


class Contender(threading.Thread):
    """Takes and releases MUTEX in a loop with a session of its own,
    `lock MUTEX LOCK_WAIT` then `unlock MUTEX`, through the virtual IP.
    Keeps every grant (when its reply arrived, token, session, when the
    connection that brought it was made) and every hold as the client saw
    it: from the grant's reply to just before its `unlock` was sent. While
    `linger` is set, a grant is held until the connection ends, so that one
    contender surely holds MUTEX when the master is killed.

    When its connection drops it resumes its session and carries on from
    where it was, as an application must:
    - it held MUTEX when the connection died (the server closed it before
      the unlock went out): the grant must have survived, `lock MUTEX`
      answers its token again and `unlock` must answer "200 Released";
    - an unlock went out unanswered: it is sent again, and "403 Not held"
      is right too (the old master may have released and replicated it);
    - a lock request went out unanswered (it waited, or its grant's reply
      was lost): it is sent again; if the old master granted it and the
      grant was replicated, the session holds it and the reply is that
      grant, with the old master's token."""

    def __init__(self, cluster, linger):
        super().__init__(daemon=True)
        self.linger = linger          # while set, a grant is held until the connection ends
        self.lingering = threading.Event()
        self.stop = threading.Event()
        self.cancelled = threading.Event()  # the test failed: give up at once
        self.session = LockSession(cluster, CONTENDER_GRACE_MS, self.cancelled)
        self.grants = []  # (received_at, token, session, opened_at)
        self.holds = []   # (start, end, token, session)
        self.errors = []
        self.held = None  # (token, received_at) while it holds MUTEX
        self.unlock_unanswered = False
        self.lock_unanswered = False
        self.resending = False
        self.kept = []                # tokens held when the connection died, released after
        self.unlocks_resent = 0
        self.resent_grants = []       # tokens of grants that answered a re-sent lock
        self.locks_resent = 0

    def run(self):
        try:
            while not self.cancelled.is_set() and (
                    not self.stop.is_set() or self.held or self.unlock_unanswered):
                try:
                    if self.session.c is None:
                        if self.session.open():
                            self.resumed()
                    self.step()
                except (OSError, NotMaster):
                    self.session.drop()
                    time.sleep(0.05)
        except BaseException as error:  # reported by the test's thread
            self.errors.append("session %s: %s" % (self.session.id, error))
        finally:
            self.session.drop()

    def resumed(self):
        s = self.session
        if self.unlock_unanswered:
            reply = s.call("unlock " + MUTEX)
            if reply not in ("200 Released", "403 Not held"):
                raise AssertionError("unlock re-sent after a resume answered %r" % reply)
            self.unlock_unanswered = False
            self.unlocks_resent += 1
        elif self.held:
            token, start = self.held
            reply = s.call("lock " + MUTEX)
            if reply != "200 Acquired %d" % token:
                raise AssertionError("held %s with token %d when the connection died; after "
                                     "the resume `lock %s` answered %r"
                                     % (MUTEX, token, MUTEX, reply))
            self.release(token, start, after_resume=True)
        elif self.lock_unanswered:
            self.locks_resent += 1
            self.resending = True  # step() sends it again

    def release(self, token, start, after_resume=False):
        c = self.session.c
        if peer_closed(c.sock):
            raise ConnectionError("closed while holding " + MUTEX)  # nothing sent: still held
        end = time.monotonic()
        c.send("unlock %s\r\n" % MUTEX)
        self.holds.append((start, end, token, self.session.id))
        self.held = None
        self.unlock_unanswered = True
        reply = c.line()
        self.unlock_unanswered = False
        if reply != "200 Released":
            raise AssertionError("unlock %s (token %d%s) answered %r"
                                 % (MUTEX, token, ", held across the failover" if after_resume
                                    else "", reply))
        if after_resume:
            self.kept.append(token)

    def step(self):
        s = self.session
        if self.held is not None:
            if self.linger.is_set():
                self.lingering.set()
                select.select([s.c.sock], [], [], LINGER_LIMIT)  # the master dies
            else:
                time.sleep(HOLD_SECONDS)
            self.release(*self.held)
            return
        if self.stop.is_set():
            return
        s.c.send("lock %s %s\r\n" % (MUTEX, LOCK_WAIT))
        self.lock_unanswered = True
        reply = s.c.line()
        received = time.monotonic()
        self.lock_unanswered = False
        resent, self.resending = self.resending, False
        if reply.startswith("200 Acquired "):
            token = int(reply.split()[2])
            self.held = (token, received)
            self.grants.append((received, token, s.id, s.opened_at))
            if resent:
                self.resent_grants.append(token)
        elif reply.startswith("503 "):
            raise NotMaster(reply)
        elif reply != "409 Unavailable":
            raise AssertionError("lock %s answered %r" % (MUTEX, reply))

    def finish(self, timeout=None):
        self.stop.set()
        self.join(timeout)


class KeepalivedFailover(haclient.ClusterTest):
    NODES = SERVERS + 1
    BINARY = BINARY
    FLAGS = ["--listen=0.0.0.0"]

    def start_keepalived(self, node):
        haclient.start_keepalived(self.cluster, node,
                                  keepalived_config(self.cluster, node, 100 - node), self.work)

    def role(self, node):
        try:
            return self.servers.replication(node).get("role")
        except OSError:
            return None

    def test_master_killed_while_clients_write(self):
        for node in range(SERVERS):
            self.servers.start(node)
            self.start_keepalived(node)
        holders = eventually(lambda: self.cluster.holders(self.cluster.vip) or None, 20,
                             "keepalived gives the virtual IP to a node")
        self.assertEqual(len(holders), 1)
        first = holders[0]
        eventually(lambda: self.role(first) == "master", 5, "its lockcached is the master")
        others = [n for n in range(SERVERS) if n != first]
        for node in others:
            eventually(lambda: self.servers.replication(node).get("state") == "streaming", 10,
                       "node %d streams from the master" % node)

        # The holder: a session of its own that takes held:1..held:5 and
        # keeps them across the failover.
        holder = LockSession(self.cluster, HOLDER_GRACE_MS)
        self.addCleanup(holder.drop)
        holder.open(5)
        held = {}
        for i in range(1, HELD + 1):
            reply = holder.call("lock held:%d" % i)
            self.assertRegex(reply, r"^200 Acquired \d+$")
            held["held:%d" % i] = int(reply.split()[2])

        writer = Writer(self.cluster)
        self.addCleanup(writer.finish)
        linger = threading.Event()
        contenders = [Contender(self.cluster, linger) for _ in range(CONTENDERS)]
        for contender in contenders:
            self.addCleanup(contender.finish, 5)
            self.addCleanup(contender.cancelled.set)
        writer.start()
        for contender in contenders:
            contender.start()
        grants = lambda: [g for c in contenders for g in c.grants]  # noqa: E731
        eventually(lambda: len(writer.acked) > 200 and len(grants()) > 20 and
                   all(c.grants for c in contenders), 10,
                   "the clients work through the virtual IP")
        # The next contender granted MUTEX holds it until its connection
        # ends: the master dies while a client holds it (and the others wait).
        linger.set()
        eventually(lambda: any(c.lingering.is_set() for c in contenders), 5,
                   "a contender holds %s" % MUTEX)
        self.servers.kill(first)  # returns once the process is gone
        killed_at = time.monotonic()
        linger.clear()
        # The old master's tokens started at its start time in microseconds
        # and grew by one per grant, the new master's start above its
        # promotion's: a token below this one was granted by the old master.
        killed_micros = int(time.time() * 1e6)
        self.assertEqual([c.errors for c in contenders if c.errors], [])

        # The holder reconnects and takes its session over on the new master.
        self.assertTrue(holder.open(), "the holder resumed its session")
        eventually(lambda: writer.first_ack_after(killed_at), FAILOVER_BOUND,
                   "a new master acknowledges a write")
        failover_seconds = writer.first_ack_after(killed_at) - killed_at
        # A grant on a connection made after the kill came from the new master.
        on_new_master = lambda: sorted(g for g in grants() if g[3] > killed_at)  # noqa: E731
        eventually(lambda: (all(c.session.resumed_at or c.errors for c in contenders) and
                            len(on_new_master()) > 20) or
                   any(c.errors for c in contenders), FAILOVER_BOUND,
                   "every contender resumes its session and the new master grants %s" % MUTEX)
        self.assertEqual([c.errors for c in contenders if c.errors], [])
        lock_failover_seconds = on_new_master()[0][0] - killed_at
        acked_before = len(writer.acked)
        eventually(lambda: len(writer.acked) > acked_before + 200, 10, "writes go on")

        holders = self.cluster.holders(self.cluster.vip)
        self.assertEqual(len(holders), 1, "exactly one node holds the virtual IP")
        new_master = holders[0]
        self.assertIn(new_master, others)
        self.assertEqual(self.role(new_master), "master")
        self.assertEqual(self.cluster.holds(first, self.cluster.vip), False)
        # It adopted every session of the old master (the holder's and the
        # contenders') with every lock: held:1..held:5, and MUTEX.
        took_over = re.findall(r"took over (\d+) lock-service sessions holding (\d+) locks",
                               self.servers.log(new_master))
        self.assertEqual(took_over[-1:], [(str(CONTENDERS + 1), str(HELD + 1))])

        # No grant the holder saw is lost: the new master lists each of its
        # locks under its session's serial (the id's public part) with the
        # token it was granted, and they are still its own: another session
        # is refused, its unlock works.
        self.assertEqual(lock_table(self.servers.client(new_master, haclient.LOCK_PORT), "held:"),
                         {name: (holder.id.split("-")[0], token) for name, token in held.items()})
        other = self.servers.vip_client(CLIENT_NODE, haclient.LOCK_PORT)
        self.assertEqual(other.call("lock held:1"), "409 Unavailable")
        self.assertEqual(holder.call("unlock held:1"), "200 Released")
        # Tokens after the promotion are above every one granted before.
        reply = other.call("lock held:1")
        self.assertRegex(reply, r"^200 Acquired \d+$")
        before = [g[1] for g in grants() if g[3] < killed_at] + list(held.values())
        self.assertGreater(int(reply.split()[2]), max(before))
        self.assertEqual(other.call("unlock held:1"), "200 Released")
        self.assertEqual(holder.call("unlock_all"), "200 Released")

        for contender in contenders:
            contender.finish()
        writer.finish()
        self.assertEqual([c.errors for c in contenders if c.errors], [])
        # No lock outlives its clients: every grant was answered to someone
        # who released it (a grant whose reply was lost, too).
        self.assertEqual(lock_table(self.servers.client(new_master, haclient.LOCK_PORT)), {})

        # No name held by two sessions at once: the holds as the clients saw
        # them (each inside the server's hold) never overlap, across the
        # failover too.
        holds = sorted(h for c in contenders for h in c.holds)
        for earlier, later in zip(holds, holds[1:]):
            self.assertLess(earlier[1], later[0], "%s held by two sessions at once: %s and %s"
                            % (MUTEX, earlier, later))
        # Fencing tokens strictly increase in the order their grants were
        # received, across the failover too.
        tokens = [g[1] for g in sorted(grants())]
        self.assertEqual(tokens, sorted(set(tokens)), "tokens in the order they were received")
        # Every client came back to its own session, with what it held.
        self.assertTrue(all(c.session.resumed_at for c in contenders))
        resumed = [s for s in [holder] + [c.session for c in contenders] if s.resumed_at]
        self.assertEqual(len(resumed), CONTENDERS + 1)
        # The one that held MUTEX when the master died still held it after
        # the failover, with its token, and released it ("200 Released").
        kept = [t for c in contenders for t in c.kept]
        self.assertEqual(len(kept), 1, "MUTEX held at the kill and released after the resume")
        self.assertEqual([c.kept for c in contenders if c.lingering.is_set()], [kept])
        resent_grants = [t for c in contenders for t in c.resent_grants]

        # Acknowledged cache writes the new master does not have: the
        # asynchronous stream's window when the master died.
        reader = self.servers.vip_client(CLIENT_NODE)
        lost = [i for i in writer.acked if reader.get("key:%d" % i) != str(i)]
        print("\n      failover: a new master acknowledged a write %.1f s after the kill; "
              "%d of %d acknowledged writes lost (%s)"
              % (failover_seconds, len(lost), len(writer.acked),
                 "keys %d..%d" % (lost[0], lost[-1]) if lost else "none"))
        print("      locks: the new master granted %s %.1f s after the kill; %d sessions "
              "resumed (%d resumes, the first %.1f s after the kill); the holder kept its %d "
              "locks with their tokens; the contender that held %s at the kill released it "
              "after resuming; %d unlock(s) and %d lock request(s) re-sent (%d answered with "
              "a grant the old master had made); %d grants (%d after the kill), no two holds "
              "overlapped, tokens strictly increased"
              % (MUTEX, lock_failover_seconds, len(resumed),
                 sum(len(s.resumed_at) for s in resumed),
                 min(s.resumed_at[0] for s in resumed) - killed_at, HELD, MUTEX,
                 sum(c.unlocks_resent for c in contenders),
                 sum(c.locks_resent for c in contenders),
                 len([t for t in resent_grants if t < killed_micros]),
                 len(tokens), len(on_new_master())))
        self.assertLess(failover_seconds, FAILOVER_BOUND)
        self.assertLess(lock_failover_seconds, FAILOVER_BOUND)

        # The killed node comes back as a replica and catches up.
        self.servers.start(first)
        eventually(lambda: self.servers.replication(first).get("state") == "streaming", 15,
                   "the restarted node resyncs as a replica")
        self.assertEqual(self.role(first), "replica")
        master_items = lambda: int(self.servers.client(new_master).stats()["curr_items"])  # noqa
        eventually(lambda: int(self.servers.client(first).stats()["curr_items"]) ==
                   master_items(), 10, "the restarted node has every item")
        self.assertEqual(self.servers.client(first).get("key:%d" % writer.acked[-1]),
                         str(writer.acked[-1]))


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("failover_test.py needs root (network namespaces)")
    unittest.main(verbosity=2)
