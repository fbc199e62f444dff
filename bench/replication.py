#!/usr/bin/env python3
"""What replication costs the master, side by side in one run (issue 16):

  workload1    workload 1 (32 connections, depth 1, 90% get / 10% set,
               32 B values, 100,000 keys, lockcached-loadgen) against a
               master with one replica attached and with none;
  memcaslap    the same comparison with memcaslap (libmemcached-tools), a
               load generator this project did not write, in workload 1's
               shape (32 concurrent, 16-byte keys, 32 B values, 10% sets):
               the cross-check of workload1's ratio;
  sync         how long a new replica takes to receive one million items.

Only the cache is replicated (--virtual_ip does not replicate the lock
service since issue 30; bench/lock_compare.py measures a Raft cluster's).

The first two run in paired rounds (both setups back to back, the order
alternating) and report medians, and as the ratio the median of the
per-round ratios (one replica / none), as bench/compare does: on a machine
whose speed drifts, a ratio within a round is steadier than a ratio of two
medians.

Before every "one replica" run the script waits until the master reports
`replicas 1` and `replica:0:state streaming` and the replica holds as many
items as the master; after it, it checks that the replica is still attached
and streaming, and that the master dropped no replica
(`replicas_dropped`). A "none" run checks `replicas 0`. Any error reply the load
generators saw fails the run.

As root (network namespaces, as test/ha does: the master holds the virtual
IP in one, the replica runs in another, the load generator in a third),
after building build/lockcached and build/bench/lockcached-loadgen:

    python3 bench/replication.py [--rounds 5] [--duration 10] [--items 1000000]
                                 [--only workload1,memcaslap,sync]

The master (`--threads=1`) is pinned to CPU 0; with 3 CPUs or more the
replica gets CPU 1 and the load generator the rest, on 2 CPUs they share
CPU 1 (so there the replica's acks compete with the load generator for
it). Prints a Markdown table for bench/RESULTS.md.
"""

import argparse
import json
import os
import re
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
NONE, ONE = "none", "one replica"
PARTS = ("workload1", "memcaslap", "sync")
# memcaslap's config: 16-byte keys, 32 B values, 10% sets, 90% gets (as bench/compare).
MEMCASLAP_CONFIG = "key\n16 16 1\nvalue\n32 32 1\ncmd\n0 0.1\n1 0.9\n"


def cpus():
    """CPUs of the master, the replica and the load generator."""
    count = os.cpu_count() or 1
    if count >= 3:
        return "0", "1", ",".join(str(c) for c in range(2, count))
    other = "1" if count == 2 else "0"
    return "0", other, other


def process_cpu_seconds(pid):
    """utime + stime of a process (/proc/PID/stat), as the load generator reads it."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setups(round_number):
    return [NONE, ONE] if round_number % 2 == 0 else [ONE, NONE]


class Bench:
    def __init__(self, cluster, build, work, memory_mb):
        self.cluster = cluster
        self.build = build
        self.work = work
        master_cpu, replica_cpus, loadgen_cpus = cpus()
        self.pin = {MASTER: master_cpu, REPLICA: replica_cpus, LOADGEN: loadgen_cpus}
        # Later flags win: one thread, as bench/compare runs every server.
        self.servers = haclient.Servers(
            cluster, os.path.join(build, "lockcached"), work,
            ["--threads=1", "--memory_limit_mb=%d" % memory_mb, "--repl_buffer_size=256",
             "--logtostderr=false", "--log_dir=" + work])

    def start(self, node):
        self.servers.start(node, prefix=["taskset", "-c", self.pin[node]])

    def fresh_master(self):
        """A new master with an empty store, no replica."""
        if REPLICA in self.servers.processes:
            self.servers.kill(REPLICA)
        if MASTER in self.servers.processes:
            self.servers.kill(MASTER)
        self.start(MASTER)

    def master_pid(self):
        # `ip netns exec` execs taskset, which execs lockcached: one pid.
        return self.servers.processes[MASTER].pid

    def loadgen(self, *flags, port=haclient.CACHE_PORT):
        command = ["taskset", "-c", self.pin[LOADGEN], os.path.join(self.build, "bench",
                                                                      "lockcached-loadgen"),
                   "--host=" + self.cluster.vip, "--port=%d" % port, "--quiet",
                   "--server_pid=%d" % self.master_pid()] + list(flags)
        out = self.cluster.exec(LOADGEN, command, capture_output=True, text=True)
        results = [json.loads(line[len("RESULT "):]) for line in out.stdout.splitlines()
                   if line.startswith("RESULT ")]
        if out.returncode != 0 or not results:
            raise AssertionError("the load generator failed (exit %d): %s %s"
                                 % (out.returncode, out.stdout[-500:], out.stderr[-500:]))
        result = results[-1]
        if result["errors"] or result["mismatches"]:
            raise AssertionError("the load generator saw errors: %s" % result)
        return result

    def memcaslap(self, duration):
        """One memcaslap run against the virtual IP from the load generator's
        node; its requests/s and the master's CPU per request over the run."""
        config = os.path.join(self.work, "memcaslap.cfg")
        with open(config, "w") as f:
            f.write(MEMCASLAP_CONFIG)
        command = ["taskset", "-c", self.pin[LOADGEN].split(",")[0], "memcaslap",
                   "-s", "%s:%d" % (self.cluster.vip, haclient.CACHE_PORT), "-T", "1",
                   "-c", "32", "-t", "%ds" % max(1, round(duration)), "-F", config]
        cpu_before = process_cpu_seconds(self.master_pid())
        out = self.cluster.exec(LOADGEN, command, capture_output=True, text=True,
                                timeout=duration + 60)
        cpu = process_cpu_seconds(self.master_pid()) - cpu_before
        total = re.search(r"Run time: ([\d.]+)s Ops: (\d+) TPS: (\d+)", out.stdout)
        errors = re.findall(r"(?m)^.*(?:SERVER_ERROR|CLIENT_ERROR|ERROR|[Ff]ail).*$",
                            out.stdout + out.stderr)
        if out.returncode != 0 or not total or errors:
            raise AssertionError("memcaslap failed (exit %d): %s %s"
                                 % (out.returncode, (errors[:3] or [out.stdout[-500:]]),
                                    out.stderr[-500:]))
        ops = int(total.group(2))
        misses = re.search(r"get_misses: (\d+)", out.stdout)
        return {"ops_per_s": float(total.group(3)), "ops": ops,
                "server_cpu_us_per_op": cpu * 1e6 / ops,
                "get_misses": int(misses.group(1)) if misses else -1}

    def items(self, node):
        c = haclient.client(self.cluster, node, self.cluster.addresses[node])
        try:
            return int(c.stats()["curr_items"])
        finally:
            c.close()

    def replica_streaming(self, items=None):
        """One replica attached and streaming, holding `items` items (by
        default as many as the master: call it while the master is idle)."""
        stats = self.servers.replication(MASTER)
        if items is None:
            items = self.items(MASTER)
        return (stats.get("replicas") == "1" and stats.get("replica:0:state") == "streaming"
                and self.items(REPLICA) == items)

    def attach_replica(self, timeout=60):
        self.start(REPLICA)
        haclient.eventually(lambda: self.replica_streaming(), timeout, "the replica is in sync")

    def detach_replica(self):
        self.servers.kill(REPLICA)
        haclient.eventually(lambda: self.servers.replication(MASTER)["replicas"] == "0",
                            30, "the master lets the replica go")

    def counters(self, setup):
        """The master's replication counters before a run of `setup`, checked."""
        master = self.servers.replication(MASTER)
        counters = {"dropped": int(master["replicas_dropped"])}
        if setup == NONE:
            if master["replicas"] != "0":
                raise AssertionError("a replica is attached in a 'none' run: %s" % master)
            return counters
        if master["replicas"] != "1" or master["replica:0:state"] != "streaming":
            raise AssertionError("the replica is not streaming: %s" % master)
        counters["bytes_acked"] = int(master["replica:0:bytes_acked"])
        return counters

    def check_after(self, setup, before):
        """The setup held through the run: returns the replica's progress."""
        after = self.counters(setup)  # raises when the replica left or a replica came
        if after["dropped"] != before["dropped"]:
            raise AssertionError("the master dropped a replica during the run: before %s, "
                                 "after %s" % (before, after))
        if setup == NONE:
            return {}
        return {"bytes_acked": after["bytes_acked"] - before["bytes_acked"]}


def paired_rounds(bench, rounds, run, describe, fresh_master=False):
    """Runs both setups each round, the order alternating: run() gives a
    result, describe(result, progress) is the round's line. Before each run
    the setup is checked (bench.counters), after it that it held
    (bench.check_after), and the replica must then hold what the master
    holds."""
    results = {NONE: [], ONE: []}
    for round_number in range(rounds):
        for setup in setups(round_number):
            if fresh_master:
                bench.fresh_master()
            if setup == ONE:
                bench.attach_replica()
            before = bench.counters(setup)
            result = run()
            progress = bench.check_after(setup, before)
            if setup == ONE:
                haclient.eventually(lambda: bench.replica_streaming(), 30,
                                    "the replica caught up after the run")
                bench.detach_replica()
            results[setup].append(result)
            print("  round %d, %s: %s" % (round_number + 1, setup, describe(result, progress)),
                  flush=True)
    return results


def acked(progress):
    return ", replica acked %d bytes" % progress["bytes_acked"] if progress else ""


def workload_one(bench, rounds, duration):
    flags = ["--connections=32", "--depth=1", "--get_ratio=0.9", "--value_size=32",
             "--keys=100000", "--duration_s=%g" % duration]
    bench.fresh_master()
    bench.loadgen("--preload_only", "--keys=100000", "--value_size=32")
    results = paired_rounds(
        bench, rounds, lambda: bench.loadgen("--preload=false", *flags),
        lambda result, progress: "%.0f requests/s, master %.2f us CPU/request, "
        "load generator %.0f%% busy%s"
        % (result["ops_per_s"], result["server_cpu_us_per_op"],
           100 * result["loadgen_cpu_s"] / result["seconds"], acked(progress)))
    bench.loadgen("--preload=false", "--ops=1")  # the master still serves
    return results


def memcaslap_rounds(bench, rounds, duration):
    """Workload 1's ratio again, with memcaslap. Every run starts a fresh
    master: memcaslap stores its own keys as it goes, so both setups start
    from the same empty store."""
    return paired_rounds(
        bench, rounds, lambda: bench.memcaslap(duration),
        lambda result, progress: "%.0f requests/s, master %.2f us CPU/request, "
        "%d get misses, %d items%s"
        % (result["ops_per_s"], result["server_cpu_us_per_op"], result["get_misses"],
           bench.items(MASTER), acked(progress)),
        fresh_master=True)


def time_to_sync(bench, items):
    bench.fresh_master()  # an empty store to fill
    bench.loadgen("--preload_only", "--keys=%d" % items, "--value_size=32")
    started = time.monotonic()
    bench.start(REPLICA)
    haclient.eventually(lambda: bench.replica_streaming(items), 600, "the replica is in sync")
    return time.monotonic() - started


def paired(results, key):
    """Medians of both setups and the median of the per-round ratios."""
    none = [r[key] for r in results[NONE]]
    one = [r[key] for r in results[ONE]]
    return (statistics.median(none), statistics.median(one),
            statistics.median(o / n for o, n in zip(one, none)))


def parse_parts(text):
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise argparse.ArgumentTypeError("parts are %s" % ", ".join(PARTS))
    return parts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--items", type=int, default=1000000,
                        help="items for the sync part (default 1,000,000)")
    parser.add_argument("--only", type=parse_parts, default=list(PARTS),
                        help="comma-separated parts to run: %s (default: all)" % ",".join(PARTS))
    parser.add_argument("--build-dir", default=os.path.join(HERE, "..", "build"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/replication.py needs root (network namespaces)")
    build = os.path.abspath(args.build_dir)
    rows = []
    sync_seconds = None
    with tempfile.TemporaryDirectory() as work, netns.Cluster(3) as cluster:
        cluster.add_address(MASTER, cluster.vip)
        bench = Bench(cluster, build, work, 1024)
        try:
            if "workload1" in args.only:
                print("workload 1, %d paired rounds of %g s:" % (args.rounds, args.duration))
                results = workload_one(bench, args.rounds, args.duration)
                rows.append(("workload 1: requests/s", "%.0f",
                             paired(results, "ops_per_s")))
                rows.append(("workload 1: master CPU per request (us)", "%.2f",
                             paired(results, "server_cpu_us_per_op")))
            if "memcaslap" in args.only:
                print("workload 1 with memcaslap, %d paired rounds of %d s:"
                      % (args.rounds, max(1, round(args.duration))))
                results = memcaslap_rounds(bench, args.rounds, args.duration)
                rows.append(("workload 1, memcaslap: requests/s", "%.0f",
                             paired(results, "ops_per_s")))
                rows.append(("workload 1, memcaslap: master CPU per request (us)", "%.2f",
                             paired(results, "server_cpu_us_per_op")))
            if "sync" in args.only:
                sync_seconds = time_to_sync(bench, args.items)
        finally:
            bench.servers.close()
    machine = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
    master_cpu, replica_cpus, loadgen_cpus = cpus()
    print()
    print("Machine: %d CPUs, %s; master on CPU %s, replica on CPU %s, load generator on CPU %s."
          % (os.cpu_count(), machine, master_cpu, replica_cpus, loadgen_cpus))
    if rows:
        print()
        print("| medians of %d paired rounds | no replica | one replica | ratio |" % args.rounds)
        print("| --- | --- | --- | --- |")
        for label, fmt, (none, one, ratio) in rows:
            print("| %s | %s | %s | %.2f |" % (label, fmt % none, fmt % one, ratio))
        print()
        print("ratio: the median of the per-round ratios, one replica / none.")
    if sync_seconds is not None:
        print()
        print("Time for a new replica to receive %d items (32 B values): %.1f s"
              % (args.items, sync_seconds))


if __name__ == "__main__":
    main()
