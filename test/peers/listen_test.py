#!/usr/bin/env python3
"""Where the server listens, side by side: Debian's memcached and lockcached
started with the same options.

usage: listen_test.py LOCKCACHED_BINARY [unittest args...]

memcached's -s and -a (a unix-domain socket and its mode, no TCP port),
-l HOST:PORT (an address with a port of its own), -l notls:HOST:PORT under
-Z (that address plain, the others TLS), and the start failures: an address
that is not this host's, notls: without -Z. Each scenario runs memcached,
then lockcached, with the same line and compares what a client sees; where
lockcached answers differently on purpose (its exit statuses), the test
says so.
"""

import contextlib
import os
import re
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
from lockcached_server import (  # noqa: E402
    READY_DEADLINE_S, answers_version, binary_from_argv, free_port, read_until, request, run_tests)

BINARY = None
MEMCACHED = os.environ.get("MEMCACHED_BINARY", "memcached")
CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "certs")
TLS_OPTIONS = ("-Z", "-o", f"ssl_chain_cert={CERTS}/server.pem,ssl_key={CERTS}/server.key")
DEADLINE_S = 10


def command(server, options):
    """The command line starting `server` ("memcached" or "lockcached")."""
    if server == "memcached":
        # memcached refuses to run as root without -u.
        return [MEMCACHED, "-U", "0", "-t", "1", *options,
                *(["-u", "root"] if os.geteuid() == 0 else [])]
    # No lock port: it is lockcached's own, and not what is compared.
    return [BINARY, "-U", "0", "-t", "1", "--lock_port=0", *options]


def connect(address):
    """A connection to a unix socket (a path) or a TCP port on 127.0.0.1."""
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(DEADLINE_S)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            raise
        return sock
    return socket.create_connection(("127.0.0.1", address), timeout=DEADLINE_S)


def stats(sock, group):
    reply = request(sock, f"stats {group}\r\n".encode(), b"END\r\n").decode(errors="replace")
    return dict(line.split(" ", 2)[1:] for line in reply.splitlines() if line.startswith("STAT "))


def answers(address):
    try:
        with connect(address) as sock:
            return request(sock, b"version\r\n").startswith(b"VERSION ")
    except OSError:
        return False


@contextlib.contextmanager
def running(server, options, ready):
    """Runs `server` with `options` until `ready()` holds; stops it after."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command(server, options), stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + READY_DEADLINE_S
            while not ready():
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise AssertionError(f"{server} did not start ({options}):\n"
                                         f"{log.read().decode(errors='replace')}")
                time.sleep(0.05)  # a start has no event to wait on
            yield process
        finally:
            process.terminate()
            process.wait(DEADLINE_S)


def start_failure(server, options):
    """(exit status, output) of a start that must fail."""
    result = subprocess.run(command(server, options), stdin=subprocess.DEVNULL,
                            capture_output=True, timeout=DEADLINE_S)
    return result.returncode, (result.stdout + result.stderr).decode(errors="replace")


class UnixSocket(unittest.TestCase):
    def setUp(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.directory = directory.name

    def observe(self, server):
        """What a client sees of `-s PATH -a 0770 -p PORT`."""
        path = os.path.join(self.directory, server + ".sock")
        port = free_port()
        with running(server, ["-s", path, "-a", "0770", "-p", str(port)],
                     lambda: answers(path)):
            seen = {"mode": oct(stat.S_IMODE(os.lstat(path).st_mode)),
                    "tcp port answers": answers(port)}
            with connect(path) as client, connect(path) as watcher:
                settings = stats(client, "settings")
                seen["domain_socket"] = settings["domain_socket"] == path
                seen["umask"] = settings["umask"]
                # A client's addr and listen_addr; memcached cuts a
                # listener's own addr off after 31 bytes, which the
                # test's paths are longer than.
                conns = stats(client, "conns")
                clients = {name.split(":")[0] for name in conns if name.endswith(":listen_addr")}
                seen["addr forms"] = sorted({value.replace(path, "PATH")
                                             for name, value in conns.items()
                                             if name.split(":")[0] in clients
                                             and name.endswith("addr")})
                self.assertEqual(request(watcher, b"watch connevents\r\n"), b"OK\r\n")
                with connect(path):
                    line = read_until(watcher, b"\n").decode()
                seen["conn_new"] = re.sub(r"^ts=\S+ gid=\d+ | cfd=\d+\n$", "", line)
                self.assertEqual(request(client, b"set k 0 0 1\r\nv\r\n"), b"STORED\r\n")
                seen["get"] = request(client, b"get k\r\n", b"END\r\n")
        return seen

    def test_same_as_memcached(self):
        memcached = self.observe("memcached")
        self.assertEqual(memcached["mode"], "0o770")
        self.assertFalse(memcached["tcp port answers"])
        self.assertEqual(self.observe("lockcached"), memcached)


class AddressPorts(unittest.TestCase):
    def observe(self, server, options, plain, tls=()):
        """Which of the ports answer in plain text and which in TLS."""
        context = ssl.create_default_context(cafile=os.path.join(CERTS, "ca.pem"))
        with running(server, options, lambda: all(map(answers, plain))):
            return ({port: answers_version(port) for port in (*plain, *tls)},
                    {port: answers_version(port, context) for port in (*plain, *tls)})

    def test_an_address_with_its_own_port(self):
        own, shared = free_port(), free_port()
        options = ["-l", f"127.0.0.1:{own}", "-l", "127.0.0.2", "-p", str(shared)]
        memcached = self.observe("memcached", options, [own])
        self.assertEqual(self.observe("lockcached", options, [own]), memcached)
        for server in ("memcached", "lockcached"):
            with running(server, options, lambda: answers(own)):
                with connect(own) as client:
                    self.assertEqual(stats(client, "settings")["inter"],
                                     f"127.0.0.1:{own},127.0.0.2")
                with socket.create_connection(("127.0.0.2", shared), timeout=DEADLINE_S) as sock:
                    self.assertTrue(request(sock, b"version\r\n").startswith(b"VERSION"))

    def test_notls_keeps_an_address_plain(self):
        plain, tls = free_port(), free_port()
        options = [*TLS_OPTIONS, "-l", f"notls:127.0.0.1:{plain},127.0.0.1:{tls}"]
        memcached = self.observe("memcached", options, [plain], [tls])
        self.assertEqual(memcached, ({plain: True, tls: False}, {plain: False, tls: True}))
        self.assertEqual(self.observe("lockcached", options, [plain], [tls]), memcached)


class StartFailures(unittest.TestCase):
    """memcached exits 71 (EX_OSERR) for all of these; lockcached 64, a
    configuration error that lockcached.service does not restart on, with
    the same reason."""

    def expect_failure(self, options, memcached_says, lockcached_says):
        for server, expected, says in (("memcached", 71, memcached_says),
                                       ("lockcached", 64, lockcached_says)):
            with self.subTest(server=server):
                status, output = start_failure(server, options)
                self.assertEqual(status, expected, output)
                self.assertIn(says, output)

    def test_an_address_not_on_this_host(self):
        self.expect_failure(["-l", "192.0.2.1", "-p", str(free_port())],
                            "Cannot assign requested address", "Cannot assign requested address")

    def test_notls_without_tls(self):
        self.expect_failure(["-l", "notls:127.0.0.1", "-p", str(free_port())],
                            "'notls' option is valid only when SSL is enabled",
                            "notls: needs --tls (memcached's -Z)")


if __name__ == "__main__":
    BINARY = binary_from_argv()
    sys.exit(run_tests(sys.argv[1:]))
