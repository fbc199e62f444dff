#!/usr/bin/env python3
"""lockcached-cli --user against lockcached --auth_file (docs/authentication.md).

usage: cli_auth_test.py LOCKCACHED_CLI LOCKCACHED_BINARY

The password comes from --password-file or LOCKCACHED_PASSWORD; the cache
commands log in with memcached's `set` (text) or SASL PLAIN (binary), `run`
and `locks` with the lock service's `auth`. A wrong password exits 77
(EX_NOPERM) naming the user and never the password, and `run`'s command does
not start; the command `run` starts does not see LOCKCACHED_PASSWORD. Once
more over TLS, where the login follows the handshake.
"""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
import cli_tls_test  # noqa: E402
import lockcached_server  # noqa: E402
from cli_tls_test import cert, described  # noqa: E402

EXIT_USAGE = 64
EXIT_NOPERM = 77
PASSWORD = "s3cret-pw"
WRONG = "wrong-pw"


class AuthTestCase(unittest.TestCase):
    """lockcached with --auth_file on its cache and lock-service ports;
    subclasses set `tls`."""

    tls = False

    @classmethod
    def setUpClass(cls):
        directory = cls.enterClassContext(tempfile.TemporaryDirectory())
        users = os.path.join(directory, "users")
        with open(users, "w") as f:
            f.write(f"alice:{PASSWORD}\n")
        cls.right_file = os.path.join(directory, "right")
        with open(cls.right_file, "w") as f:
            f.write(PASSWORD + "\n")
        cls.wrong_file = os.path.join(directory, "wrong")
        with open(cls.wrong_file, "w") as f:
            f.write(WRONG + "\n")
        auth = f"--auth_file={users}"
        if cls.tls:
            running = cls.enterClassContext(cli_tls_test.lockcached_tls(auth))
            cls.connection = ["--tls", "--tls_ca_file", cert("ca.pem")]
        else:
            flags = ("--port=0", "--lock_port=-1", "--threads=2", "--listen=127.0.0.1", auth)
            running = cls.enterClassContext(
                lockcached_server.lockcached_process(cli_tls_test.LOCKCACHED, flags))
            cls.connection = []
        suffix = " over TLS" if cls.tls else ""
        cls.connection += ["--host", "127.0.0.1",
                           "--port", str(running.ports["memcached protocol" + suffix]),
                           "--lock-port", str(running.ports["lock service" + suffix])]

    def cli(self, *args, password_file=None, env_password=None):
        """lockcached-cli as alice; the password from `password_file` or,
        without it, from LOCKCACHED_PASSWORD=`env_password`."""
        env = {k: v for k, v in os.environ.items() if k != "LOCKCACHED_PASSWORD"}
        login = ["--user", "alice"]
        if password_file is not None:
            login += ["--password-file", password_file]
        if env_password is not None:
            env["LOCKCACHED_PASSWORD"] = env_password
        return subprocess.run([cli_tls_test.CLI, "--timeout", cli_tls_test.CLI_TIMEOUT_S,
                               *self.connection, *login, *args],
                              env=env, capture_output=True, timeout=60)

    def assert_ok(self, result, stdout=None):
        self.assertEqual(result.returncode, 0, described(result))
        if stdout is not None:
            self.assertEqual(result.stdout, stdout, described(result))

    def assert_login_refused(self, result):
        self.assertEqual(result.returncode, EXIT_NOPERM, described(result))
        self.assertIn(b"refused the login for alice", result.stderr)
        self.assertNotIn(WRONG.encode(), result.stderr + result.stdout)
        self.assertEqual(result.stdout, b"")

    def test_cache_commands_log_in_in_both_protocols(self):
        for protocol in ([], ["--binary"]):
            with self.subTest(protocol=protocol or "text"):
                key = f"k{len(protocol)}"
                self.assert_ok(self.cli(*protocol, "set", key, "v", password_file=self.right_file))
                self.assert_ok(self.cli(*protocol, "get", key, env_password=PASSWORD), b"v\n")
                self.assert_login_refused(
                    self.cli(*protocol, "get", key, password_file=self.wrong_file))
                self.assert_login_refused(self.cli(*protocol, "get", key, env_password=WRONG))

    def test_the_file_wins_over_the_environment(self):
        self.assert_ok(self.cli("stats", password_file=self.right_file, env_password=WRONG))

    def test_lock_commands_and_run_log_in(self):
        self.assert_ok(self.cli("locks", password_file=self.right_file), b"")
        # The command sees its fencing token, not the password.
        result = self.cli("run", "job", "--", "sh", "-c",
                          'echo "ran ${LOCKCACHED_PASSWORD-unset}"', env_password=PASSWORD)
        self.assert_ok(result, b"ran unset\n")
        self.assert_ok(self.cli("set", "obj", "v", env_password=PASSWORD))
        self.assert_ok(self.cli("lock", "obj", "--", "sh", "-c",
                                'echo "ran ${LOCKCACHED_PASSWORD-unset}"', env_password=PASSWORD),
                       b"ran unset\n")

    def test_a_refused_login_runs_no_command(self):
        for password in ({"password_file": self.wrong_file}, {"env_password": WRONG}):
            with self.subTest(**password):
                result = self.cli("run", "job", "--", "echo", "ran", **password)
                self.assert_login_refused(result)
        self.assert_login_refused(self.cli("locks", env_password=WRONG))

    def test_user_and_password_go_together(self):
        alone = cli_tls_test.run_cli(*self.connection, "--user", "alice", "get", "k")
        self.assertEqual(alone.returncode, EXIT_USAGE, described(alone))
        self.assertIn(b"--user needs a password", alone.stderr)
        no_user = cli_tls_test.run_cli(*self.connection, "--password-file", self.right_file,
                                       "get", "k")
        self.assertEqual(no_user.returncode, EXIT_USAGE, described(no_user))
        self.assertIn(b"--password-file needs --user", no_user.stderr)


class TlsAuthTest(AuthTestCase):
    tls = True


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1].startswith("-") or sys.argv[2].startswith("-"):
        sys.exit(f"usage: {sys.argv[0]} LOCKCACHED_CLI LOCKCACHED_BINARY [unittest options]")
    cli_tls_test.CLI = sys.argv.pop(1)
    cli_tls_test.LOCKCACHED = sys.argv.pop(1)
    sys.exit(lockcached_server.run_tests(sys.argv[1:]))
