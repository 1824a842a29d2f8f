# SPDX-License-Identifier: MIT
"""The agent under its own memory limit (a v1 memory cgroup made for the test): 250 pods with
an identity, five config bundles, a ZooKeeper registration and a pod network each, and a burst
of every pod changing at once (selfmem_testlib.py says what the burst is).

At 32 MiB everything is done and the kernel never kills the agent. At 16 MiB the pods' veth
pairs (kernel memory charged to the agent, ~67 KiB a pod) cannot all fit: the agent refuses
the CNI ADDs above its memory watermark with an error that says so, does all the rest, stays
alive, and once the pods are gone attaches a pod again. With the watermark off
(memory-watermark=100%) the 16 MiB run ends in the OOM killer.
"""

import os
import shutil
import tempfile

import pytest

import selfmem_testlib as sm
from pinion_testlib import diag

MiB = sm.MiB
PODS = 250

pytestmark = pytest.mark.skipif(sm.available() is not None, reason=sm.available() or "")


@pytest.fixture(scope="module")
def world():
    work = tempfile.mkdtemp(prefix="pinion-selfmem-")
    os.chmod(work, 0o755)
    w = sm.World(work, pods=PODS)
    try:
        w.start()
        yield w
    finally:
        w.close()
        shutil.rmtree(work, ignore_errors=True)


def explain(r):
    return "%s\nnotes: %s\nCNI errors: %s\n--- log tail ---\n%s" % (r.summary(), r.notes, r.cni_errors, r.log_tail)


def assert_clean(r):
    assert r.oom_kills == 0, explain(r)
    assert r.alive, explain(r)
    assert r.stop_problem is None, r.stop_problem
    assert r.converged, explain(r)
    assert r.cni_del_failed == 0, explain(r)
    assert r.cni_after is not None and r.cni_after.rc == 0, "%r\n%s" % (r.cni_after, explain(r))
    assert r.podnet.get("state") == "running", r.podnet
    # Nothing half-made: an address for every ADD answered ok and none for a refused one, none
    # left once every pod was deleted, and every refusal counted.
    assert r.allocated_after_add == r.cni_ok, explain(r)
    assert r.podnet["details"]["pool"]["allocated"] == 0, r.podnet
    assert r.refused_metric == r.cni_refused, explain(r)


def test_32mib_does_everything(world):
    r = sm.run_burst(world, 32 * MiB)
    diag(r.summary())
    diag("parts at their maximum (MiB): %s" % {k: round(v / MiB, 1) for k, v in r.parts.items()})
    assert_clean(r)
    assert r.cni_ok == PODS and r.cni_refused == 0, explain(r)
    assert "refusing new work" not in r.log_since_burst, explain(r)
    # The limits the unit and the DaemonSet ship keep this burst below the watermark (90%).
    ws = r.parts["in_use"]
    for where, limit in sm.shipped_limits().items():
        diag("%s: %d MiB, the burst's memory in use at its peak %.1f MiB (%.0f%%)" % (
            where, limit // MiB, ws / MiB, 100.0 * ws / limit))
        assert ws < 0.9 * limit, "%s: %d MiB is too little for a burst that uses %.1f MiB" % (where, limit // MiB, ws / MiB)


def test_16mib_refuses_pod_networks_and_does_the_rest(world):
    r = sm.run_burst(world, 16 * MiB)
    diag(r.summary())
    assert_clean(r)
    # Degraded, not stopped: some pods were attached, the rest refused with the reason.
    assert r.cni_ok > 0 and r.cni_refused > 0 and r.cni_ok + r.cni_refused == PODS, explain(r)
    for msg in r.cni_errors:
        assert msg.startswith("agent at its memory limit: ") and " MiB in use of the limit 16.0 MiB" in msg, msg
    assert "refusing new work" in r.log_since_burst, explain(r)


def test_16mib_without_the_watermark_is_killed(world):
    """The peer of the test above: the same burst with the guard off ends in the OOM killer.
    Skipped unless PINION_SELFMEM_SHOW_OOM=1 (it only shows why the guard exists)."""
    if os.environ.get("PINION_SELFMEM_SHOW_OOM") != "1":
        pytest.skip("set PINION_SELFMEM_SHOW_OOM=1 to run")
    r = sm.run_burst(world, 16 * MiB, agent={"memory-watermark": "100%"})
    diag(r.summary())
    assert r.oom_kills > 0 or not r.alive, explain(r)
