#!/usr/bin/env python3
"""--auth_file with real clients (docs/authentication.md).

usage: auth_test.py LOCKCACHED_BINARY [MEMCSTAT] [PHP] [unittest args...]

pymemcache against the text protocol (it has no authentication of its own:
the client sends memcached's authenticating `set` itself, as memcached's
documentation says), libmemcached's memcstat with --username/--password
over the binary protocol (cyrus SASL PLAIN, libsasl2-modules), and
php-memcached's setSaslAuthData.
"""

import os
import subprocess
import sys
import tempfile
import unittest

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
from lockcached_server import lockcached, main_with_tools, run_tests  # noqa: E402

BINARY = None
MEMCSTAT = "memcstat"
PHP = "php"
FLAGS = ("--port=0", "--lock_port=0", "--threads=2", "--listen=127.0.0.1")
DEADLINE_S = 10

# set, read back and report the result code's message, with SASL PLAIN.
PHP_SCRIPT = r"""
$m = new Memcached();
$m->setOption(Memcached::OPT_BINARY_PROTOCOL, true);
$m->addServer('127.0.0.1', (int)$argv[1]);
$m->setSaslAuthData($argv[2], $argv[3]);
$stored = $m->set('php-key', 'php-value');
echo ($stored ? 'stored' : 'refused') . ' ' . $m->getResultMessage() . "\n";
echo 'read ' . var_export($m->get('php-key'), true) . "\n";
"""


class AuthClients(unittest.TestCase):
    def setUp(self):
        handle, self.users = tempfile.mkstemp(prefix="lockcached_users_")
        with os.fdopen(handle, "w") as users:
            users.write("alice:secret\n")
        self.addCleanup(os.remove, self.users)

    def server(self):
        return lockcached(BINARY, (*FLAGS, f"--auth_file={self.users}"))

    def test_pymemcache_authenticates_with_memcacheds_set(self):
        with self.server() as port:
            client = Client(("127.0.0.1", port), timeout=DEADLINE_S)
            with self.assertRaisesRegex(MemcacheClientError, "unauthenticated"):
                client.get("key")
            with self.assertRaisesRegex(MemcacheClientError, "authentication failure"):
                client.set("auth", "alice wrong", noreply=False)
            self.assertTrue(client.set("auth", "alice secret", noreply=False))
            self.assertIsNone(client.get("auth"))  # nothing was stored
            self.assertTrue(client.set("key", "value", noreply=False))
            self.assertEqual(client.get("key"), b"value")
            self.assertEqual(client.stats("settings")[b"auth_enabled_ascii"], b"yes")
            client.close()

    def memcstat(self, port, *credentials):
        return subprocess.run([MEMCSTAT, f"--servers=127.0.0.1:{port}", "--binary", *credentials],
                              capture_output=True, text=True, timeout=DEADLINE_S)

    def test_memcstat_with_sasl_plain(self):
        with self.server() as port:
            accepted = self.memcstat(port, "--username=alice", "--password=secret")
            self.assertEqual(accepted.returncode, 0, accepted.stderr)
            self.assertIn("auth_cmds: 1", accepted.stdout)
            refused = self.memcstat(port, "--username=alice", "--password=wrong")
            self.assertIn("AUTHENTICATION FAILURE", refused.stdout + refused.stderr)
            self.assertNotIn("pid:", refused.stdout)

    def php(self, port, user, password):
        result = subprocess.run([PHP, "-r", PHP_SCRIPT, "--", str(port), user, password],
                                capture_output=True, text=True, timeout=DEADLINE_S)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout.splitlines()

    def test_php_memcached_set_sasl_auth_data(self):
        with self.server() as port:
            self.assertEqual(self.php(port, "alice", "secret"),
                             ["stored SUCCESS", "read 'php-value'"])
            self.assertEqual(self.php(port, "alice", "wrong"),
                             ["refused AUTHENTICATION FAILURE", "read false"])


if __name__ == "__main__":
    BINARY, (MEMCSTAT, PHP), options = main_with_tools(["memcstat", "php"])
    sys.exit(run_tests(options))
