# SPDX-License-Identifier: MIT
"""configsync against real nginx over HTTPS (a test CA made by openssl): first download, 304
no-op, atomic swap under a reader, last known good through every failure, kill -9, wait-config,
path traversal, signatures, on-change, the pod gate and access rules."""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from pinion_testlib import make_pod, wait_until
import zkreg_testlib as zt
from zkreg_testlib import base, zk  # noqa: F401 (fixtures)
from zkreg_testlib import registrations, web_pod, zk_config
from configsync_testlib import (MisbehavingServer, Tmpfs, config_section, ed25519_keypair, get_config,  # noqa: F401
                                nginx, read_tree, test_ca, versions_in, write_bundle)

FILES_V1 = {"app.yaml": b"version: 1\n", "conf/db.ini": b"[db]\nhost=a\n", "secret.key": (b"s3cret-1\n", "0600")}
FILES_V2 = {"app.yaml": b"version: 2\n", "conf/db.ini": b"[db]\nhost=b\n", "secret.key": (b"s3cret-2\n", "0600")}


def content(files):
    return {k: (v[0] if isinstance(v, tuple) else v) for k, v in files.items()}


@pytest.fixture
def dest(tmp_path):
    return str(tmp_path / "dest")


def start_agent(agent_factory, sections, **kw):
    return agent_factory(config={"config.%s" % n: s for n, s in sections.items()}, **kw)


def wait_version(a, name, version, timeout=15):
    def probe():
        c = get_config(a, name)
        return c if c["present"] and c["version"] == version else None
    return wait_until(probe, timeout, desc="config %s at version %s" % (name, version))


def wait_fetches(a, name, n, timeout=15):
    return wait_until(lambda: (lambda c: c if c["fetches"] >= n else None)(get_config(a, name)), timeout,
                      desc="config %s: %d fetches" % (name, n))


def test_first_download_and_304_noop(agent_factory, nginx, test_ca, dest):
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    c = wait_version(a, "app", "v1")
    assert read_tree(dest) == content(FILES_V1)
    assert os.stat(os.path.join(dest, "secret.key")).st_mode & 0o777 == 0o600
    # Declared 0644: neither group nor others read it without group= / world-readable=.
    assert os.stat(os.path.join(dest, "app.yaml")).st_mode & 0o777 == 0o600
    assert os.readlink(os.path.join(dest, "app.yaml")) == "..data/app.yaml"
    assert os.readlink(os.path.join(dest, "..data")) == c["version_dir"]
    assert c["etag"] and c["files"] == 3 and c["state"] == "synced"
    before = {p: os.stat(os.path.join(dest, p)).st_ino for p in content(FILES_V1)}
    n_log = len(nginx.log_lines())

    r = a.request("POST", "/v1/configs/app/refresh")
    assert r.status == 202, r
    c = wait_fetches(a, "app", 2)
    assert c["not_modified"] == 1 and c["version_dir"] == os.readlink(os.path.join(dest, "..data"))
    new_lines = nginx.log_lines()[n_log:]
    assert new_lines == [["304", "/app/manifest.json", "0"]], new_lines
    assert {p: os.stat(os.path.join(dest, p)).st_ino for p in content(FILES_V1)} == before
    assert versions_in(dest) == [c["version_dir"]]
    m = a.metrics()
    assert m.value("pinion_configsync_fetches_total", config="app", result="changed") == 1
    assert m.value("pinion_configsync_fetches_total", config="app", result="not-modified") == 1
    assert m.value("pinion_configsync_not_modified_total", config="app") == 1
    assert m.value("pinion_configsync_version_info", config="app", version="v1") == 1
    assert m.value("pinion_configsync_bytes_total", config="app") > 0
    assert m.value("pinion_configsync_version_age_seconds", config="app") >= 0

    # A restart keeps the ETag (state-dir): the first sync is a 304 too.
    a.sigterm()
    n_log = len(nginx.log_lines())
    a.start()
    wait_fetches(a, "app", 1)
    assert nginx.log_lines()[n_log:] == [["304", "/app/manifest.json", "0"]]


READER = r"""
import os, sys, time
dest, a, b = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
deadline = time.time() + float(sys.argv[4])
seen, n = set(), 0
while time.time() < deadline:
    # One version = app.yaml, conf/db.ini and secret.key all from it. Open through ..data once
    # (as AtomicWriter readers do: a directory fd pins a version).
    fd = os.open(os.path.join(dest, "..data"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        parts = []
        for p in ("app.yaml", "conf/db.ini", "secret.key"):
            f = os.open(p, os.O_RDONLY, dir_fd=fd)
            parts.append(os.read(f, 100)); os.close(f)
    finally:
        os.close(fd)
    tag = b"|".join(parts)
    if tag not in (a, b):
        print("MIX", tag); sys.exit(1)
    # And through the top-level links, each file whole.
    for p in ("app.yaml", "conf/db.ini", "secret.key"):
        with open(os.path.join(dest, p), "rb") as f:
            data = f.read()
        if not data or data not in a.split(b"|") + b.split(b"|"):
            print("TORN", p, data); sys.exit(1)
    seen.add(tag); n += 1
print("OK", n, len(seen))
"""


def test_new_version_swapped_atomically_under_a_reader(agent_factory, nginx, test_ca, dest):
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                          **{"keep-versions": 1})})
    wait_version(a, "app", "v1")
    tag = lambda files: b"|".join(content(files)[p] for p in ("app.yaml", "conf/db.ini", "secret.key"))
    reader = subprocess.Popen([sys.executable, "-c", READER, dest, tag(FILES_V1), tag(FILES_V2), "4"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for i in range(6):
            files, v = (FILES_V2, "v2-%d" % i) if i % 2 == 0 else (FILES_V1, "v1-%d" % i)
            write_bundle(nginx.root, "app", files, v)
            assert a.request("POST", "/v1/configs/app/refresh").status == 202
            wait_version(a, "app", v)
            time.sleep(0.3)
        out, _ = reader.communicate(timeout=30)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, out
    assert out.startswith(b"OK"), out
    assert int(out.split()[2]) == 2, out  # it saw both versions
    assert read_tree(dest) == content(FILES_V1)
    # keep-versions=1: the current one and one older.
    assert len(versions_in(dest)) == 2


def assert_kept(a, dest, name, version, kind, files=FILES_V1):
    c = wait_until(lambda: (lambda c: c if c["last_error_kind"] == kind else None)(get_config(a, name)), 15,
                   desc="config %s failing with %s" % (name, kind))
    assert c["present"] and c["version"] == version, c
    assert c["state"] in ("failing", "fetching"), c
    assert read_tree(dest) == content(files)
    assert len(versions_in(dest)) == 1, versions_in(dest)
    return c


@pytest.mark.parametrize("case", ["checksum", "size", "404", "500", "traversal", "bad-json"])
def test_failures_keep_the_last_known_good(agent_factory, nginx, test_ca, dest, case):
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    wait_version(a, "app", "v1")
    base = os.path.join(nginx.root, "app")
    if case == "checksum":
        write_bundle(nginx.root, "app", FILES_V2, "v2", lie={"conf/db.ini": {"sha256": "ab" * 32}})
        kind = "checksum"
    elif case == "size":
        write_bundle(nginx.root, "app", FILES_V2, "v2", lie={"app.yaml": {"size": 5}})
        kind = "size"
    elif case == "404":
        write_bundle(nginx.root, "app", FILES_V2, "v2")
        os.unlink(os.path.join(base, "v-v2", "f1"))
        kind = "http"
    elif case == "500":
        # The manifest itself answers 500 (nginx location), for the whole bundle URL.
        a.write_config(sections={"config.app": {"url": nginx.url("error500/manifest.json")}})
        kind = "http"
    elif case == "traversal":
        write_bundle(nginx.root, "app", FILES_V2, "v2", raw_entries=[
            {"path": "../../escape", "url": "v-v2/f0", "size": 11, "sha256": hashlib.sha256(b"version: 2\n").hexdigest()}])
        kind = "manifest"
    else:
        with open(os.path.join(base, "manifest.json"), "w") as f:
            f.write('{"version": "v2", "files": [')
        kind = "manifest"
    if case == "500":
        a.sighup()
        # A new url is a new source: the tree stays until the new source delivers.
        c = wait_until(lambda: (lambda c: c if c["last_error_kind"] == kind else None)(get_config(a, "app")), 15)
        assert read_tree(dest) == content(FILES_V1) and c["present"]
    else:
        assert a.request("POST", "/v1/configs/app/refresh").status == 202
        c = assert_kept(a, dest, "app", "v1", kind)
    if case == "traversal":
        assert "escapes dest" in c["last_error"], c
        assert not os.path.exists(os.path.join(os.path.dirname(dest), "escape"))
    # Retried with backoff, still failing, still the old tree.
    wait_until(lambda: get_config(a, "app")["failures"] >= 2, 15, desc="retried")
    assert read_tree(dest) == content(FILES_V1)
    st = a.status()
    mod = [m for m in st["modules"] if m["name"] == "configsync"][0]
    assert mod["state"] == "degraded" and "app" in mod["reason"], mod
    m = a.metrics()
    assert m.value("pinion_configsync_fetches_total", config="app", result=kind) >= 1
    if kind in ("checksum", "size"):
        assert m.value("pinion_configsync_verification_failures_total", config="app", kind=kind) >= 1
    # And once the server is right again, the new version lands.
    if case != "500":
        write_bundle(nginx.root, "app", FILES_V2, "v2-good")
        assert a.request("POST", "/v1/configs/app/refresh").status == 202
        wait_version(a, "app", "v2-good")
        assert read_tree(dest) == content(FILES_V2)


def test_signature_required_and_checked(agent_factory, nginx, test_ca, dest, tmp_path):
    key, pub = ed25519_keypair(str(tmp_path))
    other, _ = ed25519_keypair(str(tmp_path), "other")
    write_bundle(nginx.root, "app", FILES_V1, "v1", sign_key=key)
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                          **{"public-key": pub})})
    c = wait_version(a, "app", "v1")
    assert c["signed"] is True
    # Signed by someone else: refused, v1 stays.
    write_bundle(nginx.root, "app", FILES_V2, "v2", sign_key=other)
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    c = assert_kept(a, dest, "app", "v1", "signature")
    assert "does not verify" in c["last_error"]
    # Signature of other bytes (the manifest changed after signing): refused.
    data = write_bundle(nginx.root, "app", FILES_V2, "v3", sign_key=key)
    with open(os.path.join(nginx.root, "app", "manifest.json"), "wb") as f:
        f.write(data + b"\n")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_until(lambda: get_config(a, "app")["failures"] >= 2, 15)
    assert read_tree(dest) == content(FILES_V1)
    # No .sig at all: refused.
    write_bundle(nginx.root, "app", FILES_V2, "v4", sign_key=key)
    os.unlink(os.path.join(nginx.root, "app", "manifest.json.sig"))
    n = get_config(a, "app")["failures"]
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_until(lambda: get_config(a, "app")["failures"] > n, 15)
    assert read_tree(dest) == content(FILES_V1)
    assert a.metrics().value("pinion_configsync_verification_failures_total", config="app", kind="signature") >= 1
    # Properly signed: applied.
    write_bundle(nginx.root, "app", FILES_V2, "v5", sign_key=key)
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_version(a, "app", "v5")
    assert read_tree(dest) == content(FILES_V2)


@pytest.mark.parametrize("mode", ["cut", "slow", "down"])
def test_bad_servers_keep_the_last_known_good(agent_factory, nginx, test_ca, dest, mode):
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                          timeout="1500ms")})
    wait_version(a, "app", "v1")
    body = b"x" * 200000
    manifest = json.dumps({"version": "v2", "files": [
        {"path": "app.yaml", "url": "file", "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}]}).encode()
    srv = MisbehavingServer(test_ca, manifest=manifest, body=body, mode="slow" if mode == "slow" else "cut")
    try:
        url = srv.url("manifest.json")
        if mode == "down":
            srv.stop()
        a.write_config(sections={"config.app": {"url": url}})
        a.sighup()
        kind = {"cut": "truncated", "slow": "timeout", "down": "connect"}[mode]
        c = wait_until(lambda: (lambda c: c if c["last_error_kind"] == kind else None)(get_config(a, "app")), 20,
                       desc="failing with %s" % kind)
        assert read_tree(dest) == content(FILES_V1), c
        assert len(versions_in(dest)) == 1
        assert c["present"] is True
    finally:
        srv.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_full_disk_keeps_the_last_known_good(agent_factory, nginx, test_ca, tmp_path):
    mnt = str(tmp_path / "small")
    fs = Tmpfs(mnt, size="256k")
    try:
        dest = os.path.join(mnt, "dest")
        write_bundle(nginx.root, "app", FILES_V1, "v1")
        a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
        wait_version(a, "app", "v1")
        big = {"big.bin": os.urandom(400 * 1024)}
        big.update(FILES_V2)
        write_bundle(nginx.root, "app", big, "v2")
        assert a.request("POST", "/v1/configs/app/refresh").status == 202
        c = assert_kept(a, dest, "app", "v1", "enospc")
        assert "No space left" in c["last_error"], c
        a.sigterm()
    finally:
        fs.close()


def test_kill9_during_download_leaves_a_consistent_tree(agent_factory, nginx, test_ca, dest):
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                          timeout="30s", parallel=1)})
    wait_version(a, "app", "v1")
    # v2: one slow file among quick ones, so the kill lands mid-download.
    body = b"y" * 100000
    srv = MisbehavingServer(test_ca, body=body, mode="slow", delay=0.01)
    try:
        files = dict(FILES_V2)
        write_bundle(nginx.root, "app", files, "v2", raw_entries=[
            {"path": "slow.bin", "url": srv.url("slow.bin"), "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}])
        assert a.request("POST", "/v1/configs/app/refresh").status == 202
        wait_until(lambda: len(versions_in(dest)) == 2 and srv.requests, 15, desc="download in progress")
        a.kill9()
        assert read_tree(dest) == content(FILES_V1)
        assert len(versions_in(dest)) == 2  # the unfinished one is still there...
        srv.stop()
        # ...until the next start cleans it up and finishes the job with a good server.
        write_bundle(nginx.root, "app", FILES_V2, "v3")
        a.start()
        a.wait_log("removed 1 leftover", timeout=10)
        wait_version(a, "app", "v3")
        assert read_tree(dest) == content(FILES_V2)
    finally:
        srv.stop()


def test_wait_config_and_pod_gate(agent_factory, nginx, test_ca, dest):
    # Nothing served yet: the config is absent, wait-config times out, a pod declaring it is held.
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    r = a.ctl("wait-config", "app", "--timeout", "1s")
    assert r.rc == 1, r
    assert "not present after" in r.stderr, r
    r = a.get("/v1/configs/nope?wait=1s")
    assert r.status == 404
    assert a.ctl("wait-config", "nope", "--timeout", "1s").rc == 1

    # A waiter returns as soon as the files land.
    p = subprocess.Popen(a.command()[:0] + [os.path.join(os.environ.get("PINION_BUILDDIR", "."), "pinionctl"),
                                              "--socket", a.socket, "wait-config", "app", "--timeout", "20s"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert p.poll() is None
    t0 = time.monotonic()
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0, (out, err)
    assert time.monotonic() - t0 < 10
    assert os.path.exists(os.path.join(dest, "app.yaml"))
    r = a.ctl("configs")
    assert r.rc == 0 and "app" in r.stdout and "v1" in r.stdout, r


def test_on_change_runs_once_per_burst(agent_factory, nginx, test_ca, dest, tmp_path):
    log = str(tmp_path / "runs.log")
    script = str(tmp_path / "hook.sh")
    with open(script, "w") as f:
        f.write('#!/bin/sh\necho "$PINION_CONFIG $PINION_CONFIG_VERSION $1" >> "%s"\nexit 3\n' % log)
    os.chmod(script, 0o755)
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                          **{"on-change": "%s 'an arg'" % script,
                                                             "quiescence": "1500ms"})})
    wait_version(a, "app", "v1")
    wait_until(lambda: os.path.exists(log), 10, desc="on-change ran")
    for i in range(3):
        write_bundle(nginx.root, "app", FILES_V2 if i % 2 == 0 else FILES_V1, "burst-%d" % i)
        a.request("POST", "/v1/configs/app/refresh")
        wait_version(a, "app", "burst-%d" % i)
    wait_until(lambda: len(open(log).read().splitlines()) >= 2, 10, desc="second run")
    time.sleep(2)
    lines = open(log).read().splitlines()
    assert lines == ["app v1 an arg", "app burst-2 an arg"], lines
    c = get_config(a, "app")
    assert c["on_change"]["last_exit_status"] == 3 and c["on_change"]["runs"] == 2, c
    assert a.metrics().value("pinion_configsync_on_change_runs_total", config="app", result="failure") == 2



def test_on_change_output_goes_to_the_agent_log(agent_factory, nginx, test_ca, tmp_path):
    """The command's stdout and stderr are the agent's log, one entry per line with the module
    and the config's name as fields, never the agent's own stdout; a chatty command's output is
    cut at 16 KiB per run with a note saying how much was not logged."""
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    write_bundle(nginx.root, "chatty", FILES_V1, "v1")
    hook = "/bin/sh -c 'echo \"to stdout $PINION_CONFIG_VERSION\"; echo \"to stderr\" >&2'"
    a = agent_factory(config={
        "agent": {"log-format": "json"},
        "config.app": config_section(nginx.url("app/manifest.json"), str(tmp_path / "app"), test_ca,
                                     **{"on-change": hook, "quiescence": "100ms"}),
        "config.chatty": config_section(nginx.url("chatty/manifest.json"), str(tmp_path / "chatty"), test_ca,
                                        **{"on-change": "seq 100000", "quiescence": "100ms"})})
    a.wait_log(r"config app: on-change: /bin/sh succeeded", timeout=15)
    a.wait_log(r"config chatty: on-change: seq succeeded", timeout=15)
    entries = [json.loads(line) for line in a.log_text().splitlines() if line.startswith("{")]
    out = [(e["level"], e["msg"]) for e in entries if e.get("config") == "app" and "on-change" in e["msg"]]
    assert ("info", "config app: on-change stdout: to stdout v1") in out, out
    assert ("info", "config app: on-change stderr: to stderr") in out, out
    assert out[-1] == ("info", "config app: on-change: /bin/sh succeeded"), out
    assert all(e["module"] == "configsync" for e in entries if e.get("config") in ("app", "chatty"))

    chatty = [e["msg"] for e in entries if e.get("config") == "chatty" and "on-change" in e["msg"]]
    lines = [m[len("config chatty: on-change stdout: "):] for m in chatty if "on-change stdout: " in m]
    logged = sum(len(x) + 1 for x in lines)
    # seq 100000 writes 588,895 bytes: the first 16 KiB are logged, in order from "1".
    assert lines[:3] == ["1", "2", "3"] and 16384 - 8 <= logged <= 16384 + 1, (lines[:3], lines[-3:], logged)
    assert "config chatty: on-change: output truncated: %d more bytes past the first 16384 not logged" % (
        588895 - 16384) in chatty, chatty[-3:]
    assert chatty[-1] == "config chatty: on-change: seq succeeded", chatty[-3:]

    with open(a.stdout_file) as f:
        stdout = f.read()
    assert "to stdout" not in stdout and "to stderr" not in stdout and "\n99999\n" not in stdout, stdout[:300]
    assert not re.search(r"^to std", a.log_text(), re.M)

def pods_view(a):
    return {p["pod"]: p for p in a.get_json("/v1/configs")["pods"]}


def test_pod_gate_holds_pods_until_their_configs_are_present(agent_factory, nginx, test_ca, dest):
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    a.write_pod("web", make_pod("web", uid="11111111-2222-3333-4444-555555555555",
                                annotations={"pinion.io/configs": "app"}))
    a.write_pod("other", make_pod("other", uid="11111111-2222-3333-4444-666666666666",
                                  annotations={"pinion.io/configs": "app, missing"}))
    a.write_pod("plain", make_pod("plain", uid="11111111-2222-3333-4444-777777777777"))
    v = wait_until(lambda: (lambda v: v if len(v) == 2 else None)(pods_view(a)), 10, desc="pods seen")
    assert v["default/web"]["ready"] is False and "config app is not present yet" in v["default/web"]["reason"]
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_version(a, "app", "v1")
    v = pods_view(a)
    assert v["default/web"]["ready"] is True and v["default/web"]["reason"] is None, v
    assert v["default/other"]["ready"] is False
    assert v["default/other"]["reason"] == "config missing is not configured on this node (no [config.missing])"
    assert "default/plain" not in v


@pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")
def test_pod_gate_without_any_config_section(agent_factory, zk, base):
    # No [config.*]: configsync is disabled (its routes answer 503 saying so), and its gate still
    # holds a pod that declares a config: zkreg does not register it, and says why.
    a = agent_factory(config=zk_config(zk))
    a.write_pod("web", web_pod("web", base + "/web", extra={"pinion.io/configs": "app"}))
    reg = wait_until(lambda: (lambda r: r if r and r["last_error"] else None)(
        registrations(a).get("default/web")), 10, desc="the pod's registration held")
    assert reg["state"] != "registered" and "config app is not configured on this node" in reg["last_error"], reg
    mod = [m for m in a.status()["modules"] if m["name"] == "configsync"][0]
    assert mod["state"] == "disabled"
    r = a.get("/v1/configs/app")
    assert r.status == 503 and r.body["module"] == "configsync" and r.body["state"] == "disabled", r.raw


def test_refresh_is_privileged_and_validates(agent_factory, nginx, test_ca, dest):
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = agent_factory(config={
                        "agent": {"socket-mode": "0666"},
                        "config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    wait_version(a, "app", "v1")
    assert a.request("POST", "/v1/configs/app/refresh", as_uid=65534).status == 403
    assert a.request("POST", "/v1/configs/nope/refresh").status == 404
    assert a.get("/v1/configs/app?wait=banana").status == 400
    # An unprivileged caller outside any pod sees nothing.
    assert a.request("GET", "/v1/configs", as_uid=65534).status == 403
    assert a.request("GET", "/v1/configs/app", as_uid=65534).status == 403


@pytest.mark.skipif(os.geteuid() != 0, reason="making a pod cgroup needs root")
def test_a_pod_reads_only_the_configs_it_declared(agent_factory, nginx, test_ca, tmp_path):
    from configsync_testlib import PodCgroup
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    write_bundle(nginx.root, "db", FILES_V2, "d1")
    a = agent_factory(config={
        "agent": {"socket-mode": "0666"},
        "config.app": config_section(nginx.url("app/manifest.json"), str(tmp_path / "app"), test_ca),
        "config.db": config_section(nginx.url("db/manifest.json"), str(tmp_path / "db"), test_ca)})
    uid = "abcdef01-2222-3333-4444-555555555555"
    a.write_pod("web", make_pod("web", uid=uid, annotations={"pinion.io/configs": "app"}))
    wait_version(a, "app", "v1")
    wait_version(a, "db", "d1")
    wait_until(lambda: pods_view(a), 10)
    cg = PodCgroup(uid)
    try:
        st, body = cg.request(a.socket, "/v1/configs")
        assert st == 200 and [c["name"] for c in body["configs"]] == ["app"], body
        assert "pods" not in body
        st, body = cg.request(a.socket, "/v1/configs/app")
        assert st == 200 and body["version"] == "v1"
        st, body = cg.request(a.socket, "/v1/configs/db")
        assert st == 403 and "not declared" in body["error"], body
        # Another pod's cgroup (unknown to the store): refused.
        other = PodCgroup("99999999-2222-3333-4444-555555555555")
        try:
            st, body = other.request(a.socket, "/v1/configs/app")
            assert st == 403, body
        finally:
            other.close()
    finally:
        cg.close()


def test_bad_config_is_file_line_and_reload_keeps_old(agent_factory, nginx, test_ca, dest, tmp_path):
    bad_key = tmp_path / "bad.pub"
    bad_key.write_text("not a key\n")
    a = agent_factory(extra="[config.app]\nurl=%s\ndest=%s\npublic-key=%s\n" % (
        nginx.url("app/manifest.json"), dest, bad_key), start=False)
    r = a.check_config()
    assert r.rc == 78 and "[config.app] public-key" in r.stderr and "not an Ed25519 public key" in r.stderr, r
    a2 = agent_factory(extra="[config.app]\nurl=%s\ndest=%s\non-change=run 'unterminated\n" % (
        nginx.url("app/manifest.json"), dest), start=False)
    r = a2.check_config()
    assert r.rc == 78 and "unterminated ' quote" in r.stderr, r
    a3 = agent_factory(extra="[config.a]\nurl=%s\ndest=%s\n[config.b]\nurl=%s\ndest=%s\n" % (
        nginx.url("a/manifest.json"), dest, nginx.url("b/manifest.json"), dest), start=False)
    r = a3.check_config()
    assert r.rc == 78 and "is also [config.a]'s dest" in r.stderr, r
    # One dest inside another's (either order, trailing slash or not): refused, FILE:LINE.
    for first, second, how in ((dest, dest + "/sub", "inside"), (dest + "/sub/", dest, "the parent of")):
        a5 = agent_factory(extra="[config.a]\nurl=%s\ndest=%s\n[config.b]\nurl=%s\ndest=%s\n" % (
            nginx.url("a/manifest.json"), first, nginx.url("b/manifest.json"), second), start=False)
        r = a5.check_config()
        assert r.rc == 78 and "is %s [config.a]'s dest" % how in r.stderr and "nested dests are refused" in r.stderr, r
        assert re.search(r"\.conf:\d+: ", r.stderr), r.stderr
    a6 = agent_factory(extra="[config.a]\nurl=%s\ndest=%s\n[config.b]\nurl=%s\ndest=%s-other\n" % (
        nginx.url("a/manifest.json"), dest, nginx.url("b/manifest.json"), dest), start=False)
    assert a6.check_config().rc == 0  # a common prefix is not nesting
    # Reload with a broken section: refused, the old config keeps running.
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a4 = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    wait_version(a4, "app", "v1")
    a4.write_config(sections={"config.app": {"parallel": "0"}})
    a4.sighup()
    a4.wait_log("parallel must be between 1 and 64", timeout=10)
    assert get_config(a4, "app")["present"] is True
    # SIGHUP with a good config is also a refresh.
    a4.write_config()
    n = get_config(a4, "app")["fetches"]
    a4.sighup()
    wait_until(lambda: get_config(a4, "app")["fetches"] > n, 10, desc="SIGHUP refresh")


def pinionctl_on_a_terminal(a, *args):
    """pinionctl against agent a with its stderr on a pty, as on a terminal: (process, the pty's
    master end, for the caller to read and close)."""
    import pty
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([os.path.join(os.environ["PINION_BUILDDIR"], "pinionctl"), "--socket", a.socket]
                             + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    return p, master


def test_wait_config_progress_on_a_terminal_quiet_otherwise(agent_factory, nginx, test_ca, dest):
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    # Not a terminal: one line, the reason.
    r = a.ctl("wait-config", "app", "--timeout", "2s")
    assert r.rc == 1 and r.stdout == "", r
    assert r.stderr.count("\n") == 1 and "not present after" in r.stderr and "HTTP 404" in r.stderr, r
    # A terminal: progress lines with the state and the last error, then the result.
    p, master = pinionctl_on_a_terminal(a, "wait-config", "app", "--timeout", "20s")
    try:
        out = b""
        deadline = time.time() + 10
        while b"HTTP 404" not in out and time.time() < deadline:
            out += os.read(master, 4096)
        # The state is "failing", or "fetching" when the line is drawn during a retry (slow builds).
        assert re.search(rb"waiting for config app: (failing|fetching), .*last error: manifest: HTTP 404", out), out
        write_bundle(nginx.root, "app", FILES_V1, "v1")
        assert a.request("POST", "/v1/configs/app/refresh").status == 202
        stdout, _ = p.communicate(timeout=20)
        assert p.returncode == 0
        assert b"v1" in stdout
    finally:
        os.close(master)


def test_wait_config_timeout_says_how_long_it_waited(agent_factory, nginx, test_ca, dest):
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    # On a terminal the wait is made of one-second polls: the message is about the whole wait.
    p, master = pinionctl_on_a_terminal(a, "wait-config", "app", "--timeout", "3s")
    try:
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            out += chunk
        assert p.wait(timeout=20) == 1
        last = out.replace(b"\r\n", b"\n").rstrip(b"\n").split(b"\n")[-1]
        assert re.fullmatch(rb"pinionctl: wait-config app: config app is not present after 3s: .*HTTP 404.*", last), out
    finally:
        os.close(master)
    # Not a terminal: the same words.
    r = a.ctl("wait-config", "app", "--timeout", "1500ms")
    assert r.rc == 1 and "config app is not present after 1.5s: " in r.stderr, r


def test_wait_config_longer_than_one_long_poll(agent_factory, nginx, test_ca, dest):
    # The agent holds one request at most 10m; a longer --timeout is made of several.
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    wait_version(a, "app", "v1")
    r = a.ctl("wait-config", "app", "--timeout", "1h")
    assert r.rc == 0, r
    assert "v1" in r.stdout, r


def test_zk_version_node_triggers_a_sync_after_a_splay(agent_factory, nginx, test_ca, dest):
    import zkreg_testlib
    if not zkreg_testlib.zookeeper_available():
        pytest.skip("zookeeper not installed")
    zk = zkreg_testlib.ZkStandalone().start()
    kz = None
    try:
        kz = zkreg_testlib.kazoo_client(zk.hosts)
        kz.create("/config/app/version", b"1", makepath=True)
        write_bundle(nginx.root, "app", FILES_V1, "v1")
        a = agent_factory(config={
            "zookeeper": {"servers": zk.hosts, "session-timeout": "4s"},
            "config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                         **{"zk-version-node": "/config/app/version", "splay": "1s"})})
        wait_version(a, "app", "v1")
        c = wait_until(lambda: (lambda c: c if c["zk_version_node"]["mzxid"] is not None else None)(
            get_config(a, "app")), 30, desc="watching the version node")
        assert c["zk_version_node"]["watching"] is True and c["zk_version_node"]["triggers"] == 0
        stat = kz.exists("/config/app/version")
        assert c["zk_version_node"]["mzxid"] == stat.mzxid

        # A new bundle alone is not picked up (interval is 1h)...
        write_bundle(nginx.root, "app", FILES_V2, "v2")
        time.sleep(2)
        assert get_config(a, "app")["version"] == "v1"
        # ...until the version node changes: then within the splay.
        t0 = time.monotonic()
        kz.set("/config/app/version", b"2")
        c = wait_version(a, "app", "v2", timeout=15)
        assert time.monotonic() - t0 < 8
        assert c["zk_version_node"]["triggers"] == 1
        assert c["zk_version_node"]["mzxid"] == kz.exists("/config/app/version").mzxid
        assert read_tree(dest) == content(FILES_V2)
        a.wait_log("zk-version-node /config/app/version changed", timeout=5)

        # Deleting and re-creating the node are changes too.
        write_bundle(nginx.root, "app", FILES_V1, "v3")
        kz.delete("/config/app/version")
        wait_version(a, "app", "v3", timeout=15)
        assert get_config(a, "app")["zk_version_node"]["mzxid"] == -1
    finally:
        if kz:
            kz.stop()
            kz.close()
        zk.close()


def test_documented_keys_and_defaults_are_valid(agent_factory):
    """conf/pinion.conf's [config.app] block, uncommented, is a valid config; its keys are
    exactly the ones the module knows."""
    src = os.environ.get("PINION_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    lines = open(os.path.join(src, "conf", "pinion.conf")).read().splitlines()
    start = lines.index("#[config.app]")
    block = ["[config.app]"]
    keys = set()
    for line in lines[start + 1:]:
        if line.startswith("[") or line.startswith("#["):
            break
        if line.startswith("#") and "=" in line and not line.startswith("# "):
            key, value = line[1:].split("=", 1)
            keys.add(key)
            block.append("%s=%s" % (key, value))
    assert keys == {"url", "ca-file", "public-key", "dest", "interval", "zk-version-node", "splay", "on-change",
                    "quiescence", "on-change-timeout", "keep-versions", "timeout", "parallel", "max-size", "max-depth",
                    "max-directories", "max-entries",
                    "backoff-initial", "backoff-max", "group", "world-readable"}, keys
    a = agent_factory(extra="\n".join(block) + "\n", start=False)
    r = a.check_config()
    assert r.rc == 0, r


def test_benchmark_smoke():
    """A short run of tests/bench/configsync-bench.py (make bench-configsync runs the real size):
    it completes, compares against curl in the same run and prints both figures."""
    src = os.environ.get("PINION_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    p = subprocess.run([sys.executable, os.path.join(src, "tests", "bench", "configsync-bench.py"),
                        "--files", "20", "--size", "1M", "--rounds", "1", "--cycles", "20"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "curl --parallel + sha256sum + sync:" in p.stdout, p.stdout
    assert "ratio pinion/curl:" in p.stdout and "CPU per 304 cycle:" in p.stdout, p.stdout
    assert "20 answered 304" in p.stdout, p.stdout


def test_on_change_replaced_by_reload_while_running(agent_factory, nginx, test_ca, dest, tmp_path):
    log = str(tmp_path / "runs.log")
    for name, delay in (("old", 3), ("new", 0)):
        with open(str(tmp_path / name), "w") as f:
            f.write('#!/bin/sh\necho "%s $PINION_CONFIG_VERSION" >> "%s"\nsleep %d\n' % (name, log, delay))
        os.chmod(str(tmp_path / name), 0o755)
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = start_agent(agent_factory, {"app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                          **{"on-change": str(tmp_path / "old"),
                                                             "quiescence": "100ms"})})
    wait_until(lambda: os.path.exists(log), 10, desc="old hook started")
    assert get_config(a, "app")["on_change"]["running"] is True
    # A reload names another command while the old one runs, and a new version lands meanwhile.
    write_bundle(nginx.root, "app", FILES_V2, "v2")
    a.write_config(sections={"config.app": {"on-change": str(tmp_path / "new")}})
    a.sighup()
    wait_version(a, "app", "v2")
    wait_until(lambda: len(open(log).read().splitlines()) >= 2, 15, desc="new hook ran")
    assert open(log).read().splitlines() == ["old v1", "new v2"]
    # The script logs before it exits: the run is counted when the agent reaps it.
    c = wait_until(lambda: (lambda c: c if c["on_change"]["runs"] == 1 else None)(get_config(a, "app")), 10,
                   desc="new hook reaped")
    assert c["on_change"]["last_exit_status"] == 0, c
