# SPDX-License-Identifier: MIT
"""containerd 1.6 with its CRI plugin drives pinion-cni, called over its CRI gRPC socket as the
kubelet calls it (RunPodSandbox, PodSandboxStatus, StopPodSandbox, RemovePodSandbox,
ListPodSandbox), with the shipped conflist (pinion-cni chained with the reference portmap) pointed
at a piniond the test started. containerd runs privately (runtime_testlib.Containerd: its own
dirs and sockets); its sandboxes run a static pause binary built here. Single-stack and
dual-stack (IPv4 and IPv6 pod-cidr) agents. Everything is removed at teardown, also when a test
fails."""

import contextlib
import os
import subprocess
import threading
import time

import pytest

from pinion_testlib import diag, wait_until
from podnet_testlib import PYTHON, host_links, ping, ping6
from runtime_testlib import (Containerd, agent_warnings, allocated, allocation_of, dual_stack_agent_config,
                             pause_image, ping_from, podnet_agent_config, pool_allocated, require_runtime,
                             wait_http)


@contextlib.contextmanager
def containerd_node(agent_factory, config):
    """(agent, containerd): a piniond with podnet configured by config and a private containerd
    whose CRI plugin uses the shipped conflist against it, the pause image imported."""
    require_runtime("containerd")
    agent = agent_factory(config=config)
    ctrd = Containerd(agent.socket)
    try:
        ctrd.start()
        ctrd.import_image(pause_image(ctrd.dir))
        yield agent, ctrd
    finally:
        ctrd.cleanup()


@pytest.fixture
def cri_node(agent_factory):
    with containerd_node(agent_factory, podnet_agent_config()) as node:
        yield node


@pytest.fixture
def cri_dual_node(agent_factory):
    """cri_node on a dual-stack agent (an IPv4 and an IPv6 pod-cidr)."""
    with containerd_node(agent_factory, dual_stack_agent_config()) as node:
        yield node


def sandbox_ip(ctrd, sid):
    return ctrd.cri.status(sid).status.network.ip


def test_sandboxes_get_reachable_pinion_addresses_with_their_pod_metadata(cri_node):
    agent, ctrd = cri_node
    s1 = ctrd.run_sandbox("web", namespace="shop", uid="uid-web-1")
    s2 = ctrd.run_sandbox("db", namespace="shop", uid="uid-db-1")

    # What containerd passed pinion-cni: the pod's namespace, name, UID and the infra container.
    adds = {c["containerID"]: c for c in ctrd.cni.calls("ADD")}
    assert set(adds) == {s1, s2}, ctrd.cni.calls()
    args = adds[s1]["argmap"]
    assert args["K8S_POD_NAMESPACE"] == "shop" and args["K8S_POD_NAME"] == "web", args
    assert args["K8S_POD_UID"] == "uid-web-1" and args["K8S_POD_INFRA_CONTAINER_ID"] == s1, args
    assert adds[s1]["ifname"] == "eth0" and adds[s1]["netns"] == ctrd.netns(s1)

    # The agent's record of the attachment carries the same, and CRI reports its address.
    a1, a2 = allocation_of(agent, s1), allocation_of(agent, s2)
    assert a1 and a2, agent.status()
    assert (a1["namespace"], a1["name"], a1["uid"]) == ("shop", "web", "uid-web-1")
    assert (a2["namespace"], a2["name"], a2["uid"]) == ("shop", "db", "uid-db-1")
    assert a1["netns"] == ctrd.netns(s1)
    assert sandbox_ip(ctrd, s1) == a1["ip"] and sandbox_ip(ctrd, s2) == a2["ip"]
    assert allocated(agent) == 2

    # Reachable from the host and from the other sandbox.
    assert ping(a1["ip"]), "the host cannot reach sandbox 1"
    assert ping_from(ctrd.netns(s2), a1["ip"]), "sandbox 2 cannot reach sandbox 1"
    assert ping_from(ctrd.netns(s1), a2["ip"]), "sandbox 1 cannot reach sandbox 2"

    # StopPodSandbox releases the address (the DEL reaches pinion-cni), RemovePodSandbox the rest.
    ctrd.cri.stop(s1)
    assert allocation_of(agent, s1) is None and allocated(agent) == 1
    assert any(c["containerID"] == s1 for c in ctrd.cni.calls("DEL"))
    wait_until(lambda: a1["hostIfname"] not in host_links(), timeout=10, desc="sandbox 1's host veth gone")
    assert not ping(a1["ip"], timeout=1)
    ctrd.cri.remove(s1)
    ctrd.cri.stop(s2)
    ctrd.cri.remove(s2)
    assert allocated(agent) == 0
    assert [s.id for s in ctrd.cri.list()] == []
    assert agent_warnings(agent) == []


def test_dual_stack_sandboxes_report_and_reach_both_addresses(cri_dual_node):
    """On a dual-stack agent a sandbox gets a /32 and a /128: PodSandboxStatus reports the IPv4
    one as network.ip and the IPv6 one in network.additional_ips (containerd orders a CNI
    result's addresses that way, as the kubelet expects); the host and the other sandbox reach
    both; StopPodSandbox releases both."""
    agent, ctrd = cri_dual_node
    s1 = ctrd.run_sandbox("web6", uid="uid-web6")
    s2 = ctrd.run_sandbox("db6", uid="uid-db6")
    a1, a2 = allocation_of(agent, s1), allocation_of(agent, s2)
    assert a1 and a2 and a1.get("ip6") and a2.get("ip6"), agent.status()
    assert pool_allocated(agent) == (2, 2)

    net = ctrd.cri.status(s1).status.network
    assert net.ip == a1["ip"], net
    assert [x.ip for x in net.additional_ips] == [a1["ip6"]], net

    assert ping(a1["ip"]) and ping6(a1["ip6"]), "the host cannot reach sandbox 1 over both families"
    assert ping_from(ctrd.netns(s2), a1["ip6"]), "sandbox 2 cannot reach sandbox 1 over IPv6"
    assert ping_from(ctrd.netns(s1), a2["ip6"]), "sandbox 1 cannot reach sandbox 2 over IPv6"

    ctrd.cri.stop(s1)
    assert allocation_of(agent, s1) is None and pool_allocated(agent) == (1, 1)
    assert not ping6(a1["ip6"], timeout=1)
    ctrd.cri.stop(s2)
    assert pool_allocated(agent) == (0, 0)
    for sid in (s1, s2):
        ctrd.cri.remove(sid)
    assert agent_warnings(agent) == []


def test_host_port_through_the_chained_portmap(cri_node, tmp_dir):
    agent, ctrd = cri_node
    host_port = 20000 + os.getpid() % 20000
    sid = ctrd.run_sandbox("front", ports=[(host_port, 8080)])
    with open(os.path.join(tmp_dir, "index.html"), "w") as f:
        f.write("served from the sandbox\n")
    server = subprocess.Popen(["nsenter", "--net=" + ctrd.netns(sid), PYTHON, "-m", "http.server", "8080",
                               "--bind", "0.0.0.0", "--directory", tmp_dir],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # The mapping is on 127.0.0.1: portmap's DNAT for locally generated traffic.
        wait_http("127.0.0.1", host_port, "served from the sandbox")
        nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout
        assert "--dport %d" % host_port in nat and allocation_of(agent, sid)["ip"] in nat
    finally:
        server.kill()
        server.wait()
    ctrd.cri.stop(sid)
    ctrd.cri.remove(sid)
    nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout
    assert "--dport %d" % host_port not in nat
    assert allocated(agent) == 0
    assert agent_warnings(agent) == []


def test_containerd_restart_keeps_the_address_and_stop_after_it_releases(cri_node):
    agent, ctrd = cri_node
    sid = ctrd.run_sandbox("kept", uid="uid-kept")
    ip = sandbox_ip(ctrd, sid)
    ctrd.restart()
    st = ctrd.cri.status(sid).status
    assert st.state == ctrd.cri.pb.SANDBOX_READY and st.network.ip == ip
    assert allocation_of(agent, sid)["ip"] == ip and allocated(agent) == 1
    assert ping(ip), "the sandbox is unreachable after containerd's restart"
    ctrd.cri.stop(sid)
    assert allocated(agent) == 0
    ctrd.cri.remove(sid)
    assert [s.id for s in ctrd.cri.list()] == []
    assert agent_warnings(agent) == []


def test_agent_killed_during_stop_then_back_nothing_leaks(cri_node):
    """kill -9 of the agent while StopPodSandbox is under way (the sandbox's process stopped, its
    DEL issued, held at pinion-cni's door until the agent is dead): that Stop fails, and so does
    a retry while the agent is away, releasing nothing behind its back; the kubelet retries Stop
    until it succeeds, which it does once the agent is back; then nothing is left: no
    allocation, no host veth, no namespace."""
    agent, ctrd = cri_node
    sid = ctrd.run_sandbox("victim", uid="uid-victim")
    a = allocation_of(agent, sid)
    netns = ctrd.netns(sid)
    result = {}

    def stop():
        try:
            ctrd.cri.stop(sid)
            result["ok"] = True
        except ctrd.cri.grpc.RpcError as e:
            result["error"] = e.details()

    ctrd.cni.hold("DEL")
    t = threading.Thread(target=stop)
    try:
        t.start()
        wait_until(lambda: ctrd.cni.calls("DEL"), timeout=30, desc="StopPodSandbox's DEL")
        agent.kill9()
    finally:
        ctrd.cni.hold("DEL", False)
    t.join(120)
    assert not t.is_alive()
    assert "pinion agent is not reachable" in result.get("error", ""), result
    with pytest.raises(ctrd.cri.grpc.RpcError):
        ctrd.cri.stop(sid)
    agent.start()
    # The address survived the agent's death (crash-safe state) until the retried Stop.
    assert allocation_of(agent, sid)["ip"] == a["ip"]
    ctrd.cri.stop(sid)  # the kubelet's retry
    ctrd.cri.remove(sid)
    assert allocated(agent) == 0, agent.status()
    wait_until(lambda: a["hostIfname"] not in host_links(), timeout=10, desc="the host veth gone")
    assert not os.path.exists(netns)
    assert [s.id for s in ctrd.cri.list()] == []


def test_agent_killed_as_its_del_runs_then_back_nothing_leaks(cri_node):
    """kill -9 of the agent the moment StopPodSandbox's DEL is let through: the DEL may or may not
    have been answered (both happen); whichever, retried Stops with the agent back leave nothing."""
    agent, ctrd = cri_node
    sid = ctrd.run_sandbox("racer", uid="uid-racer")
    a = allocation_of(agent, sid)
    result = {}

    def stop():
        try:
            ctrd.cri.stop(sid)
            result["ok"] = True
        except ctrd.cri.grpc.RpcError as e:
            result["error"] = e.details()

    ctrd.cni.hold("DEL")
    t = threading.Thread(target=stop)
    try:
        t.start()
        wait_until(lambda: ctrd.cni.calls("DEL"), timeout=30, desc="StopPodSandbox's DEL")
    finally:
        ctrd.cni.hold("DEL", False)
    time.sleep(0.06)  # the recorder polls every 50 ms: the plugin is starting or talking
    agent.kill9()
    t.join(120)
    diag("StopPodSandbox with the agent killed as its DEL ran: %r" % result)
    agent.start()
    ctrd.cri.stop(sid)
    ctrd.cri.remove(sid)
    assert allocated(agent) == 0, agent.status()
    wait_until(lambda: a["hostIfname"] not in host_links(), timeout=10, desc="the host veth gone")
