# SPDX-License-Identifier: MIT
"""What configsync refuses to let a manifest do to the node, and what it keeps off the loop: a
bundle just under the caps (max-depth, max-directories, max-entries) is published while root's
/v1/health stays answered (the directories, the fsync and the swap run in a thread); a replayed
older signed manifest is refused (the serial); a dest holding what pinion did not publish is
neither published over nor chmodded. The manifests past the caps are in test_hostile_input.py
(section 4)."""

import os
import re
import shutil
import stat
import threading
import time

from pinion_testlib import T, unix_request, wait_until
from configsync_testlib import (config_section, ed25519_keypair, get_config, nginx, read_tree, test_ca,  # noqa: F401
                                versions_in, write_bundle)

FILES_V1 = {"app.yaml": b"version: 1\n", "conf/db.ini": b"[db]\nhost=a\n"}
FILES_V2 = {"app.yaml": b"version: 2\n", "conf/db.ini": b"[db]\nhost=b\n"}

# The defaults (docs/configsync.md): a file at most 32 directories deep, 2,000 directories and
# 20,000 entries (files + directories + links in dest) per version.
MAX_DEPTH, MAX_DIRECTORIES, MAX_ENTRIES = 32, 2000, 20000


def wait_version(a, name, version, timeout=15):
    def probe():
        c = get_config(a, name)
        return c if c["present"] and c["version"] == version and c["state"] == "synced" else None
    return wait_until(probe, timeout, desc="config %s at version %s" % (name, version))


def wait_failure(a, name, before, timeout=15):
    """The config once its failure count passed before and the failed sync is over."""
    return wait_until(lambda: (lambda c: c if c["failures"] > before and c["state"] != "fetching" else None)(
        get_config(a, name)), timeout, desc="config %s: a failed sync" % name)


def under_the_caps():
    """A bundle just under all three caps: chains of empty files MAX_DEPTH directories deep
    (MAX_DIRECTORIES - 1 directories in all, the shape of the 507-deep attack cut to the caps),
    and enough flat files to bring the entries just under MAX_ENTRIES."""
    files = {}
    dirs = 0
    i = 0
    while dirs < MAX_DIRECTORIES - 1:
        depth = min(MAX_DEPTH, MAX_DIRECTORIES - 1 - dirs)
        files["c%d/" % i + "d/" * (depth - 1) + "f"] = b""
        dirs += depth
        i += 1
    chains = len(files)
    # entries = files + directories + links in dest (one per chain and per flat file)
    flat = (MAX_ENTRIES - 1 - dirs - 2 * chains) // 2
    for k in range(flat):
        files["flat%05d" % k] = b"%d\n" % k
    entries = len(files) + dirs + chains + flat
    assert dirs == MAX_DIRECTORIES - 1 and MAX_ENTRIES - 2 <= entries < MAX_ENTRIES, (dirs, entries)
    return files, dirs, entries


def health_latencies(a, n=None, stop=None, pause=0.005):
    """Seconds per GET /v1/health as root, n of them or until stop is set; a request that gets
    no answer counts as its timeout."""
    out = []
    while (n is None or len(out) < n) and not (stop and stop.is_set()):
        t0 = time.monotonic()
        try:
            r = unix_request(a.socket, "GET", "/v1/health", timeout=T(5))
            ok = r.status == 200
        except OSError:
            ok = False
        out.append(time.monotonic() - t0 if ok else T(5))
        time.sleep(pause)
    return out


def p99(samples):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * 0.99))]


def test_a_bundle_under_the_caps_publishes_while_health_is_answered(agent_factory, nginx, test_ca, tmp_path):
    """The directories, the hashing and linking of reused files, the fsync of every file and
    directory and the swap run off the loop: root's /v1/health keeps its idle latency while a
    version of ~20,000 inodes is made and synced. The flat files are published first, so the
    measured publication is file-system work (1,999 new directories, 9,000 files hashed and
    linked, everything fsynced) rather than the loop's downloads."""
    dest = str(tmp_path / "dest")
    files, dirs, entries = under_the_caps()
    flat = {p: c for p, c in files.items() if "/" not in p}
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                           parallel=16, timeout="30s")})
    wait_version(a, "app", "v1")
    write_bundle(nginx.root, "app", flat, "flat")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_version(a, "app", "flat", timeout=T(180))
    idle = health_latencies(a, n=300)
    write_bundle(nginx.root, "app", files, "big")
    stop = threading.Event()
    busy = []
    sampler = threading.Thread(target=lambda: busy.extend(health_latencies(a, stop=stop)))
    sampler.start()
    try:
        assert a.request("POST", "/v1/configs/app/refresh").status == 202
        c = wait_until(lambda: (lambda c: c if c["version"] == "big" or c["last_error"] else None)(
            get_config(a, "app")), T(180), interval=0.5, desc="the bundle under the caps published")
    finally:
        stop.set()
        sampler.join()
    assert c["version"] == "big" and c["state"] == "synced", c
    assert c["files"] == len(files), c
    a.wait_log(r"version big published .* %d downloaded, %d reused" % (len(files) - len(flat), len(flat)), timeout=5)
    bound = max(T(0.150), 3 * p99(idle))
    print("health p99: idle %.1f ms, while publishing %d files (%d reused), %d directories (%d entries) %.1f ms "
          "over %d requests (max %.1f ms)" % (p99(idle) * 1000, len(files), len(flat), dirs, entries,
                                              p99(busy) * 1000, len(busy), max(busy) * 1000))
    assert p99(busy) < bound, "health p99 %.1f ms while publishing (idle %.1f ms, bound %.1f ms, max %.1f ms)" % (
        p99(busy) * 1000, p99(idle) * 1000, bound * 1000, max(busy) * 1000)
    assert len(busy) >= 20, len(busy)
    deepest = [p for p in files if p.count("/") == MAX_DEPTH][0]
    with open(os.path.join(dest, deepest), "rb") as f:
        assert f.read() == b""
    assert a.log_text().count("sync failed") == 0


def test_a_replayed_older_signed_manifest_is_refused(agent_factory, nginx, test_ca, tmp_path):
    """Once a manifest with a serial is published, only a higher serial replaces it: an older
    manifest, however well signed, is a rollback and is refused, also after a restart."""
    key, pub = ed25519_keypair(str(tmp_path))
    dest = str(tmp_path / "dest")
    old = write_bundle(nginx.root, "app", FILES_V1, "v1", sign_key=key, serial=5)
    old_sig = open(os.path.join(nginx.root, "app", "manifest.json.sig")).read()
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                           **{"public-key": pub})})
    wait_version(a, "app", "v1")
    write_bundle(nginx.root, "app", FILES_V2, "v2", sign_key=key, serial=6)
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_version(a, "app", "v2")
    published = versions_in(dest)

    def replay(data, sig):
        """Serves data and its signature again, as an attacker on the path would."""
        with open(os.path.join(nginx.root, "app", "manifest.json.sig"), "w") as f:
            f.write(sig)
        tmp = os.path.join(nginx.root, "app", ".manifest.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.utime(tmp, (time.time() + 100 + replay.n, time.time() + 100 + replay.n))  # a new ETag
        replay.n += 1
        os.rename(tmp, os.path.join(nginx.root, "app", "manifest.json"))
    replay.n = 0

    def refused(what):
        n = get_config(a, "app")["failures"]
        assert a.request("POST", "/v1/configs/app/refresh").status == 202
        c = wait_failure(a, "app", n)
        assert c["last_error_kind"] == "rollback", (what, c)
        assert c["version"] == "v2" and c["present"], (what, c)
        assert read_tree(dest) == FILES_V2 and versions_in(dest) == published, what
        return c

    replay(old, old_sig)
    c = refused("serial 5 after 6")
    assert re.search(r"serial 5 is not newer than the published version's 6: refusing a rollback", c["last_error"]), c
    assert a.metrics().value("pinion_configsync_fetches_total", config="app", result="rollback") >= 1
    # The same serial with other content, and no serial at all, are refused as well.
    write_bundle(nginx.root, "app", FILES_V1, "v1-again", sign_key=key, serial=6)
    refused("serial 6 again")
    write_bundle(nginx.root, "app", FILES_V1, "v1-unnumbered", sign_key=key)
    c = refused("no serial")
    assert "no serial, but the published version has serial 6" in c["last_error"], c
    # After a restart (the serial is in the state file) the replay is still refused.
    a.sigterm()
    a.start()
    replay(old, old_sig)
    refused("serial 5 after a restart")
    # Rolling back on purpose: the old files with a higher serial.
    write_bundle(nginx.root, "app", FILES_V1, "v1-restored", sign_key=key, serial=7)
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_version(a, "app", "v1-restored")
    assert read_tree(dest) == FILES_V1


def test_a_dest_holding_what_pinion_did_not_publish_is_left_alone(agent_factory, nginx, test_ca, tmp_path):
    """A dest with files of its own (a pod's directory two levels below a root, an /etc) is not
    published over, and the start does not make its tree root's 0700; once it is empty, it is."""
    pod_dir = tmp_path / "pods" / "pod-a"
    dest = str(pod_dir / "config")
    os.makedirs(os.path.join(dest, "sub"))
    with open(os.path.join(dest, "keep.txt"), "wb") as f:
        f.write(b"not pinion's\n")
    with open(os.path.join(dest, "sub", "inner"), "wb") as f:
        f.write(b"nor this\n")
    os.chmod(os.path.join(dest, "keep.txt"), 0o644)
    os.chmod(os.path.join(dest, "sub"), 0o755)
    before = {n: os.lstat(os.path.join(dest, n)) for n in ("keep.txt", "sub", "sub/inner")}
    write_bundle(nginx.root, "app", {"keep.txt": b"pinion's\n", "sub/inner": b"x\n"}, "v1")
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    c = wait_until(lambda: (lambda c: c if c["last_error_kind"] == "dest" else None)(get_config(a, "app")), 15)
    assert re.search(r'holds "(keep\.txt|sub)", which pinion did not publish', c["last_error"]), c
    assert not c["present"], c
    a.wait_log(r"which pinion did not publish: left as it is", timeout=5)
    for n, st in before.items():
        now = os.lstat(os.path.join(dest, n))
        assert (now.st_mode, now.st_ino, now.st_uid, now.st_gid) == (st.st_mode, st.st_ino, st.st_uid, st.st_gid), n
    assert sorted(os.listdir(dest)) == ["keep.txt", "sub"]
    with open(os.path.join(dest, "keep.txt"), "rb") as f:
        assert f.read() == b"not pinion's\n"
    assert a.metrics().value("pinion_configsync_fetches_total", config="app", result="dest") >= 1
    # Emptied by its owner: published there.
    os.unlink(os.path.join(dest, "keep.txt"))
    shutil.rmtree(os.path.join(dest, "sub"))
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_version(a, "app", "v1")
    assert read_tree(dest) == {"keep.txt": b"pinion's\n", "sub/inner": b"x\n"}
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o700


def test_caps_are_per_section(agent_factory, nginx, test_ca, tmp_path):
    """max-depth, max-directories and max-entries come from the section; out-of-range values
    are refused at load with their line."""
    bad = agent_factory(extra="[config.app]\nurl=%s\ndest=%s\nmax-depth=513\n" % (
        nginx.url("app/manifest.json"), tmp_path / "bad"), start=False)
    r = bad.check_config()
    assert r.rc == 78 and "max-depth must be at most 512" in r.stderr and re.search(r"\.conf:\d+: ", r.stderr), r
    dest = str(tmp_path / "dest")
    write_bundle(nginx.root, "app", {"a/b/c.yaml": b"c\n", "a/d.yaml": b"d\n"}, "v1")  # 2 deep, 2 directories
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                           **{"max-depth": 2, "max-directories": 2,
                                                              "max-entries": 5})})
    wait_version(a, "app", "v1")  # 2 files + 2 directories + 1 link
    for files, says in (({"a/b/c/d.yaml": b"x\n"}, r"is 3 directories deep, more than max-depth \(2\)"),
                        ({"a/b.yaml": b"x\n", "c/d.yaml": b"y\n", "e/f.yaml": b"z\n"},
                         r"files: 3 directories, more than max-directories \(2\)")):
        n = get_config(a, "app")["failures"]
        write_bundle(nginx.root, "app", files, "v2")
        assert a.request("POST", "/v1/configs/app/refresh").status == 202
        c = wait_failure(a, "app", n)
        assert c["last_error_kind"] == "limit" and re.search(says, c["last_error"]), c
        assert c["version"] == "v1", c
    n = get_config(a, "app")["failures"]
    write_bundle(nginx.root, "app", {"a.yaml": b"1\n", "b.yaml": b"2\n", "c/d.yaml": b"3\n"}, "v3")  # 3+1+3 entries
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    c = wait_failure(a, "app", n)
    assert re.search(r"files: 7 entries \(3 files, 1 directories, 3 links in dest\), more than max-entries \(5\)",
                     c["last_error"]), c
    assert read_tree(dest) == {"a/b/c.yaml": b"c\n", "a/d.yaml": b"d\n"}
