# SPDX-License-Identifier: MIT
"""zkreg fixes after review, against a real ZooKeeper read back with kazoo: shutdown with
another module's node watches alive, allowed-prefixes, the session file at a shutdown without a
server, adoption across registrations, delete priority, suspended sessions, members deleted by
someone else."""

import json
import os
import signal
import socket
import time

import pytest

from pinion_testlib import T, make_pod, wait_until, free_port
import zkreg_testlib as zt
from zkreg_testlib import kz, zk  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


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


def test_allowed_prefixes_namespace_template_and_depth_cap(agent_factory, zk, kz, base):
    """allowed-prefixes: a pod registers only at or below one of them (${namespace} is its own
    namespace), segment-wise; zkreg creates only the nodes below the prefix; a path deeper than
    16 segments is refused whatever the list says. A refused path: unready with a clear error."""
    kz.ensure_path(base + "/ns/team-a")
    kz.ensure_path(base + "/shared")
    a = agent_factory(config=zk_config(zk, allowed_prefixes=f"{base}/ns/${{namespace}}, {base}/shared"))
    a.write_pod("a-web", web_pod("web", base + "/ns/team-a/web", ip="10.0.4.1", namespace="team-a"))
    a.write_pod("b-web", web_pod("web", base + "/ns/team-a/web", ip="10.0.4.2", namespace="team-b"))
    a.write_pod("a-deep", web_pod("deep", base + "/shared/x/y", ip="10.0.4.3", namespace="team-a"))
    a.write_pod("a-near", web_pod("near", base + "/ns/team-ab", ip="10.0.4.4", namespace="team-ab"))
    a.write_pod("c-web", web_pod("web", base + "/ns/team-c/web", ip="10.0.4.5", namespace="team-c"))
    deep = base + "".join(f"/d{i}" for i in range(17 - base.count("/")))
    assert deep.count("/") == 17
    a.write_pod("a-toodeep", web_pod("toodeep", deep, ip="10.0.4.6", namespace="team-a"))

    wait_endpoints(kz, base + "/ns/team-a/web", ["10.0.4.1:8080"])
    wait_endpoints(kz, base + "/shared/x/y", ["10.0.4.3:8080"])  # parents below the prefix made
    r = wait_reg(a, "team-b/web", lambda r: r["state"] == "unready" and r["last_error"])
    assert "outside [zookeeper] allowed-prefixes" in r["last_error"] and "team-b" in r["last_error"], r
    # /ns/team-ab is not below /ns/team-a (whole segments); its own ${namespace} prefix does not exist
    r = wait_reg(a, "team-ab/near", lambda r: r["last_error"] and "must exist" in r["last_error"], timeout=15)
    assert kz.exists(base + "/ns/team-ab") is None, "zkreg created the allowed prefix itself"
    r = wait_reg(a, "team-c/web", lambda r: r["last_error"] and "must exist" in r["last_error"], timeout=15)
    assert r["state"] != "registered", r
    assert kz.exists(base + "/ns/team-c") is None, "zkreg created nodes at or above the allowed prefix"
    r = wait_reg(a, "team-a/toodeep", lambda r: r["state"] == "unready" and r["last_error"])
    assert "more than 16" in r["last_error"], r
    assert kz.exists(deep) is None

    # the operator makes team-c's prefix: it registers (after its backoff)
    kz.ensure_path(base + "/ns/team-c")
    wait_endpoints(kz, base + "/ns/team-c/web", ["10.0.4.5:8080"], timeout=20)


def test_allowed_prefixes_reload_and_bad_value(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk))
    a.write_pod("p", web_pod("p", base + "/open/p", ip="10.0.5.1"))
    wait_endpoints(kz, base + "/open/p", ["10.0.5.1:8080"])
    # a reload that leaves the path outside every prefix deregisters it
    kz.ensure_path(base + "/only")
    a.write_config(sections=zk_config(zk, allowed_prefixes=base + "/only"))
    mark = a.log_mark()
    a.sighup()
    a.wait_log(r"Configuration reloaded", since=mark)
    wait_endpoints(kz, base + "/open/p", [])
    r = wait_reg(a, "default/p", lambda r: r["state"] == "unready")
    assert "allowed-prefixes" in r["last_error"], r
    # a bad prefix: the reload is refused, the old config keeps running
    a.write_config(sections=zk_config(zk, allowed_prefixes="relative/path"))
    mark = a.log_mark()
    a.sighup()
    a.wait_log(r"allowed-prefixes must be absolute", since=mark)
    assert registrations(a)["default/p"]["state"] == "unready"


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


def test_deregistration_goes_before_queued_creates(agent_factory, zk, kz, base):
    """write-qps low and many creates waiting for tokens: a pod that goes unready loses its
    member at once (deletes go first), not after every create queued before it."""
    a = agent_factory(config=zk_config(zk, write_qps="2"))
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
