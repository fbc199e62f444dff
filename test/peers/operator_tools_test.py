#!/usr/bin/env python3
"""memcached's operator tools, side by side on memcached and on lockcached.

usage: operator_tools_test.py LOCKCACHED_BINARY [MEMCACHED_TOOL [MEMCDUMP]]

memcached-tool (Debian's memcached package ships it in
/usr/share/memcached/scripts) reads `stats items` and `stats slabs`
(display), `stats` and `stats settings`, and dumps the items with
`lru_crawler metadump all` and a get per key (dump); memcdump
(libmemcached-tools) lists keys with `stats cachedump N 0` for every slab
id. Each test stores the same items in a fresh memcached 1.6.18 and a fresh
lockcached, runs the same tool on both, and checks what each prints.

memcached runs with -o no_lru_maintainer: its cachedump lists only the cold
LRU, where its segmented LRU puts no new item, so memcdump would miss keys.
"""

import os
import re
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
from lockcached_server import lockcached, main_with_tools, memcached, run_tests  # noqa: E402

TIMEOUT_S = 120
LOCKCACHED = None
MEMCACHED_TOOL = "/usr/share/memcached/scripts/memcached-tool"
MEMCDUMP = "memcdump"

# Keys that metadump must %-encode (memcached-tool decodes them), within
# what a text-protocol key may hold; values of several size classes.
ODD_KEYS = [b"a/b%c", b"x:y!z", b"q?r=s&t", b"tilde~dot.dash-under_", b"utf8-\xc3\xbc",
            b"semi;colon", b"brackets[1]"]


def items(count, prefix, size, exptime=0, flags=0):
    return [(b"%s%d" % (prefix, i), flags, exptime, bytes([97 + i % 26]) * size)
            for i in range(count)]


def store_all(port, entries):
    """Stores (key, flags, exptime, value) entries, pipelined; checks every reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        batch = bytearray()
        for key, flags, exptime, value in entries:
            batch += b"set %s %d %d %d\r\n%s\r\n" % (key, flags, exptime, len(value), value)
        batch += b"version\r\n"
        sock.sendall(batch)
        reply = bytearray()
        while not reply.endswith(b"\r\n") or b"VERSION " not in reply[-40:]:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            reply += chunk
    stored = reply.count(b"STORED\r\n")
    if stored != len(entries):
        raise AssertionError(f"{stored} of {len(entries)} stored: {bytes(reply[-200:])!r}")


def run(argv):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            timeout=TIMEOUT_S)
    return result.returncode, result.stdout, result.stderr.decode(errors="replace")


def tool(port, mode):
    status, out, err = run(["perl", MEMCACHED_TOOL, f"127.0.0.1:{port}", mode])
    if status != 0:
        raise AssertionError(f"memcached-tool {mode} exited {status}: {err}")
    return out


def display_rows(port):
    """memcached-tool display: {class: (item_size, pages, count)}."""
    rows = {}
    for line in tool(port, "display").decode().splitlines()[1:]:
        words = line.split()
        rows[int(words[0])] = (words[1], int(words[3]), int(words[4]))
    return rows


def stat_group(port, group):
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.sendall(b"stats %s\r\n" % group)
        reply = b""
        while not reply.endswith(b"END\r\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            reply += chunk
    return dict(re.findall(rb"STAT (\S+) (\S+)\r\n", reply))


def dumped(port):
    """memcached-tool dump: {key: (flags, exptime, value)}."""
    out = tool(port, "dump")
    entries = {}
    at = 0
    header = re.compile(rb"add (\S+) (\d+) (\d+) (\d+)\r\n")
    while at < len(out):
        match = header.match(out, at)
        if not match:
            raise AssertionError(f"unexpected dump output at {at}: {out[at:at + 100]!r}")
        length = int(match.group(4))
        start = match.end()
        entries[match.group(1)] = (int(match.group(2)), int(match.group(3)),
                                   out[start:start + length])
        at = start + length + 2
    return entries


def memcdump_keys(port):
    status, out, err = run([MEMCDUMP, f"--servers=127.0.0.1:{port}"])
    if status != 0:
        raise AssertionError(f"memcdump exited {status}: {err}")
    return out.splitlines()


class OperatorToolsTest(unittest.TestCase):
    def setUp(self):
        self.memcached = memcached(("-o", "no_lru_maintainer"))
        self.mc = self.memcached.__enter__()
        self.addCleanup(self.memcached.__exit__, None, None, None)
        self.lockcached = lockcached(LOCKCACHED)
        self.lc = self.lockcached.__enter__()
        self.addCleanup(self.lockcached.__exit__, None, None, None)

    def store(self, entries):
        for port in (self.mc, self.lc):
            store_all(port, entries)

    def test_display_prints_a_row_per_non_empty_class(self):
        entries = (items(300, b"s", 10) + items(40, b"m", 300) + items(7, b"l", 5000) +
                   items(2, b"h", 200000))
        self.store(entries)
        for name, port in (("memcached", self.mc), ("lockcached", self.lc)):
            with self.subTest(server=name):
                rows = display_rows(port)
                self.assertEqual(sum(count for _, _, count in rows.values()), len(entries))
                self.assertTrue(all(pages >= 1 for _, pages, _ in rows.values()), rows)
        # lockcached: one row per class that holds items, its Count the
        # class's number, its size the class's.
        rows = display_rows(self.lc)
        numbers = {int(name.split(b":")[1]): int(value)
                   for name, value in stat_group(self.lc, b"items").items()
                   if name.endswith(b":number")}
        self.assertEqual({cls: count for cls, (_, _, count) in rows.items()}, numbers)
        self.assertGreaterEqual(len(rows), 4)
        slabs = stat_group(self.lc, b"slabs")
        for cls, (size, _, _) in rows.items():
            chunk = int(slabs[b"%d:chunk_size" % cls])
            shown = f"{chunk}B" if chunk < 1024 else f"{chunk / 1024:.1f}K"
            self.assertEqual(size, shown)

    def test_stats_and_settings_print_the_same_fields(self):
        self.store(items(25, b"k", 10))
        for mode, fields in (("stats", ["curr_items", "total_items", "bytes", "evictions",
                                        "curr_connections", "limit_maxbytes"]),
                             ("settings", ["maxbytes", "maxconns", "tcpport", "item_size_max",
                                           "num_threads", "evictions"])):
            printed = {}
            for name, port in (("memcached", self.mc), ("lockcached", self.lc)):
                lines = tool(port, mode).decode().splitlines()[1:]
                # A setting may be empty (lockcached's virtual_ip).
                printed[name] = {words[0]: words[1] if len(words) > 1 else ""
                                 for words in (line.split(None, 1) for line in lines)}
            for field in fields:
                with self.subTest(mode=mode, field=field):
                    self.assertIn(field, printed["memcached"])
                    self.assertIn(field, printed["lockcached"])
            if mode == "stats":
                self.assertEqual(printed["lockcached"]["curr_items"].strip(), "25")
                self.assertEqual(printed["memcached"]["curr_items"].strip(), "25")

    def test_dump_gives_every_key_value_flags_and_exptime(self):
        expires = int(time.time()) + 3600
        entries = (items(200, b"plain", 20, flags=7) + items(30, b"ttl", 700, exptime=expires) +
                   [(key, 3, 0, b"odd " + key) for key in ODD_KEYS])
        self.store(entries)
        expected = {key: (flags, exptime, value) for key, flags, exptime, value in entries}
        for name, port in (("memcached", self.mc), ("lockcached", self.lc)):
            with self.subTest(server=name):
                self.assertEqual(dumped(port), expected)

    def test_memcdump_lists_every_key_across_classes(self):
        entries = (items(12000, b"small-", 8) + items(5000, b"medium-", 400) +
                   items(3000, b"large-", 3000) + [(key, 0, 0, b"v") for key in ODD_KEYS])
        self.store(entries)
        # memcdump prints a key's bytes above 0x7f as nothing, from both.
        expected = sorted(bytes(c for c in key if c < 0x80) for key, _, _, _ in entries)
        self.assertEqual(len(set(expected)), 20000 + len(ODD_KEYS))
        for name, port in (("memcached", self.mc), ("lockcached", self.lc)):
            with self.subTest(server=name):
                self.assertEqual(sorted(memcdump_keys(port)), expected)


def main():
    global LOCKCACHED, MEMCACHED_TOOL, MEMCDUMP
    LOCKCACHED, (MEMCACHED_TOOL, MEMCDUMP), options = main_with_tools([MEMCACHED_TOOL, MEMCDUMP])
    return run_tests(options)


if __name__ == "__main__":
    sys.exit(main())
