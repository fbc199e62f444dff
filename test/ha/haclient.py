"""What the HA tests need beside netns.Cluster: lockcached servers started
inside the nodes, and TCP clients that reach them from the test process.

A socket belongs to the network namespace of the thread that creates it,
so connect() creates each one in a short-lived thread that first enters the
node's namespace (setns): the test then speaks to any node directly, with
nothing routed out of the namespaces.
"""

import ctypes
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import netns

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)

CACHE_PORT = 11211
LOCK_PORT = 11400
SHIPPED_KEEPALIVED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "etc",
                                  "keepalived.conf")


def connect(cluster, node, address, port, timeout=5.0):
    """A TCP connection made from inside `node` to address:port."""
    result = {}

    def work():
        fd = os.open("/run/netns/" + cluster.names[node], os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            result["socket"] = socket.create_connection((address, port), timeout=timeout)
        except BaseException as error:  # handed to the caller's thread
            result["error"] = error
        finally:
            os.close(fd)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["socket"]


class TextClient:
    """memcached's text protocol, and the lock service's lines."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data if isinstance(data, bytes) else data.encode())

    def line(self):
        while b"\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the server")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line.decode()

    def exactly(self, count):
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the server")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def call(self, command):
        self.send(command + "\r\n")
        return self.line()

    def set(self, key, value, exptime=0):
        value = value if isinstance(value, bytes) else value.encode()
        self.send(b"set %s 0 %d %d\r\n%s\r\n" % (key.encode(), exptime, len(value), value))
        return self.line()

    def get(self, key):
        self.send("get %s\r\n" % key)
        header = self.line()
        if header == "END":
            return None
        length = int(header.split()[3])
        value = self.exactly(length + 2)[:-2]
        if self.line() != "END":
            raise AssertionError("a get of one key answered more than one value")
        return value.decode()

    def stats(self, group=""):
        self.send(("stats %s" % group).strip() + "\r\n")
        stats = {}
        while True:
            line = self.line()
            if line == "END":
                return stats
            _, name, value = line.split(" ", 2)
            stats[name] = value


class UnexpectedReply(AssertionError):
    """A server answered something its protocol does not allow here."""


def lock_table(c, prefix=""):
    """`stats locks PREFIX` on the lock port, through `c` (anything with
    call() and line(), as TextClient): {name: (session, token)}."""
    header = c.call(("stats locks %s" % prefix).strip())
    if header != "200 LOCKS":
        raise UnexpectedReply("stats locks answered %r" % header)
    table = {}
    while True:
        line = c.line()
        if line == "END":
            return table
        fields = line.split(" ")
        if len(fields) != 7 or fields[0] != "LOCK":
            raise UnexpectedReply("stats locks listed %r" % line)
        _, name, session, _held_ms, _waiters, token, _client = fields
        table[name] = (session, int(token))


def client(cluster, node, address, port=CACHE_PORT, timeout=5.0):
    return TextClient(connect(cluster, node, address, port, timeout))


class Servers:
    """lockcached in some nodes of a cluster, every one with the same flags
    (as every node of a real cluster runs the same flagfile)."""

    def __init__(self, cluster, binary, log_dir, extra_flags=()):
        self.cluster = cluster
        self.binary = binary
        self.log_dir = log_dir
        self.flags = ["--virtual_ip=" + cluster.vip, "--port=%d" % CACHE_PORT,
                      "--lock_port=%d" % LOCK_PORT, "--threads=2", "--memory_limit_mb=64",
                      "--repl_timeout=3", "--logtostderr"] + list(extra_flags)
        self.processes = {}
        self.clients = []

    def close(self):
        for c in self.clients:
            c.close()
        self.clients.clear()

    def start(self, node, prefix=()):
        """Starts lockcached in `node` (behind `prefix`, e.g. taskset, which
        must exec it) and waits until it accepts connections."""
        log_path = os.path.join(self.log_dir, "node%d.log" % node)
        with open(log_path, "ab") as log:  # the child keeps its own descriptor
            self.processes[node] = self.cluster.run(node, list(prefix) + [self.binary] + self.flags,
                                                    stdout=log, stderr=subprocess.STDOUT)
        address = self.cluster.addresses[node]
        deadline = time.monotonic() + 10
        while True:
            try:
                connect(self.cluster, node, address, CACHE_PORT, timeout=1).close()
                return
            except OSError:
                if self.processes[node].poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("lockcached in node %d did not start; see %s"
                                         % (node, log_path))
                time.sleep(0.05)

    def kill(self, node):
        process = self.processes.pop(node)
        process.kill()
        process.wait()

    def log(self, node):
        with open(os.path.join(self.log_dir, "node%d.log" % node), errors="replace") as f:
            return f.read()

    def client(self, node, port=CACHE_PORT):
        """A client in `node` speaking to that node's own server."""
        return self._track(client(self.cluster, node, self.cluster.addresses[node], port))

    def vip_client(self, from_node, port=CACHE_PORT):
        """A client in `from_node` speaking to whoever holds the virtual IP."""
        return self._track(client(self.cluster, from_node, self.cluster.vip, port))

    def _track(self, c):
        self.clients.append(c)
        return c

    def replication(self, node):
        c = self.client(node)
        try:
            return c.stats("replication")
        finally:
            c.close()


def keepalived_config(cluster, node, cli, changes=()):
    """The shipped etc/keepalived.conf for `node`: its name, the test's
    virtual IP, and the CLI from the build, run as root (the build tree may
    not be reachable for nobody); then `changes`, (pattern, replacement)
    pairs that must each match once."""
    with open(SHIPPED_KEEPALIVED) as f:
        config = f.read()
    replacements = [
        (r"(?m)^  router_id \S+$", "  router_id " + cluster.names[node]),
        (r"(?m)^  script_user .*$", "  script_user root"),
        (r"/usr/bin/lockcached-cli", cli),
        (r"192\.0\.2\.100/24", "%s/%d" % (cluster.vip, netns.PREFIX)),
    ] + list(changes)
    for pattern, replacement in replacements:
        config, count = re.subn(pattern, replacement, config)
        assert count == 1, "etc/keepalived.conf no longer has " + pattern
    return config


def start_keepalived(cluster, node, config, work):
    """keepalived in `node`, in the foreground, with `config`; its log and
    pid files under `work`. Killed with the cluster."""
    path = os.path.join(work, "keepalived%d.conf" % node)
    with open(path, "w") as f:
        f.write(config)
    with open(os.path.join(work, "keepalived%d.log" % node), "ab") as log:
        return cluster.run(node, [
            "keepalived", "--dont-fork", "--log-console", "--use-file", path,
            "--pid", os.path.join(work, "k%d.pid" % node),
            "--vrrp_pid", os.path.join(work, "v%d.pid" % node),
            "--checkers_pid", os.path.join(work, "c%d.pid" % node)],
            stdout=log, stderr=log)


def eventually(condition, timeout, what, error=AssertionError, interval=0.05):
    """Polls a state only the servers can show (a role, a count) until it
    holds; raises `error` naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise error("not within %.0f s: %s" % (timeout, what))
        time.sleep(interval)


class ClusterTest(unittest.TestCase):
    """A fresh cluster of NODES namespaces per test, lockcached (BINARY, with
    FLAGS beside the common ones) started in them as the test asks. The
    servers' logs stay in $HA_LOG_DIR when it is set."""

    NODES = 2
    BINARY = None
    FLAGS = []

    def setUp(self):
        log_root = os.environ.get("HA_LOG_DIR")
        if log_root:
            os.makedirs(log_root, exist_ok=True)
        self.work = tempfile.mkdtemp(dir=log_root, prefix=self.id() + ".")
        self.cluster = netns.Cluster(self.NODES).__enter__()
        self.servers = Servers(self.cluster, self.BINARY, self.work, self.FLAGS)

    def tearDown(self):
        self.servers.close()
        self.cluster.close()
        if not os.environ.get("HA_LOG_DIR"):
            shutil.rmtree(self.work)
