#!/usr/bin/env python3
"""bench/watch_cost.py: what a `watch` that stopped reading costs the server.

Paired rounds of workload 1 (bench/compare, one server thread pinned to CPU
0, the load generator on CPU 1): a plain server, then one with a
`watch fetchers mutations` connection that never reads (a 4 KiB receive
buffer). Every get and set then formats a log line that the full watcher
buffer drops (counted in log_watcher_skipped). Prints each round and the
median ratios watched/plain of throughput and of server CPU per request.

  python3 bench/watch_cost.py [--rounds 5] [--duration 5]
"""
import argparse
import importlib.machinery
import importlib.util
import json
import socket
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOADER = importlib.machinery.SourceFileLoader("compare", str(REPO / "bench/compare"))
compare = importlib.util.module_from_spec(importlib.util.spec_from_loader("compare", LOADER))
LOADER.exec_module(compare)


def connect(port):
    deadline = time.monotonic() + 10
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), 0.5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def stats(port):
    with connect(port) as client:
        client.sendall(b"stats\r\n")
        reply = b""
        while not reply.endswith(b"END\r\n"):
            reply += client.recv(65536)
    return dict(line.split(" ")[1:3] for line in reply.decode().split("\r\n")
                if line.startswith("STAT "))


def one_run(binary, loadgen, duration, watched):
    port = compare.free_port()
    server = subprocess.Popen(["taskset", "-c", "0", binary, "--threads=1", f"--port={port}",
                               "--lock_port=0", "--listen=127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watcher = None
    try:
        connect(port).close()
        if watched:
            watcher = socket.socket()
            watcher.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            watcher.connect(("127.0.0.1", port))
            watcher.sendall(b"watch fetchers mutations\r\n")
        common = [loadgen, f"--port={port}", *compare.base()]
        subprocess.run(common + ["--preload_only", "--quiet"], check=True,
                       stdout=subprocess.DEVNULL)
        done = subprocess.run(["taskset", "-c", "1", *common, "--preload=false", "--quiet",
                               f"--server_pid={server.pid}", f"--duration_s={duration}"],
                              check=True, capture_output=True, text=True)
        result = json.loads(done.stdout.split("RESULT ", 1)[1])
        skipped = int(stats(port)["log_watcher_skipped"])
        return result["ops_per_s"], result["server_cpu_us_per_op"], skipped
    finally:
        if watcher:
            watcher.close()
        server.terminate()
        server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--binary", default=str(REPO / "build/lockcached"))
    parser.add_argument("--loadgen", default=str(REPO / "build/bench/lockcached-loadgen"))
    options = parser.parse_args()
    by_ops, by_cpu = [], []
    for round_no in range(options.rounds):
        plain = one_run(options.binary, options.loadgen, options.duration, False)
        watched = one_run(options.binary, options.loadgen, options.duration, True)
        print(f"round {round_no + 1}: plain {plain[0]:,.0f}/s {plain[1]:.2f} us, "
              f"watched {watched[0]:,.0f}/s {watched[1]:.2f} us, {watched[2]:,} lines dropped",
              flush=True)
        by_ops.append(watched[0] / plain[0])
        by_cpu.append(watched[1] / plain[1])
    print(f"median watched/plain: requests/s {statistics.median(by_ops):.3f}, "
          f"server CPU per request {statistics.median(by_cpu):.3f}")


if __name__ == "__main__":
    main()
