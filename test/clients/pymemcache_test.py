#!/usr/bin/env python3
"""pymemcache (python3-pymemcache) against a real lockcached.

usage: pymemcache_test.py LOCKCACHED_BINARY [unittest args...]

Needs an interpreter that can import pymemcache: on Debian, /usr/bin/python3
with the python3-pymemcache package.
"""

import contextlib
import os
import sys
import unittest

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError
from pymemcache.serde import pickle_serde

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
from lockcached_server import binary_from_argv, lockcached  # noqa: E402

BINARY = None  # set by main
_servers = contextlib.ExitStack()
_port = None


def setUpModule():
    global _port
    _port = _servers.enter_context(lockcached(BINARY))


def tearDownModule():
    _servers.close()  # SIGTERM, and asserts exit status 0


def new_client(**options):
    # default_noreply=False: every call waits for, and checks, the reply
    # unless a test asks for noreply itself.
    return Client(("127.0.0.1", _port), connect_timeout=5, timeout=10,
                  default_noreply=False, **options)


class ClientTestCase(unittest.TestCase):
    def setUp(self):
        self.client = new_client()
        self.assertTrue(self.client.flush_all())

    def tearDown(self):
        self.client.close()


class StorageTest(ClientTestCase):
    def test_set_get(self):
        self.assertTrue(self.client.set("k", b"value"))
        self.assertEqual(self.client.get("k"), b"value")
        self.assertTrue(self.client.set("k", b"other", flags=7))
        self.assertEqual(self.client.get("k"), b"other")
        self.assertIsNone(self.client.get("missing"))
        self.assertEqual(self.client.get("missing", default=b"d"), b"d")

    def test_empty_value(self):
        self.assertTrue(self.client.set("k", b""))
        self.assertEqual(self.client.get("k"), b"")

    def test_longest_key(self):
        key = "k" * 250
        self.assertTrue(self.client.set(key, b"v"))
        self.assertEqual(self.client.get(key), b"v")

    def test_get_many(self):
        self.client.set_many({"a": b"1", "b": b"2", "c": b"3"})
        self.assertEqual(self.client.get_many(["a", "c", "missing", "b"]),
                         {"a": b"1", "b": b"2", "c": b"3"})
        self.assertEqual(self.client.get_many(["x", "y"]), {})

    def test_expired_on_arrival(self):
        self.assertTrue(self.client.set("k", b"v", expire=-1))
        self.assertIsNone(self.client.get("k"))

    def test_add(self):
        self.assertTrue(self.client.add("k", b"first"))
        self.assertFalse(self.client.add("k", b"second"))
        self.assertEqual(self.client.get("k"), b"first")

    def test_replace(self):
        self.assertFalse(self.client.replace("k", b"v"))
        self.assertIsNone(self.client.get("k"))
        self.client.set("k", b"old")
        self.assertTrue(self.client.replace("k", b"new"))
        self.assertEqual(self.client.get("k"), b"new")

    def test_append_prepend(self):
        self.assertFalse(self.client.append("k", b"x"))
        self.assertFalse(self.client.prepend("k", b"x"))
        self.assertIsNone(self.client.get("k"))
        self.client.set("k", b"middle")
        self.assertTrue(self.client.append("k", b">>"))
        self.assertTrue(self.client.prepend("k", b"<<"))
        self.assertEqual(self.client.get("k"), b"<<middle>>")

    def test_delete(self):
        self.client.set("k", b"v")
        self.assertTrue(self.client.delete("k"))
        self.assertFalse(self.client.delete("k"))
        self.assertIsNone(self.client.get("k"))

    def test_touch(self):
        self.assertFalse(self.client.touch("k", 100))
        self.client.set("k", b"v")
        self.assertTrue(self.client.touch("k", 100))
        self.assertEqual(self.client.get("k"), b"v")
        self.assertTrue(self.client.touch("k", -1))  # expires it at once
        self.assertIsNone(self.client.get("k"))

    def test_flush_all(self):
        self.client.set_many({"a": b"1", "b": b"2"})
        self.assertTrue(self.client.flush_all())
        self.assertEqual(self.client.get_many(["a", "b"]), {})
        self.assertTrue(self.client.set("a", b"after"))  # new items survive the flush
        self.assertEqual(self.client.get("a"), b"after")


class CasTest(ClientTestCase):
    def test_gets_and_cas(self):
        self.client.set("k", b"v1")
        value, cas = self.client.gets("k")
        self.assertEqual(value, b"v1")
        self.assertTrue(self.client.cas("k", b"v2", cas))
        self.assertEqual(self.client.get("k"), b"v2")
        self.assertFalse(self.client.cas("k", b"v3", cas))  # stale unique
        self.assertEqual(self.client.get("k"), b"v2")
        new_value, new_cas = self.client.gets("k")
        self.assertEqual(new_value, b"v2")
        self.assertNotEqual(new_cas, cas)

    def test_gets_is_stable_without_writes(self):
        self.client.set("k", b"v")
        self.assertEqual(self.client.gets("k"), self.client.gets("k"))

    def test_cas_missing_key(self):
        self.assertIsNone(self.client.cas("missing", b"v", b"1"))
        self.assertEqual(self.client.gets("missing"), (None, None))

    def test_gets_many(self):
        self.client.set_many({"a": b"1", "b": b"2"})
        result = self.client.gets_many(["a", "b", "missing"])
        self.assertEqual(set(result), {"a", "b"})
        self.assertEqual(result["a"][0], b"1")
        self.assertNotEqual(result["a"][1], result["b"][1])


class ArithmeticTest(ClientTestCase):
    def test_incr_decr(self):
        self.client.set("n", b"10")
        self.assertEqual(self.client.incr("n", 5), 15)
        self.assertEqual(self.client.decr("n", 3), 12)
        self.assertEqual(self.client.get("n"), b"12")

    def test_decr_stops_at_zero(self):
        self.client.set("n", b"3")
        self.assertEqual(self.client.decr("n", 10), 0)
        self.assertEqual(self.client.get("n"), b"0")

    def test_decr_shrinks_the_value(self):
        self.client.set("n", b"100")
        self.assertEqual(self.client.decr("n", 91), 9)
        # Like memcached, which rewrites the digits in place: the value keeps
        # its length, padded with spaces, and still parses as a number.
        self.assertEqual(self.client.get("n"), b"9  ")
        self.assertEqual(self.client.incr("n", 1), 10)

    def test_incr_wraps_at_2_to_64(self):
        self.client.set("n", str(2**64 - 1).encode())
        self.assertEqual(self.client.incr("n", 1), 0)
        self.assertEqual(self.client.incr("n", 2**64 - 1), 2**64 - 1)

    def test_missing_key(self):
        self.assertIsNone(self.client.incr("missing", 1))
        self.assertIsNone(self.client.decr("missing", 1))

    def test_non_numeric_value(self):
        self.client.set("s", b"abc")
        with self.assertRaises(MemcacheClientError):
            self.client.incr("s", 1)
        self.assertEqual(self.client.get("s"), b"abc")


class NoreplyTest(ClientTestCase):
    """Each noreply command must change the data and send nothing back:
    a stray reply would desynchronize the later, checked, commands."""

    def test_storage_commands(self):
        c = self.client
        self.assertTrue(c.set("k", b"v", noreply=True))
        self.assertTrue(c.add("k", b"ignored", noreply=True))
        self.assertTrue(c.add("k2", b"added", noreply=True))
        self.assertTrue(c.replace("k", b"r", noreply=True))
        self.assertTrue(c.replace("missing", b"x", noreply=True))
        self.assertTrue(c.append("k", b"a", noreply=True))
        self.assertTrue(c.prepend("k", b"p", noreply=True))
        self.assertEqual(c.get_many(["k", "k2", "missing"]), {"k": b"pra", "k2": b"added"})

    def test_cas(self):
        self.client.set("k", b"v")
        _, cas = self.client.gets("k")
        self.assertTrue(self.client.cas("k", b"new", cas, noreply=True))
        self.assertTrue(self.client.cas("k", b"stale", cas, noreply=True))
        self.assertEqual(self.client.get("k"), b"new")

    def test_delete_touch_arith(self):
        c = self.client
        c.set_many({"d": b"1", "t": b"2", "n": b"10"})
        self.assertTrue(c.delete("d", noreply=True))
        self.assertTrue(c.delete("d", noreply=True))
        self.assertTrue(c.touch("t", -1, noreply=True))
        self.assertIsNone(c.incr("n", 5, noreply=True))
        self.assertIsNone(c.decr("n", 2, noreply=True))
        self.assertIsNone(c.incr("missing", 1, noreply=True))
        self.assertEqual(c.get_many(["d", "t", "n"]), {"n": b"13"})

    def test_flush_all(self):
        self.client.set("k", b"v")
        self.assertTrue(self.client.flush_all(noreply=True))
        self.assertIsNone(self.client.get("k"))


class ValueTest(ClientTestCase):
    def test_all_byte_values(self):
        value = bytes(range(256)) * 2
        self.assertTrue(self.client.set("bin", value))
        self.assertEqual(self.client.get("bin"), value)
        self.assertEqual(self.client.get_many(["bin"]), {"bin": value})

    def test_protocol_lookalikes_in_value(self):
        value = b"END\r\nVALUE x 0 1\r\n\r\n\r\nSTORED\r\n"
        self.assertTrue(self.client.set("tricky", value))
        self.assertEqual(self.client.get("tricky"), value)

    def test_500_kb_value(self):
        value = bytes((i * 7 + i // 256) % 256 for i in range(500 * 1024))
        self.assertTrue(self.client.set("big", value))
        self.assertEqual(self.client.get("big"), value)
        self.assertTrue(self.client.append("big", b"tail"))
        self.assertEqual(self.client.get("big"), value + b"tail")

    def test_serde_str_and_int(self):
        client = new_client(serde=pickle_serde)
        try:
            self.assertTrue(client.set("s", "grüße ✓"))
            self.assertTrue(client.set("i", 42))
            self.assertTrue(client.set("l", [1, "two"]))
            self.assertEqual(client.get("s"), "grüße ✓")
            self.assertEqual(client.get("i"), 42)
            self.assertEqual(client.get("l"), [1, "two"])
            self.assertEqual(client.incr("i", 8), 50)
            self.assertEqual(client.get("i"), 50)
        finally:
            client.close()


class ServerInfoTest(ClientTestCase):
    def test_version(self):
        self.assertRegex(self.client.version(), rb"^\d+\.\d+\.\d+")

    def test_stats(self):
        before = self.client.stats()
        for name in ("pid", "uptime", "time", "version", "curr_connections",
                     "cmd_get", "cmd_set", "get_hits", "get_misses", "curr_items"):
            self.assertIn(name.encode(), before)
        self.client.set("k", b"v")
        self.client.get_many(["k", "missing"])
        after = self.client.stats()
        self.assertEqual(after[b"cmd_get"] - before[b"cmd_get"], 2)
        self.assertEqual(after[b"get_hits"] - before[b"get_hits"], 1)
        self.assertEqual(after[b"get_misses"] - before[b"get_misses"], 1)
        self.assertEqual(after[b"cmd_set"] - before[b"cmd_set"], 1)
        self.assertGreaterEqual(after[b"curr_connections"], 1)

    def test_stats_settings(self):
        settings = self.client.stats("settings")
        self.assertIn(b"maxbytes", settings)
        self.assertIn(b"item_size_max", settings)

    def test_version_matches_stats(self):
        self.assertEqual(self.client.stats()[b"version"], self.client.version())


def main():
    global BINARY
    BINARY = binary_from_argv()
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
