# SPDX-License-Identifier: MIT
"""Real container runtimes driving pinion-cni: containerd 1.6 with its CRI plugin (driven over its
CRI gRPC socket as the kubelet drives it) and podman 4.3 (CNI backend, runc), each run privately
by the test against a piniond the test started with podnet configured.

Private means: every runtime gets its own root, state and run directories (runc's too), its own
sockets and its own CNI directories under one temp dir, never the host's /var/lib/containerd,
/var/lib/containers or containerd's state (only its shims' sockets go to /run/containerd/s, where
containerd 1.6 always puts them, named by a hash of our socket path; libcni's result cache is its
/var/lib/cni, keyed by network and container, and our entries there go at cleanup):

    <dir>/cni-bin   pinion-cni (through a small recorder that logs what the runtime passed it
                    and execs the build's plugin) and the reference plugins of /usr/lib/cni
    <dir>/net.d     the shipped conf/cni/10-pinion.conflist pointed at the test's agent, and
                    optionally a reference list (ptp + host-local + portmap) beside it

Images are made locally (no registry is reachable): a static pause binary compiled here with
gcc -static for containerd's sandboxes, busybox-static for podman's containers, each packed as a
docker-archive tarball and loaded with `ctr image import` / `podman load`.

The CRI messages come from tests/integration/cri/runtime.proto (a runtime.v1 subset), compiled at
test time with protoc --python_out; the calls go through python3-grpcio's generic stubs.

Everything is removed at teardown, also when a test fails: sandboxes and containers through the
runtime, then the runtime's processes (containerd, its shims; they are ours, found by the private
socket path on their command line), libcni's cache entries of our containers (a failed DEL leaves
one), mounts under the temp dir, network namespaces, the dir."""

import glob
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile

import pytest

from pinion_testlib import SRCDIR, diag, log_lines, wait_until
from podnet_testlib import _ICMP, _ICMP6, CNI_PATH, PINION_CNI, PYTHON, free_pod_cidr, free_pod_cidr6, podnet_status

PAUSE_IMAGE = "localhost/pinion-test/pause:1"
BUSYBOX_IMAGE = "localhost/pinion-test/busybox:1"
CRI_PROTO_DIR = os.path.join(SRCDIR, "tests", "integration", "cri")
REFERENCE_PLUGINS = ("portmap", "loopback", "ptp", "host-local")
LIBCNI_CACHE = "/var/lib/cni/results"
RUNTIME_BINARIES = {
    "containerd": ("containerd", "ctr", "containerd-shim-runc-v2", "runc", "protoc"),
    "podman": ("podman", "conmon", "runc", "busybox"),
}


def require_runtime(name):
    """Skips the test where the runtime's binaries are genuinely absent (scripts/deps installs
    them: never on CI) or where this is not root."""
    if os.geteuid() != 0:
        pytest.skip("container runtimes need root")
    missing = [b for b in RUNTIME_BINARIES[name] if not shutil.which(b, path="/usr/sbin:/usr/bin:/sbin:/bin")]
    if missing:
        pytest.skip("%s is not installed here (missing %s; scripts/deps installs it)" % (name, ", ".join(missing)))


def run(cmd, check=True, timeout=120, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


# ---- images ----

PAUSE_C = r'''
/* The sandbox's process: waits for a signal, exits 0 on TERM/INT, reaps children. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int s) { (void) s; _exit(0); }
static void reap(int s) { (void) s; while (waitpid(-1, NULL, WNOHANG) > 0) ; }
int main(void) {
        signal(SIGTERM, quit);
        signal(SIGINT, quit);
        signal(SIGCHLD, reap);
        for (;;)
                pause();
}
'''


def build_pause(dir):
    src = os.path.join(dir, "pause.c")
    out = os.path.join(dir, "pause")
    with open(src, "w") as f:
        f.write(PAUSE_C)
    run(["gcc", "-static", "-Os", "-o", out, src])
    return out


def _tar_add(tf, name, data=None, mode=0o755, link=None, dir=False):
    ti = tarfile.TarInfo(name)
    ti.mtime = 0
    if dir:
        ti.type, ti.mode = tarfile.DIRTYPE, 0o755
        tf.addfile(ti)
    elif link is not None:
        ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, link, 0o777
        tf.addfile(ti)
    else:
        ti.size, ti.mode = len(data), mode
        tf.addfile(ti, io.BytesIO(data))


def docker_archive(path, name, files, links=(), dirs=(), entrypoint=None, cmd=None):
    """Writes a one-layer image in the docker-archive format (`docker save`), which both
    `ctr image import` and `podman load` read. files: {path in image: host file}."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for d in dirs:
            _tar_add(tf, d, dir=True)
        for dst, src in files.items():
            with open(src, "rb") as f:
                _tar_add(tf, dst, f.read())
        for dst, target in links:
            _tar_add(tf, dst, link=target)
    layer = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {"architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
              "config": {"Env": ["PATH=/bin:/sbin:/usr/bin"], "Entrypoint": entrypoint, "Cmd": cmd},
              "rootfs": {"type": "layers", "diff_ids": [diff_id]}, "history": [{"created_by": "pinion tests"}]}
    config = json.dumps(config).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_name = diff_id[7:] + "/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [name], "Layers": [layer_name]}]).encode()
    with tarfile.open(path, "w") as tf:
        _tar_add(tf, diff_id[7:], dir=True)
        _tar_add(tf, layer_name, layer, 0o644)
        _tar_add(tf, config_name, config, 0o644)
        _tar_add(tf, "manifest.json", manifest, 0o644)
    return path


def pause_image(dir):
    """The sandbox image: the pause binary built here, or where there is no compiler (the VM
    guest) busybox-static's sleep (containerd stops a sandbox with SIGKILL either way)."""
    if shutil.which("gcc"):
        return docker_archive(os.path.join(dir, "pause.tar"), PAUSE_IMAGE, {"pause": build_pause(dir)},
                              entrypoint=["/pause"])
    bb = shutil.which("busybox", path="/usr/bin:/bin")
    return docker_archive(os.path.join(dir, "pause.tar"), PAUSE_IMAGE, {"bin/busybox": bb}, dirs=["bin"],
                          links=[("bin/sleep", "busybox")], entrypoint=["/bin/sleep", "2147483647"])


BUSYBOX_APPLETS = ("sh", "ip", "sleep", "httpd", "cat", "ls", "nc", "ifconfig", "echo")


HTTP_MARKER = "pinion runtime test page"


def busybox_image(dir):
    """busybox-static with its applets, and /www/index.html (HTTP_MARKER) for `httpd -h /www`."""
    bb = shutil.which("busybox", path="/usr/bin:/bin")
    index = os.path.join(dir, "index.html")
    with open(index, "w") as f:
        f.write(HTTP_MARKER + "\n")
    return docker_archive(os.path.join(dir, "busybox.tar"), BUSYBOX_IMAGE, {"bin/busybox": bb, "www/index.html": index},
                          dirs=["bin", "proc", "sys", "dev", "etc", "tmp", "www"],
                          links=[("bin/" + a, "busybox") for a in BUSYBOX_APPLETS], cmd=["/bin/sh"])


# ---- CNI directories ----

RECORDER = '''#!/bin/sh
# What the runtime passed pinion-cni, one JSON line per call; then the real plugin. While the file
# hold-<command> exists, a call of that command waits for it to go before the plugin runs.
printf '{"command":"%%s","containerID":"%%s","netns":"%%s","ifname":"%%s","args":"%%s"}\\n' \\
    "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_IFNAME" "$CNI_ARGS" >> %(log)s
while [ -e "%(dir)s/hold-$CNI_COMMAND" ]; do sleep 0.05; done
exec %(plugin)s "$@"
'''


class CniDirs:
    """The runtime's CNI bin and conf dirs. record: pinion-cni is reached through the recorder
    (calls() reads what it logged, hold() makes calls of one command wait); otherwise it is the
    plugin itself (benchmarks). socket: the agent's, written into the conflist (None: the
    conflist's own, as installed). plugin, conflist, plugin_dir: the build's pinion-cni, the
    source tree's conflist and Debian's reference plugins, or an installed node's."""

    def __init__(self, base, socket=None, record=True, reference_cidr=None, plugin=None, conflist=None,
                 plugin_dir=CNI_PATH):
        plugin = plugin or PINION_CNI
        conflist = conflist or os.path.join(SRCDIR, "conf", "cni", "10-pinion.conflist")
        self.bin_dir = os.path.join(base, "cni-bin")
        self.conf_dir = os.path.join(base, "net.d")
        self.ref_conf_dir = os.path.join(base, "net.d-ref")
        self.ipam_dir = os.path.join(base, "host-local")
        self.log = os.path.join(base, "pinion-cni-calls.log")
        for d in (self.bin_dir, self.conf_dir, self.ref_conf_dir):
            os.makedirs(d)
        for p in REFERENCE_PLUGINS:
            os.symlink(os.path.join(plugin_dir, p), os.path.join(self.bin_dir, p))
        target = os.path.join(self.bin_dir, "pinion-cni")
        if record:
            with open(target, "w") as f:
                f.write(RECORDER % {"log": self.log, "plugin": plugin, "dir": base})
            os.chmod(target, 0o755)
        else:
            os.symlink(plugin, target)
        with open(conflist) as f:
            self.conflist = json.load(f)
        for p in self.conflist["plugins"]:
            if p["type"] == "pinion-cni" and socket:
                p["socket"] = socket
        self._write(self.conf_dir, "10-pinion.conflist", self.conflist)
        self.reference_conflist = None
        if reference_cidr:
            self.reference_conflist = {
                "cniVersion": "1.0.0", "name": "reference",
                "plugins": [{"type": "ptp", "ipam": {"type": "host-local", "subnet": reference_cidr,
                                                     "dataDir": self.ipam_dir}},
                            {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True}]}
            self._write(self.ref_conf_dir, "10-reference.conflist", self.reference_conflist)

    def hold(self, command, on=True):
        """on: calls of command (ADD, DEL...) are logged, then wait; off: they go on."""
        path = os.path.join(os.path.dirname(self.bin_dir), "hold-" + command)
        if on:
            open(path, "w").close()
        elif os.path.exists(path):
            os.unlink(path)

    def forget_cached_results(self, container_ids=()):
        """Removes what libcni cached in the host's /var/lib/cni/results for the containers
        pinion-cni was called for (and container_ids): libcni keeps an entry when a DEL fails,
        and neither runtime lets its cache dir be moved."""
        ids = set(container_ids) | {c["containerID"] for c in self.calls() if c["containerID"]}
        names = [self.conflist["name"]] + ([self.reference_conflist["name"]] if self.reference_conflist else [])
        for cid in ids:
            for name in names:
                for entry in glob.glob(os.path.join(LIBCNI_CACHE, "%s-%s-*" % (name, glob.escape(cid)))):
                    os.unlink(entry)

    @staticmethod
    def _write(dir, name, doc):
        with open(os.path.join(dir, name), "w") as f:
            json.dump(doc, f, indent=1)

    def calls(self, command=None):
        try:
            with open(self.log) as f:
                calls = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        for c in calls:
            c["argmap"] = dict(kv.split("=", 1) for kv in c["args"].split(";") if "=" in kv)
        return [c for c in calls if command is None or c["command"] == command]


# ---- processes we started, found by a private path on their command line ----

def pids_with_arg(needle):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if any(needle.encode() in a for a in args):
            out.append(int(pid))
    return out


def kill_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def unmount_under(path):
    """Unmounts everything mounted below path, deepest first (lazily: a dead runtime may have left
    a mount busy)."""
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for mp in sorted((p for p in points if p == path or p.startswith(path + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", mp], capture_output=True)


# ---- the CRI client ----

_cri_pb = None


def cri_messages():
    """The runtime.v1 message classes, compiled from cri/runtime.proto once per process."""
    global _cri_pb
    if _cri_pb is None:
        out = tempfile.mkdtemp(prefix="pinion-cri-pb-")
        try:
            run(["protoc", "-I" + CRI_PROTO_DIR, "--python_out=" + out, "runtime.proto"])
            sys.path.insert(0, out)
            import runtime_pb2  # noqa: E402
            _cri_pb = runtime_pb2
        finally:
            sys.path.remove(out)
            shutil.rmtree(out, ignore_errors=True)
    return _cri_pb


CRI_RPCS = ("Version", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus", "ListPodSandbox")


class CriClient:
    """runtime.v1.RuntimeService over the runtime's unix socket, as the kubelet calls it."""

    def __init__(self, socket_path):
        import grpc
        self.grpc = grpc
        self.pb = cri_messages()
        self.channel = grpc.insecure_channel("unix://" + socket_path)
        self.stubs = {}
        for name in CRI_RPCS:
            resp = getattr(self.pb, name + "Response")
            self.stubs[name] = self.channel.unary_unary("/runtime.v1.RuntimeService/" + name,
                                                        request_serializer=lambda m: m.SerializeToString(),
                                                        response_deserializer=resp.FromString)

    def call(self, name, timeout=120, **fields):
        req = getattr(self.pb, name + "Request")(**fields)
        return self.stubs[name](req, timeout=timeout)

    def version(self):
        return self.call("Version", version="v1")

    def run_sandbox(self, name, namespace="default", uid=None, ports=(), handler="", attempt=0, cgroup_parent=""):
        """RunPodSandbox with the pod's metadata; ports: [(hostPort, containerPort)] over TCP on
        127.0.0.1; cgroup_parent as the kubelet sets it (a slice with the systemd driver).
        Returns the sandbox id."""
        pb = self.pb
        cfg = pb.PodSandboxConfig(
            linux=pb.LinuxPodSandboxConfig(cgroup_parent=cgroup_parent),
            metadata=pb.PodSandboxMetadata(name=name, namespace=namespace, uid=uid or "uid-" + name, attempt=attempt),
            hostname=name, labels={"pinion-test": "1"},
            port_mappings=[pb.PortMapping(protocol=pb.TCP, host_port=h, container_port=c, host_ip="127.0.0.1")
                           for h, c in ports])
        return self.call("RunPodSandbox", config=cfg, runtime_handler=handler).pod_sandbox_id

    def stop(self, sandbox_id, timeout=120):
        return self.call("StopPodSandbox", timeout=timeout, pod_sandbox_id=sandbox_id)

    def remove(self, sandbox_id):
        return self.call("RemovePodSandbox", pod_sandbox_id=sandbox_id)

    def status(self, sandbox_id, verbose=False):
        return self.call("PodSandboxStatus", pod_sandbox_id=sandbox_id, verbose=verbose)

    def netns(self, sandbox_id):
        """The sandbox's network namespace path, from the verbose status's runtime spec."""
        info = json.loads(self.status(sandbox_id, verbose=True).info["info"])
        for ns in info["runtimeSpec"]["linux"]["namespaces"]:
            if ns["type"] == "network":
                return ns["path"]
        raise AssertionError("no network namespace in %r" % info)

    def list(self):
        return list(self.call("ListPodSandbox").items)

    def close(self):
        self.channel.close()


# ---- containerd ----

CONTAINERD_TOML = '''version = 2
root = "%(dir)s/root"
state = "%(dir)s/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "%(dir)s/containerd.sock"

[ttrpc]
  address = "%(dir)s/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "%(dir)s/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%(pause)s"
  # This host's memory cgroups (v1) and the sandbox's limits: containerd may not lower the
  # OOM score adjustment below its own.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = %(netns_under_state)s
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "%(dir)s/runc"
        SystemdCgroup = %(systemd)s
    # The same runc, networked by the reference list (benchmarks: RunPodSandbox's runtime_handler).
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.reference]
      runtime_type = "io.containerd.runc.v2"
      cni_conf_dir = "%(ref_conf_dir)s"
      cni_max_conf_num = 1
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.reference.options]
        Root = "%(dir)s/runc"
        SystemdCgroup = %(systemd)s
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%(bin_dir)s"
    conf_dir = "%(conf_dir)s"
    max_conf_num = 1
'''


class Containerd:
    """containerd with its CRI plugin in its own dirs; restartable (its shims, and so the
    sandboxes, live on across a restart as on a node). socket: the agent's (None: the installed
    conflist's); systemd_cgroup: runc's systemd cgroup driver (a systemd node), else cgroupfs;
    netns_under_state: the sandboxes' network namespaces under its temp dir, else where a stock
    containerd puts them, /run/netns (the shipped unit's piniond has a /tmp of its own:
    PrivateTmp=yes); cni: more CniDirs arguments."""

    def __init__(self, socket=None, record=True, reference_cidr=None, systemd_cgroup=False, cni=None,
                 netns_under_state=True):
        self.dir = tempfile.mkdtemp(prefix="pinion-ctrd-")
        self.socket = os.path.join(self.dir, "containerd.sock")
        self.cni = CniDirs(self.dir, socket, record=record, reference_cidr=reference_cidr, **(cni or {}))
        self.config = os.path.join(self.dir, "config.toml")
        with open(self.config, "w") as f:
            f.write(CONTAINERD_TOML % {"dir": self.dir, "pause": PAUSE_IMAGE, "bin_dir": self.cni.bin_dir,
                                       "conf_dir": self.cni.conf_dir, "ref_conf_dir": self.cni.ref_conf_dir,
                                       "systemd": "true" if systemd_cgroup else "false",
                                       "netns_under_state": "true" if netns_under_state else "false"})
        self.log_file = os.path.join(self.dir, "containerd.log")
        self.proc = None
        self.cri = None
        self.netns_seen = set()
        self.seen_ids = set()  # sandboxes run through this object (their libcni cache goes at cleanup)

    def start(self):
        assert self.proc is None or self.proc.poll() is not None
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(["containerd", "--config", self.config, "--log-level", "info"],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        wait_until(lambda: self._ready(), timeout=60, desc="containerd's CRI answering")
        return self

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("containerd exited with %d:\n%s" % (self.proc.returncode, self.log_tail()))
        if not os.path.exists(self.socket):
            return False
        if self.cri is None:
            self.cri = CriClient(self.socket)
        try:
            self.cri.version()
            return True
        except self.cri.grpc.RpcError:
            return False

    def stop(self, sig=signal.SIGTERM):
        """Stops containerd alone; the shims and the sandboxes stay."""
        if self.cri:
            self.cri.close()
            self.cri = None
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)

    def restart(self):
        self.stop()
        return self.start()

    def ctr(self, *args, check=True):
        return run(["ctr", "--address", self.socket, "--namespace", "k8s.io"] + list(args), check=check)

    def import_image(self, tarball):
        self.ctr("images", "import", tarball)

    def run_sandbox(self, *a, **kw):
        sid = self.cri.run_sandbox(*a, **kw)
        self.seen_ids.add(sid)
        return sid

    def netns(self, sandbox_id):
        p = self.cri.netns(sandbox_id)
        self.netns_seen.add(p)
        return p

    def log_tail(self, n=40):
        try:
            with open(self.log_file, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def cleanup(self):
        """Removes every sandbox (through CRI, if containerd still answers), then the processes,
        mounts and dirs; failures here are logged, not raised (the agent may be down)."""
        try:
            if self.proc is None or self.proc.poll() is not None:
                self.start()
            ids = [s.id for s in self.cri.list()]
            self.seen_ids.update(ids)
            for sid in ids:
                for step in (self.cri.stop, self.cri.remove):
                    try:
                        step(sid)
                    except Exception as e:  # noqa: BLE001 -- cleanup goes on
                        diag("containerd cleanup: %s %s: %s" % (step.__name__, sid, e))
        except Exception as e:  # noqa: BLE001
            diag("containerd cleanup: %s" % e)
        self.stop(signal.SIGKILL)
        kill_pids(pids_with_arg(self.socket))  # the shims: -address <our socket>
        for p in self.netns_seen:
            subprocess.run(["umount", p], capture_output=True)
        self.cni.forget_cached_results(self.seen_ids)
        unmount_under(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- podman ----

CONTAINERS_CONF = '''[containers]
# podman's defaults exceed this host's hard limits (and raising the container's process limit to
# the caller's own hard limit is refused here too: a lower one).
default_ulimits = ["nofile=%(nofile)d:%(nofile)d", "nproc=%(nproc)d:%(nproc)d"]
netns = "bridge"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "%(dir)s/events.log"
runtime = "runc"
network_cmd_path = ""
tmp_dir = "%(dir)s/tmp"
volume_path = "%(dir)s/volumes"
static_dir = "%(dir)s/root/libpod"

[network]
network_backend = "cni"
cni_plugin_dirs = ["%(bin_dir)s"]
network_config_dir = "%(conf_dir)s"
default_network = "pinion"
'''


class Podman:
    """podman with a private root, runroot, containers.conf and CNI config dir."""

    def __init__(self, socket, record=True, reference_cidr=None):
        import resource
        self.dir = tempfile.mkdtemp(prefix="pinion-podman-")
        self.cni = CniDirs(self.dir, socket, record=record, reference_cidr=reference_cidr)
        if reference_cidr:  # podman reads every list in its one dir: the reference one beside pinion's
            shutil.copy(os.path.join(self.cni.ref_conf_dir, "10-reference.conflist"), self.cni.conf_dir)
        self.conf = os.path.join(self.dir, "containers.conf")
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        with open(self.conf, "w") as f:
            f.write(CONTAINERS_CONF % {"dir": self.dir, "bin_dir": self.cni.bin_dir, "conf_dir": self.cni.conf_dir,
                                       "nofile": min(nofile, 1 << 20), "nproc": min(nproc, 4096)})
        self.storage_conf = os.path.join(self.dir, "storage.conf")
        with open(self.storage_conf, "w") as f:
            f.write('[storage]\ndriver = "overlay"\nrunroot = "%s/runroot"\ngraphroot = "%s/root"\n'
                    % (self.dir, self.dir))
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.dir, "CONTAINERS_CONF": self.conf,
                    "CONTAINERS_STORAGE_CONF": self.storage_conf, "TMPDIR": os.path.join(self.dir, "tmp")}
        os.makedirs(self.env["TMPDIR"])
        self.seen_ids = set()  # containers of this podman (their libcni cache goes at cleanup)

    def cmd(self, *args):
        return ["podman", "--root", os.path.join(self.dir, "root"), "--runroot", os.path.join(self.dir, "runroot"),
                "--storage-driver", "overlay", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
                "--runtime", "runc", "--network-config-dir", self.cni.conf_dir] + list(args)

    def __call__(self, *args, check=True, timeout=120):
        return run(self.cmd(*args), check=check, timeout=timeout, env=self.env)

    def load(self, tarball):
        """podman load, in a mount namespace of its own with a tmpfs on /var/lib: podman 4.3 keeps
        its blob info cache in /var/lib/containers/cache whatever its root (only copying images
        touches it; running them does not)."""
        cmd = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
               'mount -t tmpfs pinion-test /var/lib && exec "$@"', "sh"] + self.cmd("load", "-i", tarball)
        run(cmd, env=self.env)

    def run_container(self, name, *args, image=BUSYBOX_IMAGE, command=("sleep", "3600"), check=True):
        """podman run -d --name NAME ARGS IMAGE COMMAND (on the pinion network unless ARGS name one)."""
        net = [] if any(a.startswith("--network") for a in args) else ["--network", "pinion"]
        r = self("run", "-d", "--name", name, *net, *args, image, *command, check=check)
        if r.returncode == 0:
            self.seen_ids.add(r.stdout.strip())
        return r

    def cleanup(self):
        try:
            self.seen_ids.update(self("ps", "-a", "-q", "--no-trunc", check=False).stdout.split())
            self("rm", "-a", "-f", "-t", "0", check=False, timeout=180)
        except Exception as e:  # noqa: BLE001 -- cleanup goes on
            diag("podman cleanup: %s" % e)
        self.cni.forget_cached_results(self.seen_ids)
        kill_pids(pids_with_arg(self.dir))  # conmon and anything else of ours still running
        unmount_under(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- the agent side ----

def allocations(agent):
    return podnet_status(agent)["details"]["pool"]["allocations"]


def allocated(agent):
    return podnet_status(agent)["details"]["pool"]["allocated"]


def allocation_of(agent, container_id):
    for a in allocations(agent):
        if a.get("containerID") == container_id:
            return a
    return None


def agent_warnings(agent):
    """The agent's log lines at warning level or worse (text format: "<level>: message"): a
    healthy run has none."""
    return [line for line in log_lines(agent.log_text())
            if re.match(r"^(warning|error|crit|alert|emerg):", line)]


def podnet_agent_config(cidr=None):
    return {"network": {"pod-cidr": cidr or free_pod_cidr(), "address-quarantine": "0s"}}


def dual_stack_agent_config():
    """A free IPv4 and a free IPv6 pod CIDR: every pod gets a /32 and a /128."""
    return podnet_agent_config("%s, %s" % (free_pod_cidr(), free_pod_cidr6()))


def pool_allocated(agent):
    """(IPv4 addresses allocated, IPv6 addresses allocated) in the agent's pool."""
    pool = podnet_status(agent)["details"]["pool"]
    return pool["ipv4"]["allocated"], pool["ipv6"]["allocated"]


def ping_from(netns_path, dst, timeout=3):
    """An ICMP echo (ICMPv6 for an IPv6 dst) from inside the namespace at netns_path (a
    runtime's, not `ip netns`')."""
    probe = _ICMP6 if ":" in dst else _ICMP
    cmd = ["nsenter", "--net=" + netns_path, PYTHON, "-c", probe, dst, str(timeout)]
    return subprocess.run(cmd, capture_output=True, timeout=timeout + 10).returncode == 0


def http_get(host, port, timeout=5):
    """The body of GET / (None when nothing answers)."""
    import http.client
    try:
        c = http.client.HTTPConnection(host, port, timeout=timeout)
        c.request("GET", "/")
        body = c.getresponse().read().decode(errors="replace")
        c.close()
        return body
    except OSError:
        return None


def wait_http(host, port, want, timeout=20):
    last = [None]

    def probe():
        last[0] = http_get(host, port, timeout=2)
        return last[0] is not None and want in last[0]
    try:
        wait_until(probe, timeout=timeout, interval=0.2, desc="HTTP %s:%d" % (host, port))
    except AssertionError:
        raise AssertionError("no %r from http://%s:%d/ (last answer: %r)" % (want, host, port, last[0]))
