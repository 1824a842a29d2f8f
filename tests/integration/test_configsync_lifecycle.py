# SPDX-License-Identifier: MIT
"""configsync across reloads and restarts, and what it refuses to trust: SIGHUP with several
bundles, a pending on-change across a reload, a public-key added while the daemon was down,
presence lost behind its back, files damaged in place, an unsafe dest."""

import os
import re
import shutil

from pinion_testlib import make_pod, wait_until
from configsync_testlib import config_section, ed25519_keypair, get_config, nginx, read_tree, test_ca, write_bundle  # noqa: F401

FILES_V1 = {"app.yaml": b"version: 1\n", "conf/db.ini": b"[db]\nhost=a\n", "secret.key": (b"s3cret-1\n", "0600")}
FILES_V2 = {"app.yaml": b"version: 1\n", "conf/db.ini": b"[db]\nhost=b\n", "secret.key": (b"s3cret-1\n", "0600")}


def content(files):
    return {k: (v[0] if isinstance(v, tuple) else v) for k, v in files.items()}


def wait_version(a, name, version, timeout=15):
    def probe():
        c = get_config(a, name)
        return c if c["present"] and c["version"] == version and c["state"] == "synced" else None
    return wait_until(probe, timeout, desc="config %s at version %s" % (name, version))


def wait_kind(a, name, kind, timeout=15):
    return wait_until(lambda: (lambda c: c if c["last_error_kind"] == kind else None)(get_config(a, name)), timeout,
                      desc="config %s failing with %s" % (name, kind))


def pods_view(a):
    return {p["pod"]: p for p in a.get_json("/v1/configs")["pods"]}


def test_sighup_with_several_bundles(agent_factory, nginx, test_ca, tmp_path):
    """A reload with two or more bundles keeps every bundle reachable by name."""
    names = ("app", "db", "web")
    for n in names:
        write_bundle(nginx.root, n, FILES_V1, n + "-1")
    sections = {"config.%s" % n: config_section(nginx.url("%s/manifest.json" % n), str(tmp_path / n), test_ca)
                for n in names[:2]}
    a = agent_factory(config=sections)
    a.write_pod("web", make_pod("web", uid="11111111-2222-3333-4444-555555555555",
                                annotations={"pinion.io/configs": "app, db"}))
    for n in names[:2]:
        wait_version(a, n, n + "-1")
    for _ in range(3):
        before = {n: get_config(a, n)["fetches"] for n in names[:2]}
        a.sighup()
        for n in names[:2]:
            wait_until(lambda: get_config(a, n)["fetches"] > before[n], 10, desc="%s refreshed by SIGHUP" % n)
        assert a.proc.poll() is None
    v = pods_view(a)
    assert v["default/web"]["ready"] is True, v
    # New versions still land in both after the reloads.
    for n in names[:2]:
        write_bundle(nginx.root, n, FILES_V2, n + "-2")
        assert a.request("POST", "/v1/configs/%s/refresh" % n).status == 202
    for n in names[:2]:
        wait_version(a, n, n + "-2")
        assert read_tree(str(tmp_path / n)) == content(FILES_V2)
    # A reload that drops one bundle and adds another (the other kept) works too.
    del a.sections["config.db"]
    a.sections["config.web"] = config_section(nginx.url("web/manifest.json"), str(tmp_path / "web"), test_ca)
    a.write_config()
    a.sighup()
    wait_version(a, "web", "web-1")
    assert a.get("/v1/configs/db").status == 404
    wait_version(a, "app", "app-2")
    assert [c["name"] for c in a.get_json("/v1/configs")["configs"]] == ["app", "web"]
    v = pods_view(a)
    assert v["default/web"]["ready"] is False and "config db is not configured" in v["default/web"]["reason"], v
    assert read_tree(str(tmp_path / "db")) == content(FILES_V2)  # its files stay
    assert a.proc.poll() is None


def test_reload_keeps_a_pending_on_change(agent_factory, nginx, test_ca, tmp_path):
    """A reload that changes on-change while its run is pending (quiescence timer
    armed, nothing running yet) still runs it."""
    log = str(tmp_path / "runs.log")
    for name in ("old", "new"):
        with open(str(tmp_path / name), "w") as f:
            f.write('#!/bin/sh\necho "%s $PINION_CONFIG_VERSION" >> "%s"\n' % (name, log))
        os.chmod(str(tmp_path / name), 0o755)
    dest = str(tmp_path / "dest")
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca, **{
        "on-change": str(tmp_path / "old"), "quiescence": "6s"})})
    c = wait_version(a, "app", "v1")
    assert c["on_change"]["pending"] is True and c["on_change"]["running"] is False, c
    a.write_config(sections={"config.app": {"on-change": str(tmp_path / "new"), "quiescence": "500ms"}})
    a.sighup()
    a.wait_log("on-change changed while a run was pending", timeout=10)
    wait_until(lambda: os.path.exists(log), 10, desc="the pending run ran")
    c = wait_until(lambda: (lambda c: c if c["on_change"]["runs"] == 1 and not c["on_change"]["pending"] else None)(
        get_config(a, "app")), 10, desc="run recorded")
    assert open(log).read().splitlines() == ["new v1"]
    assert c["on_change"]["last_exit_status"] == 0


def test_public_key_added_while_down_is_enforced(agent_factory, nginx, test_ca, tmp_path):
    """The state file records which key verified the tree: after a restart with a new
    public-key, a 304 does not stand in for the signature check."""
    key, pub = ed25519_keypair(str(tmp_path))
    dest = str(tmp_path / "dest")
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    c = wait_version(a, "app", "v1")
    assert c["verified"] is True and c["signed"] is False
    a.sigterm()
    # While it is down: public-key added; the server's .sig for the (unchanged) manifest is by
    # another key.
    other, _ = ed25519_keypair(str(tmp_path), "other")
    write_bundle(nginx.root, "app", FILES_V1, "v1", sign_key=other)
    a.sections["config.app"]["public-key"] = pub
    a.write_config()
    n_log = len(nginx.log_lines())
    a.start()
    a.wait_log("public-key or ca-file changed since the published tree was verified", timeout=10)
    c = wait_kind(a, "app", "signature")
    assert "does not verify" in c["last_error"], c
    lines = nginx.log_lines()[n_log:]
    assert ["200", "/app/manifest.json"] == lines[0][:2], lines  # in full, no If-None-Match
    assert ["200", "/app/manifest.json.sig"] == lines[1][:2], lines
    assert a.metrics().value("pinion_configsync_verification_failures_total", config="app", kind="signature") >= 1
    # The old tree stays (last known good) but is not claimed verified; the module is degraded.
    assert c["present"] is True and c["verified"] is False and c["state"] == "failing", c
    assert read_tree(dest) == content(FILES_V1)
    mod = [m for m in a.status()["modules"] if m["name"] == "configsync"][0]
    assert mod["state"] == "degraded" and "app" in mod["reason"], mod
    # Signed now: verified, and from then on 304s are fine again.
    write_bundle(nginx.root, "app", FILES_V1, "v1", sign_key=key)
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    c = wait_version(a, "app", "v1")
    assert c["verified"] is True and c["signed"] is True, c
    a.sigterm()
    n_log = len(nginx.log_lines())
    a.start()
    c = wait_until(lambda: (lambda c: c if c["fetches"] >= 1 else None)(get_config(a, "app")), 10)
    assert nginx.log_lines()[n_log:] == [["304", "/app/manifest.json", "0"]]
    assert c["verified"] is True and c["state"] == "synced", c


def test_presence_lost_behind_its_back_closes_the_gate(agent_factory, nginx, test_ca, tmp_path):
    """A sync that finds ..data gone announces it (gate, log), even when the
    download then fails."""
    dest = str(tmp_path / "dest")
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    a.write_pod("web", make_pod("web", uid="11111111-2222-3333-4444-555555555555",
                                annotations={"pinion.io/configs": "app"}))
    wait_version(a, "app", "v1")
    wait_until(lambda: pods_view(a).get("default/web", {}).get("ready") is True, 10, desc="pod ready")
    os.unlink(os.path.join(nginx.root, "app", "manifest.json"))  # the server fails (404)
    os.unlink(os.path.join(dest, "..data"))
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    a.wait_log("no version is published in %s any more" % dest, timeout=10)
    c = wait_kind(a, "app", "http")
    assert c["present"] is False and c["verified"] is False, c
    v = pods_view(a)
    assert v["default/web"]["ready"] is False and "config app is not present yet" in v["default/web"]["reason"], v
    assert a.metrics().value("pinion_configsync_present", config="app") == 0
    # And back when the server is.
    write_bundle(nginx.root, "app", FILES_V1, "v2")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_version(a, "app", "v2")
    assert pods_view(a)["default/web"]["ready"] is True


def test_a_file_damaged_in_place_is_not_reused(agent_factory, nginx, test_ca, tmp_path):
    """Files reused by hard link are hashed again first."""
    dest = str(tmp_path / "dest")
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    wait_version(a, "app", "v1")
    secret_ino = os.stat(os.path.join(dest, "secret.key")).st_ino
    # Same size and mode, other bytes: only the sha256 tells.
    with open(os.path.join(dest, "..data", "app.yaml"), "r+b") as f:
        f.write(b"version: X\n")
    write_bundle(nginx.root, "app", FILES_V2, "v2")  # app.yaml and secret.key unchanged
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_version(a, "app", "v2")
    a.wait_log(re.escape("1 unchanged file(s) were missing or no longer matched"), timeout=5)
    assert read_tree(dest) == content(FILES_V2)
    assert os.stat(os.path.join(dest, "secret.key")).st_ino == secret_ino  # intact: still reused
    a.wait_log("2 downloaded, 1 reused", timeout=5)


def test_group_or_world_writable_dest_is_refused(agent_factory, nginx, test_ca, tmp_path):
    """A dest that others may write into is refused: they could swap what is published."""
    dest = str(tmp_path / "dest")
    os.mkdir(dest)
    os.chmod(dest, 0o777)
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    c = wait_kind(a, "app", "dest")
    assert "is group- or world-writable" in c["last_error"] and c["present"] is False, c
    assert os.listdir(dest) == []
    assert a.metrics().value("pinion_configsync_fetches_total", config="app", result="dest") >= 1
    os.chmod(dest, 0o775)  # group-writable is refused as well
    n = get_config(a, "app")["failures"]
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    c = wait_until(lambda: (lambda c: c if c["failures"] > n else None)(get_config(a, "app")), 10)
    assert c["last_error_kind"] == "dest" and os.listdir(dest) == [], c
    os.chmod(dest, 0o755)
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_version(a, "app", "v1")
    assert read_tree(dest) == content(FILES_V1)
    shutil.rmtree(dest)


def test_https_source_redirects_to_https_only(agent_factory, nginx, test_ca, tmp_path):
    """An https manifest URL may be redirected, but not to plain http."""
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = agent_factory(config={
        "config.good": config_section(nginx.url("app/redirect-to-https.json"), str(tmp_path / "good"), test_ca),
        "config.bad": config_section(nginx.url("app/redirect-to-http.json"), str(tmp_path / "bad"), test_ca)})
    wait_version(a, "good", "v1")
    c = wait_until(lambda: (lambda c: c if c["failures"] >= 1 else None)(get_config(a, "bad")), 10)
    assert c["present"] is False and "http" in c["last_error"].lower() and "not supported" in c["last_error"].lower(), c
    # curl never followed it: nginx saw no plain-http request (that would be a 400 on its TLS port).
    assert not [l for l in nginx.log_lines() if l[0] == "400"], nginx.log_lines()
    assert [l[:2] for l in nginx.log_lines()].count(["302", "/app/redirect-to-http.json"]) >= 1
