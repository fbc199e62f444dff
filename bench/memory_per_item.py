#!/usr/bin/env python3
"""Memory per item: lockcached against memcached, 1M small items each.

Stores N items (default 1,000,000) with 16-byte keys and 32-byte values into
each server over the text protocol and reports how much the server's resident
set (VmRSS in /proc/PID/status) grew per item. Standard library only.

By default both servers are started here on free ports on 127.0.0.1 and
stopped at the end:

  lockcached --memory_limit_mb=1024 --threads=1 --lock_port=0
  memcached  -m 1024 -t 1 -U 0 -l 127.0.0.1 -p PORT   (-u root when root)

--lockcached-port / --memcached-port use running servers instead (their PID
comes from "stats", so they must run on this machine and be readable in
/proc). Not part of ctest: see bench/README.md.
"""

import argparse
import glob
import os
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


def measure(name, port, items):
    conn = Connection(port)
    pid = int(conn.stats()["pid"])
    # Warm up: the connection's buffers and the first allocations of each kind.
    conn.store_range(items, 100)
    before = settled_rss(pid)
    started = time.monotonic()
    conn.store_range(0, items)
    seconds = time.monotonic() - started
    after = settled_rss(pid)
    stats = conn.stats()
    stored = int(stats["curr_items"]) - 100
    if stored != items or int(stats.get("evictions", 0)) != 0:
        raise RuntimeError("%s holds %d of %d items (evictions %s)"
                           % (name, stored, items, stats.get("evictions")))
    return {"name": name, "pid": pid, "before": before, "after": after,
            "per_item": (after - before) / items, "seconds": seconds,
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


def main():
    parser = server_arguments(__doc__)
    parser.add_argument("--lockcached-port", type=int, help="use a running lockcached")
    parser.add_argument("--memcached-port", type=int, help="use a running memcached")
    parser.add_argument("--threads", type=int, default=1,
                        help="worker threads of the servers started here (default 1)")
    args = parser.parse_args()

    started = []
    try:
        ports = {}
        if args.lockcached_port:
            ports["lockcached"] = args.lockcached_port
        else:
            binary = args.lockcached or find_lockcached()
            port = free_port()
            started.append(start([binary, "--port=%d" % port, "--lock_port=0",
                                  "--listen=127.0.0.1", "--memory_limit_mb=1024",
                                  "--threads=%d" % args.threads]))
            ports["lockcached"] = port
        if args.memcached_port:
            ports["memcached"] = args.memcached_port
        else:
            port = free_port()
            command = [args.memcached, "-m", "1024", "-t", str(args.threads), "-U", "0",
                       "-l", "127.0.0.1", "-p", str(port)]
            if os.geteuid() == 0:
                command += ["-u", "root"]
            started.append(start(command))
            ports["memcached"] = port

        results = [measure(name, port, args.items) for name, port in ports.items()]
    finally:
        for process in started:
            process.terminate()
            process.wait()

    mib = 1024 * 1024
    print("%d items, %d-byte keys, %d-byte values\n" % (args.items, KEY_SIZE, VALUE_SIZE))
    print("%-11s %-24s %11s %11s %11s %7s" %
          ("server", "version", "RSS before", "RSS after", "bytes/item", "load s"))
    for r in results:
        print("%-11s %-24s %7.1f MiB %7.1f MiB %11.1f %7.1f" %
              (r["name"], r["version"], r["before"] / mib, r["after"] / mib, r["per_item"],
               r["seconds"]))
    if len(results) == 2:
        print("\nlockcached / memcached: %.2f" % (results[0]["per_item"] / results[1]["per_item"]))


if __name__ == "__main__":
    main()
