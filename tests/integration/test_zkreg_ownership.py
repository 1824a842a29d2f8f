# SPDX-License-Identifier: MIT
"""Which members are ours, against a real ZooKeeper read back with kazoo: the check after a
connection loss during a create adopts only our own member (not another registration's with the
same endpoint), a member deleted by someone else is made again (also when the whole path goes),
and our own delete is not mistaken for someone else's. Deletes by someone else are noticed
through one child watch per path, not a watch per member (whose notifications our own deletes
would cost the server)."""

import os
import signal
import time

import pytest

from pinion_testlib import T, make_pod, wait_until
import zkreg_testlib as zt
from zkreg_testlib import base, kz, zk  # noqa: F401 (fixtures)
from zkreg_testlib import registrations, wait_endpoints, wait_reg, web_pod, zk_config


def server_watches(zk):
    """Every session's watches, as the server counts them (a path watched by one session
    counts once per kind of watch)."""
    for line in zt.four_letter(zk.server.client_port, "mntr").splitlines():
        if line.startswith("zk_watch_count"):
            return int(line.split()[1])
    raise AssertionError("no zk_watch_count in mntr")


def watched(a):
    return a.metrics().value("pinion_zookeeper_watched_members") or 0

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


def test_uncertain_create_does_not_adopt_another_registrations_member(agent_factory, zk, kz, base):
    """Two pods with one endpoint in one path (host network): after a connection loss during
    the second pod's create, its check must neither adopt the first pod's member nor delete it
    as "a second member of ours": each pod keeps its own member."""
    a = agent_factory(config=zk_config(zk, session_timeout="9s", write_qps="100000"))
    path = base + "/h"
    a.write_pod("first", web_pod("first", path, ip="10.0.7.1"))
    wait_endpoints(kz, path, ["10.0.7.1:8080"])
    first = wait_reg(a, "default/first", lambda r: r["state"] == "registered")["znode"]
    os.kill(zk.server.proc.pid, signal.SIGSTOP)
    try:
        a.write_pod("second", web_pod("second", path, ip="10.0.7.1"))
        wait_until(lambda: a.get_json("/v1/registrations")["session"] == "suspended", timeout=T(15))
        a.wait_log(r"connection lost during create", timeout=T(5))
    finally:
        os.kill(zk.server.proc.pid, signal.SIGCONT)
    wait_endpoints(kz, path, ["10.0.7.1:8080", "10.0.7.1:8080"], timeout=30)
    second = wait_reg(a, "default/second", lambda r: r["state"] == "registered", timeout=30)["znode"]
    assert registrations(a)["default/first"]["znode"] == first
    assert second != first, "the second pod adopted the first pod's member"
    time.sleep(1.5)
    assert sorted(n for n, _, _ in zt.member_raw(kz, path)) == sorted([first.rsplit("/", 1)[1],
                                                                      second.rsplit("/", 1)[1]])


def test_member_deleted_by_someone_else_is_recreated(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk))
    path = base + "/d"
    a.write_pod("d", web_pod("d", path, ip="10.0.11.1"))
    a.write_pod("e", web_pod("e", path, ip="10.0.11.2"))
    wait_endpoints(kz, path, ["10.0.11.1:8080", "10.0.11.2:8080"])
    old = wait_reg(a, "default/d", lambda r: r["state"] == "registered")["znode"]
    other = wait_reg(a, "default/e", lambda r: r["state"] == "registered")["znode"]
    # an update first (the watch is one-shot: it must be re-armed after our own write)
    a.write_pod("d", make_pod("d", annotations={"pinion.io/serverset": path, "pinion.io/shard": "4"},
                              ports=[("http", 8080)], ip="10.0.11.1"))
    wait_until(lambda: b'"shard":4' in kz.get(old)[0], T(10), desc="member updated")
    mark = a.log_mark()
    kz.delete(old)
    a.wait_log(r"Member .* was deleted by someone else: registering again", since=mark, timeout=T(10))
    new = wait_reg(a, "default/d", lambda r: r["state"] == "registered" and r["znode"] != old)["znode"]
    wait_endpoints(kz, path, ["10.0.11.1:8080", "10.0.11.2:8080"])
    assert kz.exists(new) is not None and kz.exists(old) is None
    assert registrations(a)["default/e"]["znode"] == other
    # our own deregistration is not mistaken for someone else's delete
    mark = a.log_mark()
    a.write_pod("e", web_pod("e", path, ip="10.0.11.2", ready=False))
    wait_endpoints(kz, path, ["10.0.11.1:8080"])
    time.sleep(T(1))
    with open(a.log_file, "rb") as f:
        f.seek(mark)
        since = f.read().decode("utf-8", "replace")
    assert "deleted by someone else" not in since, since
    assert "Deregistered" in since
    assert registrations(a)["default/e"]["state"] == "unready"


def test_one_watch_per_path_and_a_deleted_path_is_registered_again(agent_factory, zk, kz, base):
    """Members in two paths: the agent holds one watch per path (not one per member), and
    still notices a member, or a whole path, deleted by someone else."""
    a = agent_factory(config=zk_config(zk, write_qps="100000"), start=False)
    many, few = base + "/many", base + "/few"
    want_many = [f"10.0.12.{i + 1}:8080" for i in range(40)]
    want_few = [f"10.0.13.{i + 1}:8080" for i in range(3)]
    for i in range(40):
        a.write_pod(f"m{i}", web_pod(f"m{i}", many, ip=f"10.0.12.{i + 1}"))
    for i in range(3):
        a.write_pod(f"f{i}", web_pod(f"f{i}", few, ip=f"10.0.13.{i + 1}"))
    before = server_watches(zk)
    a.start()
    wait_endpoints(kz, many, want_many)
    wait_endpoints(kz, few, want_few)
    wait_until(lambda: watched(a) == 43, T(10), desc="every member watched")
    assert server_watches(zk) - before == 2

    # A member deleted by someone else in the busy path is made again; the others stay.
    old = sorted(kz.get_children(many))
    mark = a.log_mark()
    kz.delete(f"{many}/{old[7]}")
    a.wait_log(r"Member .* was deleted by someone else: registering again", since=mark, timeout=T(10))
    wait_endpoints(kz, many, want_many)
    assert len(set(kz.get_children(many)) - set(old)) == 1

    # The whole path deleted by someone else (at once: the agent would create members again
    # between deletes): its parents and members are made again.
    tx = kz.transaction()
    for c in kz.get_children(few):
        tx.delete(f"{few}/{c}")
    tx.delete(few)
    assert all(r is True for r in tx.commit())
    wait_endpoints(kz, few, want_few, timeout=T(15))
    wait_until(lambda: watched(a) == 43, T(10), desc="every member watched again")
    assert server_watches(zk) - before == 2
    assert len(kz.get_children(many)) == 40
