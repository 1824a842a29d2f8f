"""[agent] metrics-listen: /metrics over plain HTTP on TCP, scraped by Debian's real Prometheus
(/usr/bin/prometheus, its own temp storage, its web API on loopback), and nothing else on that
port: other paths 404, other methods 405, a cap on connections at once and per source address,
deadlines on a request's head and body and on an idle connection. A bad value is a config
error with its line; a reload moves the port, or keeps the old one when the new cannot be had."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from pinion_testlib import EXIT_CONFIG, T, Agent, free_port, line_of, parse_metrics, wait_until
from test_api_conn import check_idle_keepalive_is_closed, check_trickled_body_is_cut

PROMETHEUS = "/usr/bin/prometheus"
CAP = 32  # METRICS_LISTEN_MAX_CONNECTIONS
PER_SOURCE = 8  # METRICS_LISTEN_MAX_CONNECTIONS_PER_SOURCE


def http(method, url, timeout=5):
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def metrics_agent(agent_factory, address=None):
    address = address or "127.0.0.1:%d" % free_port()
    return agent_factory(config={"agent": {"metrics-listen": address}}), address


def _reloaded(agent, n):
    return agent.status()["config"]["reloads"] >= n


class Prometheus:
    """A Prometheus scraping target every second, its storage and config in a temp dir."""

    def __init__(self, target):
        if not os.access(PROMETHEUS, os.X_OK):
            pytest.skip("no %s (Debian's prometheus package)" % PROMETHEUS)
        self.dir = tempfile.mkdtemp(prefix="pinion-prom-")
        self.port = free_port()
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: pinion\n    static_configs:\n"
                    "      - targets: ['%s']\n" % target)
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file", config, "--storage.tsdb.path", os.path.join(self.dir, "data"),
             "--web.listen-address", "127.0.0.1:%d" % self.port], stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=self.dir)

    def query(self, expr):
        """The instant vector's [(labels, value)], or None while Prometheus is not answering."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (self.port, urllib.parse.urlencode({"query": expr}))
        try:
            status, _, body = http("GET", url)
        except OSError:
            return None
        if status != 200:
            return None
        data = json.loads(body)["data"]["result"]
        return [(r["metric"], float(r["value"][1])) for r in data]

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_text(self):
        with open(os.path.join(self.dir, "prometheus.log")) as f:
            return f.read()[-3000:]


def test_prometheus_scrapes_the_tcp_port(agent_factory):
    agent, address = metrics_agent(agent_factory)
    prom = Prometheus(address)
    try:
        def up():
            found = prom.query('up{job="pinion"}')
            return found if found and [v for _, v in found] == [1.0] else None
        try:
            found = wait_until(up, 30, desc="up == 1")
        except AssertionError:
            raise AssertionError("Prometheus never saw the target up:\n%s" % prom.log_text())
        assert found[0][0]["instance"] == address
        # A pinion metric's value, as Prometheus stored it from the scrape.
        build = wait_until(lambda: prom.query('pinion_build_info{job="pinion"}'), 15, desc="pinion_build_info")
        assert build[0][1] == 1.0 and build[0][0]["version"] == agent.status()["version"], build
        pods = wait_until(lambda: prom.query('pinion_pods{job="pinion"}'), 15, desc="pinion_pods")
        assert pods[0][1] == 0.0, pods
    finally:
        prom.close()


def test_the_port_serves_metrics_and_nothing_else(agent_factory):
    agent, address = metrics_agent(agent_factory)
    base = "http://%s" % address
    status, headers, body = http("GET", base + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4"), (status, headers)
    tcp = parse_metrics(body)
    unix = parse_metrics(agent.get("/metrics").raw)
    assert set(tcp.types) == set(unix.types)  # the same families as the socket's /metrics
    assert "pinion_build_info" in tcp.types

    for path in ("/", "/v1/health", "/v1/status", "/v1/pods", "/metrics/x", "/v1/identity/bundle"):
        assert http("GET", base + path)[0] == 404, path
    for method in ("POST", "PUT", "DELETE"):
        status, headers, _ = http(method, base + "/metrics")
        assert status == 405 and headers.get("Allow") == "GET", (method, status, headers)


def test_connections_beyond_the_cap_are_closed_at_once(agent_factory):
    agent, address = metrics_agent(agent_factory)
    host, port = address.rsplit(":", 1)
    held = []
    try:
        # From as many loopback sources as the cap needs (each may hold PER_SOURCE).
        for i in range(CAP):
            held.append(socket.create_connection((host, int(port)), timeout=5,
                                                 source_address=("127.0.0.%d" % (2 + i // PER_SOURCE), 0)))
        # Accepted in order: once the agent has them all, the next one is over the cap.
        time.sleep(0.2)
        extra = socket.create_connection((host, int(port)), timeout=5, source_address=("127.0.0.100", 0))
        try:
            extra.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                got = extra.recv(100)
            except ConnectionResetError:
                got = b""
            assert got == b"", got
        finally:
            extra.close()
    finally:
        for s in held:
            s.close()
    # Their places free again, a scrape goes through and the refusal was counted.
    def scraped():
        status, _, body = http("GET", "http://%s/metrics" % address)
        return status == 200 and body
    body = wait_until(scraped, 10, desc="a scrape after the held connections closed")
    assert parse_metrics(body).value("pinion_api_connections_rejected_total", reason="total") >= 1


def test_a_slow_request_head_is_cut_off(agent_factory):
    """A connection that never finishes its request head is closed by the agent (after the
    local API's 10 s header deadline), not held for good."""
    agent, address = metrics_agent(agent_factory)
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # no blank line: never complete
        try:
            got = s.recv(100)
        except ConnectionResetError:
            got = b""
        assert got == b"", got
    finally:
        s.close()
    body = http("GET", "http://%s/metrics" % address)[2]
    assert parse_metrics(body).value("pinion_api_header_timeouts_total") >= 1


def test_ipv6_loopback(agent_factory):
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        port = s.getsockname()[1]
        s.close()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    agent, address = metrics_agent(agent_factory, "[::1]:%d" % port)
    status, _, body = http("GET", "http://%s/metrics" % address)
    assert status == 200 and "pinion_build_info" in body


@pytest.mark.parametrize("value", ["localhost:9100", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "[::1]9100",
                                   "::1:9100", "127.0.0.1:91a", "300.1.1.1:9100"])
def test_bad_value_is_a_config_error_with_its_line(value):
    a = Agent(config={"agent": {"metrics-listen": value}})
    try:
        rc, out, err = a.check_config()
        assert rc == EXIT_CONFIG, (value, rc, out, err)
        text = open(a.config_file).read()
        assert err.startswith("%s:%d: " % (a.config_file, line_of(text, "metrics-listen=" + value))), err
    finally:
        a.close()


def test_reload_moves_the_port_or_keeps_the_old_one(agent_factory):
    agent, first = metrics_agent(agent_factory)
    second = "127.0.0.1:%d" % free_port()
    agent.write_config(agent={"metrics-listen": second})
    agent.sighup()
    wait_until(lambda: _reloaded(agent, 1), 10, desc="reload 1")
    assert http("GET", "http://%s/metrics" % second)[0] == 200
    with pytest.raises(OSError):
        http("GET", "http://%s/metrics" % first)

    # A port someone else holds: the old one keeps serving.
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    taken = "127.0.0.1:%d" % blocker.getsockname()[1]
    try:
        mark = agent.log_mark()
        agent.write_config(agent={"metrics-listen": taken})
        agent.sighup()
        agent.wait_log(re.escape("Cannot serve /metrics on %s, still serving it on %s" % (taken, second)), since=mark)
        assert http("GET", "http://%s/metrics" % second)[0] == 200
    finally:
        blocker.close()

    # Empty: no port any more.
    agent.write_config(agent={"metrics-listen": ""})
    agent.sighup()
    wait_until(lambda: _reloaded(agent, 3), 10, desc="reload 3")
    with pytest.raises(OSError):
        http("GET", "http://%s/metrics" % second)
    assert agent.get("/metrics").status == 200


# ---- deadlines and a cap per source ----

# From 127.0.0.2 for S seconds: 34 connections trickling a request head (a header line every
# 0.2 s) and 32 trickling a chunked body (a chunk every 0.2 s), each reopened as soon as it is
# closed; prints how many it opened.
ATTACK = r"""
import socket, sys, time
host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
HEAD = {"slow": b"GET /metrics HTTP/1.1\r\nHost: x\r\n",
        "body": b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"}
MORE = {"slow": b"X-Slow: 1\r\n", "body": b"1\r\nx\r\n"}
kinds = ["slow", "body"] * 32 + ["slow", "slow"]
conns = [None] * len(kinds)
opened = 0
end = time.time() + seconds
while time.time() < end:
    for i, kind in enumerate(kinds):
        s = conns[i]
        if s is not None:
            try:
                if s.recv(4096, socket.MSG_DONTWAIT) == b"":
                    raise OSError("closed")
            except BlockingIOError:
                try:
                    s.send(MORE[kind])
                except OSError:
                    s.close()
                    conns[i] = None
            except OSError:
                s.close()
                conns[i] = None
            continue
        try:
            s = socket.create_connection((host, port), timeout=1, source_address=("127.0.0.2", 0))
            s.sendall(HEAD[kind])
            s.setblocking(False)  # recv() below: BlockingIOError when there is nothing yet
            conns[i] = s
            opened += 1
        except OSError:
            pass
    time.sleep(0.2)
print(opened, flush=True)
"""


def check_scrapes_survive_a_hostile_source(address, seconds=14):
    """While 127.0.0.2 keeps 66 slowloris and trickled-body connections going, scrapes from
    127.0.0.1 are answered: at least 19 of 20."""
    host, port = address.rsplit(":", 1)
    attack = subprocess.Popen([sys.executable, "-c", ATTACK, host, port, str(seconds)], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        answered = 0
        for _ in range(20):
            t0 = time.monotonic()
            try:
                if http("GET", "http://%s/metrics" % address, timeout=T(2))[0] == 200:
                    answered += 1
            except OSError:
                pass
            time.sleep(max(0, 0.5 - (time.monotonic() - t0)))
        opened = int(attack.communicate(timeout=T(seconds + 10))[0])
    finally:
        if attack.poll() is None:
            attack.kill()
            attack.wait()
    assert opened > 66, opened  # it did reconnect
    assert answered >= 19, "%d of 20 scrapes answered" % answered
    body = http("GET", "http://%s/metrics" % address)[2]
    m = parse_metrics(body)
    assert m.value("pinion_api_connections_rejected_total", reason="source") >= 1
    assert m.value("pinion_api_connections_closed_total", reason="body") >= 1
    assert m.value("pinion_api_connections_closed_total", reason="head") >= 1


def test_one_source_cannot_take_the_port(agent_factory):
    agent, address = metrics_agent(agent_factory)
    check_scrapes_survive_a_hostile_source(address)


def test_a_trickled_body_is_cut_off(agent_factory):
    agent, address = metrics_agent(agent_factory)
    host, port = address.rsplit(":", 1)
    check_trickled_body_is_cut(lambda: socket.create_connection((host, int(port)), timeout=5),
                               b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    body = http("GET", "http://%s/metrics" % address)[2]
    assert parse_metrics(body).value("pinion_api_connections_closed_total", reason="body") == 1


def test_an_idle_connection_is_closed(agent_factory):
    agent, address = metrics_agent(agent_factory)
    host, port = address.rsplit(":", 1)
    check_idle_keepalive_is_closed(lambda: socket.create_connection((host, int(port)), timeout=5),
                                   b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    body = http("GET", "http://%s/metrics" % address)[2]
    assert parse_metrics(body).value("pinion_api_connections_closed_total", reason="idle") == 1
