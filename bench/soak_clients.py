"""Wire clients and the self-verifying value format of bench/soak.

Standard library only. Every client raises ProtocolError on a reply that the
protocol does not allow for the request (a wrong status line, a bad frame, a
key that was not asked for); the soak counts those. A socket error or a
timeout propagates as OSError / socket.timeout.
"""

import random
import socket
import struct
import zlib


class ProtocolError(Exception):
    """A reply the protocol does not allow for the request that was sent."""


class Corruption(Exception):
    """A value that does not verify: the server returned bytes nobody wrote."""


# ---------------------------------------------------------------------------
# Values. A value is one or more records, each "{key|tag|payload|crc}", the
# crc32 (8 hex digits) over "key|tag|payload". append and prepend add whole
# records, so whatever a value went through, it must split into records
# that each verify and each name the key they were read under. Any lost,
# doubled, shifted or foreign byte breaks that.

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_POOL = bytes(random.Random(7).choices(_ALPHABET, k=1 << 17))
_POOL = _POOL * 2  # a slice of up to 128 KiB at any offset


def make_record(key, tag, size, rng):
    """A record whose payload is `size` pseudo-random alphanumeric bytes."""
    start = rng.randrange(len(_POOL) // 2)
    payload = _POOL[start:start + size]
    body = key + b"|" + tag + b"|" + payload
    return b"{" + body + b"|" + b"%08x" % zlib.crc32(body) + b"}"


def verify_value(key, value):
    """Raises Corruption unless `value` is whole records written for `key`."""
    if not value:
        raise Corruption(f"{key!r}: empty value")
    pos = 0
    while pos < len(value):
        if value[pos:pos + 1] != b"{":
            raise Corruption(f"{key!r}: no record at offset {pos} of {len(value)}")
        end = value.find(b"}", pos)
        if end < 0:
            raise Corruption(f"{key!r}: record at offset {pos} is cut off")
        record = value[pos + 1:end]
        body, sep, crc = record.rpartition(b"|")
        if not sep or len(crc) != 8 or b"%08x" % zlib.crc32(body) != crc:
            raise Corruption(f"{key!r}: checksum mismatch at offset {pos}: {_excerpt(record)}")
        if body.split(b"|", 1)[0] != key:
            raise Corruption(f"{key!r}: record at offset {pos} belongs to another key: "
                             f"{_excerpt(record)}")
        pos = end + 1


def verify_counter(key, value):
    # memcached's quirk, kept: a decr that shortens the number pads with spaces.
    value = value.rstrip(b" ")
    if not value.isdigit() or len(value) > 20 or int(value) >= 1 << 64:
        raise Corruption(f"{key!r}: counter is not a number: {_excerpt(value)}")


def flags_for(key):
    """Every writer of a key uses the same client flags: a check for free."""
    return zlib.crc32(key) & 0xFFFFFFFF


def _excerpt(data, limit=80):
    return repr(data[:limit]) + ("..." if len(data) > limit else "")


# ---------------------------------------------------------------------------
# Connections.

class Conn:
    """A socket with a read buffer."""

    def __init__(self, port, timeout):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(262144)
        if not chunk:
            raise ConnectionResetError("server closed the connection")
        self.buf += chunk

    def read_line(self):
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[:end + 2]
                return line
            if len(self.buf) > 4096:
                raise ProtocolError(f"reply line without CRLF: {_excerpt(bytes(self.buf))}")
            self._fill()

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def close(self, reset=False):
        if reset:  # RST instead of FIN: the server sees ECONNRESET
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


_TEXT_SERVER_ERRORS = {
    b"SERVER_ERROR out of memory storing object": "NO_MEMORY",
    b"SERVER_ERROR object too large for cache": "TOO_LARGE",
}


def expect(line, allowed, what):
    if line not in allowed:
        raise ProtocolError(f"{what}: unexpected reply {_excerpt(line)}")
    return line


# ---------------------------------------------------------------------------
# Text protocol (classic and meta).

class TextClient(Conn):
    kind = "text"

    def get_many(self, keys, with_cas=False):
        """{key: (flags, value, cas)} for the hits."""
        self.send((b"gets " if with_cas else b"get ") + b" ".join(keys) + b"\r\n")
        found = {}
        wanted = set(keys)
        while True:
            line = self.read_line()
            if line == b"END":
                return found
            parts = line.split(b" ")
            if parts[0] != b"VALUE" or len(parts) != (5 if with_cas else 4):
                raise ProtocolError(f"get: unexpected reply {_excerpt(line)}")
            key, flags, length = parts[1], int(parts[2]), int(parts[3])
            if key not in wanted or key in found:
                raise ProtocolError(f"get: key {key!r} not asked for, or twice")
            value = self.read_exact(length + 2)
            if value[-2:] != b"\r\n":
                raise ProtocolError(f"get: data block of {key!r} not followed by CRLF")
            found[key] = (flags, value[:-2], int(parts[4]) if with_cas else None)

    def get(self, key):
        return self.get_many([key]).get(key)

    def gets(self, key):
        return self.get_many([key], with_cas=True).get(key)

    def store(self, command, key, value, exptime=0, cas=None):
        """STORED, NOT_STORED, EXISTS, NOT_FOUND, LOCKED, NO_MEMORY or TOO_LARGE."""
        line = b"%s %s %d %d %d" % (command.encode(), key, flags_for(key), exptime, len(value))
        if cas is not None:
            line += b" %d" % cas
        self.send(line + b"\r\n" + value + b"\r\n")
        return self.store_reply(command)

    def concat(self, command, key, value):
        """append / prepend: STORED, NOT_STORED, LOCKED, NO_MEMORY or TOO_LARGE."""
        self.send(b"%s %s 0 0 %d\r\n%s\r\n" % (command.encode(), key, len(value), value))
        return self.store_reply(command)

    def store_reply(self, command):
        reply = self.read_line()
        if reply in _TEXT_SERVER_ERRORS:
            return _TEXT_SERVER_ERRORS[reply]
        return expect(reply, (b"STORED", b"NOT_STORED", b"EXISTS", b"NOT_FOUND", b"LOCKED"),
                      command).decode()

    def delete(self, key):
        """DELETED, NOT_FOUND or LOCKED."""
        self.send(b"delete " + key + b"\r\n")
        return expect(self.read_line(), (b"DELETED", b"NOT_FOUND", b"LOCKED"), "delete").decode()

    def arith(self, command, key, delta):
        """(STORED, new value), or (NOT_FOUND | LOCKED | NON_NUMERIC, None)."""
        self.send(b"%s %s %d\r\n" % (command.encode(), key, delta))
        reply = self.read_line()
        if reply.isdigit() and len(reply) <= 20:
            return "STORED", int(reply)
        if reply in (b"NOT_FOUND", b"LOCKED"):
            return reply.decode(), None
        if reply == b"CLIENT_ERROR cannot increment or decrement non-numeric value":
            return "NON_NUMERIC", None
        raise ProtocolError(f"{command}: unexpected reply {_excerpt(reply)}")

    def touch(self, key, exptime):
        """TOUCHED or NOT_FOUND."""
        self.send(b"touch %s %d\r\n" % (key, exptime))
        return expect(self.read_line(), (b"TOUCHED", b"NOT_FOUND"), "touch").decode()

    def lock(self, key):
        """OK, LOCKED or NOT_FOUND."""
        self.send(b"lock " + key + b"\r\n")
        return expect(self.read_line(), (b"OK", b"LOCKED", b"NOT_FOUND"), "lock").decode()

    def unlock(self, key):
        """OK or NOT_LOCKED."""
        self.send(b"unlock " + key + b"\r\n")
        reply = expect(self.read_line(),
                       (b"OK", b"CLIENT_ERROR object is not locked or not found"), "unlock")
        return "OK" if reply == b"OK" else "NOT_LOCKED"

    def quit(self):
        self.send(b"quit\r\n")

    def unlock_all(self):
        self.send(b"unlock_all\r\n")
        expect(self.read_line(), (b"OK",), "unlock_all")

    def meta_get(self, key):
        """(flags, value) or None."""
        self.send(b"mg " + key + b" v f k\r\n")
        line = self.read_line()
        if line in (b"EN", b"EN k" + key):  # memcached echoes k on a miss too
            return None
        parts = line.split(b" ")
        if parts[0] != b"VA" or len(parts) != 4:
            raise ProtocolError(f"mg: unexpected reply {_excerpt(line)}")
        tokens = {p[:1]: p[1:] for p in parts[2:]}
        if tokens.get(b"k") != key or b"f" not in tokens:
            raise ProtocolError(f"mg: reply tokens {_excerpt(line)} for {key!r}")
        value = self.read_exact(int(parts[1]) + 2)
        if value[-2:] != b"\r\n":
            raise ProtocolError(f"mg: data block of {key!r} not followed by CRLF")
        return int(tokens[b"f"]), value[:-2]

    def meta_set(self, key, value):
        """STORED, LOCKED (EX: someone else's lock), NOT_STORED, NO_MEMORY or TOO_LARGE."""
        self.send(b"ms %s %d F%d\r\n%s\r\n" % (key, len(value), flags_for(key), value))
        reply = self.read_line()
        if reply in _TEXT_SERVER_ERRORS:
            return _TEXT_SERVER_ERRORS[reply]
        meaning = {b"HD": "STORED", b"EX": "LOCKED", b"NS": "NOT_STORED"}.get(reply)
        if meaning is None:
            raise ProtocolError(f"ms: unexpected reply {_excerpt(reply)}")
        return meaning

    def stats(self):
        self.send(b"stats\r\n")
        result = {}
        while True:
            line = self.read_line()
            if line == b"END":
                return result
            parts = line.split(b" ", 2)
            if parts[0] != b"STAT" or len(parts) != 3:
                raise ProtocolError(f"stats: unexpected reply {_excerpt(line)}")
            result[parts[1].decode()] = parts[2].decode()


# ---------------------------------------------------------------------------
# Binary protocol.

GET, SET, ADD, REPLACE, DELETE, INCR, DECR, QUIT = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
NOOP, GETK, GETKQ, APPEND, PREPEND, TOUCH = 0x0A, 0x0C, 0x0D, 0x0E, 0x0F, 0x1C
LOCK, UNLOCK, UNLOCK_ALL, LAG, RAU = 0x40, 0x42, 0x44, 0x46, 0x4A

OK, NOT_FOUND, EXISTS, TOO_LARGE, NOT_STORED, NON_NUMERIC = 0x00, 0x01, 0x02, 0x03, 0x05, 0x06
LOCKED, NOT_LOCKED, OUT_OF_MEMORY = 0x10, 0x11, 0x82


def bin_request(opcode, key=b"", extras=b"", value=b"", cas=0, opaque=0):
    body = len(extras) + len(key) + len(value)
    return struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0, body, opaque,
                       cas) + extras + key + value


class BinaryClient(Conn):
    kind = "binary"

    def response(self, opcode, opaque=0):
        """(status, extras, key, value, cas) of the next response, checked."""
        header = self.read_exact(24)
        (magic, op, key_len, ext_len, dtype, status, body, r_opaque,
         cas) = struct.unpack(">BBHBBHIIQ", header)
        if magic != 0x81 or dtype != 0 or ext_len + key_len > body:
            raise ProtocolError(f"binary: bad response header {header.hex()}")
        if op != opcode or r_opaque != opaque:
            raise ProtocolError(f"binary: response to opcode {op:#x} opaque {r_opaque}, "
                                f"expected {opcode:#x} opaque {opaque}")
        payload = self.read_exact(body)
        extras = payload[:ext_len]
        return status, extras, payload[ext_len:ext_len + key_len], payload[ext_len + key_len:], cas

    def call(self, opcode, key=b"", extras=b"", value=b"", cas=0, allowed=(OK,)):
        self.send(bin_request(opcode, key, extras, value, cas))
        status, r_extras, r_key, r_value, r_cas = self.response(opcode)
        if status not in allowed:
            raise ProtocolError(f"binary {opcode:#x} {key!r}: status {status:#x} "
                                f"({_excerpt(r_value)})")
        return status, r_extras, r_value, r_cas

    def get(self, key):
        """(flags, value, cas) or None."""
        status, extras, value, cas = self.call(GET, key, allowed=(OK, NOT_FOUND))
        if status == NOT_FOUND:
            return None
        if len(extras) != 4:
            raise ProtocolError(f"binary get {key!r}: {len(extras)} bytes of extras")
        return struct.unpack(">I", extras)[0], value, cas

    gets = get

    def get_many(self, keys):
        """GetKQ for each key, then a Noop: {key: (flags, value, cas)}."""
        request = b"".join(bin_request(GETKQ, key, opaque=i + 1) for i, key in enumerate(keys))
        self.send(request + bin_request(NOOP, opaque=0xFFFF))
        found = {}
        while True:
            header = self.read_exact(24)
            (magic, op, key_len, ext_len, _, status, body, opaque,
             cas) = struct.unpack(">BBHBBHIIQ", header)
            if magic != 0x81:
                raise ProtocolError(f"binary multi-get: bad header {header.hex()}")
            payload = self.read_exact(body)
            if op == NOOP and opaque == 0xFFFF:
                return found
            if op != GETKQ or status != OK or not 1 <= opaque <= len(keys) or ext_len != 4:
                raise ProtocolError(f"binary multi-get: unexpected response {header.hex()}")
            key = payload[4:4 + key_len]
            if key != keys[opaque - 1] or key in found:
                raise ProtocolError(f"binary multi-get: key {key!r} for opaque {opaque}")
            found[key] = (struct.unpack(">I", payload[:4])[0], payload[4 + key_len:], cas)

    def store(self, command, key, value, exptime=0, cas=None):
        """STORED, NOT_STORED, EXISTS, NOT_FOUND, LOCKED, NOT_LOCKED, NO_MEMORY or TOO_LARGE."""
        opcode = {"set": SET, "add": ADD, "replace": REPLACE, "cas": SET, "rau": RAU}[command]
        status = self.call(opcode, key, struct.pack(">II", flags_for(key), exptime), value,
                           cas or 0, allowed=tuple(_BINARY_STORE_STATUS))[0]
        return _BINARY_STORE_STATUS[status]

    def concat(self, command, key, value):
        """append / prepend: STORED, NOT_STORED, LOCKED, NO_MEMORY or TOO_LARGE."""
        opcode = APPEND if command == "append" else PREPEND
        status = self.call(opcode, key, value=value,
                           allowed=(OK, NOT_STORED, LOCKED, OUT_OF_MEMORY, TOO_LARGE))[0]
        return _BINARY_STORE_STATUS[status]

    def delete(self, key):
        """DELETED, NOT_FOUND or LOCKED."""
        status = self.call(DELETE, key, allowed=(OK, NOT_FOUND, LOCKED))[0]
        return {OK: "DELETED", NOT_FOUND: "NOT_FOUND", LOCKED: "LOCKED"}[status]

    def arith(self, command, key, delta):
        """(STORED, new value), or (NOT_FOUND | LOCKED | NON_NUMERIC, None).

        An exptime of 0xffffffff: a missing counter is not created, as in text.
        """
        extras = struct.pack(">QQI", delta, 0, 0xFFFFFFFF)
        status, _, value, _ = self.call(INCR if command == "incr" else DECR, key, extras,
                                        allowed=(OK, NOT_FOUND, LOCKED, NON_NUMERIC))
        if status != OK:
            return _BINARY_STORE_STATUS.get(status, "NON_NUMERIC"), None
        if len(value) != 8:
            raise ProtocolError(f"binary incr {key!r}: {len(value)}-byte value")
        return "STORED", struct.unpack(">Q", value)[0]

    def touch(self, key, exptime):
        """TOUCHED or NOT_FOUND."""
        status = self.call(TOUCH, key, struct.pack(">I", exptime), allowed=(OK, NOT_FOUND))[0]
        return "TOUCHED" if status == OK else "NOT_FOUND"

    def lock(self, key):
        """OK, LOCKED or NOT_FOUND."""
        status = self.call(LOCK, key, allowed=(OK, NOT_FOUND, LOCKED))[0]
        return {OK: "OK", NOT_FOUND: "NOT_FOUND", LOCKED: "LOCKED"}[status]

    def unlock(self, key):
        """OK or NOT_LOCKED (binary says 0x01 for a missing key, 0x11 for a free one)."""
        status = self.call(UNLOCK, key, allowed=(OK, NOT_FOUND, NOT_LOCKED))[0]
        return "OK" if status == OK else "NOT_LOCKED"

    def lock_and_get(self, key):
        """(OK, (flags, value, cas)) or (NOT_FOUND | LOCKED, None)."""
        status, extras, value, cas = self.call(LAG, key, allowed=(OK, NOT_FOUND, LOCKED))
        if status != OK:
            return {NOT_FOUND: "NOT_FOUND", LOCKED: "LOCKED"}[status], None
        if len(extras) != 4:
            raise ProtocolError(f"binary LaG {key!r}: {len(extras)} bytes of extras")
        return "OK", (struct.unpack(">I", extras)[0], value, cas)

    def quit(self):
        self.call(QUIT)


_BINARY_STORE_STATUS = {
    OK: "STORED", NOT_FOUND: "NOT_FOUND", EXISTS: "EXISTS", NOT_STORED: "NOT_STORED",
    LOCKED: "LOCKED", NOT_LOCKED: "NOT_LOCKED", OUT_OF_MEMORY: "NO_MEMORY", TOO_LARGE: "TOO_LARGE",
}


# ---------------------------------------------------------------------------
# The named-lock service.

class LockServiceClient(Conn):
    def command(self, line, allowed_prefixes):
        self.send(line + b"\r\n")
        reply = self.read_line()
        if not reply.startswith(allowed_prefixes):
            raise ProtocolError(f"lock service {_excerpt(line)}: unexpected reply "
                                f"{_excerpt(reply)}")
        return reply

    def lock(self, name, wait_s):
        """The fencing token, or None when 409 Unavailable."""
        reply = self.command(b"lock %s %.3f" % (name, wait_s),
                             (b"200 Acquired ", b"409 Unavailable"))
        if reply.startswith(b"409"):
            return None
        token = reply[len(b"200 Acquired "):]
        if not token.isdigit():
            raise ProtocolError(f"lock service: token {_excerpt(token)}")
        return int(token)

    def unlock(self, name):
        return self.command(b"unlock " + name, (b"200 Released", b"403 Not held"))

    def session_id(self):
        return self.command(b"conn_id", (b"200 ",))[4:]

    def resume(self, session):
        return self.command(b"conn_id " + session, (b"200 Resumed", b"403 Cannot resume"))

    def set_timeout(self, millis):
        self.command(b"set_timeout %d" % millis, (b"200 Timeout set",))
