# SPDX-License-Identifier: MIT
"""No private key is reachable from another pod: a root process in a mount namespace that sees
exactly the hostPath volumes of the shipped example workload (units/kubernetes/
example-workload.yaml, read from the file), with the host's /run/pinion standing for an agent's
runtime dir, walks everything it can reach and finds no key.pem and no PEM private key, while the
agent holds pod B's key under its default pod-tls-dir. The control: the old layout (all of
/run/pinion mounted into the pod) hands the pod <runtime-dir>/pods/<B>/key.pem."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from identity_testlib import new_uid
from pinion_testlib import SRCDIR, clean_env, make_pod, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces)")

MANIFEST = os.path.join(SRCDIR, "units", "kubernetes", "example-workload.yaml")
HOST_RUN = "/run/pinion"

# Runs as root in its own mount namespace: builds the pod's filesystem view on a tmpfs from the
# volumes (host path, mount path, read-only), then reads every file reachable in it.
_POD = r"""
import json, os, stat, subprocess, sys
view, volumes = sys.argv[1], json.loads(sys.argv[2])
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
subprocess.run(["mount", "-t", "tmpfs", "pod-root", view], check=True)
for src, dst, ro in volumes:
    target = os.path.join(view, dst.lstrip("/"))
    os.makedirs(target, exist_ok=True)
    subprocess.run(["mount", "--bind", src, target], check=True)
    if ro:
        subprocess.run(["mount", "-o", "remount,bind,ro", target], check=True)
# From here on the process sees what the pod sees: an absolute symlink resolves in the view.
os.chroot(view)
os.chdir("/")
files, keys = 0, []
for d, dirs, names in os.walk("/"):
    for n in names:
        p = os.path.join(d, n)
        # Symlinks too (key.pem -> ..data/key.pem): as the pod resolves them, inside its view.
        try:
            st = os.stat(p)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        files += 1
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if n == "key.pem" or b"PRIVATE KEY-----" in data:
            keys.append([p, data.decode(errors="replace")])
print(json.dumps({"files": files, "keys": keys}))
"""


def manifest_volumes(path=MANIFEST):
    """(host path, mountPath, readOnly) of every volume of the agent's a container of the pod
    mounts: a hostPath, or an inline volume of pinion's CSI driver, which is the sockets
    directory bind-mounted read-only whatever the pod asks (modules/csi/csi-mount.c)."""
    with open(path) as f:
        pod = yaml.safe_load(f)
    host, forced_ro = {}, set()
    for v in pod["spec"].get("volumes", []):
        if "hostPath" in v:
            host[v["name"]] = v["hostPath"]["path"]
        elif v.get("csi", {}).get("driver") == "csi.pinion.dev":
            host[v["name"]] = HOST_RUN + "/sockets"
            forced_ro.add(v["name"])
    out = []
    for c in pod["spec"]["containers"]:
        for m in c.get("volumeMounts", []):
            if m["name"] in host:
                out.append((host[m["name"]], m["mountPath"], bool(m.get("readOnly")) or m["name"] in forced_ro))
    return out


def on_this_host(path, runtime_dir):
    """The host path of a manifest's volume for a test agent, whose runtime dir stands for
    /run/pinion."""
    assert path == HOST_RUN or path.startswith(HOST_RUN + "/"), "unexpected hostPath %s" % path
    return runtime_dir + path[len(HOST_RUN):]


def walk_as_pod(tmp_dir, volumes):
    view = os.path.join(tmp_dir, "pod-view")
    os.makedirs(view, exist_ok=True)
    p = subprocess.run(["unshare", "-m", sys.executable, "-c", _POD, view, json.dumps(volumes)],
                       capture_output=True, text=True, env=clean_env(), timeout=120)
    assert p.returncode == 0, p
    return json.loads(p.stdout.strip().splitlines()[-1])


def agent_with_two_pods(agent_factory, ca_dir):
    """The shipped layout: sockets in <runtime-dir>/sockets, pod TLS files in the default place
    relative to the runtime dir (<runtime-dir>/pods, /run/pinion/pods in production)."""
    a = agent_factory(start=False)
    a.sockets_dir = os.path.join(a.runtime_dir, "sockets")
    a.socket = os.path.join(a.sockets_dir, "pinion.sock")
    a.agent_keys["socket"] = a.socket
    a.sections["identity"] = {"signer": "local", "trust-domain": "exposure.test", "ca-dir": ca_dir,
                              "pod-tls-dir": os.path.join(a.runtime_dir, "pods")}
    a.write_config()
    a.start()
    ua, ub = new_uid(), new_uid()
    for name, uid in (("a", ua), ("b", ub)):
        a.write_pod(name, make_pod(name, uid=uid, annotations={"pinion.io/identity": "true"}))
    key_b = os.path.join(a.runtime_dir, "pods", ub, "key.pem")
    wait_until(lambda: os.path.exists(key_b), timeout=20, desc="pod b's key written")
    with open(key_b) as f:
        return a, ub, f.read()


def test_the_example_workload_reaches_no_key(agent_factory, tmp_dir):
    volumes = manifest_volumes()
    assert volumes, "the example workload mounts nothing of the agent's"
    a, _, key_b = agent_with_two_pods(agent_factory, os.path.join(tmp_dir, "ca"))
    assert "PRIVATE KEY" in key_b
    seen = walk_as_pod(tmp_dir, [(on_this_host(src, a.runtime_dir), dst, ro) for src, dst, ro in volumes])
    assert seen["keys"] == [], [k[0] for k in seen["keys"]]


def test_old_layout_exposed_every_pods_key(agent_factory, tmp_dir):
    """The control: the volume the DaemonSet and workloads used to mount, all of /run/pinion."""
    a, ub, key_b = agent_with_two_pods(agent_factory, os.path.join(tmp_dir, "ca"))
    seen = walk_as_pod(tmp_dir, [(on_this_host(HOST_RUN, a.runtime_dir), HOST_RUN, True)])
    exposed = dict(seen["keys"])
    path_b = "/run/pinion/pods/%s/key.pem" % ub
    assert path_b in exposed and exposed[path_b] == key_b, sorted(exposed)
