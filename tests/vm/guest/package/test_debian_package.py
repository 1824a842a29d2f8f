# SPDX-License-Identifier: MIT
"""The Debian packages (debian/, built on the host by tests/integration/test_debian_package.py
and shipped here with `tests/vm/run --debs`) on a node where nothing else installed pinion:
`dpkg -i` enables and starts piniond.socket and piniond.service, the agent answers on its socket
with no warning logged, pinionctl and pinion-cni work from where the packages put them, a
reinstall keeps the admin's change to the conffile and restarts the agent, and `dpkg --purge`
(changed conffile and all) leaves no file, unit, enablement link, process or state behind."""

import glob
import os

import pytest

from conftest import SOCKET, api, run, systemctl, unit_property, wait_for

DEBS = os.environ.get("PINION_VM_DEBS", "")
PACKAGES = ("pinion", "pinion-cni")
# What purge must leave absent (besides every path dpkg -L listed).
GONE = ["/etc/pinion", "/var/lib/pinion", "/run/pinion", "/usr/lib/cni/pinion-cni",
        "/etc/systemd/system/multi-user.target.wants/piniond.service",
        "/etc/systemd/system/sockets.target.wants/piniond.socket",
        "/var/lib/systemd/deb-systemd-helper-enabled/piniond.service.dsh-also",
        "/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/piniond.service",
        "/var/lib/systemd/deb-systemd-helper-enabled/sockets.target.wants/piniond.socket"]


def _installed(pkg):
    p = run("dpkg-query", "-W", "-f=${db:Status-Abbrev}", pkg, check=False)
    return p.returncode == 0 and p.stdout.startswith("i")


@pytest.fixture
def packages():
    debs = sorted(d for d in glob.glob(os.path.join(DEBS, "*.deb")) if "-dbgsym_" not in d)
    names = sorted(os.path.basename(d).split("_")[0] for d in debs)
    assert names == sorted(PACKAGES), debs
    assert not os.path.exists("/usr/sbin/piniond"), "pinion is already installed in the guest"
    try:
        yield debs
    finally:
        for pkg in PACKAGES:
            if _installed(pkg):
                run("dpkg", "--purge", pkg, check=False)


def _files_of(pkg):
    return [f for f in run("dpkg", "-L", pkg).stdout.splitlines() if f.strip()]


def test_install_start_answer_purge(packages):
    p = run("dpkg", "-i", *packages, timeout=300)
    assert "warning" not in (p.stdout + p.stderr).lower(), p.stdout + p.stderr

    # The maintainer scripts enabled and started both units.
    for unit in ("piniond.socket", "piniond.service"):
        assert systemctl("is-enabled", unit, check=False).stdout.strip() == "enabled", unit
    assert unit_property("piniond.socket", "ActiveState") == "active"
    systemctl("start", "piniond.service")
    assert unit_property("piniond.service", "ActiveState") == "active"
    status = systemctl("status", "piniond.service", check=False).stdout
    assert "Active: active (running)" in status, status
    assert "/usr/sbin/piniond --config /etc/pinion/pinion.conf" in status, status

    code, body = api("/v1/health")
    assert code == 200, body
    p = run("pinionctl", "health", check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert os.path.realpath(SOCKET).startswith("/run/pinion/sockets/")

    # The plugin runs from where the package put it (a runtime's VERSION query).
    p = run("/usr/lib/cni/pinion-cni", check=False, input='{"cniVersion": "1.0.0"}',
            env={"CNI_COMMAND": "VERSION", "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0 and "supportedVersions" in p.stdout, p.stdout + p.stderr

    conffiles = run("dpkg-query", "-W", "-f=${Conffiles}", "pinion").stdout
    assert "/etc/pinion/pinion.conf " in conffiles, conffiles
    # A healthy start logs no warning.
    warnings = run("journalctl", "-q", "-o", "cat", "-u", "piniond.service", "-p", "warning").stdout
    assert not warnings.strip(), warnings

    # Reinstalling (what an upgrade does) keeps the admin's change to the conffile and restarts
    # the agent, which answers again.
    with open("/etc/pinion/pinion.conf", "a") as f:
        f.write("\n# changed by the admin\n")
    pid = unit_property("piniond.service", "MainPID")
    p = run("dpkg", "-i", *packages, timeout=300)
    assert "warning" not in (p.stdout + p.stderr).lower(), p.stdout + p.stderr
    with open("/etc/pinion/pinion.conf") as f:
        assert f.read().endswith("# changed by the admin\n")
    assert unit_property("piniond.service", "ActiveState") == "active"
    assert unit_property("piniond.service", "MainPID") != pid
    wait_for("the agent to answer after the upgrade", lambda: api("/v1/health")[0] == 200, timeout=60)

    files = [f for pkg in PACKAGES for f in _files_of(pkg) if not os.path.isdir(f)]

    run("dpkg", "--purge", "pinion-cni", "pinion", timeout=300)
    for pkg in PACKAGES:
        assert not _installed(pkg), pkg
    left = [f for f in files + GONE if os.path.lexists(f)]
    assert not left, left
    listed = systemctl("list-unit-files", "piniond.service", "piniond.socket", "--no-legend", check=False).stdout
    assert not listed.strip(), listed
    wait_for("piniond to exit", lambda: run("pgrep", "-x", "piniond", check=False).returncode == 1, timeout=30)
