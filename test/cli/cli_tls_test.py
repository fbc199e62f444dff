#!/usr/bin/env python3
"""lockcached-cli --tls against lockcached's TLS ports and Debian's
memcached 1.6.18 with TLS on (-Z).

usage: cli_tls_test.py LOCKCACHED_CLI LOCKCACHED_BINARY

Every command goes through the CLI's one TLS connection code: the cache
commands in the text and the binary protocol, `lock KEY -- COMMAND`, and on
the lock service `run` (a lock held over TLS while the command runs, and
lost when the server goes) and `locks`. memcached, a second TLS server the
CLI must work with, is where every way verification must fail is tried: no
CA that vouches for the server, the wrong name, a missing or an untrusted
client certificate where the server asks for one. The certificates are the
checked-in ones of test/certs (make_certs.sh).
"""

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
import lockcached_server  # noqa: E402

CLI = None
LOCKCACHED = None
CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "certs")
EXIT_USAGE = 64
EXIT_UNAVAILABLE = 69
EXIT_CONFIG = 78
# Bounds each CLI run's connecting and replies: a test that hangs fails
# within it instead of running into ctest's timeout.
CLI_TIMEOUT_S = "5"


def cert(name):
    return os.path.join(CERTS, name)


def memcached_tls(verify_mode=0):
    """memcached with TLS on its port; with verify_mode 2 it requires a
    client certificate signed by ca.pem."""
    options = (f"ssl_chain_cert={cert('server.pem')},ssl_key={cert('server.key')},"
               f"ssl_ca_cert={cert('ca.pem')},ssl_verify_mode={verify_mode}")
    # The readiness probe speaks TLS as the CLI will, with the client
    # certificate where the server wants one.
    probe = ssl.create_default_context(cafile=cert("ca.pem"))
    probe.load_cert_chain(cert("client.pem"), cert("client.key"))
    return lockcached_server.memcached(("-Z", "-o", options), tls=probe)


def lockcached_tls(*extra):
    """lockcached with a TLS cache port and a TLS lock-service port, any
    free ones (plain ports beside them go unused); yields its Running."""
    flags = ("--port=0", "--lock_port=-1", "--threads=2", "--listen=127.0.0.1",
             "--tls_port=-1", "--lock_tls_port=-1", f"--tls_cert_file={cert('server.pem')}",
             f"--tls_key_file={cert('server.key')}", *extra)
    return lockcached_server.lockcached_process(LOCKCACHED, flags)


def run_cli(*args, value=None):
    """lockcached-cli ARGS...; the CompletedProcess (stdout and stderr in bytes)."""
    return subprocess.run([CLI, "--timeout", CLI_TIMEOUT_S, *args], input=value,
                          capture_output=True, timeout=60)


def described(result):
    return (f"exit status {result.returncode}, stdout {result.stdout[:200]!r}, "
            f"stderr {result.stderr.decode(errors='replace')!r}")


class TlsTestCase(unittest.TestCase):
    """A server's TLS ports, set by setUpClass: `port` the cache's,
    `lock_port` the lock service's (None: it has none)."""

    TLS = ("--tls", "--tls_ca_file", cert("ca.pem"))
    CLIENT = ("--tls_cert_file", cert("client.pem"), "--tls_key_file", cert("client.key"))
    lock_port = None

    def cli(self, *args, host="127.0.0.1", value=None):
        ports = ["--port", str(self.port)]
        if self.lock_port is not None:
            ports += ["--lock-port", str(self.lock_port)]
        return run_cli("--host", host, *ports, *args, value=value)

    def assert_ok(self, result, stdout=None):
        self.assertEqual(result.returncode, 0, described(result))
        if stdout is not None:
            self.assertEqual(result.stdout, stdout, described(result))

    def assert_refused(self, result, why, port=None):
        """The CLI failed as for a server it cannot use: exit 69, one line
        naming the server (at `port`, else the cache port) and saying `why`."""
        self.assertEqual(result.returncode, EXIT_UNAVAILABLE, described(result))
        message = result.stderr.decode(errors="replace")
        self.assertIn(f"127.0.0.1:{port or self.port}", message, "the server is not named")
        self.assertIn(why, message)
        self.assertEqual(result.stdout, b"", "nothing may come from an unverified server")

    def round_trip(self, *tls_args):
        """set, get, delete and stats through the CLI in both protocols."""
        for protocol in ([], ["--binary"]):
            with self.subTest(protocol=protocol or "text"):
                key = f"greeting{len(protocol)}"
                self.assert_ok(self.cli(*tls_args, *protocol, "set", key, "hello"))
                self.assert_ok(self.cli(*tls_args, *protocol, "get", key), b"hello\n")
                self.assert_ok(self.cli(*tls_args, *protocol, "delete", key))
                missed = self.cli(*tls_args, *protocol, "get", key)
                self.assertEqual(missed.returncode, 1, described(missed))
                stats = self.cli(*tls_args, *protocol, "stats")
                self.assert_ok(stats)
                self.assertIn(b"\ncurr_connections ", stats.stdout)


class MemcachedTestCase(TlsTestCase):
    verify_mode = 0

    @classmethod
    def setUpClass(cls):
        cls.port = cls.enterClassContext(memcached_tls(cls.verify_mode))


class LockcachedTestCase(TlsTestCase):
    server_flags = ()

    @classmethod
    def setUpClass(cls):
        running = cls.enterClassContext(lockcached_tls(*cls.server_flags))
        cls.port = running.ports["memcached protocol over TLS"]
        cls.lock_port = running.ports["lock service over TLS"]


class ServerVerificationTest(MemcachedTestCase):
    """memcached asks for no client certificate: the CLI's checks of the
    server are what is tested."""

    def test_set_and_get_round_trip_in_both_protocols(self):
        self.round_trip(*self.TLS)

    def test_a_value_of_many_tls_records_arrives_whole(self):
        # 512 KiB (below memcached's 1 MB item limit) is 32 TLS records or
        # more each way, read and written in pieces by the non-blocking socket.
        value = bytes(range(256)) * 2048
        for protocol in ([], ["--binary"]):
            with self.subTest(protocol=protocol or "text"):
                self.assert_ok(self.cli(*self.TLS, *protocol, "set", "big", "-", value=value))
                self.assert_ok(self.cli(*self.TLS, *protocol, "get", "big"), value + b"\n")

    def test_a_host_name_is_verified_as_well_as_an_address(self):
        # localhost is checked against the certificate's DNS name and sent
        # as SNI; 127.0.0.1 (every other test) against its IP address.
        self.assert_ok(self.cli(*self.TLS, "set", "named", "yes", host="localhost"))
        self.assert_ok(self.cli(*self.TLS, "get", "named", host="localhost"), b"yes\n")

    def test_without_the_ca_the_server_is_not_trusted(self):
        # The system's CAs do not vouch for the test CA.
        self.assert_refused(self.cli("--tls", "get", "x"),
                            "TLS handshake failed: certificate verify failed")

    def test_a_ca_that_did_not_sign_the_server_is_not_trusted(self):
        self.assert_refused(self.cli("--tls", "--tls_ca_file", cert("rogue-ca.pem"), "get", "x"),
                            "TLS handshake failed: certificate verify failed")

    def test_a_name_the_certificate_does_not_carry_fails(self):
        self.assert_refused(
            self.cli(*self.TLS, "--tls_server_name=wrong.example", "get", "x"),
            "certificate verify failed: hostname mismatch")
        self.assert_refused(self.cli(*self.TLS, "--tls_server_name=127.0.0.2", "get", "x"),
                            "certificate verify failed: IP address mismatch")

    def test_tls_options_without_tls_are_usage_errors(self):
        for args in (["--tls_ca_file", cert("ca.pem")],
                     ["--tls_cert_file", cert("client.pem"), "--tls_key_file", cert("client.key")],
                     ["--tls_server_name", "localhost"]):
            with self.subTest(args=args):
                result = self.cli(*args, "get", "x")
                self.assertEqual(result.returncode, EXIT_USAGE, described(result))
                self.assertIn(b"needs --tls", result.stderr)

    def test_a_certificate_without_its_key_is_a_usage_error(self):
        result = self.cli(*self.TLS, "--tls_cert_file", cert("client.pem"), "get", "x")
        self.assertEqual(result.returncode, EXIT_USAGE, described(result))
        self.assertIn(b"go together", result.stderr)

    def test_a_file_that_cannot_be_loaded_is_a_configuration_error(self):
        missing = cert("no-such-ca.pem")
        result = self.cli("--tls", "--tls_ca_file", missing, "get", "x")
        self.assertEqual(result.returncode, EXIT_CONFIG, described(result))
        self.assertIn(f"cannot load --tls-ca-file {missing}".encode(), result.stderr)
        wrong_key = self.cli(*self.TLS, "--tls_cert_file", cert("client.pem"),
                             "--tls_key_file", cert("rogue-client.key"), "get", "x")
        self.assertEqual(wrong_key.returncode, EXIT_CONFIG, described(wrong_key))
        self.assertIn(f"cannot load --tls-key-file {cert('rogue-client.key')}: "
                      "key values mismatch".encode(), wrong_key.stderr)


class MutualTlsTest(MemcachedTestCase):
    """memcached with ssl_verify_mode=2: no session without a client
    certificate that ca.pem signed."""

    verify_mode = 2

    def test_the_client_certificate_lets_the_cli_in(self):
        self.round_trip(*self.TLS, *self.CLIENT)

    def test_no_client_certificate_is_refused(self):
        self.assert_refused(self.cli(*self.TLS, "get", "x"), "certificate required")

    def test_a_client_certificate_from_another_ca_is_refused(self):
        rogue = ("--tls_cert_file", cert("rogue-client.pem"),
                 "--tls_key_file", cert("rogue-client.key"))
        self.assert_refused(self.cli(*self.TLS, *rogue, "get", "x"), "unknown ca")


class HandshakeDeadlineTest(unittest.TestCase):
    def test_a_server_that_never_answers_the_handshake_times_out(self):
        # The kernel completes the TCP connection on a listening socket
        # nobody accepts from; the ClientHello then gets no answer.
        with socket.create_server(("127.0.0.1", 0)) as silent:
            port = silent.getsockname()[1]
            result = run_cli("--timeout", "0.5", "--host", "127.0.0.1", "--port", str(port),
                             "--tls", "--tls_ca_file", cert("ca.pem"), "get", "x")
        self.assertEqual(result.returncode, EXIT_UNAVAILABLE, described(result))
        self.assertIn(f"connection to 127.0.0.1:{port}: timed out in the TLS handshake".encode(),
                      result.stderr)


class LockcachedTest(LockcachedTestCase):
    """lockcached's own TLS ports, for every kind of command."""

    def test_cache_commands_in_both_protocols(self):
        self.round_trip(*self.TLS)
        for protocol in ([], ["--binary"]):
            with self.subTest(protocol=protocol or "text"):
                self.assert_ok(self.cli(*self.TLS, *protocol, "set", "listed:key", "v"))
                self.assert_ok(self.cli(*self.TLS, *protocol, "keys", "listed:"),
                               b"listed:key\n")

    def test_lock_holds_the_object_while_the_command_runs(self):
        self.assert_ok(self.cli(*self.TLS, "set", "config", "old"))
        # The command's own CLI is another connection: it may read the
        # locked object, not change it.
        inner = (CLI, "--host", "127.0.0.1", "--port", str(self.port), *self.TLS)
        result = self.cli(*self.TLS, "lock", "config", "--", "sh", "-c",
                          '"$@" get config && "$@" set config new', "sh", *inner)
        self.assertEqual(result.returncode, 1, described(result))
        self.assertEqual(result.stdout, b"old\n")
        self.assertIn(b"set config: locked by another connection", result.stderr)
        # Released when the command ended.
        self.assert_ok(self.cli(*self.TLS, "set", "config", "new"))

    def test_run_holds_the_named_lock_while_the_command_runs(self):
        # The command's `locks` (another session) finds the lock held, with
        # the fencing token the command was given.
        inner = (CLI, "--host", "127.0.0.1", "--lock-port", str(self.lock_port), *self.TLS)
        result = self.cli(*self.TLS, "run", "nightly", "--ping", "0.01", "--", "sh", "-c",
                          'echo "$LOCKCACHED_FENCING_TOKEN"; "$@" locks nightly', "sh", *inner)
        self.assert_ok(result)
        self.assertEqual(result.stderr, b"", "no warning: the lock was never lost")
        token, listed = result.stdout.decode().splitlines()
        self.assertEqual(listed.split()[0], "nightly")
        self.assertEqual(listed.split()[4], token)
        self.assert_ok(self.cli(*self.TLS, "locks", "nightly"), b"")

    def test_run_does_not_trust_a_lock_service_it_cannot_verify(self):
        # assert_refused also checks that the command did not run (no "ran").
        self.assert_refused(self.cli("--tls", "run", "nightly", "--", "echo", "ran"),
                            "certificate verify failed", port=self.lock_port)


class LockcachedMutualTlsTest(LockcachedTestCase):
    """lockcached with --tls_verify_client, on both ports."""

    server_flags = (f"--tls_ca_file={cert('ca.pem')}", "--tls_verify_client")

    def test_every_command_presents_the_client_certificate(self):
        self.assert_ok(self.cli(*self.TLS, *self.CLIENT, "set", "k", "v"))
        self.assert_ok(self.cli(*self.TLS, *self.CLIENT, "--binary", "get", "k"), b"v\n")
        self.assert_ok(self.cli(*self.TLS, *self.CLIENT, "run", "job", "--", "echo", "ran"),
                       b"ran\n")

    def test_no_client_certificate_is_refused(self):
        self.assert_refused(self.cli(*self.TLS, "get", "k"), "certificate required")
        self.assert_refused(self.cli(*self.TLS, "run", "job", "--", "echo", "ran"),
                            "certificate required", port=self.lock_port)


class LostServerTest(unittest.TestCase):
    def test_a_server_that_goes_away_is_a_lost_lock(self):
        # lockcached stopping while the command runs ends the TLS session
        # the CLI watches; with --kill-on-loss the command (a cat waiting
        # forever on the standard input nobody writes to) gets SIGTERM.
        with contextlib.ExitStack() as server:
            port = server.enter_context(lockcached_tls()).ports["lock service over TLS"]
            cli = subprocess.Popen(
                [CLI, "--timeout", CLI_TIMEOUT_S, "--host", "127.0.0.1", "--lock-port", str(port),
                 *TlsTestCase.TLS, "run", "job", "--kill-on-loss", "--", "sh", "-c",
                 "echo started; exec cat"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.addCleanup(cli.kill)  # only where the test failed before it ended
            self.addCleanup(cli.stdin.close)
            # Once the command has started, the lock is held.
            self.assertEqual(cli.stdout.readline(), b"started\n")
        status = cli.wait(timeout=30)
        stderr = cli.stderr.read()
        self.assertEqual(status, 128 + signal.SIGTERM, stderr)
        self.assertIn(b'lost lock "job"', stderr)
        self.assertIn(b"stopping the command with SIGTERM", stderr)
        cli.stdout.close()
        cli.stderr.close()


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1].startswith("-") or sys.argv[2].startswith("-"):
        sys.exit(f"usage: {sys.argv[0]} LOCKCACHED_CLI LOCKCACHED_BINARY [unittest options]")
    CLI = sys.argv.pop(1)
    LOCKCACHED = sys.argv.pop(1)
    sys.exit(lockcached_server.run_tests(sys.argv[1:]))
