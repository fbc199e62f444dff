"""The clients of bench/soak: random mixed operations, every reply checked.

One SoakClient per thread. Its main connection speaks text (even ids) or
binary (odd ids); a helper connection speaks the other protocol, so that
every check also crosses protocols. What a client verifies:

- Shared keys ("s:N", written by everyone): every value read splits into
  records that checksum and name that key (soak_clients.verify_value), with
  the flags every writer uses. A miss is always legal (eviction, expiry,
  deletes); a value that does not verify is corruption.
- Private keys ("p:CLIENT:SLOT:GEN", written by this client only): a read
  returns exactly the last value written, or a miss once it was evicted;
  after a miss it stays missing. An old value coming back, or any value
  under a key never written, is a stale read. A write whose reply was lost
  (disconnect) abandons the key: GEN moves on.
- Cache locks: while this client holds a lock, the helper's writes and
  deletes answer LOCKED and every read returns exactly the holder's value
  (locked items are never evicted); a client that disconnects while holding
  a lock loses it at once.
- Named locks: never two holders of a name at a time (a table shared by all
  processes), fencing tokens of a name strictly increasing, a session
  resumed within its grace period still holds its lock.
- Every reply is one the protocol allows for the request (ProtocolError
  otherwise); no reply takes longer than the timeout (a stall); the server
  never closes a connection that did nothing wrong.
"""

import random
import socket
import struct
import time

import soak_clients as wire
from soak_clients import Corruption, ProtocolError

# Failures: each must stay 0.
FAILURES = ("corrupted", "stale_reads", "lock_violations", "named_lock_violations",
            "protocol_errors", "stalls", "unexpected_closes", "client_errors")

REPLY_TIMEOUT_S = 10
PRIVATE_SLOTS = 64
NAMED_LOCKS = 8


class Violation(Exception):
    """A broken guarantee other than corruption: (counter name, message)."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


class Stats:
    def __init__(self):
        self.count = 0  # sum(ops.values()), readable while another thread counts
        self.ops = {}
        self.outcomes = {}
        self.failures = dict.fromkeys(FAILURES, 0)
        self.examples = []

    def op(self, name):
        self.count += 1
        self.ops[name] = self.ops.get(name, 0) + 1

    def outcome(self, name):
        self.outcomes[name] = self.outcomes.get(name, 0) + 1

    def fail(self, kind, message):
        self.failures[kind] += 1
        if len(self.examples) < 20:
            self.examples.append(f"{kind}: {message}")

    def merge(self, other):
        self.count += other.count
        for mine, theirs in ((self.ops, other.ops), (self.outcomes, other.outcomes),
                             (self.failures, other.failures)):
            for name, count in theirs.items():
                mine[name] = mine.get(name, 0) + count
        self.examples.extend(other.examples[:20 - len(self.examples)])

    def total_ops(self):
        return self.count


def value_size(rng):
    """Mostly small, some medium, a few large (eviction, referenced replies)."""
    roll = rng.random()
    if roll < 0.70:
        return rng.randint(8, 256)
    if roll < 0.95:
        return rng.randint(257, 4096)
    return rng.randint(4097, 65536)


class SoakClient:
    def __init__(self, cid, port, lock_port, shared, config, stats):
        self.cid = cid
        self.port = port
        self.lock_port = lock_port
        self.shared = shared  # named-lock holders and last tokens, all processes
        self.config = config
        self.stats = stats
        self.rng = random.Random(config["seed"] * 1_000_003 + cid)
        self.binary_main = cid % 2 == 1
        self.main = None
        self.helper = None
        self.named = None
        self.seq = 0
        self.gen = [0] * PRIVATE_SLOTS
        self.expected = [None] * PRIVATE_SLOTS  # None: missing
        self.counter_gen = 0
        self.counter = None
        self.held_name = None  # the named lock this client holds, if any

    # -- connections ---------------------------------------------------------

    def _connect(self, binary):
        cls = wire.BinaryClient if binary else wire.TextClient
        return cls(self.port, REPLY_TIMEOUT_S)

    def conn(self):
        if self.main is None:
            self.main = self._connect(self.binary_main)
        return self.main

    def other(self):
        if self.helper is None:
            self.helper = self._connect(not self.binary_main)
        return self.helper

    def lock_service(self):
        if self.named is None:
            self.named = wire.LockServiceClient(self.lock_port, REPLY_TIMEOUT_S)
            # A dropped connection releases at once: no 30 s grace to wait out.
            self.named.set_timeout(0)
        return self.named

    def drop_all(self):
        """After an error: every connection goes, what it wrote is uncertain."""
        self.release_name_slot()
        for conn in (self.main, self.helper, self.named):
            if conn is not None:
                try:
                    conn.close(reset=True)
                except OSError:
                    pass
        self.main = self.helper = self.named = None
        self.abandon_private_keys()

    def abandon_private_keys(self):
        for slot in range(PRIVATE_SLOTS):
            self.gen[slot] += 1
            self.expected[slot] = None
        self.counter_gen += 1
        self.counter = None

    # -- values --------------------------------------------------------------

    def record(self, key, size=None):
        self.seq += 1
        tag = b"%d.%d" % (self.cid, self.seq)
        return wire.make_record(key, tag, size or value_size(self.rng), self.rng)

    def check_shared(self, key, hit):
        """hit: (flags, value, cas) or None."""
        if hit is None:
            self.stats.outcome("miss")
            return
        self.stats.outcome("hit")
        flags, value = hit[0], hit[1]
        if flags != wire.flags_for(key):
            raise Corruption(f"{key!r}: flags {flags}, every writer uses {wire.flags_for(key)}")
        if key.startswith(b"c:"):
            wire.verify_counter(key, value)
        else:
            wire.verify_value(key, value)

    def shared_key(self):
        return b"s:%d" % self.rng.randrange(self.config["keys"])

    def private_key(self, slot):
        return b"p:%d:%d:%d" % (self.cid, slot, self.gen[slot])

    def check_private(self, slot, hit):
        key = self.private_key(slot)
        want = self.expected[slot]
        if hit is None:
            self.stats.outcome("miss")
            self.expected[slot] = None  # evicted or expired: it stays gone
            return
        self.stats.outcome("hit")
        if hit[0] != wire.flags_for(key):
            raise Corruption(f"{key!r}: flags {hit[0]}, written with {wire.flags_for(key)}")
        wire.verify_value(key, hit[1])
        if want is None:
            raise Violation("stale_reads", f"{key!r}: a value came back after a miss "
                                           f"(or was never written): {hit[1][:60]!r}")
        if hit[1] != want:
            raise Violation("stale_reads", f"{key!r}: read {len(hit[1])} bytes, not the "
                                           f"{len(want)} last written ({hit[1][:60]!r})")

    # -- the operations ------------------------------------------------------

    def op_get(self):
        conn = self.conn()
        key = self.shared_key()
        if not self.binary_main and self.rng.random() < 0.25:
            hit = conn.meta_get(key)
            self.check_shared(key, None if hit is None else (hit[0], hit[1], None))
        else:
            self.check_shared(key, conn.get(key))

    def op_multi_get(self):
        keys = list({self.shared_key() for _ in range(self.rng.randint(2, 40))})
        if self.rng.random() < 0.2:
            keys += [b"c:%d" % self.rng.randrange(self.config["counters"])]
        found = self.conn().get_many(keys)
        for key in keys:
            self.check_shared(key, found.get(key))

    def op_set(self):
        key = self.shared_key()
        exptime = self.rng.randint(1, 5) if self.rng.random() < 0.1 else 0
        conn = self.conn()
        if not self.binary_main and self.rng.random() < 0.2:
            self.stats.outcome(conn.meta_set(key, self.record(key)))
        else:
            command = self.rng.choice(("set", "set", "set", "add", "replace"))
            self.stats.outcome(conn.store(command, key, self.record(key), exptime))

    def op_concat(self):
        """append/prepend to a value that is not large yet (no unbounded growth)."""
        key = self.shared_key()
        hit = self.conn().get(key)
        self.check_shared(key, hit)
        if hit is None or len(hit[1]) > 32768:
            return
        command = self.rng.choice(("append", "prepend"))
        piece = self.record(key, self.rng.randint(8, 300))
        self.stats.outcome(self.conn().concat(command, key, piece))

    def op_cas(self):
        key = self.shared_key()
        hit = self.conn().gets(key)
        self.check_shared(key, hit)
        if hit is None:
            return
        result = self.conn().store("cas", key, self.record(key), 0, hit[2])
        self.stats.outcome("cas_" + result)

    def op_delete(self):
        self.stats.outcome(self.conn().delete(self.shared_key()))

    def op_touch(self):
        key = self.shared_key()
        self.stats.outcome(self.conn().touch(key, self.rng.choice((0, 0, 60, 3600))))

    def op_counter(self):
        key = b"c:%d" % self.rng.randrange(self.config["counters"])
        command = self.rng.choice(("incr", "incr", "decr"))
        result, _ = self.conn().arith(command, key, self.rng.randint(1, 1000))
        self.stats.outcome(command + "_" + result)
        if result == "NOT_FOUND":
            self.stats.outcome(self.conn().store("add", key, b"%d" % self.rng.randrange(1 << 32)))
        elif result == "NON_NUMERIC":
            raise Corruption(f"{key!r}: a counter that only ever held numbers is not numeric")

    def op_private_write(self):
        slot = self.rng.randrange(PRIVATE_SLOTS)
        key = self.private_key(slot)
        roll = self.rng.random()
        if roll < 0.55:
            value = self.record(key)
            result = self.conn().store("set", key, value)
            if result == "STORED":
                self.expected[slot] = value
            else:
                self.unexpected_private(slot, "set", result, ("NO_MEMORY",))
        elif roll < 0.8:
            self.private_concat(slot, key)
        else:
            result = self.conn().delete(key)
            if result == "DELETED" and self.expected[slot] is None:
                raise Violation("stale_reads", f"{key!r}: deleted, but it was missing")
            if result not in ("DELETED", "NOT_FOUND"):
                self.unexpected_private(slot, "delete", result, ())
            self.expected[slot] = None
        self.stats.outcome("private_write")

    def private_concat(self, slot, key):
        want = self.expected[slot]
        if want is not None and len(want) > 32768:
            return
        command = self.rng.choice(("append", "prepend"))
        piece = self.record(key, self.rng.randint(8, 300))
        result = self.conn().concat(command, key, piece)
        if result == "STORED":
            if want is None:
                raise Violation("stale_reads", f"{key!r}: {command} found a value after a miss")
            self.expected[slot] = want + piece if command == "append" else piece + want
        elif result == "NOT_STORED":
            self.expected[slot] = None  # evicted since
        else:
            self.unexpected_private(slot, command, result, ("NO_MEMORY", "TOO_LARGE"))

    def unexpected_private(self, slot, command, result, legal):
        if result not in legal:
            raise ProtocolError(f"{command} of a private key answered {result}")
        # memcached drops the old value when a store fails for memory; which
        # one is left is not defined: start over with a new key.
        self.stats.outcome(result)
        self.gen[slot] += 1
        self.expected[slot] = None

    def op_private_read(self):
        slots = list({self.rng.randrange(PRIVATE_SLOTS) for _ in range(self.rng.randint(1, 12))})
        keys = [self.private_key(slot) for slot in slots]
        found = self.conn().get_many(keys)
        for slot, key in zip(slots, keys):
            self.check_private(slot, found.get(key))

    def op_private_counter(self):
        """incr/decr on this client's counter: exact arithmetic, as memcached's."""
        key = b"pc:%d:%d" % (self.cid, self.counter_gen)
        delta = self.rng.randint(1, 1 << 40)
        command = self.rng.choice(("incr", "decr"))
        result, value = self.conn().arith(command, key, delta)
        if result == "NOT_FOUND":
            if self.counter is not None:
                self.stats.outcome("counter_evicted")
            start = self.rng.randrange(1 << 63)
            if self.conn().store("set", key, b"%d" % start) == "STORED":
                self.counter = start
            return
        if result != "STORED":
            raise ProtocolError(f"{command} of a private counter answered {result}")
        if self.counter is None:
            raise Violation("stale_reads", f"{key!r}: {command} found a counter after a miss")
        if command == "incr":
            want = (self.counter + delta) % (1 << 64)
        else:
            want = max(self.counter - delta, 0)
        if value != want:
            raise Violation("stale_reads", f"{key!r}: {command} {delta} of {self.counter} "
                                           f"gave {value}, not {want}")
        self.counter = value

    def op_lock_check(self):
        """Lock a shared key, write it, prove others can read but not change it."""
        key = self.shared_key()
        conn, helper = self.conn(), self.other()
        if self.binary_main and self.rng.random() < 0.5:
            return self.lock_and_get_check(key, conn, helper)
        result = conn.lock(key)
        if result == "NOT_FOUND":
            self.stats.outcome(conn.store("add", key, self.record(key)))
            result = conn.lock(key)
        self.stats.outcome("lock_" + result)
        if result != "OK":
            return
        value = self.record(key)
        result = conn.store("set", key, value)
        if result == "NO_MEMORY":  # what is left of the key is not defined
            self.stats.outcome("locked_set_" + result)
            conn.unlock(key)
            return
        if result != "STORED":
            raise Violation("lock_violations", f"{key!r}: the holder's set answered {result}")
        self.prove_locked(key, value, conn, helper)
        if conn.unlock(key) != "OK":
            raise Violation("lock_violations", f"{key!r}: the holder's unlock was refused")

    def lock_and_get_check(self, key, conn, helper):
        """Binary LaG, then RaU: replace and unlock in one step."""
        result, hit = conn.lock_and_get(key)
        self.stats.outcome("lag_" + result)
        if result != "OK":
            return
        self.check_shared(key, hit)
        self.prove_locked(key, hit[1], conn, helper)
        result = conn.store("rau", key, self.record(key))
        if result == "NO_MEMORY":
            self.stats.outcome("rau_" + result)
            conn.unlock(key)
        elif result != "STORED":
            raise Violation("lock_violations", f"{key!r}: the holder's RaU answered {result}")

    def prove_locked(self, key, value, conn, helper):
        attempts = (
            ("set", lambda: helper.store("set", key, self.record(key))),
            ("delete", lambda: helper.delete(key)),
            ("append", lambda: helper.concat("append", key, self.record(key, 16))),
            ("lock", lambda: helper.lock(key)),
        )
        name, attempt = self.rng.choice(attempts)
        result = attempt()
        if result != "LOCKED":
            raise Violation("lock_violations", f"{key!r}: another client's {name} of a "
                                               f"locked key answered {result}")
        for reader in (helper, conn):
            hit = reader.get(key)
            if hit is None or hit[1] != value:
                seen = "a miss" if hit is None else "another value"
                raise Violation("lock_violations", f"{key!r}: a locked key read back {seen}")

    def op_lock_dropped_on_disconnect(self):
        """Holding a lock and going away releases it at once (other thread too)."""
        key = b"L:%d" % self.cid  # only this client locks it
        conn, helper = self.conn(), self.other()
        if conn.store("set", key, self.record(key)) != "STORED" or conn.lock(key) != "OK":
            return
        self.close_main(reset=self.rng.random() < 0.5)
        deadline = time.monotonic() + 5
        while True:
            result = helper.store("set", key, self.record(key))
            if result != "LOCKED":
                self.stats.outcome("lock_released_" + result)
                return
            if time.monotonic() > deadline:
                raise Violation("lock_violations", f"{key!r}: still locked 5 s after its "
                                                   "holder disconnected")
            time.sleep(0.002)

    def op_pipeline(self):
        """A burst of sets and gets in one write, then every reply in order."""
        conn = self.conn()
        keys = [self.shared_key() for _ in range(self.rng.randint(5, 30))]
        if isinstance(conn, wire.BinaryClient):
            for key in keys:
                value = self.record(key, self.rng.randint(8, 1024))
                conn.send(wire.bin_request(wire.SET, key,
                                           struct.pack(">II", wire.flags_for(key), 0), value)
                          + wire.bin_request(wire.GET, key))
            for key in keys:
                status = conn.response(wire.SET)[0]
                self.stats.outcome(wire._BINARY_STORE_STATUS.get(status, "?"))
                status, extras, _, value, cas = conn.response(wire.GET)
                if status == wire.OK:
                    self.check_shared(key, (struct.unpack(">I", extras)[0], value, cas))
                elif status != wire.NOT_FOUND:
                    raise ProtocolError(f"pipelined get {key!r}: status {status:#x}")
            return
        burst = b"".join(b"set %s %d 0 %d\r\n%s\r\nget %s\r\n" % (
            key, wire.flags_for(key), len(v), v, key)
            for key, v in ((k, self.record(k, self.rng.randint(8, 1024))) for k in keys))
        conn.send(burst)
        for key in keys:
            self.stats.outcome(conn.store_reply("set"))
            found = self.read_text_get(conn, key)
            self.check_shared(key, found)

    @staticmethod
    def read_text_get(conn, key):
        line = conn.read_line()
        if line == b"END":
            return None
        parts = line.split(b" ")
        if len(parts) != 4 or parts[0] != b"VALUE" or parts[1] != key:
            raise ProtocolError(f"pipelined get {key!r}: {line[:80]!r}")
        value = conn.read_exact(int(parts[3]) + 2)[:-2]
        wire.expect(conn.read_line(), (b"END",), "pipelined get")
        return int(parts[2]), value, None

    def op_named_lock(self):
        names = self.config["named_locks"]
        index = self.rng.randrange(names)
        name = b"soak-%d" % index
        ls = self.lock_service()
        token = ls.lock(name, self.rng.choice((0, 0.05, 0.2, 0.5)))
        if token is None:
            self.stats.outcome("named_unavailable")
            return
        self.claim_name(index, token)
        self.stats.outcome("named_acquired")
        time.sleep(self.rng.random() * 0.005)
        roll = self.rng.random()
        if roll < 0.05:
            return self.resume_while_holding(index, name)
        if roll < 0.10:  # go away holding it: released at once (timeout 0)
            self.release_name_slot()
            self.named.close(reset=self.rng.random() < 0.5)
            self.named = None
            return
        self.release_name_slot()
        if ls.unlock(name) != b"200 Released":
            raise Violation("named_lock_violations", f"{name!r}: its holder's unlock: not held")

    def resume_while_holding(self, index, name):
        """Disconnect with a grace period, resume the session: the lock is still ours."""
        ls = self.named
        ls.set_timeout(5000)
        session = ls.session_id()
        ls.close()
        self.named = None
        fresh = wire.LockServiceClient(self.lock_port, REPLY_TIMEOUT_S)
        deadline = time.monotonic() + 2
        # The server may not have seen the close yet: "a live connection still uses it".
        while fresh.resume(session) != b"200 Resumed":
            if time.monotonic() > deadline:
                fresh.close()
                self.release_name_slot()  # the grace period ends it; others wait
                raise Violation("named_lock_violations",
                                f"{name!r}: session {session!r} not resumable within 2 s")
            time.sleep(0.005)
        self.named = fresh
        fresh.set_timeout(0)
        self.stats.outcome("named_resumed")
        self.release_name_slot()
        if fresh.unlock(name) != b"200 Released":
            raise Violation("named_lock_violations", f"{name!r}: lost across a resume")

    def claim_name(self, index, token):
        holders, tokens = self.shared
        with holders.get_lock():
            holder, last = holders[index], tokens[index]
            holders[index] = self.cid + 1
            tokens[index] = max(last, token)
        self.held_name = index
        if holder != 0:
            raise Violation("named_lock_violations",
                            f"soak-{index}: granted to client {self.cid} while client "
                            f"{holder - 1} holds it")
        if token <= last:
            raise Violation("named_lock_violations", f"soak-{index}: token {token} after {last}")

    def release_name_slot(self):
        """Before the server can hand the name on (unlock, close)."""
        if self.held_name is None:
            return
        holders, _ = self.shared
        with holders.get_lock():
            if holders[self.held_name] == self.cid + 1:
                holders[self.held_name] = 0
        self.held_name = None

    # -- disconnects ---------------------------------------------------------

    def close_main(self, reset=False):
        if self.main is not None:
            self.main.close(reset=reset)
            self.main = None

    def op_disconnect(self):
        """Go away in one of the ways a real client does, mid-request included."""
        conn = self.conn()
        binary = isinstance(conn, wire.BinaryClient)
        how = self.rng.choice(("close", "reset", "quit", "partial_line", "partial_value",
                               "unread_multi_get", "unread_write", "named_waiting"))
        self.stats.outcome("disconnect_" + how)
        slot = self.rng.randrange(PRIVATE_SLOTS)
        key = self.private_key(slot)
        value = self.record(key, self.rng.randint(100, 20000))
        if how == "quit":
            conn.quit()
        elif how == "partial_line":
            conn.send(wire.bin_request(wire.GET, key)[:self.rng.randint(1, 23)] if binary
                      else b"get " + key)
        elif how == "partial_value":
            # The server cannot complete it: the private key keeps its value.
            if binary:
                request = wire.bin_request(wire.SET, key, struct.pack(">II", 0, 0), value)
            else:
                request = b"set %s 0 0 %d\r\n%s\r\n" % (key, len(value), value)
            conn.send(request[:self.rng.randint(1, len(request) - 3)])
        elif how == "unread_multi_get":
            keys = [self.shared_key() for _ in range(100)]
            if binary:
                conn.send(b"".join(wire.bin_request(wire.GETK, k) for k in keys))
            else:
                conn.send(b"get " + b" ".join(keys) + b"\r\n")
        elif how == "unread_write":
            # Sent whole: stored or not, and maybe after a later write.
            if binary:
                conn.send(wire.bin_request(wire.SET, key,
                                           struct.pack(">II", wire.flags_for(key), 0), value))
            else:
                conn.send(b"set %s %d 0 %d\r\n%s\r\n" % (key, wire.flags_for(key), len(value),
                                                        value))
            self.gen[slot] += 1
            self.expected[slot] = None
        elif how == "named_waiting":
            ls = self.lock_service()
            ls.send(b"lock soak-%d 2\r\n" % self.rng.randrange(self.config["named_locks"]))
            ls.close(reset=self.rng.random() < 0.5)
            self.named = None
            return
        self.close_main(reset=how == "reset" or self.rng.random() < 0.3)

    # -- the loop ------------------------------------------------------------

    OPS = (
        ("get", op_get, 20), ("multi_get", op_multi_get, 8), ("set", op_set, 16),
        ("concat", op_concat, 4), ("cas", op_cas, 4), ("delete", op_delete, 4),
        ("touch", op_touch, 2), ("counter", op_counter, 5), ("private_write", op_private_write, 10),
        ("private_read", op_private_read, 8), ("private_counter", op_private_counter, 3),
        ("lock_check", op_lock_check, 4), ("lock_disconnect", op_lock_dropped_on_disconnect, 0.3),
        ("pipeline", op_pipeline, 2), ("named_lock", op_named_lock, 4),
        ("disconnect", op_disconnect, 0.5),
    )

    def run(self, deadline):
        names = [name for name, _, _ in self.OPS]
        functions = {name: function for name, function, _ in self.OPS}
        weights = [weight for _, _, weight in self.OPS]
        while time.monotonic() < deadline:
            name = self.rng.choices(names, weights)[0]
            self.stats.op(name)
            try:
                functions[name](self)
            except Corruption as problem:
                self.stats.fail("corrupted", f"{name}: {problem}")
                self.drop_all()
            except Violation as problem:
                self.stats.fail(problem.kind, f"{name}: {problem}")
                self.drop_all()
            except ProtocolError as problem:
                self.stats.fail("protocol_errors", f"{name}: {problem}")
                self.drop_all()
            except socket.timeout:
                self.stats.fail("stalls", f"{name}: no reply within {REPLY_TIMEOUT_S} s")
                self.drop_all()
            except OSError as problem:
                self.stats.fail("unexpected_closes", f"{name}: {problem!r}")
                self.drop_all()
            except Exception as problem:  # a reply this code cannot parse, or a bug here
                self.stats.fail("client_errors", f"{name}: {problem!r}")
                self.drop_all()
        self.drop_all()
