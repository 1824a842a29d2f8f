# SPDX-License-Identifier: MIT
"""zkreg against a 3-server ZooKeeper ensemble on loopback: killing the leader loses no
registration (the session moves to a surviving server; the members stay, once each)."""

import os
import signal
import time

import pytest

from pinion_testlib import T, make_pod, wait_until, diag
import zkreg_testlib as zt

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


@pytest.fixture(scope="module")
def ensemble():
    e = zt.ZkEnsemble(3)
    try:
        e.start()
        wait_until(lambda: e.leader() is not None, timeout=T(60), desc="a leader")
        yield e
    finally:
        e.close()


def pod(name, path, ip):
    return make_pod(name, annotations={"pinion.io/serverset": path}, ip=ip)


def test_killing_the_leader_loses_no_registration(agent_factory, ensemble):
    path = "/ens/svc"
    a = agent_factory(config={"zookeeper": {"servers": ensemble.hosts, "session-timeout": "6s"}})
    want = sorted(f"10.0.7.{i}:8080" for i in range(5))
    for i in range(5):
        a.write_pod(f"p{i}", pod(f"p{i}", path, f"10.0.7.{i}"))
    leader = ensemble.leader()
    followers = [i for i in ensemble.servers if i != leader]
    # read through a follower that stays up
    kz = zt.kazoo_client(ensemble.servers[followers[0]].hostport)
    try:
        wait_until(lambda: zt.endpoints(kz, path) == want, timeout=T(15), desc="all registered")
        sid = a.get_json("/v1/registrations")["session_id"]
        ensemble.servers[leader].kill()
        t0 = time.monotonic()
        try:
            new_leader = wait_until(lambda: ensemble.leader(), timeout=T(60), desc="a new leader")
        except AssertionError:
            for i, s in ensemble.servers.items():
                diag(f"server {i} log: " + s.log_tail(15).replace("\n", "\n# "))
            raise
        diag(f"leader {leader} killed; server {new_leader} leads after {time.monotonic() - t0:.1f}s")
        # the session survives (it is the ensemble's, not one server's), and with it every member
        wait_until(lambda: a.get_json("/v1/registrations")["session"] == "connected", timeout=T(30))
        kz.retry(kz.exists, "/")
        wait_until(lambda: zt.endpoints(kz, path) == want, timeout=T(15), desc="all still registered")
        time.sleep(1)
        assert zt.endpoints(kz, path) == want
        doc = a.get_json("/v1/registrations")
        assert doc["session_id"] == sid, "the session should survive a leader change"
        assert {r["state"] for r in doc["registrations"]} == {"registered"}
        owners = {s.ephemeralOwner for _, _, s in zt.member_raw(kz, path)}
        assert owners == {int(sid, 16)}
        # and it keeps working: a new pod registers through the new leader
        a.write_pod("late", pod("late", path, "10.0.7.99"))
        wait_until(lambda: zt.endpoints(kz, path) == sorted(want + ["10.0.7.99:8080"]), timeout=T(15))
    finally:
        kz.stop()
        kz.close()
