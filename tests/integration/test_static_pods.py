# SPDX-License-Identifier: MIT
"""Static pods get identities: a process in the kubelet's cgroup for a static pod (named for its
config hash) is answered for the static pod's mirror pod, which the apiserver shows with another
uid, annotated kubernetes.io/config.mirror and owned by the Node; or for a pod of the agent's own
pods-dir carrying the config hash. A pod that merely carries the annotation, without the Node
owner or owned by another node, captures nothing."""

import os
import sys
import uuid

import pytest

from identity_testlib import cert_sans, key_matches, openssl_verify, request_from
from pinion_testlib import SRCDIR, make_pod, wait_until

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver  # noqa: E402
from kube_objects import make_pod as fake_pod  # noqa: E402

NODE = "test-node"
TOKEN = "s3cret-token-static"
TD = "example.org"
IDENTITY = {"pinion.io/identity": "true"}


def config_hash():
    """What the kubelet uses as a static pod's UID: 32 hex digits, no dashes."""
    return uuid.uuid4().hex


def mirror_pod(name, ns, sa, h, owner=NODE, node=NODE, container_id=None):
    pod = fake_pod(name, node=node, namespace=ns,
                   annotations=dict(IDENTITY, **{"kubernetes.io/config.mirror": h,
                                                  "kubernetes.io/config.hash": h,
                                                  "kubernetes.io/config.source": "file"}))
    pod["spec"]["serviceAccountName"] = sa
    if owner:
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": owner,
                                               "uid": str(uuid.uuid4()), "controller": True}]
    if container_id:
        pod["status"]["containerStatuses"] = [{"name": "main", "ready": True,
                                               "containerID": "containerd://" + container_id}]
    return pod


@pytest.fixture
def fake():
    f = FakeApiserver(tls=True, token=TOKEN).start()
    yield f
    f.stop()


def start_agent(agent_factory, fake, tmp_dir):
    token_file = os.path.join(tmp_dir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    a = agent_factory(start=False)
    a.sections["apiserver"] = {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
                               "backoff-initial": "100ms", "backoff-max": "1s"}
    a.sections["identity"] = {"signer": "local", "trust-domain": TD, "ca-dir": os.path.join(a.dir, "ca"),
                              "pod-tls-dir": os.path.join(a.dir, "pods-tls")}
    a.agent_keys["socket-mode"] = "0666"
    a.write_config()
    a.start()
    return a


def issued(a, name):
    return any(w["name"] == name and w["state"] == "issued" for w in a.get_json("/v1/identity")["workloads"])


def test_static_pod_is_answered_for_its_mirror_pod(agent_factory, fake, tmp_dir, pod_cgroups):
    h_etcd, h_nodeless, h_foreign, h_file = (config_hash() for _ in range(4))
    cg_etcd = pod_cgroups(h_etcd, hierarchy="pids")
    etcd = fake.add_pod(mirror_pod("etcd-test-node", "kube-system", "etcd", h_etcd,
                                   container_id=cg_etcd.container_id))
    fake.add_pod(fake_pod("web", node=NODE, annotations=IDENTITY))
    # Forged: the annotation without the kubelet's Node owner, and one owned by another node.
    fake.add_pod(mirror_pod("forged-nodeless", "default", "thief", h_nodeless, owner=None))
    fake.add_pod(mirror_pod("forged-foreign", "default", "thief", h_foreign, owner="other-node"))
    a = start_agent(agent_factory, fake, tmp_dir)
    # And a static pod from the agent's own pods-dir, told the kubelet's hash by its operator.
    a.write_pod("file", make_pod("file-pod", namespace="infra", service_account="filer",
                                 annotations=dict(IDENTITY, **{"kubernetes.io/config.hash": h_file})))
    for name in ("etcd-test-node", "web", "forged-nodeless", "forged-foreign", "file-pod"):
        wait_until(lambda: issued(a, name), timeout=15, desc="certificate for %s" % name)

    # The static pod's process, in the cgroup the kubelet names for the hash, gets the mirror
    # pod's identity (its uid is not the hash), as an ordinary user and as root.
    assert etcd["metadata"]["uid"] != h_etcd
    for uid in (65534, None):
        status, body = request_from(cg_etcd, a.socket, "/v1/identity", uid=uid)
        assert status == 200, body
        assert body["id"] == "spiffe://%s/ns/kube-system/sa/etcd" % TD
        assert cert_sans(body["certificate"])[-1] == "URI:" + body["id"]
        assert key_matches(body["certificate"], body["private_key"])
        openssl_verify(body["certificate"], body["bundle"])
    # ... and nothing of another pod.
    status, body = request_from(cg_etcd, a.socket, "/v1/identity?pod=default/web")
    assert status == 403 and "private_key" not in str(body), body
    # A process of the static pod in no container its mirror pod lists is not the pod.
    other_container = pod_cgroups(h_etcd, hierarchy="pids")
    status, body = request_from(other_container, a.socket, "/v1/identity", uid=65534)
    assert status == 403 and "containers" in body["error"], body

    # A pod that names a hash in config.mirror without being the node's mirror pod captures
    # nothing: the process of that hash is in a pod this node does not know.
    for h in (h_nodeless, h_foreign):
        status, body = request_from(pod_cgroups(h, hierarchy="pids"), a.socket, "/v1/identity", uid=65534)
        assert status == 403 and "not on this node" in body["error"], body

    # The pods-dir static pod, by its hash, in the v2 line's systemd spelling.
    cg_file = pod_cgroups(h_file, hierarchy="unified", systemd=True)
    status, body = request_from(cg_file, a.socket, "/v1/identity", uid=65534)
    assert status == 200, body
    assert body["id"] == "spiffe://%s/ns/infra/sa/filer" % TD

    # The mirror pod goes (the static pod removed): its process is nobody again.
    fake.delete_pod("kube-system", "etcd-test-node")
    wait_until(lambda: not any(p["name"] == "etcd-test-node" for p in a.get_json("/v1/pods")["pods"]),
               timeout=10, desc="mirror pod gone")
    status, body = request_from(cg_etcd, a.socket, "/v1/identity", uid=65534)
    assert status == 403, body


def test_a_mirror_annotation_cannot_capture_a_real_pod(agent_factory, fake, tmp_dir, pod_cgroups):
    """A pod annotated with another pod's UID as config.mirror (even Node-owned) does not take
    that pod's processes: a pod found by its own UID is always itself."""
    a = start_agent(agent_factory, fake, tmp_dir)
    victim = fake.add_pod(fake_pod("victim", node=NODE, annotations=IDENTITY))
    vuid = victim["metadata"]["uid"]
    fake.add_pod(mirror_pod("thief", "default", "thief", vuid))
    wait_until(lambda: issued(a, "victim") and issued(a, "thief"), timeout=15, desc="certificates")
    status, body = request_from(pod_cgroups(vuid, hierarchy="pids"), a.socket, "/v1/identity", uid=65534)
    assert status == 200, body
    assert body["id"] == "spiffe://%s/ns/default/sa/default" % TD
