# SPDX-License-Identifier: MIT
"""Static addresses through pinion-cni (real network namespaces): CNI_ARGS IP= (as podman run --ip
sends it, with IgnoreUnknown=1) and runtimeConfig "ips" (the capability the shipped conflist
declares) reserve the requested address for the attachment; an address outside the pool, another
attachment's, or in quarantine is a clear CNI error and nothing is allocated; a repeated ADD with
the same request is idempotent, a different one an error."""

import ipaddress
import json
import os

import pytest

from pinion_testlib import SRCDIR, wait_until
from podnet_testlib import cni, netns, ping, pinion_conf, podnet_state_on_disk, podnet_status  # noqa: F401

from test_podnet import podnet_agent  # noqa: F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def allocations(a):
    return {x["containerID"]: x["ip"] for x in podnet_status(a)["details"]["pool"]["allocations"]}


def addr(a, i):
    return str(ipaddress.ip_network(a.pod_cidr)[i])


def test_cni_args_ip_reserves_the_address(podnet_agent, netns):
    a = podnet_agent()
    n1, n2 = netns(), netns()
    want = addr(a, 77)
    # podman run --ip: IP= among CNI_ARGS, with IgnoreUnknown=1 and the pod's name.
    r = cni(a, "ADD", "static1", n1, args="IgnoreUnknown=1;K8S_POD_NAME=web;IP=%s" % want)
    assert r.rc == 0, r
    assert r.json["ips"][0]["address"] == want + "/32", r.json
    assert "inet %s/32" % want in n1.run("ip", "-4", "addr", "show", "dev", "eth0").stdout
    assert ping(want)
    # A repeated ADD with the same request: the same address, still one allocation.
    r = cni(a, "ADD", "static1", n1, args="IgnoreUnknown=1;IP=%s" % want)
    assert r.rc == 0 and r.json["ips"][0]["address"] == want + "/32", r
    # IP is a key pinion knows: no IgnoreUnknown needed.
    r = cni(a, "ADD", "static1", n1, args="IP=%s/24" % want)
    assert r.rc == 0 and r.ip() == want, r
    assert allocations(a) == {"static1": want}
    # Another address for the attachment: refused, the allocation as it was.
    r = cni(a, "ADD", "static1", n1, args="IP=%s" % addr(a, 78))
    assert r.rc != 0 and r.code == 104, r
    assert want in r.json["details"]
    # Another attachment asking for a held address: refused, nothing allocated.
    r = cni(a, "ADD", "static2", n2, args="IgnoreUnknown=1;IP=%s" % want)
    assert r.rc != 0 and r.code == 105, r
    assert "static1" in r.json["details"], r
    assert allocations(a) == {"static1": want}
    # Dynamic allocation goes on beside it.
    r = cni(a, "ADD", "dyn", n2)
    assert r.rc == 0 and r.ip() not in (want,), r
    # The reservation is on disk (snapshot + journal) before the answer.
    on_disk = {x["containerID"]: x["ip"] for x in podnet_state_on_disk(a.state_dir)["allocations"]}
    assert on_disk["static1"] == want
    assert cni(a, "DEL", "static1", n1).rc == 0
    assert cni(a, "DEL", "dyn", n2).rc == 0


def test_unusable_requests_are_refused_and_allocate_nothing(podnet_agent, netns):
    a = podnet_agent()
    n = netns()
    net = ipaddress.ip_network(a.pod_cidr)
    cases = [
        ("IP=10.255.255.7", 104),                    # outside the pod CIDR
        ("IP=%s" % net.network_address, 104),        # the network address
        ("IP=%s" % net.broadcast_address, 104),      # the broadcast address
        ("IP=169.254.1.1", 104),                     # host-gateway (outside the CIDR by design)
        ("IP=not-an-ip", 4),                         # malformed: a bad CNI_ARGS
        ("IP=%s,%s" % (net[5], net[6]), 4),          # two of one family
    ]
    for args, code in cases:
        r = cni(a, "ADD", "bad", n, args=args)
        assert r.rc != 0 and r.code == code, (args, r)
        assert r.json["msg"], r
    assert podnet_status(a)["details"]["pool"]["allocated"] == 0
    assert n.run("ip", "link", "show", "eth0", check=False).returncode != 0
    # A malformed IP= does not stand in the way of a DEL.
    assert cni(a, "DEL", "bad", n, args="IP=not-an-ip").rc == 0


def test_quarantined_address_is_try_again_later(podnet_agent, netns):
    a = podnet_agent(quarantine="30s")
    n1, n2 = netns(), netns()
    want = addr(a, 9)
    assert cni(a, "ADD", "q1", n1, args="IP=%s" % want).rc == 0
    assert cni(a, "DEL", "q1", n1).rc == 0
    r = cni(a, "ADD", "q2", n2, args="IP=%s" % want)
    assert r.rc != 0 and r.code == 11 and "quarantine" in r.json["msg"], r
    assert podnet_status(a)["details"]["pool"]["allocated"] == 0


def test_runtime_config_ips(podnet_agent, netns):
    a = podnet_agent()
    n1, n2 = netns(), netns()
    want, other = addr(a, 40), addr(a, 41)
    conf = pinion_conf(a, version="1.0.0", runtimeConfig={"ips": [want + "/24"]})
    r = cni(a, "ADD", "rc1", n1, conf=conf)
    assert r.rc == 0 and r.ip() == want, r
    # runtimeConfig takes the place of IP= when both come.
    conf = pinion_conf(a, version="1.0.0", runtimeConfig={"ips": [other]})
    r = cni(a, "ADD", "rc2", n2, conf=conf, args="IgnoreUnknown=1;IP=%s" % addr(a, 42))
    assert r.rc == 0 and r.ip() == other, r
    for bad in ([5], "10.0.0.1", ["x"]):
        r = cni(a, "ADD", "rc3", n2, conf=pinion_conf(a, runtimeConfig={"ips": bad}))
        assert r.rc != 0 and r.code == 7, (bad, r)
    assert sorted(allocations(a).values()) == sorted([want, other])
    assert cni(a, "DEL", "rc1", n1).rc == 0
    assert cni(a, "DEL", "rc2", n2).rc == 0
    wait_until(lambda: podnet_status(a)["details"]["pool"]["allocated"] == 0, timeout=5)


def test_shipped_conflist_declares_the_ips_capability():
    conflist = json.load(open(os.path.join(SRCDIR, "conf", "cni", "10-pinion.conflist")))
    ours = [p for p in conflist["plugins"] if p["type"] == "pinion-cni"]
    assert ours and ours[0].get("capabilities", {}).get("ips") is True, conflist
