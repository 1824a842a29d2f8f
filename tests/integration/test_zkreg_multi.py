# SPDX-License-Identifier: MIT
"""zkreg's bulk writes against a real ZooKeeper, read back with kazoo: pods that come or go
together are written as ZooKeeper multi requests (one request for many members, not one per
member), each member still exactly once; a multi that fails on one node (a path whose parents
do not exist yet) still gets every member registered, the others sent again one by one."""

import os

import pytest

from pinion_testlib import T, log_lines, wait_until
import zkreg_testlib as zt
from zkreg_testlib import base, kz, zk  # noqa: F401 (fixtures)
from zkreg_testlib import registrations, wait_endpoints, web_pod, zk_config

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")

N = 60


def ops(a, op, result="ok"):
    return a.metrics().value("pinion_zookeeper_operations_total", op=op, result=result) or 0


def problems(a):
    return [ln for ln in log_lines(a.log_text()) if ln.startswith(("warning:", "error:", "crit:"))]


def test_pods_together_are_one_multi_each_way(agent_factory, zk, kz, base):
    """N pods present at start are created in one multi; the N pods going away at once (their
    directory replaced) are deleted in multis; every member exactly once, nothing left."""
    path = base + "/bulk"
    kz.ensure_path(path)
    a = agent_factory(config=zk_config(zk), start=False)
    want = []
    for i in range(N):
        ip = f"10.7.{i // 200}.{i % 200 + 1}"
        a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=ip))
        want.append(f"{ip}:8080")
    a.start()
    wait_endpoints(kz, path, want, timeout=20)
    assert len(kz.get_children(path)) == N
    assert ops(a, "create") == N
    assert ops(a, "multi") == 1, a.metrics().find("pinion_zookeeper_operations_total")
    wait_until(lambda: all(r["state"] == "registered" for r in registrations(a).values()), T(10),
               desc="every registration registered")

    # All at once: the directory replaced by an empty one (the agent re-reads it whole). Files
    # removed one by one are applied one by one, each delete on its own.
    os.rename(a.pods_dir, a.pods_dir + ".old")
    os.mkdir(a.pods_dir)
    wait_endpoints(kz, path, [], timeout=20)
    # kazoo may see them gone before the agent has read the answers
    wait_until(lambda: not registrations(a), T(10), desc="every registration gone")
    assert ops(a, "delete") == N
    assert ops(a, "multi") >= 2, a.metrics().find("pinion_zookeeper_operations_total")
    assert not problems(a), problems(a)


def test_multi_failing_on_a_missing_parent_registers_everyone_once(agent_factory, zk, kz, base):
    """The path does not exist: the multi fails (NONODE) without creating anything; the member
    it failed on creates the parents, the others go out one by one after them: all N members
    registered, once each."""
    path = base + "/not/yet/there"
    a = agent_factory(config=zk_config(zk), start=False)
    want = []
    for i in range(N):
        ip = f"10.8.{i // 200}.{i % 200 + 1}"
        a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=ip))
        want.append(f"{ip}:8080")
    a.start()
    wait_endpoints(kz, path, want, timeout=20)
    assert len(kz.get_children(path)) == N
    assert ops(a, "multi", "no_node") == 1, a.metrics().find("pinion_zookeeper_operations_total")
    assert ops(a, "create") == N
    wait_until(lambda: all(r["state"] == "registered" for r in registrations(a).values()), T(10),
               desc="every registration registered")
