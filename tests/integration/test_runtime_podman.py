# SPDX-License-Identifier: MIT
"""podman 4.3 (CNI backend, runc) drives pinion-cni: `podman run --network pinion` with the
shipped conflist (pinion-cni chained with the reference portmap) pointed at a piniond the test
started. podman runs privately (runtime_testlib.Podman: its own root, runroot, containers.conf
and CNI config dir); its containers run a local busybox-static image. Single-stack and
dual-stack (IPv4 and IPv6 pod-cidr) agents. Everything is removed at teardown, also when a test
fails."""

import contextlib
import ipaddress
import os
import re
import subprocess

import pytest

from pinion_testlib import diag, wait_until
from podnet_testlib import host_links, ping, ping6
from runtime_testlib import (HTTP_MARKER, Podman, agent_warnings, allocated, allocation_of, allocations,
                             busybox_image, dual_stack_agent_config, ping_from, podnet_agent_config,
                             pool_allocated, require_runtime, wait_http)


@contextlib.contextmanager
def podman_on(agent_factory, config):
    """(agent, podman): a piniond with podnet configured by config and a private podman whose
    CNI network "pinion" is the shipped conflist against it, the busybox image loaded."""
    require_runtime("podman")
    agent = agent_factory(config=config)
    pm = Podman(agent.socket)
    try:
        pm.load(busybox_image(pm.dir))
        yield agent, pm
    finally:
        pm.cleanup()


@pytest.fixture
def podman_node(agent_factory):
    with podman_on(agent_factory, podnet_agent_config()) as node:
        yield node


@pytest.fixture
def podman_dual_node(agent_factory):
    """podman_node on a dual-stack agent (an IPv4 and an IPv6 pod-cidr)."""
    with podman_on(agent_factory, dual_stack_agent_config()) as node:
        yield node


def container_id(pm, name):
    return pm("inspect", "--format", "{{.Id}}", name).stdout.strip()


def inside_ipv4(pm, name):
    """The IPv4 addresses (with prefix) on the container's eth0."""
    out = pm("exec", name, "ip", "-4", "addr", "show", "eth0").stdout
    return re.findall(r"inet (\S+)", out)


def inside_ipv6(pm, name):
    """The global IPv6 addresses (with prefix) on the container's eth0 (not its fe80:: one)."""
    out = pm("exec", name, "ip", "-6", "addr", "show", "eth0").stdout
    return [a for a in re.findall(r"inet6 (\S+)", out) if not a.startswith("fe80:")]


def inside_mac(pm, name):
    return pm("exec", name, "cat", "/sys/class/net/eth0/address").stdout.strip()


def pool_address(agent, host):
    """Address number host of the test's pod CIDR (a /24)."""
    return agent.sections["network"]["pod-cidr"].rsplit(".", 1)[0] + ".%d" % host


def test_run_exec_rm(podman_node):
    agent, pm = podman_node
    pm.run_container("alpha")
    cid = container_id(pm, "alpha")
    add = [c for c in pm.cni.calls("ADD") if c["containerID"] == cid]
    assert len(add) == 1, pm.cni.calls()
    # podman names the container but no Kubernetes namespace or UID: tracked all the same.
    assert add[0]["argmap"].get("K8S_POD_NAME") == "alpha"
    a = allocation_of(agent, cid)
    assert a and a["name"] == "alpha" and a["netns"] == add[0]["netns"], agent.status()
    assert inside_ipv4(pm, "alpha") == [a["ip"] + "/32"]
    assert "default via 169.254.1.1" in pm("exec", "alpha", "ip", "route").stdout
    assert ping(a["ip"]), "the host cannot reach the container"

    pm.run_container("beta")
    b = allocation_of(agent, container_id(pm, "beta"))
    assert b["ip"] != a["ip"] and allocated(agent) == 2
    assert ping_from(b["netns"], a["ip"]), "beta cannot reach alpha"
    assert ping_from(a["netns"], b["ip"]), "alpha cannot reach beta"

    pm("rm", "-f", "-t", "0", "alpha")
    assert allocation_of(agent, cid) is None and allocated(agent) == 1
    wait_until(lambda: a["hostIfname"] not in host_links(), timeout=10, desc="alpha's host veth gone")
    pm("rm", "-f", "-t", "0", "beta")
    assert allocated(agent) == 0
    assert agent_warnings(agent) == []


def test_host_port_through_the_chained_portmap(podman_node):
    agent, pm = podman_node
    host_port = 20000 + (os.getpid() + 7) % 20000
    pm.run_container("web", "-p", "127.0.0.1:%d:80" % host_port, command=("httpd", "-f", "-p", "80", "-h", "/www"))
    wait_http("127.0.0.1", host_port, HTTP_MARKER)
    ip = allocation_of(agent, container_id(pm, "web"))["ip"]
    nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout
    assert "--dport %d" % host_port in nat and ip in nat
    pm("rm", "-f", "-t", "0", "web")
    nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout
    assert "--dport %d" % host_port not in nat
    assert allocated(agent) == 0
    assert agent_warnings(agent) == []


def test_restart_rewires_without_leaking(podman_node):
    agent, pm = podman_node
    pm.run_container("again")
    cid = container_id(pm, "again")
    for _ in range(2):
        pm("restart", "-t", "0", "again")
        a = allocation_of(agent, cid)
        assert a and allocated(agent) == 1, agent.status()
        assert inside_ipv4(pm, "again") == [a["ip"] + "/32"]
        assert ping(a["ip"])
    assert len(pm.cni.calls("DEL")) >= 2 and len(pm.cni.calls("ADD")) == 3
    pm("rm", "-f", "-t", "0", "again")
    assert allocated(agent) == 0
    assert agent_warnings(agent) == []


def test_static_ip_is_honoured(podman_node):
    agent, pm = podman_node
    want = pool_address(agent, 77)
    pm.run_container("fixed", "--ip", want)
    add = pm.cni.calls("ADD")[-1]
    assert add["argmap"].get("IP") == want  # podman asks for it (CNI_ARGS IP=)
    assert inside_ipv4(pm, "fixed") == [want + "/32"]
    assert allocation_of(agent, container_id(pm, "fixed"))["ip"] == want


def test_static_ip_already_taken_fails_cleanly(podman_node):
    agent, pm = podman_node
    pm.run_container("first")
    taken = allocation_of(agent, container_id(pm, "first"))["ip"]
    r = pm.run_container("second", "--ip", taken, check=False)
    diag("podman run --ip %s (taken): %d %s" % (taken, r.returncode, r.stderr))
    assert r.returncode != 0 and taken in r.stderr, r
    assert allocated(agent) == 1


def test_static_ip_outside_the_pool_fails_cleanly(podman_node):
    agent, pm = podman_node
    r = pm.run_container("outside", "--ip", "192.0.2.7", check=False)
    diag("podman run --ip 192.0.2.7: %d %s" % (r.returncode, r.stderr))
    assert r.returncode != 0 and "192.0.2.7" in r.stderr, r
    assert allocated(agent) == 0


def test_mac_address_is_honoured(podman_node):
    agent, pm = podman_node
    pm.run_container("mac", "--mac-address", "02:42:ac:11:00:42")
    assert pm.cni.calls("ADD")[-1]["argmap"].get("MAC") == "02:42:ac:11:00:42"
    assert inside_mac(pm, "mac") == "02:42:ac:11:00:42"


def test_agent_down_during_rm_then_back_releases(podman_node):
    """podman rm while the agent is down: the DEL fails, podman removes the container anyway and
    never retries (and its libcni sends no GC). The agent, back, must find the attachment dead
    (namespace gone, container unknown) and release it."""
    agent, pm = podman_node
    pm.run_container("orphan")
    cid = container_id(pm, "orphan")
    a = allocation_of(agent, cid)
    agent.kill9()
    r = pm("rm", "-f", "-t", "0", "orphan", check=False)
    diag("podman rm with the agent down: %d %r" % (r.returncode, r.stderr))
    assert pm("ps", "-a", "-q").stdout.strip() == ""
    # Reconciliation runs at start and every reconcile-interval, for allocations older than
    # gc-grace (60s by default); shortened so the test need not wait a minute.
    agent.sections.setdefault("network", {}).update({"gc-grace": "1s", "reconcile-interval": "1s"})
    agent.write_config()
    agent.start()
    wait_until(lambda: allocated(agent) == 0, timeout=15, desc="the orphaned address released")
    assert a["ip"] not in [x["ip"] for x in allocations(agent)]


def test_dual_stack_container_has_and_answers_on_both_addresses(podman_dual_node):
    agent, pm = podman_dual_node
    pm.run_container("dual")
    a = allocation_of(agent, container_id(pm, "dual"))
    assert a and a.get("ip6"), agent.status()
    assert inside_ipv4(pm, "dual") == [a["ip"] + "/32"]
    assert inside_ipv6(pm, "dual") == [a["ip6"] + "/128"]
    assert "default via fe80::1 dev eth0" in pm("exec", "dual", "ip", "-6", "route").stdout
    assert pool_allocated(agent) == (1, 1)
    assert ping(a["ip"]) and ping6(a["ip6"]), "the host cannot reach the container over both families"
    pm("rm", "-f", "-t", "0", "dual")
    assert pool_allocated(agent) == (0, 0)
    assert not ping6(a["ip6"], timeout=1)
    assert agent_warnings(agent) == []



def test_dual_stack_static_addresses_are_honoured(podman_dual_node):
    """podman 4.3 passes one static address as CNI_ARGS IP=, and --ip with --ip6 as the ips
    capability (runtimeConfig "ips": both, without prefix; no IP= then); neither needs an ipam
    subnet in the conflist. --ip6 alone leaves the IPv4 address to the pool."""
    agent, pm = podman_dual_node
    v4, v6 = [ipaddress.ip_network(c.strip()) for c in agent.sections["network"]["pod-cidr"].split(",")]
    want6 = str(v6[0x66])
    pm.run_container("six", "--ip6", want6)
    assert pm.cni.calls("ADD")[-1]["argmap"].get("IP") == want6
    a = allocation_of(agent, container_id(pm, "six"))
    assert a["ip6"] == want6 and ipaddress.ip_address(a["ip"]) in v4, a
    assert inside_ipv6(pm, "six") == [want6 + "/128"]

    want4, want6 = str(v4[0x46]), str(v6[0x46])
    pm.run_container("both", "--ip", want4, "--ip6", want6)
    assert "IP" not in pm.cni.calls("ADD")[-1]["argmap"]
    assert inside_ipv4(pm, "both") == [want4 + "/32"] and inside_ipv6(pm, "both") == [want6 + "/128"]
    assert ping6(want6), "the host cannot reach the requested IPv6 address"
    assert pool_allocated(agent) == (2, 2)
    pm("rm", "-f", "-t", "0", "six", "both")
    assert pool_allocated(agent) == (0, 0)
    assert agent_warnings(agent) == []
