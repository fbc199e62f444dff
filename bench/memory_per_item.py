#!/usr/bin/env python3
"""Memory per item: lockcached against memcached, the same items in each.

Two workloads, both with 16-byte keys, over the text protocol:

  small  N items (--items, default 1,000,000) with 32-byte values
  mixed  values of random sizes, uniform over 10 B..10 KiB (each size
         equally likely, so 5 KiB on average), drawn with a fixed seed
         (--seed) so that both servers get the same items, until the values
         add up to --data-mb MiB (default 2048: about 420,000 items)

For each server it reports how much the resident set (VmRSS in
/proc/PID/status) grew, per item and beyond the keys and values, with what
the server's own statistics say the growth is made of (the bytes its items
count, what its allocator or slabs took for them, its hash table). It checks
that nothing was evicted and that every item is there: curr_items, and a
sample of the items (--samples) read back whole.
Standard library only.

By default both servers are started here on free ports on 127.0.0.1 and
stopped at the end, with memory enough that nothing is evicted
(--memory-mb, default 1024 for small and twice the data for mixed):

  lockcached --memory_limit_mb=M --threads=1 --lock_port=0
  memcached  -m M -t 1 -U 0 -l 127.0.0.1 -p PORT   (-u root when root)

--lockcached-port / --memcached-port use running servers instead (their PID
comes from "stats", so they must run on this machine and be readable in
/proc). Not part of ctest: see bench/README.md.
"""

import argparse
import glob
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY_SIZE = 16
VALUE_SIZE = 32
BATCH = 10000
MIB = 1024 * 1024
MIXED_VALUE_SIZES = (10, 10240)
SEND_BYTES = 4 * MIB  # the mixed workload's requests per sendall, in bytes


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_lockcached():
    candidates = [p for p in glob.glob(os.path.join(REPO, "build*", "lockcached"))
                  if os.access(p, os.X_OK)]
    if not candidates:
        sys.exit("no build*/lockcached under %s: build it or pass --lockcached" % REPO)
    return max(candidates, key=os.path.getmtime)


class Connection:
    def __init__(self, port):
        deadline = time.monotonic() + 10
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.buffer = b""

    def read_exactly(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read_until(self, terminator):
        while terminator not in self.buffer:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buffer += chunk
        end = self.buffer.index(terminator) + len(terminator)
        data, self.buffer = self.buffer[:end], self.buffer[end:]
        return data

    def stats(self):
        self.sock.sendall(b"stats\r\n")
        text = self.read_until(b"END\r\n").decode()
        return dict(re.findall(r"STAT (\S+) (\S+)", text))

    def store_range(self, first, count, value_size=VALUE_SIZE):
        """Stores key:000000000000.. with values of "v"s; checks every reply."""
        value = b"v" * value_size
        for begin in range(first, first + count, BATCH):
            end = min(begin + BATCH, first + count)
            self.sock.sendall(b"".join(
                b"set key:%012d 0 0 %d\r\n%s\r\n" % (i, value_size, value)
                for i in range(begin, end)))
            replies = self.read_exactly(8 * (end - begin))
            if replies != b"STORED\r\n" * (end - begin):
                raise RuntimeError("unexpected reply: %r" % replies[:80])

    def store_sized(self, first, sizes):
        """Stores key number first + i with a value of sizes[i] bytes of
        value_byte(first + i), SEND_BYTES of requests at a time."""
        begin = 0
        while begin < len(sizes):
            requests, length, end = [], 0, begin
            while end < len(sizes) and length < SEND_BYTES:
                request = set_request(first + end, sizes[end])
                requests.append(request)
                length += len(request)
                end += 1
            self.sock.sendall(b"".join(requests))
            replies = self.read_exactly(8 * (end - begin))
            if replies != b"STORED\r\n" * (end - begin):
                raise RuntimeError("unexpected reply: %r" % replies[:80])
            begin = end

    def get_value(self, number):
        """The value stored under key number, or None."""
        self.sock.sendall(b"get key:%012d\r\n" % number)
        line = self.read_until(b"\r\n")
        if line == b"END\r\n":
            return None
        length = int(line.split()[3])
        value = self.read_exactly(length + 2)[:length]
        if self.read_until(b"\r\n") != b"END\r\n":
            raise RuntimeError("no END after a value")
        return value

    def stats_group(self, group):
        self.sock.sendall(b"stats %s\r\n" % group.encode())
        text = self.read_until(b"END\r\n").decode()
        return dict(re.findall(r"STAT (\S+) (\S+)", text))


def value_byte(number):
    return b"abcdefghijklmnopqrstuvwxyz"[number % 26:number % 26 + 1]


def set_request(number, size):
    return b"set key:%012d 0 0 %d\r\n%s\r\n" % (number, size, value_byte(number) * size)


def mixed_sizes(data_bytes, seed):
    """Value sizes, uniform over MIXED_VALUE_SIZES, until they add up to
    data_bytes: the same list for the same arguments."""
    draw = random.Random(seed)
    sizes, total = [], 0
    while total < data_bytes:
        size = draw.randint(*MIXED_VALUE_SIZES)
        sizes.append(size)
        total += size
    return sizes


def settled_rss(pid, quiet_s=1.0, limit_s=15.0):
    """RSS once it has not changed for quiet_s (memcached grows its hash table
    in a background thread)."""
    deadline = time.monotonic() + limit_s
    last = rss_bytes(pid)
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = rss_bytes(pid)
        if now != last:
            last, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since >= quiet_s:
            break
    return last


def memory_stats(conn):
    """What the server says its memory is made of: the bytes its items
    count, what its allocator (lockcached) or slab pages (memcached) took,
    and its hash table."""
    stats = conn.stats()
    slabs = conn.stats_group("slabs")
    return {"counted": int(stats["bytes"]), "malloced": int(slabs.get("total_malloced", 0)),
            "hash": int(stats.get("hash_bytes", 0))}


def check_sample(name, conn, sizes, samples, seed):
    """Reads back `samples` items chosen with `seed`: each must be there, whole."""
    draw = random.Random(seed + 1)
    for _ in range(min(samples, len(sizes))):
        number = draw.randrange(len(sizes))
        value = conn.get_value(number)
        if value != value_byte(number) * sizes[number]:
            raise RuntimeError("%s: key:%012d is %s" % (
                name, number, "missing" if value is None else "%d bytes, not %d"
                % (len(value), sizes[number])))


def measure(name, port, sizes, samples=0, seed=0):
    """Stores items 0..len(sizes)-1, key i with a value of sizes[i] bytes,
    and reports what that did to the server's memory."""
    conn = Connection(port)
    pid = int(conn.stats()["pid"])
    warmup = 100
    # Warm up: the connection's buffers and the first allocations of each kind.
    conn.store_sized(len(sizes), sizes[:warmup])
    before = settled_rss(pid)
    before_stats = memory_stats(conn)
    items_before = int(conn.stats()["curr_items"])
    started = time.monotonic()
    conn.store_sized(0, sizes)
    seconds = time.monotonic() - started
    after = settled_rss(pid)
    after_stats = memory_stats(conn)
    stats = conn.stats()
    items = len(sizes)
    stored = int(stats["curr_items"]) - items_before
    if stored != items or int(stats.get("evictions", 0)) != 0:
        raise RuntimeError("%s holds %d of %d items (evictions %s)"
                           % (name, stored, items, stats.get("evictions")))
    check_sample(name, conn, sizes, samples, seed)
    payload = items * KEY_SIZE + sum(sizes)
    growth = {k: after_stats[k] - before_stats[k] for k in after_stats}
    return {"name": name, "pid": pid, "before": before, "after": after,
            "per_item": (after - before) / items,
            "beyond_payload": (after - before - payload) / items,
            "growth": growth, "seconds": seconds,
            "version": stats.get("version", "?")}


def start(command):
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def server_arguments(description):
    """The arguments every script that starts both servers takes."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1000000)
    parser.add_argument("--lockcached", help="binary (default: newest build*/lockcached)")
    parser.add_argument("--memcached", default=shutil.which("memcached") or "memcached")
    return parser


def print_breakdown(results, sizes):
    """Per item, the RSS growth and what each server's statistics account
    for: the payload (key, value and the value's CRLF), the rest of what
    its items count (headers), what allocator size classes or slab pages
    added to that, its hash table, and the rest of the growth (allocator
    metadata, partly used pages, overflow buckets, ...)."""
    items = len(sizes)
    payload = items * (KEY_SIZE + 2) + sum(sizes)
    print("\nper item, from each server's stats (growth over the run / items):")
    print("%-11s %9s %9s %9s %9s %9s %9s" %
          ("server", "RSS", "payload", "header", "rounding", "hash", "rest"))
    for r in results:
        g = r["growth"]
        rest = r["after"] - r["before"] - g["malloced"] - g["hash"]
        print("%-11s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f" %
              (r["name"], r["per_item"], payload / items, (g["counted"] - payload) / items,
               (g["malloced"] - g["counted"]) / items, g["hash"] / items, rest / items))


def main():
    parser = server_arguments(__doc__)
    parser.add_argument("--workload", choices=("small", "mixed"), default="small")
    parser.add_argument("--data-mb", type=int, default=2048,
                        help="mixed: MiB of values to store (default 2048)")
    parser.add_argument("--seed", type=int, default=1, help="mixed: the sizes' seed")
    parser.add_argument("--samples", type=int, default=2000,
                        help="items read back and checked (default 2000)")
    parser.add_argument("--memory-mb", type=int,
                        help="memory of the servers started here (default: 1024 for "
                             "small, twice --data-mb for mixed)")
    parser.add_argument("--lockcached-port", type=int, help="use a running lockcached")
    parser.add_argument("--memcached-port", type=int, help="use a running memcached")
    parser.add_argument("--threads", type=int, default=1,
                        help="worker threads of the servers started here (default 1)")
    parser.add_argument("--only", choices=("lockcached", "memcached"),
                        help="measure one server only")
    args = parser.parse_args()

    if args.workload == "small":
        sizes = [VALUE_SIZE] * args.items
        memory_mb = args.memory_mb or 1024
    else:
        sizes = mixed_sizes(args.data_mb * MIB, args.seed)
        memory_mb = args.memory_mb or 2 * args.data_mb

    started = []
    try:
        ports = {}
        if args.only == "memcached":
            pass
        elif args.lockcached_port:
            ports["lockcached"] = args.lockcached_port
        else:
            binary = args.lockcached or find_lockcached()
            port = free_port()
            started.append(start([binary, "--port=%d" % port, "--lock_port=0",
                                  "--listen=127.0.0.1", "--memory_limit_mb=%d" % memory_mb,
                                  "--threads=%d" % args.threads]))
            ports["lockcached"] = port
        if args.only == "lockcached":
            pass
        elif args.memcached_port:
            ports["memcached"] = args.memcached_port
        else:
            port = free_port()
            command = [args.memcached, "-m", str(memory_mb), "-t", str(args.threads),
                       "-U", "0", "-l", "127.0.0.1", "-p", str(port)]
            if os.geteuid() == 0:
                command += ["-u", "root"]
            started.append(start(command))
            ports["memcached"] = port

        results = [measure(name, port, sizes, args.samples, args.seed)
                   for name, port in ports.items()]
    finally:
        for process in started:
            process.terminate()
            process.wait()

    items = len(sizes)
    if args.workload == "small":
        print("%d items, %d-byte keys, %d-byte values, %d read back\n"
              % (items, KEY_SIZE, VALUE_SIZE, min(args.samples, items)))
    else:
        print("%d items, %d-byte keys, values of %d..%d bytes (uniform, seed %d), "
              "%.1f MiB of values\n"
              % (items, KEY_SIZE, MIXED_VALUE_SIZES[0], MIXED_VALUE_SIZES[1], args.seed,
                 sum(sizes) / MIB))
    print("%-11s %-24s %11s %11s %11s %12s %7s" %
          ("server", "version", "RSS before", "RSS after", "bytes/item", "beyond k+v",
           "load s"))
    for r in results:
        print("%-11s %-24s %7.1f MiB %7.1f MiB %11.1f %12.1f %7.1f" %
              (r["name"], r["version"], r["before"] / MIB, r["after"] / MIB, r["per_item"],
               r["beyond_payload"], r["seconds"]))
    if len(results) == 2:
        print("\nlockcached / memcached: %.3f (RSS growth)"
              % (results[0]["per_item"] / results[1]["per_item"]))
    print_breakdown(results, sizes)


if __name__ == "__main__":
    main()
