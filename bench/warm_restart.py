#!/usr/bin/env python3
"""Warm restart: lockcached's --memory_file against memcached's -e.

Fills each server with N items (default 1,000,000) of 16-byte keys and
100-byte values, stops it gracefully (SIGUSR1), starts it again on the same
file and reports:

  stop s     SIGUSR1 sent -> the process has exited (the file is written),
             and the CPU seconds the process spent on it
  start s    the new process spawned -> it answers a get of the last key
             stored (the file is loaded; lockcached takes connections into
             the kernel's backlog meanwhile, memcached only binds after),
             and the CPU seconds the process spent until then
  cold s     the same start with no file, for comparison
  TERM s     SIGTERM to the restarted server, holding the same items: a stop
             that writes nothing, for comparison

CPU seconds do not depend on what else runs on the machine; wall seconds do.
  RSS        settled resident set before the stop and after the restart
  file       the memory file's size

and checks that every item came back (curr_items, and a sample of values).
Standard library only; needs Debian's `memcached` and a built lockcached.

  python3 bench/warm_restart.py                      # files in /dev/shm
  python3 bench/warm_restart.py --dir /var/tmp       # lockcached's on disk
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_per_item import (Connection, find_lockcached, free_port,  # noqa: E402
                             server_arguments, settled_rss)

VALUE_SIZE = 100
MIB = 1024 * 1024


def lockcached_command(binary, port, path):
    return [binary, "--port=%d" % port, "--lock_port=0", "--listen=127.0.0.1",
            "--memory_limit_mb=1024", "--threads=1", "--memory_file=" + path]


def memcached_command(binary, port, path):
    command = [binary, "-m", "1024", "-t", "1", "-U", "0", "-l", "127.0.0.1",
               "-p", str(port), "-e", path]
    if os.geteuid() == 0:
        command += ["-u", "root"]
    return command


def cpu_seconds(pid):
    """User + system CPU the process has used so far (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_and_get(command, port, key):
    """Spawns the server and asks for `key`: (wall s, CPU s) until the
    answer, the process, the connection and the answer."""
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conn = Connection(port)
    conn.sock.sendall(b"get " + key + b"\r\n")
    reply = conn.read_until(b"END\r\n")
    return (time.monotonic() - started, cpu_seconds(process.pid)), process, conn, reply


def stop(process, sig):
    """Sends `sig`: (wall s, CPU s) until the process has exited."""
    started = time.monotonic()
    cpu_before = cpu_seconds(process.pid)
    process.send_signal(sig)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError("exit status %d" % process.returncode)
    return time.monotonic() - started, usage.ru_utime + usage.ru_stime - cpu_before


def measure(name, make_command, path, items):
    port = free_port()
    command = make_command(port, path)
    last_key = b"key:%012d" % (items - 1)
    if os.path.exists(path):
        os.remove(path)

    cold, process, conn, _ = start_and_get(command, port, last_key)
    pid = process.pid
    conn.store_range(0, items, VALUE_SIZE)
    before = settled_rss(pid)
    stopped = stop(process, signal.SIGUSR1)
    file_size = os.path.getsize(path)
    # memcached 1.6.18 refuses its file within the second of its stop
    # ("restart incompatible due to setting for [stop_time]"); both get the
    # same pause, outside what is timed.
    time.sleep(1.1)

    warm, process, conn, reply = start_and_get(command, port, last_key)
    expected = b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (last_key, VALUE_SIZE, b"v" * VALUE_SIZE)
    if reply != expected:
        raise RuntimeError("%s: the last key after the restart: %r" % (name, reply[:80]))
    after = settled_rss(process.pid)
    stats = conn.stats()
    for i in range(0, items, max(1, items // 1000)):
        key = b"key:%012d" % i
        conn.sock.sendall(b"get " + key + b"\r\n")
        if conn.read_until(b"END\r\n") != b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (
                key, VALUE_SIZE, b"v" * VALUE_SIZE):
            raise RuntimeError("%s: %s is not back" % (name, key.decode()))
    if int(stats["curr_items"]) != items:
        raise RuntimeError("%s holds %s of %d items after the restart" %
                           (name, stats["curr_items"], items))
    terminated = stop(process, signal.SIGTERM)
    if os.path.exists(path):
        os.remove(path)
    return {"name": name, "version": stats.get("version", "?"), "stop": stopped,
            "start": warm, "cold": cold, "term": terminated, "before": before, "after": after,
            "file": file_size}


def main():
    parser = server_arguments(__doc__)
    parser.add_argument("--dir", default="/dev/shm", help="where lockcached's file goes")
    parser.add_argument("--no-memcached", action="store_true")
    args = parser.parse_args()

    binary = args.lockcached or find_lockcached()
    results = []
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        results.append(measure("lockcached", lambda port, path: lockcached_command(
            binary, port, path), os.path.join(directory, "cache"), args.items))
    if not args.no_memcached:
        # memcached maps its file: it belongs on a tmpfs.
        with tempfile.TemporaryDirectory(dir="/dev/shm") as directory:
            results.append(measure("memcached", lambda port, path: memcached_command(
                args.memcached, port, path), os.path.join(directory, "cache"), args.items))

    print("%d items, 16-byte keys, %d-byte values; lockcached's file in %s\n" %
          (args.items, VALUE_SIZE, args.dir))
    columns = ("stop", "start", "cold", "term")
    print("%-11s %-24s %13s %13s %13s %13s %11s %11s %9s" %
          (("server", "version") + tuple("%s s (CPU)" % c for c in columns) +
           ("RSS before", "RSS after", "file MiB")))
    for r in results:
        print("%-11s %-24s %13s %13s %13s %13s %7.1f MiB %7.1f MiB %9.1f" %
              ((r["name"], r["version"]) + tuple("%.2f (%.2f)" % r[c] for c in columns) +
               (r["before"] / MIB, r["after"] / MIB, r["file"] / MIB)))


if __name__ == "__main__":
    main()
