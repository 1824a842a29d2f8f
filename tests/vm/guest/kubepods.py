# SPDX-License-Identifier: MIT
"""Pods laid out as the kubelet's systemd cgroup driver lays them out, made the way it and the
container runtime make them: a pod is a transient slice named for its QoS class and UID
(kubepods-burstable-pod<uid, '_' for '-'>.slice below kubepods-burstable.slice below
kubepods.slice; a guaranteed pod's kubepods-pod<uid>.slice sits directly below kubepods.slice),
and each container is a transient scope cri-containerd-<64 hex>.scope in it, started with
systemd-run as containerd asks systemd for one over D-Bus. systemd nests a dashed slice name by
itself, so kubepods-burstable-pod<uid>.slice lands in kubepods.slice/kubepods-burstable.slice/.

The pods are given to the agent as static pods (pods-dir JSON) carrying the same metadata.uid."""

import json
import os
import secrets
import uuid

from conftest import main_pid, run, systemctl

PODS_DIR = "/etc/pinion/pods.d"
SOCKET = "/run/pinion/sockets/pinion.sock"
QOS_CLASSES = ("guaranteed", "burstable", "besteffort")


def pod_slice(qos, uid):
    """The pod's slice unit, as the kubelet names it."""
    escaped = uid.replace("-", "_")
    if qos == "guaranteed":
        return "kubepods-pod%s.slice" % escaped
    return "kubepods-%s-pod%s.slice" % (qos, escaped)


def pod_cgroup(qos, uid):
    """Where systemd puts that slice in the unified hierarchy."""
    if qos == "guaranteed":
        return "/kubepods.slice/" + pod_slice(qos, uid)
    return "/kubepods.slice/kubepods-%s.slice/%s" % (qos, pod_slice(qos, uid))


class Pod:
    def __init__(self, name, qos, namespace="default", annotations=None, service_account=None):
        assert qos in QOS_CLASSES
        self.name, self.qos, self.namespace = name, qos, namespace
        self.uid = str(uuid.uuid4())
        self.annotations = dict(annotations or {})
        self.service_account = service_account or name
        self.slice = pod_slice(qos, self.uid)
        self.cgroup = pod_cgroup(qos, self.uid)

    def manifest(self):
        """The pod as a Kubernetes v1 Pod object (a static pod: no conditions counts as Ready)."""
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid,
                             "annotations": self.annotations},
                "spec": {"serviceAccountName": self.service_account,
                         "containers": [{"name": "main", "image": "example/app:1"}]},
                "status": {"phase": "Running"}}

    def run(self, *argv, user=None, check=False, timeout=60):
        """Runs argv as one container of the pod: in a fresh cri-containerd-<id>.scope in the pod's
        slice, as root or as the numeric user (its own group, no supplementary groups)."""
        unit = "cri-containerd-%s.scope" % secrets.token_hex(32)
        cmd = ["systemd-run", "--quiet", "--scope", "--collect", "--slice=" + self.slice, "--unit=" + unit, "--"]
        if user is not None:
            cmd += setpriv(user)
        return run(*cmd, *argv, check=check, timeout=timeout)


def setpriv(user):
    """The prefix that runs a command as a numeric user with no entry in /etc/passwd (container
    users have none on the host), its own group and no supplementary groups."""
    return ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups", "--"]


def write_pods(pods):
    """Gives the pods to the agent as pods-dir files; returns the paths (for removal)."""
    os.makedirs(PODS_DIR, exist_ok=True)
    paths = []
    for p in pods:
        path = os.path.join(PODS_DIR, "%s-%s.json" % (p.namespace, p.name))
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(p.manifest(), f)
        os.rename(tmp, path)
        paths.append(path)
    return paths


def remove_pods(paths):
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    stop_kubepods()


def stop_kubepods():
    """Stops whatever is left of the pods' slices (a scope ends with its last process; the
    slices stay until stopped)."""
    systemctl("stop", "kubepods.slice", check=False)


def curl_argv(path, sock=SOCKET, timeout=30):
    """A request over the agent's socket that prints the body, a newline and the status."""
    return ["curl", "-sS", "--max-time", str(timeout), "--unix-socket", sock, "-o", "-",
            "-w", "\n%{http_code}", "http://localhost" + path]


def parse_curl(p):
    """(status, body as JSON when it is JSON, else text) of a curl_argv() run; status 0 when curl
    could not connect (its error is in the body)."""
    body, _, code = p.stdout.rpartition("\n")
    if not code.strip().isdigit() or int(code) == 0:
        return 0, (p.stdout + p.stderr).strip()
    try:
        return int(code), json.loads(body)
    except ValueError:
        return int(code), body


def request_in_pod(pod, path, user=None, timeout=30):
    """GET path from a process in one of the pod's containers: (status, body)."""
    return parse_curl(pod.run(*curl_argv(path, timeout=timeout), user=user, timeout=timeout + 30))


def request_outside(path, user=None, timeout=30):
    """GET path from a process of the host outside any pod (this test's own service), as root or
    as the numeric user: (status, body)."""
    argv = curl_argv(path, timeout=timeout)
    if user is not None:
        argv = setpriv(user) + argv
    return parse_curl(run(*argv, check=False, timeout=timeout + 30))


CAPABILITIES = {0: "CAP_CHOWN", 1: "CAP_DAC_OVERRIDE", 3: "CAP_FOWNER", 5: "CAP_KILL", 12: "CAP_NET_ADMIN",
                21: "CAP_SYS_ADMIN"}


def agent_capabilities():
    """The running agent's effective capabilities, by name (the numbers of the unit's set)."""
    with open("/proc/%d/status" % main_pid()) as f:
        eff = int(next(line for line in f if line.startswith("CapEff:")).split()[1], 16)
    names = {CAPABILITIES.get(n, str(n)) for n in range(64) if eff & (1 << n)}
    return names
