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

    def test_locks_and_sessions_survive_a_promotion(self):
        self.cluster.add_address(0, self.cluster.vip)
        self.servers.start(0)
        holder = self.vip_client(1, haclient.LOCK_PORT)
        session = holder.call("conn_id").split()[1]
        self.assertEqual(holder.call("set_timeout 20000"), "200 Timeout set")
        tokens = {name: int(holder.call("lock " + name).split()[2]) for name in ["a", "b"]}
        # A late replica gets the lock service's state with the snapshot.
        self.servers.start(1)
        eventually(lambda: streaming(self.servers, 1), 10, "node 1 streams from node 0")
        eventually(lambda: self.servers.replication(1)["locks"] == "2", 5,
                   "node 1 has the snapshot's locks")
        # From now on a change is answered only once node 1 has it: no waiting.
        tokens["c"] = int(holder.call("lock c").split()[2])
        self.assertEqual(self.servers.replication(1)["locks"], "3")
        self.assertEqual(holder.call("unlock c"), "200 Released")
        self.assertEqual(self.servers.replication(1)["locks"], "2")
        del tokens["c"]
        brief = self.vip_client(1, haclient.LOCK_PORT)
        self.assertEqual(brief.call("set_timeout 1000"), "200 Timeout set")
        self.assertTrue(brief.call("lock brief").startswith("200 Acquired "))
        master = self.servers.replication(0)
        self.assertEqual(master["sync_timeouts"], "0")
        float(master["replica:0:lag_seconds"])

        self.move_vip(0, 1)
        eventually(lambda: self.servers.replication(1)["role"] == "master", 5, "node 1 promotes")
        # The demoted master closed its clients; the holder finds the new one.
        with self.assertRaises((ConnectionError, OSError)):
            holder.call("conn_id")
        holder = self.vip_client(0, haclient.LOCK_PORT)
        self.assertEqual(holder.call("conn_id " + session), "200 Resumed")
        holder.send("stats locks\r\n")
        self.assertEqual(holder.line(), "200 LOCKS")
        held = {}
        for line in iter(holder.line, "END"):
            _, name, owner, _, _, token, _ = line.split()
            held[name] = (owner, int(token))
        # Listed under the session's public serial; its secret is never shown.
        self.assertEqual({name: held[name] for name in tokens},
                         {name: (session.split("-")[0], token) for name, token in tokens.items()})
        other = self.vip_client(0, haclient.LOCK_PORT)
        self.assertEqual(other.call("lock a"), "409 Unavailable")
        fresh = int(other.call("lock z").split()[2])
        self.assertGreater(fresh, max(tokens.values()))
        self.assertEqual(holder.call("unlock a"), "200 Released")
        self.assertTrue(other.call("lock a").startswith("200 Acquired "))
        # Nobody resumed the brief session: it ends after its second of grace.
        eventually(lambda: other.call("lock brief").startswith("200 Acquired "), 5,
                   "the unresumed session's lock is released after its grace")
        # Node 0 resyncs from node 1, lock service included.
        eventually(lambda: streaming(self.servers, 0), 10, "node 0 resyncs from node 1")
        eventually(lambda: self.servers.replication(0).get("locks") == "4", 5,
                   "node 0 has node 1's locks: b, z, a and brief")

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
        self.cluster.add_address(0, self.cluster.vip)
        for node in range(3):
            self.servers.start(node)
        eventually(lambda: streaming(self.servers, 1) and streaming(self.servers, 2), 10,
                   "both replicas stream")
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


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("replication_test.py needs root (network namespaces)")
    unittest.main(verbosity=2)
