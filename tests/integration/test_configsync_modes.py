# SPDX-License-Identifier: MIT
"""Who may read and write a published bundle (real nginx over HTTPS): a manifest's mode never
makes a file group- or world-writable, and other host users neither list dest nor read a file
unless the [config.NAME] section says so (world-readable=, group=)."""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

from pinion_testlib import acl_entries, wait_until
from configsync_testlib import config_section, dest, get_config, nginx, test_ca, write_bundle  # noqa: F401

NOBODY = 65534
GROUP = 4242  # no name on the host: group= takes a number too
FILES = {"app.yaml": (b"version: 1\n", "0666"), "run.sh": (b"#!/bin/sh\n", "0777"),
         "conf/db.ini": b"[db]\n", "secret.key": (b"s3cret\n", "0600")}

# Run as nobody (with the supplementary groups given): what may it do in dest?
_AS_OTHER = r"""
import json, os, sys
dest, gids = sys.argv[1], [int(g) for g in sys.argv[2].split(",") if g]
os.setgroups(gids); os.setgid(65534); os.setuid(65534)
out = {}
def attempt(name, fn):
    try:
        fn(); out[name] = "ok"
    except OSError as e:
        out[name] = e.__class__.__name__
def read(p):
    with open(os.path.join(dest, p), "rb") as f:
        f.read()
def append(p):
    with open(os.path.join(dest, p), "ab") as f:
        f.write(b"pwned\n")
attempt("list", lambda: os.listdir(dest))
attempt("list_version", lambda: os.listdir(os.path.join(dest, "..data")))
attempt("read", lambda: read("app.yaml"))
attempt("read_nested", lambda: read("conf/db.ini"))
attempt("read_secret", lambda: read("secret.key"))
for p in ("app.yaml", "run.sh", "conf/db.ini"):
    attempt("append " + p, lambda p=p: append(p))
attempt("create", lambda: open(os.path.join(dest, "..data", "new"), "wb").close())
print(json.dumps(out))
"""


def as_other(dest, gids=()):
    p = subprocess.run([sys.executable, "-c", _AS_OTHER, dest, ",".join(str(g) for g in gids)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def start(agent_factory, nginx, test_ca, dest, **kw):
    write_bundle(nginx.root, "app", FILES, "v1")
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca, **kw)})
    wait_until(lambda: get_config(a, "app")["present"], 15, desc="config app present")
    return a


def modes(dest):
    data = os.path.join(dest, "..data")
    out = {p: stat.S_IMODE(os.stat(os.path.join(dest, p)).st_mode) for p in ("app.yaml", "run.sh", "conf/db.ini", "secret.key")}
    out["dest"] = stat.S_IMODE(os.stat(dest).st_mode)
    out["version"] = stat.S_IMODE(os.stat(data).st_mode)
    out["conf"] = stat.S_IMODE(os.stat(os.path.join(data, "conf")).st_mode)
    return out


NO_WRITE = {"append app.yaml": "PermissionError", "append run.sh": "PermissionError",
            "append conf/db.ini": "PermissionError", "create": "PermissionError"}


@pytest.mark.parametrize("keys,expect", [
    ({}, {"app.yaml": 0o600, "run.sh": 0o700, "conf/db.ini": 0o600, "secret.key": 0o600,
          "dest": 0o700, "version": 0o700, "conf": 0o700}),
    ({"world-readable": "yes"}, {"app.yaml": 0o604, "run.sh": 0o705, "conf/db.ini": 0o604, "secret.key": 0o600,
                                 "dest": 0o705, "version": 0o705, "conf": 0o705}),
    ({"group": str(GROUP)}, {"app.yaml": 0o640, "run.sh": 0o750, "conf/db.ini": 0o640, "secret.key": 0o600,
                             "dest": 0o750, "version": 0o750, "conf": 0o750}),
    ({"group": str(GROUP), "world-readable": "yes"},
     {"app.yaml": 0o644, "run.sh": 0o755, "conf/db.ini": 0o644, "secret.key": 0o600,
      "dest": 0o755, "version": 0o755, "conf": 0o755}),
], ids=["default", "world-readable", "group", "group+world-readable"])
def test_declared_modes_are_capped(agent_factory, nginx, test_ca, dest, keys, expect):
    a = start(agent_factory, nginx, test_ca, dest, **keys)
    assert modes(dest) == expect
    # Everything root's; group= is an ACL entry with the mode's group bits, the file's own group
    # (root's) then getting none.
    for p in ("app.yaml", "conf/db.ini", "..data", "..data/conf", "secret.key", "."):
        path = os.path.join(dest, p)
        st = os.stat(path)
        assert (st.st_uid, st.st_gid) == (0, 0), p
        group_bits = stat.S_IMODE(st.st_mode) >> 3 & 7
        acl = acl_entries(path)
        if "group" in keys:
            assert acl[("group", GROUP)] == acl["mask"] == group_bits and acl["group_obj"] == 0, (p, acl)
        else:
            assert acl == {}, (p, acl)
    a.wait_log("2 file\\(s\\) declare a group- or world-writable mode")


def test_other_users_cannot_read_or_write_by_default(agent_factory, nginx, test_ca, dest):
    start(agent_factory, nginx, test_ca, dest)
    got = as_other(dest)
    assert got == dict(NO_WRITE, list="PermissionError", list_version="PermissionError", read="PermissionError",
                       read_nested="PermissionError", read_secret="PermissionError"), got
    # Not even a member of the file's group (root's).
    got = as_other(dest, [0])
    assert got["list"] == got["read"] == "PermissionError", got


def test_world_readable_lets_others_read_not_write(agent_factory, nginx, test_ca, dest):
    start(agent_factory, nginx, test_ca, dest, **{"world-readable": "yes"})
    got = as_other(dest)
    assert got == dict(NO_WRITE, list="ok", list_version="ok", read="ok", read_nested="ok",
                       read_secret="PermissionError"), got


def test_group_lets_its_members_read_not_write(agent_factory, nginx, test_ca, dest):
    start(agent_factory, nginx, test_ca, dest, group=str(GROUP))
    got = as_other(dest, [GROUP])
    assert got == dict(NO_WRITE, list="ok", list_version="ok", read="ok", read_nested="ok",
                       read_secret="PermissionError"), got
    got = as_other(dest, [GROUP + 1])
    assert got["list"] == got["read"] == "PermissionError", got


def test_a_restart_closes_a_tree_published_under_looser_rules(agent_factory, nginx, test_ca, dest):
    # What an older agent left (0644 files, 0755 directories) or world-readable=yes before an
    # operator turned it off: closed at start, before (and without) a successful sync.
    a = start(agent_factory, nginx, test_ca, dest, **{"world-readable": "yes"})
    assert as_other(dest)["read"] == "ok"
    a.sigterm()
    data = os.path.realpath(os.path.join(dest, "..data"))
    for d in (dest, data, os.path.join(data, "conf")):
        os.chmod(d, 0o755)
    for p in ("app.yaml", "run.sh", "conf/db.ini"):
        os.chmod(os.path.join(data, p), 0o666)
    nginx.stop()
    del a.sections["config.app"]["world-readable"]
    a.write_config()
    a.start()
    assert modes(dest) == {"app.yaml": 0o600, "run.sh": 0o600, "conf/db.ini": 0o600, "secret.key": 0o600,
                           "dest": 0o700, "version": 0o700, "conf": 0o700}
    got = as_other(dest)
    assert got["list"] == got["read"] == got["append app.yaml"] == "PermissionError", got


def test_a_reload_applies_new_rules_and_downloads_in_full(agent_factory, nginx, test_ca, dest):
    a = start(agent_factory, nginx, test_ca, dest)
    before = get_config(a, "app")["version_dir"]
    a.sections["config.app"]["world-readable"] = "yes"
    a.write_config()
    a.sighup()
    wait_until(lambda: (lambda c: c if c["version_dir"] != before and c["state"] == "synced" else None)(
        get_config(a, "app")), 15, desc="a new version published under the new rules")
    assert modes(dest)["app.yaml"] == 0o604 and modes(dest)["dest"] == 0o705
    assert as_other(dest)["read"] == "ok"
