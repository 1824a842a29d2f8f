# SPDX-License-Identifier: MIT
"""Pod and Node objects for tests, and the watch event form."""

from kube_common import _dumps

# ---------------------------------------------------------------------------------------------
# Objects


def make_pod(name, node=None, namespace="default", phase="Running", ready=True, ip="10.1.2.3",
             labels=None, annotations=None, containers=None):
    """A v1 Pod as a dict (what add_pod() takes)."""
    md = {"name": name, "namespace": namespace}
    if labels:
        md["labels"] = dict(labels)
    if annotations:
        md["annotations"] = dict(annotations)
    spec = {"containers": containers or [{"name": "main", "image": "example/app:1",
                                          "ports": [{"name": "http", "containerPort": 8080,
                                                     "protocol": "TCP"}]}],
            "restartPolicy": "Always", "serviceAccountName": "default",
            "schedulerName": "default-scheduler"}
    if node:
        spec["nodeName"] = node
    status = {"phase": phase}
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": status}


def huge_pod(name, node=None, size=5 * 1024 * 1024, **kw):
    """A pod whose JSON is a little over `size` bytes (one big annotation)."""
    pod = make_pod(name, node=node, **kw)
    pod["metadata"].setdefault("annotations", {})["pinion.test/padding"] = "x" * size
    return pod


def make_node(name, pod_cidr=None, labels=None):
    md = {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {}))}
    spec = {}
    if pod_cidr:
        spec["podCIDR"] = pod_cidr
        spec["podCIDRs"] = [pod_cidr]
    return {"kind": "Node", "apiVersion": "v1", "metadata": md, "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "Hostname", "address": name}]}}


def _key(resource, obj):
    md = obj.get("metadata") or {}
    if resource.namespaced:
        return "%s/%s" % (md.get("namespace") or "default", md["name"])
    return md["name"]


class _Event:
    __slots__ = ("rv", "resource", "type", "key", "obj", "prev", "_json")

    def __init__(self, rv, resource, etype, key, obj, prev):
        self.rv, self.resource, self.type, self.key = rv, resource, etype, key
        self.obj, self.prev, self._json = obj, prev, None


def _event_line(etype, obj):
    return b'{"type":"' + etype.encode() + b'","object":' + _dumps(obj) + b"}\n"
