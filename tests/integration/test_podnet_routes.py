# SPDX-License-Identifier: MIT
"""`[network] routing` on one agent, against a real kernel: the agent runs in a network namespace
the test makes (a "node": a veth uplink 192.168.77.1/24 + fd00:77::1/64, a default route via
192.168.77.254), so every route it installs lands in that namespace's main table and the test
reads it back with `ip route show proto pinion` (units/iproute2/pinion.conf installed in
/etc/iproute2/rt_protos.d/ if it is missing, removed again after). For `nodes` the apiserver
emulator serves the Nodes from inside the same namespace (its socket is made there), so the
agent reaches it on loopback.

Checked: the aggregates (`bgp`) and node routes (`nodes`) carry protocol 177; a route of
another protocol with the same prefix is never touched (a conflict, told once); an agent
restart (SIGTERM with a pod attached, kill -9) neither deletes nor re-adds a route (`ip monitor
route` watches); a stop with no pod removes the routes, one with a pod attached keeps them; a
route deleted by hand comes back; a reload to `none` removes them; Nodes added, changed and
deleted in the API reach the kernel, a Node on another subnet is skipped with one warning."""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from pinion_testlib import SRCDIR, wait_until
from podnet_testlib import cni, netns, podnet_agent, podnet_status  # noqa: F401

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver  # noqa: E402
from kube_objects import make_node  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

RT_PROTOS = "/etc/iproute2/rt_protos.d/pinion.conf"
V4, V6 = "10.244.1.0/24", "fd00:244:1::/64"


@pytest.fixture
def rt_protos():
    """`proto pinion` for ip: the shipped file, installed for the test if it is missing."""
    installed = False
    if not os.path.exists(RT_PROTOS):
        os.makedirs(os.path.dirname(RT_PROTOS), exist_ok=True)
        shutil.copy(os.path.join(SRCDIR, "units", "iproute2", "pinion.conf"), RT_PROTOS)
        installed = True
    try:
        yield
    finally:
        if installed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(RT_PROTOS)


@pytest.fixture
def node(netns, rt_protos):
    """A namespace wired as a node: loopback, an uplink subnet per family, a default route."""
    ns = netns()
    for cmd in (["ip", "link", "set", "lo", "up"],
                ["ip", "link", "add", "uplink", "type", "veth", "peer", "name", "uplink-peer"],
                ["ip", "link", "set", "uplink-peer", "up"],
                ["ip", "addr", "add", "192.168.77.1/24", "dev", "uplink"],
                ["ip", "-6", "addr", "add", "fd00:77::1/64", "dev", "uplink", "nodad"],
                ["ip", "link", "set", "uplink", "up"],
                ["ip", "route", "add", "default", "via", "192.168.77.254"]):
        ns.run(*cmd)
    return ns


def routes(ns, family="-4", what=("proto", "pinion")):
    return ns.run("ip", family, "route", "show", *what).stdout


def pinion_routes(ns):
    return routes(ns, "-4") + routes(ns, "-6")


def routing(a):
    return podnet_status(a)["details"]["routing"]


def bgp_agent(podnet_agent, node, cidr=V4 + "," + V6, **network):
    return podnet_agent(cidr=cidr, netns=node.name,
                        network=dict({"routing": "bgp", "reconcile-interval": "1s"}, **network))


class RouteMonitor:
    """`ip monitor route` in the namespace, its output in a file."""

    def __init__(self, ns, path):
        self.path = path
        self.out = open(path, "w")
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns.name, "ip", "monitor", "route"],
                                     stdout=self.out, stderr=subprocess.STDOUT)
        time.sleep(0.3)  # subscribed before anything the test does next

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)
        self.out.close()
        with open(self.path) as f:
            return f.read()


@pytest.fixture
def monitor(tmp_dir):
    made = []

    def make(ns):
        m = RouteMonitor(ns, os.path.join(tmp_dir, "monitor-%d" % len(made)))
        made.append(m)
        return m
    yield make
    for m in made:
        m.stop()


# ---- bgp: the node's own aggregates ----

def test_aggregates_carry_protocol_pinion_and_go_at_a_stop_without_pods(podnet_agent, node):
    a = bgp_agent(podnet_agent, node)
    wait_until(lambda: "unreachable %s" % V4 in routes(node, "-4") and "unreachable %s" % V6 in routes(node, "-6"),
               timeout=5, desc="both aggregates")
    assert routes(node, "-4", ("proto", "177")) == routes(node, "-4")
    st = routing(a)
    assert st["mode"] == "bgp" and sorted(st["aggregates"]) == sorted(["unreachable " + V4, "unreachable " + V6]), st
    assert st["routes"] == {"ipv4": 0, "ipv6": 0} and st["skipped"] == [] and st["conflicts"] == [], st
    m = a.metrics()
    assert m.value("pinion_podnet_route_changes_total", op="add") == 2
    assert m.value("pinion_podnet_routes", family="ipv4") == 0
    a.wait_log(r"Route added: unreachable 10\.244\.1\.0/24 \(this node's pod CIDR\)")
    assert a.sigterm() == 0
    assert pinion_routes(node) == ""
    assert "No pod attached: removing pinion's node routes and aggregates" in a.log_text()


def test_a_route_of_another_protocol_is_never_touched(podnet_agent, node):
    node.run("ip", "route", "add", "unreachable", V4, "proto", "static")
    node.run("ip", "route", "add", "10.50.0.0/16", "via", "192.168.77.9", "proto", "static")
    before = routes(node, "-4", ("proto", "static"))
    a = bgp_agent(podnet_agent, node)
    wait_until(lambda: "unreachable %s" % V6 in routes(node, "-6"), timeout=5, desc="the IPv6 aggregate")
    st = routing(a)
    assert st["conflicts"] == [{"route": "unreachable " + V4,
                                "reason": "a route of another protocol has this prefix"}], st
    # Passes every second: still one warning, one count, and the static routes as they were.
    runs = routing(a)["passes"]
    wait_until(lambda: routing(a)["passes"] >= runs + 3, timeout=10, desc="three more passes")
    assert len(re.findall(r"Not installing unreachable 10\.244\.1\.0/24", a.log_text())) == 1, a.log_text()
    assert a.metrics().value("pinion_podnet_route_errors_total", kind="conflict") == 1
    assert routes(node, "-4", ("proto", "static")) == before
    assert routes(node, "-4") == ""
    assert a.sigterm() == 0
    assert routes(node, "-4", ("proto", "static")) == before
    assert pinion_routes(node) == ""


def test_a_route_deleted_by_hand_comes_back(podnet_agent, node):
    a = bgp_agent(podnet_agent, node)
    wait_until(lambda: "unreachable %s" % V4 in routes(node, "-4"), timeout=5)
    mark = a.log_mark()
    node.run("ip", "route", "del", "unreachable", V4, "proto", "pinion")
    wait_until(lambda: "unreachable %s" % V4 in routes(node, "-4"), timeout=5, desc="the aggregate back")
    a.wait_log(r"Route added: unreachable 10\.244\.1\.0/24", since=mark)


def test_restart_keeps_every_route_without_a_gap_while_a_pod_is_attached(podnet_agent, node, netns, monitor):
    a = bgp_agent(podnet_agent, node)
    pod = netns()
    r = cni(a, "ADD", "rt1", pod)
    assert r.rc == 0, r
    # The pod's own /32 and /128 carry pinion's protocol too.
    wait_until(lambda: "unreachable %s" % V4 in routes(node, "-4"), timeout=5)
    ips = [x["address"].split("/")[0] for x in r.json["ips"]]
    listed = pinion_routes(node)
    assert all(ip in listed for ip in ips), (ips, listed)
    before = pinion_routes(node)

    mon = monitor(node)
    assert a.sigterm() == 0
    assert "1 pod(s) attached: leaving pinion's node routes and aggregates" in a.log_text()
    assert pinion_routes(node) == before
    a.start()
    wait_until(lambda: routing(a).get("passes", 0) >= 2, timeout=10, desc="two passes after the restart")
    assert a.kill9() == -signal.SIGKILL
    a.start()
    wait_until(lambda: routing(a).get("passes", 0) >= 2, timeout=10, desc="two passes after kill -9")
    events = mon.stop()
    assert "10.244.1." not in events and "fd00:244:1:" not in events, events
    assert pinion_routes(node) == before
    assert "Route added" not in a.log_text() and "Route removed" not in a.log_text()

    # With the pod gone, the next stop removes the aggregates; the pod's routes went with its veth.
    assert cni(a, "DEL", "rt1", pod).rc == 0
    assert a.sigterm() == 0
    assert pinion_routes(node) == ""


def test_a_reload_to_none_removes_the_routes_and_back_to_bgp_adds_them(podnet_agent, node):
    a = bgp_agent(podnet_agent, node)
    wait_until(lambda: "unreachable %s" % V4 in routes(node, "-4"), timeout=5)
    mark = a.log_mark()
    a.write_config(sections={"network": {"routing": "none"}})
    a.sighup()
    a.wait_log(r"Configuration reloaded", since=mark)
    wait_until(lambda: pinion_routes(node) == "", timeout=5, desc="the aggregates removed")
    assert routing(a)["mode"] == "none"
    a.write_config(sections={"network": {"routing": "bgp"}})
    a.sighup()
    wait_until(lambda: "unreachable %s" % V6 in routes(node, "-6"), timeout=5, desc="the aggregates back")


def test_a_bad_routing_value_is_a_config_error_with_its_line(podnet_agent, node):
    a = bgp_agent(podnet_agent, node)
    text = a.write_config(sections={"network": {"routing": "ospf"}})
    rc, out, err = a.check_config()
    line = [n for n, l in enumerate(text.splitlines(), 1) if l.startswith("routing=")][0]
    assert rc != 0 and "%s:%d" % (a.config_file, line) in err and "expected one of: none, nodes, bgp" in err, (rc, out, err)


# ---- nodes: routes to the other Nodes' pod CIDRs ----

def k8s_node(name, v4=None, v6=None, addr4=None, addr6=None):
    n = make_node(name)
    cidrs = [c for c in (v4, v6) if c]
    if cidrs:
        n["spec"] = {"podCIDR": cidrs[0], "podCIDRs": cidrs}
    n["status"]["addresses"] = ([{"type": "InternalIP", "address": x} for x in (addr4, addr6) if x] +
                                [{"type": "Hostname", "address": name}])
    return n


@pytest.fixture
def fake_in(tmp_dir):
    """fake_in(ns) -> an apiserver emulator listening on ns's loopback."""
    made = []

    def make(ns):
        # netns=: the listening socket is made there, also when an outage's recover() remakes it.
        f = FakeApiserver(netns=ns.name).start()
        made.append(f)
        return f
    yield make
    for f in made:
        f.stop()


def nodes_agent(agent_factory, node, fake):
    return agent_factory(netns=node.name, node_name="self", config={
        "network": {"pod-cidr": V4 + "," + V6, "routing": "nodes", "reconcile-interval": "1s"},
        "apiserver": {"url": fake.url, "backoff-initial": "100ms", "backoff-max": "1s"}})


def test_nodes_routes_follow_the_api(agent_factory, node, fake_in, monitor):
    fake = fake_in(node)
    fake.set_node("self", node=k8s_node("self", V4, V6, "192.168.77.1", "fd00:77::1"))
    fake.set_node("n2", node=k8s_node("n2", "10.244.2.0/24", "fd00:244:2::/64", "192.168.77.2", "fd00:77::2"))
    fake.set_node("n3", node=k8s_node("n3", "10.244.3.0/24", None, "10.99.0.3"))  # behind a router
    a = nodes_agent(agent_factory, node, fake)
    wait_until(lambda: "10.244.2.0/24 via 192.168.77.2" in routes(node, "-4") and
               "fd00:244:2::/64 via fd00:77::2" in routes(node, "-6"), timeout=10, desc="n2's routes")
    st = routing(a)
    assert st["mode"] == "nodes" and st["nodes"] == "synced", st
    assert st["routes"] == {"ipv4": 1, "ipv6": 1}, st
    assert st["skipped"] == [{"node": "n3", "address": "10.99.0.3", "podCIDR": "10.244.3.0/24",
                              "reason": "not-directly-connected"}], st
    assert st["hint"] == "peers on other subnets get no route: routing = bgp is the mode for routed fabrics", st
    assert "unreachable " + V4 in st["aggregates"]
    assert "10.244.3." not in routes(node, "-4")
    assert a.metrics().value("pinion_podnet_route_peers_skipped", reason="not-directly-connected") == 1
    a.wait_log(r"Route added: 10\.244\.2\.0/24 via 192\.168\.77\.2 \(Node n2\)")

    # A Node added later gets its route within 2 s; one changed is replaced; n3's warning is not repeated.
    t0 = time.monotonic()
    fake.set_node("n4", node=k8s_node("n4", "10.244.4.0/24", None, "192.168.77.4"))
    wait_until(lambda: "10.244.4.0/24 via 192.168.77.4" in routes(node, "-4"), timeout=5, desc="n4's route")
    assert time.monotonic() - t0 < 2.5
    fake.set_node("n2", node=k8s_node("n2", "10.244.2.0/24", "fd00:244:2::/64", "192.168.77.22", "fd00:77::2"))
    wait_until(lambda: "10.244.2.0/24 via 192.168.77.22" in routes(node, "-4"), timeout=5, desc="n2 replaced")
    a.wait_log(r"Route replaced: 10\.244\.2\.0/24 via 192\.168\.77\.22 \(Node n2\)")
    assert len(re.findall(r"No route to Node n3's pod CIDR", a.log_text())) == 1

    # A restart with the apiserver answering: no route deleted or added.
    mon = monitor(node)
    a.kill9()
    a.start()
    wait_until(lambda: routing(a).get("nodes") == "synced" and routing(a)["passes"] >= 2, timeout=10)
    time.sleep(1.5)
    events = mon.stop()
    assert "10.244." not in events and "fd00:244:" not in events, events

    # A deleted Node's routes go.
    fake.delete_node("n2")
    wait_until(lambda: "10.244.2.0/24" not in routes(node, "-4") and "fd00:244:2::" not in routes(node, "-6"),
               timeout=5, desc="n2's routes removed")
    a.wait_log(r"Route removed: fd00:244:2::/64 via fd00:77::2 \(Node n2\)")
    assert a.sigterm() == 0
    assert pinion_routes(node) == ""


def node_lists_since(fake, mark):
    return [e for e in fake.requests(path="/api/v1/nodes", since=mark)
            if e["path"] == "/api/v1/nodes" and "watch" not in e["params"]]


def test_node_watch_too_old_watches_from_the_newest_at_once_and_relists_later(agent_factory, node, fake_in):
    """410 to the Node watch (what every agent hears after an apiserver restart): the agent
    lists one Node for a current resourceVersion, watches from it at once (a Node added then is
    routed within 2 s) and relists every Node only after node-relist-after plus its spread."""
    fake = fake_in(node)
    fake.set_node("self", node=k8s_node("self", V4, V6, "192.168.77.1", "fd00:77::1"))
    fake.set_node("n2", node=k8s_node("n2", "10.244.2.0/24", None, "192.168.77.2"))
    a = agent_factory(netns=node.name, node_name="self", config={
        "network": {"pod-cidr": V4 + "," + V6, "routing": "nodes"},
        "apiserver": {"url": fake.url, "backoff-initial": "100ms", "backoff-max": "1s", "node-relist-after": "3s"}})
    wait_until(lambda: "10.244.2.0/24 via 192.168.77.2" in routes(node, "-4"), timeout=10, desc="n2's route")
    before = routes(node, "-4")

    # While the agent cannot see it, the apiserver moves on (a heartbeat) and compacts its
    # history: the resume from the agent's resourceVersion gets 410.
    mark = fake.requests()[-1]
    fake.outage("refuse")
    n2 = k8s_node("n2", "10.244.2.0/24", None, "192.168.77.2")
    n2["metadata"]["labels"]["heartbeat"] = "1"
    fake.set_node("n2", node=n2)
    fake.compact()
    fake.recover()
    m = a.wait_log(r"Watching nodes from resourceVersion (\d+); full relist in (\d+)s", timeout=10)
    probed = time.monotonic()
    assert int(m.group(2)) >= 3, m.group(0)
    # The table and the routes stayed as they were meanwhile.
    assert routes(node, "-4") == before

    t0 = time.monotonic()
    fake.set_node("n4", node=k8s_node("n4", "10.244.4.0/24", None, "192.168.77.4"))
    wait_until(lambda: "10.244.4.0/24 via 192.168.77.4" in routes(node, "-4"), timeout=5, desc="n4's route")
    assert time.monotonic() - t0 < 2.5

    node_lists = node_lists_since(fake, mark)
    assert [e["params"].get("limit") for e in node_lists] == ["1"], node_lists
    assert "resourceVersion" not in node_lists[0]["params"]

    a.wait_log(r"Relisting the cluster's Nodes, deferred since the watch went too old", timeout=15)
    assert time.monotonic() - probed >= 2.5
    wait_until(lambda: len(node_lists_since(fake, mark)) == 2, timeout=5, desc="the full relist")
    full = node_lists_since(fake, mark)[1]
    assert full["params"].get("resourceVersion") == "0", full  # from the watch cache
    assert "10.244.4.0/24 via 192.168.77.4" in routes(node, "-4")
    assert routing(a)["nodes"] == "synced"
