# SPDX-License-Identifier: MIT
"""Peer attestation on a real node: pods laid out by the kubelet's systemd cgroup driver
(kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope,
made by systemd itself as transient units) under cgroup v2, and piniond started as the shipped
unit starts it, sandbox and socket activation included. A process of a pod gets its own pod's
certificate and key and reads only the configs its pod declares; a process of another pod gets
its own and never the first's; a process outside every pod is an outsider."""

import functools
import http.server
import json
import os
import shutil
import stat
import sys
import threading

import pytest

from conftest import SOCKET, Node, api, start_agent, wait_for
from kubepods import (QOS_CLASSES, Pod, agent_capabilities, pod_cgroup, remove_pods, request_in_pod, request_outside,
                      stop_kubepods, write_pods)

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
import configsync_testlib as cs  # noqa: E402
import identity_testlib as it  # noqa: E402

TRUST_DOMAIN = "example.org"
# Pod processes run as users of their own, as containers do; the outsider is another one.
POD_USER = {"guaranteed": 40201, "burstable": 40202, "besteffort": 40203}
OUTSIDER = 40299
# What the agent reads and the test writes: not below /tmp (the unit has PrivateTmp=yes) nor
# /root (ProtectHome=yes).
FIXTURES = "/var/lib/pinion-vm-pods"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class BundleServer:
    """Config bundles over HTTP on a loopback port, served from a directory by a thread."""

    def __init__(self, root):
        handler = functools.partial(QuietHandler, directory=root)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return "http://127.0.0.1:%d/%s" % (self.port, path)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def world():
    """One agent for this file: identity with the local signer, two signed config bundles, and a
    pod of each QoS class in pods-dir (the guaranteed one declares config a, the burstable one
    config b, the besteffort one none), started with systemctl start piniond."""
    node, server, paths = Node(), None, []
    pods = {
        "guaranteed": Pod("pod-g", "guaranteed", annotations={"pinion.io/identity": "true", "pinion.io/configs": "a"}),
        "burstable": Pod("pod-b", "burstable", annotations={"pinion.io/identity": "true", "pinion.io/configs": "b"}),
        "besteffort": Pod("pod-e", "besteffort", annotations={"pinion.io/identity": "true"}),
    }
    try:
        shutil.rmtree(FIXTURES, ignore_errors=True)
        os.makedirs(FIXTURES)
        www = os.path.join(FIXTURES, "www")
        key, pub = cs.ed25519_keypair(FIXTURES)
        server = BundleServer(www)
        cs.write_bundle(www, "a", {"app.yaml": b"config: a\n"}, "a-1", sign_key=key)
        cs.write_bundle(www, "b", {"app.yaml": b"config: b\n"}, "b-1", sign_key=key)
        paths = write_pods(pods.values())
        node.conf("50-vm-pods.conf",
                  "[agent]\nsocket-mode=0666\n\n"
                  "[identity]\nsigner=local\ntrust-domain=%s\nca-dir=/var/lib/pinion/ca\n\n" % TRUST_DOMAIN +
                  "".join("[config.%s]\nurl=%s\npublic-key=%s\ndest=/var/lib/pinion/configs/%s\n\n"
                          % (n, server.url(n + "/manifest.json"), pub, n) for n in ("a", "b")))
        start_agent()
        wait_for("the pods in the agent's store", lambda: json.loads(api("/v1/pods")[1])["count"] == len(pods),
                 timeout=30)
        wait_for("every pod's certificate", lambda: [w["state"] for w in json.loads(api("/v1/identity")[1])["workloads"]]
                 == ["issued"] * len(pods), timeout=60)
        yield pods
    finally:
        node.cleanup()
        remove_pods(paths)
        if server:
            server.close()
        shutil.rmtree(FIXTURES, ignore_errors=True)


def test_containers_land_where_the_systemd_driver_puts_them():
    """The layout this file relies on is systemd's own nesting of the kubelet's slice names: the
    container's scope below its pod's slice below its QoS class's slice (none for guaranteed)."""
    for qos in QOS_CLASSES:
        pod = Pod("layout", qos)
        try:
            p = pod.run("cat", "/proc/self/cgroup", check=True)
            lines = p.stdout.splitlines()
            assert len(lines) == 1 and lines[0].startswith("0::" + pod_cgroup(qos, pod.uid) + "/cri-containerd-"), lines
            assert lines[0].endswith(".scope"), lines
        finally:
            stop_kubepods()


def test_the_unit_lets_the_agent_drop_the_capabilities_it_does_not_need(world):
    """What configsync needs of what the unit grants (CAP_KILL; identity needs nothing),
    nothing of the network's: the unit's system call filter must let piniond drop the rest."""
    assert agent_capabilities() == {"CAP_KILL"}


def test_socket_mode_applies_to_the_socket_the_unit_passes_in(world):
    """piniond.socket makes the socket 0660; [agent] socket-mode=0666, which lets pods' non-root
    processes connect, is set on it once piniond runs."""
    assert stat.S_IMODE(os.stat(SOCKET).st_mode) == 0o666


@pytest.mark.parametrize("qos", QOS_CLASSES)
def test_a_pod_process_gets_its_own_identity(world, qos):
    pod = world[qos]
    status, got = request_in_pod(pod, "/v1/identity", user=POD_USER[qos])
    assert status == 200, got
    want = "spiffe://%s/ns/%s/sa/%s" % (TRUST_DOMAIN, pod.namespace, pod.service_account)
    assert got["id"] == want
    assert "URI:" + want in it.cert_sans(got["certificate"])
    assert it.key_matches(got["certificate"], got["private_key"])
    it.openssl_verify(got["certificate"], got["bundle"])


def test_pods_never_get_each_others_identity(world):
    """Each pod's processes, asking the same question, get their own pod's certificate only; a
    second container of the same pod gets the same one."""
    ids = {}
    for qos, pod in world.items():
        status, first = request_in_pod(pod, "/v1/identity", user=POD_USER[qos])
        assert status == 200, first
        status, second = request_in_pod(pod, "/v1/identity", user=POD_USER[qos])
        assert status == 200 and first["certificate"] == second["certificate"], second
        ids[qos] = (first["id"], first["certificate"], first["private_key"])
    assert len({i for i, _, _ in ids.values()}) == len(world)
    assert len({c for _, c, _ in ids.values()}) == len(world)
    assert len({k for _, _, k in ids.values()}) == len(world)
    # Asking about another pod by name is refused, whoever the other is.
    status, _ = request_in_pod(world["guaranteed"], "/v1/identity?pod=default/pod-b", user=POD_USER["guaranteed"])
    assert status == 403


def test_root_in_a_pod_is_still_that_pod(world):
    """Root inside a container (no user namespace) is its pod, not the host: /v1/identity answers
    with its own pod, and the host's routes refuse it."""
    pod = world["burstable"]
    status, got = request_in_pod(pod, "/v1/identity")
    assert status == 200, got
    assert got["id"].endswith("/sa/" + pod.service_account) and "private_key" in got
    for path in ("/v1/status", "/v1/pods", "/v1/identity?pod=default/pod-g"):
        status, got = request_in_pod(pod, path)
        assert status == 403, (path, got)


def test_a_host_process_outside_every_pod_is_an_outsider(world):
    status, got = request_outside("/v1/identity", user=OUTSIDER)
    assert status == 403, got
    status, got = request_outside("/v1/configs", user=OUTSIDER)
    assert status == 403, got
    # Public routes answer everyone.
    assert request_outside("/v1/health", user=OUTSIDER)[0] == 200
    status, bundle = request_outside("/v1/identity/bundle", user=OUTSIDER)
    assert status == 200 and "BEGIN CERTIFICATE" in bundle
    # Root outside every pod sees the node's overview: every pod's identity, never a key.
    status, got = request_outside("/v1/identity")
    assert status == 200 and len(got["workloads"]) == len(world)
    assert "PRIVATE KEY" not in str(got)


def test_a_pod_reads_only_the_configs_it_declared(world):
    for qos, declared, other in (("guaranteed", "a", "b"), ("burstable", "b", "a")):
        pod, user = world[qos], POD_USER[qos]
        status, got = request_in_pod(pod, "/v1/configs/%s?wait=20s" % declared, user=user)
        assert status == 200 and got["present"] and got["verified"], got
        status, got = request_in_pod(pod, "/v1/configs", user=user)
        assert status == 200 and [c["name"] for c in got["configs"]] == [declared], got
        assert "pods" not in got  # the operators' view of every pod's gate
        status, got = request_in_pod(pod, "/v1/configs/" + other, user=user)
        assert status == 403, got
    # A pod that declares none sees none.
    status, got = request_in_pod(world["besteffort"], "/v1/configs", user=POD_USER["besteffort"])
    assert status == 200 and got["configs"] == [], got
    with open("/var/lib/pinion/configs/a/app.yaml") as f:
        assert f.read() == "config: a\n"


def test_the_local_api_authorizes_pods_as_pods(world):
    """The privileged routes refuse a pod's processes, root among them; root on the host passes."""
    pod, user = world["besteffort"], POD_USER["besteffort"]
    for path in ("/v1/status", "/v1/pods", "/v1/pods/default/pod-g", "/metrics"):
        for who in (user, None):
            status, got = request_in_pod(pod, path, user=who)
            assert status == 403, (path, who, got)
    assert request_in_pod(pod, "/v1/health", user=user)[0] == 200
    status, got = request_outside("/v1/pods")
    assert status == 200 and got["count"] == len(world), got
