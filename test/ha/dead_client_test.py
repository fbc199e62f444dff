#!/usr/bin/env python3
"""A client whose machine vanishes loses its locks (--tcp_keepalive).

One lockcached in a network namespace of its own, clients in two others
(netns.py). The client in LOST takes a cache lock and a named lock; then
its link goes down, so that neither a FIN nor a RST ever reaches the
server, as when a machine dies or its network is cut. The server must find
the connections dead by TCP keepalive and end them like any disconnect:
the cache lock at once, the named lock after its session's grace. A
healthy client in HEALTHY, idle all the while, keeps its locks. Each case
runs on epoll and io_uring, in plain TCP and in TLS. As root:

    LOCKCACHED_BINARY=build/lockcached python3 test/ha/dead_client_test.py

Prints the time from the cut to each lock's next grant; CI runs it in
test/ci/25-high-availability.sh.
"""

import os
import re
import select
import ssl
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import haclient  # noqa: E402
import netns  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.abspath(os.environ.get("LOCKCACHED_BINARY", "build/lockcached"))
CERTS = os.path.join(HERE, "..", "certs")
SERVER, LOST, HEALTHY = 0, 1, 2
CACHE_PORT, LOCK_PORT = haclient.CACHE_PORT, haclient.LOCK_PORT
KEEPALIVE_S = 2  # --tcp_keepalive: a silent peer is dead this long after it was last heard
GRACE_MS = 3000  # the lost client's session: set_timeout
# What the bounds allow beyond keepalive (+ grace): the kernel's timers
# tick in jiffies, and the server's grace timer fires on its next loop turn.
SLACK_S = 1.5
# How long a reply may take when nothing is wrong.
REPLY_TIMEOUT = 10


class DeadClient(haclient.ClusterTest):
    NODES = 3
    IO = "epoll"
    TLS = False

    def setUp(self):
        super().setUp()
        self.clients = []
        self.log_path = os.path.join(self.work, "server.log")
        flags = ["--port=%d" % CACHE_PORT, "--lock_port=%d" % LOCK_PORT, "--threads=2",
                 "--memory_limit_mb=64", "--tcp_keepalive=%d" % KEEPALIVE_S, "--io=" + self.IO,
                 "--logtostderr"]
        if self.TLS:
            flags += ["--tls", "--tls_cert_file=" + os.path.join(CERTS, "server.pem"),
                      "--tls_key_file=" + os.path.join(CERTS, "server.key")]
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.server = self.cluster.run(SERVER, [BINARY] + flags, stdout=log,
                                           stderr=subprocess.STDOUT)
        haclient.eventually(self.server_accepts, 10, "lockcached starts in node %d" % SERVER)

    def tearDown(self):
        for c in self.clients:
            c.close()
        super().tearDown()

    def server_log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def server_accepts(self):
        if self.server.poll() is not None:
            raise AssertionError("lockcached exited with %d" % self.server.returncode)
        try:
            self.client(HEALTHY, CACHE_PORT, track=False).close()
            return True
        except OSError:
            return False

    def client(self, node, port, track=True):
        sock = haclient.connect(self.cluster, node, self.cluster.addresses[SERVER], port,
                                timeout=REPLY_TIMEOUT)
        if self.TLS:
            context = ssl.create_default_context(cafile=os.path.join(CERTS, "ca.pem"))
            context.check_hostname = False  # the certificate names localhost
            sock = context.wrap_socket(sock)
        c = haclient.TextClient(sock)
        if track:
            self.clients.append(c)
        return c

    def watcher(self):
        """A `watch` stream on the server: connection and lock events."""
        w = self.client(HEALTHY, CACHE_PORT)
        self.assertEqual(w.call("watch connevents locks"), "OK")
        return w

    def await_line(self, stream, pattern, timeout):
        """The first line of `stream` that matches `pattern`."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\r\n" not in stream.buffer and b"\n" not in stream.buffer:
                remaining = deadline - time.monotonic()
                pending = isinstance(stream.sock, ssl.SSLSocket) and stream.sock.pending()
                if remaining <= 0 or not (pending or select.select([stream.sock], [], [],
                                                                   remaining)[0]):
                    self.fail("no line matching %r within %.1f s" % (pattern, timeout))
                chunk = stream.sock.recv(65536)
                if not chunk:
                    self.fail("the watch stream closed")
                stream.buffer += chunk
            line, _, stream.buffer = stream.buffer.partition(b"\n")
            line = line.decode().rstrip("\r")
            if re.search(pattern, line):
                return line

    def reply_within(self, c, timeout):
        """The next reply line on `c`, which must come within `timeout`."""
        pending = isinstance(c.sock, ssl.SSLSocket) and c.sock.pending()
        if b"\r\n" not in c.buffer and not pending:
            if not select.select([c.sock], [], [], timeout)[0]:
                self.fail("no reply within %.1f s" % timeout)
        return c.line()

    def server_stats(self):
        c = self.client(HEALTHY, CACHE_PORT, track=False)
        try:
            return c.stats()
        finally:
            c.close()

    def keepalive_armed(self, c):
        """Whether the server's end of `c` runs its keepalive timer (between
        a reply and its acknowledgement the retransmission timer shows)."""
        port = c.sock.getsockname()[1]
        shown = self.cluster.exec(SERVER, ["ss", "-tnoH", "state", "established"],
                                  capture_output=True, text=True, check=True).stdout
        return any(line.split()[3].endswith(":%d" % port) and "timer:(keepalive" in line
                   for line in shown.splitlines())

    def hold_then_vanish(self):
        """The lost client takes a cache lock and a named lock, and tells its
        session's id; the healthy one takes its own; the lost client's link
        goes down. Returns (session id, named lock token, time of the cut)."""
        healthy_cache = self.client(HEALTHY, CACHE_PORT)
        self.assertEqual(healthy_cache.set("mine", "h"), "STORED")
        self.assertEqual(healthy_cache.call("lock mine"), "OK")
        healthy_locks = self.client(HEALTHY, LOCK_PORT)
        self.assertRegex(healthy_locks.call("lock mine"), r"^200 Acquired \d+$")
        self.healthy = (healthy_cache, healthy_locks)

        lost_cache = self.client(LOST, CACHE_PORT)
        self.assertEqual(lost_cache.set("job", "x"), "STORED")
        self.assertEqual(lost_cache.call("lock job"), "OK")
        lost_locks = self.client(LOST, LOCK_PORT)
        self.assertEqual(lost_locks.call("set_timeout %d" % GRACE_MS), "200 Timeout set")
        session = lost_locks.call("conn_id").split(" ", 1)[1]
        token = int(lost_locks.call("lock jobs").split()[2])
        self.cluster.take_down(LOST)
        return session, token, time.monotonic()

    def assert_healthy_client_kept_its_locks(self):
        healthy_cache, healthy_locks = self.healthy
        other = self.client(HEALTHY, CACHE_PORT)
        self.assertEqual(other.call("lock mine"), "LOCKED")
        other_locks = self.client(HEALTHY, LOCK_PORT)
        self.assertEqual(other_locks.call("lock mine"), "409 Unavailable")
        # Both of its connections were probed all along, and still hold.
        for c in self.healthy:
            haclient.eventually(lambda: self.keepalive_armed(c), REPLY_TIMEOUT,
                                "keepalive runs on the server's end of a healthy client")
        self.assertEqual(healthy_cache.call("unlock mine"), "OK")
        self.assertEqual(healthy_locks.call("unlock mine"), "200 Released")

    def test_locks_of_a_vanished_client_end_within_the_bound(self):
        watch = self.watcher()
        waiter = self.client(HEALTHY, LOCK_PORT)
        cache_taker = self.client(HEALTHY, CACHE_PORT)
        session, token, cut = self.hold_then_vanish()
        waiter.send("lock jobs 30\r\n")  # granted when the lost session ends

        self.await_line(watch, r"type=item_unlock key=job status=released reason=disconnect",
                        KEEPALIVE_S + SLACK_S + 1)
        self.assertEqual(cache_taker.call("lock job"), "OK")
        cache_free = time.monotonic() - cut
        self.assertLessEqual(cache_free, KEEPALIVE_S + SLACK_S)

        granted = self.reply_within(waiter, KEEPALIVE_S + GRACE_MS / 1000 + SLACK_S + 1)
        named_free = time.monotonic() - cut
        self.assertRegex(granted, r"^200 Acquired \d+$")
        self.assertGreater(int(granted.split()[2]), token)
        self.assertLessEqual(named_free, KEEPALIVE_S + GRACE_MS / 1000 + SLACK_S)
        # The grace had to run out: the session ended, so it cannot be resumed.
        self.assertGreaterEqual(named_free, GRACE_MS / 1000)
        replacement = self.client(HEALTHY, LOCK_PORT)
        self.assertEqual(replacement.call("conn_id " + session), "403 Cannot resume")

        stats = self.server_stats()
        self.assertEqual(stats["conns_dead"], "2")
        self.assert_healthy_client_kept_its_locks()
        print("\n%s: cache lock free %.2f s after the cut, named lock granted %.2f s after "
              "(--tcp_keepalive=%d, grace %d ms)" % (self.__class__.__name__, cache_free,
                                                     named_free, KEEPALIVE_S, GRACE_MS),
              file=sys.stderr)

    def test_a_replacement_resumes_the_session_once_its_connection_is_found_dead(self):
        watch = self.watcher()
        session, token, cut = self.hold_then_vanish()
        line = self.await_line(watch, r"type=conn_close .*reason=dead_peer",
                               KEEPALIVE_S + SLACK_S + 1)
        self.assertIn("transport=tcp", line)
        self.await_line(watch, r"type=session_detach grace_ms=%d locks=1 reason=dead_peer"
                        % GRACE_MS, KEEPALIVE_S + SLACK_S + 1)
        # Within the grace, the client's replacement takes the session over,
        # with its lock and its token.
        replacement = self.client(HEALTHY, LOCK_PORT)
        self.assertEqual(replacement.call("conn_id " + session), "200 Resumed")
        self.assertEqual(replacement.call("lock jobs"), "200 Acquired %d" % token)
        self.assertEqual(replacement.call("unlock jobs"), "200 Released")
        self.assertLess(time.monotonic() - cut, KEEPALIVE_S + GRACE_MS / 1000)
        self.assert_healthy_client_kept_its_locks()
        # The log names the session whose connection was found dead.
        logged = self.server_log()
        serial = session.split("-")[0]
        self.assertRegex(logged, r"session %s lost its connection \(the client stopped "
                                 r"answering\); its 1 locks end in %d ms" % (serial, GRACE_MS))


class DeadClientUring(DeadClient):
    IO = "uring"


class DeadClientTls(DeadClient):
    TLS = True


class DeadClientUringTls(DeadClient):
    IO = "uring"
    TLS = True


if __name__ == "__main__":
    unittest.main(verbosity=2)
