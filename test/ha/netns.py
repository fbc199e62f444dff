"""Hosts for high-availability tests, made of Linux network namespaces.

Each node is a network namespace with one veth link to a bridge that lives
in a namespace of its own, so the nodes share one Ethernet segment (VRRP's
multicast works on it) and nothing reaches the machine's own network: the
addresses are TEST-NET-1 (192.0.2.0/24, RFC 5737), configured only inside
the namespaces, with no route out. Needs root and iproute2.

    with Cluster(3) as cluster:
        cluster.run(0, ["lockcached", ...])      # a process in node 0
        cluster.add_address(0, cluster.vip)      # move the virtual IP by hand
        cluster.take_down(0)                     # the machine is gone
        cluster.split([0, 3])                    # nodes 0 and 3 apart from the rest
        cluster.heal()
        cluster.deafen(1)                        # nothing reaches node 1; it still sends
        cluster.mute(2)                          # what node 2 sends reaches nobody
        cluster.restore_routes()
        cluster.signal_all(0, signal.SIGSTOP)    # the whole machine paused

Every namespace and process is removed on exit, also after a failure.
Names carry the creating process's pid, so parallel runs do not collide.
"""

import os
import signal
import subprocess
import time

SUBNET = "192.0.2"  # TEST-NET-1: never routed anywhere
PREFIX = 24


def _ip(*args, netns=None, check=True):
    command = ["ip"]
    if netns:
        command += ["-n", netns]
    return subprocess.run(command + list(args), check=check, capture_output=True, text=True)


class Cluster:
    def __init__(self, nodes):
        tag = "lc%d" % os.getpid()
        self.bridge_ns = tag + "br"
        self.names = ["%sn%d" % (tag, i) for i in range(nodes)]
        self.addresses = ["%s.%d" % (SUBNET, 11 + i) for i in range(nodes)]
        self.vip = "%s.100" % SUBNET
        self._processes = []
        self._bridge_ends = []  # each node's port on the bridge
        self._blackholes = []  # (namespace, address): routes deafen() and mute() added

    # --- lifetime -----------------------------------------------------------

    def __enter__(self):
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _build(self):
        _ip("netns", "add", self.bridge_ns)
        _ip("link", "add", "br0", "type", "bridge", netns=self.bridge_ns)
        _ip("link", "set", "br0", "up", netns=self.bridge_ns)
        for i, name in enumerate(self.names):
            _ip("netns", "add", name)
            _ip("link", "set", "lo", "up", netns=name)
            # Created in the root namespace, both ends moved out at once.
            node_end, bridge_end = "lcv%d_%d" % (os.getpid() % 100000, i), "lcb%d_%d" % (
                os.getpid() % 100000, i)
            _ip("link", "add", node_end, "type", "veth", "peer", "name", bridge_end)
            _ip("link", "set", node_end, "netns", name, "name", "eth0")
            self._bridge_ends.append(bridge_end)
            _ip("link", "set", bridge_end, "netns", self.bridge_ns)
            _ip("link", "set", bridge_end, "master", "br0", netns=self.bridge_ns)
            _ip("link", "set", bridge_end, "up", netns=self.bridge_ns)
            _ip("addr", "add", "%s/%d" % (self.addresses[i], PREFIX), "dev", "eth0", netns=name)
            _ip("link", "set", "eth0", "up", netns=name)

    def close(self):
        for process in self._processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        self._processes.clear()
        # What those started in turn (keepalived's VRRP and checker
        # children) would outlive them in their namespace.
        for node in range(len(self.names)):
            try:
                self.signal_all(node, signal.SIGKILL)
            except subprocess.CalledProcessError:  # a namespace never made
                pass
        # Deleting a namespace deletes its veth end, and with it the peer.
        for name in self.names + [self.bridge_ns]:
            _ip("netns", "del", name, check=False)

    # --- what a test does to the nodes --------------------------------------

    def run(self, node, command, **popen_args):
        """Starts `command` inside node `node`; killed at close()."""
        process = subprocess.Popen(["ip", "netns", "exec", self.names[node]] + list(command),
                                   **popen_args)
        self._processes.append(process)
        return process

    def exec(self, node, command, **run_args):
        """Runs `command` inside node `node` to its end."""
        return subprocess.run(["ip", "netns", "exec", self.names[node]] + list(command),
                              **run_args)

    def pids(self, node):
        """Every process running in node `node`."""
        shown = _ip("netns", "pids", self.names[node]).stdout
        return [int(pid) for pid in shown.split()]

    def signal_all(self, node, sig):
        """Sends `sig` to every process in node `node`, as to a whole
        machine: SIGSTOP and SIGCONT pause and resume it (a VM paused),
        SIGKILL ends it. Returns the processes signalled."""
        pids = self.pids(node)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:  # it ended meanwhile
                pass
        return pids

    def add_address(self, node, address):
        _ip("addr", "add", "%s/%d" % (address, PREFIX), "dev", "eth0", netns=self.names[node])
        # What keepalived's gratuitous ARP does: the others forget which
        # machine had the address, or they keep sending to the old one.
        for name in self.names:
            _ip("neigh", "flush", "all", netns=name, check=False)

    def remove_address(self, node, address):
        _ip("addr", "del", "%s/%d" % (address, PREFIX), "dev", "eth0", netns=self.names[node])

    def holds(self, node, address):
        shown = _ip("-4", "addr", "show", "dev", "eth0", netns=self.names[node]).stdout
        return (" %s/" % address) in shown

    def holders(self, address):
        return [i for i in range(len(self.names)) if self.holds(i, address)]

    def take_down(self, node):
        """The machine is gone: its link goes down, so nothing reaches it and
        its keepalived hears no one (the address it held stays configured,
        as it would on a dead machine nobody can reach)."""
        _ip("link", "set", "eth0", "down", netns=self.names[node])

    def bring_up(self, node):
        _ip("link", "set", "eth0", "up", netns=self.names[node])

    def split(self, side):
        """A partition: the nodes in `side` hear each other and nobody else.
        Their ports move to a second bridge; no link goes down, so each node
        keeps its ARP entries, as machines on either side of a broken switch
        would (take_down's link loss would flush them)."""
        if _ip("link", "show", "br1", netns=self.bridge_ns, check=False).returncode != 0:
            _ip("link", "add", "br1", "type", "bridge", netns=self.bridge_ns)
            _ip("link", "set", "br1", "up", netns=self.bridge_ns)
        for node in side:
            _ip("link", "set", self._bridge_ends[node], "master", "br1", netns=self.bridge_ns)

    def heal(self):
        for end in self._bridge_ends:
            _ip("link", "set", end, "master", "br0", netns=self.bridge_ns)

    # One-way faults, as a firewall rule or a broken transmit or receive path
    # makes them: blackhole routes (no traffic control needed). A host that
    # routes an address into a blackhole sends nothing there, its TCP
    # acknowledgements and replies included, while what that address sends
    # still arrives and is delivered.

    def deafen(self, node):
        """Nothing the other hosts send reaches `node`; what it sends
        still reaches them."""
        for other, name in enumerate(self.names):
            if other != node:
                self._blackhole(name, self.addresses[node])

    def mute(self, node):
        """What `node` sends reaches no other host; it still hears them."""
        for other, address in enumerate(self.addresses):
            if other != node:
                self._blackhole(self.names[node], address)

    def restore_routes(self):
        """Ends every deafen() and mute()."""
        for name, address in self._blackholes:
            _ip("route", "del", "blackhole", address + "/32", netns=name)
        self._blackholes.clear()

    def _blackhole(self, name, address):
        _ip("route", "add", "blackhole", address + "/32", netns=name)
        self._blackholes.append((name, address))

    def wait_for(self, condition, timeout, interval=0.05):
        """Polls `condition` (a state only the kernel shows) until it holds;
        returns the seconds it took, or None after `timeout`."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if condition():
                return time.monotonic() - start
            time.sleep(interval)
        return None


def keepalived_config(cluster, node, priority):
    """VRRP for the virtual IP: every node BACKUP and non-preemptive, as
    yrmcds recommends, so a recovered node does not take the address back."""
    return """global_defs {
  router_id %s
}
vrrp_instance lockcached {
  state BACKUP
  nopreempt
  interface eth0
  virtual_router_id 51
  priority %d
  advert_int 1
  virtual_ipaddress {
    %s/%d dev eth0
  }
}
""" % (cluster.names[node], priority, cluster.vip, PREFIX)
