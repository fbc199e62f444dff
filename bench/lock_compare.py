#!/usr/bin/env python3
"""The lock service on a 3-node Raft cluster, against a single server, etcd
and Redis, side by side in one run (issue 30's performance targets).

Systems, each started afresh for every run, in network namespaces on one
private bridge (test/ha/netns.py: TEST-NET-1 addresses, no route out); the
load generator runs in a namespace of its own, so every system is reached
over the same veth bridge:

  lockcached       one server (`--threads=1`), no --cluster;
  lockcached-raft  three nodes (`--cluster`, `--threads=1` each, default
                   election timeout), the load generator on the leader;
  etcd             three members (Debian's etcd-server), the load generator
                   on the leader, its v3 lock API through the JSON gateway:
                   one lease per connection, then lock + unlock;
  redis            a primary and one replica (Debian's redis-server, no
                   RDB or AOF: the replica is the copy), lock = SET NX PX
                   30000 + WAIT 1, unlock = a compare-and-delete script
                   (EVALSHA) + WAIT 1.

Workloads, all with lockcached-loadgen (bench/loadgen, --protocol=text,
etcd or redis: one engine, the same 32 connections at depth 1, the same
names):

  a   lock + unlock, distinct names per connection (never contended);
  b   lock + unlock on 10 hot names: lockcached's `lock NAME 10` and etcd's
      lock call wait in a queue; a Redis client sends a refused SET NX
      again at once (Redis has no waiting);
  w1  bench/compare's workload 1 (90% get / 10% set, 32 B values, 100,000
      keys, preloaded) on the cluster's leader against a single server.

Rounds alternate the systems (A B C D A B C D ...); tables give medians,
and every ratio is the median of the per-round ratios. CPU: the leader (or
primary, or the single server) runs on CPU 0, every other server process
and the load generator on the other CPUs; CPU per operation is utime +
stime of every server process of the system (all nodes, /proc/PID/stat)
over the measured window, divided by lock+unlock cycles (w1: requests).
Beside it, per lock+unlock: Raft entries the lockcached leader committed
(commit_index), and etcd's proposals committed and WAL fsyncs (/metrics).

As root, with a built build/lockcached and build/bench/lockcached-loadgen,
and Debian's etcd-server, redis-server and redis-tools (redis-benchmark:
an independent cross-check of the Redis number; etcd has no packaged
benchmark tool):

    python3 bench/lock_compare.py [--rounds 3] [--duration 5] [--workloads a,b,w1]

It prints every run, then a Markdown table and the targets.
"""

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "ha"))
import haclient  # noqa: E402
import netns  # noqa: E402

SERVER_NODES = 3
CLIENT = SERVER_NODES  # the load generator's namespace
RAFT_PORT = 11500
ETCD_CLIENT_PORT, ETCD_PEER_PORT = 2379, 2380
REDIS_PORT = 6379
CONNECTIONS = 32
HOT_NAMES = 10
READY_S = 30

LC1, LC3, ETCD, REDIS = "lockcached", "lockcached-raft", "etcd", "redis"
WORKLOADS = {
    "a": ("lock + unlock, distinct names per connection", (LC1, LC3, ETCD, REDIS), []),
    "b": ("lock + unlock, %d hot names (waiters queue)" % HOT_NAMES, (LC1, LC3, ETCD, REDIS),
          ["--hot_names=%d" % HOT_NAMES]),
    "w1": ("workload 1: 90% get / 10% set, 32 B (requests/s)", (LC1, LC3),
           ["--mode=kv", "--get_ratio=0.9", "--value_size=32", "--keys=100000"]),
}


def log(text):
    print(text, flush=True)


def cpus():
    """(CPU of the leader, CPUs of everything else)."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        return str(available[0]), str(available[0])
    return str(available[0]), ",".join(map(str, available[1:]))


def wait_until(condition, what, timeout=READY_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except (OSError, ValueError, KeyError, ConnectionError):
            value = None
        if value is not None and value is not False:
            return value
        time.sleep(0.1)
    raise RuntimeError("timed out waiting for " + what)


def process_cpu_us(pid):
    """utime + stime of a process in microseconds, as the load generator reads it."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1e6 / os.sysconf("SC_CLK_TCK")


def disk_counts(path):
    """Writes and flushes the block device under `path` completed
    (/sys/dev/block/M:m/stat, fields 5 and 16): every durable write of
    every node, whether by fsync, O_DSYNC or O_DIRECT with FUA, is one or
    more of them; so is anything else written to that disk meanwhile."""
    device = os.stat(path).st_dev
    with open("/sys/dev/block/%d:%d/stat" % (os.major(device), os.minor(device))) as f:
        fields = [int(v) for v in f.read().split()]
    return {"disk_writes": fields[4], "disk_flushes": fields[15] if len(fields) > 15 else 0}


def context_switches(pid):
    """Voluntary and involuntary context switches of all threads of a process."""
    total = 0
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, task)) as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:
            pass  # the thread ended
    return total


class System:
    """Server processes of one system in the namespaces, killed at stop()."""

    name = ""

    def __init__(self, net, build, work):
        self.net = net
        self.build = build
        self.work = work
        self.leader_cpu, self.other_cpus = cpus()
        self.processes = []
        self.pids = []
        self.leader = 0  # the node the load generator talks to

    def spawn(self, node, command, label):
        log_file = open(os.path.join(self.work, "%s.log" % label), "ab")
        # `ip netns exec` execs taskset, which execs the server: one pid.
        process = self.net.run(node, ["taskset", "-c", self.other_cpus] + command,
                               stdout=log_file, stderr=subprocess.STDOUT)
        log_file.close()
        self.processes.append(process)
        self.pids.append(process.pid)
        return process

    def pin_leader(self):
        pid = self.pids[self.leader]
        subprocess.run(["taskset", "-a", "-p", "-c", self.leader_cpu, str(pid)], check=True,
                       stdout=subprocess.DEVNULL)

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
        self.processes, self.pids = [], []

    def address(self):
        return self.net.addresses[self.leader]

    def connect(self, node, port):
        return haclient.connect(self.net, CLIENT, self.net.addresses[node], port, timeout=1)

    def counters(self):
        """What the system counts of its own work (for per-op figures):
        context switches of all its threads, the CPU time of the process the
        load generator talks to and of the others, in microseconds (/proc),
        and the writes and cache flushes of the disk its data is on, read
        around the run."""
        switches = dict(disk_counts(self.work),
                        switches=sum(context_switches(pid) for pid in self.pids))
        cpu = [process_cpu_us(pid) for pid in self.pids]
        if len(cpu) == 1:
            return switches
        return dict(switches, cpu_us_leader=cpu[self.leader],
                    cpu_us_others=sum(cpu) - cpu[self.leader])


class LockcachedSingle(System):
    name = LC1

    def flags(self):
        return [os.path.join(self.build, "lockcached"), "--threads=1", "--memory_limit_mb=256",
                "--port=%d" % haclient.CACHE_PORT, "--lock_port=%d" % haclient.LOCK_PORT,
                "--logtostderr"]

    def start(self):
        self.spawn(0, self.flags(), "lockcached")
        wait_until(lambda: self.connect(0, haclient.LOCK_PORT).close() or True, "lockcached")
        self.pin_leader()

    def port(self, workload):
        return haclient.CACHE_PORT if workload == "w1" else haclient.LOCK_PORT

    def protocol(self):
        return "text"


class LockcachedCluster(LockcachedSingle):
    name = LC3

    def start(self):
        secret = os.path.join(self.work, "secret")
        with open(secret, "w") as f:
            f.write("lock_compare cluster secret\n")
        members = ",".join("%d@%s:%d" % (n + 1, self.net.addresses[n], RAFT_PORT)
                           for n in range(SERVER_NODES))
        data = tempfile.mkdtemp(prefix="raft", dir=self.work)
        for n in range(SERVER_NODES):
            os.makedirs(os.path.join(data, str(n)))
            self.spawn(n, self.flags() + [
                "--cluster=" + members, "--node_id=%d" % (n + 1),
                "--data_dir=" + os.path.join(data, str(n)), "--cluster_secret_file=" + secret],
                "lockcached-node%d" % n)
        self.leader = wait_until(self.find_leader, "a lockcached leader")
        self.pin_leader()

    def stats(self, node):
        client = haclient.client(self.net, CLIENT, self.net.addresses[node], haclient.CACHE_PORT)
        try:
            return client.stats("cluster")
        finally:
            client.close()

    def find_leader(self):
        """The node that leads with its lock service up, as a majority sees it."""
        stats = [self.stats(n) for n in range(SERVER_NODES)]
        for n, s in enumerate(stats):
            agree = sum(1 for other in stats if other.get("leader_id") == str(n + 1))
            if s.get("role") == "leader" and s.get("leader_lock_service") and \
                    agree > SERVER_NODES // 2:
                return n
        return None

    def counters(self):
        return dict(super().counters(),
                    raft_entries=int(self.stats(self.leader)["commit_index"]))


def http_post(sock, host, path, body):
    """One JSON POST on a keep-alive connection; the decoded reply."""
    data = json.dumps(body).encode()
    sock.sendall(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (path.encode(), host.encode(), len(data), data))
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += sock.recv(65536) or b"!"
        if reply.endswith(b"!"):
            raise ConnectionError("closed")
    head, body_bytes = reply.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body_bytes) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        body_bytes += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise ValueError(head.split(b"\r\n")[0].decode())
    return json.loads(body_bytes)


class Etcd(System):
    name = ETCD

    def start(self):
        nodes = range(SERVER_NODES)
        address = self.net.addresses
        initial = ",".join("e%d=http://%s:%d" % (n, address[n], ETCD_PEER_PORT) for n in nodes)
        data = tempfile.mkdtemp(prefix="etcd", dir=self.work)
        for n in nodes:
            peer = "http://%s:%d" % (address[n], ETCD_PEER_PORT)
            client = "http://%s:%d" % (address[n], ETCD_CLIENT_PORT)
            self.spawn(n, ["etcd", "--name", "e%d" % n, "--data-dir", os.path.join(data, str(n)),
                           "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                           "--listen-client-urls", client, "--advertise-client-urls", client,
                           "--initial-cluster", initial, "--initial-cluster-state", "new",
                           "--log-level", "warn"], "etcd%d" % n)
        self.leader = wait_until(self.find_leader, "an etcd leader")
        self.pin_leader()

    def status(self, node):
        sock = self.connect(node, ETCD_CLIENT_PORT)
        try:
            return http_post(sock, self.net.addresses[node], "/v3/maintenance/status", {})
        finally:
            sock.close()

    def find_leader(self):
        for n in range(SERVER_NODES):
            status = self.status(n)
            if status.get("leader") and status["leader"] == status["header"]["member_id"]:
                return n
        return None

    def port(self, workload):
        return ETCD_CLIENT_PORT

    def protocol(self):
        return "etcd"

    def metric(self, text, name):
        return sum(float(m) for m in re.findall(r"(?m)^%s(?:\{[^}]*\})? (\S+)$" % name, text))

    def counters(self):
        """The leader's proposals committed, and WAL fsyncs of every member."""
        totals = dict(super().counters(), proposals=0.0, wal_fsyncs=0.0)
        for n in range(SERVER_NODES):
            sock = self.connect(n, ETCD_CLIENT_PORT)
            try:
                sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
                text = b"".join(iter(lambda: sock.recv(65536), b"")).decode()
            finally:
                sock.close()
            if n == self.leader:
                totals["proposals"] = self.metric(text, "etcd_server_proposals_committed_total")
            totals["wal_fsyncs"] += self.metric(text, "etcd_disk_wal_fsync_duration_seconds_count")
        return totals


class Redis(System):
    name = REDIS

    def start(self):
        primary = self.net.addresses[0]
        for n in (0, 1):
            command = ["redis-server", "--bind", self.net.addresses[n], "--port", str(REDIS_PORT),
                       "--save", "", "--appendonly", "no", "--protected-mode", "no",
                       "--dir", self.work]
            if n == 1:
                command += ["--replicaof", primary, str(REDIS_PORT)]
            self.spawn(n, command, "redis%d" % n)
        wait_until(lambda: "slave0:" in self.info() and "state=online" in self.info(),
                   "the Redis replica online")
        self.pin_leader()

    def info(self):
        client = haclient.TextClient(self.connect(0, REDIS_PORT))
        try:
            client.send("INFO replication\r\n")
            length = int(client.line()[1:])  # a bulk string: "$LENGTH"
            return client.exactly(length + 2).decode()
        finally:
            client.close()

    def port(self, workload):
        return REDIS_PORT

    def protocol(self):
        return "redis"


SYSTEMS = {LC1: LockcachedSingle, LC3: LockcachedCluster, ETCD: Etcd, REDIS: Redis}


def loadgen(system, build, workload, duration, extra=()):
    """One measured run against the started `system`: the loadgen's RESULT,
    with the system's own counters' growth per operation beside it."""
    flags = WORKLOADS[workload][2]
    mode = [] if workload == "w1" else ["--mode=lockservice", "--protocol=" + system.protocol()]
    pids = system.pids
    command = ["taskset", "-c", system.other_cpus, os.path.join(build, "bench",
                                                                "lockcached-loadgen"),
               "--host=" + system.address(), "--port=%d" % system.port(workload),
               "--connections=%d" % CONNECTIONS, "--depth=1", "--duration_s=%g" % duration,
               "--quiet", "--server_pid=%d" % pids[0],
               "--more_server_pids=" + ",".join(map(str, pids[1:]))] + mode + flags + list(extra)
    if len(pids) == 1:
        command.remove("--more_server_pids=")
    before = system.counters()
    out = system.net.exec(CLIENT, command, capture_output=True, text=True, timeout=duration + 120)
    after = system.counters()
    results = [json.loads(line[len("RESULT "):]) for line in out.stdout.splitlines()
               if line.startswith("RESULT ")]
    if out.returncode != 0 or not results:
        raise RuntimeError("the load generator failed (exit %d): %s %s"
                           % (out.returncode, out.stdout[-400:], out.stderr[-400:]))
    result = results[-1]
    if result["phase"] == "preload":
        return result
    ops = result["ops"] if workload == "w1" else result["cycles"]
    result["throughput"] = ops / result["seconds"]
    result["cpu_us_per_op"] = result["server_cpu_s"] * 1e6 / ops
    result["per_op"] = {k: (after[k] - before[k]) / ops for k in before}
    return result


def describe(result):
    extra = "".join(", %s %.2f" % (k, v) for k, v in sorted(result["per_op"].items()))
    cycle = " (cycle p99 %.2f ms)" % (result["cycle_p99_us"] / 1000) if result["cycles"] else ""
    return ("%.0f/s, p50 %.2f ms, p99 %.2f ms%s, server CPU %.1f us/op, "
            "load generator %.0f%% busy%s%s"
            % (result["throughput"], result["p50_us"] / 1000, result["p99_us"] / 1000, cycle,
               result["cpu_us_per_op"],
               100 * result["loadgen_cpu_s"] / result["seconds"],
               ", %d retries" % result["retries"] if result["retries"] else "", extra))


def run_rounds(net, build, work, workload, rounds, duration, only=()):
    """Every system of `workload` (or of `only`) once per round, in turn;
    results by system."""
    names = [name for name in WORKLOADS[workload][1] if not only or name in only]
    results = {name: [] for name in names}
    for round_number in range(rounds):
        for name in names:
            system = SYSTEMS[name](net, build, work)
            try:
                system.start()
                if workload == "w1":
                    loadgen(system, build, workload, duration, ["--preload_only"])
                    result = loadgen(system, build, workload, duration, ["--preload=false"])
                else:
                    result = loadgen(system, build, workload, duration)
                result["round"] = round_number
                results[name].append(result)
                log("  %s round %d %-16s %s" % (workload, round_number + 1, name,
                                                 describe(result)))
            except (RuntimeError, subprocess.SubprocessError, OSError) as error:
                log("  %s round %d %-16s FAILED: %s" % (workload, round_number + 1, name, error))
            finally:
                system.stop()
    return results


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def paired_ratio(results, a, b, key="throughput"):
    by_round = {r["round"]: r[key] for r in results.get(b, [])}
    return median([r[key] / by_round[r["round"]] for r in results.get(a, [])
                   if by_round.get(r["round"])])


def redis_benchmark(net, build, work, duration):
    """redis-benchmark's SET NX PX on random keys, 32 clients, against the
    primary with its replica: the order of magnitude of Redis's lock rate
    from a tool this project did not write (no WAIT: it sends one command)."""
    system = Redis(net, build, work)
    try:
        system.start()
        requests = str(int(max(duration, 1) * 40000))
        out = net.exec(CLIENT, ["taskset", "-c", system.other_cpus, "redis-benchmark", "-h",
                                system.address(), "-p", str(REDIS_PORT), "-c", str(CONNECTIONS),
                                "-n", requests, "-r", "100000", "-q", "SET", "lock:__rand_int__",
                                "token", "NX", "PX", "30000"],
                       capture_output=True, text=True, timeout=duration * 20 + 60)
        found = re.findall(r"([\d.]+) requests per second", out.stdout)
        return float(found[-1]) if found else None
    finally:
        system.stop()


def fmt(value, digits=0):
    return "–" if value is None else "{:,.{}f}".format(value, digits)


def table(all_results):
    lines = ["| workload | system | ops/s median (min–max) | p50 ms | p99 ms | cycle p99 ms | "
             "server CPU us/op | per op | load generator busy |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|"]
    for workload, results in all_results.items():
        for name, runs in results.items():
            if not runs:
                lines.append("| %s | %s | failed | | | | | | |" % (workload, name))
                continue
            values = [r["throughput"] for r in runs]
            per_op = {k: median([r["per_op"][k] for r in runs]) for k in runs[0]["per_op"]}
            lines.append("| %s | %s | %s (%s–%s) | %.2f | %.2f | %s | %.1f | %s | %.0f%% |" % (
                workload, name, fmt(median(values)), fmt(min(values)), fmt(max(values)),
                median([r["p50_us"] for r in runs]) / 1000,
                median([r["p99_us"] for r in runs]) / 1000,
                "–" if workload == "w1" else "%.2f" % (median([r["cycle_p99_us"]
                                                               for r in runs]) / 1000),
                median([r["cpu_us_per_op"] for r in runs]),
                ", ".join("%s %.2f" % kv for kv in sorted(per_op.items())) or "–",
                100 * median([r["loadgen_cpu_s"] / r["seconds"] for r in runs])))
    return lines


def verdict(value, ok):
    """ok: the target's test, or None for a figure with no target."""
    if value is None or ok is None:
        return "–"
    return "met" if ok(value) else "**NOT met**"


def targets(all_results):
    rows = ["| target | measured | |", "|---|---:|---|"]

    def row(text, value, ok):
        rows.append("| %s | %s | %s |" % (text, "–" if value is None else "%.3f" % value,
                                          verdict(value, ok)))

    for workload in ("a", "b"):
        results = all_results.get(workload)
        if not results:
            continue
        p99 = median([r["p99_us"] / 1000 for r in results.get(LC3, [])])
        row("%s: raft / single lock+unlock/s >= 0.5" % workload,
            paired_ratio(results, LC3, LC1), lambda v: v >= 0.5)
        row("%s: raft p99 latency (ms) <= 5" % workload, p99, lambda v: v <= 5)
        row("%s: raft / etcd >= 5" % workload, paired_ratio(results, LC3, ETCD), lambda v: v >= 5)
        row("%s: raft / redis >= 1" % workload, paired_ratio(results, LC3, REDIS),
            lambda v: v >= 1)
        row("%s: raft / single CPU per lock+unlock" % workload,
            paired_ratio(results, LC3, LC1, "cpu_us_per_op"), None)
    if all_results.get("w1"):
        row("w1: leader / single requests/s >= 0.9", paired_ratio(all_results["w1"], LC3, LC1),
            lambda v: v >= 0.9)
    return rows


def machine():
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                  if line.startswith("model name")), "?")
    load = open("/proc/loadavg").read().split()[:3]
    return "%s, %d CPUs, Linux %s, load average before the run %s" % (
        model, len(os.sched_getaffinity(0)), platform.release(), " ".join(load))


def versions():
    def first_line(command):
        try:
            out = subprocess.run(command, capture_output=True, text=True)
            return (out.stdout or out.stderr).splitlines()[0]
        except (OSError, IndexError):
            return "?"
    return "; ".join([first_line(["etcd", "--version"]), first_line(["redis-server", "--version"])])


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(HERE, "..", "build"))
    parser.add_argument("--duration", type=float, default=5, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default="a,b,w1", help="of a, b, w1 (default: all)")
    parser.add_argument("--systems", default="",
                        help="only these, e.g. lockcached-raft (default: every one of a "
                             "workload)")
    parser.add_argument("--no-redis-benchmark", action="store_true")
    args = parser.parse_args()
    args.systems = [name for name in args.systems.split(",") if name]
    if any(name not in SYSTEMS for name in args.systems):
        parser.error("systems are: " + ", ".join(SYSTEMS))
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        parser.error("unknown workload %s" % ",".join(unknown))
    return args


def main():
    args = parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/lock_compare.py needs root (network namespaces)")
    build = os.path.abspath(args.build_dir)
    facts = machine()
    all_results = {}
    cross_check = None
    with tempfile.TemporaryDirectory(prefix="lock_compare") as work, \
            netns.Cluster(SERVER_NODES + 1) as net:
        for workload in args.workloads:
            log("%s: %s, %d rounds of %g s" % (workload, WORKLOADS[workload][0], args.rounds,
                                               args.duration))
            all_results[workload] = run_rounds(net, build, work, workload, args.rounds,
                                               args.duration, args.systems)
        if not args.no_redis_benchmark:
            cross_check = redis_benchmark(net, build, work, args.duration)
    log("")
    log("Machine: " + facts)
    log("Peers: " + versions())
    log("Command: python3 bench/lock_compare.py --rounds %d --duration %g --workloads %s"
        % (args.rounds, args.duration, ",".join(args.workloads)))
    log("")
    for line in table(all_results):
        log(line)
    log("")
    for line in targets(all_results):
        log(line)
    if cross_check is not None:
        log("")
        log("redis-benchmark SET NX PX (random keys, 32 clients, no WAIT): %.0f requests/s"
            % cross_check)
    failed = any(not runs for results in all_results.values() for runs in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
