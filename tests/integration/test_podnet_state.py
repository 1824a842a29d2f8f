# SPDX-License-Identifier: MIT
"""The pool's state through the agent (real network namespaces): a change is one line appended to
state-dir/podnet/allocations.journal, folded into allocations.json now and then; a state file
from before the journal loads and carries on; a journal line damaged before the end stops the
module with the file and line named and nothing overwritten; a torn last line (a kill -9
mid-write) is dropped."""

import json
import os

import pytest

from pinion_testlib import wait_until
from podnet_testlib import (cni, delete_links, netns, podnet_state_on_disk, podnet_status,  # noqa: F401
                            remove_podnet_state)

from test_podnet import podnet_agent  # noqa: F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def state_files(a):
    d = os.path.join(a.state_dir, "podnet")
    return os.path.join(d, "allocations.json"), os.path.join(d, "allocations.journal")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def allocated(a):
    return {x["containerID"]: x["ip"] for x in podnet_status(a)["details"]["pool"]["allocations"]}


def test_state_from_before_the_journal_loads_and_carries_on(podnet_agent, netns):
    a = podnet_agent()
    n1, n2, n3 = netns(), netns(), netns()
    ips = {cid: cni(a, "ADD", cid, ns).ip() for cid, ns in (("old1", n1), ("old2", n2))}
    snap, journal = state_files(a)
    assert len(read(journal).splitlines()) >= 2  # one line per change, the snapshot not rewritten
    # As an older pinion left it: everything in a version 1 allocations.json, no journal.
    state = podnet_state_on_disk(a.state_dir)
    a.kill9()
    with open(snap, "w") as f:
        json.dump({"version": 1, "cidr": a.pod_cidr, "cursor": max(ips.values(), key=lambda i: int(i.split(".")[3])),
                   "allocations": state["allocations"], "quarantine": [], "deleting": []}, f)
    os.unlink(journal)
    a.start()
    assert allocated(a) == ips
    r = cni(a, "ADD", "new", n3)
    assert r.rc == 0 and r.ip() not in ips.values(), r
    a.kill9()
    a.start()
    assert allocated(a) == dict(ips, new=r.ip())
    for cid, ns in (("old1", n1), ("old2", n2), ("new", n3)):
        assert cni(a, "DEL", cid, ns).rc == 0


def test_damaged_journal_is_refused_and_kept(podnet_agent, netns):
    a = podnet_agent()
    n1, n2 = netns(), netns()
    r1, r2 = cni(a, "ADD", "d1", n1), cni(a, "ADD", "d2", n2)
    assert r1.rc == 0 and r2.rc == 0
    links = [r1.json["interfaces"][0]["name"], r2.json["interfaces"][0]["name"]]
    try:
        a.kill9()
        snap, journal = state_files(a)
        lines = read(journal).splitlines(keepends=True)
        lines[0] = lines[0].replace(b'"d1"', b'"x1"')  # the checksum no longer matches
        with open(journal, "wb") as f:
            f.write(b"".join(lines))
        before = (read(snap) if os.path.exists(snap) else None, read(journal))
        a.start()
        wait_until(lambda: podnet_status(a)["state"] == "failed", timeout=10)
        reason = podnet_status(a)["reason"]
        assert "allocations.journal line 1 is damaged" in reason and "move" in reason, reason
        r = cni(a, "ADD", "d3", n1)
        assert r.rc != 0 and r.code == 11, r
        assert (read(snap) if os.path.exists(snap) else None, read(journal)) == before
        # The operator moves it away: an empty pool.
        a.kill9()
        remove_podnet_state(a.state_dir)
        a.start()
        wait_until(lambda: podnet_status(a)["state"] == "running", timeout=10)
        assert allocated(a) == {}
    finally:
        delete_links(links)


def test_torn_last_line_is_dropped(podnet_agent, netns):
    a = podnet_agent()
    n1 = netns()
    r = cni(a, "ADD", "t1", n1)
    assert r.rc == 0, r
    a.kill9()
    _, journal = state_files(a)
    whole = read(journal)
    with open(journal, "ab") as f:
        f.write(b'0badc0de {"seq":99,"op":"allocate","alloc')
    a.start()
    assert allocated(a) == {"t1": r.ip()}
    assert read(journal) == whole  # cut back to its whole lines
    assert cni(a, "DEL", "t1", n1).rc == 0
    assert podnet_state_on_disk(a.state_dir)["allocations"] == []
