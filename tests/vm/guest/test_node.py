# SPDX-License-Identifier: MIT
"""The guest is the node the rest of the suite assumes: systemd as PID 1, the unified cgroup v2
hierarchy with the controllers pinion uses, and pinion installed where `make install` with
prefix /usr puts it, its binaries finding every library they load."""

import os

from conftest import run


def test_systemd_is_pid_1():
    assert os.readlink("/proc/1/exe").endswith("/systemd")
    assert run("systemctl", "is-system-running", check=False).stdout.strip() in ("running", "degraded", "starting")


def test_cgroup_v2_with_the_controllers_pinion_uses():
    assert run("stat", "-f", "-c", "%T", "/sys/fs/cgroup").stdout.strip() == "cgroup2fs"
    controllers = open("/sys/fs/cgroup/cgroup.controllers").read().split()
    for c in ("memory", "cpu", "io", "pids"):
        assert c in controllers
    assert os.path.exists("/sys/fs/cgroup/system.slice/memory.pressure")


def test_pinion_installed_by_make_install():
    for path in ("/usr/sbin/piniond", "/usr/bin/pinionctl", "/usr/lib/cni/pinion-cni",
                 "/usr/lib/systemd/system/piniond.service", "/usr/lib/systemd/system/piniond.socket",
                 "/etc/pinion/pinion.conf"):
        assert os.path.exists(path), path
    for binary in ("/usr/sbin/piniond", "/usr/bin/pinionctl", "/usr/lib/cni/pinion-cni"):
        assert "not found" not in run("ldd", binary).stdout, binary
    assert run("/usr/sbin/piniond", "--check-config").returncode == 0
