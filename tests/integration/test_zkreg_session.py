# SPDX-License-Identifier: MIT
"""The registrations and the ZooKeeper session, against a real ZooKeeper read back with kazoo:
a registration is pending while the session is suspended (also when the connection drops
while the client reads an answer), a SIGTERM without a server keeps
the session file so that the next start ends the old session (no duplicate members), a member
deleted by someone else while the connection was down is noticed on reconnect, and a busy
session does not look the server names up on every loop pass."""

import os
import shutil
import signal
import subprocess
import time

import pytest

from pinion_testlib import T, wait_until
import zkreg_testlib as zt
from zkreg_testlib import base, kz, zk  # noqa: F401 (fixtures)
from zkreg_testlib import registrations, wait_endpoints, wait_reg, web_pod, zk_config

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


def test_registration_is_pending_while_session_suspended(agent_factory, zk, kz, base):
    """Without a connection the member may be gone at any moment (expiry): the registration
    shows pending with last_error "session suspended", and registered again once connected."""
    a = agent_factory(config=zk_config(zk, session_timeout="9s"))
    path = base + "/s"
    a.write_pod("s", web_pod("s", path, ip="10.0.10.1"))
    wait_endpoints(kz, path, ["10.0.10.1:8080"])
    wait_reg(a, "default/s", lambda r: r["state"] == "registered")
    os.kill(zk.server.proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: a.get_json("/v1/registrations")["session"] == "suspended", timeout=T(15))
        r = wait_reg(a, "default/s", lambda r: r["state"] == "pending", timeout=3)
        assert r["last_error"] == "session suspended", r
        assert a.metrics().value("pinion_zookeeper_registrations", state="registered") == 0
    finally:
        os.kill(zk.server.proc.pid, signal.SIGCONT)
    r = wait_reg(a, "default/s", lambda r: r["state"] == "registered", timeout=30)
    assert r["last_error"] is None, r
    wait_endpoints(kz, path, ["10.0.10.1:8080"], timeout=20)


def test_sigterm_without_server_keeps_session_file_and_restart_reaps(agent_factory, base):
    """ZooKeeper down at SIGTERM: the close never reaches the server, which keeps the session
    (and our members) until it expires; the session file stays so that the next start ends
    that session at once: no duplicate members next to the new session's."""
    s = zt.ZkStandalone()
    c = None
    try:
        s.start()
        c = zt.kazoo_client(s.hosts)
        a = agent_factory(config=zk_config(s, session_timeout="30s"))
        path = base + "/m"
        want = [f"10.0.6.{i}:8080" for i in range(1, 4)]
        for i in range(1, 4):
            a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=f"10.0.6.{i}"))
        wait_endpoints(c, path, want)
        session_file = os.path.join(a.state_dir, "zkreg", "session")
        assert os.path.exists(session_file)
        s.server.stop()
        wait_until(lambda: {m["name"]: m for m in a.status()["modules"]}["zkreg"]["details"]["session"]
                   != "connected", T(15), desc="zkreg sees the server gone")
        a.assert_exit(a.sigterm(), 0)
        assert os.path.exists(session_file), "session file removed although the close never reached the server"
        assert "not closed on the server" in a.log_text()

        s.server.start()
        s.server.wait_serving(60)
        wait_until(lambda: c.connected, T(20), desc="kazoo reconnected")
        a.start()
        a.wait_log(r"Closing session 0x[0-9a-f]+ left by the previous agent", timeout=T(15))

        def one_session():
            members = zt.member_raw(c, path)
            sid = int(a.get_json("/v1/registrations")["session_id"], 16)
            return len(members) == 3 and {st.ephemeralOwner for _, _, st in members} == {sid}
        wait_until(one_session, T(15), desc="only the new session's members")
        assert zt.endpoints(c, path) == want
        a.assert_exit(a.sigterm(), 0)
        assert not os.path.exists(session_file), "a clean close leaves the session file behind"
    finally:
        if c:
            c.stop()
            c.close()
        s.close()


@pytest.mark.skipif(not shutil.which("strace"), reason="strace not installed")
def test_busy_session_does_not_resolve_the_servers_every_loop_pass(agent_factory, zk, kz, base):
    """The client would look the server names up again on every zookeeper_interest() (each a
    getaddrinfo with a netlink socket and address dump): while 30 pods are registered and
    deregistered, at most one routine lookup happens (one per 10 s window)."""
    a = agent_factory(config=zk_config(zk))
    path = base + "/dns"
    trace = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=socket", "-p", str(a.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(T(0.5))  # attached
        for i in range(30):
            a.write_pod(f"d{i}", web_pod(f"d{i}", path, ip=f"10.0.11.{i + 1}"))
        wait_until(lambda: len(zt.endpoints(kz, path)) == 30, T(15), desc="30 members")
        for i in range(30):
            a.remove_pod(f"d{i}")
        wait_endpoints(kz, path, [], timeout=15)
    finally:
        trace.terminate()
        _, err = trace.communicate(timeout=10)
    lookups = [ln for ln in err.splitlines() if "AF_NETLINK" in ln]
    assert len(lookups) <= 1, "\n".join(lookups[:10])


def test_member_deleted_while_disconnected_is_noticed_on_reconnect(agent_factory, zk, kz, base):
    """The connection (not the session) is lost; meanwhile someone else deletes one of our
    members: once the same session is back, its path's child watch (re-set by the client on
    reconnect) tells, and the member is created again; the others stay as they are."""
    proxy = zt.CutProxy(zk.hosts)
    try:
        cfg = zk_config(zk, session_timeout="20s")
        cfg["zookeeper"]["servers"] = proxy.hostport
        a = agent_factory(config=cfg)
        path = base + "/r"
        want = [f"10.0.14.{i + 1}:8080" for i in range(3)]
        for i in range(3):
            a.write_pod(f"r{i}", web_pod(f"r{i}", path, ip=f"10.0.14.{i + 1}"))
        wait_endpoints(kz, path, want)
        wait_until(lambda: a.metrics().value("pinion_zookeeper_watched_members") == 3, T(10),
                   desc="every member watched")
        before = {n: r["znode"] for n, r in registrations(a).items()}
        mark = a.log_mark()
        proxy.cut()
        wait_until(lambda: a.get_json("/v1/registrations")["session"] == "suspended", timeout=T(20))
        kz.delete(before["default/r1"])
        proxy.resume()
        a.wait_log(r"Member .*/r/member_\d+ was deleted by someone else: registering again", since=mark,
                   timeout=T(20))
        wait_endpoints(kz, path, want, timeout=T(10))
        after = {n: r["znode"] for n, r in registrations(a).items()}
        assert after["default/r0"] == before["default/r0"] and after["default/r2"] == before["default/r2"]
        assert after["default/r1"] != before["default/r1"]
        # the same session all along (a new one would have replaced every member)
        assert not a.metrics().value("pinion_zookeeper_session_transitions_total", state="expired")
    finally:
        proxy.close()



def test_connection_cut_right_after_a_registration_suspends_the_session(agent_factory, zk, kz, base):
    """The connection drops just after a member was created, while the client still reads the
    answers that follow (the path's child listing): the session is suspended at once, as with an
    idle connection. (The client queues its "connection lost" event for a later call that its
    failing reconnects never reach: the session looked connected for as long as the cut lasted,
    with every operation failing and tried again at once.) Three rounds: the moment of the cut
    is not chosen exactly."""
    proxy = zt.CutProxy(zk.hosts)
    try:
        cfg = zk_config(zk, session_timeout="20s")
        cfg["zookeeper"]["servers"] = proxy.hostport
        a = agent_factory(config=cfg)
        path = base + "/f"
        want = []
        for i in range(3):
            a.write_pod(f"f{i}", web_pod(f"f{i}", path, ip=f"10.0.15.{i + 1}"))
            want.append(f"10.0.15.{i + 1}:8080")
            wait_endpoints(kz, path, want)
            proxy.cut()
            wait_until(lambda: a.get_json("/v1/registrations")["session"] == "suspended", timeout=T(10),
                       desc=f"the session suspended (round {i})")
            proxy.resume()
            wait_until(lambda: a.get_json("/v1/registrations")["session"] == "connected", timeout=T(20))
        wait_until(lambda: a.metrics().value("pinion_zookeeper_registrations", state="registered") == 3,
                   timeout=T(20), desc="all registered")
        assert zt.endpoints(kz, path) == want
        assert not a.metrics().value("pinion_zookeeper_session_transitions_total", state="expired")
    finally:
        proxy.close()
