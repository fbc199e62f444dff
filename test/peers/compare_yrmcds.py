#!/usr/bin/env python3
"""Differential test of server-side locking: Debian's yrmcds versus lockcached.

usage: compare_yrmcds.py LOCKCACHED_BINARY [YRMCDSD] [NAME_SUBSTRING...]

yrmcds introduced the locking extension (../shared/specs/locking.md), and
docs/locking.md says lockcached does what yrmcds does where the spec is
silent. This starts both servers side by side (yrmcdsd from a copy of
/etc/yrmcds.conf with free ports, everything in a temporary directory) and
runs each scenario below against each: a script of steps on two or three
connections (A, B, C). Text steps compare the complete replies byte for byte;
binary steps compare the opcode and status of every reply (and, for Keys,
the sorted key list), since the message texts of errors differ.

How a reply is known to be complete: a text step is followed by
"version\\r\\n" on the same connection and the reply ends with the VERSION
line (which is then dropped: the version strings differ); a binary step is
followed by a Noop with an opaque of its own. Steps that close a connection
wait for the server's end of stream. A "poll" step repeats "lock KEY" until
the answer is something other than LOCKED, for the server to process another
connection's close.

Normalized: CAS uniques in "gets" replies (<cas>), and the order of the
VALUE lines of "keys" (hash order differs).

Every key is prefixed per scenario, so that scenarios do not see each other's
keys or locks, and nothing uses flush_all: yrmcds's flush_all works at
one-second granularity, so whether it spares an item stored in the same
second depends on timing (and with a locked item, yrmcds forgets the item on
an explicit unlock but not always on a disconnect); lockcached's documented
choice is to keep an item that a flush_all spared (docs/locking.md). For the
same reason no scenario depends on expiry. Also left out, as the brief for
this comparison says: commands yrmcds lacks (gat, gats, the meta commands),
memcached details that are no part of locking where lockcached follows
memcached (keys over 250 bytes, "delete KEY 0", decr's space padding, the
flags extra of a Touch reply), and "keys A B" (yrmcds ignores the second
word, lockcached answers ERROR).

Documented differences (INTENTIONAL_DIFFERENCES): LaGKQ (0x49) for a missing
key. The spec says "LaGQ and LaGKQ will return the response with status
code = 0x0001 (not found)"; yrmcds 1.1.9 answers LaGQ so but is silent for
LaGKQ. lockcached follows the spec (docs/locking.md).
"""

import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/
from lockcached_server import (  # noqa: E402
    _stop_after_error, answers_version, binary_from_argv, free_port, lockcached)

DEADLINE_S = 10      # one step at most
POLL_S = 10          # a poll step at most
READY_DEADLINE_S = 10
SENTINEL = b"version\r\n"
NOOP_OPAQUE = 0xFEEDFACE
# yrmcds 1.1.9 now and then keeps the locks of a connection closed by a TCP
# reset (seen about once in 13 runs of this script): a scenario that differs
# runs again, with fresh keys, up to this many times in all. lockcached's
# replies must be the same on every attempt.
ATTEMPTS = 3

_VERSION_AT_END = re.compile(rb"(?:^|(?<=\r\n))VERSION [^\r\n]*\r\n\Z")
_VALUE_WITH_CAS = re.compile(rb"^(VALUE \S+ \d+ \d+) \d+(?=\r\n)", re.M)


# ---------------------------------------------------------------------------
# yrmcds

def yrmcds_config(template, directory, port, repl_port, counter_port):
    """/etc/yrmcds.conf with our ports, files and a small footprint."""
    settings = {
        "port": str(port),
        "repl_port": str(repl_port),
        "counter.port": str(counter_port),
        "virtual_ip": "127.0.0.1",  # a local address: yrmcds becomes the master and serves
        "temp_dir": f'"{directory}"',
        "log.file": f'"{os.path.join(directory, "yrmcds.log")}"',
        "buckets": "10000",
        "memory_limit": "64M",
        "workers": "4",
        "max_data_size": "1M",
        "heap_data_limit": "256K",
    }
    if os.geteuid() == 0:
        settings["user"] = "root"
        settings["group"] = "root"
    lines = []
    seen = set()
    for line in template.splitlines():
        name = line.split("=", 1)[0].strip() if "=" in line and not line.startswith("#") else None
        if name in ("user", "group") and os.geteuid() != 0:
            continue  # only root can change user
        if name in settings:
            lines.append(f"{name} = {settings[name]}")
            seen.add(name)
        else:
            lines.append(line)
    lines += [f"{name} = {value}" for name, value in settings.items() if name not in seen]
    return "\n".join(lines) + "\n"


@contextmanager
def yrmcds(yrmcdsd):
    """Runs yrmcdsd on free ports; yields the memcached-protocol port."""
    with open("/etc/yrmcds.conf") as handle:
        template = handle.read()
    directory = tempfile.mkdtemp(prefix="compare-yrmcds-")
    try:
        process = None
        for _ in range(3):  # a free port may be taken before yrmcds binds it
            port = free_port()
            ports = {port}
            while len(ports) < 3:
                ports.add(free_port())
            repl_port, counter_port = sorted(ports - {port})
            config = os.path.join(directory, "yrmcds.conf")
            with open(config, "w") as handle:
                handle.write(yrmcds_config(template, directory, port, repl_port, counter_port))
            output = open(os.path.join(directory, "stderr"), "wb")
            process = subprocess.Popen([yrmcdsd, "-f", config], stdin=subprocess.DEVNULL,
                                       stdout=output, stderr=output)
            output.close()
            deadline = time.monotonic() + READY_DEADLINE_S
            while time.monotonic() < deadline and process.poll() is None:
                if answers_version(port):
                    break
                time.sleep(0.05)
            if process.poll() is None and answers_version(port):
                break
            if process.poll() is None:
                process.kill()
            process.wait()
            process = None
        if process is None:
            log = ""
            for name in ("stderr", "yrmcds.log"):
                path = os.path.join(directory, name)
                if os.path.exists(path):
                    with open(path, errors="replace") as handle:
                        log += f"--- {name}\n{handle.read()}"
            raise RuntimeError(f"yrmcdsd did not start and serve:\n{log}")
        try:
            yield port
        finally:
            # The reference's own exit is not under test: on a loaded machine
            # (CI stage 22 once) yrmcds took over 5 s after SIGTERM. Said,
            # not failed.
            _stop_after_error(process, "yrmcds")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------------------
# Binary packets

GET, SET, ADD, REPLACE, DELETE, INCR, DECR = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
NOOP, GETK, APPEND, PREPEND = 0x0a, 0x0c, 0x0e, 0x0f
SETQ, ADDQ, REPLACEQ, DELETEQ, INCRQ, DECRQ, APPENDQ, PREPENDQ = (
    0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x19, 0x1a)
TOUCH = 0x1c
LOCK, LOCKQ, UNLOCK, UNLOCKQ, UNLOCKALL, UNLOCKALLQ = 0x40, 0x41, 0x42, 0x43, 0x44, 0x45
LAG, LAGQ, LAGK, LAGKQ, RAU, RAUQ = 0x46, 0x47, 0x48, 0x49, 0x4a, 0x4b
KEYS = 0x50


def packet(opcode, key=b"", extras=b"", value=b"", cas=0, opaque=0):
    return struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0,
                       len(extras) + len(key) + len(value), opaque, cas) + extras + key + value


def fe(flags=0, exptime=0):
    return struct.pack(">II", flags, exptime)


def arith(delta=1, initial=0, exptime=0xffffffff):
    return struct.pack(">QQI", delta, initial, exptime)


# ---------------------------------------------------------------------------
# Steps

class Text:
    """Text bytes on a connection; the reply is compared byte for byte."""

    def __init__(self, conn, data):
        self.conn, self.data = conn, data

    def describe(self):
        return f"{self.conn}: {self.data!r}"


class Binary:
    """Binary packets on a connection; (opcode, status) of each reply."""

    def __init__(self, conn, *packets):
        self.conn, self.packets = conn, packets

    def describe(self):
        ops = ", ".join(f"0x{p[1]:02x} {p[24 + p[4]:24 + p[4] + struct.unpack('>H', p[2:4])[0]]!r}"
                        for p in self.packets)
        return f"{self.conn}: binary [{ops}]"


class Close:
    """Closes a connection: "close" (FIN), "reset" (RST), or sends quit
    bytes and waits for the server to close."""

    def __init__(self, conn, how, quit_bytes=b""):
        self.conn, self.how, self.quit_bytes = conn, how, quit_bytes

    def describe(self):
        return f"{self.conn}: {self.how} {self.quit_bytes!r}"


class PollLock:
    """Repeats "lock KEY" until the reply is not LOCKED."""

    def __init__(self, conn, key):
        self.conn, self.key = conn, key

    def describe(self):
        return f"{self.conn}: lock {self.key!r} until not LOCKED"


class Session:
    def __init__(self, port):
        self.port = port
        self.sockets = {}
        self.buffers = {}

    def sock(self, name):
        if name not in self.sockets:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=DEADLINE_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sockets[name] = sock
            self.buffers[name] = b""
        return self.sockets[name]

    def close_all(self):
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()

    def _fill(self, name, deadline):
        sock = self.sock(name)
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return False
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise EOFError
        self.buffers[name] += chunk
        return True

    def text(self, name, data):
        self.sock(name).sendall(data + SENTINEL)
        deadline = time.monotonic() + DEADLINE_S
        while not _VERSION_AT_END.search(self.buffers[name]):
            try:
                if not self._fill(name, deadline):
                    return self.buffers.pop(name) + b"<timed out>"
            except EOFError:
                return self.buffers.pop(name) + b"<closed>"
        reply = _VERSION_AT_END.sub(b"", self.buffers[name])
        self.buffers[name] = b""
        return reply

    def read_packet(self, name, deadline):
        while len(self.buffers[name]) < 24 or len(self.buffers[name]) < 24 + struct.unpack(
                ">I", self.buffers[name][8:12])[0]:
            if not self._fill(name, deadline):
                return None
        header = self.buffers[name][:24]
        (_, opcode, key_length, extras_length, _, status, body_length, opaque,
         _) = struct.unpack(">BBHBBHIIQ", header)
        body = self.buffers[name][24:24 + body_length]
        self.buffers[name] = self.buffers[name][24 + body_length:]
        return opcode, status, opaque, body[extras_length:extras_length + key_length]

    def binary(self, name, packets):
        self.sock(name).sendall(b"".join(packets) + packet(NOOP, opaque=NOOP_OPAQUE))
        deadline = time.monotonic() + DEADLINE_S
        replies, keys = [], []
        while True:
            try:
                reply = self.read_packet(name, deadline)
            except EOFError:
                replies.append("<closed>")
                break
            if reply is None:
                replies.append("<timed out>")
                break
            opcode, status, opaque, key = reply
            if opcode == NOOP and opaque == NOOP_OPAQUE:
                break
            if opcode == KEYS and status == 0 and key:
                keys.append(key)
                continue
            replies.append(f"0x{opcode:02x}:0x{status:02x}")
        if keys:
            replies.append("keys " + b" ".join(sorted(keys)).decode(errors="replace"))
        return " ".join(replies)

    def close(self, name, how, quit_bytes):
        sock = self.sock(name)
        if how == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            result = b"<reset>"
        elif how == "close":
            sock.close()
            result = b"<closed>"
        else:
            sock.sendall(quit_bytes)
            deadline = time.monotonic() + DEADLINE_S
            try:
                while self._fill(name, deadline):
                    pass
                result = self.buffers[name] + b"<still open>"
            except EOFError:
                result = self.buffers[name] + b"<closed by server>"
            sock.close()
        del self.sockets[name]
        del self.buffers[name]
        return result

    def poll_lock(self, name, key):
        deadline = time.monotonic() + POLL_S
        while True:
            reply = self.text(name, b"lock " + key + b"\r\n")
            if reply != b"LOCKED\r\n" or time.monotonic() > deadline:
                return reply
            time.sleep(0.02)

    def run(self, step):
        if isinstance(step, Text):
            return normalize(self.text(step.conn, step.data))
        if isinstance(step, Binary):
            return self.binary(step.conn, step.packets).encode()
        if isinstance(step, Close):
            return self.close(step.conn, step.how, step.quit_bytes)
        if isinstance(step, PollLock):
            return self.poll_lock(step.conn, step.key)
        raise TypeError(step)


def normalize(reply):
    reply = _VALUE_WITH_CAS.sub(rb"\1 <cas>", reply)
    lines = reply.split(b"\r\n")
    # A keys listing: "VALUE key" lines (two words), END.
    if len(lines) > 2 and lines[-2:] == [b"END", b""] and all(
            line.startswith(b"VALUE ") and line.count(b" ") == 1 for line in lines[:-2]):
        reply = b"\r\n".join(sorted(lines[:-2]) + [b"END", b""])
    return reply


# ---------------------------------------------------------------------------
# Scenarios: functions of the key prefix p (bytes) returning the steps.

def set_(conn, p, key, value=b"v", flags=0):
    return Text(conn, b"set %s%s %d 0 %d\r\n%s\r\n" % (p, key, flags, len(value), value))


def text_lock_replies(p):
    return [
        set_("A", p, b"k"),
        Text("A", b"lock %sk\r\n" % p),
        Text("A", b"lock %sk\r\n" % p),   # the holder again
        Text("B", b"lock %sk\r\n" % p),
        Text("A", b"lock %smissing\r\n" % p),
        Text("B", b"unlock %sk\r\n" % p),
        Text("B", b"unlock %smissing\r\n" % p),
        Text("A", b"unlock %sk\r\n" % p),
        Text("A", b"unlock %sk\r\n" % p),
        Text("B", b"lock %sk\r\n" % p),
        Text("A", b"lock %sk\r\n" % p),
        Text("C", b"lock %sk\r\n" % p),
        Text("B", b"unlock %sk\r\n" % p),
        Text("C", b"lock %sk\r\n" % p),
    ]


def text_unlock_all(p):
    return [
        set_("A", p, b"k1"), set_("A", p, b"k2"), set_("A", p, b"k3"),
        Text("A", b"lock %sk1\r\nlock %sk2\r\n" % (p, p)),
        Text("C", b"lock %sk3\r\n" % p),
        Text("B", b"lock %sk1\r\n" % p),
        Text("A", b"unlock_all\r\n"),
        Text("B", b"lock %sk1\r\nlock %sk2\r\nlock %sk3\r\n" % (p, p, p)),
        Text("A", b"unlock_all\r\n"),           # holding nothing
        Text("A", b"lock %sk1\r\n" % p),
        Text("B", b"unlock_all\r\n"),
        Text("A", b"lock %sk1\r\nlock %sk2\r\n" % (p, p)),
        Text("C", b"unlock %sk3\r\nunlock %sk3\r\n" % (p, p)),
    ]


def text_malformed(p):
    return [
        set_("A", p, b"k"),
        Text("A", b"lock\r\n"),
        Text("A", b"lock %sk %sk\r\n" % (p, p)),
        Text("A", b"lock %sk noreply\r\n" % p),
        Text("A", b"unlock\r\n"),
        Text("A", b"unlock %sk %sk\r\n" % (p, p)),
        Text("A", b"unlock_all extra\r\n"),
        Text("B", b"lock %sk\r\n" % p),   # none of the above locked it
    ]


def text_modifications_by_others(p):
    k = p + b"k"
    others = []
    for conn in ("B", "C"):
        others += [
            Text(conn, b"set %s 0 0 1\r\nx\r\n" % k),
            Text(conn, b"add %s 0 0 1\r\nx\r\n" % k),
            Text(conn, b"replace %s 0 0 1\r\nx\r\n" % k),
            Text(conn, b"append %s 0 0 1\r\nx\r\n" % k),
            Text(conn, b"prepend %s 0 0 1\r\nx\r\n" % k),
            Text(conn, b"cas %s 0 0 1 1\r\nx\r\n" % k),
            Text(conn, b"delete %s\r\n" % k),
            Text(conn, b"incr %s 1\r\n" % k),
            Text(conn, b"decr %s 1\r\n" % k),
            Text(conn, b"set %s 0 0 1 noreply\r\nx\r\nincr %s 1 noreply\r\n"
                       b"delete %s noreply\r\nget %s\r\n" % (k, k, k, k)),
        ]
    return [
        set_("A", p, b"k", b"10", 3),
        Text("A", b"lock %s\r\n" % k),
        *others,
        Text("B", b"get %s\r\n" % k),
        Text("A", b"unlock %s\r\n" % k),
        Text("B", b"incr %s 5\r\n" % k),
        Text("C", b"append %s 0 0 1\r\n0\r\n" % k),
        Text("B", b"get %s\r\n" % k),
        Text("C", b"delete %s\r\n" % k),
    ]


def text_reads_by_others(p):
    k = p + b"k"
    return [
        set_("A", p, b"k", b"value", 5),
        set_("A", p, b"other", b"o"),
        Text("A", b"lock %s\r\n" % k),
        Text("B", b"get %s\r\n" % k),
        Text("B", b"gets %s\r\n" % k),
        Text("B", b"get %s %sother %smissing\r\n" % (k, p, p)),
        Text("B", b"touch %s 0\r\n" % k),
        Text("B", b"set %s 0 0 1\r\nx\r\n" % k),
        Text("A", b"get %s\r\n" % k),
    ]


def text_holder_modifies(p):
    k = p + b"n"
    return [
        set_("A", p, b"n", b"10"),
        Text("A", b"lock %s\r\n" % k),
        Text("A", b"set %s 0 0 2\r\n20\r\n" % k),
        Text("B", b"set %s 0 0 1\r\nx\r\n" % k),     # the lock survived the holder's set
        Text("A", b"incr %s 5\r\n" % k),
        Text("B", b"incr %s 5\r\n" % k),
        Text("A", b"append %s 0 0 1\r\n0\r\n" % k),
        Text("A", b"prepend %s 0 0 1\r\n1\r\n" % k),
        Text("A", b"add %s 0 0 1\r\nx\r\n" % k),
        Text("A", b"cas %s 0 0 1 1\r\nx\r\n" % k),
        Text("B", b"get %s\r\n" % k),
        Text("A", b"replace %s 0 0 3\r\nabc\r\n" % k),
        Text("B", b"get %s\r\n" % k),
        Text("B", b"lock %s\r\n" % k),
        Text("A", b"delete %s\r\n" % k),             # ends the lock
        Text("B", b"get %s\r\n" % k),
        Text("B", b"lock %s\r\n" % k),
        Text("A", b"unlock %s\r\n" % k),
        Text("B", b"set %s 0 0 1\r\nb\r\n" % k),
        Text("B", b"lock %s\r\n" % k),
        Text("A", b"set %s 0 0 1\r\na\r\n" % k),
        Text("A", b"get %s\r\n" % k),
    ]


def release_scenario(how, binary_holder=False):
    def steps(p):
        holder = []
        if binary_holder:
            holder = [Binary("A", packet(LOCK, p + b"k1"), packet(LOCK, p + b"k2"),
                             packet(LAG, p + b"k3"))]
        else:
            holder = [Text("A", b"lock %sk1\r\nlock %sk2\r\nlock %sk3\r\n" % (p, p, p))]
        quit_bytes = packet(0x07) if binary_holder else b"quit\r\n"
        return [
            set_("B", p, b"k1"), set_("B", p, b"k2"), set_("B", p, b"k3"), set_("B", p, b"c"),
            Text("C", b"lock %sc\r\n" % p),
            *holder,
            Text("B", b"lock %sk1\r\nset %sk2 0 0 1\r\nx\r\n" % (p, p)),
            Close("A", how, quit_bytes if how == "quit" else b""),
            PollLock("B", p + b"k1"),
            Text("C", b"lock %sk2\r\n" % p),
            Text("C", b"set %sk3 0 0 1\r\nz\r\n" % p),
            Text("B", b"lock %sk3\r\nlock %sc\r\n" % (p, p)),
        ]
    return steps


def text_keys(p):
    return [
        set_("A", p, b"a"), set_("A", p, b"b"), set_("A", p, b"c"), set_("A", p, b"ab"),
        Text("A", b"lock %sb\r\n" % p),
        Text("B", b"keys %s\r\n" % p),
        Text("B", b"keys %sa\r\n" % p),
        Text("B", b"delete %sa\r\n" % p),
        Text("B", b"keys %s\r\n" % p),
        Text("B", b"keys %szzz\r\n" % p),
    ]


def binary_lock_statuses(p):
    k, k2, missing = p + b"k", p + b"k2", p + b"missing"
    return [
        Binary("A", packet(SET, k, fe(), b"v"), packet(SET, k2, fe(), b"v")),
        Binary("A", packet(LOCK, k)),
        Binary("A", packet(LOCK, k)),
        Binary("B", packet(LOCK, k)),
        Binary("A", packet(LOCK, missing), packet(LOCKQ, missing)),
        Binary("B", packet(UNLOCK, k), packet(UNLOCK, missing), packet(UNLOCK, k2)),
        Binary("B", packet(LOCKQ, k), packet(UNLOCKQ, k), packet(UNLOCKQ, missing)),
        Binary("A", packet(UNLOCKQ, k)),
        Binary("A", packet(UNLOCK, k)),
        Binary("A", packet(LOCKQ, k), packet(LOCKQ, k2)),
        Binary("B", packet(LOCK, k2)),
        Binary("A", packet(UNLOCKALL)),
        Binary("B", packet(LOCK, k), packet(LOCK, k2)),
        Binary("A", packet(UNLOCKALL), packet(LOCK, k)),
        Binary("B", packet(UNLOCKALLQ)),
        Binary("A", packet(LOCK, k), packet(LOCK, k2)),
    ]


def binary_modifications_by_others(p):
    k = p + b"k"
    refused = [
        packet(SET, k, fe(), b"x"), packet(ADD, k, fe(), b"x"), packet(REPLACE, k, fe(), b"x"),
        packet(APPEND, k, b"", b"x"), packet(PREPEND, k, b"", b"x"), packet(DELETE, k),
        packet(INCR, k, arith()), packet(DECR, k, arith()),
        packet(SETQ, k, fe(), b"x"), packet(ADDQ, k, fe(), b"x"),
        packet(REPLACEQ, k, fe(), b"x"), packet(APPENDQ, k, b"", b"x"),
        packet(PREPENDQ, k, b"", b"x"), packet(DELETEQ, k), packet(INCRQ, k, arith()),
        packet(DECRQ, k, arith()),
    ]
    return [
        Binary("A", packet(SET, k, fe(), b"10")),
        Binary("A", packet(LOCK, k)),
        Binary("B", *refused),
        Binary("B", packet(GET, k), packet(GETK, k), packet(TOUCH, k, struct.pack(">I", 0))),
        Text("C", b"set %s 0 0 1\r\nx\r\nget %s\r\n" % (k, k)),
        Binary("A", packet(SET, k, fe(), b"20"), packet(INCR, k, arith())),
        Binary("B", packet(SET, k, fe(), b"x")),
        Binary("A", packet(DELETE, k)),
        Binary("B", packet(SET, k, fe(), b"x"), packet(LOCK, k)),
        Text("C", b"lock %s\r\nset %s 0 0 1\r\ny\r\n" % (k, k)),
    ]


def binary_lock_and_get(p):
    k, k2, k3, missing = p + b"k", p + b"k2", p + b"k3", p + b"missing"
    return [
        Binary("A", packet(SET, k, fe(5), b"v"), packet(SET, k2, fe(), b"v"),
               packet(SET, k3, fe(), b"v")),
        Binary("A", packet(LAG, k)),
        Binary("A", packet(LAG, k)),
        Binary("B", packet(LAG, k), packet(LAGQ, k), packet(LAGK, k), packet(LAGKQ, k)),
        Binary("B", packet(SET, k, fe(), b"x")),
        Binary("A", packet(LAGK, k2), packet(LAGQ, k3)),
        Binary("B", packet(LOCK, k2), packet(LOCK, k3)),
        Binary("A", packet(LAG, missing), packet(LAGQ, missing), packet(LAGK, missing)),
        Binary("A", packet(LAG, k, struct.pack(">I", 3600))),
        Binary("A", packet(UNLOCKALL)),
        Binary("B", packet(LAGKQ, k, struct.pack(">I", 0)), packet(GET, k)),
    ]


def binary_lagkq_miss(p):
    return [Binary("A", packet(LAGKQ, p + b"missing"))]


def binary_replace_and_unlock(p):
    k, q, missing = p + b"k", p + b"q", p + b"missing"
    return [
        Binary("A", packet(SET, k, fe(), b"v1"), packet(SET, q, fe(), b"q1")),
        Binary("A", packet(RAU, k, fe(), b"x"), packet(RAU, missing, fe(), b"x")),
        Binary("A", packet(LOCK, k)),
        Binary("B", packet(RAU, k, fe(), b"x"), packet(RAUQ, k, fe(), b"x")),
        # yrmcds numbers the versions of each object from 1, lockcached has one
        # counter for all: a CAS that neither can have.
        Binary("A", packet(RAU, k, fe(), b"x", cas=0x7fffffffffffffff)),
        Binary("B", packet(LOCK, k)),
        Binary("A", packet(RAU, k, fe(9), b"v2")),
        Binary("B", packet(GET, k), packet(LOCK, k)),
        Binary("A", packet(RAU, k, fe(), b"x"), packet(UNLOCK, k)),
        Binary("A", packet(LOCK, q), packet(RAUQ, q, fe(), b"q2")),
        Binary("B", packet(LOCK, q)),
        Binary("A", packet(RAUQ, q, fe(), b"x"), packet(RAUQ, missing, fe(), b"x")),
        Text("C", b"get %s\r\n" % q),
    ]


def binary_oversized_replace_and_unlock(p):
    # Over both servers' item size limit (1 MiB here): refused, and like a
    # Replace, it leaves the object, the lock, and unlocked objects alone.
    k, free = p + b"k", p + b"free"
    too_large = b"x" * (1536 * 1024)
    return [
        Binary("A", packet(SET, k, fe(), b"old"), packet(SET, free, fe(), b"v")),
        Binary("A", packet(LOCK, k)),
        Binary("A", packet(RAU, k, fe(), too_large)),
        Binary("B", packet(GET, k), packet(LOCK, k), packet(SET, k, fe(), b"x")),
        Binary("B", packet(RAU, free, fe(), too_large), packet(GET, free)),
        Binary("A", packet(RAU, k, fe(), b"new")),
        Binary("B", packet(GET, k), packet(LOCK, k)),
    ]


def text_holder_oversized_set(p):
    # The holder's set over both servers' item size limit (1 MiB here).
    k = p + b"k"
    too_large = b"x" * (1536 * 1024)
    return [
        set_("A", p, b"k", b"old"),
        Text("A", b"lock %s\r\n" % k),
        Text("A", b"set %s 0 0 %d\r\n%s\r\n" % (k, len(too_large), too_large)),
        Text("B", b"get %s\r\n" % k),
        Text("B", b"lock %s\r\n" % k),
        Text("B", b"set %s 0 0 1\r\nx\r\n" % k),
        Text("A", b"unlock %s\r\n" % k),
        Text("B", b"get %s\r\n" % k),
    ]


def binary_holder_oversized_set(p):
    k = p + b"k"
    too_large = b"x" * (1536 * 1024)
    return [
        Binary("A", packet(SET, k, fe(), b"old")),
        Binary("A", packet(LOCK, k)),
        Binary("A", packet(SET, k, fe(), too_large)),
        Binary("B", packet(GET, k), packet(LOCK, k), packet(SET, k, fe(), b"x")),
        Binary("A", packet(UNLOCK, k)),
        Binary("B", packet(GET, k)),
    ]


def binary_keys(p):
    return [
        Binary("A", packet(SET, p + b"a", fe(), b"v"), packet(SET, p + b"b", fe(), b"v"),
               packet(SET, p + b"c", fe(), b"v")),
        Binary("A", packet(LOCK, p + b"b")),
        Binary("B", packet(KEYS, p)),
        Binary("B", packet(KEYS, p + b"a")),
        Binary("B", packet(KEYS, p + b"zzz")),
    ]


def mixed_protocols(p):
    k = p + b"k"
    return [
        set_("A", p, b"k"),
        Text("A", b"lock %s\r\n" % k),
        Binary("B", packet(LOCK, k), packet(SET, k, fe(), b"x"), packet(UNLOCK, k)),
        Text("A", b"unlock %s\r\n" % k),
        Binary("B", packet(LOCK, k)),
        Text("A", b"lock %s\r\nset %s 0 0 1\r\nx\r\nunlock %s\r\n" % (k, k, k)),
        Binary("B", packet(UNLOCK, k)),
        Text("A", b"lock %s\r\n" % k),
    ]


SCENARIOS = [
    ("text lock and unlock replies", text_lock_replies),
    ("text unlock_all", text_unlock_all),
    ("text malformed lock commands", text_malformed),
    ("text modifications by others", text_modifications_by_others),
    ("text reads by others", text_reads_by_others),
    ("text holder modifies", text_holder_modifies),
    ("text release on close", release_scenario("close")),
    ("text release on reset", release_scenario("reset")),
    ("text release on quit", release_scenario("quit")),
    ("text keys", text_keys),
    ("binary lock statuses", binary_lock_statuses),
    ("binary modifications by others", binary_modifications_by_others),
    ("binary lock and get", binary_lock_and_get),
    ("binary LaGKQ miss", binary_lagkq_miss),
    ("binary replace and unlock", binary_replace_and_unlock),
    ("binary oversized replace and unlock", binary_oversized_replace_and_unlock),
    ("binary keys", binary_keys),
    ("text holder's oversized set", text_holder_oversized_set),
    ("binary holder's oversized set", binary_holder_oversized_set),
    ("binary release on close", release_scenario("close", binary_holder=True)),
    ("binary release on reset", release_scenario("reset", binary_holder=True)),
    ("binary release on quit", release_scenario("quit", binary_holder=True)),
    ("text and binary locks are the same", mixed_protocols),
]

# Scenario name -> {step index: (yrmcds's reply, lockcached's reply)}.
INTENTIONAL_DIFFERENCES = {
    # The spec: LaGKQ reports a miss with 0x0001. yrmcds is silent.
    "binary LaGKQ miss": {0: (b"", b"0x49:0x01")},
    # A set too large: memcached's reply (a memcached command), where
    # yrmcds answers ERROR. What follows (the item and its lock stay) agrees.
    "text holder's oversized set": {2: (b"ERROR\r\n",
                                        b"SERVER_ERROR object too large for cache\r\n")},
}


def differences(name, steps, expected, actual):
    """Lines describing where yrmcds's and lockcached's replies differ,
    leaving out the documented differences (which must hold instead)."""
    allowed = INTENTIONAL_DIFFERENCES.get(name, {})
    problems = []
    for i, step in enumerate(steps):
        if i in allowed:
            want_yrmcds, want_lockcached = allowed[i]
            if expected[i] != want_yrmcds:
                problems.append(f"  step {i} {step.describe()}: yrmcds no longer answers"
                                f" {want_yrmcds!r} but {expected[i]!r}: recheck the"
                                " documented difference")
            if actual[i] != want_lockcached:
                problems.append(f"  step {i} {step.describe()}: lockcached answers"
                                f" {actual[i]!r}, documented {want_lockcached!r}")
        elif expected[i] != actual[i]:
            problems.append(f"  step {i} {step.describe()}\n"
                            f"    yrmcds:     {expected[i]!r}\n"
                            f"    lockcached: {actual[i]!r}")
    return problems


def run_scenario(port, steps, prefix):
    """The replies, with the key prefix shown as "@"."""
    session = Session(port)
    try:
        return [session.run(step).replace(prefix, b"@") for step in steps]
    finally:
        session.close_all()


def main():
    lockcached_binary = binary_from_argv()
    arguments = sys.argv[1:]
    yrmcdsd = shutil.which("yrmcdsd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if arguments and os.path.sep in arguments[0]:
        yrmcdsd = arguments.pop(0)
    if not yrmcdsd:
        sys.exit("yrmcdsd not found: apt-get install yrmcds")
    wanted = arguments
    scenarios = [(n, s) for n, s in SCENARIOS if not wanted or any(w in n for w in wanted)]
    failed = []
    with yrmcds(yrmcdsd) as reference_port, lockcached(lockcached_binary) as port:
        for index, (name, make_steps) in enumerate(scenarios):
            problems, attempts = [], []
            for attempt in range(ATTEMPTS):
                prefix = b"s%02d.%d:" % (index, attempt)
                steps = make_steps(prefix)
                expected = run_scenario(reference_port, steps, prefix)
                actual = run_scenario(port, steps, prefix)
                attempts.append(actual)
                problems = differences(name, steps, expected, actual)
                if not problems:
                    break
                # Only yrmcds may be given another chance; lockcached must
                # answer the same every time.
                if attempt > 0 and actual != attempts[0]:
                    problems.append("  lockcached answered differently on another attempt:\n"
                                    f"    first: {attempts[0]!r}\n    now:   {actual!r}")
                    break
            if problems and name.endswith("release on reset"):
                # yrmcds's bug above, on every attempt (seen when the machine
                # is loaded): a reset must then behave as a close does, so
                # lockcached's replies are held to yrmcds's after a close.
                close_name = name.replace("reset", "close")
                close_steps = dict(scenarios).get(close_name) or dict(SCENARIOS)[close_name]
                prefix = b"s%02d.%d:" % (index, ATTEMPTS)
                closed = run_scenario(reference_port, close_steps(prefix), prefix)
                # The disconnect step itself reports how it hung up.
                as_closed = [r.replace(b"<reset>", b"<closed>") for r in attempts[-1]]
                if closed == as_closed:
                    print(f"agrees:  {name} ({len(steps)} steps) with yrmcds's replies after a"
                          " close: yrmcds kept the reset connection's locks on every attempt")
                    continue
                problems.append(f"  and lockcached's replies differ from yrmcds's after a close:"
                                f"\n    yrmcds (close): {closed!r}\n    lockcached:     "
                                f"{attempts[-1]!r}")
            if problems:
                failed.append(name)
                print(f"DIFFERS: {name}")
                print("\n".join(problems))
            elif len(attempts) > 1:
                print(f"agrees:  {name} ({len(steps)} steps) on attempt {len(attempts)}:"
                      " yrmcds answered otherwise before")
            else:
                print(f"agrees:  {name} ({len(steps)} steps)")
    print(f"\n{len(scenarios) - len(failed)} of {len(scenarios)} scenarios agree with yrmcds")
    if failed:
        print(f"{len(failed)} differ: " + ", ".join(failed))
        return 1
    return 0 if scenarios else 1


if __name__ == "__main__":
    sys.exit(main())
