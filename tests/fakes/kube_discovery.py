# SPDX-License-Identifier: MIT
"""Discovery and the other non-resource paths: /version, /healthz, /api, /api/v1, /apis,
/apis/GROUP/VERSION (the legacy documents; a client asking for aggregated discovery
(apidiscovery.k8s.io/v2) gets them as application/json, which kubectl takes as "not
aggregated" and reads the legacy way), so kubectl can describe and get pods."""

from kube_common import GROUP_RESOURCES, RESOURCES

# Groups served besides the resource tables: the CSR block's.
EXTRA_GROUPS = {("certificates.k8s.io", "v1"): [
    {"name": "certificatesigningrequests", "singularName": "certificatesigningrequest",
     "namespaced": False, "kind": "CertificateSigningRequest",
     "verbs": ["create", "get", "list", "watch"], "shortNames": ["csr"]}]}


def _resource_entries(table):
    out = []
    for r in table.values():
        e = {"name": r.name, "singularName": r.kind.lower(), "namespaced": r.namespaced,
             "kind": r.kind, "verbs": sorted(r.verbs)}
        if r.short_names:
            e["shortNames"] = list(r.short_names)
        out.append(e)
        if r.name == "pods":
            out.append({"name": "pods/status", "singularName": "", "namespaced": True,
                        "kind": "Pod", "verbs": ["get", "patch"]})
    return out


def _groups():
    gvs = list(GROUP_RESOURCES) + [gv for gv in EXTRA_GROUPS if gv not in GROUP_RESOURCES]
    out = []
    for group, version in sorted(gvs):
        gv = {"groupVersion": "%s/%s" % (group, version), "version": version}
        out.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return out


class _DiscoveryMixin:
    def _serve_nonresource(self, h, path, fault):
        text = "text/plain; charset=utf-8"
        path = path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            h.send_body(200, b"ok", ctype=text, fault=fault)
        elif path == "/version":
            h.send_json(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0-pinion-fake",
                              "gitCommit": "0000000000000000000000000000000000000000",
                              "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z",
                              "goVersion": "go1.23.0", "compiler": "gc",
                              "platform": "linux/amd64"}, fault=fault)
        elif path == "/api":
            h.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                              "serverAddressByClientCIDRs": [
                                  {"clientCIDR": "0.0.0.0/0",
                                   "serverAddress": "%s:%d" % (self.host, self.port)}]},
                        fault=fault)
        elif path == "/api/v1":
            h.send_json(200, {"kind": "APIResourceList", "groupVersion": "v1",
                              "resources": _resource_entries(RESOURCES)}, fault=fault)
        elif path == "/apis":
            h.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": _groups()},
                        fault=fault)
        elif path.startswith("/apis/") and len(path.split("/")) == 4:
            _, _, group, version = path.split("/")
            gv = (group, version)
            if gv in GROUP_RESOURCES:
                entries = _resource_entries(GROUP_RESOURCES[gv])
            elif gv in EXTRA_GROUPS:
                entries = EXTRA_GROUPS[gv]
            else:
                h.send_body(404, b"404 page not found\n", ctype=text, fault=fault)
                return
            h.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1",
                              "groupVersion": "%s/%s" % gv, "resources": entries}, fault=fault)
        elif path.startswith("/apis/") and len(path.split("/")) == 3:
            group = path.split("/")[2]
            for g in _groups():
                if g["name"] == group:
                    h.send_json(200, dict({"kind": "APIGroup", "apiVersion": "v1"}, **g),
                                fault=fault)
                    return
            h.send_body(404, b"404 page not found\n", ctype=text, fault=fault)
        else:
            h.send_body(404, b"404 page not found\n", ctype=text, fault=fault)
