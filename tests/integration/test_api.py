# SPDX-License-Identifier: MIT
"""The local API over the Unix socket (docs/api.md): response shapes, the pods-dir pod source
end to end, errors, peer credentials, and /metrics (checked by promtool)."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

from pinion_testlib import MODULES, SRCDIR, T, assert_dependency_order, make_pod, wait_until

NOBODY = 65534
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def _is_error(body, code):
    return (isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]
            and body.get("code") == code)


def test_health_shape(agent):
    r = agent.request("GET", "/v1/health")
    assert r.status == 200, r
    assert "application/json" in r.headers.get("content-type", ""), r.headers
    b = r.body
    assert b["status"] == "ok"
    assert isinstance(b["version"], str) and b["version"]
    assert b["node"] == "test-node"
    assert isinstance(b["uptime_seconds"], (int, float)) and b["uptime_seconds"] >= 0
    assert b["failing"] == []


def test_status_shape(agent):
    s = agent.status()
    for k in ("version", "node", "started", "uptime_seconds", "ready", "config", "pods", "modules"):
        assert k in s, (k, s)
    assert s["node"] == "test-node"
    assert RFC3339.match(s["started"]), s["started"]
    assert isinstance(s["uptime_seconds"], (int, float))
    assert s["ready"] is True
    assert s["config"] == {"file": agent.config_file, "reloads": 0, "reload_failures": 0,
                           "last_reload_error": None}, s["config"]
    p = s["pods"]
    assert p["count"] == 0 and isinstance(p["generation"], int), p
    assert p["pods_dir"] == agent.pods_dir and p["errors"] == [], p
    assert_dependency_order([m["name"] for m in s["modules"]])
    for m in s["modules"]:
        assert set(m) >= {"name", "state", "reason", "since", "synced", "details"}, m
        assert RFC3339.match(m["since"]), m
        assert isinstance(m["details"], dict), m


def test_pods_empty_shape(agent):
    b = agent.pods()
    assert b["count"] == 0 and b["pods"] == [] and isinstance(b["generation"], int), b


def _web_pod(**kw):
    ann = {"pinion.io/serverset": "/discovery/web/prod", "pinion.io/port": "http",
           "pinion.io/health": "http:/healthz", "pinion.io/shard": "3"}
    return make_pod("web-1", annotations=ann, labels={"app": "web"},
                    ports=[("http", 8080), ("admin", 9990)], **kw)


def test_pod_file_lifecycle(agent):
    g0 = agent.pods()["generation"]
    path = agent.write_pod("web", _web_pod())
    p = agent.wait_pod("default", "web-1")
    assert p["namespace"] == "default" and p["name"] == "web-1"
    assert p["node"] == "test-node", "a static pod without nodeName belongs to this node"
    assert isinstance(p["uid"], str) and p["uid"], p
    assert p["phase"] == "Running"
    assert p["ready"] is True, "no conditions: a static pod counts as Ready"
    assert p["ips"] == ["10.1.2.3"]
    assert p["serviceAccount"] == "default"
    assert p["hostNetwork"] is False
    assert p["annotations"]["pinion.io/serverset"] == "/discovery/web/prod"
    assert p["annotations"]["pinion.io/port"] == "http"
    assert p["annotations"]["pinion.io/shard"] == "3"
    assert p["labels"] == {"app": "web"}
    assert {"name": "http", "port": 8080, "protocol": "TCP"} in p["ports"], p["ports"]
    assert {"name": "admin", "port": 9990, "protocol": "TCP"} in p["ports"], p["ports"]
    assert p["source"] == "pods-dir:" + path, p["source"]
    # The file has no resourceVersion: the field may be absent; if present it is a string.
    assert isinstance(p.get("resourceVersion", ""), str), p

    lst = agent.pods()
    assert lst["count"] == 1 and lst["generation"] > g0, lst
    one = agent.get_json("/v1/pods/default/web-1")
    assert one == p
    st = agent.status()["pods"]
    assert st["count"] == 1 and st["errors"] == []

    # Changed file: the pod is updated, its derived uid stays.
    uid = p["uid"]
    g1 = lst["generation"]
    pod = _web_pod()
    pod["metadata"]["annotations"]["pinion.io/serverset"] = "/discovery/web/canary"
    agent.write_pod("web", pod)
    p2 = agent.wait_pod("default", "web-1",
                        lambda x: x["annotations"].get("pinion.io/serverset") == "/discovery/web/canary")
    assert p2["uid"] == uid
    assert agent.pods()["generation"] > g1

    # Deleted file: gone.
    agent.remove_pod("web")
    agent.wait_pod_gone("default", "web-1")
    r = agent.request("GET", "/v1/pods/default/web-1")
    assert r.status == 404 and _is_error(r.body, 404), r
    assert agent.pods()["count"] == 0


def test_pod_file_that_turns_bad_keeps_its_pod(agent):
    """A half-saved or mistyped edit does not take a running pod away: the last good version stays
    served, the problem is reported until the file is fixed, and no event is announced for it."""
    agent.write_pod("keep", make_pod("keep-1", labels={"v": "1"}))
    before = agent.wait_pod("default", "keep-1")
    g0 = agent.pods()["generation"]
    path = agent.write_pod("keep", '{"metadata": {"name": "keep-1", "labels": [')
    wait_until(lambda: any(path in e for e in agent.status()["pods"]["errors"]), 10, desc="the bad file reported")
    errors = agent.status()["pods"]["errors"]
    assert any("its last good version stays" in e for e in errors), errors
    assert agent.get_json("/v1/pods/default/keep-1") == before
    assert agent.pods()["generation"] == g0
    # Fixed: the new version replaces it, the problem is gone.
    agent.write_pod("keep", make_pod("keep-1", labels={"v": "2"}))
    agent.wait_pod("default", "keep-1", lambda p: p["labels"] == {"v": "2"})
    wait_until(lambda: agent.status()["pods"]["errors"] == [], 10, desc="no problem left")
    agent.remove_pod("keep")
    agent.wait_pod_gone("default", "keep-1")


def test_pod_fields_from_file(agent):
    pod = make_pod("db-0", namespace="data", uid="0b6e3a4c-1111-2222-3333-444455556666",
                   conditions={"Ready": False, "PodScheduled": True}, ip="10.9.8.7",
                   node="test-node", host_network=True, service_account="db",
                   ports=[("pg", 5432), ("metrics", 9187, "UDP")], resource_version=42)
    agent.write_pod("db", pod)
    p = agent.wait_pod("data", "db-0")
    assert p["uid"] == "0b6e3a4c-1111-2222-3333-444455556666"
    assert p["ready"] is False
    assert p["conditions"].get("Ready") is False and p["conditions"].get("PodScheduled") is True, p
    assert p["hostNetwork"] is True and p["serviceAccount"] == "db"
    assert p["ips"] == ["10.9.8.7"]
    assert {"name": "metrics", "port": 9187, "protocol": "UDP"} in p["ports"]
    assert p["resourceVersion"] == "42"


def test_pods_sorted_by_namespace_and_name(agent):
    for ns, name in [("zeta", "a"), ("alpha", "b"), ("alpha", "a"), ("default", "m")]:
        agent.write_pod("%s-%s" % (ns, name), make_pod(name, namespace=ns))
    wait_until(lambda: agent.pods()["count"] == 4, 10, desc="4 pods")
    got = [(p["namespace"], p["name"]) for p in agent.pods()["pods"]]
    assert got == sorted(got), got


def test_malformed_pod_file_is_skipped(agent):
    agent.write_pod("good", make_pod("good"))
    agent.wait_pod("default", "good")
    bad = agent.write_pod("broken", "{ this is not json")
    nameless = agent.write_pod("nameless", {"apiVersion": "v1", "kind": "Pod", "metadata": {}})

    def errors_listed():
        errs = agent.status()["pods"]["errors"]
        text = json.dumps(errs)
        return errs if bad in text and nameless in text else None
    errs = wait_until(errors_listed, 10, desc="both bad files in /v1/status pods.errors")
    assert len(errs) == 2, errs
    # The good pod stays.
    b = agent.pods()
    assert [p["name"] for p in b["pods"]] == ["good"] and b["count"] == 1
    assert agent.health()["status"] == "ok"

    # Fixing the files clears the errors.
    agent.write_pod("broken", make_pod("fixed"))
    agent.remove_pod("nameless")
    wait_until(lambda: agent.status()["pods"]["errors"] == [], 10, desc="pods.errors empty")
    wait_until(lambda: agent.pods()["count"] == 2, 10, desc="2 pods")


def test_unknown_route_404(agent):
    for path in ("/v1/nope", "/", "/v2/health", "/v1/pods/a/b/c"):
        r = agent.request("GET", path)
        assert r.status == 404, (path, r)
        assert _is_error(r.body, 404), (path, r)


def test_wrong_method_405(agent):
    for method, path in (("POST", "/v1/health"), ("DELETE", "/v1/pods"), ("PUT", "/v1/status"),
                         ("POST", "/metrics")):
        r = agent.request(method, path, body="{}" if method != "DELETE" else None)
        assert r.status == 405, (method, path, r)
        assert _is_error(r.body, 405), (method, path, r)


def test_non_root_caller(agent_factory):
    a = agent_factory(config={"agent": {"socket-mode": "0666"}})
    a.write_pod("web", make_pod("web-1"))
    a.wait_pod("default", "web-1")
    assert os.stat(a.socket).st_mode & 0o777 == 0o666, oct(os.stat(a.socket).st_mode)
    r = a.request("GET", "/v1/health", as_uid=NOBODY)
    assert r.status == 200, r
    for path in ("/v1/pods", "/v1/pods/default/web-1"):
        r = a.request("GET", path, as_uid=NOBODY)
        assert r.status == 403, (path, r)
        assert _is_error(r.body, 403), (path, r)
    # Root still sees them.
    assert a.request("GET", "/v1/pods").status == 200


def test_socket_mode_default_0660(agent):
    assert os.stat(agent.socket).st_mode & 0o777 == 0o660, oct(os.stat(agent.socket).st_mode)


def test_metrics_content(agent):
    for _ in range(3):
        assert agent.request("GET", "/v1/health").status == 200
    assert agent.request("GET", "/v1/nope").status == 404
    r = agent.request("GET", "/metrics")
    assert r.status == 200, r
    ctype = r.headers.get("content-type", "")
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype
    m = agent.metrics()
    names = m.names()
    for family in ("pinion_build_info", "pinion_start_time_seconds", "pinion_uptime_seconds",
                   "pinion_api_requests_total", "pinion_module_state", "pinion_pods_dir_errors"):
        assert family in names, (family, sorted(names))
    assert "pinion_api_request_duration_seconds_bucket" in names, sorted(names)
    assert m.types.get("pinion_api_request_duration_seconds") == "histogram"
    assert m.types.get("pinion_api_requests_total") == "counter"

    bi = m.find("pinion_build_info")
    assert len(bi) == 1 and bi[0][1].get("version") and bi[0][2] == 1, bi
    assert m.value("pinion_api_requests_total", route="/v1/health", code="200") == 3, \
        m.find("pinion_api_requests_total")
    assert any(v >= 1 for (_, _, v) in m.find("pinion_api_requests_total", code="404")), \
        m.find("pinion_api_requests_total")
    for mod in MODULES:
        assert m.value("pinion_module_state", module=mod, state="disabled") == 1, \
            m.find("pinion_module_state", module=mod)
        others = [s for s in m.find("pinion_module_state", module=mod) if s[1]["state"] != "disabled"]
        assert all(v == 0 for (_, _, v) in others), others


def test_metrics_counts_requests_by_route(agent):
    before = agent.metrics().value("pinion_api_requests_total", route="/v1/status", code="200") or 0
    for _ in range(4):
        agent.status()
    after = agent.metrics().value("pinion_api_requests_total", route="/v1/status", code="200")
    assert after == before + 4, (before, after)


def test_metrics_pass_promtool(agent):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool not installed (Debian package prometheus)")
    agent.request("GET", "/v1/health")
    agent.request("GET", "/v1/nope")
    agent.write_pod("web", make_pod("web-1"))
    agent.wait_pod("default", "web-1")
    r = agent.request("GET", "/metrics")
    assert r.status == 200
    p = subprocess.run([promtool, "check", "metrics"], input=r.raw, capture_output=True, text=True,
                       timeout=T(30))
    assert p.returncode == 0, "promtool check metrics: rc=%d\n%s%s" % (p.returncode, p.stdout, p.stderr)


def test_stalled_client_does_not_block_others(agent):
    # One thread, one loop: a client that sends half a request and waits must not stall it.
    import socket as _socket
    stalled = []
    try:
        for _ in range(5):
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            s.connect(agent.socket)
            s.sendall(b"GET /v1/status HTTP/1.1\r\nHost: pinion\r\n")  # no final CRLF
            stalled.append(s)
        for _ in range(5):
            r = agent.request("GET", "/v1/health", timeout=5)
            assert r.status == 200, r
    finally:
        for s in stalled:
            s.close()
    assert agent.health()["status"] == "ok"


def test_garbage_requests_leave_the_daemon_serving(agent):
    import socket as _socket
    payloads = [b"\x00\x01\x02garbage\r\n\r\n", b"GET\r\n\r\n", b"BREW /coffee HTCPCP/1.0\r\n\r\n",
                b"GET /v1/health HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                b"GET /v1/health HTTP/1.1\r\n" + b"X-Long: " + b"b" * 100000 + b"\r\n\r\n"]
    for p in payloads:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.settimeout(T(5))
        try:
            s.connect(agent.socket)
            try:
                s.sendall(p)
                s.shutdown(_socket.SHUT_WR)
                s.recv(65536)
            except OSError:
                pass
        finally:
            s.close()
        assert agent.health()["status"] == "ok", p[:40]
    for path in ("/v1/pods/%2e%2e/x", "/v1/pods/%00/x", "/v1/pods//", "/v1/health?x=%zz"):
        r = agent.request("GET", path)
        assert r.status in (200, 400, 404), (path, r)
        if r.status != 200:
            assert _is_error(r.body, r.status), (path, r)
    assert agent.health()["status"] == "ok"


def test_oversized_body_rejected(agent):
    r = agent.request("POST", "/v1/health", body=b"x" * (2 * 1024 * 1024))
    assert r.status in (405, 413), r
    assert _is_error(r.body, r.status), r
    assert agent.health()["status"] == "ok"


def test_concurrent_requests(agent):
    import concurrent.futures
    agent.write_pod("web", make_pod("web-1"))
    agent.wait_pod("default", "web-1")
    paths = ["/v1/health", "/v1/status", "/v1/pods", "/v1/pods/default/web-1", "/metrics"] * 20
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        results = list(ex.map(lambda p: (p, agent.request("GET", p).status), paths))
    bad = [(p, s) for (p, s) in results if s != 200]
    assert not bad, bad


def test_bad_pod_files_of_every_kind(agent):
    agent.write_pod("good", make_pod("good"))
    agent.wait_pod("default", "good")
    bad = {
        "binary": b"\xff\xfe\x00\x01garbage",
        "array": "[1, 2, 3]",
        "deep": "[" * 100000 + "]" * 100000,
        "empty": "",
        "wrong-types": json.dumps({"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": 5, "namespace": ["x"]}}),
        "bad-ports": json.dumps(make_pod("p", ports=[("http", "not-a-number")])),
    }
    paths = {k: agent.write_pod(k, v) for k, v in bad.items()}

    def listed():
        text = json.dumps(agent.status()["pods"]["errors"])
        missing = [p for p in paths.values() if p not in text]
        return not missing or None
    wait_until(listed, 10, desc="every bad pod file in pods.errors")
    assert [p["name"] for p in agent.pods()["pods"]] == ["good"]
    assert agent.health()["status"] == "ok"
    m = agent.metrics()
    assert m.value("pinion_pods_dir_errors") == len(bad), m.find("pinion_pods_dir_errors")


def test_pods_dir_created_after_start(agent_factory):
    a = agent_factory(start=False)
    os.rmdir(a.pods_dir)
    a.start()
    assert a.pods()["count"] == 0
    os.makedirs(a.pods_dir)
    a.write_pod("web", make_pod("web-1"))
    a.wait_pod("default", "web-1")


def test_get_with_a_body_is_refused(agent_factory):
    # A GET route takes no body: accepting one would let any caller make the agent hold memory.
    a = agent_factory(config={"agent": {"socket-mode": "0666"}})
    for uid in (None, NOBODY):
        r = a.request("GET", "/v1/health", body=b"x" * 2048, as_uid=uid)
        assert r.status == 413, (uid, r)
        assert _is_error(r.body, 413), r
    assert a.health()["status"] == "ok"


def test_head_of_a_watch_stream_then_changes(agent):
    # HEAD runs the GET handler, which opens a stream; MHD ends it after the headers. The
    # stream must be forgotten then, or the next pod change writes into a freed request.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(agent.socket)
        s.sendall(b"HEAD /v1/pods?watch=1 HTTP/1.1\r\nHost: pinion\r\nConnection: close\r\n\r\n")
        s.settimeout(5)
        head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 200"), head
    finally:
        s.close()
    agent.write_pod("web", make_pod("web-1"))
    agent.wait_pod("default", "web-1")
    agent.write_pod("web", make_pod("web-1", labels={"v": "2"}))
    time.sleep(0.3)
    assert agent.health()["status"] == "ok"


def test_unprivileged_connections_are_capped(agent_factory):
    # One local user cannot take the connections root needs: past 32 connections of one
    # unprivileged uid, new ones are closed at once, and root is still answered.
    a = agent_factory(config={"agent": {"socket-mode": "0666"}})
    script = r'''
import os, socket, sys, time
os.setgid(65534); os.setuid(65534)
held, closed = [], 0
for i in range(40):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    try:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")  # headers never finished
    except (BrokenPipeError, ConnectionResetError):
        pass  # already closed by the agent: counted below
    held.append(s)
time.sleep(0.5)
for s in held:
    s.settimeout(0.2)
    try:
        if s.recv(1) == b"":
            closed += 1
    except (ConnectionResetError, BrokenPipeError):
        closed += 1
    except socket.timeout:
        pass
print(closed, flush=True)
time.sleep(float(sys.argv[2]))
'''
    p = subprocess.Popen([sys.executable, "-c", script, a.socket, "3"], stdout=subprocess.PIPE, text=True)
    try:
        closed = int(p.stdout.readline())
        assert closed == 8, closed  # 40 - 32
        assert a.request("GET", "/v1/health").status == 200  # root, while nobody holds 32
    finally:
        p.kill()
        p.wait()
    # Once they are gone, the quota is free again.
    wait_until(lambda: a.request("GET", "/v1/health", as_uid=NOBODY).status == 200, 5, desc="nobody served again")


def test_podsdir_benchmark_smoke():
    """tests/bench/podsdir-bench.py, smoke-sized (the real run is `make bench-podsdir`)."""
    p = subprocess.run([sys.executable, os.path.join(SRCDIR, "tests", "bench", "podsdir-bench.py"),
                        "--files", "50", "--samples", "6"], capture_output=True, text=True, timeout=T(120))
    assert p.returncode == 0, p.stdout + p.stderr
    for row in ("| p50 |", "| p99 |", "| max |", "goals: p50 < 20 ms"):
        assert row in p.stdout, p.stdout
