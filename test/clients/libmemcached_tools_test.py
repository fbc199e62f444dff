#!/usr/bin/env python3
"""libmemcached's command-line tools (Debian's libmemcached-tools) against lockcached.

usage: libmemcached_tools_test.py LOCKCACHED_BINARY [MEMCCP [MEMCCAT]]

memccp stores files (the key is the file's basename), memccat reads them
back. Each file is stored over the text protocol and, under other names,
over the binary protocol (--binary), then read back over both: every copy
must be byte-identical to its file. The files include an empty one, one with
memcached's own delimiters inside, and 300 KB of random bytes. memccat
writes the value to a file (--file): on standard output it adds a newline.

A raw "get" over the text protocol checks the flags and lengths memccp set,
and a missing key must make memccat fail.
"""

import os
import random
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
from lockcached_server import lockcached, main_with_tools, run_tests  # noqa: E402

TIMEOUT_S = 30

LOCKCACHED = None
MEMCCP = "memccp"
MEMCCAT = "memccat"


def make_files(directory, prefix):
    """Writes the test files; returns {name: content}."""
    generator = random.Random(20240611)
    files = {
        f"{prefix}-text.txt": b"hello, lockcached\n",
        f"{prefix}-empty": b"",
        f"{prefix}-delimiters": b"VALUE x 0 1\r\nEND\r\n\r\n\x00STORED\r\n\x80\x01\x00\x00",
        f"{prefix}-random.bin": bytes(generator.getrandbits(8) for _ in range(300 * 1024)),
        f"{prefix}-every-byte": bytes(range(256)) * 64,
    }
    for name, content in files.items():
        with open(os.path.join(directory, name), "wb") as handle:
            handle.write(content)
    return files


def run_tool(argv):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            timeout=TIMEOUT_S)
    return result.returncode, result.stdout.decode(errors="replace")


def raw_get(port, key):
    """(flags, value) from a text "get", or None on a miss."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.sendall(b"get " + key.encode() + b"\r\n")
        reply = b""
        while not (reply == b"END\r\n" or reply.endswith(b"\r\nEND\r\n")):
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"connection closed; got {reply[:200]!r}")
            reply += chunk
    if reply == b"END\r\n":
        return None
    header, _, rest = reply.partition(b"\r\n")
    words = header.split()
    if len(words) != 4 or words[0] != b"VALUE" or words[1] != key.encode():
        raise AssertionError(f"unexpected reply {reply[:200]!r}")
    length = int(words[3])
    if rest[length:] != b"\r\nEND\r\n":
        raise AssertionError(f"bad reply framing for {key}: length {length}, got {len(rest)} bytes")
    return int(words[2]), rest[:length]


class LibmemcachedToolsTest(unittest.TestCase):
    def setUp(self):
        self.server = lockcached(LOCKCACHED)
        self.port = self.server.__enter__()
        self.addCleanup(self.server.__exit__, None, None, None)
        self.servers = f"--servers=127.0.0.1:{self.port}"
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        self.dir = self.directory.name

    def store(self, names, binary, extra=()):
        argv = [MEMCCP, *(["--binary"] if binary else []), self.servers, *extra,
                *[os.path.join(self.dir, name) for name in names]]
        status, output = run_tool(argv)
        self.assertEqual(status, 0, f"{' '.join(argv)}:\n{output}")

    def fetch(self, name, binary):
        """The value memccat writes for key `name`; None when memccat fails."""
        out = os.path.join(self.dir, "fetched", ("binary-" if binary else "ascii-") + name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if os.path.exists(out):
            os.remove(out)
        argv = [MEMCCAT, *(["--binary"] if binary else []), self.servers, f"--file={out}", name]
        status, output = run_tool(argv)
        if status != 0:
            return None, output
        with open(out, "rb") as handle:
            return handle.read(), output

    def check_round_trip(self, store_binary):
        prefix = "stored-binary" if store_binary else "stored-ascii"
        files = make_files(self.dir, prefix)
        self.store(files, store_binary)
        for name, content in files.items():
            for read_binary in (False, True):
                with self.subTest(file=name, read_binary=read_binary):
                    value, output = self.fetch(name, read_binary)
                    self.assertIsNotNone(value, f"memccat {name} failed:\n{output}")
                    self.assertEqual(len(value), len(content))
                    self.assertTrue(value == content, f"{name}: bytes differ")
            flags, raw = raw_get(self.port, name)
            self.assertEqual(flags, 0, name)
            self.assertTrue(raw == content, f"{name}: text get returns other bytes")

    def test_store_ascii_read_both(self):
        self.check_round_trip(store_binary=False)

    def test_store_binary_read_both(self):
        self.check_round_trip(store_binary=True)

    def test_flags_and_overwrite(self):
        for binary in (False, True):
            with self.subTest(binary=binary):
                name = "flagged-binary" if binary else "flagged-ascii"
                path = os.path.join(self.dir, name)
                with open(path, "wb") as handle:
                    handle.write(b"first version")
                self.store([name], binary, ["--flags=4242", "--expire=3600"])
                self.assertEqual(raw_get(self.port, name), (4242, b"first version"))
                with open(path, "wb") as handle:
                    handle.write(b"second")
                self.store([name], binary)
                self.assertEqual(raw_get(self.port, name), (0, b"second"))
                value, output = self.fetch(name, binary)
                self.assertEqual(value, b"second", output)

    def test_missing_key_fails(self):
        for binary in (False, True):
            with self.subTest(binary=binary):
                value, output = self.fetch("no-such-key", binary)
                self.assertIsNone(value, f"memccat of a missing key succeeded: {output}")


def main():
    global LOCKCACHED, MEMCCP, MEMCCAT
    LOCKCACHED, (MEMCCP, MEMCCAT), options = main_with_tools([MEMCCP, MEMCCAT])
    return run_tests(options)


if __name__ == "__main__":
    sys.exit(main())
