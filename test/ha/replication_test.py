#!/usr/bin/env python3
"""Replication end to end: two and three real lockcached processes in
network namespaces (netns.py), the virtual IP moved by hand. As root:

    LOCKCACHED_BINARY=build/lockcached python3 test/ha/replication_test.py

CI runs it in test/ci/25-high-availability.sh.
"""

import os
import socket
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import haclient  # noqa: E402
from haclient import eventually  # noqa: E402

BINARY = os.path.abspath(os.environ.get("LOCKCACHED_BINARY", "build/lockcached"))
READ_ONLY = "SERVER_ERROR read-only replica: writes go to the master"


def streaming(servers, node):
    return servers.replication(node).get("state") == "streaming"


def items(servers, node):
    c = servers.client(node)
    try:
        return int(c.stats()["curr_items"])
    finally:
        c.close()


class ClusterTest(haclient.ClusterTest):
    NODES = 2
    BINARY = BINARY

    def vip_client(self, from_node, port=haclient.CACHE_PORT):
        return self.servers.vip_client(from_node, port)

    def move_vip(self, old, new):
        self.cluster.remove_address(old, self.cluster.vip)
        self.cluster.add_address(new, self.cluster.vip)

    def start_all(self):
        """Node 0 holds the virtual IP; every node starts, and the others
        stream from it."""
        self.cluster.add_address(0, self.cluster.vip)
        for node in range(self.NODES):
            self.servers.start(node)
        eventually(lambda: all(streaming(self.servers, n) for n in range(1, self.NODES)), 10,
                   "every replica streams")


class TwoNodes(ClusterTest):
    def start_pair(self):
        """Node 0 holds the virtual IP and starts first; node 1 follows it."""
        self.cluster.add_address(0, self.cluster.vip)
        self.servers.start(0)
        self.servers.start(1)
        eventually(lambda: streaming(self.servers, 1), 10, "node 1 streams from node 0")

    def test_roles_follow_the_virtual_ip(self):
        self.start_pair()
        master = self.servers.replication(0)
        replica = self.servers.replication(1)
        self.assertEqual(master["role"], "master")
        self.assertEqual(replica["role"], "replica")
        self.assertEqual(replica["master"], "%s:11213" % self.cluster.vip)
        self.assertEqual(master["replicas"], "1")
        self.assertEqual(master["replica:0:address"].split(":")[0], self.cluster.addresses[1])

    def test_snapshot_then_stream(self):
        self.cluster.add_address(0, self.cluster.vip)
        self.servers.start(0)
        writer = self.vip_client(1)
        for i in range(2000):
            self.assertEqual(writer.set("before:%d" % i, "v%d" % i), "STORED")
        self.servers.start(1)
        eventually(lambda: items(self.servers, 1) == 2000, 15, "the snapshot reaches node 1")
        # Every kind of change after the snapshot.
        self.assertEqual(writer.set("after", "1"), "STORED")
        self.assertEqual(writer.call("incr after 41"), "42")
        self.assertEqual(writer.call("delete before:0"), "DELETED")
        self.assertEqual(writer.call("append before:1 0 0 1\r\nx"), "STORED")
        self.assertEqual(writer.set("ttl", "gone", exptime=1), "STORED")
        reader = self.servers.client(1)
        eventually(lambda: reader.get("after") == "42", 5, "incr reaches node 1")
        eventually(lambda: reader.get("before:0") is None, 5, "delete reaches node 1")
        # Sent after the delete, so it may arrive a moment after it.
        eventually(lambda: reader.get("before:1") == "v1x", 5, "append reaches node 1")
        self.assertEqual(reader.get("before:1999"), "v1999")
        eventually(lambda: reader.get("ttl") is None, 5, "the expiry holds on node 1 too")
        self.assertEqual(writer.call("flush_all"), "OK")
        eventually(lambda: reader.get("before:2") is None, 5, "flush_all reaches node 1")
        self.assertIsNone(reader.get("after"))

    def test_replica_refuses_every_write(self):
        self.start_pair()
        writer = self.vip_client(1)
        self.assertEqual(writer.set("k", "v"), "STORED")
        replica = self.servers.client(1)
        eventually(lambda: replica.get("k") == "v", 5, "k reaches node 1")
        self.assertEqual(replica.set("k", "other"), READ_ONLY)
        self.assertEqual(replica.call("set k 0 0 1 noreply\r\nx"), READ_ONLY)
        for command in ["delete k", "incr k 1", "touch k 10", "flush_all", "lock k",
                        "unlock k", "gat 10 k"]:
            self.assertEqual(replica.call(command), READ_ONLY, command)
        self.assertEqual(replica.call("ms k 1\r\nx"), READ_ONLY)
        self.assertEqual(replica.call("md k"), READ_ONLY)
        self.assertEqual(replica.call("mg missing N30"), READ_ONLY)
        self.assertEqual(replica.call("mg k v"), "VA 1")
        self.assertEqual(replica.line(), "v")
        self.assertEqual(replica.get("k"), "v")  # nothing changed, the connection still serves
        # Binary: Set answers 0x86 with the reason, even as quiet SetQ.
        binary = haclient.connect(self.cluster, 1, self.cluster.addresses[1], 11211)
        key, value = b"k", b"zz"
        body = struct.pack(">II", 0, 0) + key + value
        setq = struct.pack(">BBHBBHIIQ", 0x80, 0x11, len(key), 8, 0, 0, len(body), 7, 0) + body
        binary.sendall(setq)
        header = binary.recv(24, socket.MSG_WAITALL)
        magic, opcode, _, _, _, status, length, opaque, _ = struct.unpack(">BBHBBHIIQ", header)
        self.assertEqual((magic, opcode, status, opaque), (0x81, 0x11, 0x86, 7))
        self.assertIn(b"read-only replica", binary.recv(length, socket.MSG_WAITALL))
        binary.close()  # not tracked: a raw socket
        locks = self.servers.client(1, haclient.LOCK_PORT)
        self.assertEqual(locks.call("lock name"),
                         "503 read-only replica: writes go to the master")
        self.assertTrue(locks.call("stats").startswith("200"))
        self.assertEqual(replica.get("k"), "v")

    def test_moving_the_virtual_ip_swaps_the_roles(self):
        self.start_pair()
        writer = self.vip_client(1)
        self.assertEqual(writer.set("kept", "1"), "STORED")
        old_master_client = self.servers.client(0)
        replica = self.servers.client(1)
        eventually(lambda: replica.get("kept") == "1", 5, "kept reaches node 1")
        self.move_vip(0, 1)
        eventually(lambda: self.servers.replication(1)["role"] == "master", 5, "node 1 promotes")
        eventually(lambda: self.servers.replication(0)["role"] == "replica", 5, "node 0 demotes")
        # The demoted master's clients were sent away.
        with self.assertRaises((ConnectionError, OSError)):
            old_master_client.call("version")
        old_master_client.close()
        self.assertEqual(replica.set("on-new-master", "1"), "STORED")  # kept its connection
        writer.close()
        writer = self.vip_client(0)
        self.assertEqual(writer.get("kept"), "1")  # the promoted replica kept its data
        self.assertEqual(writer.set("new", "2"), "STORED")
        eventually(lambda: streaming(self.servers, 0), 10, "node 0 resyncs from node 1")
        old = self.servers.client(0)
        eventually(lambda: old.get("new") == "2", 5, "node 0 streams from node 1")
        self.assertEqual(old.get("kept"), "1")
        self.assertEqual(old.set("x", "y"), READ_ONLY)
        stats = self.servers.replication(1)
        self.assertEqual(stats["promotions"], "1")
        self.assertEqual(self.servers.replication(0)["demotions"], "1")

    def test_the_lock_service_starts_afresh_on_a_promotion(self):
        """The cache is replicated, the lock service is not (--cluster
        replicates it): a session does not survive a promotion, and the new
        master's tokens are above the old master's (its clock is in sync)."""
        self.start_pair()
        holder = self.vip_client(1, haclient.LOCK_PORT)
        session = holder.call("conn_id").split()[1]
        self.assertEqual(holder.call("set_timeout 20000"), "200 Timeout set")
        tokens = [int(holder.call("lock " + name).split()[2]) for name in ["a", "b"]]
        on_replica = self.servers.client(1, haclient.LOCK_PORT)
        self.assertEqual(on_replica.call("lock a"),
                         "503 read-only replica: writes go to the master")
        # Nothing of the lock service travels: only the cache's stream.
        master = self.servers.replication(0)
        self.assertNotIn("sync_timeouts", master)
        float(master["replica:0:lag_seconds"])
        self.assertNotIn("locks", self.servers.replication(1))

        self.move_vip(0, 1)
        eventually(lambda: self.servers.replication(1)["role"] == "master", 5, "node 1 promotes")
        # The demoted master closed its clients; so did the promoted replica,
        # whose lock-service connections were on its replica's service.
        for gone in (holder, on_replica):
            with self.assertRaises((ConnectionError, OSError)):
                gone.call("conn_id")
            gone.close()
        holder = self.vip_client(0, haclient.LOCK_PORT)
        self.assertEqual(holder.call("conn_id " + session), "403 Cannot resume")
        holder.send("stats locks\r\n")
        self.assertEqual(holder.line(), "200 LOCKS")
        self.assertEqual(holder.line(), "END")  # the old master's locks are gone with it
        fresh = int(holder.call("lock a").split()[2])
        self.assertGreater(fresh, max(tokens))
        # Node 0 resyncs from node 1; its lock service is a replica's again.
        eventually(lambda: streaming(self.servers, 0), 10, "node 0 resyncs from node 1")
        on_old = self.servers.client(0, haclient.LOCK_PORT)
        self.assertEqual(on_old.call("lock a"), "503 read-only replica: writes go to the master")

    def test_a_replica_started_first_waits_for_a_master(self):
        self.servers.start(1)  # nobody holds the virtual IP yet
        self.assertEqual(self.servers.replication(1)["role"], "replica")
        self.assertEqual(self.servers.client(1).set("k", "v"), READ_ONLY)
        self.cluster.add_address(0, self.cluster.vip)
        self.servers.start(0)
        eventually(lambda: streaming(self.servers, 1), 10, "node 1 finds the master")


class ThreeNodes(ClusterTest):
    NODES = 3

    def test_master_killed_one_replica_takes_over_the_other_follows(self):
        self.start_all()
        writer = self.vip_client(2)
        for i in range(500):
            self.assertEqual(writer.set("k%d" % i, "v%d" % i), "STORED")
        eventually(lambda: items(self.servers, 1) == 500 and items(self.servers, 2) == 500, 10,
                   "both replicas have every item")
        self.servers.kill(0)
        self.move_vip(0, 1)  # what keepalived does once node 0 stops answering
        eventually(lambda: self.servers.replication(1)["role"] == "master", 5, "node 1 promotes")
        writer = self.vip_client(2)
        self.assertEqual(writer.get("k499"), "v499")
        self.assertEqual(writer.set("later", "x"), "STORED")
        # Node 2 waits --repl_timeout for the address, then resyncs from node 1.
        bystander = self.servers.client(2)
        eventually(lambda: bystander.get("later") == "x", 15, "node 2 follows the new master")
        self.assertEqual(items(self.servers, 2), 501)
        self.assertEqual(self.servers.replication(1)["replicas"], "1")


class ThreeNodesWithData(ClusterTest):
    NODES = 3
    FLAGS = ["--memory_limit_mb=256"]
    ITEMS = 40000
    VALUE = b"v" * 2000  # 80 MB: a snapshot long enough to be caught in the act

    def test_a_master_killed_during_its_snapshot_leaves_the_replica_its_data(self):
        self.start_all()
        writer = self.vip_client(2)
        writer.send(b"".join(b"set k%d 0 0 %d noreply\r\n%s\r\n" % (i, len(self.VALUE), self.VALUE)
                             for i in range(self.ITEMS)))
        self.assertTrue(writer.call("version").startswith("VERSION"))
        eventually(lambda: items(self.servers, 1) == self.ITEMS
                   and items(self.servers, 2) == self.ITEMS, 60, "both replicas have every item")
        self.servers.kill(0)
        self.move_vip(0, 2)
        eventually(lambda: self.servers.replication(2)["role"] == "master", 5, "node 2 promotes")
        # Node 1 resyncs from node 2, which dies as soon as its snapshot is
        # seen under way.
        eventually(lambda: self.servers.replication(2).get("replica:0:state") == "snapshot", 15,
                   "node 2 sends node 1 its snapshot", interval=0.005)
        self.servers.kill(2)
        self.assertNotIn("items sent to " + self.cluster.addresses[1], self.servers.log(2),
                         "the snapshot was whole before the kill: more items are needed")
        # Node 1 kept what it had, beside the part that came.
        reader = self.servers.client(1)
        eventually(lambda: self.servers.replication(1)["state"] != "streaming", 5,
                   "node 1 sees its master go")
        self.assertEqual(items(self.servers, 1), self.ITEMS)
        self.assertEqual(reader.get("k0"), self.VALUE.decode())
        self.assertEqual(reader.get("k%d" % (self.ITEMS - 1)), self.VALUE.decode())


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("replication_test.py needs root (network namespaces)")
    unittest.main(verbosity=2)
