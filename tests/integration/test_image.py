# SPDX-License-Identifier: MIT
"""`make image`: localhost/pinion:VERSION built with podman from units/kubernetes/Containerfile
without any registry (FROM scratch, one layer); `piniond --version` runs in it; the agent runs in
it on a demo configuration (a static pod, identity's local CA) mounted from the host and answers
/v1/health through its socket in a mounted directory, with no warning in its log; install-cni,
the DaemonSet's init container, installs the plugin and the conflist into mounted host
directories with the image's own shell; the image holds only the libraries the binaries load; and
`make image` without podman fails with a message that says what to install.

podman runs with a private store and containers.conf (runc, ulimits this host allows) and no
network: the agent is reached through the mounted socket directory only."""

import json
import os
import re
import resource
import shutil
import subprocess
import tempfile

import pytest

from pinion_testlib import BUILDDIR, SRCDIR, T, clean_env, diag, log_lines, sanitized_build

VERSION = re.search(r"AC_INIT\(\[pinion\],\s*\[([^]]+)\]",
                    open(os.path.join(SRCDIR, "configure.ac")).read()).group(1)
IMAGE = "localhost/pinion:" + VERSION

CONTAINERS_CONF = """[containers]
# podman's default ulimits exceed this host's hard limits.
default_ulimits = ["nofile=%(nofile)d:%(nofile)d", "nproc=%(nproc)d:%(nproc)d"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "%(dir)s/events.log"
# crun refuses this host's hybrid cgroups.
runtime = "runc"
tmp_dir = "%(dir)s/tmp"
"""

# The demo's agent and identity sections (scripts/demo), with the image's paths: one static pod
# from pods-dir, certificates from a local CA in the state volume.
DEMO_CONF = """[agent]
node-name=image-node
pods-dir=/etc/pinion/pods.d
log-format=text

[identity]
signer=local
trust-domain=image.example
ca-dir=/var/lib/pinion/ca
"""


def _make_env(extra=None):
    env = {"MAKEFLAGS": None, "MFLAGS": None, "MAKELEVEL": None, "DESTDIR": None}
    env.update(extra or {})
    return clean_env(env)


class Podman:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="pinion-image-")
        os.mkdir(os.path.join(self.dir, "tmp"))
        self.conf = os.path.join(self.dir, "containers.conf")
        with open(self.conf, "w") as f:
            f.write(CONTAINERS_CONF % {"dir": self.dir, "nofile": min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 1 << 20),
                                       "nproc": min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 4096)})
        self.argv = ["podman", "--root", os.path.join(self.dir, "root"), "--runroot", os.path.join(self.dir, "runroot")]
        self.env = _make_env({"CONTAINERS_CONF": self.conf})

    def run(self, *args, check=True, timeout=120):
        p = subprocess.run(self.argv + list(args), capture_output=True, text=True, env=self.env,
                           stdin=subprocess.DEVNULL, timeout=T(timeout))
        if check:
            assert p.returncode == 0, "podman %s: rc=%d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr)
        return p

    def cleanup(self):
        for args in (("rm", "-af", "-t", "0"), ("rmi", "-af"), ("system", "reset", "-f")):
            p = self.run(*args, check=False)
            if p.returncode != 0:
                diag("podman %s: %s" % (" ".join(args), p.stderr.strip()))
        subprocess.run(["umount", "-R", os.path.join(self.dir, "root")], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def image():
    if sanitized_build():
        pytest.skip("the image is the release build's: checked in the normal build's suite")
    if not shutil.which("podman"):
        pytest.skip("podman is not installed (scripts/deps installs it)")
    podman = Podman()
    try:
        p = subprocess.run(["make", "-s", "-C", BUILDDIR, "image", "PODMAN=" + " ".join(podman.argv)],
                           capture_output=True, text=True, env=podman.env, stdin=subprocess.DEVNULL,
                           timeout=T(1200))  # a build configured for /usr/local builds the image's again
        assert p.returncode == 0, "make image: rc=%d\n%s%s" % (p.returncode, p.stdout[-4000:], p.stderr[-4000:])
        assert ("built " + IMAGE) in p.stdout, p.stdout
        yield podman
    finally:
        podman.cleanup()


def test_image_is_one_layer_from_scratch(image):
    (info,) = json.loads(image.run("image", "inspect", IMAGE).stdout)
    assert info["Config"]["Entrypoint"] == ["/usr/sbin/piniond"]
    assert info["Config"]["Cmd"] == ["--config", "/etc/pinion/pinion.conf"]
    assert len(info["RootFS"]["Layers"]) == 1, info["RootFS"]
    # FROM scratch: no base image (podman names the base's reference here).
    assert info["Annotations"].get("org.opencontainers.image.base.name") == "", info["Annotations"]
    # and no intermediate image left in the store (podman build --layers=false).
    assert not info.get("Parent"), info.get("Parent")
    ids = image.run("images", "-a", "-q", "--no-trunc").stdout.split()
    assert ids == [info["Id"]] or ids == ["sha256:" + info["Id"]], ids
    diag("image %s: %.1f MB" % (IMAGE, info["Size"] / 1e6))


def test_piniond_version_runs_in_the_image(image):
    p = image.run("run", "--rm", "--network", "none", IMAGE, "--version")
    assert p.stdout.strip() == "piniond " + VERSION, p.stdout + p.stderr


def test_bird_runs_in_the_image(image):
    """The DaemonSet's bird container (routing = bgp) runs BIRD from this image."""
    if not os.path.exists("/usr/sbin/bird"):
        pytest.skip("bird2 is not installed on the build machine (scripts/deps installs it)")
    p = image.run("run", "--rm", "--network", "none", "--entrypoint", "/usr/sbin/bird", IMAGE, "--version")
    assert re.search(r"BIRD version 2\.", p.stdout + p.stderr), p.stdout + p.stderr


def test_agent_runs_the_demo_config_and_answers_through_the_mounted_socket(image):
    d = tempfile.mkdtemp(prefix="pinion-image-run-")
    name = "pinion-image-test-%d" % os.getpid()
    try:
        run_dir, state, conf = (os.path.join(d, x) for x in ("run", "state", "conf"))
        for x in (run_dir, state, os.path.join(conf, "pods.d")):
            os.makedirs(x, mode=0o755)
        os.chmod(run_dir, 0o755)
        with open(os.path.join(conf, "pinion.conf"), "w") as f:
            f.write(DEMO_CONF)
        shutil.copy(os.path.join(SRCDIR, "conf", "pods.d", "example-web.json.sample"),
                    os.path.join(conf, "pods.d", "web.json"))
        image.run("run", "-d", "--name", name, "--network", "none",
                  "-v", run_dir + ":/run/pinion", "-v", state + ":/var/lib/pinion",
                  "-v", conf + ":/etc/pinion:ro", IMAGE)
        sock = os.path.join(run_dir, "sockets", "pinion.sock")

        def health():
            p = subprocess.run(["curl", "-sS", "--max-time", "5", "--unix-socket", sock, "http://localhost/v1/health"],
                               capture_output=True, text=True, timeout=T(15))
            return p.stdout if p.returncode == 0 and p.stdout else None

        body = None
        for _ in range(int(T(300))):
            body = health()
            if body or image.run("inspect", "-f", "{{.State.Running}}", name).stdout.strip() != "true":
                break
            subprocess.run(["sleep", "0.1"])
        logs = image.run("logs", name).stderr + image.run("logs", name).stdout
        assert body, "no answer on %s; log:\n%s" % (sock, logs)
        health_doc = json.loads(body)
        assert health_doc["status"] == "ok" and health_doc["version"] == VERSION, body
        assert health_doc["node"] == "image-node", body
        # pinionctl in the image, through the same socket: the static pod is there.
        p = image.run("exec", name, "pinionctl", "pods")
        assert re.search(r"^default\s+web\s+yes", p.stdout, re.M), p.stdout
        # identity's local CA works with the image's libcrypto: the node certificate is issued.
        assert os.path.isdir(os.path.join(state, "ca")), logs
        assert "node certificate: requesting → valid" in logs, logs
        assert not [line for line in log_lines(logs) if re.match(r"(warning|error|crit|alert|emerg):", line)], logs
        image.run("stop", "-t", "20", name)
        code = image.run("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
        assert code == "0", image.run("logs", name).stderr
    finally:
        image.run("rm", "-f", "-t", "0", name, check=False)
        shutil.rmtree(d, ignore_errors=True)


def test_install_cni_runs_with_the_image_shell(image):
    d = tempfile.mkdtemp(prefix="pinion-image-cni-")
    try:
        bindir, confdir = os.path.join(d, "bin"), os.path.join(d, "net.d")
        os.mkdir(bindir)
        os.mkdir(confdir)
        p = image.run("run", "--rm", "--network", "none", "--entrypoint", "/usr/share/pinion/install-cni",
                      "-v", bindir + ":/host/opt/cni/bin", "-v", confdir + ":/host/etc/cni/net.d", IMAGE)
        assert "installed" in p.stdout, p.stdout + p.stderr
        assert sorted(os.listdir(bindir)) == ["pinion-cni"]
        assert sorted(os.listdir(confdir)) == ["10-pinion.conflist"]
        # The plugin it installed runs on the host (static with musl, else libc alone).
        v = subprocess.run([os.path.join(bindir, "pinion-cni")], input='{"cniVersion": "1.0.0"}',
                           env={"CNI_COMMAND": "VERSION"}, capture_output=True, text=True, timeout=T(30))
        assert v.returncode == 0 and "supportedVersions" in v.stdout, v.stdout + v.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_image_holds_only_what_the_binaries_load(image):
    """image-context/rootfs (what make image copied in): every shared library is one that a
    binary loads (ldd on the installed, stripped binaries; busybox is static), and no package
    manager, man page or unit."""
    root = os.path.join(BUILDDIR, "image-context", "rootfs")
    loaded = set()
    binaries = ["usr/sbin/piniond", "usr/bin/pinionctl", "usr/libexec/cni/pinion-cni"]
    # BIRD (routing = bgp) is in the image when the build machine has bird2.
    binaries += [b for b in ("usr/sbin/bird", "usr/sbin/birdc") if os.path.exists(os.path.join(root, b))]
    assert os.path.exists(os.path.join(root, "usr/sbin/bird")) == os.path.exists("/usr/sbin/bird")
    for b in binaries:
        p = subprocess.run(["ldd", os.path.join(root, b)], capture_output=True, text=True)
        assert p.returncode == 0 or "not a dynamic executable" in p.stdout + p.stderr, p.stdout + p.stderr
        out = p.stdout
        loaded |= {os.path.basename(x) for x in re.findall(r"(/\S+) \(0x", out)}
    present = set()
    for dirpath, _, files in os.walk(root):
        for f in files:
            if ".so" in f:
                present.add(f)
    assert present == loaded, "extra %s, missing %s" % (sorted(present - loaded), sorted(loaded - present))
    for absent in ("usr/bin/apt", "usr/bin/dpkg", "var/lib/dpkg", "usr/share/man", "usr/lib/systemd"):
        assert not os.path.lexists(os.path.join(root, absent)), absent


def test_make_image_without_podman_says_what_to_install(tmp_path):
    p = subprocess.run(["make", "-s", "-C", BUILDDIR, "image", "PODMAN=pinion-no-such-podman --root /nonexistent"],
                       capture_output=True, text=True, env=_make_env(), stdin=subprocess.DEVNULL, timeout=T(300))
    assert p.returncode != 0
    assert "make image: 'pinion-no-such-podman' not found: apt-get install podman" in p.stderr, p.stderr
