# SPDX-License-Identifier: MIT
"""[network] routing = bgp, with real parts: the cluster of test_cluster_nodes.py, each node
also running Debian's bird2 with units/bird/pinion-node.conf, peering over iBGP with a route
reflector's bird2 (units/bird/route-reflector.conf) in the bridge's namespace, hold time 3 s.
pinion installs only its unreachable aggregates (proto 177); BIRD announces them and installs
the other nodes' CIDRs. Every pod reaches every pod in both families, without NAT or tunnels;
a node whose agent stops with no pod withdraws its CIDR at once; a node cut off (bird killed,
link down) is withdrawn within the hold time; no agent lists or watches Nodes."""

import os
import subprocess
import time

import pytest

from pinion_testlib import wait_until
from cluster_testlib import assert_no_nat, bird_config, cluster, sh  # noqa: F401

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
              pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v bird"], capture_output=True).returncode != 0,
                                 reason="bird2 is not installed (scripts/deps)")]

HOLD = 3


def bgp_cluster(cluster):
    c = cluster(routing="bgp", hold_time=HOLD)
    nodes = [c.add_node(v4=True, v6=True), c.add_node(v4=True, v6=True), c.add_node(v4=True, v6=False),
             c.add_node(v4=False, v6=True)]
    for n in nodes:
        c.add_pod(n)
    return c, nodes


def bird_route(c, n, cidr):
    """n's kernel route to cidr if BIRD installed it (proto bird), else ""."""
    line = c.route_to(n, cidr)
    return line if "proto bird" in line else ""


def wait_converged(c, nodes, timeout=15):
    """Every node has BIRD's route to every other node's CIDR in each family it has."""
    def done():
        for n in nodes:
            for o in nodes:
                if o is n:
                    continue
                for cidr, mine in ((o.cidr4, n.addr4), (o.cidr6, n.addr6)):
                    if cidr and mine and not bird_route(c, n, cidr):
                        raise AssertionError("%s has no BGP route to %s (%s)" % (n.name, cidr, o.name))
        return True
    try:
        wait_until(done, timeout=timeout, desc="BGP routes everywhere")
    except AssertionError as e:
        raise AssertionError("%s\n--- rr ---\n%s\n%s" % (e, c.rr.birdc("show", "protocols"), c.rr.log_tail()))


def test_bird_configs_parse(tmp_path):
    """The shipped configurations, filled in (dual-stack and single-stack), pass `bird -p`."""
    for name, values in (("pinion-node.conf", dict(ROUTER_ID="10.0.0.11", AS=64512, HOLD_TIME=9,
                                                   RR1_IPV4="10.0.0.1", RR1_IPV6="fd00::1")),
                         ("pinion-node.conf", dict(ROUTER_ID="0.0.0.7", AS=64512, HOLD_TIME=9, RR1_IPV6="fd00::1")),
                         ("route-reflector.conf", dict(ROUTER_ID="10.0.0.1", AS=64512, HOLD_TIME=9,
                                                       NODES_IPV4="10.0.0.0/16", NODES_IPV6="fd00::/56"))):
        conf = tmp_path / name
        conf.write_text(bird_config(name, **values))
        p = sh("bird", "-p", "-c", str(conf), check=False)
        assert p.returncode == 0, (name, p.stdout, p.stderr)
        import re
        assert not re.search(r"@[A-Z0-9_]+@", conf.read_text()), conf.read_text()


def test_pods_reach_each_other_over_bgp_routes(cluster):
    c, nodes = bgp_cluster(cluster)
    wait_converged(c, nodes)
    answered, missing = c.ping_matrix()
    assert not missing, missing
    assert len(answered) == 3 * 2 + 3 * 2, answered

    assert_no_nat(c)

    # pinion's own routes: only its aggregates; the rest is BIRD's, via the owner's address.
    for n in nodes:
        mine = c.route_entries(n)
        assert sorted(dst for dst, _ in mine if c.is_node_cidr(dst)) == sorted(n.cidrs()), mine
        assert all(line.startswith("unreachable") for dst, line in mine if c.is_node_cidr(dst)), mine
        for o in nodes:
            if o is not n:
                for cidr, addr, have in ((o.cidr4, o.addr4, n.addr4), (o.cidr6, o.addr6, n.addr6)):
                    if cidr and have:
                        assert "via %s " % addr in bird_route(c, n, cidr), (n, cidr, bird_route(c, n, cidr))
    assert c.tunnel_links() == []
    # No Node list or watch: BGP carries what the nodes need.
    assert c.fake.requests(verb=["list", "watch"], path="/api/v1/nodes") == []


def test_agent_stopping_without_pods_withdraws_at_once(cluster):
    c, nodes = bgp_cluster(cluster)
    empty = c.add_node()
    wait_converged(c, nodes + [empty])
    t0 = time.monotonic()
    c.stop_agent(empty)
    for n in nodes:
        for cidr, have in ((empty.cidr4, n.addr4), (empty.cidr6, n.addr6)):
            if have:
                wait_until(lambda: not bird_route(c, n, cidr), timeout=1.5,
                           desc="%s withdrawn from %s" % (cidr, n.name))
    took = time.monotonic() - t0
    assert took < HOLD, took
    print("agent stopped: CIDRs withdrawn everywhere after %.2fs" % took)
    # The others stay.
    answered, missing = c.ping_matrix()
    assert not missing, missing


@pytest.mark.parametrize("cut", ["bird-kill9", "link-down"])
def test_node_cut_off_is_withdrawn_within_the_hold_time(cluster, cut):
    c, nodes = bgp_cluster(cluster)
    wait_converged(c, nodes)
    victim, others = nodes[0], nodes[1:]
    if cut == "bird-kill9":
        victim.bird.kill9()
    else:
        victim.ns.run("ip", "link", "set", "eth0", "down")
    t0 = time.monotonic()
    for n in others:
        for cidr, have in ((victim.cidr4, n.addr4), (victim.cidr6, n.addr6)):
            if have:
                wait_until(lambda: not bird_route(c, n, cidr), timeout=HOLD + 1,
                           desc="%s withdrawn from %s" % (cidr, n.name))
    took = time.monotonic() - t0
    assert took <= HOLD + 1, took
    print("%s: withdrawn after %.2fs" % (cut, took))
    # The rest of the cluster still reaches itself.
    answered, missing = c.ping_matrix(pods=[p for n in others for p in n.pods])
    assert not missing, missing
