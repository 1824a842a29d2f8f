# SPDX-License-Identifier: MIT
"""When zkreg writes, against a real ZooKeeper read back with kazoo: deletes go before creates
queued behind the write token bucket, a SIGTERM while creates are still queued (with another
module's node watch alive) exits cleanly and leaves nothing, and a health-check timing edit
writes nothing (the member stays)."""

import socket
import time

import pytest

from pinion_testlib import T, make_pod, wait_until, free_port
import zkreg_testlib as zt
from zkreg_testlib import base, kz, zk  # noqa: F401 (fixtures)
from zkreg_testlib import registrations, wait_endpoints, wait_reg, web_pod, zk_config

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


def closed_port_url():
    return "http://127.0.0.1:%d/bundle/manifest.json" % free_port()


def test_deregistration_goes_before_queued_creates(agent_factory, zk, kz, base):
    """write-qps low and many creates waiting for tokens: a pod that goes unready loses its
    member at once (deletes go first), not after every create queued before it. One write a
    request (max-ops-per-write=1), so that each create waits for a token of its own."""
    a = agent_factory(config=zk_config(zk, write_qps="2", max_ops_per_write="1"))
    path = base + "/q"
    a.write_pod("victim", web_pod("victim", path, ip="10.0.9.250"))
    wait_endpoints(kz, path, ["10.0.9.250:8080"])
    wait_reg(a, "default/victim", lambda r: r["state"] == "registered")
    time.sleep(T(5))  # refill the bucket: the burst below spends it
    for i in range(40):
        a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=f"10.0.9.{i + 1}"))
    wait_until(lambda: len(registrations(a)) == 41, T(10), desc="41 registrations")
    a.write_pod("victim", web_pod("victim", path, ip="10.0.9.250", ready=False))
    wait_until(lambda: "10.0.9.250:8080" not in zt.endpoints(kz, path), T(30), desc="the victim's member gone")
    regs = registrations(a)
    waiting = [p for p, r in regs.items() if p != "default/victim" and r["state"] != "registered"]
    assert len(waiting) >= 10, f"the delete waited behind the creates: only {len(waiting)} still queued"
    assert regs["default/victim"]["state"] == "unready", regs["default/victim"]


def test_sigterm_with_config_watch_and_creates_in_flight(agent_factory, zk, kz, base, tmp_path):
    """configsync watches a node through zkreg's fact; SIGTERM while creates are still queued:
    zkreg unpublishes the fact and ends its watches, so configsync freeing its trigger without
    unwatching leaves nothing that calls into freed memory (the ASan build checks)."""
    kz.create(base + "/version", b"1", makepath=True)
    cfg = zk_config(zk, write_qps="5", max_ops_per_write="1", session_timeout="30s")
    cfg["config.x"] = {"url": closed_port_url(), "dest": str(tmp_path / "dest"), "interval": "1h",
                       "backoff-initial": "300ms", "backoff-max": "1s", "timeout": "2s",
                       "zk-version-node": base + "/version"}
    a = agent_factory(config=cfg)
    wait_until(lambda: a.get_json("/v1/configs/x")["zk_version_node"]["mzxid"] is not None,
               T(15), desc="configsync watching its version node")
    for i in range(20):
        a.write_pod(f"p{i}", web_pod(f"p{i}", base + "/s", ip=f"10.0.3.{i + 1}"))
    wait_until(lambda: len(registrations(a)) == 20, T(10), desc="20 registrations")
    regs = registrations(a)
    assert any(r["state"] != "registered" for r in regs.values()), "every create done: nothing in flight"
    rc = a.sigterm()
    a.assert_exit(rc, 0)
    log = a.log_text()
    assert "AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]
    # whatever was registered is gone (deleted or its session closed)
    wait_endpoints(kz, base + "/s", [], timeout=5)


def test_health_timing_edit_keeps_the_member(agent_factory, zk, kz, base):
    """Changing only health-interval/-timeout/-rise/-fall keeps the running check and its
    healthy verdict: the member stays (a new checker would start unknown and deregister)."""
    port = free_port()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    try:
        a = agent_factory(config=zk_config(zk))
        path = base + "/h"

        def pod(interval, rise):
            return make_pod("h", annotations={"pinion.io/serverset": path, "pinion.io/health": "tcp",
                                              "pinion.io/health-interval": interval,
                                              "pinion.io/health-rise": rise, "pinion.io/health-fall": "1"},
                            ports=[("svc", port)], ip="127.0.0.1")
        a.write_pod("h", pod("300ms", "1"))
        wait_endpoints(kz, path, [f"127.0.0.1:{port}"])
        znode = wait_reg(a, "default/h", lambda r: r["state"] == "registered")["znode"]
        mark = a.log_mark()
        a.write_pod("h", pod("200ms", "5"))
        time.sleep(T(2))
        with open(a.log_file, "rb") as f:
            f.seek(mark)
            since = f.read().decode("utf-8", "replace")
        assert "Deregistered" not in since and "unhealthy" not in since, since
        r = registrations(a)["default/h"]
        assert r["state"] == "registered" and r["znode"] == znode, r
    finally:
        ls.close()
