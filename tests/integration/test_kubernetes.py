# SPDX-License-Identifier: MIT
"""units/kubernetes/: the manifests are well-formed Kubernetes objects (checked with the official
Python client's models, strictly: a misspelled field fails), the DaemonSet has what a node agent
needs, RBAC is the least the modules use, the shipped config is one piniond accepts, the CNI
installer installs atomically, workloads mount only the agent's sockets directory and read-only,
through the CSI driver rather than a hostPath, the agent's namespace alone is labelled for
privileged pods, Prometheus finds the metrics port, and the image needs no registry
(tests/integration/test_image.py builds and runs it)."""

import glob
import os
import re
import shutil
import stat
import subprocess
import tempfile

import pytest
import yaml

from pinion_testlib import BUILDDIR, PINIOND, SRCDIR, T, clean_env, require_binary

kubernetes = pytest.importorskip("kubernetes")

KDIR = os.path.join(SRCDIR, "units", "kubernetes")

MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Pod"): "V1Pod",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("storage.k8s.io/v1", "CSIDriver"): "V1CSIDriver",
}
# Kinds Debian's python3-kubernetes has no model of (it predates them): their fields are checked
# against this list instead, and the policy's rules are evaluated for real by the emulator
# (test_fake_apiserver_status.py, test_kubernetes_status.py).
UNMODELLED = {
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"):
        {"failurePolicy", "matchConstraints", "matchConditions", "variables", "validations", "auditAnnotations",
         "paramKind"},
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"):
        {"policyName", "paramRef", "matchResources", "validationActions"},
}


def _documents():
    docs = []
    for path in sorted(glob.glob(os.path.join(KDIR, "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is not None:
                    docs.append((os.path.basename(path), doc))
    return docs


def _one(kind):
    found = [d for _, d in _documents() if d["kind"] == kind]
    assert len(found) == 1, "%d %s objects" % (len(found), kind)
    return found[0]


def _model(doc):
    client = kubernetes.client.ApiClient()
    name = MODELS[(doc["apiVersion"], doc["kind"])]
    # The same deserializer the client uses for API responses.
    return client, client._ApiClient__deserialize(doc, name)


def test_every_manifest_is_a_kubernetes_object():
    docs = _documents()
    kinds = sorted(d["kind"] for _, d in docs)
    assert kinds == sorted(k for _, k in list(MODELS) + list(UNMODELLED)), kinds
    for fname, doc in docs:
        fields = UNMODELLED.get((doc.get("apiVersion"), doc.get("kind")))
        if fields is not None:
            assert doc["metadata"]["name"] and set(doc["spec"]) <= fields, (fname, sorted(doc["spec"]))
            continue
        assert (doc.get("apiVersion"), doc.get("kind")) in MODELS, (fname, doc.get("kind"))
        client, obj = _model(doc)
        assert obj.metadata.name, fname
        # Strict: the model drops fields it does not know, so a typo (hostPid, mountpath, ...)
        # shows up as a difference between the document and its round trip through the model.
        assert client.sanitize_for_serialization(obj) == doc, fname


def test_namespaced_objects_share_the_namespace():
    ns = _one("Namespace")["metadata"]["name"]
    for _, doc in _documents():
        if doc["kind"] in ("ServiceAccount", "ConfigMap", "DaemonSet"):
            assert doc["metadata"]["namespace"] == ns, doc["kind"]


def test_daemonset_has_what_a_node_agent_needs():
    ds = _one("DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert spec["serviceAccountName"] == _one("ServiceAccount")["metadata"]["name"]
    assert spec["hostNetwork"] is True  # podnet: host-side veths and routes
    assert spec["hostPID"] is True      # identity: peer PIDs and /proc/PID/cgroup
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert {"operator": "Exists"} in spec["tolerations"]

    (agent,) = spec["containers"]
    assert agent["command"][0] == "/usr/sbin/piniond"
    env = {e["name"]: e for e in agent["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    for probe in ("readinessProbe", "livenessProbe"):
        assert agent[probe]["exec"]["command"] == ["/usr/bin/pinionctl", "health"], probe

    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m for c in spec["containers"] + spec["initContainers"] for m in c["volumeMounts"]}
    config_map = _one("ConfigMap")["metadata"]["name"]
    assert volumes[mounts["/etc/pinion"]["name"]]["configMap"]["name"] == config_map
    # Host paths the agent shares with the node: its runtime dir (sockets/ is what pods mount), its state,
    # network namespace handles (propagated from the host), cgroups, and the CNI directories.
    for mount, host in (("/run/pinion", "/run/pinion"), ("/var/lib/pinion", "/var/lib/pinion"),
                        ("/run/netns", "/run/netns"), ("/sys/fs/cgroup", "/sys/fs/cgroup"),
                        ("/host/opt/cni/bin", "/opt/cni/bin"), ("/host/etc/cni/net.d", "/etc/cni/net.d")):
        assert mount in mounts, mount
        assert volumes[mounts[mount]["name"]]["hostPath"]["path"] == host, mount
    assert mounts["/run/netns"]["mountPropagation"] == "HostToContainer"
    # Deregistration (stop-timeout 10s by default) must finish before the kubelet kills it.
    assert spec["terminationGracePeriodSeconds"] > 10

    (init,) = spec["initContainers"]
    assert init["command"] == ["/usr/share/pinion/install-cni"]


AGENT_CONTAINER = ("DaemonSet", "piniond")
SOCKETS_DIR = "/run/pinion/sockets"


def _pod_specs():
    """(file, kind, spec) of every pod the manifests make: Pods and workload templates."""
    for name, doc in _documents():
        spec = doc.get("spec") or {}
        if doc["kind"] == "Pod":
            yield name, doc["kind"], spec
        elif "template" in spec:
            yield name, doc["kind"], spec["template"]["spec"]


def _pinion_host_mounts(spec, skip_container=None):
    """(container, mount, hostPath) of every mount of /run/pinion or below."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        if c["name"] == skip_container:
            continue
        for m in c.get("volumeMounts", []):
            host = os.path.normpath((volumes[m["name"]].get("hostPath") or {}).get("path") or "/nonexistent")
            if host == "/run/pinion" or host.startswith("/run/pinion/"):
                yield c["name"], m, host


def test_workloads_mount_only_the_sockets_dir_read_only():
    """Whatever of /run/pinion a pod other than the agent mounts is the sockets-only directory,
    read-only: a pod's root can then neither move the agent's socket aside nor listen in its
    place, nor read what else the agent keeps there (pod TLS files)."""
    seen = []
    for name, kind, spec in _pod_specs():
        skip = AGENT_CONTAINER[1] if kind == AGENT_CONTAINER[0] else None
        for container, mount, host in _pinion_host_mounts(spec, skip):
            where = "%s %s/%s" % (name, kind, container)
            assert host == SOCKETS_DIR, "%s mounts %s" % (where, host)
            assert mount.get("readOnly") is True, "%s mounts %s read-write" % (where, host)
            assert not mount.get("subPath"), where
            seen.append(where)
    # Only the agent mounts any of it by hostPath: workloads use the CSI volume.
    assert seen == [], seen
    pod = [d for n, d in _documents() if n == "example-workload.yaml"][0]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["PINION_SOCKET"] == SOCKETS_DIR + "/pinion.sock"
    # The agent itself mounts all of /run/pinion (it writes pod TLS files there) read-write.
    ds = _one("DaemonSet")["spec"]["template"]["spec"]
    agent_mounts = [(m, h) for c, m, h in _pinion_host_mounts(ds) if c == AGENT_CONTAINER[1]]
    assert [(m["mountPath"], h) for m, h in agent_mounts] == [("/run/pinion", "/run/pinion")]
    assert not agent_mounts[0][0].get("readOnly")


def _conf_value(section, key):
    """A key of the shipped pinion.conf (configmap.yaml), or None."""
    current = None
    for line in _one("ConfigMap")["data"]["pinion.conf"].splitlines():
        line = line.strip()
        if line.startswith("["):
            current = line.strip("[]")
        elif current == section and line.startswith(key + "="):
            return line.split("=", 1)[1]
    return None


def test_workloads_reach_the_agent_through_the_csi_driver_not_a_hostpath():
    """The example workload would pass the Pod Security Standards' baseline profile: no
    hostPath volume, no host namespaces, nothing privileged; the sockets directory comes from
    piniond's CSI driver as an inline ephemeral volume, read-only."""
    pod = [d for n, d in _documents() if n == "example-workload.yaml"][0]
    spec = pod["spec"]
    assert not [v for v in spec["volumes"] if "hostPath" in v], spec["volumes"]
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        assert not spec.get(key), key
    for c in spec["containers"]:
        assert not (c.get("securityContext") or {}).get("privileged"), c["name"]
    driver = _one("CSIDriver")["metadata"]["name"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["mountPath"] == SOCKETS_DIR]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["csi"] == {"driver": driver, "readOnly": True}
    # The driver the agent serves is the one the pod names ([csi] name defaults to it).
    assert _conf_value("csi", "enable") == "yes"
    assert _conf_value("csi", "name") in (None, driver)
    assert driver == "csi.pinion.dev"


def test_csidriver_is_an_inline_ephemeral_node_only_driver():
    spec = _one("CSIDriver")["spec"]
    assert spec["attachRequired"] is False     # no controller, nothing to attach
    assert spec["podInfoOnMount"] is True
    assert spec["volumeLifecycleModes"] == ["Ephemeral"]
    assert spec["fsGroupPolicy"] == "None"     # a read-only mount: never chowned for fsGroup


def test_daemonset_serves_the_csi_plugin_without_a_registrar():
    ds = _one("DaemonSet")["spec"]["template"]["spec"]
    (agent,) = ds["containers"]
    assert [c["name"] for c in ds["containers"]] == ["piniond"]  # no node-driver-registrar sidecar
    volumes = {v["name"]: v for v in ds["volumes"]}
    mounts = {m["mountPath"]: m for m in agent["volumeMounts"]}
    for path in ("/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/pods"):
        assert volumes[mounts[path]["name"]]["hostPath"]["path"] == path, path
    # Publishing mounts below the pods' directories: they must reach the host.
    assert mounts["/var/lib/kubelet/pods"]["mountPropagation"] == "Bidirectional"
    assert agent["securityContext"]["privileged"] is True  # Bidirectional needs it


def test_agent_namespace_alone_is_privileged_for_pod_security_admission():
    ns = _one("Namespace")
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    for mode in ("warn", "audit"):
        assert labels.get("pod-security.kubernetes.io/" + mode, "privileged") == "privileged", mode
    # The privileged namespace is the agent's: workloads are elsewhere.
    pod = [d for n, d in _documents() if n == "example-workload.yaml"][0]
    assert pod["metadata"]["namespace"] != ns["metadata"]["name"]


def test_prometheus_finds_the_metrics_port():
    template = _one("DaemonSet")["spec"]["template"]
    ann = template["metadata"]["annotations"]
    listen = _conf_value("agent", "metrics-listen")
    assert listen, "no [agent] metrics-listen in the shipped config"
    port = listen.rsplit(":", 1)[1]
    assert ann["prometheus.io/scrape"] == "true"
    assert ann["prometheus.io/port"] == port
    assert ann["prometheus.io/path"] == "/metrics"
    (agent,) = template["spec"]["containers"]
    assert {"name": "metrics", "containerPort": int(port), "protocol": "TCP"} in agent["ports"]


def test_rbac_is_the_least_the_modules_use():
    role = _one("ClusterRole")
    rules = {(g, r): sorted(rule["verbs"]) for rule in role["rules"]
             for g in rule["apiGroups"] for r in rule["resources"]}
    assert rules == {
        ("", "pods"): ["get", "list", "watch"],                 # apiserver module
        ("", "nodes"): ["get"],                                 # podnet: spec.podCIDR
        ("certificates.k8s.io", "certificatesigningrequests"): ["create", "get", "list", "watch"],  # identity
        ("", "pods/status"): ["patch"],                        # apiserver module: pinion.io/ready
        ("events.k8s.io", "events"): ["create", "patch"],       # apiserver module: Events
    }
    binding = _one("ClusterRoleBinding")
    sa = _one("ServiceAccount")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]


def test_shipped_config_is_accepted_by_piniond():
    require_binary(PINIOND)
    text = _one("ConfigMap")["data"]["pinion.conf"]
    d = tempfile.mkdtemp(prefix="pinion-k8s-conf-")
    try:
        path = os.path.join(d, "pinion.conf")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([PINIOND, "--config", path, "--check-config"], capture_output=True, text=True,
                           env=clean_env({"NODE_NAME": "node-1"}), timeout=T(30))
        assert p.returncode == 0, p.stderr
        # And a broken copy is refused with the line of the mistake: the check is real.
        with open(path, "w") as f:
            f.write(text.replace("socket-mode=0666", "socket-mode=banana"))
        p = subprocess.run([PINIOND, "--config", path, "--check-config"], capture_output=True, text=True,
                           env=clean_env({"NODE_NAME": "node-1"}), timeout=T(30))
        line = text.splitlines().index("socket-mode=0666") + 1
        assert p.returncode == 78 and ("pinion.conf:%d:" % line) in p.stderr, p.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_install_cni_installs_atomically():
    d = tempfile.mkdtemp(prefix="pinion-k8s-cni-")
    try:
        src, bindir, confdir = (os.path.join(d, x) for x in ("src", "bin", "net.d"))
        for x in (src, bindir, confdir):
            os.mkdir(x)
        plugin, conflist = os.path.join(src, "pinion-cni"), os.path.join(src, "10-pinion.conflist")
        # Enough of a plugin for install-cni, which asks it which cniVersions it speaks.
        plugin_text = "#!/bin/sh\necho '{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"1.0.0\"]}'\n"
        with open(plugin, "w") as f:
            f.write(plugin_text)
        os.chmod(plugin, 0o755)
        with open(conflist, "w") as f:
            f.write('{"cniVersion": "1.0.0"}\n')
        # An old plugin in place: replaced, not appended to.
        with open(os.path.join(bindir, "pinion-cni"), "w") as f:
            f.write("old" * 1000)
        env = clean_env({"CNI_BIN_DIR": bindir, "CNI_CONF_DIR": confdir, "PINION_CNI": plugin,
                         "PINION_CONFLIST": conflist})
        p = subprocess.run([os.path.join(KDIR, "install-cni")], capture_output=True, text=True, env=env,
                           timeout=T(30))
        assert p.returncode == 0, p.stderr
        assert sorted(os.listdir(bindir)) == ["pinion-cni"]  # no temp file left
        assert sorted(os.listdir(confdir)) == ["10-pinion.conflist"]
        st = os.stat(os.path.join(bindir, "pinion-cni"))
        assert stat.S_IMODE(st.st_mode) == 0o755
        assert stat.S_IMODE(os.stat(os.path.join(confdir, "10-pinion.conflist")).st_mode) == 0o644
        with open(os.path.join(bindir, "pinion-cni")) as f:
            assert f.read() == plugin_text
        # A missing source fails the init container (so the pod does not start half-installed).
        env["PINION_CNI"] = os.path.join(src, "absent")
        p = subprocess.run([os.path.join(KDIR, "install-cni")], capture_output=True, text=True, env=env,
                           timeout=T(30))
        assert p.returncode != 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _needed(binary):
    out = subprocess.run(["objdump", "-p", binary], capture_output=True, text=True, check=True).stdout
    return re.findall(r"^\s*NEEDED\s+(\S+)", out, re.M)


def _package_of(soname, binary):
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    m = re.search(r"^\s*%s => (\S+)" % re.escape(soname), ldd, re.M)
    assert m, "%s not resolved for %s" % (soname, binary)
    path = os.path.realpath(m.group(1))
    for candidate in (m.group(1), path, path.replace("/usr/lib/", "/lib/", 1)):
        p = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if p.returncode == 0:
            return p.stdout.split(":")[0]
    raise AssertionError("no package owns %s" % path)


def test_containerfile_needs_no_registry():
    """The image is built FROM scratch with what `make image` stages (units/kubernetes/image-rootfs):
    no base image to pull and no RUN step (which would need a shell and a runtime at build time);
    the DaemonSet runs the tag `make image` gives it, this tree's version."""
    with open(os.path.join(KDIR, "Containerfile")) as f:
        text = f.read()
    assert re.findall(r"^FROM\s+(\S+)", text, re.M | re.I) == ["scratch"]
    assert not re.search(r"^RUN\b", text, re.M | re.I)
    with open(os.path.join(SRCDIR, "configure.ac")) as f:
        version = re.search(r"AC_INIT\(\[pinion\],\s*\[([^]]+)\]", f.read()).group(1)
    spec = _one("DaemonSet")["spec"]["template"]["spec"]
    images = {c["image"] for c in spec["containers"] + spec["initContainers"]}
    assert images == {"localhost/pinion:" + version}, images


def test_vm_guest_image_packages_cover_the_binaries():
    """The VM suite's guest (tests/vm/image/packages) has every library the binaries load: a
    library missing there fails every guest test at the first start, far from the cause."""
    if not shutil.which("objdump"):
        pytest.skip("objdump (binutils) is not installed")
    with open(os.path.join(SRCDIR, "tests", "vm", "image", "packages")) as f:
        wanted = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    # In the minbase guest already, or pulled in by systemd-sysv.
    base = {"libc6", "libgcc-s1", "libsystemd0"}
    for name in ("piniond", "pinionctl", "pinion-cni"):
        binary = os.path.join(BUILDDIR, name)
        if not os.path.exists(binary):
            continue
        for soname in _needed(binary):
            if re.match(r"lib(asan|ubsan|lsan)\.so", soname):
                continue
            pkg = _package_of(soname, binary).split(":")[0]
            assert pkg in wanted | base, "%s needs %s from %s, not in tests/vm/image/packages" % (name, soname, pkg)


def test_image_paths_exist_in_an_install():
    """What the DaemonSet and install-cni name in the image (make install with the directories
    `make image` gives it) is really installed there."""
    d = tempfile.mkdtemp(prefix="pinion-k8s-install-")
    try:
        env = clean_env({"MAKEFLAGS": None, "MFLAGS": None, "MAKELEVEL": None, "DESTDIR": None})
        p = subprocess.run(["make", "-s", "-C", BUILDDIR, "install", "DESTDIR=" + d, "prefix=/usr", "sysconfdir=/etc",
                            "localstatedir=/var", "cnibindir=/usr/libexec/cni", "cniconfdir=/etc/cni/net.d"], capture_output=True, text=True, env=env, timeout=T(600),
                           stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stderr[-3000:]
        with open(os.path.join(KDIR, "install-cni")) as f:
            script = f.read()
        defaults = dict(re.findall(r"^\w+=\$\{(\w+):-(/[^}]+)\}", script, re.M))
        ds = _one("DaemonSet")["spec"]["template"]["spec"]
        paths = [defaults["PINION_CNI"], defaults["PINION_CONFLIST"], ds["containers"][0]["command"][0],
                 ds["containers"][0]["readinessProbe"]["exec"]["command"][0]]
        for path in paths:
            assert os.path.exists(os.path.join(d, path.lstrip("/"))), "%s is not installed" % path
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- units/kubernetes/routing/: what [network] routing = nodes or bgp adds, applied only then ---

RDIR = os.path.join(KDIR, "routing")


def _load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def _strategic_merge(base, patch):
    """kubectl's strategic merge for what the patch uses: maps merge, lists of named objects
    (containers, volumes) merge by name, other values replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _strategic_merge(base[k], v) if k in base else v
        return out
    if isinstance(base, list) and isinstance(patch, list) and all(isinstance(x, dict) and "name" in x
                                                                  for x in base + patch):
        out = list(base)
        for item in patch:
            same = [i for i, x in enumerate(out) if x["name"] == item["name"]]
            if same:
                out[same[0]] = _strategic_merge(out[same[0]], item)
            else:
                out.append(item)
        return out
    return patch


def test_routing_nodes_rbac_grants_exactly_list_and_watch_on_nodes():
    docs = _load(os.path.join(RDIR, "rbac-nodes.yaml"))
    assert sorted(d["kind"] for d in docs) == ["ClusterRole", "ClusterRoleBinding"]
    for doc in docs:
        client, obj = _model(doc)
        assert client.sanitize_for_serialization(obj) == doc
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    sa = _one("ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]
    # The base role reads the agent's own Node only: list/watch of all Nodes is this file's.
    base = _one("ClusterRole")
    assert not any("nodes" in r["resources"] and {"list", "watch"} & set(r["verbs"]) for r in base["rules"])


def test_routing_bgp_patch_adds_a_bird_container_to_the_daemonset():
    (patch,) = _load(os.path.join(RDIR, "daemonset-bgp-patch.yaml"))
    ds = _one("DaemonSet")
    merged = _strategic_merge(ds, patch)
    client, obj = _model(merged)
    assert client.sanitize_for_serialization(obj) == merged  # strict: no misspelled field
    spec = merged["spec"]["template"]["spec"]
    names = [c["name"] for c in spec["containers"]]
    assert names == ["piniond", "bird"], names
    bird = spec["containers"][1]
    agent = spec["containers"][0]
    assert bird["image"] == agent["image"]  # the image carries bird (image-rootfs)
    assert bird["command"][:2] == ["/usr/sbin/bird", "-f"], bird["command"]
    assert "/etc/bird/bird.conf" in bird["command"]
    assert bird["securityContext"]["privileged"] is False
    assert set(bird["securityContext"]["capabilities"]["add"]) <= {"NET_ADMIN", "NET_BIND_SERVICE", "NET_RAW"}
    mounts = {m["mountPath"]: m for m in bird["volumeMounts"]}
    assert mounts["/etc/bird"]["readOnly"] is True
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes[mounts["/etc/bird"]["name"]]["configMap"]["name"] == "pinion-bird"
    assert spec["hostNetwork"] is True  # BIRD and piniond share the node's routing table
    # Nothing of the agent's container changed.
    assert agent == ds["spec"]["template"]["spec"]["containers"][0]


def test_bird_node_config_as_the_daemonsets_configmap_holds_it_parses():
    """The ConfigMap variant the patch's comment describes (log to stderr, router id from the
    node's interfaces: one file for every node) is a valid BIRD 2 configuration."""
    bird = shutil.which("bird") or "/usr/sbin/bird"
    if not os.path.exists(bird):
        pytest.skip("bird2 is not installed (scripts/deps installs it)")
    with open(os.path.join(SRCDIR, "units", "bird", "pinion-node.conf")) as f:
        text = f.read()
    patch = open(os.path.join(RDIR, "daemonset-bgp-patch.yaml")).read()
    assert 'router id from "eth*";' in patch and "log stderr all;" in patch
    text = re.sub(r"^router id @ROUTER_ID@;", 'router id from "eth*";', text, flags=re.M)
    text = re.sub(r"^log syslog all;", "log stderr all;", text, flags=re.M)
    for k, v in {"AS": "64512", "HOLD_TIME": "9", "RR1_IPV4": "192.0.2.1", "RR1_IPV6": "2001:db8::1"}.items():
        text = text.replace("@%s@" % k, v)
    assert not re.findall(r"@[A-Z0-9_]+@", text), re.findall(r"@[A-Z0-9_]+@", text)
    with tempfile.NamedTemporaryFile("w", suffix=".conf") as f:
        f.write(text)
        f.flush()
        p = subprocess.run([bird, "-p", "-c", f.name], capture_output=True, text=True, timeout=T(30))
    assert p.returncode == 0, p.stdout + p.stderr
