"""tools/bench/peers --netns: the job's network, a namespace per node joined
by veth pairs on one bridge, netem (or tbf) on each node's egress, a
node's link set down and up (--cut-node), commands wrapped to run in a
node's namespace. Used by tools/bench/peers and benchlib/peers_contenders.py."""
import subprocess

from .peers_daemons import Failed


class Network:
    """--netns: a network namespace per node, veth pairs on one bridge, netem
    (delay and rate) on each node's egress. close() removes all of it."""

    BRIDGE = "tfbench0"

    def __init__(self, nodes, delay_ms, mbit):
        self.nodes, self.delay_ms, self.mbit = nodes, delay_ms, mbit
        self.made = []  # ("netns", name) / ("link", name), to remove in reverse

    @staticmethod
    def ip(*argv, ns=None):
        cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=20)
        if r.returncode != 0:
            raise Failed(f"{' '.join(cmd)}: {r.stderr.strip()}")

    @staticmethod
    def ns(node):
        return f"tierfs-bench-n{node}"

    @staticmethod
    def address(node):
        return f"10.77.0.{node + 1}"

    @staticmethod
    def host_end(node):
        """The host's end of node's veth pair, on the bridge."""
        return f"tfbv{node}"

    def set_link(self, node, up):
        """node's link up or down (its host end: the node sees no carrier)."""
        self.ip("ip", "link", "set", self.host_end(node), "up" if up else "down")

    NEIGH = "/proc/sys/net/ipv4/neigh/default/gc_thresh{}"

    def open(self):
        self.close_leftovers()
        # Every node talks to every other, and the kernel's neighbour (ARP)
        # table is one for all namespaces: N x (N - 1) entries. Its default
        # limit (1,024) overflowed at 64 nodes ("neighbor table overflow",
        # connects hung in SYN-SENT): raised for the run, put back by close().
        self.neigh = {}
        need = 4 * self.nodes * self.nodes
        for i in (1, 2, 3):
            with open(self.NEIGH.format(i)) as f:
                self.neigh[i] = int(f.read())
            with open(self.NEIGH.format(i), "w") as f:
                f.write(str(max(self.neigh[i], need * i // 3)))
        self.ip("ip", "link", "add", self.BRIDGE, "type", "bridge")
        self.made.append(("link", self.BRIDGE))
        self.ip("ip", "link", "set", self.BRIDGE, "up")
        netem = ["netem", "delay", f"{self.delay_ms}ms", "rate", f"{self.mbit}mbit",
                 "limit", "100000"]
        # A kernel without netem (CONFIG_NET_SCH_NETEM unset) still has tbf:
        # the rate is kept, the added delay is not.
        burst = max(64 * 1024, self.mbit * 1000 * 1000 // 8 // 250)  # 4 ms of the rate
        tbf = ["tbf", "rate", f"{self.mbit}mbit", "burst", str(burst), "latency", "50ms"]
        self.qdisc = None
        for n in range(self.nodes):
            ns, host_end = self.ns(n), self.host_end(n)
            self.ip("ip", "netns", "add", ns)
            self.made.append(("netns", ns))
            self.ip("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0",
                    "netns", ns)
            self.made.append(("link", host_end))
            self.ip("ip", "link", "set", host_end, "master", self.BRIDGE, "up")
            self.ip("ip", "link", "set", "lo", "up", ns=ns)
            self.ip("ip", "addr", "add", f"{self.address(n)}/24", "dev", "eth0", ns=ns)
            self.ip("ip", "link", "set", "eth0", "up", ns=ns)
            if self.qdisc in (None, "netem"):
                try:
                    self.ip("tc", "qdisc", "add", "dev", "eth0", "root", *netem, ns=ns)
                    self.qdisc = "netem"
                    continue
                except Failed:
                    if self.qdisc == "netem":
                        raise
            self.ip("tc", "qdisc", "add", "dev", "eth0", "root", *tbf, ns=ns)
            self.qdisc = "tbf"
        return self

    def describe(self):
        if self.qdisc == "netem":
            return f"netem {self.delay_ms:g} ms one way, {self.mbit} Mbit/s per node"
        return (f"tbf {self.mbit} Mbit/s per node, no added delay (this kernel has no netem; "
                f"--net-delay-ms not applied)")

    def wrap(self, node, cmd):
        """cmd run in node's network namespace only (not a private mount
        namespace, as `ip netns exec` would make: the FUSE mount must be seen
        here)."""
        return ["nsenter", f"--net=/run/netns/{self.ns(node)}", "--"] + cmd

    def close_leftovers(self):
        for n in range(self.nodes):
            subprocess.run(["ip", "netns", "del", self.ns(n)], capture_output=True, timeout=20)
        subprocess.run(["ip", "link", "del", self.BRIDGE], capture_output=True, timeout=20)

    def close(self):
        for i, value in getattr(self, "neigh", {}).items():
            with open(self.NEIGH.format(i), "w") as f:
                f.write(str(value))
        self.neigh = {}
        for kind, name in reversed(self.made):
            cmd = ["ip", "netns", "del", name] if kind == "netns" else ["ip", "link", "del", name]
            subprocess.run(cmd, capture_output=True, timeout=20)
        self.made = []
