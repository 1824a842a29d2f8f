# SPDX-License-Identifier: MIT
"""zkreg fixes after review, against a real ZooKeeper read back with kazoo: shutdown with
another module's node watches alive, allowed-prefixes, the session file at a shutdown without a
server, adoption across registrations, delete priority, suspended sessions, members deleted by
someone else."""

import json
import os
import socket
import time

import pytest

from pinion_testlib import T, make_pod, wait_until, free_port
import zkreg_testlib as zt

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


@pytest.fixture(scope="module")
def zk():
    s = zt.ZkStandalone()
    try:
        s.start()
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def kz(zk):
    c = zt.kazoo_client(zk.hosts)
    yield c
    c.stop()
    c.close()


@pytest.fixture
def base(request):
    return "/pinion-review/" + request.node.name.replace("[", "_").replace("]", "")


def zk_config(zk, **kw):
    z = {"servers": zk.hosts, "session-timeout": "4s", "write-qps": "1000", "drain-delay": "1s",
         "flap-damping": "0"}
    z.update({k.replace("_", "-"): v for k, v in kw.items()})
    return {"zookeeper": z}


def web_pod(name, path, ip="10.1.2.3", namespace="default", ready=None):
    return make_pod(name, namespace=namespace, annotations={"pinion.io/serverset": path},
                    ports=[("http", 8080)], ip=ip, conditions=None if ready is None else {"Ready": ready})


def registrations(a):
    return {r["pod"]: r for r in a.get_json("/v1/registrations")["registrations"]}


def wait_reg(a, pod, pred, timeout=10):
    def probe():
        r = registrations(a).get(pod)
        return r if r and pred(r) else None
    return wait_until(probe, timeout=T(timeout), desc=f"registration of {pod}")


def wait_endpoints(kz, path, want, timeout=10):
    want = sorted(want)
    got = []

    def probe():
        got[:] = zt.endpoints(kz, path)
        return got == want
    try:
        wait_until(probe, timeout=T(timeout), desc=f"members of {path} == {want}")
    except Exception:
        raise AssertionError(f"members of {path}: {got}, wanted {want}")


def closed_port_url():
    return "http://127.0.0.1:%d/bundle/manifest.json" % free_port()


def test_sigterm_with_config_watch_and_creates_in_flight(agent_factory, zk, kz, base, tmp_path):
    """configsync watches a node through zkreg's fact; SIGTERM while creates are still queued:
    zkreg unpublishes the fact and ends its watches, so configsync freeing its trigger without
    unwatching leaves nothing that calls into freed memory (the ASan build checks)."""
    kz.create(base + "/version", b"1", makepath=True)
    cfg = zk_config(zk, write_qps="5", session_timeout="30s")
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
