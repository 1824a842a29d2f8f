# SPDX-License-Identifier: MIT
"""A pod's network on a real node: piniond started as the shipped unit starts it (sandboxed,
socket-activated), a pod from pods-dir, a network namespace made with `ip netns add` after the
agent is up (as a runtime makes one per sandbox), and pinion-cni run as a runtime runs it (CNI_*
environment, the network config on stdin, the pod in CNI_ARGS). The host reaches the pod's
address; CHECK passes; DEL undoes everything."""

import ipaddress
import json
import os
import subprocess
import sys
import uuid

from conftest import api, run, start_agent, wait_for
from kubepods import Pod, agent_capabilities, remove_pods, write_pods

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
from podnet_testlib import ping  # noqa: E402

POD_CIDR = "10.244.7.0/24"
# The guest has loopback only (-nic none); a node has an address its pods answer to, else the
# host's echo requests leave without a source address.
NODE_ADDRESS = "192.0.2.10/32"
CNI = "/usr/lib/cni/pinion-cni"
NETCONF = {"cniVersion": "1.1.0", "name": "pinion", "type": "pinion-cni"}


def cni(command, container_id, netns=None, args=None, conf=None):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command, "CNI_CONTAINERID": container_id,
           "CNI_IFNAME": "eth0", "CNI_PATH": "/usr/lib/cni"}
    if netns:
        env["CNI_NETNS"] = netns
    if args:
        env["CNI_ARGS"] = args
    p = subprocess.run([CNI], input=json.dumps(conf or NETCONF), env=env, capture_output=True, text=True, timeout=60)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


def host_links():
    return [line.split(":")[1].strip().split("@")[0]
            for line in run("ip", "-o", "link", "show").stdout.splitlines()]


def test_cni_add_check_del_in_a_netns(node):
    pod = Pod("web", "burstable")
    paths = write_pods([pod])
    netns = "cni-%s" % uuid.uuid4()
    container = uuid.uuid4().hex + uuid.uuid4().hex
    args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=%s" % pod.uid
    run("ip", "addr", "add", NODE_ADDRESS, "dev", "lo")
    try:
        node.conf("50-vm-network.conf", "[network]\npod-cidr=%s\n" % POD_CIDR)
        start_agent()
        # The unit's system call filter lets piniond drop what it does not need, and what it
        # keeps is enough to wire a pod.
        assert agent_capabilities() == {"CAP_NET_ADMIN", "CAP_SYS_ADMIN"}
        wait_for("the pod in the store", lambda: api("/v1/pods/default/web")[0] == 200, timeout=30)
        run("ip", "netns", "add", netns)
        path = "/var/run/netns/" + netns

        rc, add, err = cni("ADD", container, path, args)
        assert rc == 0, (add, err)
        ip = add["ips"][0]["address"].split("/")[0]
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(POD_CIDR)
        host_if = add["interfaces"][0]["name"]
        assert host_if in host_links()
        inside = run("ip", "netns", "exec", netns, "ip", "-4", "addr", "show", "eth0").stdout
        assert ip + "/32" in inside
        assert ping(ip, timeout=10), "the host cannot reach the pod at " + ip
        status, body = api("/v1/pods/default/web")
        assert json.loads(body)["ips"] == [ip]

        rc, out, err = cni("CHECK", container, path, args, conf=dict(NETCONF, prevResult=add))
        assert rc == 0, (out, err)

        for _ in range(2):  # DEL is idempotent
            rc, out, err = cni("DEL", container, path, args)
            assert rc == 0 and out is None, (out, err)
        wait_for("the host end gone", lambda: host_if not in host_links(), timeout=10)
        assert ip not in run("ip", "-4", "route", "show").stdout
        assert "eth0" not in run("ip", "netns", "exec", netns, "ip", "link").stdout
        wait_for("the pod's address released", lambda: not json.loads(api("/v1/pods/default/web")[1]).get("ips"),
                 timeout=10)
    finally:
        cni("DEL", container, None, args)
        run("ip", "netns", "del", netns, check=False)
        run("ip", "addr", "del", NODE_ADDRESS, "dev", "lo", check=False)
        remove_pods(paths)
    assert netns not in run("ip", "netns", "list").stdout
