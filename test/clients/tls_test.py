#!/usr/bin/env python3
"""TLS on both ports of a real lockcached, with real clients.

usage: tls_test.py LOCKCACHED_BINARY [OPENSSL] [unittest args...]

pymemcache's tls_context and raw binary-protocol frames on the cache port,
Python's ssl module on the lock service, `openssl s_client` on both; mutual
TLS, certificate reloads with connections up, a stalled handshake, plain
and TLS ports side by side, and memcached's own -Z / -o spelling. The
certificates are test/certs's (test/certs/make_certs.sh).
"""

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import unittest

from pymemcache.client.base import Client

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
from lockcached_server import lockcached_process, main_with_tools, run_tests, stats  # noqa: E402

BINARY = None
OPENSSL = "openssl"
CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "certs")
DEADLINE_S = 10
BASE_FLAGS = ("--port=0", "--lock_port=-1", "--threads=2", "--listen=127.0.0.1")
CACHE_TLS = "memcached protocol over TLS"
LOCK_TLS = "lock service over TLS"


def cert(name):
    return os.path.join(CERTS, name)


def tls_flags(*extra, cert_file=None, key_file=None):
    return (*BASE_FLAGS, "--tls_port=-1", "--lock_tls_port=-1",
            f"--tls_cert_file={cert_file or cert('server.pem')}",
            f"--tls_key_file={key_file or cert('server.key')}", *extra)


def client_context(certificate=None, **versions):
    """Verifies the server against the test CA; presents `certificate`
    (a name in test/certs without .pem) when given."""
    context = ssl.create_default_context(cafile=cert("ca.pem"))
    if certificate:
        context.load_cert_chain(cert(certificate + ".pem"), cert(certificate + ".key"))
    for attribute, version in versions.items():
        setattr(context, attribute, version)
    return context


def tls_connect(port, context=None):
    raw = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
    return (context or client_context()).wrap_socket(raw, server_hostname="localhost")


def read_until(sock, ending):
    """Reads until the bytes received end with `ending`; fails on EOF."""
    data = b""
    while not data.endswith(ending):
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed after {data!r}")
        data += chunk
    return data


def request(sock, command, ending=b"\r\n"):
    sock.sendall(command)
    return read_until(sock, ending)


def fingerprint_of_file(name):
    with open(cert(name)) as pem:
        return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem.read())).hexdigest()


def served_fingerprint(port):
    with tls_connect(port) as sock:
        return hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest()


def handshake_refused(port, context):
    """True when the server ends the connection during or right after the
    handshake (TLS 1.3 clients learn of a refused certificate at their
    first read)."""
    try:
        with tls_connect(port, context) as sock:
            sock.sendall(b"version\r\n")
            return sock.recv(100) == b""
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True


class TlsServerTest(unittest.TestCase):
    """One server: plain and TLS ports side by side."""

    @classmethod
    def setUpClass(cls):
        cls.stack = contextlib.ExitStack()
        cls.server = cls.stack.enter_context(lockcached_process(BINARY, tls_flags()))
        cls.ports = cls.server.ports

    @classmethod
    def tearDownClass(cls):
        cls.stack.close()

    def pymemcache(self):
        return Client(("127.0.0.1", self.ports[CACHE_TLS]), connect_timeout=DEADLINE_S,
                      timeout=DEADLINE_S, default_noreply=False, tls_context=client_context())

    def test_pymemcache_round_trips(self):
        client = self.pymemcache()
        try:
            values = {f"tls:{n}": os.urandom(n) for n in (0, 1, 511, 512, 16383, 16385, 700_000)}
            for key, value in values.items():
                self.assertTrue(client.set(key, value))
            self.assertEqual(client.get_many(list(values)), values)
            self.assertEqual(client.incr("tls:count", 1), None)
            self.assertTrue(client.set("tls:count", b"41"))
            self.assertEqual(client.incr("tls:count", 1), 42)
            self.assertTrue(client.delete("tls:1"))
            self.assertIsNone(client.get("tls:1"))
        finally:
            client.close()

    def test_plain_and_tls_ports_serve_the_same_store(self):
        client = self.pymemcache()
        try:
            self.assertTrue(client.set("shared", b"from TLS"))
        finally:
            client.close()
        with socket.create_connection(("127.0.0.1", self.ports["memcached protocol"]),
                                      timeout=DEADLINE_S) as plain:
            self.assertEqual(request(plain, b"get shared\r\n", b"END\r\n"),
                             b"VALUE shared 0 8\r\nfrom TLS\r\nEND\r\n")

    def test_binary_protocol(self):
        key, value = b"bin", b"binary over TLS"
        extras = struct.pack(">II", 7, 0)
        body = extras + key + value
        set_request = struct.pack(">BBHBBHIIQ", 0x80, 0x01, len(key), len(extras), 0, 0,
                                  len(body), 0, 0) + body
        get_request = struct.pack(">BBHBBHIIQ", 0x80, 0x00, len(key), 0, 0, 0,
                                  len(key), 0, 0) + key
        with tls_connect(self.ports[CACHE_TLS]) as sock:
            sock.sendall(set_request + get_request)
            data = b""
            while len(data) < 24 + 24 + 4 + len(value):
                chunk = sock.recv(65536)
                self.assertNotEqual(chunk, b"")
                data += chunk
        set_header = struct.unpack(">BBHBBHIIQ", data[:24])
        self.assertEqual((set_header[0], set_header[1], set_header[5]), (0x81, 0x01, 0))
        get_header = struct.unpack(">BBHBBHIIQ", data[24:48])
        self.assertEqual((get_header[1], get_header[5]), (0x00, 0))
        self.assertEqual(data[48:52], struct.pack(">I", 7))
        self.assertEqual(data[52:], value)

    def test_pipelined_requests_larger_than_a_record(self):
        count = 3000
        commands = b"".join(b"set p%d 0 0 5\r\nvalue\r\n" % i for i in range(count))
        with tls_connect(self.ports[CACHE_TLS]) as sock:
            sock.sendall(commands + b"version\r\n")
            replies = b""
            while b"VERSION " not in replies:
                replies += read_until(sock, b"\r\n")
        self.assertEqual(replies.count(b"STORED\r\n"), count)

    def test_lock_service_with_python_ssl(self):
        port = self.ports[LOCK_TLS]
        with tls_connect(port) as first:
            session = request(first, b"conn_id\r\n").split()[1]
            self.assertTrue(request(first, b"lock tls-name 0\r\n").startswith(b"200 Acquired "))
            with tls_connect(port) as second:
                self.assertTrue(request(second, b"lock tls-name 0\r\n").startswith(b"409"))
        # The first connection is gone; once the server has seen it go (its
        # session in the grace period), the session can be resumed over TLS.
        with tls_connect(port) as again:
            deadline = time.monotonic() + DEADLINE_S
            while (reply := request(again, b"conn_id " + session + b"\r\n")) != b"200 Resumed\r\n":
                self.assertEqual(reply, b"403 Cannot resume\r\n")  # still attached
                self.assertLess(time.monotonic(), deadline, "the session never detached")
            self.assertEqual(request(again, b"unlock tls-name\r\n"), b"200 Released\r\n")

    def test_openssl_s_client_on_both_ports(self):
        for port, commands, expected in (
                (self.ports[CACHE_TLS], b"version\r\nquit\r\n", b"VERSION "),
                (self.ports[LOCK_TLS], b"conn_id\r\nquit\r\n", b"200 ")):
            result = subprocess.run(
                [OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile",
                 cert("ca.pem"), "-verify_return_error", "-quiet"],
                input=commands, capture_output=True, timeout=DEADLINE_S)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn(expected, result.stdout)

    def test_tls_1_1_is_refused(self):
        # SECLEVEL=0 lets this client offer TLS 1.1: the server says no.
        result = subprocess.run(
            [OPENSSL, "s_client", "-connect", f"127.0.0.1:{self.ports[CACHE_TLS]}", "-tls1_1",
             "-cipher", "DEFAULT@SECLEVEL=0"],
            input=b"", capture_output=True, timeout=DEADLINE_S)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(b"protocol version", result.stderr)

    def test_renegotiation_is_refused(self):
        # s_client renegotiates on a line "R" (TLS 1.2; 1.3 has none).
        result = subprocess.run(
            [OPENSSL, "s_client", "-connect", f"127.0.0.1:{self.ports[CACHE_TLS]}", "-tls1_2",
             "-CAfile", cert("ca.pem")],
            input=b"R\n", capture_output=True, timeout=DEADLINE_S)
        self.assertIn(b"RENEGOTIATING", result.stdout + result.stderr)
        self.assertIn(b"no renegotiation", result.stdout + result.stderr)
        with tls_connect(self.ports[CACHE_TLS]) as sock:
            self.assertTrue(request(sock, b"version\r\n").startswith(b"VERSION "))

    def test_plaintext_on_a_tls_port_is_cut_off_and_counted(self):
        with socket.create_connection(("127.0.0.1", self.ports[CACHE_TLS]),
                                      timeout=DEADLINE_S) as plain:
            plain.sendall(b"get foo\r\n")
            self.assertEqual(plain.recv(100), b"")
        with tls_connect(self.ports[CACHE_TLS]) as sock:
            stats = request(sock, b"stats\r\n", b"END\r\n")
        errors = [line for line in stats.split(b"\r\n") if line.startswith(b"STAT ssl_handshake")]
        self.assertEqual(len(errors), 1)
        self.assertGreaterEqual(int(errors[0].split()[2]), 1)

    def test_stats_settings_say_tls(self):
        with socket.create_connection(("127.0.0.1", self.ports["memcached protocol"]),
                                      timeout=DEADLINE_S) as plain:
            settings = request(plain, b"stats settings\r\n", b"END\r\n")
        self.assertIn(b"STAT ssl_enabled yes\r\n", settings)
        self.assertIn(b"STAT ssl_chain_cert " + cert("server.pem").encode() + b"\r\n", settings)
        self.assertIn(b"STAT ssl_min_version tlsv1.2\r\n", settings)
        self.assertIn(b"STAT tls_port %d\r\n" % self.ports[CACHE_TLS], settings)


class HandshakeStallTest(unittest.TestCase):
    def test_a_stalled_handshake_blocks_nobody_and_times_out(self):
        with lockcached_process(BINARY, tls_flags("--threads=1",
                                                  "--tls_handshake_timeout=1")) as server:
            port = server.ports[CACHE_TLS]
            stalled = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
            # The first bytes of a ClientHello record, then nothing.
            stalled.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
            with tls_connect(port) as sock:  # the only reactor thread serves on
                for i in range(20):
                    self.assertEqual(request(sock, b"set k%d 0 0 1\r\nx\r\n" % i),
                                     b"STORED\r\n")
            # Cut off by the server: EOF well within the test's deadline.
            self.assertEqual(stalled.recv(100), b"")
            stalled.close()


class CertificateReloadTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.cert_file = os.path.join(self.directory, "server.pem")
        self.key_file = os.path.join(self.directory, "server.key")
        self.use("server")

    def tearDown(self):
        shutil.rmtree(self.directory)

    def use(self, name):
        shutil.copy(cert(name + ".pem"), self.cert_file)
        shutil.copy(cert(name + ".key"), self.key_file)

    def test_refresh_certs_and_sighup_keep_connections_up(self):
        flags = tls_flags(cert_file=self.cert_file, key_file=self.key_file)
        with lockcached_process(BINARY, flags) as server:
            port = server.ports[CACHE_TLS]
            self.assertEqual(served_fingerprint(port), fingerprint_of_file("server.pem"))
            with tls_connect(port) as kept, tls_connect(server.ports[LOCK_TLS]) as kept_lock:
                self.assertEqual(request(kept, b"set before 0 0 1\r\nb\r\n"), b"STORED\r\n")
                self.use("server2")
                self.assertEqual(request(kept, b"refresh_certs\r\n"), b"OK\r\n")
                self.assertEqual(served_fingerprint(port), fingerprint_of_file("server2.pem"))
                self.assertEqual(served_fingerprint(server.ports[LOCK_TLS]),
                                 fingerprint_of_file("server2.pem"))
                # A key that does not match: refused, and the loaded pair stays.
                shutil.copy(cert("server.key"), self.key_file)
                reply = request(kept, b"refresh_certs\r\n")
                self.assertTrue(reply.startswith(b"Error loading the key: "), reply)
                self.assertEqual(served_fingerprint(port), fingerprint_of_file("server2.pem"))
                # SIGHUP reloads too.
                self.use("server")
                server.process.send_signal(signal.SIGHUP)
                deadline = time.monotonic() + DEADLINE_S
                while served_fingerprint(port) != fingerprint_of_file("server.pem"):
                    self.assertLess(time.monotonic(), deadline, "SIGHUP did not reload")
                    time.sleep(0.05)
                # The connections made before every reload still work.
                self.assertEqual(request(kept, b"get before\r\n", b"END\r\n"),
                                 b"VALUE before 0 1\r\nb\r\nEND\r\n")
                self.assertEqual(request(kept_lock, b"conn_id\r\n")[:4], b"200 ")

    def test_refresh_certs_without_tls(self):
        with lockcached_process(BINARY, BASE_FLAGS) as server:
            with socket.create_connection(("127.0.0.1", server.ports["memcached protocol"]),
                                          timeout=DEADLINE_S) as plain:
                self.assertEqual(request(plain, b"refresh_certs\r\n"),
                                 b"Error TLS not enabled\r\n")


class MutualTlsTest(unittest.TestCase):
    def test_client_certificates(self):
        flags = tls_flags(f"--tls_ca_file={cert('ca.pem')}", "--tls_verify_client")
        with lockcached_process(BINARY, flags) as server:
            for port in (server.ports[CACHE_TLS], server.ports[LOCK_TLS]):
                self.assertTrue(handshake_refused(port, client_context()))
                self.assertTrue(handshake_refused(port, client_context("rogue-client")))
                with tls_connect(port, client_context("client")) as sock:
                    sock.sendall(b"quit\r\n")
                    data = b""
                    while chunk := sock.recv(100):
                        data += chunk
                    self.assertIn(data, (b"", b"200 Bye\r\n"))
            with tls_connect(server.ports[CACHE_TLS], client_context("client")) as sock:
                self.assertTrue(request(sock, b"version\r\n").startswith(b"VERSION "))


class MemcachedSpellingTest(unittest.TestCase):
    def test_dash_z_and_dash_o_serve_tls_on_the_main_ports(self):
        flags = (*BASE_FLAGS, "-Z", "-o",
                 f"ssl_chain_cert={cert('server.pem')},ssl_key={cert('server.key')},"
                 f"ssl_ca_cert={cert('ca.pem')},ssl_verify_mode=0,ssl_min_version=3")
        with lockcached_process(BINARY, flags) as server:
            self.assertNotIn("memcached protocol", server.ports)
            with tls_connect(server.ports[CACHE_TLS]) as sock:
                self.assertEqual(sock.version(), "TLSv1.3")
                self.assertTrue(request(sock, b"version\r\n").startswith(b"VERSION "))
            tls12 = client_context(maximum_version=ssl.TLSVersion.TLSv1_2)
            self.assertTrue(handshake_refused(server.ports[CACHE_TLS], tls12))

    def test_bad_configurations_stop_the_server(self):
        cases = [
            ((*BASE_FLAGS, "--tls"), 64, "--tls_cert_file: is needed"),
            ((*BASE_FLAGS, f"--tls_cert_file={cert('server.pem')}"), 64, "no port speaks TLS"),
            ((*BASE_FLAGS, "-Z", "-o", "ssl_verify_mode=1"), 64, "lockcached takes 0, 2, 3"),
            ((*BASE_FLAGS, "-Z", "-o", "ssl_min_version=1"), 64, "lockcached takes 2, 3"),
            (tls_flags("--tls_verify_client"), 64, "needs --tls_ca_file"),
            # Files that do not load are configuration mistakes too; memcached
            # 1.6.18 also exits 64 with these lines.
            (tls_flags(key_file=cert("server2.key")), 64, "lockcached: TLS: Error loading the key: "),
            (tls_flags(cert_file="/nonexistent.pem"), 64,
             "lockcached: TLS: Error loading the certificate chain"),
        ]
        for flags, status, message in cases:
            with self.subTest(flags=flags):
                result = subprocess.run([BINARY, *flags], capture_output=True,
                                        timeout=DEADLINE_S, text=True)
                self.assertEqual(result.returncode, status, result.stderr)
                self.assertIn(message, result.stderr)


class TlsStreamEndsTest(unittest.TestCase):
    """What a TLS stream holds beyond one read, on each I/O backend: records
    that came while input was paused, and a close_notify behind a request.
    Neither brings another socket event, so the server must finish them
    on its own."""

    def backends(self):
        return ("--io=epoll", "--io=uring")

    def test_requests_that_came_while_output_waited_are_all_answered(self):
        big = b"x" * (1024 * 1024 - 100)
        cheap = 40_000
        for backend in self.backends():
            with self.subTest(backend=backend), \
                    lockcached_process(BINARY, tls_flags(backend)) as server:
                port = server.ports[CACHE_TLS]
                plain = server.ports["memcached protocol"]
                raw = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
                with client_context().wrap_socket(raw, server_hostname="localhost") as sock:
                    self.assertEqual(request(sock, b"set big 0 0 %d\r\n%s\r\n" % (len(big), big)),
                                     b"STORED\r\n")
                    # Megabytes of replies the client does not read yet: the
                    # server stops taking input once they are answered.
                    sock.sendall(b"get big\r\n" * 5)
                    deadline = time.monotonic() + DEADLINE_S
                    polls = 1
                    while int(stats(plain)["get_hits"]) < 5:
                        self.assertLess(time.monotonic(), deadline, "the gets were not answered")
                        time.sleep(0.01)
                        polls += 1
                    # More of them, and many small requests behind: they come
                    # in one burst once the server reads again, more than one
                    # turn's room (the io_uring backend kept what exceeded it,
                    # undecrypted, and answered it only at the next receive).
                    sock.sendall(b"get big\r\n" * 5 + b"mn\r\n" * cheap + b"get nothing\r\n")
                    expected = (10 * len(b"VALUE big 0 %d\r\n%s\r\nEND\r\n" % (len(big), big))
                                + cheap * len(b"MN\r\n") + len(b"END\r\n"))
                    received = bytearray()
                    while len(received) < expected:
                        chunk = sock.recv(1 << 20)
                        self.assertNotEqual(chunk, b"", "the server closed the connection")
                        received += chunk
                    self.assertEqual(len(received), expected)
                    self.assertTrue(received.endswith(b"MN\r\nEND\r\n"))
                    # What the clients sent, counted once: the TLS client's
                    # plaintext (records kept undecrypted while input was
                    # paused counted as ciphertext too, once), and each
                    # "stats\r\n" on the plain port, this last one too.
                    sent = (len(b"set big 0 0 %d\r\n%s\r\n" % (len(big), big))
                            + 10 * len(b"get big\r\n") + cheap * len(b"mn\r\n")
                            + len(b"get nothing\r\n") + (polls + 1) * len(b"stats\r\n"))
                    self.assertEqual(int(stats(plain)["bytes_read"]), sent)

    def test_a_close_notify_behind_a_request_ends_the_connection(self):
        for backend in self.backends():
            with self.subTest(backend=backend), \
                    lockcached_process(BINARY, tls_flags(backend)) as server:
                port = server.ports[CACHE_TLS]
                incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
                session = client_context().wrap_bio(incoming, outgoing,
                                                    server_hostname="localhost")
                with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
                    def pump():
                        sock.sendall(outgoing.read())
                        data = sock.recv(65536)
                        incoming.write(data) if data else incoming.write_eof()
                        return data
                    while True:
                        try:
                            session.do_handshake()
                            break
                        except ssl.SSLWantReadError:
                            self.assertTrue(pump(), "closed during the handshake")
                    # A request and the close_notify, in one segment.
                    session.write(b"version\r\n")
                    try:
                        session.unwrap()
                    except ssl.SSLWantReadError:
                        pass  # its close_notify is in `outgoing`; the server's to come
                    sock.sendall(outgoing.read())
                    replies = b""
                    while True:
                        data = sock.recv(65536)
                        if not data:
                            break  # the server closed: what it sent is all there
                        incoming.write(data)
                        try:
                            replies += session.read(65536)
                        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                            pass
                    self.assertTrue(replies.startswith(b"VERSION "), replies)

    def test_an_idle_timeout_ends_the_session_with_a_close_notify(self):
        for backend in self.backends():
            with self.subTest(backend=backend), \
                    lockcached_process(BINARY, tls_flags(backend, "--idle_timeout=1")) as server:
                raw = socket.create_connection(("127.0.0.1", server.ports[CACHE_TLS]),
                                               timeout=DEADLINE_S)
                strict = client_context()
                strict.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF
                with strict.wrap_socket(raw, server_hostname="localhost",
                                        suppress_ragged_eofs=False) as sock:
                    self.assertTrue(request(sock, b"version\r\n").startswith(b"VERSION "))
                    # The server's close_notify reads as a clean end (b"");
                    # a close without it raises SSLEOFError.
                    self.assertEqual(sock.recv(100), b"")


if __name__ == "__main__":
    BINARY, (OPENSSL,), options = main_with_tools(["openssl"])
    sys.exit(run_tests(options))
