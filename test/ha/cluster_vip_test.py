#!/usr/bin/env python3
"""keepalived beside a Raft cluster: the virtual IP follows the leader.

Three lockcached nodes (--cluster, default timeouts), each beside keepalived
running the shipped etc/keepalived.conf (changed only for the node's name,
the test's address and the CLI's path), and a fourth namespace for a client
that knows nothing but the virtual IP: it connects there, takes a lock
(`lock NAME`), releases it, and starts over after any error, as a client
written for a single server would. It never follows a `503`. As root, with
keepalived installed:

    LOCKCACHED_BINARY=build/lockcached LOCKCACHED_CLI=build/src/cli/lockcached-cli \\
        python3 test/ha/cluster_vip_test.py

Prints how long the client went without a grant; CI runs it in
test/ci/25-high-availability.sh.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import haclient  # noqa: E402
import raft_faults  # noqa: E402
from haclient import eventually  # noqa: E402

NODES = 3
# A client through the address gets a grant again within: an election
# (up to 2 default election timeouts of 1 s after the leader was last
# heard, plus one for the pre-vote), the new leader's check passing
# (keepalived runs it every second), VRRP's hand-over (3 adverts of 0.2 s
# and a skew), and the client's next try. Measured 3-4 s here.
KILL_BOUND_S = 8.0
# After a partition heals, the client whose ARP entry still names the old
# leader's MAC hears the new holder's periodic gratuitous ARP (every second
# in the shipped file) and connects at its next try (1 s apart at most).
# Without the refresh it took 5.2-5.5 s here: the kernel's stale entry
# waits 5 s before it probes the old MAC.
HEAL_BOUND_S = 3.5


class VipLocker(threading.Thread):
    """The client: lock and unlock a fresh name through the virtual IP,
    forever, recording when each grant came."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.cluster = cluster
        self.stop = threading.Event()
        self.grants = []  # monotonic times of `200 Acquired`
        self.count = 0

    def run(self):
        while not self.stop.is_set():
            try:
                c = haclient.TextClient(haclient.connect(
                    self.cluster.net, NODES, self.cluster.net.vip, raft_faults.LOCK_PORT,
                    timeout=1))
            except OSError:
                time.sleep(0.05)
                continue
            try:
                c.sock.settimeout(1)
                while not self.stop.is_set():
                    self.count += 1
                    name = "vip-%d" % self.count
                    if not c.call("lock %s" % name).startswith("200 Acquired"):
                        break  # 503 not leader: the address has not moved yet
                    self.grants.append(time.monotonic())
                    if c.call("unlock %s" % name) != "200 Released":
                        break
            except (OSError, ConnectionError):
                pass
            finally:
                c.close()
            time.sleep(0.05)

    def first_grant_after(self, moment):
        return next((t for t in list(self.grants) if t > moment), None)

    def finish(self):
        self.stop.set()
        self.join(5)


class AddressFollowsTheLeader(unittest.TestCase):
    def setUp(self):
        log_root = os.environ.get("HA_LOG_DIR")
        if log_root:
            os.makedirs(log_root, exist_ok=True)
        self.work = tempfile.mkdtemp(dir=log_root, prefix=self.id() + ".")
        if not log_root:  # added first, so it runs last: after every process is gone
            self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)
        self.cluster = raft_faults.RaftCluster(NODES, self.work, election_ms=None)
        self.addCleanup(self.cluster.close)
        for node in range(NODES):
            self.cluster.start(node)
            self.cluster.start_keepalived(node)
        self.client = VipLocker(self.cluster)
        self.addCleanup(self.client.finish)

    def holders(self):
        return self.cluster.net.holders(self.cluster.net.vip)

    def address_on(self, node, within, what):
        eventually(lambda: self.holders() == [node], within, what)

    def vip_mac_seen_by_client(self):
        shown = subprocess.run(["ip", "-n", self.cluster.net.names[NODES], "neigh", "show",
                                self.cluster.net.vip], capture_output=True, text=True).stdout
        fields = shown.split()
        return fields[fields.index("lladdr") + 1] if "lladdr" in fields else None

    def mac_of(self, node):
        shown = subprocess.run(["ip", "-n", self.cluster.net.names[node], "link", "show", "eth0"],
                               capture_output=True, text=True).stdout
        return shown.split("link/ether ")[1].split()[0]

    def start_client(self):
        leader = self.cluster.leader()
        self.address_on(leader, 10, "the leader's keepalived takes the address")
        self.client.start()
        eventually(lambda: len(self.client.grants) > 20, 10, "grants through the address")
        return leader

    def test_the_address_moves_with_the_leader_and_stays_there(self):
        leader = self.start_client()
        # Only lockcached dies; its machine and its keepalived stay.
        self.cluster.kill(leader)
        killed_at = time.monotonic()
        eventually(lambda: self.client.first_grant_after(killed_at), KILL_BOUND_S + 2,
                   "a grant through the address after the leader died")
        outage = self.client.first_grant_after(killed_at) - killed_at
        new_leader = self.cluster.leader()
        self.assertNotEqual(new_leader, leader)
        self.assertEqual(self.holders(), [new_leader])

        # The old leader comes back as a follower: its check fails, and the
        # address stays where it is while its keepalived runs the check a
        # few times.
        self.cluster.start(leader)
        eventually(lambda: self.cluster.stats(leader).get("role") == "follower", 10,
                   "the restarted node follows")
        granted = len(self.client.grants)
        watch_until = time.monotonic() + 3
        while time.monotonic() < watch_until:
            self.assertEqual(self.holders(), [new_leader])
            time.sleep(0.05)
        self.assertGreater(len(self.client.grants), granted, "grants go on meanwhile")
        print("\n      leader killed: the client through the address had a grant again "
              "%.1f s later (bound %.0f s)" % (outage, KILL_BOUND_S))
        self.assertLess(outage, KILL_BOUND_S)

    def test_a_healed_partition_does_not_strand_a_client(self):
        leader = self.start_client()
        self.assertEqual(self.vip_mac_seen_by_client(), self.mac_of(leader))
        # The leader and the client on one side, the majority on the other:
        # the majority elects a leader that takes the address, while the
        # old one steps down and lets it go. The client hears neither.
        self.cluster.net.split([leader, NODES])
        others = [n for n in range(NODES) if n != leader]
        leading = lambda: [n for n in others  # noqa: E731
                           if self.cluster.stats(n, asked_from=n).get("role") == "leader"]
        [new_leader] = eventually(leading, 10, "the majority elects a leader")
        self.address_on(new_leader, 10, "the new leader takes the address, the old lets go")
        self.cluster.net.heal()
        healed_at = time.monotonic()
        eventually(lambda: self.client.first_grant_after(healed_at), HEAL_BOUND_S + 4,
                   "a grant through the address after the partition healed")
        outage = self.client.first_grant_after(healed_at) - healed_at
        self.assertEqual(self.vip_mac_seen_by_client(), self.mac_of(new_leader))
        print("\n      partition healed: the client through the address had a grant again "
              "%.1f s later (bound %.1f s)" % (outage, HEAL_BOUND_S))
        self.assertLess(outage, HEAL_BOUND_S)


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("cluster_vip_test.py needs root (network namespaces)")
    socket.setdefaulttimeout(10)
    unittest.main(verbosity=2)
