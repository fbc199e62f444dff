#!/usr/bin/env python3
"""memcached's command-line options, side by side: Debian's memcached 1.6.18
and lockcached started with the same option line.

usage: memcached_options_test.py LOCKCACHED_BINARY [unittest options]

An option with a meaning in lockcached must behave as in memcached: the same
bytes get the same replies (normalized as compare_memcached.py normalizes
them), or both servers show the same behaviour where the details differ by
design (how many 100 KB items fit before memory is full, say). An option that
only tunes memcached's own machinery must start both servers, and lockcached
must say in one warning line why it changes nothing; one that asks for what
lockcached always does starts it without a word.
"""

import concurrent.futures
import contextlib
import os
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
import compare_memcached  # noqa: E402
import lockcached_server  # noqa: E402
from lockcached_server import stats  # noqa: E402

BINARY = None
WARNING = re.compile(r"^lockcached: warning: (.*)$", re.M)

# memcached's binary protocol, as far as these tests need it.
GET, SET, DELETE, INCREMENT, FLUSH, VERSION, STAT, FLUSHQ = (0x00, 0x01, 0x04, 0x05, 0x08, 0x0B,
                                                             0x10, 0x18)


def binary_request(opcode, key=b"", extras=b"", value=b"", cas=0):
    return struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0,
                       len(key) + len(extras) + len(value), 0, cas) + extras + key + value


def binary_status(reply):
    """(opcode, status) of the first binary response in `reply`, or None."""
    if len(reply) < 8 or reply[0] != 0x81:
        return None
    _, opcode, _, _, _, status = struct.unpack(">BBHBBH", reply[:8])
    return opcode, status


def binary_reply(port, request):
    """The first binary response to `request`, header and body (what came,
    if the server closed first): read by its length, not to a silence."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        reply = b""
        while len(reply) < 24 or len(reply) < 24 + struct.unpack(">I", reply[8:12])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
        return reply


def answers_binary_version(port):
    try:
        return binary_status(binary_reply(port, binary_request(VERSION))) == (VERSION, 0)
    except OSError:
        return False


def built_with_a_sanitizer(binary):
    """Whether `binary` (or the server its wrapper script runs) runs under
    AddressSanitizer or ThreadSanitizer."""
    with open(lockcached_server.server_run_by(binary), "rb") as f:
        content = f.read()
    return b"__asan_init" in content or b"__tsan_init" in content


@contextlib.contextmanager
def both(options, ready=None):
    """memcached and lockcached, each started with `options`; yields
    (memcached's port, lockcached's Running). `ready`: see
    lockcached_server.memcached."""
    flags = (*lockcached_server.DEFAULT_FLAGS, *options)
    with lockcached_server.memcached(options, ready=ready) as reference:
        with lockcached_server.lockcached_process(BINARY, flags) as running:
            yield reference, running


def cache_port(running):
    return running.ports["memcached protocol"]


def replies(port, *parts, labels=None):
    """The normalized reply lines to `parts`, sent on a new connection."""
    reply, closed = compare_memcached.exchange(port, parts)
    lines = compare_memcached.normalize(reply, {} if labels is None else labels)
    return lines + ["[closed]" if closed else "[open]"]


def raw(port, data, timeout=1.0):
    """Everything `port` answers to `data` within `timeout` of silence, and
    whether it closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        sock.settimeout(timeout)
        reply = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return reply, True
                reply += chunk
        except socket.timeout:
            return reply, False
        except ConnectionResetError:
            return reply, True


def warnings(running):
    return WARNING.findall(running.log())


def wait_for_exit(process, seconds=10):
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


class Unprivileged:
    """Runs a server command as nobody with a limit set, to its ready line or
    its end: what an option does where the process lacks a privilege."""

    def __init__(self, command, limit, value):
        self.command = command
        self.limit = limit
        self.value = value

    def _drop(self):
        resource.setrlimit(self.limit, self.value)
        if os.geteuid() == 0:
            os.setgid(65534)
            os.setuid(65534)

    def run(self, ready, seconds=5):
        """(exit status or None while it runs, its output so far); `ready`
        is asked with the output so far."""
        with tempfile.TemporaryFile() as log:
            process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, preexec_fn=self._drop)

            def output():
                log.seek(0)
                return log.read().decode(errors="replace")

            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and process.poll() is None and not ready(output()):
                time.sleep(0.05)
            status = process.poll()
            if status is None:
                process.terminate()
                process.wait()
            return status, output()


class OptionsWithAMeaning(unittest.TestCase):
    def assert_same_settings(self, reference, port, *names):
        theirs, ours = stats(reference, "settings"), stats(port, "settings")
        for name in names:
            self.assertEqual(ours.get(name), theirs.get(name), name)

    def assert_same_replies(self, reference, port, *parts):
        self.assertEqual(replies(port, *parts), replies(reference, *parts), parts)

    def test_disable_cas(self):
        with both(["-C"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "cas_enabled")
            setup = b"set k 0 0 1\r\na\r\nset n 0 0 1\r\n5\r\n"
            for part in (b"gets k\r\n", b"gats 100 k\r\n", b"cas k 0 0 1 0\r\nb\r\n",
                         b"cas k 0 0 1 1\r\nb\r\n", b"cas missing 0 0 1 1\r\nb\r\n",
                         b"mg k c v\r\n", b"ms k 1 C1\r\nc\r\n", b"ms k 1 MA C1\r\nd\r\n",
                         b"ms k 1 c\r\ne\r\n", b"md n C1\r\n", b"ma n C1\r\n", b"ma n c\r\n",
                         b"me k\r\n", b"get k n\r\n"):
                self.assert_same_replies(reference, port, setup + part)
            # The binary protocol: a CAS of 0 in every reply; one sent with a
            # store goes unseen, with a delete or an increment it never matches.
            incr = struct.pack(">QQI", 1, 0, 0xFFFFFFFF)
            for request in (binary_request(GET, b"k"),
                            binary_request(SET, b"k", struct.pack(">II", 0, 0), b"v", cas=7),
                            binary_request(DELETE, b"k", cas=7),
                            binary_request(INCREMENT, b"n", incr, cas=7),
                            binary_request(INCREMENT, b"n", incr)):
                ours, theirs = binary_reply(port, request), binary_reply(reference, request)
                self.assertEqual(ours[:24], theirs[:24], request)

    def test_disable_flush_all(self):
        with both(["-F"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "flush_enabled")
            self.assert_same_replies(
                reference, port, b"set k 0 0 1\r\na\r\nflush_all\r\nflush_all 10\r\n"
                b"flush_all noreply\r\nflush_all bad\r\nflush_all 1 2 3\r\nget k\r\nstats\r\n")
            flush = binary_request(FLUSH) + binary_request(FLUSHQ)
            self.assertEqual(raw(port, flush, 0.3), raw(reference, flush, 0.3))
            self.assertEqual(stats(port)["cmd_flush"], stats(reference)["cmd_flush"])

    def test_disable_dumping(self):
        with both(["-X"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "dump_enabled")
            self.assert_same_replies(reference, port, b"set k 0 0 1\r\na\r\n"
                                     b"stats cachedump 1 0\r\nlru_crawler metadump all\r\n")

    def test_disable_watch(self):
        with both(["-W"]) as (reference, running):
            self.assert_same_replies(reference, cache_port(running), b"watch\r\n",
                                     b"watch mutations\r\n")

    def test_shutdown_is_off_without_enable_shutdown(self):
        with both([]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "shutdown_command")
            self.assert_same_replies(reference, port, b"shutdown\r\nshutdown graceful\r\n")

    def test_enable_shutdown(self):
        for command in (b"shutdown\r\n", b"shutdown graceful\r\n"):
            with both(["-A"]) as (reference, running):
                port = cache_port(running)
                self.assert_same_settings(reference, port, "shutdown_command")
                self.assert_same_replies(reference, port, b"shutdown now\r\n")
                # The connection closes without a reply and the server exits 0.
                self.assertEqual(raw(port, command), (b"", True))
                self.assertEqual(raw(reference, command), (b"", True))
                self.assertEqual(wait_for_exit(running.process), 0, running.log())
                if command == b"shutdown graceful\r\n":
                    self.assertIn("graceful", running.log())

    def test_protocol_ascii(self):
        with both(["-B", "ascii"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "binding_protocol")
            # A binary request is a text line like any other.
            self.assert_same_replies(reference, port, binary_request(VERSION) + b"\r\n")
            self.assert_same_replies(reference, port, b"set k 0 0 1\r\na\r\nget k\r\n")

    def test_protocol_binary(self):
        with both(["-B", "binary"], ready=answers_binary_version) as (reference, running):
            port = cache_port(running)
            text = b"version\r\n" * 4  # a header's worth that is no request
            self.assertEqual(raw(port, text), (b"", True))
            self.assertEqual(raw(reference, text), (b"", True))
            self.assertTrue(answers_binary_version(port))
            # `stats settings` in binary: the key is the name, the value the value.
            for server in (port, reference):
                reply = raw(server, binary_request(STAT, b"settings"), 0.3)[0]
                self.assertIn(b"binding_protocolbinary", reply, server)

    def test_listen_backlog(self):
        with both(["-b", "64"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "tcp_backlog")
            self.assertEqual(stats(port, "settings")["tcp_backlog"], "64")
            if shutil.which("ss"):  # Send-Q of a listening socket: its backlog
                for listening in (port, reference):
                    table = subprocess.run(["ss", "-Hltn", f"sport = :{listening}"],
                                           capture_output=True, text=True, check=True).stdout
                    self.assertEqual({line.split()[2] for line in table.splitlines()}, {"64"},
                                     table)

    def test_max_reqs_per_event(self):
        with both(["-R", "2"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "reqs_per_event")
            pipeline = b"set k 0 0 1\r\na\r\n" + b"get k\r\n" * 50
            self.assert_same_replies(reference, port, pipeline)
            # Each yielded to the others at least once on the way.
            for server in (reference, port):
                self.assertGreater(int(stats(server)["conn_yields"]), 0, server)

    def test_prefix_delimiter(self):
        with both(["-D", "/"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "stat_key_prefix", "detail_enabled")
            # One prefix: memcached lists several in its hash table's order.
            self.assert_same_replies(reference, port, b"set a/b 0 0 1\r\nx\r\nget a/b\r\n"
                                     b"get a:b\r\ndelete a/c\r\nstats detail dump\r\n")

    def test_disable_evictions(self):
        value = b"x" * 100000
        with both(["-M", "-m", "8"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "evictions")
            for server in (reference, port):
                with socket.create_connection(("127.0.0.1", server), timeout=5) as sock:
                    reader = sock.makefile("rb")
                    for i in range(400):
                        sock.sendall(b"set k%d 0 0 %d\r\n%s\r\n" % (i, len(value), value))
                        reply = reader.readline()
                        if reply != b"STORED\r\n":
                            break
                    self.assertEqual(reply, b"SERVER_ERROR out of memory storing object\r\n",
                                     server)
                    self.assertGreater(i, 10, server)
                    # Nothing was evicted for the refused item.
                    sock.sendall(b"mg k0 s\r\n")
                    self.assertEqual(reader.readline(), b"HD s100000\r\n", server)
                self.assertEqual(stats(server)["evictions"], "0", server)

    def test_conn_limit_and_maxconns_fast(self):
        # memcached counts its own descriptors against -c too: past the
        # limit both answer the next client with this error and close it.
        with both(["-c", "30", "-o", "maxconns_fast"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "maxconns", "maxconns_fast")
            self.assertEqual(warnings(running), [])
            for server in (reference, port):
                with contextlib.ExitStack() as stack:
                    answers = []
                    for _ in range(32):
                        sock = stack.enter_context(socket.create_connection(("127.0.0.1", server)))
                        sock.sendall(b"version\r\n")
                        answers.append(sock.recv(100))
                    self.assertIn(b"ERROR Too many open connections\r\n", answers, server)

    def test_idle_timeout(self):
        with both(["-o", "idle_timeout=1"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "idle_timeout")
            for server in (reference, port):
                # memcached looks for idle connections every second or so.
                self.assertEqual(raw(server, b"version\r\n", timeout=6)[1], True, server)

    def test_lru_crawler_off_and_on(self):
        with both(["-o", "no_lru_crawler"]) as (reference, running):
            port = cache_port(running)
            self.assert_same_settings(reference, port, "lru_crawler")
            self.assertEqual(stats(port, "settings")["lru_crawler"], "no")
            self.assert_same_replies(reference, port, b"lru_crawler metadump all\r\n"
                                     b"lru_crawler crawl all\r\nlru_crawler enable\r\n")
            self.assert_same_settings(reference, port, "lru_crawler")
        with both(["-o", "lru_crawler"]) as (reference, running):
            self.assert_same_settings(reference, cache_port(running), "lru_crawler")
            self.assertEqual(warnings(running), [])

    def test_watcher_logbuf_size(self):
        with both(["-o", "watcher_logbuf_size=64"]) as (reference, running):
            self.assert_same_settings(reference, cache_port(running), "watcher_logbuf_size")

    def test_lock_memory(self):
        if os.geteuid() != 0:
            self.skipTest("locking memory needs root or CAP_IPC_LOCK")
        with both(["-k"]) as (reference, running):
            self.assertEqual(stats(cache_port(running), "settings")["lock_memory"], "yes")
            pids = [self.pid_of(reference)]
            # The sanitizers' runtimes make mlockall a no-op in the process.
            if not built_with_a_sanitizer(BINARY):
                pids.append(running.process.pid)
            for pid in pids:
                self.assertGreater(self.status_kb(pid, "VmLck"), 0, pid)

    def test_lock_memory_without_the_privilege(self):
        # Both start, and say the memory is not locked.
        if os.geteuid() != 0:
            self.skipTest("becoming nobody needs root")
        limit = (resource.RLIMIT_MEMLOCK, (65536, 65536))
        port = lockcached_server.free_port()
        memcached = Unprivileged(lockcached_server.memcached_command(port, ["-k"]), *limit)
        status, output = memcached.run(lambda _: lockcached_server.answers_version(port))
        self.assertIsNone(status, output)
        self.assertIn("warning: -k invalid, mlockall() failed", output)
        ours = Unprivileged([BINARY, *lockcached_server.DEFAULT_FLAGS, "-k"], *limit)
        status, output = ours.run(lambda so_far: lockcached_server.READY.search(so_far))
        self.assertIsNone(status, output)
        self.assertIn("ready", output)
        self.assertIn("--lock_memory (-k): memory not locked", output)

    def test_enable_coredumps(self):
        with both(["-r"]) as (reference, running):
            self.assertEqual(stats(cache_port(running), "settings")["enable_coredumps"], "yes")
            self.assertEqual(self.core_limit(running.process.pid),
                             self.core_limit(self.pid_of(reference)))

    def test_enable_coredumps_with_no_core_files_allowed(self):
        # Neither starts: memcached exits 71 (EX_OSERR), lockcached 64.
        limit = (resource.RLIMIT_CORE, (0, 0))
        memcached = Unprivileged(
            lockcached_server.memcached_command(lockcached_server.free_port(), ["-r"]), *limit)
        status, output = memcached.run(lambda _: False)
        self.assertEqual((status, output), (71, "failed to ensure corefile creation\n"))
        ours = Unprivileged([BINARY, *lockcached_server.DEFAULT_FLAGS, "-r"], *limit)
        status, output = ours.run(lambda _: False)
        self.assertEqual(status, 64, output)
        self.assertEqual(output.count("\n"), 1, output)
        self.assertIn("--enable_coredumps: the hard limit on core files is 0", output)

    def test_license(self):
        memcached = os.environ.get("MEMCACHED_BINARY", "memcached")
        for command, name in (([memcached, "-i"], "memcached "), ([BINARY, "-i"], "lockcached ")):
            done = subprocess.run(command, capture_output=True, text=True, timeout=10)
            self.assertEqual(done.returncode, 0, done)
            self.assertTrue(done.stdout.startswith(name), done.stdout[:80])
            self.assertIn("Redistribution and use in source and binary forms", done.stdout)

    @staticmethod
    def pid_of(port):
        return int(stats(port)["pid"])

    @staticmethod
    def status_kb(pid, field):
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise AssertionError(f"no {field} for {pid}")

    @staticmethod
    def core_limit(pid):
        with open(f"/proc/{pid}/limits") as limits:
            return next(line for line in limits if line.startswith("Max core file size"))


# Options of memcached's own machinery: the warning each gets names it.
WITHOUT_EFFECT = [
    ["-f", "1.1"], ["-n", "64"], ["-L"], ["-N", "1"], ["--slab-growth-factor=1.5"],
    ["-o", "hashpower=16"], ["-o", "no_hashexpand"], ["-o", "slab_reassign"],
    ["-o", "no_slab_reassign"], ["-o", "slab_automove=2"], ["-o", "no_slab_automove"],
    ["-o", "slab_automove_ratio=0.5"], ["-o", "slab_automove_window=10"],
    ["-o", "slab_sizes=100-200-300"], ["-o", "slab_chunk_max=524288"],
    ["-o", "no_chunked_items"], ["-o", "tail_repair_time=60"], ["-o", "hash_algorithm=xxh3"],
    ["-o", "lru_crawler_sleep=50"], ["-o", "lru_crawler_tocrawl=100"],
    ["-o", "lru_maintainer"], ["-o", "no_lru_maintainer"], ["-o", "hot_lru_pct=10"],
    ["-o", "warm_lru_pct=30"], ["-o", "hot_max_factor=0.3"], ["-o", "warm_max_factor=1.5"],
    ["-o", "temporary_ttl=30"], ["-o", "worker_logbuf_size=64"], ["-o", "no_modern"],
    ["-o", "drop_privileges"], ["-o", "resp_obj_mem_limit"], ["-o", "read_buf_mem_limit=64"],
    ["-o", "sock_cookie_id=5"], ["-o", "ssl_wbuf_size=32"], ["-o", "ssl_kernel_tls"],
    ["-o", "no_maxconns_fast"], ["-o", "ext_path={tmp}/extstore:64m"],
    ["-o", "ext_page_size=32"], ["-o", "ext_wbuf_size=8"], ["-o", "ext_threads=2"],
    ["-o", "ext_io_depth=2"], ["-o", "ext_item_size=1024"], ["-o", "ext_item_age=10"],
    ["-o", "ext_low_ttl=10"], ["-o", "ext_recache_rate=100"], ["-o", "ext_compact_under=2"],
    ["-o", "ext_drop_under=2"], ["-o", "ext_max_sleep=1000"], ["-o", "ext_max_frag=0.5"],
    ["-o", "ext_drop_unread"], ["-o", "slab_automove_freeratio=0.02"],
]
# What lockcached always does: no warning.
ALWAYS_SO = [
    ["-o", "maxconns_fast"], ["-o", "modern"], ["-o", "track_sizes"],
    ["-o", "inline_ascii_resp"], ["-o", "no_inline_ascii_resp"], ["-o", "no_drop_privileges"],
    ["-o", "ssl_keyformat=1"], ["-o", "ssl_session_cache"],
]


def stop_all(processes):
    """SIGTERM to every one first, then the waits: each memcached takes a
    second or two to stop, and one after another they took over a minute."""
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait()


def started_with_each(lines, tmp):
    """Starts memcached once per option line, all at once; returns {line:
    its exit status} for those that did not serve."""
    with tempfile.TemporaryFile() as log, contextlib.ExitStack() as stack:
        running = []
        stack.callback(lambda: stop_all([process for _, _, process in running]))
        for line in lines:
            port = lockcached_server.free_port()
            command = lockcached_server.memcached_command(port, fill_in(line, tmp))
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            running.append((line, port, process))
        deadline = time.monotonic() + lockcached_server.READY_DEADLINE_S
        failed = {}
        for line, port, process in running:
            while not lockcached_server.answers_version(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    failed[" ".join(line)] = process.poll()
                    break
                time.sleep(0.05)
        return failed


def fill_in(line, tmp):
    return [option.format(tmp=tmp) for option in line]


class OptionsWithoutEffect(unittest.TestCase):
    def test_memcached_starts_with_each(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.assertEqual(started_with_each(WITHOUT_EFFECT + ALWAYS_SO, tmp), {})

    def assert_starts_with_warnings(self, lines, expected_warnings):
        """Starts lockcached once per option line, several at once (one after
        another they took most of this test's time), then checks each: it
        serves, and logs `expected_warnings` warnings, the first naming the
        option."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            outcomes = list(pool.map(lockcached_outcome, lines))
        for line, (options, served, found, log) in zip(lines, outcomes):
            with self.subTest(line=line):
                self.assertEqual(served, ["STORED", "VALUE k 0 1", "a"])
                self.assertEqual(len(found), expected_warnings, log)
                if expected_warnings:
                    shown = " ".join(options)
                    if shown.startswith("--"):
                        shown = shown.replace("=", " ", 1)
                    self.assertTrue(found[0].startswith(shown + " ignored: "), found)

    def test_lockcached_starts_with_one_warning_each(self):
        self.assert_starts_with_warnings(WITHOUT_EFFECT, 1)

    def test_what_lockcached_always_does_needs_no_warning(self):
        self.assert_starts_with_warnings(ALWAYS_SO, 0)


def lockcached_outcome(line):
    """lockcached started with one option line: (the options, its first three
    reply lines to a set and a get, its warnings, its log)."""
    with tempfile.TemporaryDirectory() as tmp:
        options = fill_in(line, tmp)
        flags = (*lockcached_server.DEFAULT_FLAGS, *options)
        with lockcached_server.lockcached_process(BINARY, flags) as running:
            served = replies(cache_port(running), b"set k 0 0 1\r\na\r\nget k\r\n")[:3]
            return options, served, warnings(running), running.log()


if __name__ == "__main__":
    BINARY = lockcached_server.binary_from_argv()
    sys.exit(lockcached_server.run_tests(sys.argv[1:]))
