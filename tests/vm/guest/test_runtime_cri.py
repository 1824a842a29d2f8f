# SPDX-License-Identifier: MIT
"""containerd's CRI on a real node drives pinion-cni: piniond as the shipped unit starts it,
pinion-cni and the conflist where `make install` put them, containerd 1.6 (private dirs and
socket, runc with the systemd cgroup driver on cgroup v2) called over its CRI socket as the
kubelet calls it, the sandbox under its pod's kubepods slice, its network namespace where a stock
containerd puts it. The sandbox gets a pinion address the node reaches, containerd's restart keeps
it, StopPodSandbox releases it. (Under TCG a sandbox takes ~10 s to start or stop: one sandbox
here; two reaching each other, hostPort and the agent's kill are the host's
tests/integration/test_runtime_containerd.py.)"""

import json
import os
import sys

from conftest import api_json, run, start_agent, wait_for

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
from podnet_testlib import ping  # noqa: E402
from runtime_testlib import Containerd, pause_image, require_runtime  # noqa: E402

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
    ctrd = Containerd(systemd_cgroup=True, netns_under_state=False,
                      cni={"plugin": installed(PLUGINS), "conflist": installed(CONFLISTS)})
    try:
        ctrd.start()
        ctrd.import_image(pause_image(ctrd.dir))
        uid = "5f0c1c1e-7d1a-4c55-9c11-000000000001"
        sid = ctrd.run_sandbox("web", namespace="shop", uid=uid, cgroup_parent=pod_slice(uid))

        # The sandbox is where the kubelet's systemd driver puts it: a scope in the pod's slice.
        scope = "/kubepods.slice/kubepods-besteffort.slice/%s/cri-containerd-%s.scope" % (pod_slice(uid), sid)
        with open("/proc/%d/cgroup" % sandbox_pid(ctrd, sid)) as f:
            cgroup = f.read()
        assert scope in cgroup, cgroup

        a = allocations()[sid]
        assert (a["namespace"], a["name"], a["uid"]) == ("shop", "web", uid)
        assert a["netns"].startswith("/var/run/netns/") or a["netns"].startswith("/run/netns/"), a
        assert ctrd.cri.status(sid).status.network.ip == a["ip"]
        assert ping(a["ip"], timeout=10), "the node cannot reach the sandbox"

        ctrd.restart()
        assert ctrd.cri.status(sid).status.network.ip == a["ip"]
        assert ping(a["ip"], timeout=10), "the sandbox is unreachable after containerd's restart"

        ctrd.cri.stop(sid)
        assert allocations() == {}
        ctrd.cri.remove(sid)
        wait_for("the sandbox's scope gone", lambda: not os.path.exists("/sys/fs/cgroup" + scope), timeout=30)
    finally:
        ctrd.cleanup()
