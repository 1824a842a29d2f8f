# SPDX-License-Identifier: MIT
"""containerd's CRI on a real node drives pinion-cni: piniond as the shipped unit starts it,
pinion-cni and the conflist where `make install` put them, containerd 1.6 (private dirs and
socket, runc with the systemd cgroup driver on cgroup v2) called over its CRI socket as the
kubelet calls it, each sandbox under its pod's kubepods slice. The sandboxes get pinion addresses
the node and each other reach, containerd's restart keeps them, StopPodSandbox releases them."""

import json
import os
import sys

from conftest import api_json, run, start_agent, wait_for

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
from podnet_testlib import ping  # noqa: E402
from runtime_testlib import Containerd, pause_image, ping_from, require_runtime  # noqa: E402

POD_CIDR = "10.244.9.0/24"
# The node's own address its pods answer to (the guest has loopback only).
NODE_ADDRESS = "192.0.2.11/32"
CONFLISTS = ("/etc/cni/net.d/10-pinion.conflist",)
PLUGINS = ("/usr/lib/cni/pinion-cni", "/usr/libexec/cni/pinion-cni", "/opt/cni/bin/pinion-cni")


def installed(paths):
    found = [p for p in paths if os.path.exists(p)]
    assert found, "none of %s installed" % (paths,)
    return found[0]


def allocations():
    pool = next(m for m in api_json("/v1/status")["modules"] if m["name"] == "podnet")["details"]["pool"]
    return {a["containerID"]: a for a in pool["allocations"]}


def pod_slice(uid):
    return "kubepods-besteffort-pod%s.slice" % uid.replace("-", "_")


def sandbox_pid(ctrd, sid):
    return json.loads(ctrd.cri.status(sid, verbose=True).info["info"])["pid"]


def test_cri_sandboxes_on_a_systemd_node(node):
    require_runtime("containerd")
    run("ip", "addr", "add", NODE_ADDRESS, "dev", "lo")
    node.on_cleanup(lambda: run("ip", "addr", "del", NODE_ADDRESS, "dev", "lo", check=False))
    node.conf("50-vm-cri.conf", "[network]\npod-cidr=%s\naddress-quarantine=0s\n" % POD_CIDR)
    start_agent()
    ctrd = Containerd(systemd_cgroup=True, cni={"plugin": installed(PLUGINS), "conflist": installed(CONFLISTS)})
    try:
        ctrd.start()
        ctrd.import_image(pause_image(ctrd.dir))
        uids = ["5f0c1c1e-7d1a-4c55-9c11-00000000000%d" % i for i in (1, 2)]
        s1 = ctrd.run_sandbox("web", namespace="shop", uid=uids[0], cgroup_parent=pod_slice(uids[0]))
        s2 = ctrd.run_sandbox("db", namespace="shop", uid=uids[1], cgroup_parent=pod_slice(uids[1]))

        # The sandbox is where the kubelet's systemd driver puts it: a scope in the pod's slice.
        with open("/proc/%d/cgroup" % sandbox_pid(ctrd, s1)) as f:
            cgroup = f.read()
        assert "/kubepods.slice/kubepods-besteffort.slice/%s/cri-containerd-%s.scope" % (pod_slice(uids[0]), s1) \
            in cgroup, cgroup

        allocs = allocations()
        a1, a2 = allocs[s1], allocs[s2]
        assert (a1["namespace"], a1["name"], a1["uid"]) == ("shop", "web", uids[0])
        assert ctrd.cri.status(s1).status.network.ip == a1["ip"]
        assert ping(a1["ip"], timeout=10), "the node cannot reach sandbox 1"
        assert ping_from(ctrd.netns(s2), a1["ip"], timeout=10), "sandbox 2 cannot reach sandbox 1"

        ctrd.restart()
        assert ctrd.cri.status(s2).status.network.ip == a2["ip"]
        assert ping(a2["ip"], timeout=10), "sandbox 2 unreachable after containerd's restart"

        for sid in (s1, s2):
            ctrd.cri.stop(sid)
            ctrd.cri.remove(sid)
        assert allocations() == {}
        wait_for("the sandboxes' scopes gone", lambda: not any(
            os.path.exists("/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/%s/cri-containerd-%s.scope"
                           % (pod_slice(u), s)) for u, s in zip(uids, (s1, s2))), timeout=30)
    finally:
        ctrd.cleanup()
