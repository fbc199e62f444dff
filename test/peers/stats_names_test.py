#!/usr/bin/env python3
"""memcached's stats families, side by side: Debian's memcached 1.6.18 and
lockcached get the same commands, then every `stats` family is read from
both and its field names are checked against memcached's.

usage: stats_names_test.py LOCKCACHED_BINARY

For each family, every name lockcached prints must be one memcached prints
too (per-class and per-connection names with their number replaced by N),
unless it is one of lockcached's own (OUR_OWN, for the locks, the lock
service and replication); and the names an operator's dashboard reads
(REQUIRED) must be there. The counters both servers keep for the same
commands must be equal.
"""

import os
import re
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
import lockcached_server  # noqa: E402

BINARY = None

# Names lockcached adds to memcached's families on purpose.
OUR_OWN = {
    "general": {"curr_lock_connections", "cmd_lock", "lock_hits", "lock_misses",
                "lock_contended", "curr_locks", "replication_role", "replication_replicas",
                "conns_dead"},
    "settings": {"lock_port", "lock_maxconns", "store_shards", "virtual_ip", "repl_port",
                 "repl_buffer_size", "repl_timeout", "tls_port", "lock_tls_port",
                 "tls_handshake_timeout", "io", "uring_sqpoll", "tcp_keepalive",
                 "watch_enabled", "lock_memory", "enable_coredumps"},
    "items": set(),
    "slabs": set(),
    "conns": {"N:protocol", "N:locks_held"},
}

# What the issue and the usual dashboards (memcached_exporter, munin,
# collectd) read, where it has a meaning in lockcached.
REQUIRED = {
    "general": {"pid", "uptime", "time", "version", "pointer_size", "rusage_user",
                "rusage_system", "max_connections", "curr_connections", "total_connections",
                "rejected_connections", "connection_structures", "cmd_get", "cmd_set",
                "cmd_flush", "cmd_touch", "cmd_meta", "get_hits", "get_misses",
                "delete_misses", "delete_hits", "incr_misses", "incr_hits", "decr_misses",
                "decr_hits", "cas_misses", "cas_hits", "cas_badval", "touch_hits",
                "touch_misses", "store_too_large", "store_no_memory", "bytes_read",
                "bytes_written", "limit_maxbytes", "accepting_conns", "listen_disabled_num",
                "time_in_listen_disabled_us", "threads", "conn_yields", "hash_bytes", "bytes",
                "curr_items", "total_items", "expired_unfetched", "evicted_unfetched",
                "evictions", "reclaimed", "crawler_reclaimed", "get_expired", "get_flushed",
                "lrutail_reflocked"},
    "settings": {"maxbytes", "maxconns", "tcpport", "udpport", "inter", "verbosity",
                 "evictions", "num_threads", "stat_key_prefix", "detail_enabled",
                 "cas_enabled", "tcp_backlog", "binding_protocol", "auth_enabled_sasl",
                 "auth_enabled_ascii", "item_size_max", "maxconns_fast", "lru_crawler",
                 "flush_enabled", "dump_enabled", "idle_timeout"},
    "items": {"items:N:number", "items:N:age", "items:N:mem_requested", "items:N:evicted",
              "items:N:evicted_nonzero", "items:N:evicted_time", "items:N:outofmemory",
              "items:N:reclaimed", "items:N:expired_unfetched", "items:N:evicted_unfetched",
              "items:N:crawler_reclaimed"},
    "slabs": {"N:chunk_size", "N:chunks_per_page", "N:total_pages", "N:total_chunks",
              "N:used_chunks", "N:free_chunks", "N:free_chunks_end", "active_slabs",
              "total_malloced"},
    "conns": {"N:addr", "N:state", "N:secs_since_last_cmd"},
}

# Counters that the same commands must move alike on both servers.
SAME_VALUES = ("cmd_get", "cmd_set", "cmd_touch", "cmd_meta", "get_hits", "get_misses",
               "delete_hits", "delete_misses", "incr_hits", "incr_misses", "cas_badval",
               "touch_hits", "touch_misses", "store_too_large", "curr_items")

BIG = 2 * 1024 * 1024  # over both servers' 1 MB item limit

# The commands both servers get before the stats are read.
SCENARIO = [
    b"stats detail on\r\n",
    b"set user:1 0 0 5\r\nalice\r\n",
    b"set user:2 0 0 3\r\nbob\r\n",
    b"set page:home 0 0 400\r\n" + b"x" * 400 + b"\r\n",
    b"set counter 0 0 1\r\n7\r\n",
    b"get user:1 user:3 page:home\r\n",
    b"incr counter 5\r\n",
    b"incr nothing 5\r\n",
    b"delete user:2\r\n",
    b"delete user:9\r\n",
    b"touch user:1 100\r\n",
    b"touch user:7 100\r\n",
    b"cas user:1 0 0 1 1\r\nx\r\n",
    b"mg user:1 v\r\n",
    b"mg missing v\r\n",
    b"me user:1\r\n",
    b"set huge 0 0 %d\r\n" % BIG + b"y" * BIG + b"\r\n",
]


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buffer = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def line(self):
        while b"\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("connection closed")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line.decode(errors="replace")

    def until_end(self, command):
        self.send(command + b"\r\n")
        lines = []
        while (line := self.line()) != "END":
            if line.startswith(("ERROR", "CLIENT_ERROR", "SERVER_ERROR")):
                raise AssertionError(f"{command!r}: {line}")
            lines.append(line)
        return lines

    def stats(self, family=""):
        command = b"stats" + (b" " + family.encode() if family else b"")
        found = {}
        for line in self.until_end(command):
            _, name, value = line.split(" ", 2)
            found[name] = value
        return found

    def run_scenario(self):
        """Sends SCENARIO; returns the replies' first lines (a value's too)."""
        replies = []
        for request in SCENARIO:
            self.send(request)
            first = self.line()
            replies.append(first.split(" exp=")[0])  # me: item layout differs
            while first.startswith("VALUE") or first.startswith("VA "):
                self.line()  # the data
                if first.startswith("VA "):
                    break
                first = self.line()
        return replies



def numbered_name(name):
    """items:12:number -> items:N:number; 7:chunk_size -> N:chunk_size."""
    return re.sub(r"(^|:)\d+:", r"\1N:", name)


def names(family, stats):
    normalize = (lambda name: name) if family in ("general", "settings") else numbered_name
    return {normalize(name) for name in stats}


class StatsNamesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = []
        cls.memcached_port = cls._enter(lockcached_server.memcached())
        cls.lockcached_port = cls._enter(lockcached_server.lockcached(BINARY))
        cls.replies = {}
        cls.stats = {}
        for server, port in (("memcached", cls.memcached_port),
                             ("lockcached", cls.lockcached_port)):
            client = Client(port)
            # A second connection, so that stats conns lists more than one.
            other = Client(port)
            other.send(b"version\r\n")
            other.line()
            cls.replies[server] = client.run_scenario()
            cls.stats[server] = {
                family: client.stats("" if family == "general" else family)
                for family in ("general", "settings", "items", "slabs", "conns")
            }
            cls.stats[server]["detail"] = client.until_end(b"stats detail dump")
            client.close()
            other.close()

    @classmethod
    def tearDownClass(cls):
        for context in reversed(cls.stack):
            context.__exit__(None, None, None)

    @classmethod
    def _enter(cls, context):
        value = context.__enter__()
        cls.stack.append(context)
        return value

    def test_the_scenario_gets_the_same_replies(self):
        self.assertEqual(self.replies["lockcached"], self.replies["memcached"])

    def check_family(self, family):
        ours = names(family, self.stats["lockcached"][family])
        theirs = names(family, self.stats["memcached"][family])
        unknown = ours - theirs - OUR_OWN[family]
        self.assertEqual(unknown, set(), f"stats {family}: names memcached does not print")
        missing = REQUIRED[family] - ours
        self.assertEqual(missing, set(), f"stats {family}: names lockcached lacks")
        # Guards the lists themselves: a required name is memcached's.
        self.assertEqual(REQUIRED[family] - theirs, set(), f"REQUIRED[{family}] not memcached's")

    def test_general(self):
        self.check_family("general")
        for name in SAME_VALUES:
            with self.subTest(name=name):
                self.assertEqual(self.stats["lockcached"]["general"][name],
                                 self.stats["memcached"]["general"][name])

    def test_settings(self):
        self.check_family("settings")
        ours = self.stats["lockcached"]["settings"]
        for name in ("item_size_max", "cas_enabled", "binding_protocol", "evictions",
                     "stat_key_prefix", "detail_enabled", "maxconns_fast", "auth_enabled_sasl",
                     "domain_socket", "umask"):
            with self.subTest(name=name):
                self.assertEqual(ours[name], self.stats["memcached"]["settings"][name])
        self.assertEqual(int(ours["tcpport"]), self.lockcached_port)

    def test_items(self):
        self.check_family("items")
        for server in ("memcached", "lockcached"):
            items = self.stats[server]["items"]
            numbers = sum(int(v) for k, v in items.items() if k.endswith(":number"))
            with self.subTest(server=server):
                self.assertEqual(numbers, int(self.stats[server]["general"]["curr_items"]))

    def test_slabs(self):
        self.check_family("slabs")
        slabs = self.stats["lockcached"]["slabs"]
        used = sum(int(v) for k, v in slabs.items() if k.endswith(":used_chunks"))
        self.assertEqual(used, int(self.stats["lockcached"]["general"]["curr_items"]))
        classes = {k.split(":")[0] for k in slabs if ":" in k}
        self.assertEqual(int(slabs["active_slabs"]), len(classes))

    def test_conns(self):
        self.check_family("conns")
        addresses = [v for k, v in self.stats["lockcached"]["conns"].items()
                     if k.endswith(":addr") and v.startswith("tcp:127.0.0.1:")]
        self.assertGreaterEqual(len(addresses), 2)

    def test_detail_dump(self):
        self.assertEqual(sorted(self.stats["lockcached"]["detail"]),
                         sorted(self.stats["memcached"]["detail"]))
        self.assertTrue(any(line.startswith("PREFIX user ") for line in
                            self.stats["lockcached"]["detail"]))


if __name__ == "__main__":
    BINARY = lockcached_server.binary_from_argv()
    unittest.main(verbosity=2)
