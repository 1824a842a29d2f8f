# SPDX-License-Identifier: MIT
"""units/kubernetes/install-cni, run as the script it is: in a temp dir, with a PATH that holds only
the shell tools it needs and fake containerd/crio/podman printing the versions a test picks, fake
chained plugins answering VERSION, and the real pinion-cni. It must write the newest cniVersion the
runtime and every plugin of the list accept, install atomically, and refuse a bad request without
writing anything."""

import json
import os
import shutil
import stat
import subprocess

import pytest

from pinion_testlib import BUILDDIR, SRCDIR

SCRIPT = os.path.join(SRCDIR, "units", "kubernetes", "install-cni")
CONFLIST = os.path.join(SRCDIR, "conf", "cni", "10-pinion.conflist")
PINION_CNI = os.path.join(BUILDDIR, "pinion-cni")
TOOLS = ["sh", "awk", "grep", "sed", "tr", "head", "cp", "chmod", "mv", "basename", "cat"]

# What the reference plugins of each release answer to VERSION.
UP_TO_1_0 = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0"]
UP_TO_1_1 = UP_TO_1_0 + ["1.1.0"]


def write_exec(path, text):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + text)
    os.chmod(path, 0o755)


class Node:
    """A node's directories and tools, all under tmp."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.tools = os.path.join(tmp, "tools")
        self.bin = os.path.join(tmp, "opt-cni-bin")
        self.conf = os.path.join(tmp, "etc-cni-net.d")
        for d in (self.tools, self.bin, self.conf):
            os.makedirs(d)
        for t in TOOLS:
            os.symlink(shutil.which(t), os.path.join(self.tools, t))
        self.portmap(UP_TO_1_0)

    def runtime(self, name, output):
        write_exec(os.path.join(self.tools, name), "cat <<'EOF'\n%s\nEOF\n" % output)

    def portmap(self, versions):
        answer = json.dumps({"cniVersion": "0.4.0", "supportedVersions": versions})
        write_exec(os.path.join(self.bin, "portmap"),
                   '[ "$CNI_COMMAND" = VERSION ] || exit 1\ncat >/dev/null\necho \'%s\'\n' % answer)

    def run(self, *args, **env):
        e = {"PATH": self.tools, "CNI_BIN_DIR": self.bin, "CNI_CONF_DIR": self.conf, "PINION_CNI": PINION_CNI,
             "PINION_CONFLIST": CONFLIST}
        e.update(env)
        return subprocess.run([os.path.join(self.tools, "sh"), SCRIPT] + list(args), env=e, capture_output=True,
                              text=True, timeout=60)

    def installed(self):
        with open(os.path.join(self.conf, "10-pinion.conflist")) as f:
            return json.load(f)

    def version(self, *args, **env):
        p = self.run(*args, **env)
        assert p.returncode == 0, p
        return self.installed()["cniVersion"]


@pytest.fixture
def node(tmp_dir):
    if not os.access(PINION_CNI, os.X_OK):
        pytest.skip("pinion-cni is not built")
    return Node(tmp_dir)


def test_debian_12_containerd_and_podman_get_1_0_0(node):
    node.runtime("containerd", "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3")
    node.runtime("podman", "podman version 4.3.1")
    p = node.run()
    assert p.returncode == 0, p
    assert "containerd 1.6.20" in p.stdout and "podman 4.3.1" in p.stdout, p
    got = node.installed()
    shipped = json.load(open(CONFLIST))
    assert got["cniVersion"] == "1.0.0"
    assert got["plugins"] == shipped["plugins"] and got["name"] == shipped["name"]
    mode = os.stat(os.path.join(node.bin, "pinion-cni")).st_mode
    assert stat.S_IMODE(mode) == 0o755
    assert open(os.path.join(node.bin, "pinion-cni"), "rb").read() == open(PINION_CNI, "rb").read()
    assert stat.S_IMODE(os.stat(os.path.join(node.conf, "10-pinion.conflist")).st_mode) == 0o644
    assert not [f for f in os.listdir(node.conf) + os.listdir(node.bin) if ".tmp." in f]


def test_containerd_2_gets_1_1_0_when_the_chained_plugins_speak_it(node):
    node.runtime("containerd", "containerd github.com/containerd/containerd/v2 v2.0.4 1a43cb6a")
    node.portmap(UP_TO_1_1)
    assert node.version() == "1.1.0"
    # With Debian 12's portmap (up to 1.0.0) in the list, 1.0.0: a newer one would fail portmap.
    node.portmap(UP_TO_1_0)
    assert node.version() == "1.0.0"


def test_the_oldest_runtime_on_the_node_decides(node):
    node.portmap(UP_TO_1_1)
    node.runtime("containerd", "containerd github.com/containerd/containerd/v2 v2.1.0 abc")
    node.runtime("podman", "podman version 3.4.4")
    assert node.version() == "0.4.0"


@pytest.mark.parametrize("runtime,expected", [("containerd://2.0.4", "1.1.0"), ("containerd://1.7.24", "1.0.0"),
                                              ("containerd://1.5.9", "0.4.0"), ("cri-o://1.30.2", "1.0.0"),
                                              ("cri-o://1.22.0", "0.4.0"), ("podman://4.3.1", "1.0.0")])
def test_runtime_named_by_the_daemonset(node, runtime, expected):
    node.portmap(UP_TO_1_1)
    node.runtime("containerd", "containerd github.com/containerd/containerd 1.4.0 x")  # not asked: PINION_RUNTIME wins
    assert node.version(PINION_RUNTIME=runtime) == expected


def test_no_runtime_found_means_1_0_0(node):
    node.portmap(UP_TO_1_1)
    p = node.run()
    assert p.returncode == 0 and "no containerd, crio or podman" in p.stdout, p
    assert node.installed()["cniVersion"] == "1.0.0"


def test_an_explicit_version_is_taken_and_a_bad_one_writes_nothing(node):
    node.runtime("containerd", "containerd github.com/containerd/containerd 1.6.20 x")
    assert node.version("--cni-version", "0.4.0") == "0.4.0"
    assert node.version(PINION_CNI_VERSION="1.1.0") == "1.1.0"
    os.unlink(os.path.join(node.conf, "10-pinion.conflist"))
    os.unlink(os.path.join(node.bin, "pinion-cni"))
    for args, env in ((["--cni-version", "9.9.9"], {}), ([], {"PINION_CNI_VERSION": "1.2.0"}),
                      ([], {"PINION_RUNTIME": "docker://24.0.0"}), (["--bogus"], {})):
        p = node.run(*args, **env)
        assert p.returncode != 0 and "install-cni:" in p.stderr, (args, env, p)
        assert sorted(os.listdir(node.conf)) == [] and "pinion-cni" not in os.listdir(node.bin), (args, env)


def test_chained_plugins_are_also_found_in_cni_path(node):
    """Debian's reference plugins live in /usr/lib/cni, not in the bin dir pinion-cni goes to."""
    node.runtime("containerd", "containerd github.com/containerd/containerd/v2 v2.0.4 x")
    os.unlink(os.path.join(node.bin, "portmap"))
    lib = os.path.join(node.tmp, "usr-lib-cni")
    os.makedirs(lib)
    answer = json.dumps({"cniVersion": "0.4.0", "supportedVersions": UP_TO_1_0})
    write_exec(os.path.join(lib, "portmap"), "cat >/dev/null\necho '%s'\n" % answer)
    p = node.run()
    assert p.returncode == 0 and "warning" in p.stdout and node.installed()["cniVersion"] == "1.1.0", p
    assert node.version(CNI_PATH="/nonexistent:" + lib) == "1.0.0"
