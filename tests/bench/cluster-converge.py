#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make bench-cluster: how long a node joining the cluster takes until a pod on it answers the
other nodes, with [network] routing = nodes and with routing = bgp, in the same run.

Two clusters of tests/integration/cluster_testlib.py stand side by side (each its own bridge,
apiserver emulator and, for bgp, route reflector's bird2): --observers nodes each with one pod,
then --nodes nodes join one at a time, alternating between the two clusters so that both see the
same machine. A join is what a real cluster does: the node's network is up (its netns on the
bridge), then
  t0             the kubelet registers the Node (with its spec.podCIDR) in the apiserver;
                 right after, the DaemonSet's agent starts (bgp: its bird2 too, as the pod's
                 second container)
  agent ready    podnet is running (the Node read, the pod CIDR's unreachable aggregate in)
  pod wired      one pod, pinion-cni ADD as soon as the agent is ready
  route at peers the route to the node's pod CIDR is in every observer's kernel (ip monitor)
  route back     the node has routes to every observer's pod CIDR
  pingable       the pod answers ICMP echoes (every 10 ms) from a pod on every observer
each measured from t0. Printed: p50/p99/max per mode and the split, the ratio line
(bgp p50 / nodes p50 of "pingable"), and the agent's CPU (utime+stime, and schedstat) per 1,000
Node events in nodes mode: 1,000 changes of one Node's InternalIP (a route replaced) and,
separately, 1,000 heartbeat-only MODIFIED events (dropped after decoding).

Settings (realistic ones, all printed): the agents' [apiserver] backoff at its defaults (800ms,
30s), log-level info; BIRD with the shipped units/bird configs (connect delay 1 s, connect retry
5 s, kernel scan 10 s, no BFD) and --hold-time (9 s); Node objects of a realistic size (~7 KB:
images, conditions, labels). IPv4-only nodes. Everything (namespaces, agents, birds, monitors) is
removed at the end, also on failure or SIGTERM; only addresses in those namespaces are used.

  --nodes N       joins measured per mode (default 50)
  --observers N   nodes (each with a pod) that watch and ping every join (default 3)
  --events N      Node events per CPU measurement (default 1000; 0 skips it)
  --route-rate R  route-relevant changes per second at most (default 15; each is also sent only
                  once the observer's kernel has the one before, so that none is batched)
  --heartbeat-rate R  heartbeats per second (default 50)
  --hold-time S   BIRD's hold time (default 9)
  --only MODE     one mode only (nodes or bgp)
  --json FILE     the figures in the common schema (tests/bench/benchjson.py)
  --md FILE       the table in Markdown (as in docs/benchmarks.md)
  --pod-cidr-in-config  each agent's [network] pod-cidr set to its Node's (podnet starts without
                  reading the Node): the join without the agent's wait for the Node's CIDR"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import cluster_testlib  # noqa: E402
from cluster_testlib import Cluster, Netns, Node, Pod  # noqa: E402
from pinion_testlib import PDEATHSIG_CMD, Agent, wait_until  # noqa: E402
from podnet_testlib import PYTHON  # noqa: E402
from benchjson import BenchJson  # noqa: E402

MODES = ("nodes", "bgp")
JOIN_TIMEOUT = 30.0
HZ = os.sysconf("SC_CLK_TCK")

# Echo requests every 10 ms to each address given on stdin (one a line) until it answers; prints
# "<address> <CLOCK_MONOTONIC of the reply>" per answered address.
_PINGER = r'''
import os, select, socket, struct, sys, time
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.setblocking(False)
ident = os.getpid() & 0xffff; pending = set(); seq = 0; nxt = 0; stdin = sys.stdin.fileno(); buf = b""
print("ready", flush=True)
while True:
    now = time.monotonic()
    if pending and now >= nxt:
        seq = (seq + 1) & 0xffff
        body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"pinion"
        for d in list(pending):
            try: s.sendto(struct.pack("!BBHHH", 8, 0, csum(body), ident, seq) + b"pinion", (d, 0))
            except OSError: pass
        nxt = now + 0.01
    r, _, _ = select.select([s, stdin], [], [], max(0.0, nxt - now) if pending else 1.0)
    if stdin in r:
        data = os.read(stdin, 4096)
        if not data: break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip(): pending.add(line.strip().decode())
    if s in r:
        while True:
            try: data, addr = s.recvfrom(2048)
            except BlockingIOError: break
            ihl = (data[0] & 0xf) * 4; t, _, _, i, _ = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if t == 0 and i == ident and addr[0] in pending:
                pending.discard(addr[0]); print("%s %.6f" % (addr[0], time.monotonic()), flush=True)
'''


# The split of a join, in the order things happen (seconds from t0).
LABELS = [("ready_notify", "piniond READY=1"), ("pods_listed", "its pod list answered"),
          ("node_read", "its Node read (GET answered)"), ("agent_ready", "agent ready (podnet running)"),
          ("pod_wired", "pod wired (CNI ADD done)"), ("bgp_established", "BGP session to the reflector up"),
          ("route_first_peer", "route at the first observer"), ("route_at_peers", "route at every observer"),
          ("route_back", "route back (the node to every observer)"), ("pingable", "pingable from every observer")]

CIDR_SOURCE = {False: "", True: ", pod CIDRs in the agents' [network] pod-cidr"}
HEADLINE = ("agent_ready", "route_at_peers", "route_back", "pingable")


def percentile(values, p):
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


# ---------------------------------------------------------------------------------------------
# Realistic Node objects

def realistic_node(obj, beat=0):
    """obj (a harness Node object) with what a kubelet puts in a Node: capacity, conditions with
    time stamps (beat: the heartbeat's number), node info, 25 images, the usual labels."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1767225600 + beat * 10))
    name = obj["metadata"]["name"]
    obj["metadata"]["labels"].update({
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m5.2xlarge",
        "topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": "eu-west-1a",
        "node-role.kubernetes.io/worker": ""})
    obj["metadata"]["annotations"] = {"node.alpha.kubernetes.io/ttl": "0",
                                      "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
    res = {"cpu": "8", "memory": "32408856Ki", "pods": "110", "ephemeral-storage": "101430960Ki",
           "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    st = obj["status"]
    st["capacity"] = dict(res)
    st["allocatable"] = dict(res, memory="31257880Ki", **{"ephemeral-storage": "93478772582"})
    conds = [("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
             ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
             ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
             ("Ready", "True", "KubeletReady", "kubelet is posting ready status")]
    st["conditions"] = [{"type": t, "status": s, "lastHeartbeatTime": stamp, "lastTransitionTime": "2026-01-01T00:00:00Z",
                         "reason": r, "message": m} for t, s, r, m in conds]
    st["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
    st["nodeInfo"] = {"machineID": "%032x" % abs(hash(name)), "systemUUID": "ec2%029x" % abs(hash(name + "u")),
                      "bootID": "%032x" % abs(hash(name + "b")), "kernelVersion": "6.1.0-28-amd64",
                      "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "containerd://1.7.24",
                      "kubeletVersion": "v1.31.4", "kubeProxyVersion": "v1.31.4", "operatingSystem": "linux",
                      "architecture": "amd64"}
    st["images"] = [{"names": ["registry.example.com/team%d/service-%d@sha256:%064x" % (i % 7, i, i * 7919 + 13),
                               "registry.example.com/team%d/service-%d:v1.%d.%d" % (i % 7, i, i, i * 3)],
                     "sizeBytes": 20000000 + i * 1234567} for i in range(25)]
    return obj


class BenchNode(Node):
    beat = 0

    def node_object(self):
        return realistic_node(super().node_object(), self.beat)


# ---------------------------------------------------------------------------------------------
# Two clusters side by side

class ModeCluster(Cluster):
    """A Cluster whose namespaces carry the mode in their names (cluster_testlib names them from
    one module-wide prefix), with realistic Node objects."""

    def __init__(self, routing, hold_time, agent_config):
        self.prefix = "%s-%s" % (cluster_testlib.PREFIX, routing[:1])
        super().__init__(agent_factory, routing=routing, agent_config=agent_config, hold_time=hold_time)

    def _named(self, fn, *args, **kw):
        saved = cluster_testlib.PREFIX
        cluster_testlib.PREFIX = self.prefix
        try:
            return fn(*args, **kw)
        finally:
            cluster_testlib.PREFIX = saved

    def spawn(self, cmd, **kw):
        # bird, the monitors and the pingers die with this script even if it is killed -9.
        return super().spawn(PDEATHSIG_CMD + list(cmd), **kw)

    def start(self):
        return self._named(super().start)

    def wire_node(self, n):
        return self._named(super().wire_node, n)

    def new_node(self, v4=True, v6=False, name=None):
        self.n_nodes += 1
        return BenchNode(self, self.n_nodes, name or "%s-%s-%d" % (cluster_testlib.NODE_PREFIX, self.routing,
                                                                   self.n_nodes), v4, v6)

    def start_bird(self, name, ns, conf):
        # Log time stamps in ms and the sessions' state changes: when a node's session came up.
        return super().start_bird(name, ns, "timeformat log iso long ms;\ndebug protocols { states };\n" + conf)

    def make_pod_netns(self, n):
        """The netns of n's pod (made before the clock starts, as a runtime makes the sandbox's)."""
        self.n_pods += 1
        ns = Netns("%s-p%d" % (self.prefix, self.n_pods))
        self.pod_netns.append(ns)
        return ns

    def wire_pod(self, n, ns):
        cid = "%s-pod%d" % (n.name, len(n.pods) + 1)
        r = self.cni(n, "ADD", cid, ns)
        if r.rc != 0:
            raise RuntimeError("pinion-cni ADD on %s: rc=%d %s %s" % (n.name, r.rc, r.stdout, r.stderr))
        pod = Pod(n, self.n_pods, ns, r)
        n.pods.append(pod)
        return pod


def agent_factory(config=None, node_name=None, netns=None, start=False):
    return Agent(config=config, node_name=node_name, netns=netns)


# ---------------------------------------------------------------------------------------------
# Watching: routes (ip monitor) and pings

class RouteWatch:
    """`ip -4 monitor route` in a netns: the first time (CLOCK_MONOTONIC, on arrival) each
    destination was added or replaced."""

    def __init__(self, c, ns):
        self.seen = {}
        self.lines = {}  # route messages (added or replaced) per destination
        self.cond = threading.Condition()
        self.proc = c.spawn(["ip", "netns", "exec", ns.name, "stdbuf", "-oL", "ip", "-4", "monitor", "route"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        for line in self.proc.stdout:
            t = time.monotonic()
            tok = line.split()
            if not tok or tok[0] == "Deleted":
                continue
            dst = tok[1] if tok[0] in ("unreachable", "blackhole", "prohibit") else tok[0]
            with self.cond:
                self.seen.setdefault(dst, t)
                self.lines[dst] = self.lines.get(dst, 0) + 1
                self.cond.notify_all()

    def when(self, dst):
        with self.cond:
            return self.seen.get(dst)

    def count(self, dst):
        with self.cond:
            return self.lines.get(dst, 0)

    def wait_count(self, dst, n, timeout):
        with self.cond:
            return self.cond.wait_for(lambda: self.lines.get(dst, 0) >= n, timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()


class Pinger:
    """A _PINGER in an observer's pod."""

    def __init__(self, c, pod):
        self.answered = {}
        self.cond = threading.Condition()
        self.proc = c.spawn(["ip", "netns", "exec", pod.ns.name, PYTHON, "-c", _PINGER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the pinger in %r did not start" % pod)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        for line in self.proc.stdout:
            addr, t = line.split()
            with self.cond:
                self.answered[addr] = float(t)
                self.cond.notify_all()

    def ping(self, addr):
        self.proc.stdin.write(addr + "\n")
        self.proc.stdin.flush()

    def when(self, addr):
        with self.cond:
            return self.answered.get(addr)


def bird_session_up(bird):
    """When (CLOCK_MONOTONIC) bird's first BGP session came up, from its log, or None."""
    import datetime
    offset = time.time() - time.monotonic()
    with open(bird.log) as f:
        for line in f:
            if "State changed to up" in line and " rr1_" in line:
                stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f")
                return stamp.timestamp() - offset  # BIRD logs local time
    return None


def cpu_of(pid):
    """(utime+stime in seconds, time on CPU from schedstat in seconds) of pid."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    with open("/proc/%d/schedstat" % pid) as f:
        ns = int(f.read().split()[0])
    return ticks / HZ, ns / 1e9


# ---------------------------------------------------------------------------------------------
# The benchmark

class Mode:
    def __init__(self, routing, opts):
        self.routing = routing
        # The [apiserver] backoff at its defaults (the harness's 100ms/1s are for fast tests).
        cfg = {"agent": {"log-level": "info"}, "apiserver": {"backoff-initial": None, "backoff-max": None}}
        self.c = ModeCluster(routing, opts.hold_time, cfg)
        self.static_cidr = opts.pod_cidr_in_config
        self.observers = []
        self.watches = {}
        self.pingers = {}
        self.joins = []

    def start(self, n_observers):
        self.c.start()
        for _ in range(n_observers):
            # (add_node() gives the next node the next number, hence the next CIDR.)
            n = self.c.add_node(v4=True, v6=False, agent_config=self.own_cidr(self.c.node_cidr(4, self.c.n_nodes + 1)))
            ns = self.c.make_pod_netns(n)
            pod = self.c.wire_pod(n, ns)
            self.observers.append(n)
            self.watches[n.name] = RouteWatch(self.c, n.ns)
            self.pingers[n.name] = Pinger(self.c, pod)
        if self.routing == "bgp":
            wait_until(lambda: all(self.c.route_to(o, p.cidr4) for o in self.observers for p in self.observers
                                   if p is not o), timeout=30, desc="BGP routes between the observers")

    def own_cidr(self, cidr):
        """With --pod-cidr-in-config: the node's pod CIDR in its [network] pod-cidr (podnet then
        does not wait for the Node's)."""
        return {"network": {"pod-cidr": cidr}} if self.static_cidr else None

    def join(self):
        """One node joins; returns its figures (seconds from t0; None: not within JOIN_TIMEOUT)."""
        c = self.c
        n = c.new_node(v4=True, v6=False)
        c.nodes.append(n)
        c.wire_node(n)
        pod_ns = c.make_pod_netns(n)
        back = RouteWatch(c, n.ns)
        time.sleep(0.05)  # ip monitor subscribed
        n.agent = c.make_agent(n, self.own_cidr(n.cidr4))
        r = {"node": n.name}
        try:
            t0 = time.monotonic()
            c.fake.set_node(n.name, node=n.node_object())
            n.agent.start(wait=False)
            if self.routing == "bgp":
                c.start_node_bird(n)
            ready = n.agent.wait_ready(timeout=JOIN_TIMEOUT)
            r["ready_notify"] = ready.time - t0

            def running():
                for m in n.agent.status()["modules"]:
                    if m["name"] == "podnet" and m["state"] == "running":
                        return True
                return False
            wait_until(running, timeout=JOIN_TIMEOUT, interval=0.01, desc="podnet running on %s" % n.name)
            r["agent_ready"] = time.monotonic() - t0
            pod = c.wire_pod(n, pod_ns)
            r["pod_wired"] = time.monotonic() - t0
            for p in self.pingers.values():
                p.ping(pod.addr4)
            deadline = t0 + JOIN_TIMEOUT
            peers = back_t = ping = None
            while time.monotonic() < deadline:
                rt = [self.watches[o.name].when(n.cidr4) for o in self.observers]
                bt = [back.when(o.cidr4) for o in self.observers]
                pt = [self.pingers[o.name].when(pod.addr4) for o in self.observers]
                if None not in rt and None not in bt and None not in pt:
                    peers, back_t, ping = max(rt) - t0, max(bt) - t0, max(pt) - t0
                    r["route_first_peer"] = min(rt) - t0
                    break
                time.sleep(0.01)
            r.update({"route_at_peers": peers, "route_back": back_t, "pingable": ping})
        except Exception as e:  # a join that fails is counted, and the run goes on
            r["error"] = str(e)[:500]
        finally:
            back.stop()
        for key, verb, path in (("pods_listed", "list", "/api/v1/pods"), ("node_read", "get", "/api/v1/nodes/" + n.name)):
            got = [e for e in c.fake.requests(verb=verb, path=path) if e["mono"] >= t0 and e["duration"] is not None]
            if got:
                r[key] = got[0]["mono"] + got[0]["duration"] - t0
        if n.bird is not None:
            up = bird_session_up(n.bird)
            if up is not None:
                r["bgp_established"] = up - t0
        self.joins.append(r)
        return r

    def check_full_mesh(self):
        """Every node has a route to every other node's pod CIDR (nodes: pinion's; bgp: BIRD's)."""
        missing = 0
        for n in self.c.nodes:
            have = n.ns.run("ip", "-4", "route", "show").stdout
            for o in self.c.nodes:
                if o is not n and o.cidr4 + " via " not in have:
                    missing += 1
        return missing


def cpu_per_events(m, events, route_rate, heartbeat_rate):
    """nodes mode: an observer agent's CPU while one Node (no agent of its own) changes its
    InternalIP `events` times (every change replaces the route in every agent; the next is sent
    once the observer's kernel has the last) and, separately, while it sends `events` heartbeats
    (only lastHeartbeatTime changes)."""
    c = m.c
    obs = m.observers[0]
    ghost = c.new_node(v4=True, v6=False)
    c.fake.set_node(ghost.name, node=ghost.node_object())
    wait_until(lambda: m.watches[obs.name].when(ghost.cidr4), timeout=10, desc="the ghost's route")
    addrs = [c.fabric_addr(4, 170 + i) for i in range(20)]
    watch = m.watches[obs.name]
    pid = obs.agent.pid
    size = len(json.dumps(ghost.node_object()))

    def counters():
        mt = obs.agent.metrics()
        return (sum(v for _, _, v in mt.find("pinion_apiserver_watch_events_total", resource="nodes")),
                mt.value("pinion_apiserver_node_events_unchanged_total") or 0,
                mt.value("pinion_podnet_route_changes_total", op="replace") or 0)

    def send(kind):
        rate = route_rate if kind == "route" else heartbeat_rate
        e0 = counters()
        time.sleep(1)
        u0, s0 = cpu_of(pid)
        time.sleep(3)
        u1, s1 = cpu_of(pid)
        idle = ((u1 - u0) / 3, (s1 - s0) / 3)  # per second, before
        t0 = time.monotonic()
        u0, s0 = cpu_of(pid)
        late = 0
        for i in range(events):
            if kind == "route":
                ghost.addr4 = addrs[i % len(addrs)]
                seen = watch.count(ghost.cidr4)
            else:
                ghost.beat += 1
            c.fake.set_node(ghost.name, node=ghost.node_object())
            # Each change applied before the next is sent: no two fall into one of the agent's
            # 50 ms batches, so that every event costs its whole path (decode, pass, netlink).
            if kind == "route" and not watch.wait_count(ghost.cidr4, seen + 1, 5):
                late += 1
            pause = t0 + (i + 1) / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        want = e0[0] + events

        def caught_up():
            return counters()[0] >= want
        wait_until(caught_up, timeout=60, interval=0.1, desc="the observer's %d node events" % events)
        if kind == "route":
            wait_until(lambda: "via %s " % ghost.addr4 in c.route_to(obs, ghost.cidr4) + " ", timeout=10,
                       desc="the last address in the route")
        u1, s1 = cpu_of(pid)
        took = time.monotonic() - t0
        e1 = counters()
        return {"events": events, "rate": rate, "seconds": round(took, 2), "utime_stime_s": round(u1 - u0, 3),
                "schedstat_s": round(s1 - s0, 4), "idle_utime_stime_per_s": round(idle[0], 4),
                "idle_schedstat_per_s": round(idle[1], 5),
                "not_applied_within_5s": late, "node_events": e1[0] - e0[0], "unchanged": e1[1] - e0[1], "route_replaces": e1[2] - e0[2]}

    out = {"object_bytes": size, "agents": len([n for n in c.nodes if n.agent is not None])}
    out["route"] = send("route")
    out["heartbeat"] = send("heartbeat")
    return out


def fmt(v):
    return "%6.2f" % v if v is not None else "   -  "


def summarise(m):
    ok = [j for j in m.joins if j.get("pingable") is not None]
    out = {"joins": len(m.joins), "ok": len(ok), "failed": [j for j in m.joins if j.get("pingable") is None]}
    for k, _ in LABELS:
        vals = [j[k] for j in ok if j.get(k) is not None]
        if vals:
            out[k] = {"p50": percentile(vals, 50), "p99": percentile(vals, 99), "max": max(vals), "min": min(vals)}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--observers", type=int, default=3)
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--route-rate", type=float, default=15)
    ap.add_argument("--heartbeat-rate", type=float, default=50)
    ap.add_argument("--hold-time", type=int, default=9)
    ap.add_argument("--only", choices=MODES)
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    ap.add_argument("--md", help="the table in Markdown")
    ap.add_argument("--pod-cidr-in-config", action="store_true",
                    help="each agent gets its pod CIDR from [network] pod-cidr, not from its Node")
    opts = ap.parse_args()
    if opts.only is None and not shutil.which("bird"):
        print("cluster-converge: no bird (Debian's bird2): routing = nodes only", file=sys.stderr)
        opts.only = "nodes"
    if os.geteuid() != 0:
        print("cluster-converge: needs root (network namespaces)", file=sys.stderr)
        return 77
    bj = BenchJson("cluster", "Routes between nodes: a joining node's pod reachable, routing = nodes vs bgp")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modes = [Mode(r, opts) for r in MODES if opts.only in (None, r)]
    load0 = os.getloadavg()
    t_start = time.monotonic()
    try:
        for m in modes:
            m.start(opts.observers)
        for i in range(opts.nodes):
            for m in (modes if i % 2 == 0 else modes[::-1]):
                r = m.join()
                if r.get("pingable") is None:
                    print("join %d (%s): not pingable within %.0fs: %s" % (i, m.routing, JOIN_TIMEOUT, r),
                          file=sys.stderr)
                time.sleep(0.2)
        joins_s = time.monotonic() - t_start
        load1 = os.getloadavg()
        time.sleep(2)
        mesh = {m.routing: m.check_full_mesh() for m in modes}
        for m in modes:
            rss = [n.agent.rss_kib() for n in m.c.nodes if n.agent is not None and n.agent.running()]
            print("%s: %d agents, RSS median %d KiB, total %.0f MiB" % (m.routing, len(rss), percentile(rss, 50),
                                                                        sum(rss) / 1024.0))
        cpu = None
        nodes_mode = [m for m in modes if m.routing == "nodes"]
        if opts.events > 0 and nodes_mode:
            cpu = cpu_per_events(nodes_mode[0], opts.events, opts.route_rate, opts.heartbeat_rate)
        return report(bj, opts, modes, mesh, cpu, load0, load1, joins_s)
    finally:
        # A second SIGTERM or ^C must not cut the clean-up short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for m in modes:
            problems = m.c.close()
            for p in problems:
                print("cluster-converge: %s: %s" % (m.routing, p[:2000]), file=sys.stderr)


def write_md(path, opts, sums, labels, cpu, load0, load1):
    modes = list(sums)
    lines = ["%d joins per mode, %d observers, IPv4%s; load average %.2f -> %.2f on 2 shared cores." % (
                 opts.nodes, opts.observers, CIDR_SOURCE[opts.pod_cidr_in_config], load0[0], load1[0]), "",
             "| seconds from the Node's creation | " + " | ".join("`%s` p50 / p99 / max" % m for m in modes) + " |",
             "|---|" + "---|" * len(modes)]
    for k, label in labels:
        cells = []
        for m in modes:
            x = sums[m].get(k)
            cells.append("%.2f / %.2f / %.2f" % (x["p50"], x["p99"], x["max"]) if x else "—")
        lines.append("| %s | %s |" % (label, " | ".join(cells)))
    lines.append("| joins pingable within %.0f s | %s |" % (
        JOIN_TIMEOUT, " | ".join("%d of %d" % (sums[m]["ok"], sums[m]["joins"]) for m in modes)))
    if cpu:
        lines += ["", "| `nodes`: observer agent's CPU per 1,000 Node events | utime+stime | schedstat | events/s sent "
                  "| route replaces | dropped unchanged |", "|---|---|---|---|---|---|"]
        for kind, label in (("route", "InternalIP changes"), ("heartbeat", "heartbeats only")):
            x = cpu[kind]
            per = 1000.0 / x["events"]
            lines.append("| %s | %.3f s | %.3f s | %.0f | %d | %d |" % (
                label, x["utime_stime_s"] * per, x["schedstat_s"] * per, x["rate"], x["route_replaces"],
                x["unchanged"]))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def report(bj, opts, modes, mesh, cpu, load0, load1, joins_s):
    sums = {m.routing: summarise(m) for m in modes}
    labels = LABELS
    print("cluster convergence: %d joins per mode, %d observers, IPv4, interleaved%s; load %.2f -> %.2f "
          "(2 cores shared); joins took %.0f s" % (opts.nodes, opts.observers, CIDR_SOURCE[opts.pod_cidr_in_config],
                                                   load0[0], load1[0], joins_s))
    print("seconds from the Node's creation (t0)   %s" % "   ".join("%-20s" % ("%s p50/p99/max" % m) for m in sums))
    for k, label in labels:
        cells = []
        for m in sums:
            s = sums[m].get(k)
            cells.append("%s %s %s" % (fmt(s["p50"]), fmt(s["p99"]), fmt(s["max"])) if s else "%-20s" % "-")
        print("%-40s %s" % (label, "   ".join(cells)))
    if opts.md:
        write_md(opts.md, opts, sums, labels, cpu, load0, load1)
    for m, s in sums.items():
        print("%s: %d/%d joins pingable within %.0f s; routes missing at the end: %d" % (
            m, s["ok"], s["joins"], JOIN_TIMEOUT, mesh.get(m, -1)))
    ok = all(s["ok"] == s["joins"] for s in sums.values()) and not any(mesh.values())
    if "nodes" in sums and "bgp" in sums and "pingable" in sums["nodes"] and "pingable" in sums["bgp"]:
        a, b = sums["bgp"]["pingable"]["p50"], sums["nodes"]["pingable"]["p50"]
        print("ratio bgp/nodes pingable p50: %.2f (%.2f s / %.2f s)" % (a / b, a, b))
    for m, s in sums.items():
        for k, label in labels:
            if k in s and k in HEADLINE:
                bj.row("%s: %s, p50" % (m, label), round(s[k]["p50"], 3), unit="s")
                # The goal for nodes: a Node added shows up as a route within 2 s.
                goal = "<= 2 s" if (m, k) == ("nodes", "route_at_peers") else None
                bj.row("%s: %s, p99" % (m, label), round(s[k]["p99"], 3), unit="s", goal=goal,
                       met=None if goal is None else s[k]["p99"] <= 2)
    if "nodes" in sums and "bgp" in sums and "pingable" in sums["bgp"] and "pingable" in sums["nodes"]:
        bj.row("pingable p50, bgp vs nodes", round(sums["bgp"]["pingable"]["p50"], 3),
               round(sums["nodes"]["pingable"]["p50"], 3), "routing = nodes", "s")
        bj.row("pingable p99, bgp vs nodes", round(sums["bgp"]["pingable"]["p99"], 3),
               round(sums["nodes"]["pingable"]["p99"], 3), "routing = nodes", "s")
    if cpu:
        for kind, label in (("route", "route-relevant changes (InternalIP flips)"),
                            ("heartbeat", "heartbeat-only MODIFIED events (dropped)")):
            x = cpu[kind]
            per = 1000.0 / x["events"]
            net = x["utime_stime_s"] - x["idle_utime_stime_per_s"] * x["seconds"]
            print("nodes: observer agent CPU per 1,000 %s: %.3f s utime+stime (%.3f s schedstat; %.3f s net of "
                  "idle), %d events in %.1f s (%.0f/s sent), %d route replaces, %d dropped unchanged; %d agents, %d-byte Node" % (
                      label, x["utime_stime_s"] * per, x["schedstat_s"] * per, net * per, x["node_events"],
                      x["seconds"], x["rate"], x["route_replaces"], x["unchanged"], cpu["agents"], cpu["object_bytes"]))
            bj.row("nodes: agent CPU per 1,000 %s" % label, round(x["schedstat_s"] * per, 4), unit="s")
    bj.note("Per join: the node's netns on the bridge first (the machine is up); t0 = the Node created in the "
            "apiserver emulator with its podCIDR; then piniond starts (bgp: bird2 too). Agent ready = podnet "
            "running; the pod is wired by pinion-cni as soon as that is so; route at peers and route back come "
            "from `ip monitor route` in the nodes; pingable = an ICMP echo (every 10 ms) answered from a pod on "
            "every one of %d observer nodes. The two modes' joins are interleaved, one at a time.%s" % (
                opts.observers, " Each agent's pod CIDR is in its [network] pod-cidr (podnet does not wait for "
                "the Node's)." if opts.pod_cidr_in_config else ""))
    bj.note("Settings: [apiserver] backoff-initial 800ms, backoff-max 30s (defaults), log-level info; BIRD 2 with "
            "units/bird/pinion-node.conf and route-reflector.conf: hold time %d s, connect delay 1 s, connect retry "
            "5 s, kernel learn (netlink events; scan time 10 s), no BFD, one route reflector. Node objects ~%s bytes "
            "(images, conditions, labels as a kubelet posts them). IPv4-only nodes. Load average %.2f at the start, "
            "%.2f after the joins, on 2 shared cores." % (
                opts.hold_time, cpu["object_bytes"] if cpu else "7,000", load0[0], load1[0]))
    for m in modes:
        xs = list(range(1, len(m.joins) + 1))
        bj.series("%s: seconds from the Node's creation, per join" % m.routing, "join", "seconds",
                  [(label, xs, [j.get(k) for j in m.joins]) for k, label in labels if k in HEADLINE])
    extra = {"summary": {m: {k: v for k, v in s.items() if k != "failed"} for m, s in sums.items()},
             "failed": {m: s["failed"] for m, s in sums.items()}, "joins": {m.routing: m.joins for m in modes},
             "cpu": cpu, "mesh_missing": mesh, "load": [load0, load1]}
    bj.write(opts.json, ok=ok, extra=extra)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
