# SPDX-License-Identifier: MIT
"""zkreg against a real ZooKeeper (one server for this file, started once), read back with
kazoo as an independent client: the ServerSet JSON, readiness, health checks, SIGTERM, kill -9,
forced session expiry, an outage, drain, the API/CLI/metrics, and Prometheus' serverset
discovery as a real consumer. The 3-server ensemble is in test_zkreg_ensemble.py."""

import http.server
import json
import os
import signal
import socket
import threading
import time

import pytest

from pinion_testlib import T, make_pod, wait_until, diag
import zkreg_testlib as zt
from zkreg_testlib import base, kz, zk  # noqa: F401 (fixtures)
from zkreg_testlib import registrations, wait_endpoints, wait_reg, web_pod, zk_config

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")

# ZKREG_OUTAGE_SECONDS=60 runs the outage test for a full minute; CI uses 20 s.
OUTAGE_SECONDS = float(os.environ.get("ZKREG_OUTAGE_SECONDS") or 20)


def test_serverset_json_is_exact(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk))
    a.write_pod("web", web_pod("web", base + "/web", ports=[("http", 8080), ("admin", 9090), ("grpc", 9091)],
                               port="http", shard=3))
    a.write_pod("api", web_pod("api", base + "/api", ip="10.1.2.4", ports=[("http", 8080), (None, 7000)],
                               port=7000))
    wait_endpoints(kz, base + "/web", ["10.1.2.3:8080"])
    wait_endpoints(kz, base + "/api", ["10.1.2.4:7000"])

    [(name, raw, stat)] = zt.member_raw(kz, base + "/web")
    assert name.startswith("member_") and len(name) == len("member_") + 10
    # byte for byte, in the documented key order
    assert raw == (b'{"serviceEndpoint":{"host":"10.1.2.3","port":8080},'
                   b'"additionalEndpoints":{"admin":{"host":"10.1.2.3","port":9090},'
                   b'"grpc":{"host":"10.1.2.3","port":9091}},"status":"ALIVE","shard":3}'), raw
    assert stat.ephemeralOwner != 0, "member must be ephemeral"
    # a numeric port, no shard: no "shard" key; the unnamed port is not an additional endpoint
    [(_, raw2, _)] = zt.member_raw(kz, base + "/api")
    assert json.loads(raw2) == {"serviceEndpoint": {"host": "10.1.2.4", "port": 7000},
                                "additionalEndpoints": {"http": {"host": "10.1.2.4", "port": 8080}},
                                "status": "ALIVE"}
    # the API names the znode, the state and the endpoint
    regs = registrations(a)
    web = regs["default/web"]
    assert web["state"] == "registered" and web["znode"] == f"{base}/web/{name}", web
    assert web["endpoint"] == "10.1.2.3:8080" and web["last_error"] is None and web["path"] == base + "/web"
    assert web["last_change"].endswith("Z")
    # the session's id is the members' ephemeralOwner
    assert int(a.get_json("/v1/registrations")["session_id"], 16) == stat.ephemeralOwner
    # pinionctl: table and --json
    r = a.ctl("registrations")
    assert r.rc == 0, r
    assert "default/web" in r.stdout and "registered" in r.stdout and f"{base}/web/{name}" in r.stdout
    r = a.ctl("--json", "registrations")
    assert r.rc == 0 and {x["pod"] for x in json.loads(r.stdout)["registrations"]} == {"default/web", "default/api"}
    # status and metrics
    z = {m["name"]: m for m in a.status()["modules"]}["zkreg"]
    assert z["state"] == "running" and z["details"]["session"] == "connected"
    assert z["details"]["registrations"]["registered"] == 2
    m = a.metrics()
    assert m.value("pinion_zookeeper_session_state", state="connected") == 1
    assert m.value("pinion_zookeeper_session_state", state="suspended") == 0
    assert m.value("pinion_zookeeper_registrations", state="registered") == 2
    assert m.value("pinion_zookeeper_operations_total", op="create", result="ok") >= 2


def test_chroot_and_several_servers(agent_factory, zk, kz, base):
    """chroot= prefixes every path (the chroot node must exist); servers= takes a list (an
    unreachable entry beside the real one is skipped by the client)."""
    kz.ensure_path(base + "/root")
    dead = f"127.0.0.1:{zt.free_port()}"
    a = agent_factory(config={"zookeeper": {"servers": f"{dead},{zk.hosts}", "chroot": base + "/root",
                                            "session-timeout": "4s"}})
    a.write_pod("c", web_pod("c", "/svc/c"))
    wait_endpoints(kz, base + "/root/svc/c", ["10.1.2.3:8080"], timeout=20)
    assert registrations(a)["default/c"]["znode"].startswith("/svc/c/member_")
    assert not kz.exists("/svc/c")


def test_bad_annotations_say_why_and_register_nothing(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk))
    a.write_pod("noport", web_pod("noport", base + "/a", port="nosuchport"))
    a.write_pod("badshard", web_pod("badshard", base + "/a", shard="-1"))
    a.write_pod("badpath", web_pod("badpath", "relative/path"))
    a.write_pod("noip", web_pod("noip", base + "/a", ip=None))
    a.write_pod("badhealth", web_pod("badhealth", base + "/a", extra={"pinion.io/health": "udp"}))
    a.write_pod("good", web_pod("good", base + "/a", ip="10.9.9.9"))
    wait_endpoints(kz, base + "/a", ["10.9.9.9:8080"])
    regs = wait_until(lambda: (lambda r: r if len(r) == 6 else None)(registrations(a)))
    assert "nosuchport" in regs["default/noport"]["last_error"]
    assert "pinion.io/shard" in regs["default/badshard"]["last_error"]
    assert "not a valid ZooKeeper path" in regs["default/badpath"]["last_error"]
    assert "no IP" in regs["default/noip"]["last_error"] and "status.podIP" in regs["default/noip"]["last_error"]
    assert "pinion.io/health=udp" in regs["default/badhealth"]["last_error"]
    for n in ("noport", "badshard", "badpath", "noip", "badhealth"):
        assert regs["default/" + n]["state"] == "unready" and regs["default/" + n]["znode"] is None
    # the no-IP pod registers once it has one
    a.write_pod("noip", web_pod("noip", base + "/a", ip="10.9.9.10"))
    wait_endpoints(kz, base + "/a", ["10.9.9.10:8080", "10.9.9.9:8080"])


def test_unready_pod_disappears_and_returns(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk))
    path = base + "/svc"
    a.write_pod("p1", web_pod("p1", path, ip="10.0.0.1", ready=True))
    a.write_pod("p2", web_pod("p2", path, ip="10.0.0.2", ready=True))
    wait_endpoints(kz, path, ["10.0.0.1:8080", "10.0.0.2:8080"])
    a.write_pod("p1", web_pod("p1", path, ip="10.0.0.1", ready=False))
    wait_endpoints(kz, path, ["10.0.0.2:8080"])
    r = registrations(a)["default/p1"]
    assert r["state"] == "unready" and "not Ready" in r["last_error"] and r["znode"] is None
    a.write_pod("p1", web_pod("p1", path, ip="10.0.0.1", ready=True))
    wait_endpoints(kz, path, ["10.0.0.1:8080", "10.0.0.2:8080"])
    # endpoint change: the member's data follows (one member, new data)
    a.write_pod("p2", web_pod("p2", path, ip="10.0.0.2", ports=[("http", 8081)], ready=True))
    wait_endpoints(kz, path, ["10.0.0.1:8080", "10.0.0.2:8081"])
    # rewritten in place: the member was never away, and the state never left "registered"
    assert "Registration registered → pending (pod default/p2)" not in a.log_text()
    assert registrations(a)["default/p2"]["state"] == "registered"
    # pod deleted: gone
    a.remove_pod("p2")
    wait_endpoints(kz, path, ["10.0.0.1:8080"])
    wait_until(lambda: "default/p2" not in registrations(a))
    # annotation removed: gone
    a.write_pod("p1", make_pod("p1", ip="10.0.0.1"))
    wait_endpoints(kz, path, [])


def test_flapping_pod_is_damped(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk, flap_damping="2s"))
    path = base + "/flap"
    a.write_pod("f", web_pod("f", path, ready=True))
    wait_endpoints(kz, path, ["10.1.2.3:8080"])
    a.write_pod("f", web_pod("f", path, ready=False))
    wait_endpoints(kz, path, [])
    a.write_pod("f", web_pod("f", path, ready=True))
    # comes back, but only after the damping penalty, and says so meanwhile
    r = wait_reg(a, "default/f", lambda x: "flap damping" in (x["last_error"] or ""))
    assert r["state"] == "pending"
    assert zt.endpoints(kz, path) == []
    wait_endpoints(kz, path, ["10.1.2.3:8080"], timeout=10)


class HealthServer:
    """A loopback HTTP server whose /healthz answers `status`."""

    def __init__(self):
        outer = self
        self.status = 200
        self.hits = 0

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                code = outer.status if self.path == "/healthz" else 404
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_http_health_check_registers_and_deregisters(agent_factory, zk, kz, base):
    srv = HealthServer()
    try:
        a = agent_factory(config=zk_config(zk))
        path = base + "/h"
        a.write_pod("h", web_pod("h", path, ip="127.0.0.1", ports=[("http", srv.port)], extra={
            "pinion.io/health": "http:/healthz", "pinion.io/health-interval": "200ms",
            "pinion.io/health-timeout": "150ms", "pinion.io/health-rise": "2", "pinion.io/health-fall": "2"}))
        wait_endpoints(kz, path, [f"127.0.0.1:{srv.port}"])
        assert srv.hits >= 2  # rise=2
        srv.status = 500
        wait_endpoints(kz, path, [])
        r = registrations(a)["default/h"]
        assert "HTTP status 500" in r["last_error"] and r["health"] == {
            "check": "http", "healthy": False, "target": f"127.0.0.1:{srv.port}"}, r
        srv.status = 204
        wait_endpoints(kz, path, [f"127.0.0.1:{srv.port}"])
        m = a.metrics()
        assert m.value("pinion_zookeeper_health_checks_total", check="http", result="ok") >= 3
        assert m.value("pinion_zookeeper_health_checks_total", check="http", result="fail") >= 2
    finally:
        srv.close()


def test_tcp_health_check(agent_factory, zk, kz, base):
    port = zt.free_port()
    a = agent_factory(config=zk_config(zk))
    path = base + "/t"
    a.write_pod("t", web_pod("t", path, ip="127.0.0.1", ports=[("svc", port)], extra={
        "pinion.io/health": "tcp", "pinion.io/health-interval": "200ms", "pinion.io/health-rise": "1",
        "pinion.io/health-fall": "1"}))
    r = wait_reg(a, "default/t", lambda x: x["last_error"] and "tcp check" in x["last_error"])
    assert r["state"] == "unready" and zt.endpoints(kz, path) == []
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)
    try:
        wait_endpoints(kz, path, [f"127.0.0.1:{port}"])
    finally:
        ls.close()
    wait_endpoints(kz, path, [])


def test_sigterm_removes_entries_at_once(agent_factory, zk, kz, base):
    # A long session timeout: only an explicit delete (or close) can remove them quickly.
    a = agent_factory(config=zk_config(zk, session_timeout="30s"))
    path = base + "/s"
    for i in range(3):
        a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=f"10.0.1.{i}"))
    wait_endpoints(kz, path, [f"10.0.1.{i}:8080" for i in range(3)])
    seen = threading.Event()

    def watch(children):
        if children == []:
            seen.set()
    kz.ChildrenWatch(path, watch)
    t0 = time.monotonic()
    rc = a.sigterm()
    t1 = time.monotonic()
    a.assert_exit(rc, 0)
    assert seen.wait(T(2)), "members still there after the agent exited"
    assert zt.endpoints(kz, path) == []
    diag(f"sigterm: exited after {t1 - t0:.3f}s, members gone")
    log = a.log_text()
    assert "Deregistered" in log and log.index("Deregistered") < log.index("ZooKeeper session connected → closed")


def test_kill9_entries_go_after_session_timeout(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk, session_timeout="4s"))
    path = base + "/k"
    a.write_pod("k", web_pod("k", path))
    wait_endpoints(kz, path, ["10.1.2.3:8080"])
    t0 = time.monotonic()
    a.kill9()
    # The ephemeral lives on until the server expires the session...
    assert zt.endpoints(kz, path) == ["10.1.2.3:8080"]
    wait_endpoints(kz, path, [], timeout=15)
    gone = time.monotonic() - t0
    diag(f"kill -9: member gone {gone:.1f}s later (session timeout 4s)")
    assert gone >= 2.0, "removed before the session could have expired"


def test_restart_after_kill9_ends_the_old_session_at_once(agent_factory, zk, kz, base):
    """A killed agent's session would keep its members for the session timeout (30 s here) next
    to the restarted agent's; the new agent resumes the old session from state-dir and closes
    it, so the old members go at once and each pod has one member."""
    a = agent_factory(config=zk_config(zk, session_timeout="30s"))
    path = base + "/r"
    for i in range(3):
        a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=f"10.0.8.{i}"))
    want = [f"10.0.8.{i}:8080" for i in range(3)]
    wait_endpoints(kz, path, want)
    old_owner = {s.ephemeralOwner for _, _, s in zt.member_raw(kz, path)}
    a.kill9()
    assert zt.endpoints(kz, path) == want  # still there: the old session lives
    t0 = time.monotonic()
    a.start()
    a.wait_log(r"Closing session 0x[0-9a-f]+ left by the previous agent", timeout=T(10))
    wait_endpoints(kz, path, want, timeout=10)
    wait_until(lambda: {s.ephemeralOwner for _, _, s in zt.member_raw(kz, path)} ==
               {int(a.get_json("/v1/registrations")["session_id"], 16)}, timeout=T(10))
    took = time.monotonic() - t0
    assert zt.endpoints(kz, path) == want
    assert not old_owner & {s.ephemeralOwner for _, _, s in zt.member_raw(kz, path)}
    diag(f"restart after kill -9: old members gone {took:.1f}s after the restart (session timeout 30s)")
    assert took < 20, "the old members stayed until their session expired"
    # a clean stop leaves no session behind to end
    a.assert_exit(a.sigterm(), 0)
    assert not os.path.exists(os.path.join(a.state_dir, "zkreg", "session"))


def test_forced_session_expiry_ends_with_one_entry_per_pod(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk, session_timeout="4s"))
    path = base + "/x"
    want = [f"10.0.2.{i}:8080" for i in range(5)]
    for i in range(5):
        a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=f"10.0.2.{i}"))
    wait_endpoints(kz, path, want)
    old_sid = a.get_json("/v1/registrations")["session_id"]
    os.kill(a.pid, signal.SIGSTOP)
    try:
        wait_endpoints(kz, path, [], timeout=15)  # the server expired the session
    finally:
        os.kill(a.pid, signal.SIGCONT)
    a.wait_log(r"ZooKeeper session .* → expired", timeout=T(20))
    wait_endpoints(kz, path, want, timeout=20)
    time.sleep(1)  # nothing more arrives
    assert zt.endpoints(kz, path) == want
    doc = a.get_json("/v1/registrations")
    assert doc["session_id"] != old_sid and doc["session"] == "connected"
    owners = {s.ephemeralOwner for _, _, s in zt.member_raw(kz, path)}
    assert owners == {int(doc["session_id"], 16)}
    m = a.metrics()
    assert m.value("pinion_zookeeper_session_transitions_total", state="expired") >= 1


def test_outage_ends_with_everything_registered(agent_factory, zk, kz, base):
    """ZooKeeper stopped for OUTAGE_SECONDS (20 s in CI; ZKREG_OUTAGE_SECONDS=60 for a full
    minute), with pods changing meanwhile; afterwards exactly the ready pods, once each."""
    a = agent_factory(config=zk_config(zk, session_timeout="4s"))
    path = base + "/o"
    for i in range(4):
        a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=f"10.0.3.{i}"))
    wait_endpoints(kz, path, [f"10.0.3.{i}:8080" for i in range(4)])
    zk.server.stop()
    try:
        z = wait_until(lambda: (lambda m: m if m["state"] == "degraded" else None)(
            {m["name"]: m for m in a.status()["modules"]}["zkreg"]), timeout=T(15))
        assert "ZooKeeper session" in z["reason"], z
        assert a.health()["status"] == "ok"  # degraded, never failed, never exits
        # changes while away: one pod goes, one arrives
        a.remove_pod("p0")
        a.write_pod("p9", web_pod("p9", path, ip="10.0.3.9"))
        time.sleep(max(0, OUTAGE_SECONDS - 5))
        assert a.running()
    finally:
        zk.server.start()
        zk.server.wait_serving()
    kz.retry(kz.exists, "/")
    wait_endpoints(kz, path, ["10.0.3.1:8080", "10.0.3.2:8080", "10.0.3.3:8080", "10.0.3.9:8080"], timeout=30)
    wait_until(lambda: {m["name"]: m for m in a.status()["modules"]}["zkreg"]["state"] == "running", timeout=T(10))
    time.sleep(1)
    assert zt.endpoints(kz, path) == ["10.0.3.1:8080", "10.0.3.2:8080", "10.0.3.3:8080", "10.0.3.9:8080"]


def test_connection_loss_during_create_leaves_no_duplicates(agent_factory, zk, kz, base):
    """Creates in flight when the connection drops: the server is frozen (SIGSTOP) while the
    agent sends creates, the client gives up on the connection (2/3 of the session timeout), and
    the server then wakes up and may still run them. The agent lists the path and adopts members
    whose ephemeralOwner is its session instead of creating again: one member per pod."""
    a = agent_factory(config=zk_config(zk, session_timeout="9s", write_qps="100000"))
    path = base + "/b"
    a.write_pod("seed", web_pod("seed", path, ip="10.0.4.250"))
    wait_endpoints(kz, path, ["10.0.4.250:8080"])
    want = ["10.0.4.250:8080"]
    os.kill(zk.server.proc.pid, signal.SIGSTOP)
    try:
        for i in range(20):
            a.write_pod(f"p{i}", web_pod(f"p{i}", path, ip=f"10.0.4.{i}"))
            want.append(f"10.0.4.{i}:8080")
        wait_until(lambda: a.get_json("/v1/registrations")["session"] == "suspended", timeout=T(15))
        a.wait_log(r"connection lost during create", timeout=T(5))
    finally:
        os.kill(zk.server.proc.pid, signal.SIGCONT)
    wait_endpoints(kz, path, want, timeout=30)
    time.sleep(1.5)
    assert zt.endpoints(kz, path) == sorted(want)
    m = a.metrics()
    assert m.value("pinion_zookeeper_operations_total", op="get_children", result="ok") >= 1
    adopted = len([line for line in a.log_text().splitlines() if "adopting" in line])
    diag(f"connection loss during create: {adopted} creates had happened and were adopted")


def test_drain_marks_stopping_then_removes(agent_factory, zk, kz, base):
    cfg = zk_config(zk, drain_delay="2s")
    cfg["agent"] = {"socket-mode": "0666"}
    a = agent_factory(config=cfg)
    path = base + "/d"
    a.write_pod("d1", web_pod("d1", path, ip="10.0.5.1"))
    a.write_pod("d2", web_pod("d2", path, ip="10.0.5.2"))
    wait_endpoints(kz, path, ["10.0.5.1:8080", "10.0.5.2:8080"])
    r = a.ctl("drain")
    assert r.rc == 0 and "2 registrations marked STOPPING" in r.stdout, r
    wait_until(lambda: [m["status"] for m in zt.members(kz, path).values()] == ["STOPPING", "STOPPING"],
               timeout=T(5))
    assert {x["state"] for x in registrations(a).values()} == {"stopping"}
    wait_endpoints(kz, path, [], timeout=10)
    doc = a.get_json("/v1/registrations")
    assert doc["drained"] is True and all(x["last_error"] == "drained" for x in doc["registrations"])
    # unprivileged callers may not drain
    if os.geteuid() == 0:
        assert a.request("POST", "/v1/registrations/drain", as_uid=65534).status == 403
    r = a.ctl("undrain")
    assert r.rc == 0, r
    wait_endpoints(kz, path, ["10.0.5.1:8080", "10.0.5.2:8080"])


def test_zookeeper_down_at_start_is_degraded_then_registers(agent_factory, kz, base):
    s = zt.ZkStandalone()
    try:
        a = agent_factory(config={"zookeeper": {"servers": s.hosts, "session-timeout": "4s"}})
        a.write_pod("w", web_pod("w", "/late/w"))
        z = wait_until(lambda: (lambda m: m if m["state"] == "degraded" else None)(
            {m["name"]: m for m in a.status()["modules"]}["zkreg"]), timeout=T(10))
        assert s.hosts in z["reason"], z
        r = wait_reg(a, "default/w", lambda x: x["state"] == "pending")
        assert "waiting for the ZooKeeper session" in r["last_error"], r
        s.start()
        c = zt.kazoo_client(s.hosts)
        try:
            wait_endpoints(c, "/late/w", ["10.1.2.3:8080"], timeout=20)
        finally:
            c.stop()
            c.close()
    finally:
        s.close()


def test_reload_keeps_session_refuses_new_servers(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk))
    a.write_pod("r", web_pod("r", base + "/r"))
    wait_endpoints(kz, base + "/r", ["10.1.2.3:8080"])
    sid = a.get_json("/v1/registrations")["session_id"]
    a.write_config(sections=zk_config(zk, write_qps="7"))
    mark = a.log_mark()
    a.sighup()
    a.wait_log(r"Configuration reloaded", since=mark)
    a.write_config(sections={"zookeeper": {"servers": "127.0.0.1:1"}})
    mark = a.log_mark()
    a.sighup()
    a.wait_log(r"\[zkreg\] refused the new config.*take effect at restart", since=mark)
    assert a.get_json("/v1/registrations")["session_id"] == sid
    assert zt.endpoints(kz, base + "/r") == ["10.1.2.3:8080"]


def test_prometheus_serverset_discovery_sees_exactly_the_members(agent_factory, zk, kz, base):
    path = base + "/prom"
    a = agent_factory(config=zk_config(zk))
    ports = [zt.free_port() for _ in range(3)]
    for i, p in enumerate(ports):
        a.write_pod(f"m{i}", web_pod(f"m{i}", path, ip="127.0.0.1", ports=[("http", p)], shard=i))
    a.write_pod("unready", web_pod("unready", path, ip="127.0.0.2", ready=False))
    want = sorted(f"127.0.0.1:{p}" for p in ports)
    wait_endpoints(kz, path, want)
    prom = zt.Prometheus(zk.hosts, [path])
    try:
        wait_until(lambda: prom.targets() == want, timeout=T(30), desc="prometheus discovers the members")
        shards = sorted(t["discoveredLabels"]["__meta_serverset_shard"] for t in prom.active())
        assert shards == ["0", "1", "2"]
        assert {t["discoveredLabels"]["__meta_serverset_status"] for t in prom.active()} == {"ALIVE"}
        # one goes unready: prometheus drops exactly that one
        a.write_pod("m1", web_pod("m1", path, ip="127.0.0.1", ports=[("http", ports[1])], shard=1, ready=False))
        want2 = sorted(f"127.0.0.1:{p}" for p in (ports[0], ports[2]))
        wait_until(lambda: prom.targets() == want2, timeout=T(30), desc="prometheus drops the unready one")
        assert zt.endpoints(kz, path) == want2
    finally:
        prom.close()
