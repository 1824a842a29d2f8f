# SPDX-License-Identifier: MIT
"""debian/: `dpkg-buildpackage -us -uc -b` builds the pinion and pinion-cni packages from a copy
of this tree (once, shared by every test here); lintian finds no error and no warning that a
debian/*.lintian-overrides does not justify; the packages hold the files README.md's Install
section names, with /etc/pinion/pinion.conf a conffile and both units enabled by the maintainer
scripts; and in the VM suite's guest (tests/vm/run --debs) they install, the service starts and
answers on its socket, and purge removes them; and the previous release's packages (the release
tests/fixtures/state-v1 was made by, built the same way from `git archive`) upgraded in place to
these with pods attached loses nothing (tests/vm/guest/package/).

The package is built from source with Debian's flags whatever PINION_BUILDDIR is: it runs in
the normal build's suite only, not again in the sanitizer build's."""

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from pinion_testlib import SRCDIR, T, clean_env, sanitized_build

VERSION = re.search(r"AC_INIT\(\[pinion\],\s*\[([^]]+)\]",
                    open(os.path.join(SRCDIR, "configure.ac")).read()).group(1)

# Every file (not directory) each package holds; README.md's Install section names them.
FILES = {
    "pinion": {
        "/usr/sbin/piniond", "/usr/bin/pinionctl",
        "/etc/pinion/pinion.conf", "/etc/pinion/pods.d/example-web.json.sample",
        "/lib/systemd/system/piniond.service", "/lib/systemd/system/piniond.socket",
        "/usr/share/man/man1/pinionctl.1.gz", "/usr/share/man/man5/pinion.conf.5.gz",
        "/usr/share/man/man8/piniond.8.gz",
        "/usr/share/bash-completion/completions/pinionctl",
        "/etc/iproute2/rt_protos.d/pinion.conf",
        "/usr/share/pinion/bird/pinion-node.conf", "/usr/share/pinion/bird/route-reflector.conf",
        "/usr/share/doc/pinion/changelog.gz", "/usr/share/doc/pinion/copyright",
    },
    "pinion-cni": {
        "/usr/lib/cni/pinion-cni", "/usr/share/pinion-cni/10-pinion.conflist",
        "/usr/share/man/man8/pinion-cni.8.gz",
        "/usr/share/doc/pinion-cni/README.Debian",
        "/usr/share/doc/pinion-cni/changelog.gz", "/usr/share/doc/pinion-cni/copyright",
        "/usr/share/lintian/overrides/pinion-cni",
    },
}


def _copy_tree(dest):
    """The files of this checkout (tracked and untracked, not ignored: no build directory, no
    in-tree configure output) copied to dest."""
    p = subprocess.run(["git", "-C", SRCDIR, "ls-files", "-z", "-co", "--exclude-standard"],
                       capture_output=True, timeout=T(60))
    if p.returncode == 0:
        for rel in filter(None, p.stdout.decode().split("\0")):
            src = os.path.join(SRCDIR, rel)
            if os.path.lexists(src) and not os.path.isdir(src):
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)
        return
    # Not a git checkout (an unpacked tarball): everything but what a build leaves.
    shutil.copytree(SRCDIR, dest, symlinks=True, ignore=shutil.ignore_patterns(
        "build*", ".git", "autom4te.cache", "config.status", "config.log", "Makefile", "*.o", "*.a"))


PREVIOUS_RELEASE = json.load(open(os.path.join(SRCDIR, "tests", "fixtures", "state-v1",
                                             "fixture.json")))["release"]


def _build_env(options="nocheck parallel=2"):
    return clean_env({"DEB_BUILD_OPTIONS": options, "MAKEFLAGS": None, "MFLAGS": None,
                      "MAKELEVEL": None, "DESTDIR": None})


def _buildpackage(src, log_path, options="nocheck parallel=2"):
    with open(log_path, "w") as log:
        p = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, stdout=log,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_build_env(options),
                           timeout=T(1200))
    if p.returncode != 0:
        with open(log_path) as log:
            raise AssertionError("dpkg-buildpackage failed:\n" + log.read()[-6000:])


def _previous_release_debs(top):
    """The previous release's packages in top/previous, or None where this checkout has no git
    history holding it (an unpacked tarball, a shallow clone)."""
    src = os.path.join(top, "previous-src", "pinion-%s" % VERSION)
    os.makedirs(src)
    archive = subprocess.run(["git", "-C", SRCDIR, "archive", PREVIOUS_RELEASE], capture_output=True,
                             timeout=T(120))
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-C", src, "-xf", "-"], input=archive.stdout, check=True, timeout=T(120))
    # What the upgrade needs of that release is its behaviour and its state, not its speed or
    # its debug symbols: built without optimisation and unstripped, in about half the time.
    _buildpackage(src, os.path.join(top, "previous-build.log"), "nocheck noopt nostrip parallel=2")
    out = os.path.join(top, "previous")
    os.mkdir(out)
    for deb in glob.glob(os.path.join(top, "previous-src", "*.deb")):
        if "-dbgsym_" not in deb:
            shutil.copy(deb, out)
    return out


@pytest.fixture(scope="module")
def built():
    if sanitized_build():
        pytest.skip("the package builds with Debian's flags, not PINION_BUILDDIR's: checked in the normal build's suite")
    for tool in ("dpkg-buildpackage", "dh", "lintian"):
        if not shutil.which(tool):
            pytest.skip("%s is not installed (scripts/deps installs it)" % tool)
    top = tempfile.mkdtemp(prefix="pinion-deb-")
    try:
        src = os.path.join(top, "pinion-%s" % VERSION)
        _copy_tree(src)
        p = subprocess.run(["dpkg-checkbuilddeps"], cwd=src, capture_output=True, text=True,
                           env=_build_env(), timeout=T(60))
        assert p.returncode == 0, p.stdout + p.stderr
        _buildpackage(src, os.path.join(top, "build.log"))
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _deb(top, pkg):
    (path,) = glob.glob(os.path.join(top, "%s_%s_*.deb" % (pkg, VERSION)))
    return path


def _run(*argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=T(300), **kw)


def test_versions_are_configure_acs():
    p = _run("dpkg-parsechangelog", "-l", os.path.join(SRCDIR, "debian", "changelog"), "-S", "Version")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == VERSION, "debian/changelog has %s, configure.ac %s" % (p.stdout.strip(), VERSION)


def test_build_depends_are_what_scripts_deps_installs():
    """A clean Debian 12 with build-essential and `scripts/deps --build-only` builds the package
    (dpkg-checkbuilddeps passed in the fixture on this machine; this holds the two lists equal)."""
    with open(os.path.join(SRCDIR, "scripts", "deps")) as f:
        m = re.search(r"^build_pkgs=\(([^)]*)\)", f.read(), re.M)
    deps = set(m.group(1).split())
    with open(os.path.join(SRCDIR, "debian", "control")) as f:
        text = f.read()
    field = re.search(r"^Build-Depends:(.*?)^\S", text, re.M | re.S).group(1)
    build_depends = {re.split(r"[\s(]", d.strip())[0] for d in field.split(",") if d.strip()}
    toolchain = {"gcc", "make", "autoconf", "automake", "libtool"}  # build-essential, debhelper
    assert build_depends - {"debhelper-compat"} == deps - toolchain


def test_lintian_reports_nothing_unjustified(built):
    p = _run("lintian", "--info", "--pedantic", "--show-overrides", "--tag-display-limit", "0",
             glob.glob(os.path.join(built, "*.changes"))[0])
    lines = p.stdout.splitlines()
    assert not [x for x in lines if re.match(r"[EW]: ", x)], p.stdout
    # Every override is still needed (an unused one hides nothing and misleads).
    assert not [x for x in lines if re.search(r"\b(unused|mismatched)-override\b", x)], p.stdout
    assert p.returncode == 0, p.stdout + p.stderr
    # Each override says why, in a comment right above it.
    for path in glob.glob(os.path.join(SRCDIR, "debian", "*lintian-overrides")):
        with open(path) as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines):
            if line.strip() and not line.startswith("#"):
                assert i > 0 and lines[i - 1].startswith("#"), "%s: %r has no comment" % (path, line)


@pytest.mark.parametrize("pkg", sorted(FILES))
def test_package_files(built, pkg):
    deb = _deb(built, pkg)
    listing = _run("dpkg-deb", "-c", deb).stdout.splitlines()
    files = {line.split()[5].lstrip(".") for line in listing if not line.startswith("d")}
    assert files == FILES[pkg], "extra %s, missing %s" % (sorted(files - FILES[pkg]), sorted(FILES[pkg] - files))
    modes = {line.split()[5].lstrip("."): line.split()[0] for line in listing}
    for path in files:
        executable = path in ("/usr/sbin/piniond", "/usr/bin/pinionctl", "/usr/lib/cni/pinion-cni")
        assert modes[path] == ("-rwxr-xr-x" if executable else "-rw-r--r--"), (path, modes[path])
    assert _run("dpkg-deb", "-f", deb, "Version").stdout.strip() == VERSION
    if pkg == "pinion":
        conffiles = _run("dpkg-deb", "--info", deb, "conffiles").stdout.split()
        assert sorted(conffiles) == ["/etc/iproute2/rt_protos.d/pinion.conf", "/etc/pinion/pinion.conf",
                             "/etc/pinion/pods.d/example-web.json.sample"], conffiles
        postinst = _run("dpkg-deb", "--info", deb, "postinst").stdout
        # dh_installsystemd: both units enabled on install, started after it (restarted after an upgrade).
        for unit in ("piniond.service", "piniond.socket"):
            assert "deb-systemd-helper enable '%s'" % unit in postinst, postinst
        assert re.search(r"deb-systemd-invoke \$_dh_action 'piniond\.service' 'piniond\.socket'", postinst), postinst


def test_installs_starts_upgrades_and_purges_in_the_vm(built):
    debs = os.path.join(built, "debs")
    os.mkdir(debs)
    for pkg in FILES:
        shutil.copy(_deb(built, pkg), debs)
    previous = _previous_release_debs(built)
    if previous:
        shutil.move(previous, os.path.join(debs, "previous"))
    p = subprocess.run([os.path.join(SRCDIR, "tests", "vm", "run"), "--debs", debs, "package"],
                       capture_output=True, text=True, env=clean_env({"MAKEFLAGS": None, "MFLAGS": None,
                                                                      "MAKELEVEL": None}),
                       stdin=subprocess.DEVNULL, timeout=T(1800))
    if p.returncode == 77:
        pytest.skip(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "the VM suite cannot run here")
    assert p.returncode == 0, (p.stdout + p.stderr)[-8000:]
    # Without the previous release's packages the upgrade is the one case skipped (said below).
    assert re.search(r"PINION-VM-RESULT passed=[1-9]\d* failed=0 skipped=%d" % (0 if previous else 1),
                     p.stdout), p.stdout[-4000:]
    if not previous:
        pytest.skip("installed, started and purged; the upgrade was not tried: this checkout's git "
                    "history does not hold the previous release %s" % PREVIOUS_RELEASE)
