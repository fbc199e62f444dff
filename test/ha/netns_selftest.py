#!/usr/bin/env python3
"""Self-test of test/ha/netns.py, the hosts of the coming HA tests: three
namespaces reach each other over the bridge, one-way faults (deafen, mute)
block one direction only, a virtual IP moved by hand
answers on its new holder, and keepalived moves it when its holder's
machine goes down. As root, with iproute2 and keepalived installed:

    python3 test/ha/netns_selftest.py

Prints how long keepalived took to move the address. Not in the CI run
yet: it tests the harness, not lockcached.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402


def reachable(cluster, node, address, port):
    """A TCP connection from `node` to address:port, where a listener runs."""
    probe = "import socket; socket.create_connection((%r, %d), timeout=2).close()" % (address,
                                                                                     port)
    return cluster.exec(node, [sys.executable, "-c", probe]).returncode == 0


def datagram_arrives(cluster, sender, receiver):
    """Whether a UDP datagram that `sender` sends to `receiver`'s address
    arrives there: one direction alone, unlike a TCP connection."""
    listen = ("import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
              "s.bind(('0.0.0.0',7001))\nprint('ready',flush=True)\ns.settimeout(1)\n"
              "try: sys.exit(0 if s.recv(16)==b'hello' else 1)\n"
              "except TimeoutError: sys.exit(1)\n")
    waiting = cluster.run(receiver, [sys.executable, "-c", listen], stdout=subprocess.PIPE)
    waiting.stdout.readline()
    send = ("import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
            "for _ in range(5):\n"
            "    try: s.sendto(b'hello',(%r,7001))\n"
            "    except OSError: pass\n"
            "    time.sleep(0.05)\n" % cluster.addresses[receiver])
    cluster.exec(sender, [sys.executable, "-c", send])
    try:
        return waiting.wait(timeout=5) == 0
    finally:
        waiting.stdout.close()


def main():
    failures = []

    def check(condition, message):
        print(("ok    " if condition else "FAIL  ") + message)
        if not condition:
            failures.append(message)

    with netns.Cluster(3) as cluster, tempfile.TemporaryDirectory() as work:
        listener = "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET," \
                   "socket.SO_REUSEADDR,1); s.bind(('0.0.0.0',7000)); s.listen(); " \
                   "print('ready',flush=True); [s.accept()[0].close() for _ in iter(int,1)]"
        for node in range(3):
            server = cluster.run(node, [sys.executable, "-c", listener], stdout=subprocess.PIPE)
            check(server.stdout.readline().strip() == b"ready", "listener up in node %d" % node)
        check(reachable(cluster, 0, cluster.addresses[2], 7000), "node 0 reaches node 2")

        check(datagram_arrives(cluster, 0, 2), "a datagram from node 0 reaches node 2")
        cluster.deafen(2)
        check(not datagram_arrives(cluster, 0, 2), "node 2 deafened: node 0's does not")
        check(datagram_arrives(cluster, 2, 0), "node 2 deafened: its own reach node 0")
        cluster.restore_routes()
        cluster.mute(2)
        check(not datagram_arrives(cluster, 2, 1), "node 2 muted: its datagrams reach no one")
        check(datagram_arrives(cluster, 1, 2), "node 2 muted: node 1's reach it")
        cluster.restore_routes()
        check(reachable(cluster, 2, cluster.addresses[0], 7000) and
              reachable(cluster, 0, cluster.addresses[2], 7000), "routes restored both ways")

        cluster.add_address(1, cluster.vip)
        check(cluster.holders(cluster.vip) == [1], "the virtual IP is on node 1 only")
        check(reachable(cluster, 0, cluster.vip, 7000), "node 0 reaches the virtual IP")
        cluster.remove_address(1, cluster.vip)
        check(cluster.holders(cluster.vip) == [], "the virtual IP is on no node")

        daemons = []
        for node in range(3):
            config = os.path.join(work, "keepalived%d.conf" % node)
            with open(config, "w") as f:
                f.write(netns.keepalived_config(cluster, node, 100 - node))
            daemons.append(cluster.run(node, [
                "keepalived", "--dont-fork", "--log-console", "--use-file", config,
                "--pid", os.path.join(work, "k%d.pid" % node),
                "--vrrp_pid", os.path.join(work, "v%d.pid" % node)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        took = cluster.wait_for(lambda: len(cluster.holders(cluster.vip)) == 1, 15)
        check(took is not None, "keepalived gave the virtual IP to one node")
        if took is None:
            return 1
        first = cluster.holders(cluster.vip)[0]
        print("      node %d holds it after %.1f s" % (first, took))

        cluster.take_down(first)
        others = [n for n in range(3) if n != first]
        took = cluster.wait_for(lambda: any(cluster.holds(n, cluster.vip) for n in others), 15)
        check(took is not None, "keepalived moved the virtual IP off the downed node")
        if took is not None:
            holder = [n for n in others if cluster.holds(n, cluster.vip)]
            print("      node %s holds it %.1f s after node %d went down" % (holder, took, first))
            check(len(holder) == 1, "exactly one live node holds it")
            bystander = [n for n in others if n not in holder][0]
            check(reachable(cluster, bystander, cluster.vip, 7000),
                  "the other live node reaches the virtual IP on its new holder")
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
