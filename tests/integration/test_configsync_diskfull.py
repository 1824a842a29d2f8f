# SPDX-License-Identifier: MIT
"""A config bundle update on a full disk (dest and the state dir on a small tmpfs filled to the
last block): the last good version stays published and whole, the unfinished version directory
is removed, the failure is kind "enospc" naming dest (log, /v1/configs, metric), and the next
retry after space is freed publishes the update by itself."""

import os

import pytest

from configsync_testlib import config_section, get_config, nginx, read_tree, test_ca, versions_in, write_bundle  # noqa: F401
from diskfull_testlib import small_fs  # noqa: F401
from pinion_testlib import parse_metrics, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

FILES_V1 = {"app.yaml": b"version: 1\n", "conf/db.ini": b"[db]\nhost=a\n"}
FILES_V2 = {"app.yaml": b"version: 2\n", "conf/db.ini": b"[db]\nhost=b\n", "more.txt": b"x" * 10000}


def wait_version(a, version):
    return wait_until(lambda: (lambda c: c if c["present"] and c["version"] == version else None)(get_config(a, "app")),
                      15, desc="app at version %s" % version)


def test_full_disk_keeps_the_last_good_version_and_heals(small_fs, agent_factory, nginx, test_ca, tmp_path):
    fs = small_fs(str(tmp_path / "small"), size="4m")
    dest = os.path.join(fs.path, "dest")
    write_bundle(nginx.root, "app", FILES_V1, "v1")
    a = agent_factory(config={"agent": {"state-dir": os.path.join(fs.path, "state")},
                              "config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca)})
    wait_version(a, "v1")
    fs.fill()

    write_bundle(nginx.root, "app", FILES_V2, "v2")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    c = wait_until(lambda: (lambda c: c if c["last_error_kind"] == "enospc" else None)(get_config(a, "app")), 15,
                   desc="failing with enospc")
    assert c["present"] and c["version"] == "v1", c
    assert "no space left in %s" % dest in c["last_error"], c
    assert read_tree(dest) == FILES_V1
    assert len(versions_in(dest)) == 1, versions_in(dest)  # the unfinished one was removed
    a.wait_log("no space left in %s" % dest)
    m = parse_metrics(a.get("/metrics").body)
    assert m.value("pinion_configsync_fetches_total", config="app", result="enospc") >= 1

    # Space back: the next retry publishes v2, nothing to restart or reset.
    n = get_config(a, "app")["fetches"]
    fs.free()
    c = wait_version(a, "v2")
    assert c["fetches"] <= n + 2, c  # the one under way when space came back, then the next
    assert read_tree(dest) == FILES_V2
    assert c["state"] == "synced", c
