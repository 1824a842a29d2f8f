# SPDX-License-Identifier: MIT
"""The operator's drain outlives the process, against a real ZooKeeper read back with kazoo: a
drain (or undrain) is in <state-dir>/zkreg/drain before the API answers, so a kill -9 right after
the answer and a restart leave the node as the operator left it; a drain file that cannot be
written refuses the drain and changes nothing; one that cannot be read starts the node drained
(fail safe) and says why. And a pod that turns unready while the session is away shows "not
Ready" once the session is back, not a stale note about the session."""

import json
import os
import re
import time

import pytest

from pinion_testlib import T, diag, wait_until
import zkreg_testlib as zt
from zkreg_testlib import base, kz, zk  # noqa: F401 (fixtures)
from zkreg_testlib import registrations, wait_endpoints, wait_reg, web_pod, zk_config

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")

# How long a restarted drained agent is watched for members: an undurable drain put every member
# back ALIVE within 6 s of the restart (and within milliseconds of the session at write-qps 1000).
WATCH_SECONDS = 8


def drain_file(a):
    return os.path.join(a.state_dir, "zkreg", "drain")


def zkreg_details(a):
    return {m["name"]: m for m in a.status()["modules"]}["zkreg"]["details"]


def start_pods(a, kz, path, n, net):
    want = [f"10.0.{net}.{i + 1}:8080" for i in range(n)]
    for i in range(n):
        a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=f"10.0.{net}.{i + 1}"))
    wait_endpoints(kz, path, want)
    return want


def test_drain_holds_across_kill9_and_restart(agent_factory, zk, kz, base):
    """kill -9 right after the drain answered (the STOPPING writes may not even have left):
    the restarted agent registers nothing; the old session's members go with it (the restart
    ends it) and none comes back, ALIVE or otherwise."""
    a = agent_factory(config=zk_config(zk, session_timeout="30s", drain_delay="10m"))
    path = base + "/d"
    start_pods(a, kz, path, 3, 20)
    t0 = time.monotonic()
    r = a.request("POST", "/v1/registrations/drain")
    took = time.monotonic() - t0
    a.kill9()
    assert r.status == 200, r
    with open(drain_file(a)) as f:
        doc = json.load(f)
    assert doc["version"] == 1 and doc["drained"] is True and doc["since"].endswith("Z"), doc

    t0 = time.monotonic()
    a.start()
    a.wait_log(r"\[zkreg\] Drained since \S+Z .*registering nothing", timeout=T(10))
    wait_until(lambda: a.get_json("/v1/registrations")["session"] == "connected", timeout=T(20))
    for i in range(3):
        wait_reg(a, f"default/p{i}", lambda x: x["state"] == "unready" and x["last_error"] == "drained")
    wait_endpoints(kz, path, [], timeout=20)  # the previous agent's session ended at the restart
    diag(f"drain answered in {took * 1000:.1f}ms (file written and synced); after kill -9 and restart "
         f"the old members were gone {time.monotonic() - t0:.1f}s after the start, none came back "
         f"in {WATCH_SECONDS}s")
    deadline = time.monotonic() + WATCH_SECONDS
    while time.monotonic() < deadline:
        got = zt.members(kz, path)
        assert not got, f"a drained node registered after its restart: {got}"
        time.sleep(0.1)

    doc = a.get_json("/v1/registrations")
    assert doc["drained"] is True and doc["drained_since"] == json.load(open(drain_file(a)))["since"], doc
    details = zkreg_details(a)
    assert details["drained"] is True and details["drained_since"].endswith("Z"), details
    assert "drain_error" not in details
    assert a.metrics().value("pinion_zookeeper_drained") == 1
    out = a.ctl("status")
    assert out.rc == 0 and "drained:" in out.stdout and "pinionctl undrain" in out.stdout, out
    out = a.ctl("registrations")
    assert out.rc == 0 and "drained:   yes" in out.stdout and details["drained_since"] in out.stdout, out

    # and the undrain brings them back
    assert a.request("POST", "/v1/registrations/undrain").status == 200
    wait_endpoints(kz, path, [f"10.0.20.{i + 1}:8080" for i in range(3)])
    assert a.metrics().value("pinion_zookeeper_drained") == 0


def test_undrain_holds_across_kill9_and_restart(agent_factory, zk, kz, base):
    """The other way: undrain, kill -9 right after the answer, restart: every member is back
    ALIVE and the node is not drained."""
    a = agent_factory(config=zk_config(zk, session_timeout="30s"))
    path = base + "/u"
    want = start_pods(a, kz, path, 3, 21)
    assert a.request("POST", "/v1/registrations/drain").status == 200
    wait_endpoints(kz, path, [], timeout=20)
    r = a.request("POST", "/v1/registrations/undrain")
    a.kill9()
    assert r.status == 200, r
    with open(drain_file(a)) as f:
        assert json.load(f)["drained"] is False

    a.start()
    wait_endpoints(kz, path, want, timeout=20)
    wait_until(lambda: {m["status"] for m in zt.members(kz, path).values()} == {"ALIVE"} and
               {s.ephemeralOwner for _, _, s in zt.member_raw(kz, path)} ==
               {int(a.get_json("/v1/registrations")["session_id"], 16)}, timeout=T(20),
               desc="every member ALIVE, of the new session")
    doc = a.get_json("/v1/registrations")
    assert doc["drained"] is False and doc["drained_since"] is None, doc
    assert zkreg_details(a)["drained"] is False
    assert "Drained since" not in a.log_text()


def test_drain_that_cannot_be_saved_is_refused(agent_factory, zk, kz, base):
    """The drain file cannot be replaced (a directory stands where it goes): the drain answers
    500 with the reason, and nothing changes: not drained, every member ALIVE."""
    a = agent_factory(config=zk_config(zk))
    path = base + "/f"
    want = start_pods(a, kz, path, 2, 22)
    os.makedirs(drain_file(a))
    try:
        r = a.request("POST", "/v1/registrations/drain")
        assert r.status == 500, r
        body = r.body
        assert "cannot save the drain to " + drain_file(a) in body["error"], body
        assert a.get_json("/v1/registrations")["drained"] is False
        time.sleep(1)  # a drain that acted anyway would have marked them by now
        assert {m["status"] for m in zt.members(kz, path).values()} == {"ALIVE"}
        assert zt.endpoints(kz, path) == want
        assert a.metrics().value("pinion_zookeeper_drain_file_errors_total", op="save") == 1
        out = a.ctl("drain")
        assert out.rc != 0 and "cannot save the drain" in out.stderr, out
    finally:
        os.rmdir(drain_file(a))
    assert a.request("POST", "/v1/registrations/drain").status == 200
    wait_until(lambda: {m["status"] for m in zt.members(kz, path).values()} <= {"STOPPING"}, timeout=T(10))
    assert a.request("POST", "/v1/registrations/undrain").status == 200


@pytest.mark.parametrize("content,why", [
    (b"{\"version\":1,\"drai", "not a JSON object"),
    (b"{\"version\":\"two\",\"drained\":false}", "no valid \"version\""),
    (b"{\"version\":1,\"drained\":\"no\"}", "\"drained\" is not true or false"),
])
def test_unreadable_drain_file_starts_drained(agent_factory, zk, kz, base, content, why):
    """An operator's drain we cannot read fails safe: the node starts drained (registering
    nothing), logs the file and why at error level and shows it in /v1/status; the file is left
    as it is until the operator's next drain or undrain writes it anew."""
    a = agent_factory(config=zk_config(zk), start=False)
    os.makedirs(os.path.dirname(drain_file(a)), mode=0o700, exist_ok=True)
    with open(drain_file(a), "wb") as f:
        f.write(content)
    a.start()
    path = base + "/c"
    a.write_pod("c", web_pod("c", path, ip="10.0.23.1"))
    wait_reg(a, "default/c", lambda x: x["last_error"] == "drained")
    a.wait_log(r"error: \[zkreg\] Cannot use the drain file .*/zkreg/drain \(" + re.escape(why) +
               r".*\): starting drained", timeout=T(5))
    details = zkreg_details(a)
    assert details["drained"] is True and why in details["drain_error"], details
    assert a.get_json("/v1/registrations")["drain_error"] == details["drain_error"]
    assert a.metrics().value("pinion_zookeeper_drain_file_errors_total", op="load") == 1
    out = a.ctl("status")
    assert "drained:" in out.stdout and why in out.stdout, out
    assert zt.members(kz, path) == {}
    with open(drain_file(a), "rb") as f:
        assert f.read() == content, "the unreadable file was rewritten"
    # the operator decides: undrain writes a good file and registers
    assert a.request("POST", "/v1/registrations/undrain").status == 200
    wait_endpoints(kz, path, ["10.0.23.1:8080"])
    with open(drain_file(a)) as f:
        assert json.load(f)["version"] == 1
    assert "drain_error" not in zkreg_details(a)


def wait_watched(a, n):
    """Until the members' child watch is set: nothing of the registrations' in flight at the cut."""
    wait_until(lambda: a.metrics().value("pinion_zookeeper_watched_members") == n, T(10), desc="members watched")


def test_unready_during_outage_shows_not_ready_after(agent_factory, zk, kz, base):
    """The connection is cut past the session timeout; meanwhile the pod turns unready. Its
    member goes with the expired session; once a new session is up, the registration says the
    pod is not Ready (it showed "waiting for the ZooKeeper session (suspended)" forever)."""
    proxy = zt.CutProxy(zk.hosts)
    try:
        cfg = zk_config(zk, session_timeout="4s")
        cfg["zookeeper"]["servers"] = proxy.hostport
        a = agent_factory(config=cfg)
        path = base + "/p"
        a.write_pod("p", web_pod("p", path, ip="10.0.24.1"))
        a.write_pod("q", web_pod("q", path, ip="10.0.24.2"))
        wait_endpoints(kz, path, ["10.0.24.1:8080", "10.0.24.2:8080"])
        wait_watched(a, 2)
        proxy.cut()
        wait_until(lambda: a.get_json("/v1/registrations")["session"] == "suspended", timeout=T(20))
        a.write_pod("p", web_pod("p", path, ip="10.0.24.1", ready=False))
        wait_reg(a, "default/p", lambda x: "waiting for the ZooKeeper session" in (x["last_error"] or ""))
        wait_endpoints(kz, path, [], timeout=T(20))  # the server expired the session
        proxy.resume()
        wait_endpoints(kz, path, ["10.0.24.2:8080"], timeout=T(20))
        wait_until(lambda: a.get_json("/v1/registrations")["session"] == "connected", timeout=T(10))
        r = wait_reg(a, "default/p", lambda x: x["state"] == "unready")
        assert r["last_error"] == "the pod is not Ready", r
        assert registrations(a)["default/q"]["last_error"] is None
    finally:
        proxy.close()


def test_unready_during_short_outage_shows_not_ready_after(agent_factory, zk, kz, base):
    """The same with the session surviving the cut: the member is deleted once the connection
    is back, and the reason is "not Ready"."""
    proxy = zt.CutProxy(zk.hosts)
    try:
        cfg = zk_config(zk, session_timeout="20s")
        cfg["zookeeper"]["servers"] = proxy.hostport
        a = agent_factory(config=cfg)
        path = base + "/s"
        a.write_pod("s", web_pod("s", path, ip="10.0.25.1"))
        wait_endpoints(kz, path, ["10.0.25.1:8080"])
        wait_watched(a, 1)
        proxy.cut()
        wait_until(lambda: a.get_json("/v1/registrations")["session"] == "suspended", timeout=T(20))
        a.write_pod("s", web_pod("s", path, ip="10.0.25.1", ready=False))
        wait_reg(a, "default/s", lambda x: "waiting for the ZooKeeper session" in (x["last_error"] or ""))
        proxy.resume()
        wait_endpoints(kz, path, [], timeout=T(20))
        r = wait_reg(a, "default/s", lambda x: x["state"] == "unready")
        assert r["last_error"] == "the pod is not Ready", r
        assert not a.metrics().value("pinion_zookeeper_session_transitions_total", state="expired")
    finally:
        proxy.close()
