#!/usr/bin/env python3
"""Fault injection against a Raft cluster of lockcached (--cluster), in the
spirit of Jepsen's lock tests (docs/high-availability.md, "A Raft cluster").

Each run builds a fresh cluster in network namespaces (netns.py: TEST-NET-1
addresses on a private bridge, no route out), with keepalived beside every
node running the shipped etc/keepalived.conf (the virtual IP follows the
leader), starts lock-service clients on every node's machine and on one
machine of their own, injects one fault, heals it, and checks what the
clients saw. A client takes `lock NAME 0.5` on a few shared names, holds
for 5-30 ms and sends `unlock`, forever; it follows `503 not leader` to the
leader, and after a lost connection reconnects and resumes its session
(`conn_id ID`). Now and then it takes a name of its own instead, which no
other client contends for; on every node's machine one more client takes
only a name of its own (so that a leader cut off with its machine's clients
is still asked for something it could grant). Two more clients (on the
clients' machine and on node 0's) know only the virtual IP, as clients
written for one server: they never follow a `503`, but connect to the
address again and resume there. Every client records:

- every grant: when its request went out, when its `200 Acquired` came, the
  token;
- every hold: from the grant's reply until the client sent `unlock` or saw
  its connection drop.

After every run, these must hold (each breach is a violation):

- no two holds of one name overlap;
- a token is greater than every token whose grant a client had seen before
  its own request went out;
- no acknowledged grant is lost: a client whose connection dropped while it
  held a lock resumes its session (within its grace) and finds the lock
  still its own, with the same token; and no acknowledged release is lost:
  it then holds nothing it had released;
- every session resumes: `conn_id ID` within the grace answers 200 (asked
  again while it is refused: the server may not have seen the old
  connection go yet, docs/lock-service.md).

A cache writer on the clients' machine sets keys on whichever node takes
them (the leader) and records each `STORED`; after the run the leader must
have every acknowledged write but those acknowledged from one election
timeout before the fault until 0.1 s after it healed (the cache is
replicated asynchronously; a thawed leader takes writes until it hears of
the new term). A run restarting every node empties the cache by design
and is not checked for it.

Four runs make a fault one-way (a leader or a follower that hears no one
but is heard, or the reverse) for 10 s: the two others still hear each
other, so no stretch without a grant may be longer than the bound below,
however long the fault lasts. One run cuts the clients' machine off while
one of its clients holds a lock: a waiter elsewhere must get the lock within TCP keepalive's
detection and the session's grace. Two runs lose a member's machine with
its disk (a follower's; the leader's) and replace it, while the clients go
on: the old id removed, the machine back with an empty data directory
under a new id (`--cluster_join`, `cluster add`), caught up, then made
leader (`cluster transfer`), and it must grant.

And it reports how long after the fault the first grant came, against a
stated bound, for every client and for those through the virtual IP. As
root, with iproute2 and keepalived:

    LOCKCACHED_BINARY=build/lockcached LOCKCACHED_CLI=build/src/cli/lockcached-cli \\
        python3 test/ha/raft_faults.py [RUN ...]

(LOCKCACHED_HA_SERVER_FLAGS="-vv" adds flags to every node's command line;
each node's log is kept when a run fails.)

`--expect-violations` inverts the verdict: CI runs the suite once against
the test-only server that answers before the log commits
(`cmake --build build --target lockcached-early-answer`)
and it must report violations, so the checks are shown to catch one.
"""

import argparse
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import haclient  # noqa: E402
import netns  # noqa: E402

BINARY = os.path.abspath(os.environ.get("LOCKCACHED_BINARY", "build/lockcached"))
CLI = os.path.abspath(os.environ.get("LOCKCACHED_CLI", "build/src/cli/lockcached-cli"))
# More flags for every node, to debug a run: "-vv" logs every request and
# every change each member applies.
SERVER_FLAGS = os.environ.get("LOCKCACHED_HA_SERVER_FLAGS", "").split()
CLUSTER_PORT = 11500
LOCK_PORT = haclient.LOCK_PORT
CACHE_PORT = haclient.CACHE_PORT
ELECTION_MS = 500     # --election_timeout_ms of every node (but where a run says)
DEFAULT_ELECTION_MS = 1000  # the server's own
GRACE_MS = 3000       # every client session's grace (set_timeout)
NAMES = ["alpha", "beta", "gamma"]
WAIT_S = 0.5          # lock NAME WAIT_S
TOKEN_SHIFT = 20      # a token is its grant's entry index << 20, plus one per grant (lock_machine.h)
# A client gives a silent server up after this, well within its grace, as a
# client must: a leader cut off or frozen cannot tell it anything, and its
# session must be resumed on the new leader before its grace runs out there.
REPLY_TIMEOUT = WAIT_S + 1
SETTLE_S = 3          # clients run this long before a fault and after it heals
# For a fault's own step (the client that vanishes opening its session): it
# is no client under test, so a slow commit (an fsync behind a loaded disk)
# only delays it; no reply at all fails the run.
STEP_TIMEOUT = 10
# A client that lost its leader (it died, was cut off or frozen) gets a grant
# again within: a new election (up to 2 election timeouts after the old
# leader was last heard, plus one for the pre-vote), the new leader's first
# entry, and the clients' reconnection; the new leader grants a name a
# client held only once that client's grace ran out there, which clients
# that resume avoid.
FIRST_GRANT_BOUND_S = 4 * ELECTION_MS / 1000 + GRACE_MS / 1000 + 2
# A client through the virtual IP gets a grant again within that, and the
# address's move: keepalived asks whether its node leads every second (the
# check may take its 1 s timeout), and the node whose check passed takes
# the address after 3 adverts of 0.2 s and a skew (the shipped file).
VIP_MOVE_S = 1 + 1 + 1
# keepalived gives the virtual IP to the leader's node within this of its
# start (and of the leader's election).
VIP_START_S = 15


class History:
    """What every client saw, in the test process's monotonic time."""

    def __init__(self):
        self.lock = threading.Lock()
        self.grants = []      # (requested, replied, token, client, name, regrant)
        self.holds = []       # [name, start, end, token, client]
        self.violations = []

    def grant(self, requested, replied, token, client, name, regrant=False):
        with self.lock:
            self.grants.append((requested, replied, token, client, name, regrant))

    def hold(self, name, start, token, client):
        entry = [name, start, None, token, client]
        with self.lock:
            self.holds.append(entry)
        return entry

    def violation(self, text):
        with self.lock:
            self.violations.append(text)


class FaultFailed(Exception):
    """A fault could not be carried out as the run means it (a violation)."""


class NoLeader(FaultFailed):
    pass


class Gone(Exception):
    """The connection dropped or a reply did not come in time."""


class Client(threading.Thread):
    follows_503 = True              # a VipClient does not

    def __init__(self, cluster, name, home, history, rng_seed, private=False):
        super().__init__(daemon=True, name=name)
        self.private = private      # takes only a name of its own
        self.cluster = cluster
        self.home = home            # the namespace its sockets live in
        self.history = history
        self.rng = random.Random(rng_seed)
        self.stop = threading.Event()
        self.session = None
        self.sock = None
        self.buffer = b""
        self.leader = None          # the address it last found leading
        self.held = None            # (name, token, hold entry) while it holds
        self.unlocking = False      # its unlock went out, unanswered
        self.released = set()       # names released with "200 Released" since it last resumed
        self.last_answer = time.monotonic()  # when a leader last answered it
        self.silent = {}            # address -> until when it is not tried first
        self.sessions_lost = 0      # resumes refused (counted, judged in connect)

    # ---- the wire ----
    def send(self, line):
        try:
            self.sock.sendall(line.encode() + b"\r\n")
        except OSError as error:
            raise Gone(str(error))

    def line(self, timeout=REPLY_TIMEOUT):
        deadline = time.monotonic() + timeout
        while b"\r\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.sock], [], [], remaining)[0]:
                raise Gone("no reply")
            try:
                chunk = self.sock.recv(65536)
            except OSError as error:
                raise Gone(str(error))
            if not chunk:
                raise Gone("closed")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        line = line.decode()
        if not line.startswith("503 "):  # only a leader's answer keeps a session alive
            self.last_answer = time.monotonic()
        return line

    def call(self, command, timeout=REPLY_TIMEOUT):
        self.send(command)
        return self.line(timeout)

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = None
        self.buffer = b""

    # ---- finding the leader, resuming ----
    def candidates(self):
        """Where to look for the leader: the one it knew first, then every
        node, those that just kept silent (cut off, frozen) last."""
        now = time.monotonic()
        order = ([self.leader] if self.leader else []) + list(self.cluster.addresses)
        return sorted(dict.fromkeys(order), key=lambda a: self.silent.get(a, 0) > now)

    def connect(self):
        """Connects to the leader and resumes (or opens) its session."""
        candidates = self.candidates()
        while not self.stop.is_set():
            for address in candidates:
                if self.stop.is_set():
                    return False
                try:
                    self.sock = haclient.connect(self.cluster.net, self.home, address, LOCK_PORT,
                                                 timeout=1)
                    self.sock.settimeout(None)
                    first = ("conn_id " + self.session) if self.session else "conn_id"
                    answered = self.last_answer
                    reply = self.call(first)
                    # The server may not have seen the old connection go
                    # yet (its FIN held up by the cut): it refuses until
                    # then, and a client may ask again within its grace
                    # (docs/lock-service.md, "Sessions and the grace period").
                    refused_after = None
                    while (self.session and reply.startswith("403")
                           and time.monotonic() - answered < GRACE_MS / 1000 - 0.2):
                        if refused_after is None:
                            refused_after = time.monotonic() - answered
                        time.sleep(0.05)
                        reply = self.call(first)
                except (OSError, Gone):
                    self.silent[address] = time.monotonic() + 2 * REPLY_TIMEOUT
                    self.close()
                    continue
                match = re.match(r"503 not leader: (\S+)", reply)
                if match:
                    self.close()
                    found = match.group(1)
                    if not self.follows_503:
                        time.sleep(0.05)  # the address has not moved yet
                    elif found != "election":
                        candidates = [found.split(":")[0]]
                        self.leader = candidates[0]
                    break
                self.leader = address
                if self.session is None:
                    self.session = reply.split(" ", 1)[1]
                    if self.call("set_timeout %d" % GRACE_MS) != "200 Timeout set":
                        raise Gone("set_timeout refused")
                    return True
                if reply != "200 Resumed":
                    self.sessions_lost += 1
                    # Its grace started on the new leader no sooner than the
                    # old one last answered: until then, it must come back.
                    silent = (refused_after if refused_after is not None
                              else time.monotonic() - answered)
                    if silent < GRACE_MS / 1000 - 0.2:
                        self.history.violation("%s: session %s not resumed %.1f s after a server "
                                               "last answered it: %r"
                                               % (self.name, self.session.split("-")[0], silent,
                                                  reply))
                    self.session = None
                    self.close()
                    continue
                self.check_after_resume()
                return True
            else:
                time.sleep(0.05)
                candidates = self.candidates()
        return False

    def check_after_resume(self):
        """Its acknowledged grant survived; its acknowledged releases too."""
        table = self.locks_of_session()
        if self.held and not self.unlocking:
            name, token, _ = self.held
            if table.get(name) != token:
                self.history.violation("%s: acknowledged grant of %s (token %d) lost: the "
                                       "resumed session holds %r" % (self.name, name, token, table))
            else:
                requested = time.monotonic()
                reply = self.call("lock %s" % name)
                self.history.grant(requested, time.monotonic(), token, self.name, name,
                                   regrant=True)
                if reply != "200 Acquired %d" % token:
                    self.history.violation("%s: re-lock of %s answered %r, not token %d"
                                           % (self.name, name, reply, token))
        for name in self.released:
            if name in table and (not self.held or self.held[0] != name):
                self.history.violation("%s: acknowledged release of %s lost (token %d held)"
                                       % (self.name, name, table[name]))
        self.released.clear()
        if self.held:
            reply = self.call("unlock %s" % self.held[0])
            if reply not in ("200 Released", "403 Not held"):
                raise Gone("unlock after resume answered %r" % reply)
            self.held = None
            self.unlocking = False
        # What a request in flight may have been granted is let go too.
        if self.call("unlock_all") != "200 Released":
            raise Gone("unlock_all refused")

    def locks_of_session(self):
        serial = self.session.split("-")[0]
        try:
            table = haclient.lock_table(self)
        except haclient.UnexpectedReply as error:
            raise Gone(str(error))
        return {name: token for name, (session, token) in table.items() if session == serial}

    # ---- the loop ----
    def run(self):
        while not self.stop.is_set():
            try:
                if not self.sock and not self.connect():
                    return
                self.cycle()
            except Gone as error:
                self.dropped(str(error))

    def dropped(self, why):
        now = time.monotonic()
        if why == "no reply" and self.leader:
            self.silent[self.leader] = now + 2 * REPLY_TIMEOUT
        if self.held and self.held[2][2] is None:
            self.held[2][2] = now  # the hold ends when the client sees the drop
        self.close()

    def cycle(self):
        # A name of its own now and then: one the others never hold, so that
        # a client cut off with a leader still asks for something it could
        # get there, as a client with its own jobs would.
        own = "own-" + self.name
        name = own if self.private else self.rng.choice(NAMES + [own])
        self.released.discard(name)  # it may be granted again now
        requested = time.monotonic()
        reply = self.call("lock %s %g" % (name, WAIT_S))
        replied = time.monotonic()
        if reply.startswith("503 "):
            raise Gone(reply)
        if reply == "409 Unavailable":
            return
        match = re.fullmatch(r"200 Acquired (\d+)", reply)
        if not match:
            raise Gone("lock answered %r" % reply)
        token = int(match.group(1))
        self.history.grant(requested, replied, token, self.name, name)
        entry = self.history.hold(name, replied, token, self.name)
        self.held = (name, token, entry)
        time.sleep(self.rng.uniform(0.005, 0.03))
        entry[2] = time.monotonic()  # the unlock goes out now: the hold ends
        self.unlocking = True
        reply = self.call("unlock %s" % name)
        if reply == "200 Released":
            self.held = None
            self.unlocking = False
            self.released.add(name)
        elif reply.startswith("503 "):
            raise Gone(reply)
        else:
            self.history.violation("%s: unlock %s (token %d) answered %r"
                                   % (self.name, name, token, reply))
            self.held = None
            self.unlocking = False


class VipClient(Client):
    """A client that knows only the virtual IP, as one written for a single
    server: keepalived (the shipped etc/keepalived.conf) moves the address
    to the leader. It never follows a `503`: after one, or a dropped
    connection, it connects to the address again and resumes its session.
    Its holds are recorded and checked as every client's."""

    follows_503 = False

    def candidates(self):
        return [self.cluster.net.vip]


class CacheWriter(threading.Thread):
    """Sets its own keys, one after another, on whichever node takes them
    (the leader: the others answer `SERVER_ERROR read-only`), from the
    clients' machine, and records when each `STORED` came."""

    def __init__(self, cluster, name):
        super().__init__(daemon=True, name=name)
        self.cluster = cluster
        self.stop = threading.Event()
        self.acked = []  # (key, value, when its STORED came)
        self.client = None  # haclient.TextClient
        self.node = 0

    def run(self):
        n = 0
        while not self.stop.is_set():
            key, value = "%s:%d" % (self.name, n), str(n)
            try:
                if not self.client:
                    self.client = haclient.TextClient(haclient.connect(
                        self.cluster.net, self.cluster.nodes, self.cluster.addresses[self.node],
                        CACHE_PORT, timeout=1))
                    self.client.sock.settimeout(1)
                reply = self.client.set(key, value)
            except (OSError, ConnectionError):
                reply = None
            if reply == "STORED":
                self.acked.append((key, value, time.monotonic()))
                n += 1
                time.sleep(0.001)
                continue
            # A follower, a node gone or cut off: the next one.
            self.close()
            self.node = (self.node + 1) % self.cluster.nodes
            time.sleep(0.01)

    def close(self):
        if self.client:
            self.client.close()
            self.client = None

    def finish(self):
        self.stop.set()
        if self.ident is not None:  # not started when the cluster never came up
            self.join(3)
        self.close()

    def lost(self, cluster):
        """The acknowledged writes the leader does not have now. Should
        leadership move while they are read (the old leader's cache closes
        its connections), they are read again from the new one."""
        for _ in range(3):
            c = haclient.client(cluster.net, cluster.nodes, cluster.addresses[cluster.leader()],
                                CACHE_PORT)
            try:
                return [(key, when) for key, value, when in self.acked if c.get(key) != value]
            except (OSError, ConnectionError) as error:
                last_error = error
            finally:
                c.close()
        cluster.violations.append("the cache could not be read back from a leader, which "
                                  "changed three times meanwhile: %s" % last_error)
        return []


class RaftCluster:
    """`nodes` lockcached nodes in namespaces 0..nodes-1, each beside
    keepalived running the shipped etc/keepalived.conf (when asked), and one
    more namespace for clients of their own."""

    def __init__(self, nodes, work, election_ms=ELECTION_MS):
        self.nodes = nodes
        self.election_ms = election_ms  # None: the server's default
        self.net = netns.Cluster(nodes + 1).__enter__()
        self.addresses = self.net.addresses[:nodes]
        self.work = work
        self.processes = {}
        self.keepalived = {}
        self.ids = [i + 1 for i in range(nodes)]  # each node's --node_id now
        self.violations = []  # what a fault itself found wrong
        self.history = None   # the run's History, for a fault's own grants
        with open(os.path.join(work, "secret"), "w") as f:
            f.write("raft faults test secret\n")
        self.members = ",".join("%d@%s:%d" % (i + 1, a, CLUSTER_PORT)
                                for i, a in enumerate(self.addresses))

    def close(self):
        self.net.close()

    def cluster_address(self, node):
        return "%s:%d" % (self.addresses[node], CLUSTER_PORT)

    def start(self, node, join=False):
        """lockcached in `node`, under its id: one of the initial voters, or
        (join) a new member that waits, with an empty data directory, for
        the leader to add it."""
        data = os.path.join(self.work, "data%d" % node)
        os.makedirs(data, exist_ok=True)
        members = ("%d@%s" % (self.ids[node], self.cluster_address(node))) if join else self.members
        log = open(os.path.join(self.work, "node%d.log" % node), "ab")
        self.processes[node] = self.net.run(node, [
            BINARY, "--cluster=" + members, "--node_id=%d" % self.ids[node],
            "--data_dir=" + data, "--cluster_secret_file=" + os.path.join(self.work, "secret"),
            "--port=%d" % CACHE_PORT, "--lock_port=%d" % LOCK_PORT, "--threads=2",
            "--memory_limit_mb=128", "--tcp_keepalive=2", "--logtostderr"] +
            (["--election_timeout_ms=%d" % self.election_ms] if self.election_ms else []) +
            (["--cluster_join"] if join else []) + SERVER_FLAGS,
            stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def start_keepalived(self, node):
        """keepalived beside `node`'s lockcached, with the shipped file (but
        for the node's name, the test's address and the CLI's path)."""
        self.keepalived[node] = haclient.start_keepalived(
            self.net, node, haclient.keepalived_config(self.net, node, CLI), self.work)

    def kill(self, node, sig=signal.SIGKILL):
        """Signals `node`'s lockcached and waits until it has exited;
        returns when the signal went (the fault's moment: the exit can take
        most of a second on a loaded machine)."""
        process = self.processes.pop(node)
        process.send_signal(sig)
        sent = time.monotonic()
        process.wait()
        return sent

    def lose_machine(self, node):
        """`node`'s machine dies with its disk: off the network, every
        process on it killed, the virtual IP it may have held gone with it
        (a new machine boots without it), its data directory deleted."""
        self.net.take_down(node)
        self.net.signal_all(node, signal.SIGKILL)
        for processes in (self.processes, self.keepalived):
            if node in processes:
                processes.pop(node).wait()
        # keepalived's own children, and a check it had started, end too.
        haclient.eventually(lambda: not self.net.signal_all(node, signal.SIGKILL), 5,
                            "every process of node %d ended" % node)
        if self.net.holds(node, self.net.vip):
            self.net.remove_address(node, self.net.vip)
        shutil.rmtree(os.path.join(self.work, "data%d" % node))

    def cli(self, node, *args, timeout_s=5):
        """lockcached-cli on `node`'s machine (a member's, which `cluster`
        changes need), asking the node's own server and following its `503`
        to the leader: (exit status, what it printed)."""
        done = self.net.exec(node, [CLI, "--host", "127.0.0.1", "--lock-port", str(LOCK_PORT),
                                    "--timeout", str(timeout_s)] + list(args),
                             capture_output=True, text=True)
        return done.returncode, (done.stdout + done.stderr).strip()

    def stats(self, node, group="cluster", asked_from=None):
        """Node's `stats GROUP`, asked from the clients' machine (or from
        `asked_from`, a node's own, which a partition cannot cut off); {}
        when it does not answer."""
        where = self.nodes if asked_from is None else asked_from
        try:
            # A machine that is down or cut off is given up soon: leader()
            # asks every node again and again.
            c = haclient.client(self.net, where, self.addresses[node], CACHE_PORT, timeout=1)
        except OSError:
            return {}
        try:
            return c.stats(group)
        except (OSError, ConnectionError, ValueError):
            return {}
        finally:
            c.close()

    def leader(self, timeout=20):
        """The node that leads and serves, as a majority of the nodes sees it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stats = [self.stats(n) for n in range(self.nodes)]
            for n, s in enumerate(stats):
                if s.get("role") != "leader" or not s.get("leader_lock_service"):
                    continue
                agree = sum(1 for other in stats if other.get("leader_id") == str(self.ids[n]))
                if agree > self.nodes // 2:
                    return n
            time.sleep(0.05)
        raise NoLeader("no leader that a majority of the nodes knows, in %d s" % timeout)


# ---- the faults ----
# Each notes itself as soon as it has struck: the run counts the time to the
# first grant from its first note.

def kill_leader(cluster, note):
    leader = cluster.leader()
    note("SIGKILL node %d (leader)" % leader, at=cluster.kill(leader))
    time.sleep(SETTLE_S)
    cluster.start(leader)


def partition_leader(cluster, note):
    leader = cluster.leader()
    cluster.net.take_down(leader)
    note("node %d (leader) and its client cut off for 6 s" % leader)
    time.sleep(6)
    cluster.net.bring_up(leader)


def partition_follower(cluster, note):
    leader = cluster.leader()
    follower = (leader + 1) % cluster.nodes
    cluster.net.take_down(follower)
    note("node %d (follower) and its client cut off for 5 s" % follower)
    time.sleep(5)
    cluster.net.bring_up(follower)


# One-way faults (netns.py's deafen and mute), as a firewall rule or a
# broken receive or transmit path makes them: a node that hears nobody but
# is still heard, or one that hears everyone and reaches nobody. The other
# two still hear each other both ways, so they must go on granting while
# the fault lasts (ONE_WAY_RUNS' stricter bound): a leader that hears no
# one must step down, one that reaches no one must be replaced, and a
# follower in either state must not disturb the others, nor the node
# itself its new leader once it hears again. (A build without pre-vote
# passed these runs too: libraft's followers also refuse a vote while they
# hear their leader. The server that answers before the log commits fails
# both leader runs.)
ONE_WAY_S = 10


def one_way(role, fault):
    def run(cluster, note):
        leader = cluster.leader()
        node = leader if role == "leader" else (leader + 1) % cluster.nodes
        getattr(cluster.net, fault)(node)
        note("node %d (%s) %s for %d s" % (
            node, role, "hears no one" if fault == "deafen" else "reaches no one", ONE_WAY_S))
        time.sleep(ONE_WAY_S)
        cluster.net.restore_routes()
    return run


def freeze_leader(seconds):
    """The leader's whole machine paused (a VM's pause): lockcached and
    keepalived, which thaws still believing it holds the address."""
    def fault(cluster, note):
        leader = cluster.leader()
        cluster.net.signal_all(leader, signal.SIGSTOP)
        note("node %d (leader) frozen %.1f s, every process (grace %.1f s)"
             % (leader, seconds, GRACE_MS / 1000))
        time.sleep(seconds)
        cluster.net.signal_all(leader, signal.SIGCONT)
    return fault


# A client machine that vanishes holding a lock is noticed by TCP keepalive
# (--tcp_keepalive=2: at most 2 + 1 s after it was last heard), then its
# session's grace runs out on the leader: the lock is free by then, and
# another client's wait for it is granted.
VANISHED_BOUND_S = 2 + 1 + GRACE_MS / 1000 + 1.5


def client_vanishes(cluster, note):
    leader = cluster.leader()
    address = cluster.addresses[leader]
    holder = haclient.TextClient(haclient.connect(cluster.net, cluster.nodes, address, LOCK_PORT))
    waiter = haclient.TextClient(haclient.connect(cluster.net, leader, address, LOCK_PORT))
    try:
        holder.sock.settimeout(STEP_TIMEOUT)
        waiter.sock.settimeout(VANISHED_BOUND_S + 5)
        try:
            opened = holder.call("conn_id").startswith("200 ") and \
                holder.call("set_timeout %d" % GRACE_MS) == "200 Timeout set"
            taken = holder.call("lock vanish") if opened else ""
        except OSError as error:  # no reply in STEP_TIMEOUT, or the connection dropped
            raise FaultFailed("the vanishing client's session on node %d: %s" % (leader, error))
        if not opened:
            raise NoLeader("the vanishing client could not open its session")
        if not taken.startswith("200 Acquired"):
            raise NoLeader("the vanishing client was not granted its lock: %r" % taken)
        cluster.net.take_down(cluster.nodes)
        cut_at = time.monotonic()
        note("the clients' machine cut off while one of them holds a lock (grace %.1f s)"
             % (GRACE_MS / 1000))
        waiter.send("lock vanish %d\r\n" % (VANISHED_BOUND_S + 3))
        try:
            granted = waiter.line()
        except (OSError, ConnectionError) as error:
            granted = "no reply: %s" % error
        freed = time.monotonic() - cut_at
        if not granted.startswith("200 Acquired") or \
                int(granted.split()[2]) <= int(taken.split()[2]):
            cluster.violations.append("the vanished client's lock was not handed on: %r" % granted)
        elif freed > VANISHED_BOUND_S:
            cluster.violations.append("the vanished client's lock was free only %.1f s after its "
                                      "machine went (bound %.1f s)" % (freed, VANISHED_BOUND_S))
        note("its lock went to a waiter %.1f s after the cut (bound %.1f s)"
             % (freed, VANISHED_BOUND_S))
        waiter.call("unlock vanish")
    finally:
        cluster.net.bring_up(cluster.nodes)
        holder.close()
        waiter.close()


# A member's machine dies with its disk, and a new machine takes its
# address: the old id is removed, the new machine joins under a new id and
# is added (docs/high-availability.md, "Repairing"), all with the CLI from
# a member's machine, while the clients go on. Then leadership moves to the
# new member, which must grant.
def machine_replaced(role):
    def fault(cluster, note):
        leader = cluster.leader()
        node = leader if role == "leader" else (leader + 1) % cluster.nodes
        survivor = (node + 1) % cluster.nodes  # where the CLI runs
        old_id = cluster.ids[node]
        cluster.lose_machine(node)
        lost_at = time.monotonic()
        note("node %d's machine (%s, id %d) lost with its disk" % (node, role, old_id))
        # Until the survivors elect a leader their 503 names the dead one,
        # where the CLI cannot connect (exit 69): as an operator would, ask
        # once the cluster has a leader again.
        cluster.leader()
        change_members(cluster, survivor, "remove", str(old_id))
        cluster.ids[node] = max(cluster.ids) + 1
        cluster.net.bring_up(node)
        cluster.start(node, join=True)
        cluster.start_keepalived(node)
        change_members(cluster, survivor, "add", str(cluster.ids[node]),
                       cluster.cluster_address(node), timeout_s=10)
        wait_caught_up(cluster, node)
        note("back as id %d, caught up %.1f s after the loss"
             % (cluster.ids[node], time.monotonic() - lost_at))
        transfers = lead_and_grant(cluster, node, survivor)
        note("it leads (after %d transfer%s) and grants" % (transfers, "s"[:transfers > 1]))
    return fault


def change_members(cluster, node, *change, timeout_s=5):
    status, output = cluster.cli(node, "cluster", *change, timeout_s=timeout_s)
    if status != 0:
        raise FaultFailed("lockcached-cli cluster %s: exit %d: %s"
                          % (" ".join(change), status, output))


def wait_caught_up(cluster, node, timeout=10):
    """Until `node` has applied what the leader had committed once it was a
    voter, and its cache has applied the leader's whole snapshot."""
    leader = cluster.leader()
    target = int(cluster.stats(leader).get("commit_index", 0))
    haclient.eventually(lambda: int(cluster.stats(node).get("applied_index", 0)) >= target,
                        timeout, "node %d applied index %d" % (node, target), error=FaultFailed)

    def link():
        """The leader's `stats replication` of its replica on `node`."""
        stats = cluster.stats(leader, "replication")
        for key, value in stats.items():
            if key.endswith(":address") and value.startswith(cluster.addresses[node] + ":"):
                prefix = key[:-len("address")]
                return {k[len(prefix):]: v for k, v in stats.items() if k.startswith(prefix)}
        return {}

    def streaming():
        fields = link()
        return fields if fields.get("state") == "streaming" else None

    # Once the snapshot is sent ("streaming"), what was sent or waits to be
    # (lag_bytes past what it acknowledged) holds the snapshot's end.
    fields = haclient.eventually(streaming, timeout, "the leader streams to node %d" % node,
                                 error=FaultFailed)
    target = int(fields["bytes_acked"]) + int(fields["lag_bytes"])
    haclient.eventually(lambda: int(link().get("bytes_acked", 0)) >= target, timeout,
                        "node %d's cache applied the leader's snapshot" % node, error=FaultFailed)


# A member takes the cache's lead only once its cache has a master's whole
# snapshot, which it notes at its once-a-second look: asked to lead before,
# it hands leadership on (docs/high-availability.md, "The cache follows the
# leader"), and the transfer is asked again.
TRANSFERS = 3


def lead_and_grant(cluster, node, from_node):
    """`cluster transfer` to `node` until it leads and grants a lock; returns
    the transfers it took."""
    for transfer in range(1, TRANSFERS + 1):
        change_members(cluster, from_node, "transfer", str(cluster.ids[node]))
        try:
            if cluster.leader(timeout=5) == node and probe_grant(cluster, node):
                return transfer
        except NoLeader:
            pass
    raise FaultFailed("node %d (id %d) did not lead and grant after %d transfers"
                      % (node, cluster.ids[node], TRANSFERS))


def probe_grant(cluster, node):
    """A lock granted by `node`, asked from the clients' machine and
    recorded in the run's history; False when the node does not lead."""
    name = "probe-%d" % cluster.ids[node]
    try:
        c = haclient.TextClient(haclient.connect(cluster.net, cluster.nodes,
                                                 cluster.addresses[node], LOCK_PORT, timeout=1))
    except OSError:
        return False
    try:
        c.sock.settimeout(REPLY_TIMEOUT)
        requested = time.monotonic()
        reply = c.call("lock %s" % name)
        replied = time.monotonic()
        if reply.startswith("503 "):
            return False
        match = re.fullmatch(r"200 Acquired (\d+)", reply)
        if not match:
            raise FaultFailed("lock %s on node %d answered %r" % (name, node, reply))
        token = int(match.group(1))
        cluster.history.grant(requested, replied, token, "probe", name)
        cluster.history.hold(name, replied, token, "probe")[2] = time.monotonic()
        c.call("unlock %s" % name)
        return True
    except (OSError, ConnectionError):
        return False
    finally:
        c.close()


def leader_changes(cluster, note):
    for _ in range(3):
        leader = cluster.leader()
        note("SIGKILL node %d (leader), restarted at once" % leader, at=cluster.kill(leader))
        cluster.start(leader)
        cluster.leader()
        time.sleep(1)


def restart_all(cluster, note):
    for node in range(cluster.nodes):
        cluster.kill(node, signal.SIGTERM)
    note("every node stopped (SIGTERM) and started again")
    for node in range(cluster.nodes):
        cluster.start(node)


# A leader frozen and thawed takes cache writes until it hears of the new
# term: 12 to 30 ms measured here. They are lost; later ones must not be.
STALE_LEADER_S = 0.1

# Runs whose majority stays whole: a stretch without a grant is bounded by
# FIRST_GRANT_BOUND_S alone, not by the fault's length plus it.
ONE_WAY_RUNS = {"leader-deaf", "leader-mute", "follower-deaf", "follower-mute"}

# Runs after which every node's cache is empty by design.
MEMORY_ONLY_RUNS = {"restart-all"}

RUNS = {
    "kill-leader": (3, kill_leader),
    "partition-leader": (3, partition_leader),
    "partition-follower": (3, partition_follower),
    "freeze-leader-short": (3, freeze_leader(GRACE_MS / 2000)),
    "freeze-leader-long": (3, freeze_leader(2 * GRACE_MS / 1000)),
    "leader-changes": (3, leader_changes),
    "restart-all": (3, restart_all),
    "client-vanishes": (3, client_vanishes),
    "follower-machine-replaced": (3, machine_replaced("follower")),
    "leader-machine-replaced": (3, machine_replaced("leader")),
    "five-nodes-kill-leader": (5, kill_leader),
    "leader-deaf": (3, one_way("leader", "deafen")),
    "leader-mute": (3, one_way("leader", "mute")),
    "follower-deaf": (3, one_way("follower", "deafen")),
    "follower-mute": (3, one_way("follower", "mute")),
    # With the server's own election timeout (1 s): the failover a client
    # that follows 503 sees by default (issue 30 asks for 2 s at most).
    "kill-leader-default-timeouts": (3, kill_leader, None),
}


# ---- the checks ----

def check(history):
    violations = list(history.violations)
    by_name = {}
    for name, start, end, token, client in history.holds:
        by_name.setdefault(name, []).append((start, end if end is not None else start, token,
                                             client))
    for name, holds in by_name.items():
        holds.sort()
        for (s1, e1, t1, c1), (s2, e2, t2, c2) in zip(holds, holds[1:]):
            if s2 < e1:
                violations.append("%s held twice: %s (token %d) %.3f-%.3f and %s (token %d) "
                                  "from %.3f" % (name, c1, t1, s1, e1, c2, t2, s2))
    grants = sorted((g for g in history.grants if not g[5]), key=lambda g: g[1])
    by_request = sorted(grants, key=lambda g: g[0])
    highest, seen = None, 0
    for requested, replied, token, client, name, _ in by_request:
        while seen < len(grants) and grants[seen][1] < requested:
            if highest is None or grants[seen][2] > highest[2]:
                highest = grants[seen]
            seen += 1
        if highest is not None and token <= highest[2]:
            # Both grants whole (times on the run's clock, tokens as entry
            # index and grant), for whoever looks for the cause.
            violations.append(
                "token %d (%s, %s) is not above %d, seen before it was asked for: "
                "%s asked %.3f, answered %.3f, entry %d; the higher: %s %s asked %.3f, "
                "answered %.3f, entry %d"
                % (token, client, name, highest[2], client, requested, replied,
                   token >> TOKEN_SHIFT, highest[3], highest[4], highest[0], highest[1],
                   highest[2] >> TOKEN_SHIFT))
    return violations


def outage(grants, fault_at, ended_at):
    """Among `grants`: how long after the fault the first one asked after it
    came, and the longest stretch without any, from the fault to the end."""
    after = [g[1] for g in grants if g[0] > fault_at and not g[5]]
    first_grant = (min(after) - fault_at) if after else None
    replies = sorted([fault_at, ended_at] + [g[1] for g in grants if fault_at < g[1] < ended_at])
    return first_grant, max(b - a for a, b in zip(replies, replies[1:]))


def run_one(name, work_root, seed):
    nodes, fault, *election = RUNS[name]
    work = tempfile.mkdtemp(prefix=name + ".", dir=work_root)
    cluster = RaftCluster(nodes, work, *election)
    history = History()
    cluster.history = history
    clients = []
    vip_clients = set()  # their names
    notes = []
    writer = CacheWriter(cluster, "w")
    cache = {"acked": 0, "lost": [], "checked": name not in MEMORY_ONLY_RUNS}

    def note(text, at=None):
        """`at`: when the fault struck, if before now."""
        notes.append((time.monotonic() if at is None else at, text))

    try:
        for node in range(nodes):
            cluster.start(node)
            cluster.start_keepalived(node)
        cluster.leader()
        # On every node's machine a client of the shared names and one of a
        # name of its own; two more clients on a machine of their own. And
        # two that know only the virtual IP: on that machine, and on node 0's.
        homes = [(n, False) for n in range(nodes)] + [(n, True) for n in range(nodes)]
        homes += [(nodes, False), (nodes, False)]
        for i, (home, private) in enumerate(homes):
            where = "own" if home == nodes else "node%d" % home
            clients.append(Client(cluster, "c%d@%s" % (i, where), home, history,
                                  seed * 100 + i, private))
        for i, home in enumerate([nodes, 0]):
            where = "own" if home == nodes else "node%d" % home
            clients.append(VipClient(cluster, "vip%d@%s" % (i, where), home, history,
                                     seed * 100 + len(homes) + i))
        started_at = time.monotonic()
        for c in clients:
            c.start()
        writer.start()
        vip_clients.update(c.name for c in clients if isinstance(c, VipClient))
        try:
            haclient.eventually(lambda: vip_clients <= {g[3] for g in list(history.grants)},
                                VIP_START_S, "a grant to every client through the virtual IP",
                                error=FaultFailed)
        except FaultFailed as error:
            history.violation("before the fault: %s" % error)
        time.sleep(max(started_at + SETTLE_S - time.monotonic(), 0.5))
        fault_at = time.monotonic()
        try:
            fault(cluster, note)
            healed_at = time.monotonic()
            cluster.leader()
        except FaultFailed as error:
            healed_at = time.monotonic()
            history.violation("after the fault: %s" % error)
        time.sleep(SETTLE_S)
        writer.finish()
        cache["acked"] = len(writer.acked)
        if cache["checked"]:
            cache["lost"] = writer.lost(cluster)
    finally:
        ended_at = time.monotonic()
        writer.finish()
        for c in clients:
            c.stop.set()
        for c in clients:
            c.join(timeout=REPLY_TIMEOUT + 2)
            c.close()
        cluster.close()
    violations = check(history) + cluster.violations
    if notes:
        fault_at = notes[0][0]  # a fault notes itself once it has struck
    # The cache is replicated asynchronously: a write the leader acknowledged
    # in its last election timeout before the fault may be lost, and so may
    # one a cut-off leader acknowledged before it stepped down, or a thawed
    # one before it heard of the new term (STALE_LEADER_S); nothing else.
    election_s = (cluster.election_ms or DEFAULT_ELECTION_MS) / 1000
    window = (fault_at - election_s, healed_at + STALE_LEADER_S)
    for key, when in cache["lost"]:
        if not window[0] <= when <= window[1]:
            violations.append("acknowledged cache write %s lost, acknowledged %.3f s after the "
                              "fault" % (key, when - fault_at))
    first_grant, gap = outage(history.grants, fault_at, ended_at)
    vip_first_grant, vip_gap = outage([g for g in history.grants if g[3] in vip_clients],
                                      fault_at, ended_at)
    granted_before = sum(1 for g in history.grants if g[1] <= fault_at)
    return {
        "run": name, "nodes": nodes, "grants": len(history.grants),
        "before": granted_before, "first_grant_s": first_grant, "gap_s": gap,
        "vip_grants": sum(1 for g in history.grants if g[3] in vip_clients),
        "vip_first_grant_s": vip_first_grant, "vip_gap_s": vip_gap,
        "sessions_lost": sum(c.sessions_lost for c in clients),
        "fault_s": healed_at - fault_at, "violations": violations,
        "notes": [text for _, text in notes], "work": work,
        "cache": "cache: %d writes acknowledged, %s" % (
            cache["acked"],
            "%d lost (acknowledged %.3f to %.3f s after the fault)" % (
                len(cache["lost"]), min(w for _, w in cache["lost"]) - fault_at,
                max(w for _, w in cache["lost"]) - fault_at) if cache["lost"] else
            "none lost" if cache["checked"] else "not checked (the cache lives in memory: "
            "restarting every node empties it)"),
    }


def gap_bound(result):
    """The longest stretch without a grant that a run may show."""
    if result["run"] in ONE_WAY_RUNS:
        return FIRST_GRANT_BOUND_S
    return result["fault_s"] + FIRST_GRANT_BOUND_S


def seconds(value):
    return "none" if value is None else "%.2f s" % value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", default=list(RUNS), help="runs (default: all)")
    parser.add_argument("--expect-violations", action="store_true",
                        help="succeed only if some run reports a violation (an unsafe build)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for name in args.runs:
        if name not in RUNS:
            parser.error("no run %r (runs: %s)" % (name, ", ".join(RUNS)))
    work_root = tempfile.mkdtemp(prefix="raft-faults.")
    results = []
    for i, name in enumerate(args.runs):
        began = time.monotonic()
        result = run_one(name, work_root, args.seed + i)
        results.append(result)
        print("%-24s %d nodes  %5d grants  first grant asked after the fault %s, longest time "
              "without a grant %s  %d violations  (%s; the run took %.0f s)"
              % (name, result["nodes"], result["grants"], seconds(result["first_grant_s"]),
                 seconds(result["gap_s"]), len(result["violations"]), "; ".join(result["notes"]),
                 time.monotonic() - began), flush=True)
        print("    through the virtual IP: %d grants, first asked after the fault %s, longest "
              "time without one %s; sessions that could not resume: %d"
              % (result["vip_grants"], seconds(result["vip_first_grant_s"]),
                 seconds(result["vip_gap_s"]), result["sessions_lost"]), flush=True)
        print("    " + result["cache"], flush=True)
        for violation in result["violations"][:10]:
            print("    VIOLATION " + violation, flush=True)
    total = sum(len(r["violations"]) for r in results)
    slow = [r for r in results if r["gap_s"] > gap_bound(r)]
    vip_slow = [r for r in results
                if r["vip_gap_s"] > r["fault_s"] + FIRST_GRANT_BOUND_S + VIP_MOVE_S]
    starved = [r for r in results if r["before"] == 0]
    print("%d runs, %d violations; no stretch without a grant longer than the fault plus "
          "%.1f s (%.1f s in the one-way runs) in %d of %d runs, and through the virtual IP, "
          "the fault plus %.1f s in %d"
          % (len(results), total, FIRST_GRANT_BOUND_S, FIRST_GRANT_BOUND_S,
             len(results) - len(slow), len(results), FIRST_GRANT_BOUND_S + VIP_MOVE_S,
             len(results) - len(vip_slow)))
    if args.expect_violations:
        if total == 0:
            print("FAIL: the unsafe build passed every check: the checks catch nothing")
            return 1
        print("the checks caught the unsafe build (%d violations)" % total)
        shutil.rmtree(work_root, ignore_errors=True)
        return 0
    failed = total > 0 or slow or vip_slow or starved
    for r in slow:
        print("FAIL: %s: a stretch without a grant of %.1f s, longer than %s"
              % (r["run"], r["gap_s"], "%.1f s (the majority stayed whole)" % FIRST_GRANT_BOUND_S
                 if r["run"] in ONE_WAY_RUNS else "the fault plus %.1f s" % FIRST_GRANT_BOUND_S))
    for r in vip_slow:
        print("FAIL: %s: a stretch without a grant through the virtual IP longer than the fault "
              "plus %.1f s" % (r["run"], FIRST_GRANT_BOUND_S + VIP_MOVE_S))
    for r in starved:
        print("FAIL: %s: no grant before the fault" % r["run"])
    if failed:
        print("servers' logs kept in " + work_root)
        return 1
    shutil.rmtree(work_root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
