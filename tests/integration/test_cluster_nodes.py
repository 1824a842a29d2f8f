# SPDX-License-Identifier: MIT
"""[network] routing = nodes, with real parts: four nodes (two dual-stack, one IPv4-only, one
IPv6-only) as network namespaces on one bridge, each with its own piniond taking its pod CIDRs
from its Node in the apiserver emulator, and pods wired by pinion-cni. Every pod reaches every
pod on the other nodes in each family both have, routed (no tunnel device anywhere) and without
NAT; Nodes added and deleted show up in the routes within 2 s; a Node off the connected subnets
gets no route but a warning and a status line; a kill -9 and restart of an agent loses no
packet beyond noise and deletes no route."""

import json
import os
import re
import time

import pytest

from pinion_testlib import wait_until
from cluster_testlib import assert_no_nat, cluster, podnet_module  # noqa: F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def four_nodes(c):
    nodes = [c.add_node(v4=True, v6=True), c.add_node(v4=True, v6=True), c.add_node(v4=True, v6=False),
             c.add_node(v4=False, v6=True)]
    for n in nodes:
        c.add_pod(n)
    c.add_pod(nodes[0])  # two pods on one node: both reachable, and from each other's peers
    return nodes


def assert_full_mesh(c, timeout=3):
    answered, missing = c.ping_matrix(timeout=timeout)
    assert not missing, "%d of %d cross-node pings unanswered: %s" % (
        len(missing), len(missing) + len(answered), missing)
    return len(answered)


def test_every_pod_reaches_every_pod_routed_without_nat(cluster):
    c = cluster(routing="nodes")
    nodes = four_nodes(c)
    n = assert_full_mesh(c)
    # 5 pods: 4 with IPv4 (the two on node 1 do not count each other), 4 with IPv6.
    assert n == (4 * 3 - 2) + (4 * 3 - 2), n

    # TCP: the server sees the client pod's own address, in both families.
    assert_no_nat(c)

    # The routes: every other node's CIDR via its InternalIP (connected), own CIDRs unreachable.
    for n in nodes:
        lines = dict(c.route_entries(n))
        for own in n.cidrs():
            assert lines.get(own, "").startswith("unreachable"), (n, lines)
        for o in nodes:
            if o is n:
                continue
            for cidr, addr, mine in ((o.cidr4, o.addr4, n.addr4), (o.cidr6, o.addr6, n.addr6)):
                if cidr and mine:
                    assert "via %s " % addr in lines.get(cidr, "") + " ", (n, cidr, lines)
    assert c.tunnel_links() == []


def test_node_added_later_is_reachable_and_deleted_node_leaves_no_route(cluster):
    c = cluster(routing="nodes")
    a, b = c.add_node(), c.add_node(v6=False)
    pa, pb = c.add_pod(a), c.add_pod(b)
    assert_full_mesh(c)

    # A new Node (netns and agent first, then the Node object): a route within 2 s of the event.
    n = c.new_node()
    c.nodes.append(n)
    c.wire_node(n)
    n.agent = c.make_agent(n)
    c.set_node(n)
    t0 = time.monotonic()
    for other in (a, b):
        wait_until(lambda: n.cidr4 in dict(c.route_entries(other)), timeout=2,
                   desc="route to the new node's %s in %s" % (n.cidr4, other.name))
    wait_until(lambda: n.cidr6 in dict(c.route_entries(a)), timeout=2, desc="IPv6 route to the new node")
    took = time.monotonic() - t0
    c.start_agent(n)
    pn = c.add_pod(n)
    assert set(c.ping_from(pa, pn.addrs())) == set(pn.addrs())
    assert c.ping_from(pb, [pn.addr4]) == [pn.addr4]
    assert set(c.ping_from(pn, [pa.addr4, pa.addr6, pb.addr4])) == {pa.addr4, pa.addr6, pb.addr4}
    print("new node routed after %.2fs" % took)

    # The Node is deleted: its routes go within 2 s, everywhere, and nothing else moves.
    before = {o.name: dict(c.route_entries(o)) for o in (a, b)}
    c.delete_node(n)
    for other in (a, b):
        wait_until(lambda: not set(n.cidrs()) & set(dict(c.route_entries(other))), timeout=2,
                   desc="no route to the deleted node in %s" % other.name)
        assert c.route_to(other, n.cidr4) == "", c.route_to(other, n.cidr4)
        after = dict(c.route_entries(other))
        assert {k: v for k, v in before[other.name].items() if k not in n.cidrs()} == after
    assert set(c.ping_from(pa, [pb.addr4])) == {pb.addr4}


def test_changed_address_or_cidr_replaces_the_route(cluster):
    c = cluster(routing="nodes")
    a, b = c.add_node(), c.add_node()
    pa, pb = c.add_pod(a), c.add_pod(b)
    assert_full_mesh(c)

    # b's Node names another of its addresses: a's route follows within 2 s, traffic too. (b
    # keeps the old one: its agent's connection to the apiserver comes from it.)
    b.addr4 = c.fabric_addr(4, 100 + b.index)
    b.ns.run("ip", "addr", "add", "%s/%d" % (b.addr4, c.fabric4.prefixlen), "dev", "eth0")
    c.set_node(b)
    wait_until(lambda: "via %s " % b.addr4 in dict(c.route_entries(a)).get(b.cidr4, "") + " ", timeout=2,
               desc="a's route to %s via b's new address" % b.cidr4)
    assert c.ping_from(pa, [pb.addr4]) == [pb.addr4]

    # A Node (no agent needed for the others' routes) whose pod CIDR changes: the old route
    # goes and the new one comes, within 2 s.
    g = c.new_node()
    c.nodes.append(g)
    c.set_node(g)
    wait_until(lambda: g.cidr4 in dict(c.route_entries(a)), timeout=2, desc="route to the ghost's CIDR")
    old_cidrs = g.cidrs()
    g.cidr4, g.cidr6 = c.node_cidr(4, 200), c.node_cidr(6, 200)
    c.set_node(g)
    for n in (a, b):
        def follow():
            have = dict(c.route_entries(n))
            assert set(g.cidrs()) <= set(have) and not set(old_cidrs) & set(have), (g.cidrs(), old_cidrs, have)
            return True
        wait_until(follow, timeout=2, desc="%s's routes follow the ghost's new CIDRs" % n.name)
        assert "via %s " % g.addr6 in dict(c.route_entries(n))[g.cidr6] + " "


def test_node_off_the_connected_subnets_gets_no_route_but_a_warning(cluster):
    c = cluster(routing="nodes")
    a = c.add_node()
    c.add_pod(a)
    # A Node whose InternalIP is on no subnet of a's: the kernel's route to it has a gateway.
    far = c.new_node()
    far.addr4 = "192.0.2.%d" % (10 + far.index)
    far.addr6 = "2001:db8::%x" % (10 + far.index)
    mark = a.agent.log_mark()
    c.set_node(far)
    a.agent.wait_log(r"%s.*(%s|%s)|(%s|%s).*%s" % (re.escape(far.name), re.escape(far.addr4), re.escape(far.addr6),
                                                    re.escape(far.addr4), re.escape(far.addr6), re.escape(far.name)),
                     timeout=2, since=mark)
    time.sleep(0.5)
    assert not set(far.cidrs()) & set(dict(c.route_entries(a))), c.route_entries(a)
    routing = podnet_module(a.agent)["details"]["routing"]
    assert routing["mode"] == "nodes", routing
    assert {(x["node"], x["address"]) for x in routing["skipped"]} >= {(far.name, far.addr4)}, routing
    assert "bgp" in str(routing.get("hint", "")) + str(podnet_module(a.agent).get("reason", "")), routing
    assert a.agent.metrics().value("pinion_podnet_route_peers_skipped", reason="not-directly-connected") == 2
    rc, out, _ = a.agent.ctl("status")
    assert rc == 0 and far.name in out and "bgp" in out, out
    # One warning per address, not one per event: a change to the Node that moves no route
    # repeats nothing.
    obj = far.node_object()
    obj["metadata"]["labels"]["pinion.test/touched"] = "1"
    c.fake.set_node(far.name, node=obj)
    time.sleep(1)
    warnings = [line for line in a.agent.log_text().splitlines()
                if far.name in line and re.search(r"warn", line, re.I)]
    for addr in (far.addr4, far.addr6):
        assert len([w for w in warnings if addr in w]) <= 1, warnings
    assert warnings


def test_routing_none_leaves_the_nodes_apart(cluster):
    """The control: with routing = none (the default) pinion adds nothing between nodes, and the
    fabric carries nothing either, so no cross-node ping is answered (the harness leaks nothing)."""
    c = cluster(routing="none")
    a, b = c.add_node(), c.add_node()
    c.add_pod(a), c.add_pod(b)
    answered, missing = c.ping_matrix(timeout=1)
    assert answered == [] and len(missing) == 4, answered
    for n in (a, b):
        assert [d for d, _ in c.route_entries(n) if c.is_node_cidr(d)] == [], c.route_entries(n)


def test_agent_kill9_and_restart_keeps_traffic_and_routes(cluster):
    c = cluster(routing="nodes")
    a, b, d = c.add_node(), c.add_node(), c.add_node(v6=False)
    pa, pb, pd = c.add_pod(a), c.add_pod(b), c.add_pod(d)
    assert_full_mesh(c)
    monitor = c.spawn(["ip", "netns", "exec", a.ns.name, "ip", "monitor", "route"],
                      stdout=open(os.path.join(c.dir, "monitor"), "w"), stderr=open(os.devnull, "w"))
    time.sleep(0.3)
    loops = [c.ping_loop(pb, pa.addr4, duration=6), c.ping_loop(pb, pa.addr6, duration=6),
             c.ping_loop(pa, pd.addr4, duration=6)]
    time.sleep(1)
    before = sorted(c.route_entries(a))
    assert a.agent.kill9() == -9
    time.sleep(1)
    assert sorted(c.route_entries(a)) == before
    c.start_agent(a)
    for lp in loops:
        out, err = lp.communicate(timeout=30)
        r = json.loads(out)
        # Noise: at most 2 of ~300 requests.
        assert r["sent"] > 200 and len(r["lost"]) <= 2, r
        print("across the kill -9 and restart: %d sent, %d lost" % (r["sent"], len(r["lost"])))
    time.sleep(0.5)
    monitor.terminate()
    monitor.wait(5)
    with open(os.path.join(c.dir, "monitor")) as f:
        events = f.read()
    assert not [line for line in events.splitlines() if line.startswith("Deleted")], events
    assert sorted(c.route_entries(a)) == before
    assert_full_mesh(c)


def test_watch_on_a_dead_connection_is_given_up_and_resumed(cluster):
    """The node's address that carried the agent's connection to the apiserver is removed (a
    renumbered node): nothing comes on the watches any more and no error either. TCP keepalive
    (30 s idle, 3 probes 10 s apart) ends the connection, the reflectors resume from their
    resourceVersion over a new one, and a Node added meanwhile reaches the routes."""
    c = cluster(routing="nodes")
    a, b = c.add_node(), c.add_node()
    pa, pb = c.add_pod(a), c.add_pod(b)
    assert_full_mesh(c)

    # b moves to another address of the subnet: with promote_secondaries the new one stays
    # when the old, primary one goes.
    old = b.addr4
    b.ns.run("sysctl", "-qw", "net.ipv4.conf.eth0.promote_secondaries=1")
    b.addr4 = c.fabric_addr(4, 120 + b.index)
    b.ns.run("ip", "addr", "add", "%s/%d" % (b.addr4, c.fabric4.prefixlen), "dev", "eth0")
    b.ns.run("ip", "addr", "del", "%s/%d" % (old, c.fabric4.prefixlen), "dev", "eth0")
    c.set_node(b)
    gone = time.monotonic()

    g = c.new_node()
    c.nodes.append(g)
    c.set_node(g)
    wait_until(lambda: g.cidr4 in dict(c.route_entries(a)), timeout=2, desc="a's route to the new Node")
    wait_until(lambda: g.cidr4 in dict(c.route_entries(b)), timeout=90,
               desc="b's route to the new Node, once its dead watch was given up")
    took = time.monotonic() - gone
    print("b heard of the new Node %.1f s after its address went (keepalive's bound: 60 s + backoff)" % took)
    assert took < 75, took
    assert b.agent.wait_log(r"Watch (failed|stream cut short)", timeout=1)
    # a follows b's new address, and traffic flows again.
    wait_until(lambda: "via %s " % b.addr4 in dict(c.route_entries(a)).get(b.cidr4, "") + " ", timeout=2,
               desc="a's route to b's new address")
    assert c.ping_from(pa, [pb.addr4]) == [pb.addr4]
