# SPDX-License-Identifier: MIT
"""A cluster on one machine, for the tests of routes between nodes.

  fabric netns   a Linux bridge "fabric" with an IPv4 and an IPv6 address (the first of each
                 subnet): the nodes' shared L2 segment (and their default gateway); the
                 apiserver emulator (tests/fakes/kube_apiserver.py, HTTPS) listens on its IPv4
                 address, and a route reflector's bird2 runs here in the bgp tests.
  node netns     one per node, joined to the bridge by a veth ("eth0" inside) with the node's
                 InternalIP(s) (dual-stack or single-stack), forwarding on, and its own piniond
                 (`ip netns exec`, own state dir and socket) whose pod CIDRs come from its Node.
  pod netns      wired by pinion-cni run inside the node's netns, as a runtime on that node would.

Everything is named pinion-cl-<pid>-... (netns) and node-<pid>-<n> (Nodes), and all of it is
removed at teardown, also when the test fails. The tests talk only to addresses inside these
namespaces.

    c = cluster(routing="nodes")              # the fixture's factory
    n1 = c.add_node(v4=True, v6=True)         # Node object, netns, piniond (READY, podnet running)
    p = c.add_pod(n1)                         # Pod: .ns, .addr4, .addr6, .addrs()
    c.ping_from(p, [q.addr4, q.addr6])        # the destinations that answered
    c.tcp_peer(p, q.addr4)                    # the source address q's echo server saw
    c.route_lines(n1)                         # `ip route show proto 177` in n1, both families
"""

import ipaddress
import json
import os
import subprocess
import sys

import pytest

from pinion_testlib import SRCDIR, T, wait_until
from podnet_testlib import CniResult, PINION_CNI, PYTHON, free_pod_cidr, free_pod_cidr6

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver  # noqa: E402

PREFIX = "pinion-cl-%d" % os.getpid()
NODE_PREFIX = "node-%d" % os.getpid()
PROTO = "177"
TOKEN = "cluster-token"
ECHO_PORT = 7777
# Link kinds that would mean an overlay.
TUNNEL_KINDS = ("vxlan", "ipip", "gre", "gretap", "ip6gre", "ip6gretap", "ip6tnl", "sit", "geneve",
                "wireguard", "erspan", "ip6erspan", "vti", "vti6", "fou", "bareudp")


def sh(*cmd, check=True, netns=None, timeout=30):
    """Runs cmd (in netns, a name, if given) -> CompletedProcess (text)."""
    if netns:
        cmd = ("ip", "netns", "exec", netns) + cmd
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=T(timeout))
    if check and p.returncode != 0:
        raise AssertionError("%s: rc=%d %s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


# ---------------------------------------------------------------------------------------------
# Scripts run inside pods (python3, no ping or nc binary needed)

# Echo requests to every destination (either family) until each answered or the time is up;
# prints the answered ones as JSON.
_PING_MANY = r'''
import json, os, socket, struct, sys, time
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
dsts = json.loads(sys.argv[1]); end = time.time() + float(sys.argv[2])
ident = os.getpid() & 0xffff
s4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
for s in (s4, s6): s.setblocking(False)
ok, seq = set(), 0
import select
while time.time() < end and len(ok) < len(dsts):
    seq += 1
    for d in dsts:
        if d in ok: continue
        try:
            if ":" in d:
                s6.sendto(struct.pack("!BBHHH", 128, 0, 0, ident, seq) + b"pinion", (d, 0))
            else:
                body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"pinion"
                s4.sendto(struct.pack("!BBHHH", 8, 0, csum(body), ident, seq) + b"pinion", (d, 0))
        except OSError:
            pass
    wait_end = min(end, time.time() + 0.3)
    while time.time() < wait_end:
        r, _, _ = select.select([s4, s6], [], [], max(0, wait_end - time.time()))
        for s in r:
            data, addr = s.recvfrom(2048)
            if s is s4:
                ihl = (data[0] & 0xf) * 4; t, _, _, i, _ = struct.unpack("!BBHHH", data[ihl:ihl + 8]); want = 0
            else:
                t, _, _, i, _ = struct.unpack("!BBHHH", data[:8]); want = 129
            if t == want and i == ident:
                a = addr[0].split("%")[0]
                for d in dsts:
                    if d == a or (":" in d and ":" in a and ipaddress_eq(d, a)): ok.add(d)
    if len(ok) == len(dsts): break
print(json.dumps(sorted(ok)))
'''.replace("ipaddress_eq(d, a)", "socket.inet_pton(socket.AF_INET6, d) == socket.inet_pton(socket.AF_INET6, a)")

# A steady echo stream to one destination: one request every interval seconds for duration
# seconds; prints {"sent", "received", "lost": [seq...]} (a reply later than 1 s counts as lost).
_PING_LOOP = r'''
import json, os, socket, struct, sys, time, select
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
dst, interval, duration = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
v6 = ":" in dst
s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_RAW,
                  socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP)
s.setblocking(False)
ident = os.getpid() & 0xffff
sent, got = {}, set()
start = time.time(); seq = 0; nxt = start
while time.time() < start + duration + 1:
    now = time.time()
    if now >= nxt and now < start + duration:
        seq += 1
        if v6:
            pkt = struct.pack("!BBHHH", 128, 0, 0, ident, seq) + b"pinion"
        else:
            body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"pinion"
            pkt = struct.pack("!BBHHH", 8, 0, csum(body), ident, seq) + b"pinion"
        try:
            s.sendto(pkt, (dst, 0))
        except OSError:
            pass
        sent[seq] = now; nxt += interval
    r, _, _ = select.select([s], [], [], 0.005)
    if r:
        data, addr = s.recvfrom(2048)
        off = 0 if v6 else (data[0] & 0xf) * 4
        t, _, _, i, q = struct.unpack("!BBHHH", data[off:off + 8])
        if t == (129 if v6 else 0) and i == ident and q in sent and time.time() - sent[q] < 1:
            got.add(q)
print(json.dumps({"sent": len(sent), "received": len(got), "lost": sorted(set(sent) - got)}))
'''

# Accepts TCP connections (both families) and answers each with the peer address it sees.
_ECHO_SERVER = r'''
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", int(sys.argv[1]))); s.listen(64)
print("listening", flush=True)
while True:
    c, addr = s.accept()
    peer = addr[0][7:] if addr[0].startswith("::ffff:") else addr[0]
    try:
        c.sendall((peer + "\n").encode())
    finally:
        c.close()
'''

_ECHO_CLIENT = r'''
import socket, sys
dst, port = sys.argv[1], int(sys.argv[2])
c = socket.create_connection((dst, port), timeout=3)
print(c.makefile().readline().strip() + " " + c.getsockname()[0])
'''


# ---------------------------------------------------------------------------------------------
# The pieces

class Netns:
    def __init__(self, name):
        self.name = name
        self.path = "/var/run/netns/" + name
        sh("ip", "netns", "add", name)
        sh("ip", "link", "set", "lo", "up", netns=name)

    def run(self, *cmd, check=True, timeout=30):
        return sh(*cmd, check=check, netns=self.name, timeout=timeout)

    def delete(self):
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


class Pod:
    def __init__(self, node, index, ns, result):
        self.node, self.index, self.ns, self.result = node, index, ns, result
        self.container_id = "%s-pod%d" % (node.name, index)
        self.addr4 = self.addr6 = None
        for ip in result.json["ips"]:
            a = ipaddress.ip_interface(ip["address"])
            if a.version == 4:
                self.addr4 = str(a.ip)
            else:
                self.addr6 = str(a.ip)
        self.echo = None

    def addrs(self):
        return [a for a in (self.addr4, self.addr6) if a]

    def __repr__(self):
        return "<pod %d on %s %s>" % (self.index, self.node.name, self.addrs())


class Node:
    def __init__(self, cluster, index, name, v4, v6, ns=None):
        self.cluster, self.index, self.name, self.ns = cluster, index, name, ns
        self.addr4 = cluster.fabric_addr(4, 10 + index) if v4 else None
        self.addr6 = cluster.fabric_addr(6, 10 + index) if v6 else None
        self.cidr4 = cluster.node_cidr(4, index) if v4 else None
        self.cidr6 = cluster.node_cidr(6, index) if v6 else None
        self.agent = None
        self.pods = []
        self.bird = None  # set by the bgp tests

    def cidrs(self):
        return [c for c in (self.cidr4, self.cidr6) if c]

    def addrs(self):
        return [a for a in (self.addr4, self.addr6) if a]

    def node_object(self):
        addrs = [{"type": "InternalIP", "address": a} for a in self.addrs()]
        addrs.append({"type": "Hostname", "address": self.name})
        spec = {}
        if self.cidrs():
            spec = {"podCIDR": self.cidrs()[0], "podCIDRs": self.cidrs()}
        return {"kind": "Node", "apiVersion": "v1",
                "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name}},
                "spec": spec,
                "status": {"conditions": [{"type": "Ready", "status": "True"}], "addresses": addrs}}

    def __repr__(self):
        return "<node %s %s %s>" % (self.name, self.addrs(), self.cidrs())


class Cluster:
    """routing: the agents' [network] routing ("none", "nodes", "bgp"); hold_time: BIRD's, in
    seconds (bgp)."""

    def __init__(self, agent_factory, routing="nodes", agent_config=None, hold_time=3):
        self.agent_factory = agent_factory
        self.hold_time = hold_time
        self.rr = None
        self.routing = routing
        self.agent_config = agent_config or {}
        self.nodes = []
        self.pod_netns = []
        self.procs = []
        self.n_nodes = 0
        self.n_pods = 0
        self.fake = None
        self.fabric = None
        self.dir = None
        # Random subnets (fabric, pods) so that parallel runs and leftovers never meet.
        f4 = ipaddress.ip_network(free_pod_cidr(24))
        f6 = ipaddress.ip_network(free_pod_cidr6())
        self.fabric4, self.fabric6 = f4, f6
        self.pods4 = ipaddress.ip_network(free_pod_cidr(16), strict=False)
        p6 = ipaddress.ip_network(free_pod_cidr6())
        self.pods6 = ipaddress.ip_network("%s/48" % p6.network_address, strict=False)

    # --- addresses ---

    def fabric_addr(self, family, host):
        net = self.fabric4 if family == 4 else self.fabric6
        return str(net[host])

    def node_cidr(self, family, index):
        if family == 4:
            return str(list(self.pods4.subnets(new_prefix=24))[index])
        base = int(self.pods6.network_address) + (index << 64)
        return str(ipaddress.ip_network((base, 64)))

    # --- lifecycle ---

    def start(self):
        import tempfile
        self.dir = tempfile.mkdtemp(prefix="pinion-cluster-")
        self.token_file = os.path.join(self.dir, "token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        self.fabric = Netns(PREFIX + "-fabric")
        fab = self.fabric
        fab.run("ip", "link", "add", "fabric", "type", "bridge", "forward_delay", "0", "stp_state", "0")
        fab.run("ip", "addr", "add", "%s/%d" % (self.fabric_addr(4, 1), self.fabric4.prefixlen), "dev", "fabric")
        fab.run("ip", "addr", "add", "%s/%d" % (self.fabric_addr(6, 1), self.fabric6.prefixlen), "dev", "fabric",
                "nodad")
        fab.run("ip", "link", "set", "fabric", "up")
        self.fake = FakeApiserver(tls=True, token=TOKEN, host=self.fabric_addr(4, 1), netns=fab.name,
                                  control_port=False).start()
        if self.routing == "bgp":
            self.start_rr(self.hold_time)
        return self

    def close(self):
        """Stops everything (agents first, while their namespaces exist) and removes it all.
        Returns the agents' problems (crashes, non-zero exits)."""
        problems = []
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        for n in self.nodes:
            if n.agent is not None:
                p = n.agent.close()
                if p:
                    problems.append(p)
        if self.fake is not None:
            self.fake.stop()
        for ns in self.pod_netns:
            ns.delete()
        for n in self.nodes:
            if n.ns is not None:
                n.ns.delete()
        if self.fabric is not None:
            self.fabric.delete()
        if self.dir:
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)
        return problems

    def spawn(self, cmd, **kw):
        """A background process the cluster kills at teardown."""
        p = subprocess.Popen(cmd, **kw)
        self.procs.append(p)
        return p

    # --- nodes ---

    def bird_conf_dir(self):
        return os.path.join(SRCDIR, "units", "bird")

    def start_rr(self, hold_time=3):
        """A route reflector's bird2 in the fabric netns (passive sessions from the fabric's
        subnets), its config units/bird/route-reflector.conf filled in."""
        self.hold_time = hold_time
        conf = bird_config("route-reflector.conf", ROUTER_ID=self.fabric_addr(4, 1), AS=64512, HOLD_TIME=hold_time,
                           NODES_IPV4=self.fabric4, NODES_IPV6=self.fabric6)
        self.rr = self.start_bird("rr", self.fabric, conf)
        return self.rr

    def start_node_bird(self, n):
        """n's bird2 (units/bird/pinion-node.conf filled in) peering with the reflector in each
        family n has."""
        conf = bird_config("pinion-node.conf", ROUTER_ID=n.addr4 or "0.0.0.%d" % n.index, AS=64512,
                           HOLD_TIME=self.hold_time, RR1_IPV4=n.addr4 and self.fabric_addr(4, 1),
                           RR1_IPV6=n.addr6 and self.fabric_addr(6, 1))
        n.bird = self.start_bird(n.name, n.ns, conf)
        return n.bird

    def start_bird(self, name, ns, conf):
        """bird -f in ns with its own config, control socket and pid file (below the cluster's
        dir); stderr to <name>.bird.log. Returns a Bird."""
        b = Bird(self, name, ns)
        with open(b.conf, "w") as f:
            f.write(conf)
        sh("bird", "-p", "-c", b.conf)
        b.proc = self.spawn(["ip", "netns", "exec", ns.name, "bird", "-f", "-c", b.conf, "-s", b.ctl, "-P", b.pid],
                            stdout=subprocess.DEVNULL, stderr=open(b.log, "w"))
        wait_until(lambda: os.path.exists(b.ctl), timeout=10, desc="bird %s's control socket" % name)
        return b

    def new_node(self, v4=True, v6=True, name=None):
        """A Node (not yet in the apiserver, no netns): its addresses and CIDRs are reserved."""
        self.n_nodes += 1
        return Node(self, self.n_nodes, name or "%s-%d" % (NODE_PREFIX, self.n_nodes), v4, v6)

    def add_node(self, v4=True, v6=True, start=True, name=None, agent_config=None):
        """A node: Node object in the apiserver, netns on the bridge, piniond started (podnet
        running) unless start=False."""
        n = self.new_node(v4, v6, name)
        self.nodes.append(n)
        self.wire_node(n)
        self.fake.set_node(n.name, node=n.node_object())
        n.agent = self.make_agent(n, agent_config)
        if start:
            self.start_agent(n)
            if self.routing == "bgp":
                self.start_node_bird(n)
        return n

    def wire_node(self, n):
        n.ns = Netns("%s-n%d" % (PREFIX, n.index))
        port = "n%d" % n.index
        self.fabric.run("ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", n.ns.name)
        self.fabric.run("ip", "link", "set", port, "master", "fabric", "up")
        ns = n.ns
        ns.run("sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
        if n.addr4:
            ns.run("ip", "addr", "add", "%s/%d" % (n.addr4, self.fabric4.prefixlen), "dev", "eth0")
        if n.addr6:
            ns.run("ip", "addr", "add", "%s/%d" % (n.addr6, self.fabric6.prefixlen), "dev", "eth0", "nodad")
        ns.run("ip", "link", "set", "eth0", "up")
        # The fabric is the default gateway (as a ToR would be): an address off the subnet has a
        # route, but one with a gateway.
        if n.addr4:
            ns.run("ip", "route", "add", "default", "via", self.fabric_addr(4, 1))
        if n.addr6:
            ns.run("ip", "-6", "route", "add", "default", "via", self.fabric_addr(6, 1))
        if not n.addr4:
            # The apiserver listens on the fabric's IPv4 address: a v6-only node still reaches it
            # (the control plane; its pods stay single-stack).
            ns.run("ip", "addr", "add", "%s/32" % self.fabric_addr(4, 200 + n.index), "dev", "eth0")
            ns.run("ip", "route", "add", "%s/32" % self.fabric_addr(4, 1), "dev", "eth0")

    def agent_sections(self, n, extra=None):
        sections = {"apiserver": {"url": self.fake.url, "token-file": self.token_file, "ca-file": self.fake.ca_file,
                                  "backoff-initial": "100ms", "backoff-max": "1s"},
                    "network": {}}
        if self.routing not in (None, "none"):
            sections["network"]["routing"] = self.routing
        for src in (self.agent_config, extra or {}):
            for s, kv in src.items():
                sections.setdefault(s, {}).update(kv)
        return sections

    def make_agent(self, n, extra=None):
        return self.agent_factory(config=self.agent_sections(n, extra), node_name=n.name, netns=n.ns.name,
                                  start=False)

    def start_agent(self, n, timeout=30):
        n.agent.start(timeout=timeout)
        def running():
            m = podnet_module(n.agent)
            assert m["state"] == "running", (m, [x for x in n.agent.status()["modules"] if x["name"] == "apiserver"])
            return True
        wait_until(running, timeout=timeout, desc="podnet running on %s" % n.name)

    def stop_agent(self, n):
        """SIGTERM; the agent exits 0."""
        n.agent.assert_exit(n.agent.sigterm(), 0)

    def delete_node(self, n):
        """The Node leaves the apiserver (its netns and agent stay)."""
        self.fake.delete_node(n.name)

    def set_node(self, n):
        """Creates or updates n's Node object (from its fields)."""
        self.fake.set_node(n.name, node=n.node_object())

    def is_node_cidr(self, dst):
        try:
            net = ipaddress.ip_network(dst)
        except ValueError:
            return False
        if net.version == 4:
            return net.prefixlen == 24 and net.subnet_of(self.pods4)
        return net.prefixlen == 64 and net.subnet_of(self.pods6)

    # --- pods ---

    def add_pod(self, n, echo=True):
        """A pod on node n: a netns wired by pinion-cni ADD (run in n's netns); with echo, a TCP
        echo server in it. Returns the Pod."""
        self.n_pods += 1
        ns = Netns("%s-p%d" % (PREFIX, self.n_pods))
        self.pod_netns.append(ns)
        cid = "%s-pod%d" % (n.name, self.n_pods)
        r = self.cni(n, "ADD", cid, ns)
        assert r.rc == 0, "pinion-cni ADD on %s: %r" % (n.name, r)
        pod = Pod(n, self.n_pods, ns, r)
        n.pods.append(pod)
        if echo:
            p = self.spawn(["ip", "netns", "exec", ns.name, PYTHON, "-c", _ECHO_SERVER, str(ECHO_PORT)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert p.stdout.readline().strip() == "listening", "the echo server in %r did not start" % pod
            pod.echo = p
        return pod

    def del_pod(self, pod):
        r = self.cni(pod.node, "DEL", pod.container_id, pod.ns)
        assert r.rc == 0, "pinion-cni DEL: %r" % r
        pod.node.pods.remove(pod)
        if pod.echo is not None:
            pod.echo.kill()

    def cni(self, n, command, container_id, ns, ifname="eth0"):
        conf = {"cniVersion": "1.1.0", "name": "pinion", "type": "pinion-cni", "socket": n.agent.socket}
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command, "CNI_PATH": "/usr/lib/cni",
               "CNI_CONTAINERID": container_id, "CNI_NETNS": ns.path, "CNI_IFNAME": ifname}
        p = subprocess.run(["ip", "netns", "exec", n.ns.name, PINION_CNI], input=json.dumps(conf).encode(),
                           env=env, capture_output=True, timeout=T(60))
        return CniResult(p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))

    def pods(self):
        return [p for n in self.nodes for p in n.pods]

    # --- traffic ---

    def ping_from(self, pod, dsts, timeout=3):
        """The destinations (addresses, either family) that answered an ICMP echo from pod."""
        if not dsts:
            return []
        p = pod.ns.run(PYTHON, "-c", _PING_MANY, json.dumps(list(dsts)), str(T(timeout)), timeout=T(timeout) + 20)
        return json.loads(p.stdout)

    def ping_matrix(self, pods=None, timeout=3):
        """Every pod pings every other pod on another node, in each family both have. Returns
        (answered, missing): lists of (from pod, to address)."""
        pods = pods or self.pods()
        answered, missing = [], []
        for src in pods:
            dsts = [a for dst in pods if dst.node is not src.node
                    for a, mine in ((dst.addr4, src.addr4), (dst.addr6, src.addr6)) if a and mine]
            ok = set(self.ping_from(src, dsts, timeout))
            for d in dsts:
                (answered if d in ok else missing).append((src, d))
        return answered, missing

    def tcp_peer(self, src, dst_addr):
        """Connects from pod src to dst_addr's echo server; returns (the peer address the server
        saw, the client's own source address)."""
        p = src.ns.run(PYTHON, "-c", _ECHO_CLIENT, dst_addr, str(ECHO_PORT), check=False, timeout=15)
        if p.returncode != 0:
            raise AssertionError("TCP from %r to %s failed: %s" % (src, dst_addr, p.stderr.strip()[-300:]))
        seen, mine = p.stdout.split()
        return seen, mine

    def ping_loop(self, src, dst, interval=0.02, duration=5):
        """Starts an echo stream from pod src to dst; .communicate() gives its JSON result."""
        return self.spawn(["ip", "netns", "exec", src.ns.name, PYTHON, "-c", _PING_LOOP, dst, str(interval),
                           str(duration)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # --- inspection ---

    def route_entries(self, n):
        """pinion's routes in n (`ip route show proto 177`, both families): [(dst, line)]."""
        out = []
        for fam in ("-4", "-6"):
            p = n.ns.run("ip", fam, "route", "show", "proto", PROTO)
            for line in p.stdout.splitlines():
                tok = line.split()
                if not tok:
                    continue
                dst = tok[1] if tok[0] in ("unreachable", "blackhole", "prohibit") else tok[0]
                out.append((dst, line.strip()))
        return out

    def route_to(self, n, cidr):
        """The route lines in n's main table whose destination is cidr (any protocol)."""
        fam = "-6" if ":" in cidr else "-4"
        return n.ns.run("ip", fam, "route", "show", "exact", cidr).stdout.strip()

    def all_netns(self):
        return [self.fabric] + [n.ns for n in self.nodes if n.ns] + list(self.pod_netns)

    def tunnel_links(self):
        """Links of a tunnel kind in any of the cluster's namespaces, except the fallback devices
        the kernel puts in every namespace once a tunnel module is loaded (tunl0, gre0, sit0, ...)
        while they are down: [(netns, line)]."""
        fallback = {"tunl0", "gre0", "gretap0", "erspan0", "ip_vti0", "ip6_vti0", "sit0", "ip6tnl0", "ip6gre0"}
        found = []
        for ns in self.all_netns():
            for line in ns.run("ip", "-d", "-o", "link", "show").stdout.splitlines():
                name = line.split(":")[1].strip().split("@")[0]
                kinds = {seg.split()[0] for seg in line.split("\\")[1:] if seg.split()}
                if not kinds & set(TUNNEL_KINDS):
                    continue
                flags = line.split("<", 1)[1].split(">", 1)[0].split(",")
                if name in fallback and "UP" not in flags:
                    continue
                found.append((ns.name, line))
        return found


def assert_no_nat(c):
    """Every pod's TCP connection to a pod on another node, in each family both have, is seen by
    the server from the client pod's own address (no NAT on the way)."""
    for src in c.pods():
        for dst in c.pods():
            if dst.node is src.node:
                continue
            for mine, theirs in ((src.addr4, dst.addr4), (src.addr6, dst.addr6)):
                if mine and theirs:
                    seen, local = c.tcp_peer(src, theirs)
                    assert seen == mine == local, "%r -> %s: the server saw %s (client %s)" % (
                        src, theirs, seen, local)


def bird_config(name, **values):
    """units/bird/NAME with its @KEY@ placeholders filled in from values, logging to stderr; a
    BGP session line whose value is None (a family the node lacks) is dropped."""
    import re
    with open(os.path.join(SRCDIR, "units", "bird", name)) as f:
        text = f.read()
    out = []
    for line in text.splitlines():
        keys = re.findall(r"@([A-Z0-9_]+)@", line)
        if any(values.get(k) is None for k in keys):
            assert line.startswith("protocol bgp "), "%s: no value for %s" % (name, line)
            continue
        for k in keys:
            line = line.replace("@%s@" % k, str(values[k]))
        if line.startswith("log syslog all;"):
            line = "log stderr all;"
        out.append(line)
    return "\n".join(out) + "\n"


class Bird:
    def __init__(self, cluster, name, ns):
        self.name, self.ns, self.proc = name, ns, None
        base = os.path.join(cluster.dir, name)
        self.conf, self.ctl, self.pid, self.log = (base + s for s in (".bird.conf", ".bird.ctl", ".bird.pid",
                                                                       ".bird.log"))

    def birdc(self, *args):
        return sh("birdc", "-s", self.ctl, *args).stdout

    def established(self):
        """The names of its BGP sessions that are Established."""
        out = self.birdc("show", "protocols")
        return [line.split()[0] for line in out.splitlines() if " BGP " in line and "Established" in line]

    def kill9(self):
        self.proc.kill()
        self.proc.wait(5)

    def log_tail(self, n=30):
        with open(self.log) as f:
            return "".join(f.readlines()[-n:])


def podnet_state(agent):
    for m in agent.status()["modules"]:
        if m["name"] == "podnet":
            return m["state"]
    return None


def podnet_module(agent):
    for m in agent.status()["modules"]:
        if m["name"] == "podnet":
            return m
    raise KeyError("podnet")


@pytest.fixture
def cluster(agent_factory):
    """cluster(routing="nodes", agent_config=None, hold_time=3) -> a started Cluster
    (with routing "bgp", a route reflector's bird2 in the fabric and one in each node); torn down
    (agents, apiserver, every netns) at the end, also on failure."""
    made = []

    def make(routing="nodes", agent_config=None, hold_time=3):
        c = Cluster(agent_factory, routing=routing, agent_config=agent_config, hold_time=hold_time)
        made.append(c)
        return c.start()

    try:
        yield make
    finally:
        problems = []
        for c in made:
            problems += c.close()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
