#!/usr/bin/env python3
"""What replication costs the master, side by side in one run (issue 16):

  1. workload 1 (32 connections, depth 1, 90% get / 10% set, 32 B values,
     100,000 keys) against a master with one replica attached and with none,
     in paired rounds (the order alternates); medians of the throughput and
     of the master's CPU per request;
  2. how long a new replica takes to receive one million items.

As root (network namespaces, as test/ha does: the master holds the virtual
IP in one, the replica runs in another, the load generator in a third),
after building build/lockcached and build/bench/lockcached-loadgen:

    python3 bench/replication.py [--rounds 5] [--duration 10] [--items 1000000]

The master is pinned to CPU 0, the replica and the load generator to the
others, as bench/compare pins servers. Prints a Markdown table for
bench/RESULTS.md.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "ha"))
import haclient  # noqa: E402
import netns  # noqa: E402

MASTER, REPLICA, LOADGEN = 0, 1, 2


def cpus():
    count = os.cpu_count() or 1
    return "0", ",".join(str(c) for c in range(1, count)) or "0"


class Bench:
    def __init__(self, cluster, build, work, memory_mb):
        self.cluster = cluster
        self.build = build
        server_cpu, other_cpus = cpus()
        self.pin = {MASTER: server_cpu, REPLICA: other_cpus, LOADGEN: other_cpus}
        # Later flags win: one thread, as bench/compare runs every server.
        self.servers = haclient.Servers(
            cluster, os.path.join(build, "lockcached"), work,
            ["--threads=1", "--memory_limit_mb=%d" % memory_mb, "--repl_buffer_size=256",
             "--logtostderr=false", "--log_dir=" + work])

    def start(self, node):
        self.servers.start(node, prefix=["taskset", "-c", self.pin[node]])

    def master_pid(self):
        # `ip netns exec` execs taskset, which execs lockcached: one pid.
        return self.servers.processes[MASTER].pid

    def loadgen(self, *flags):
        command = ["taskset", "-c", self.pin[LOADGEN], os.path.join(self.build, "bench",
                                                                      "lockcached-loadgen"),
                   "--host=" + self.cluster.vip, "--port=%d" % haclient.CACHE_PORT, "--quiet",
                   "--server_pid=%d" % self.master_pid()] + list(flags)
        out = self.cluster.exec(LOADGEN, command, capture_output=True, text=True, check=True)
        results = [json.loads(line[len("RESULT "):]) for line in out.stdout.splitlines()
                   if line.startswith("RESULT ")]
        return results[-1]

    def replica_streaming(self, items):
        stats = self.servers.replication(MASTER)
        return (stats.get("replicas") == "1" and stats.get("replica:0:state") == "streaming"
                and int(self.servers.client(REPLICA).stats()["curr_items"]) == items)


def workload_one(bench, rounds, duration):
    flags = ["--connections=32", "--depth=1", "--get_ratio=0.9", "--value_size=32",
             "--keys=100000", "--duration_s=%g" % duration]
    bench.loadgen("--preload_only", "--keys=100000", "--value_size=32")
    results = {"none": [], "one replica": []}
    for round_number in range(rounds):
        order = ["none", "one replica"] if round_number % 2 == 0 else ["one replica", "none"]
        for setup in order:
            if setup == "one replica":
                bench.start(REPLICA)
                haclient.eventually(lambda: bench.replica_streaming(100000), 60,
                                    "the replica is in sync")
            result = bench.loadgen("--preload=false", *flags)
            if result["errors"] or result["mismatches"]:
                raise AssertionError("the load generator saw errors: %s" % result)
            results[setup].append(result)
            if setup == "one replica":
                bench.servers.kill(REPLICA)
                haclient.eventually(lambda: bench.servers.replication(MASTER)["replicas"] == "0",
                                    30, "the master lets the replica go")
            print("  round %d, %s: %.0f requests/s, master %.2f us CPU/request"
                  % (round_number + 1, setup, result["ops_per_s"],
                     result["server_cpu_us_per_op"]), flush=True)
    return results


def time_to_sync(bench, items):
    bench.loadgen("--preload_only", "--keys=%d" % items, "--value_size=32")
    started = time.monotonic()
    bench.start(REPLICA)
    haclient.eventually(lambda: bench.replica_streaming(items), 600, "the replica is in sync")
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--items", type=int, default=1000000)
    parser.add_argument("--build-dir", default=os.path.join(HERE, "..", "build"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/replication.py needs root (network namespaces)")
    build = os.path.abspath(args.build_dir)
    with tempfile.TemporaryDirectory() as work, netns.Cluster(3) as cluster:
        cluster.add_address(MASTER, cluster.vip)
        bench = Bench(cluster, build, work, 1024)
        try:
            bench.start(MASTER)
            print("workload 1, %d paired rounds of %g s:" % (args.rounds, args.duration))
            results = workload_one(bench, args.rounds, args.duration)
            bench.loadgen("--preload=false", "--ops=1")  # the master still serves
            with_none = statistics.median(r["ops_per_s"] for r in results["none"])
            with_one = statistics.median(r["ops_per_s"] for r in results["one replica"])
            cpu_none = statistics.median(r["server_cpu_us_per_op"] for r in results["none"])
            cpu_one = statistics.median(r["server_cpu_us_per_op"]
                                        for r in results["one replica"])
            # A fresh master for the sync: an empty store to fill.
            bench.servers.kill(MASTER)
            bench.start(MASTER)
            sync_seconds = time_to_sync(bench, args.items)
        finally:
            bench.servers.close()
    machine = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
    print()
    print("Machine: %d CPUs, %s; master on CPU 0, replica and load generator on the others."
          % (os.cpu_count(), machine))
    print()
    print("| workload 1, medians of %d paired rounds | no replica | one replica | ratio |"
          % args.rounds)
    print("| --- | --- | --- | --- |")
    print("| requests/s | %.0f | %.0f | %.2f |" % (with_none, with_one, with_one / with_none))
    print("| master CPU per request (us) | %.2f | %.2f | %.2f |"
          % (cpu_none, cpu_one, cpu_one / cpu_none))
    print()
    print("Time for a new replica to receive %d items (32 B values): %.1f s"
          % (args.items, sync_seconds))


if __name__ == "__main__":
    main()
