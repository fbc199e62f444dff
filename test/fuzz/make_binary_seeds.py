#!/usr/bin/env python3
"""Writes the seed corpus of binary_fuzz: test/fuzz/corpus/binary/*.

Each seed is what binary_fuzz reads (see cache_harness.h and README.md): a
header byte, then binary-protocol request frames, with harness directives
(0xFF + letter) in between. A 0xFF inside a frame is doubled, since a lone
0xFF starts a directive.

    python3 test/fuzz/make_binary_seeds.py [OUTPUT_DIR]
"""

import os
import struct
import sys

# Opcodes (include/lockcached/protocol/binary_protocol.h).
GET, SET, ADD, REPLACE, DELETE, INCR, DECR, QUIT, FLUSH, GETQ, NOOP, VERSION = range(0x0C)
GETK, GETKQ, APPEND, PREPEND, STAT, SETQ, ADDQ, REPLACEQ, DELETEQ = range(0x0C, 0x15)
INCRQ, DECRQ, QUITQ, FLUSHQ, APPENDQ, PREPENDQ, VERBOSITY, TOUCH, GAT, GATQ = range(0x15, 0x1F)
GATK, GATKQ = 0x23, 0x24
LOCK, LOCKQ, UNLOCK, UNLOCKQ, UNLOCKALL, UNLOCKALLQ = range(0x40, 0x46)
LAG, LAGQ, LAGK, LAGKQ, RAU, RAUQ = range(0x46, 0x4C)
KEYS = 0x50

DIRECTIVE = 0xFF


def frame(opcode, key=b"", extras=b"", value=b"", cas=0, opaque=0, magic=0x80, body=None,
          key_length=None, extras_length=None):
    """One request; body/key_length/extras_length override the true sizes."""
    if body is None:
        body = len(extras) + len(key) + len(value)
    header = struct.pack(">BBHBBHIIQ", magic, opcode,
                         len(key) if key_length is None else key_length,
                         len(extras) if extras_length is None else extras_length,
                         0, 0, body, opaque, cas)
    return header + extras + key + value


def store(opcode, key, value, flags=0, exptime=0, cas=0, opaque=0):
    return frame(opcode, key, struct.pack(">II", flags, exptime), value, cas, opaque)


def arith(opcode, key, delta, initial=0, exptime=0, cas=0):
    return frame(opcode, key, struct.pack(">QQI", delta, initial, exptime), cas=cas)


def touch(opcode, key, exptime):
    return frame(opcode, key, struct.pack(">I", exptime))


def escape(data):
    """Doubles 0xFF so that the harness delivers it literally."""
    return data.replace(bytes([DIRECTIVE]), bytes([DIRECTIVE, DIRECTIVE]))


def d(op, arg=None):
    """A harness directive (see cache_harness.h)."""
    out = bytes([DIRECTIVE]) + op.encode()
    if arg is not None:
        out += bytes([arg])
    return out


def seed(header, *parts):
    """header byte, then frames (bytes, escaped) and directives (from d())."""
    out = bytes([header])
    for part in parts:
        out += part
    return out


def F(*frames):
    return escape(b"".join(frames))


def any_opcode(op):
    """A request of the shape check_shape() accepts for `op`."""
    if op in (GET, GETQ, GETK, GETKQ, DELETE, DELETEQ, LOCK, LOCKQ, UNLOCK, UNLOCKQ):
        return frame(op, b"k")
    if op in (SET, SETQ, ADD, ADDQ, REPLACE, REPLACEQ, RAU, RAUQ):
        return store(op, b"k", b"%d" % op)
    if op in (APPEND, APPENDQ, PREPEND, PREPENDQ):
        return frame(op, b"k", value=b"7")
    if op in (INCR, INCRQ, DECR, DECRQ):
        return arith(op, b"n", 1, initial=5)
    if op in (NOOP, VERSION, UNLOCKALL, UNLOCKALLQ):
        return frame(op)
    if op in (FLUSH, FLUSHQ):
        return frame(op, extras=struct.pack(">I", 3600))
    if op == VERBOSITY:
        return frame(op, extras=struct.pack(">I", 0))
    if op in (TOUCH, GAT, GATQ, GATK, GATKQ):
        return touch(op, b"k", 100)
    if op == STAT:
        return frame(op, b"settings")
    if op == KEYS:
        return frame(op, b"k")
    if op in (LAG, LAGQ, LAGK, LAGKQ):
        return frame(op, b"k", extras=struct.pack(">I", 60))
    return frame(op, b"k", value=b"unknown opcode body")


# Header bytes (fuzz_util.h): bits 0-1 store config, 2-4 chunk mode,
# 5 partial drains, 6 bounded keys steps, 7 hash seed.
WHOLE = 0x00
WHOLE_PARTIAL = 0x20
BYTEWISE = 0x04
SMALL_CHUNKS = 0x0C
BOUNDED = 0x40
TINY_STORE = 0x03  # 4 KB in 2 shards

SEEDS = {
    "get_set": seed(WHOLE, F(
        store(SET, b"k", b"hello", flags=5, opaque=1),
        frame(GET, b"k", opaque=2), frame(GETK, b"k"), frame(GETQ, b"k"), frame(GETKQ, b"k"),
        frame(GETQ, b"missing"), frame(GETK, b"missing"), frame(GET, b"missing"),
        frame(NOOP))),
    "add_replace_append": seed(WHOLE, F(
        store(ADD, b"a", b"1"), store(ADD, b"a", b"2"), store(REPLACE, b"a", b"3"),
        store(REPLACE, b"nope", b"x"), frame(APPEND, b"a", value=b"45"),
        frame(PREPEND, b"a", value=b"0"), frame(APPENDQ, b"none", value=b"z"),
        store(SETQ, b"q", b"quiet"), store(ADDQ, b"q", b"dup"), store(REPLACEQ, b"q", b"r"),
        frame(GET, b"a"), frame(DELETE, b"a"), frame(DELETE, b"a"), frame(DELETEQ, b"q"),
        frame(NOOP))),
    "arith": seed(WHOLE, F(
        arith(INCR, b"n", 1, initial=10), arith(INCR, b"n", 5), arith(DECR, b"n", 100),
        arith(INCR, b"n", 0xFFFFFFFFFFFFFFFF), arith(INCRQ, b"n", 1), arith(DECRQ, b"n", 1),
        arith(INCR, b"none", 1, exptime=0xFFFFFFFF), store(SET, b"s", b"abc"),
        arith(INCR, b"s", 1), store(SET, b"sp", b"12  "), arith(INCR, b"sp", 1),
        arith(DECR, b"sp", 3, cas=12345), frame(GET, b"sp"))),
    "cas": seed(WHOLE, F(
        store(SET, b"c", b"1"), store(SET, b"c", b"2", cas=1), store(SET, b"c", b"3", cas=99),
        store(ADD, b"c", b"4", cas=2), store(REPLACE, b"c", b"5", cas=2),
        frame(APPEND, b"c", value=b"6", cas=3), frame(DELETE, b"c", cas=77),
        frame(DELETE, b"c", cas=0), frame(GET, b"c"))),
    "touch_gat": seed(WHOLE, F(
        store(SET, b"t", b"v", exptime=100), touch(TOUCH, b"t", 10), touch(GAT, b"t", 0),
        touch(GATK, b"t", 5), touch(GATQ, b"t", 5), touch(GATKQ, b"t", 5),
        touch(GATK, b"missing", 5), touch(GATQ, b"missing", 5), touch(TOUCH, b"missing", 5)),
        d("T", 6), F(frame(GET, b"t")), d("T", 100), F(frame(GETK, b"t"))),
    "flush_misc": seed(WHOLE, F(
        store(SET, b"f", b"1"), frame(FLUSH), frame(GET, b"f"), store(SET, b"f", b"2"),
        frame(FLUSH, extras=struct.pack(">I", 10)), frame(FLUSHQ), frame(VERSION),
        frame(VERBOSITY, extras=struct.pack(">I", 1)), frame(STAT), frame(STAT, b"settings"),
        frame(STAT, b"reset"), frame(STAT, b"items"), frame(STAT, b"bogus"), frame(NOOP)),
        d("T", 11), F(frame(GET, b"f"))),
    "quit": seed(WHOLE, F(store(SET, b"x", b"1"), frame(LOCK, b"x"), frame(QUIT), frame(GET, b"x")),
                 F(frame(LOCK, b"x"), frame(QUITQ), frame(NOOP))),
    "locks_two_connections": seed(WHOLE, F(
        store(SET, b"L", b"value"), frame(LOCK, b"L"), frame(LOCK, b"L")),
        d("B"), F(store(SET, b"L", b"other"), frame(DELETE, b"L"), arith(INCR, b"L", 1),
                  frame(LAG, b"L"), frame(UNLOCK, b"L"), store(RAU, b"L", b"rau")),
        d("A"), F(store(SET, b"L", b"mine"), store(RAU, b"L", b"replaced"), frame(GET, b"L"),
                  frame(LAGK, b"L", extras=struct.pack(">I", 100)), frame(UNLOCKQ, b"L"),
                  frame(LOCKQ, b"L"), frame(UNLOCKALL), frame(UNLOCKALLQ)),
        d("B"), F(frame(LAGKQ, b"L"), store(RAUQ, b"L", b"b"), frame(UNLOCK, b"L")),
        d("X"), d("A"), F(frame(LAGQ, b"L"), frame(LAG, b"none"), frame(LAGK, b"none"),
                          frame(UNLOCK, b"none"), store(RAU, b"none", b"x"))),
    "lock_flush_unlock": seed(WHOLE, F(
        store(SET, b"k", b"v"), frame(LAG, b"k"), frame(FLUSH), frame(GET, b"k")),
        d("B"), F(frame(GET, b"k"), store(SET, b"k", b"w")),
        d("A"), F(frame(UNLOCK, b"k"), frame(GET, b"k"))),
    "keys_walk": seed(BOUNDED | WHOLE_PARTIAL, F(
        *[store(SET, b"key%03d" % i, b"v%d" % i) for i in range(60)],
        frame(KEYS), frame(KEYS, b"key01"), frame(GET, b"key001")),
        d("B"), F(*[store(SET, b"zz%02d" % i, b"z") for i in range(20)],
                  frame(DELETE, b"key002")),
        d("A"), d("W"), F(frame(NOOP))),
    "bad_shape": seed(WHOLE, F(
        store(SET, b"ok", b"1"),
        frame(GET, b"k", extras=b"\0\0\0\0"),  # get with extras: invalid, closes
        frame(NOOP)), d("B"), F(frame(SET, b"k", extras=b"\0\0\0\0", value=b"v"))),
    "bad_magic": seed(WHOLE, F(frame(GET, b"k", magic=0x81), frame(NOOP))),
    "unknown_opcode": seed(WHOLE, F(
        frame(0x33, b"key", value=b"body bytes"), frame(0x7E, body=100000), frame(NOOP))),
    "too_large": seed(TINY_STORE, F(
        frame(SET, b"big", struct.pack(">II", 0, 0), body=8 + 3 + 70000) + b"abcdef", frame(GET, b"big"))),
    "bytewise": seed(BYTEWISE, F(
        store(SET, b"s", b"split across reads"), frame(GET, b"s"), frame(GETK, b"s"))),
    "small_chunks_locks": seed(SMALL_CHUNKS | WHOLE_PARTIAL, F(
        store(SET, b"a", b"x" * 700), frame(GET, b"a"), frame(LOCK, b"a")),
        d("B"), F(frame(GET, b"a"), frame(GET, b"a"), store(SET, b"a", b"no")),
        d("A"), F(frame(DELETE, b"a"), store(SET, b"a", b"y" * 600), frame(GET, b"a")),
        d("G")),
    "large_values_partial_drain": seed(WHOLE_PARTIAL, F(
        store(SET, b"v", b"V" * 1000), frame(GET, b"v"), frame(GETK, b"v"),
        frame(DELETE, b"v"), store(SET, b"v", b"W" * 600), frame(GET, b"v"),
        frame(APPEND, b"v", value=b"+" * 520), frame(GET, b"v")), d("D")),
    "expiry": seed(WHOLE, F(
        store(SET, b"e", b"1", exptime=10), store(SET, b"f", b"2", exptime=2),
        frame(LOCK, b"f")),
        d("T", 11), F(frame(GET, b"e"), frame(GET, b"f")), d("G"),
        d("H", 1), F(frame(UNLOCK, b"f"), frame(GET, b"f"))),
    "eviction": seed(TINY_STORE, F(
        *[store(SET, b"ev%d" % i, bytes([0x41 + i]) * 300) for i in range(24)],
        frame(LOCK, b"ev23"), frame(GET, b"ev0"), frame(GET, b"ev23"),
        store(SET, b"ev23", b"x" * 1500), frame(GET, b"ev23"))),
    "tiny_store_locked_full": seed(TINY_STORE, F(
        *[store(SET, b"l%d" % i, b"L" * 230) for i in range(16)],
        *[frame(LOCKQ, b"l%d" % i) for i in range(16)],
        store(SET, b"new", b"N" * 1900), frame(GET, b"new"), frame(UNLOCKALL),
        store(SET, b"new", b"N" * 1900))),
    "zero_length": seed(WHOLE, F(
        store(SET, b"z", b""), frame(GET, b"z"), frame(APPEND, b"z", value=b""),
        store(RAU, b"z", b""))),
    "arith_create_exptime": seed(WHOLE, F(
        arith(INCR, b"c", 1, initial=7, exptime=5), frame(GET, b"c")),
        d("T", 6), F(frame(GET, b"c"), arith(DECR, b"c", 1, initial=0, exptime=0xFFFFFFFF))),
    # 3360 items in 2 shards of 1024 buckets: both tables grow (at 1536).
    "growth_during_walk": seed(BOUNDED | 0x01, d("N", 63), F(
        frame(KEYS, b"n1"), frame(GET, b"n1")),
        d("B"), d("N", 40), F(frame(DELETE, b"n2"), arith(INCR, b"n3", 1)),
        d("A"), F(frame(NOOP)), d("W")),
    "pipeline_keys_then_set": seed(BOUNDED, F(
        *[store(SETQ, b"p%d" % i, b"p") for i in range(40)],
        frame(KEYS, b"p"), store(SET, b"after", b"1"), frame(GET, b"after"))),
    # One well-formed request per opcode 0x00-0x50, known or not (unknown
    # ones are answered 0x81 and their body skipped); quit last.
    "every_opcode": seed(WHOLE_PARTIAL, F(store(SET, b"k", b"12", flags=3)),
                         F(*[any_opcode(op) for op in range(0x00, 0x51)
                             if op not in (QUIT, QUITQ)]),
                         d("B"), F(frame(LOCK, b"k"), store(SET, b"k", b"no"),
                                   frame(PREPENDQ, b"k", value=b"no"), frame(UNLOCKALLQ),
                                   frame(QUITQ))),
    # Every quiet lock opcode against another connection's lock, then the
    # holder hangs up in the middle and a new client takes the key.
    "quiet_locks_hangup": seed(SMALL_CHUNKS, F(
        store(SET, b"q", b"v"), frame(LOCKQ, b"q"), frame(LAGQ, b"q"),
        frame(LAGKQ, b"q", extras=struct.pack(">I", 30)), store(RAUQ, b"q", b"w"),
        frame(LOCKQ, b"q"), frame(NOOP)),
        d("B"), F(frame(LOCKQ, b"q"), frame(LAGKQ, b"q"), store(RAUQ, b"q", b"x"),
                  frame(UNLOCKQ, b"q"), frame(UNLOCKALLQ), frame(DELETEQ, b"q"),
                  arith(INCRQ, b"q", 1), frame(NOOP)),
        d("A"), F(store(SET, b"q", b"mine")[:30]), d("X"),
        d("B"), F(frame(LOCK, b"q"), frame(GET, b"q"), store(RAU, b"q", b"now mine"),
                  frame(GETK, b"q"))),
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "binary")
    os.makedirs(out_dir, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {out_dir}")


if __name__ == "__main__":
    main()
