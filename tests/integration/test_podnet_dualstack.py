# SPDX-License-Identifier: MIT
"""Dual-stack pods through pinion-cni (real network namespaces): with an IPv4 and an IPv6
pod-cidr every pod gets a routed /32 and a routed /128 (no overlay; the pod's IPv6 default route
goes via the host end's link-local fe80::1), the CNI result lists both, CHECK verifies both, DEL
and GC release both, the pod store and /v1/status show both; an IPv6-only pod-cidr works alone;
a bad pod-cidr is a config error."""

import ipaddress
import os
import re

import pytest

from pinion_testlib import make_pod, wait_until
from podnet_testlib import (cni, free_pod_cidr, free_pod_cidr6, k8s_args, netns, ping, ping6,  # noqa: F401
                            pinion_conf, podnet_state_on_disk, podnet_status)

from test_podnet import podnet_agent  # noqa: F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def addrs(result):
    """{4: "10.x.y.z", 6: "fd..."} from a CNI result."""
    out = {}
    for ip in result["ips"]:
        a = ipaddress.ip_interface(ip["address"])
        out[a.version] = (str(a.ip), a.network.prefixlen, ip.get("gateway"))
    return out


def host_route6(addr):
    import subprocess
    return addr in subprocess.run(["ip", "-6", "route", "show", addr + "/128"], capture_output=True, text=True).stdout


def test_dual_stack_pods_reach_each_other_over_both_families(podnet_agent, netns):
    v4, v6 = free_pod_cidr(), free_pod_cidr6()
    a = podnet_agent(cidr="%s, %s" % (v4, v6))
    n1, n2 = netns(), netns()
    a.write_pod("web", make_pod("web", uid="uid-web-ds", ip=None))
    a.wait_pod("default", "web")
    r1 = cni(a, "ADD", "ds1", n1, args=k8s_args("default", "web", "uid-web-ds"))
    r2 = cni(a, "ADD", "ds2", n2)
    assert r1.rc == 0 and r2.rc == 0, (r1, r2)
    x1, x2 = addrs(r1.json), addrs(r2.json)
    assert set(x1) == {4, 6}, r1.json
    assert x1[4][1] == 32 and x1[6][1] == 128 and x1[6][2] == "fe80::1", x1
    assert ipaddress.ip_address(x1[6][0]) in ipaddress.ip_network(v6)
    assert {"dst": "::/0", "gw": "fe80::1"} in r1.json["routes"]
    assert {"dst": "0.0.0.0/0", "gw": "169.254.1.1"} in r1.json["routes"]
    ip4, ip6 = x1[4][0], x1[6][0]

    # The kernel state: the /128 inside (no DAD: not tentative), the default route, the host route.
    inside = n1.run("ip", "-6", "addr", "show", "dev", "eth0").stdout
    assert "%s/128" % ip6 in inside and "tentative" not in inside.split(ip6)[1].split("\n")[0], inside
    assert "default via fe80::1 dev eth0" in n1.run("ip", "-6", "route").stdout
    assert host_route6(ip6)
    assert open("/proc/sys/net/ipv6/conf/all/forwarding").read().strip() == "1"

    assert ping6(x2[6][0], netns=n1), "pod 1 cannot reach pod 2 over IPv6"
    assert ping6(ip6, netns=n2), "pod 2 cannot reach pod 1 over IPv6"
    assert ping6(ip6), "the host cannot reach pod 1 over IPv6"
    assert ping6("fe80::1%eth0", netns=n1), "pod 1 cannot reach its gateway"
    assert ping(x2[4][0], netns=n1) and ping(ip4), "IPv4 beside it"

    # Both addresses in the pod store (IPv4 first), the status and the metrics.
    a.wait_pod("default", "web", lambda p: p.get("ips") == [ip4, ip6])
    pool = podnet_status(a)["details"]["pool"]
    assert pool["ipv4"]["allocated"] == 2 and pool["ipv6"]["allocated"] == 2, pool
    assert pool["ipv6"]["podCIDR"] == v6 and pool["ipv6"]["size"] == 65535
    assert {x["ip6"] for x in pool["allocations"]} == {ip6, x2[6][0]}
    assert a.metrics().value("pinion_podnet_ipv6_pool_addresses", state="allocated") == 2

    # CHECK: both families verified.
    conf = pinion_conf(a, prevResult=r1.json)
    assert cni(a, "CHECK", "ds1", n1, conf=conf).rc == 0
    only4 = dict(r1.json, ips=[i for i in r1.json["ips"] if ":" not in i["address"]])
    r = cni(a, "CHECK", "ds1", n1, conf=pinion_conf(a, prevResult=only4))
    assert r.rc != 0 and r.code == 101 and ip6 in r.json["details"], r
    n1.run("ip", "-6", "route", "del", "default")
    r = cni(a, "CHECK", "ds1", n1, conf=conf)
    assert r.rc != 0 and r.code == 101 and "fe80::1" in r.json["details"], r
    n1.run("ip", "-6", "route", "add", "default", "via", "fe80::1", "dev", "eth0")
    assert cni(a, "CHECK", "ds1", n1, conf=conf).rc == 0

    # DEL releases both, the host route goes.
    assert cni(a, "DEL", "ds1", n1).rc == 0
    wait_until(lambda: not host_route6(ip6), timeout=5)
    pool = podnet_status(a)["details"]["pool"]
    assert pool["ipv4"]["allocated"] == 1 and pool["ipv6"]["allocated"] == 1
    assert pool["ipv6"]["quarantined"] == 1
    a.wait_pod("default", "web", lambda p: not p.get("ips"))
    assert [x.get("ip6") for x in podnet_state_on_disk(a.state_dir)["allocations"]] == [x2[6][0]]
    assert cni(a, "DEL", "ds2", n2).rc == 0


def test_gc_and_requests_cover_both_families(podnet_agent, netns):
    v4, v6 = free_pod_cidr(), free_pod_cidr6()
    a = podnet_agent(cidr="%s %s" % (v4, v6), network={"gc-grace": "0s"})
    n1, n2, n3 = netns(), netns(), netns()
    want6 = str(ipaddress.ip_network(v6)[0x42])
    want4 = str(ipaddress.ip_network(v4)[0x42])
    r = cni(a, "ADD", "keep", n1, args="IgnoreUnknown=1;IP=%s,%s" % (want4, want6))
    assert r.rc == 0 and addrs(r.json)[6][0] == want6 and addrs(r.json)[4][0] == want4, r
    r = cni(a, "ADD", "leak", n2, conf=pinion_conf(a, runtimeConfig={"ips": [want6 + "/64"]}))
    assert r.rc != 0 and r.code == 105, r
    r = cni(a, "ADD", "leak", n2)
    assert r.rc == 0, r
    leaked6 = addrs(r.json)[6][0]
    r = cni(a, "ADD", "other", n3, args="IP=%s" % str(ipaddress.ip_network(v6)[0]))
    assert r.rc != 0 and r.code == 104, r
    gc = cni(a, "GC", conf=pinion_conf(a, **{"cni.dev/valid-attachments": [{"containerID": "keep", "ifname": "eth0"}]}))
    assert gc.rc == 0, gc
    pool = podnet_status(a)["details"]["pool"]
    assert pool["ipv4"]["allocated"] == 1 and pool["ipv6"]["allocated"] == 1, pool
    wait_until(lambda: not host_route6(leaked6), timeout=5)
    assert cni(a, "DEL", "keep", n1).rc == 0


def test_ipv6_only(podnet_agent, netns):
    v6 = free_pod_cidr6()
    a = podnet_agent(cidr=v6)
    n1 = netns()
    r = cni(a, "ADD", "six", n1)
    assert r.rc == 0, r
    x = addrs(r.json)
    assert set(x) == {6} and r.json["routes"] == [{"dst": "::/0", "gw": "fe80::1"}], r.json
    assert n1.run("ip", "-4", "addr", "show", "dev", "eth0").stdout.strip() == ""
    assert ping6(x[6][0])
    assert cni(a, "CHECK", "six", n1, conf=pinion_conf(a, prevResult=r.json)).rc == 0
    r4 = cni(a, "ADD", "four", n1, args="IP=10.9.9.9", ifname="eth1")
    assert r4.rc != 0 and r4.code == 104, r4
    assert cni(a, "STATUS").rc == 0
    assert cni(a, "DEL", "six", n1).rc == 0
    assert podnet_status(a)["details"]["pool"]["ipv6"]["allocated"] == 0


@pytest.mark.parametrize("cidr", ["10.0.0.0/24,10.1.0.0/24", "fd00:5::/64 fd00:6::/64", "fd00:5::/8",
                                  "fd00:5::/127", "fd00::5::/64", "10.0.0.0/24;fd00:5::/64"])
def test_bad_pod_cidrs_are_config_errors(podnet_agent, cidr):
    a = podnet_agent()
    a.write_config(sections={"network": {"pod-cidr": cidr}})
    rc, out, err = a.check_config()
    assert rc == 78 and re.search(r":\d+: .*CIDR", err), (cidr, rc, out, err)


def test_dual_stack_cidrs_from_the_node_object(agent_factory, netns, tmp_dir):
    """No pod-cidr: a dual-stack Node's spec.podCIDRs (IPv6 listed first here) give both pools."""
    import sys
    from pinion_testlib import SRCDIR
    sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
    from kube_apiserver import FakeApiserver
    from kube_objects import make_node
    token_file = os.path.join(tmp_dir, "token")
    with open(token_file, "w") as f:
        f.write("podnet-token\n")
    fake = FakeApiserver(tls=True, token="podnet-token").start()
    try:
        a = agent_factory(config={"apiserver": {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
                                                "backoff-initial": "100ms", "backoff-max": "1s"}})
        wait_until(lambda: podnet_status(a)["reason"] == "waiting for the Node's spec.podCIDR from the apiserver",
                   timeout=10)
        v4, v6 = free_pod_cidr(), free_pod_cidr6()
        node = make_node("test-node")
        node["spec"] = {"podCIDR": v6, "podCIDRs": [v6, v4]}
        fake.set_node("test-node", node=node)

        def running():
            st = podnet_status(a)
            assert st["state"] == "running", (st, [m for m in a.status()["modules"] if m["name"] == "apiserver"])
            return st
        wait_until(running, timeout=30, desc="podnet running with the Node's CIDRs")
        st = podnet_status(a)["details"]
        assert st["podCIDR"] == "%s,%s" % (v4, v6) and st["podCIDRFrom"] == "node", st
        n = netns()
        r = cni(a, "ADD", "nd1", n)
        assert r.rc == 0 and set(addrs(r.json)) == {4, 6}, r
        assert ping6(addrs(r.json)[6][0]) and ping(addrs(r.json)[4][0])
        assert cni(a, "DEL", "nd1", n).rc == 0
    finally:
        fake.stop()
