# SPDX-License-Identifier: MIT
"""The pool's state on a full disk (state-dir on a small tmpfs or ext4 filled to the last block): an ADD
is refused with a CNI error that says the disk is full, names the directory and allocates
nothing (not "pool full"); every DEL works, since each allocation reserved the space of its
release in the journal's file, and its release survives a kill -9 and a restart; once space is
freed the next ADD works."""

import os

import pytest

from diskfull_testlib import small_fs  # noqa: F401
from pinion_testlib import diag, parse_metrics
from podnet_testlib import cni, host_links, netns, podnet_agent, podnet_status  # noqa: F401


pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and tmpfs mounts need root")


def allocated(a):
    return {x["containerID"] for x in podnet_status(a)["details"]["pool"]["allocations"]}


@pytest.mark.parametrize("kind", ["tmpfs", "ext4"])
def test_full_disk_refuses_add_and_keeps_every_del(small_fs, podnet_agent, netns, kind):
    a = podnet_agent(start=False)
    fs = small_fs(a.state_dir, size="8m", kind=kind)
    a.start()
    ns = netns()
    before = cni(a, "ADD", "before", ns, ifname="eth0")
    assert before.rc == 0, before
    fs.fill()

    # ADDs go on while the space reserved ahead lasts (each with its release's bytes), then the
    # first one that cannot reserve is refused as a full disk, long before the pool is.
    added = ["before"]
    refused = None
    for i in range(1, 200):
        r = cni(a, "ADD", "full%d" % i, ns, ifname="eth%d" % i)
        if r.rc != 0:
            refused = ("full%d" % i, r)
            break
        added.append("full%d" % i)
    assert refused, "200 ADDs on a full disk all worked"
    cid, r = refused
    assert r.code == 11, r
    assert "disk is full" in r.json["msg"], r
    assert os.path.join(a.state_dir, "podnet") in r.json["details"], r
    assert "pool" not in r.json["msg"], r
    assert cid not in allocated(a)
    assert allocated(a) == set(added)
    diag("%d ADDs fitted in the reservation after the disk filled" % (len(added) - 1))
    a.wait_log("No space left in %s" % os.path.join(a.state_dir, "podnet"))
    m = parse_metrics(a.get("/metrics").body)
    assert m.value("pinion_podnet_state_errors_total", reason="enospc") >= 1

    # Every DEL works on the full disk, and what they released is what a restart loads.
    assert fs.full()
    for i, c in enumerate(added):
        d = cni(a, "DEL", c, ns, ifname="eth%d" % i)
        assert d.rc == 0, (c, d)
    assert allocated(a) == set()
    a.kill9()
    a.start()
    assert allocated(a) == set()
    assert not [n for n in host_links() if n in (before.json["interfaces"][0]["name"],)]

    # Space back: the next ADD works at once, nothing to reset.
    fs.free()
    r = cni(a, "ADD", "after", ns, ifname="eth0")
    assert r.rc == 0, r
    assert allocated(a) == {"after"}
    assert cni(a, "DEL", "after", ns, ifname="eth0").rc == 0
