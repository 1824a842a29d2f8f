# SPDX-License-Identifier: MIT
"""Handing files and the socket to users and groups without changing an owner. piniond runs here
as the shipped unit runs it, without CAP_CHOWN, CAP_FOWNER and CAP_DAC_OVERRIDE (setpriv lowers
its bounding set): a service's user reads its TLS files, a bundle's group= reads the bundle and
socket-group= connects, nobody else does; and what an older agent handed over by ownership (a
user's key, a root:group tree, a socket of that group) is root's again, with ACL entries, after
a start without those capabilities. Everything stays root's (docs/design-notes.md, "Handing over
by ACL entries, not ownership")."""

import grp
import os
import pwd
import stat
import subprocess

import pytest

from pinion_testlib import CONNECT_PROGRAM, SERVICE_CGROUP_ROOT, acl_entries, wait_until, warnings_in
from configsync_testlib import config_section, dest, get_config, nginx, test_ca, write_bundle  # noqa: F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (other uids, file owners)")

NOBODY = pwd.getpwnam("nobody")
NOGROUP = grp.getgrnam("nogroup").gr_gid
STRANGER = 40999
GROUP = 4242
WITHOUT_OWNERSHIP = ["setpriv", "--bounding-set=-chown,-fowner,-dac_override,-dac_read_search", "--"]
OWNERSHIP_CAPS = {0, 1, 2, 3}  # CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER


def effective_caps(pid):
    with open("/proc/%d/status" % pid) as f:
        value = int(next(x for x in f if x.startswith("CapEff:")).split()[1], 16)
    return {bit for bit in range(64) if value >> bit & 1}


def as_user(uid, groups, fn_source, *args):
    """Runs a Python snippet as uid (its own gid) with only the supplementary groups given;
    returns its stdout, stripped."""
    def drop():
        os.setgroups(list(groups))
        os.setgid(uid)
        os.setuid(uid)
    p = subprocess.run(["/usr/bin/python3", "-c", fn_source, *args], capture_output=True, text=True,
                       preexec_fn=drop, timeout=20)
    assert p.returncode == 0, p
    return p.stdout.strip()


READ = """
import sys
try:
    print(open(sys.argv[1]).read(1) and "ok")
except OSError as e:
    print(e.strerror)
"""



def files_below(top):
    for d, dirs, files in os.walk(top):
        for name in dirs + files:
            yield os.path.join(d, name)


def hand_over_by_ownership(top, file_uid, file_gid, dir_gid, file_mode=None):
    """What an older agent left below top: files file_uid:file_gid, directories (top too) root's
    with group dir_gid, no ACL entries."""
    for path in [top] + list(files_below(top)):
        if os.path.islink(path):
            continue
        if acl_entries(path):
            os.removexattr(path, "system.posix_acl_access")
        if os.path.isdir(path):
            os.chown(path, 0, dir_gid)
            continue
        os.chown(path, file_uid, file_gid)
        if file_mode is not None:
            os.chmod(path, file_mode)


def start_without_ownership(a):
    a.command_prefix = WITHOUT_OWNERSHIP
    a.start()
    assert not effective_caps(a.pid) & OWNERSHIP_CAPS, effective_caps(a.pid)
    return a


def test_service_files_an_older_agent_gave_away_are_taken_back(agent_factory, tmp_dir):
    tls = os.path.join(tmp_dir, "tls", "web")
    a = agent_factory(start=False)
    a.agent_keys.update({"service-cgroup-roots": SERVICE_CGROUP_ROOT})
    a.sections["identity"] = {"signer": "local", "trust-domain": "example.org", "ca-dir": os.path.join(a.dir, "ca")}
    a.sections["service.web"] = {"unit": "web.service", "user": "nobody", "tls-dir": tls}
    a.write_config()
    a.start()
    key = os.path.join(tls, "key.pem")
    wait_until(lambda: os.path.exists(key), 15, desc="the key written")
    a.stop()
    # The older agent's layout: the directory root:<the user's group> 0750, the files the user's.
    hand_over_by_ownership(tls, NOBODY.pw_uid, NOBODY.pw_gid, NOBODY.pw_gid, file_mode=0o600)
    os.chmod(tls, 0o750)
    assert os.stat(os.path.realpath(key)).st_uid == NOBODY.pw_uid

    start_without_ownership(a)
    try:
        wait_until(lambda: os.stat(os.path.realpath(key)).st_uid == 0, 15, desc="the key rewritten as root's")
    except AssertionError:
        print(a.log_text())
        raise
    # The older version goes after the swap to the new one: nothing of the user's is left then.
    wait_until(lambda: not [p for p in [tls] + list(files_below(tls)) if os.lstat(p).st_uid != 0], 15,
               desc="the older agent's files gone")
    assert acl_entries(tls)[("user", NOBODY.pw_uid)] == 5
    assert acl_entries(os.path.realpath(key))[("user", NOBODY.pw_uid)] == 4
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o640
    assert as_user(NOBODY.pw_uid, [], READ, key) == "ok"
    # The user's group, which the directory was the group of, gets nothing any more.
    assert as_user(STRANGER, [NOBODY.pw_gid], READ, key) == "Permission denied"
    assert not warnings_in(a.log_text())


def test_bundle_and_socket_groups_are_let_in_without_ownership(agent_factory, nginx, test_ca, dest):
    write_bundle(nginx.root, "app", {"app.yaml": (b"v: 1\n", "0640")}, "v1")
    a = agent_factory(start=False, config={
        "agent": {"socket-group": "nogroup", "socket-mode": "0660"},
        "config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca, group=str(GROUP))})
    a.start()
    wait_until(lambda: get_config(a, "app")["version"] == "v1", 15, desc="bundle v1")
    a.stop()
    # The older agent's tree: root:GROUP, no entries; the socket is made afresh at start.
    hand_over_by_ownership(dest, 0, GROUP, GROUP)

    start_without_ownership(a)
    wait_until(lambda: get_config(a, "app")["version"] == "v1", 15, desc="bundle v1 again")
    app = os.path.join(dest, "app.yaml")
    for path in [dest] + list(files_below(dest)):
        if os.path.islink(path):
            continue
        entries = acl_entries(path)
        assert entries.get(("group", GROUP)) == entries.get("mask") and entries["group_obj"] == 0, (path, entries)
    assert as_user(STRANGER, [GROUP], READ, app) == "ok"
    assert as_user(STRANGER, [GROUP + 1], READ, app) == "Permission denied"

    st = os.stat(a.socket)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o660), st
    assert as_user(STRANGER, [NOGROUP], CONNECT_PROGRAM, a.socket) == "ok"
    assert as_user(STRANGER, [], CONNECT_PROGRAM, a.socket) == "Permission denied"
    # A reload: configsync still asks for CAP_DAC_OVERRIDE and CAP_FOWNER, which were never
    # granted; a restart would not bring them, so nothing is to be said about them.
    reloads = a.status()["config"]["reloads"]
    a.sighup()
    wait_until(lambda: a.status()["config"]["reloads"] > reloads, 10, desc="the reload")
    assert not warnings_in(a.log_text())


def test_a_file_system_without_acls_is_named_in_the_error(agent_factory, nginx, test_ca, dest):
    """group= on a file system that cannot hold ACL entries (ramfs): the bundle is not published
    and the error says why; without group= the same file system serves."""
    os.makedirs(dest)
    subprocess.run(["mount", "-t", "ramfs", "-o", "mode=0755", "ramfs", dest], check=True)
    try:
        write_bundle(nginx.root, "app", {"app.yaml": b"v: 1\n"}, "v1")
        a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                               group=str(GROUP))})
        error = wait_until(lambda: get_config(a, "app").get("last_error"), 15, desc="the bundle's error")
        assert "Operation not supported (group= needs a file system with POSIX ACLs under dest)" in error, error
        assert not os.path.exists(os.path.join(dest, "..data"))
        a.write_config(sections={"config.app": {"group": None}})
        a.sighup()
        wait_until(lambda: get_config(a, "app")["version"] == "v1", 15, desc="bundle v1 without group=")
        assert stat.S_IMODE(os.stat(os.path.join(dest, "app.yaml")).st_mode) == 0o600
    finally:
        subprocess.run(["umount", "-l", dest], check=False)
