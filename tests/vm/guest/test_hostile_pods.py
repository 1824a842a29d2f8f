# SPDX-License-Identifier: MIT
"""Budgets per pod on a real node (cgroup v2, pods as the kubelet's systemd slices and scopes,
piniond under its unit): root in one pod pipelining local-API requests is paced (429s) while the
host's /v1/health keeps its latency and another pod is answered; one pod holding unfinished
Workload API requests is refused (RESOURCE_EXHAUSTED) within its own request-bytes budget while
another pod gets its X.509-SVID. The same attacks on cgroup v1 are tests/integration's
test_api_conn.py and test_workload_api_limits.py; the unit's LimitNOFILE reaching the agent is
test_unit_security.py's."""

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time

import pytest

from conftest import SOCKET, Node, api, api_json, main_pid, start_agent, wait_for
from kubepods import Pod, remove_pods, request_in_pod, write_pods

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
from pinion_testlib import T  # noqa: E402
from test_api_conn import PIPELINE  # noqa: E402
from workload_api_testlib import CLIENT, generate_messages  # noqa: E402

TRUST_DOMAIN = "example.org"
WORKLOAD_SOCKET = "/run/pinion/sockets/workload.sock"
VICTIM_USER = 40311
# The local API's pace per caller (docs/api.md, Pacing): a burst, then a rate.
API_BURST, API_RATE = 200, 100
# The bound for /v1/health under attack is p99 under max(150 ms, 3x idle), set on the
# host; the guest runs under TCG emulation, a few times slower, so the floor is 3 x 150 ms here
# (the idle p99 is measured in the guest itself).
EMULATION = 3
HELD_METHOD = "/SpiffeWorkloadAPI/FetchJWTSVID"

# A pod's process holding unfinished Workload API requests: CONNS connections of PER_CONN
# FetchJWTSVID streams, each sending a 64 KiB message's prefix and all but its last 5 bytes
# (within HTTP/2 flow control: the agent's SETTINGS and WINDOW_UPDATEs are read), for SECONDS.
# A stream the agent ends is opened again half a second later, so the pod keeps what the agent
# lets it hold the whole time (past the body deadline too). Prints {"holding": ...} once every
# stream has first been sent or ended, then at the end how many streams the agent ended while
# they were still sending (refused) and after all was sent (the body deadline).
HOLDER = r'''
import json, select, socket, struct, sys, time
path, conns, per_conn, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
MSG = 64 * 1024
def frame(t, f, sid, p):
    return struct.pack(">I", len(p))[1:] + bytes([t, f]) + struct.pack(">I", sid) + p
def lit(n, v):
    return b"\x00" + bytes([len(n)]) + n.encode() + bytes([len(v)]) + v.encode()
HDRS = b"".join(lit(n, v) for n, v in [(":method", "POST"), (":scheme", "http"),
    (":path", "/SpiffeWorkloadAPI/FetchJWTSVID"), (":authority", "localhost"),
    ("content-type", "application/grpc"), ("te", "trailers"), ("workload.spiffe.io", "true")])
counts = {"refused": 0, "expired": 0, "goaway": 0}
class Conn:
    def __init__(s):
        s.sock = socket.socket(socket.AF_UNIX)
        s.sock.connect(path)
        s.sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
        s.buf, s.cwin, s.init, s.win, s.todo, s.sid, s.reopen, s.closed = b"", 65535, 65535, {}, {}, 1, [], False
    def open(s):
        sid, s.sid = s.sid, s.sid + 2
        s.sock.sendall(frame(1, 4, sid, HDRS))
        s.win[sid] = s.init
        s.todo[sid] = bytes([0]) + struct.pack(">I", MSG) + bytes(MSG - 5)
    def ended(s, sid):
        if sid not in s.win:
            return
        counts["refused" if s.todo.pop(sid, b"") else "expired"] += 1
        del s.win[sid]
        s.reopen.append(time.time() + 0.5)
    def read(s):
        d = s.sock.recv(1 << 20)
        if not d:
            s.closed = True
        s.buf += d
        while len(s.buf) >= 9 and len(s.buf) >= 9 + int.from_bytes(s.buf[:3], "big"):
            n = int.from_bytes(s.buf[:3], "big")
            t, fl, sid, p = s.buf[3], s.buf[4], int.from_bytes(s.buf[5:9], "big") & 0x7fffffff, s.buf[9:9 + n]
            s.buf = s.buf[9 + n:]
            if t == 8:
                inc = int.from_bytes(p, "big") & 0x7fffffff
                if sid == 0:
                    s.cwin += inc
                elif sid in s.win:
                    s.win[sid] += inc
            elif t == 4 and not fl & 1:
                for i in range(0, len(p) - 5, 6):
                    if int.from_bytes(p[i:i + 2], "big") == 4:
                        new = int.from_bytes(p[i + 2:i + 6], "big")
                        for k in s.win:
                            s.win[k] += new - s.init
                        s.init = new
                s.sock.sendall(frame(4, 1, 0, b""))
            elif t == 3 or (t == 1 and fl & 1):
                s.ended(sid)
            elif t == 7:
                counts["goaway"] += 1
                s.closed = True
    def push(s):
        for sid in list(s.todo):
            while s.todo.get(sid):
                n = min(16384, len(s.todo[sid]), s.cwin, s.win[sid])
                if n <= 0:
                    break
                s.sock.sendall(frame(0, 0, sid, s.todo[sid][:n]))
                s.todo[sid], s.cwin, s.win[sid] = s.todo[sid][n:], s.cwin - n, s.win[sid] - n
            if sid in s.todo and not s.todo[sid]:
                del s.todo[sid]
    def step(s):
        now = time.time()
        while s.reopen and s.reopen[0] <= now:
            s.reopen.pop(0)
            s.open()
        s.push()
cs = [Conn() for _ in range(conns)]
for c in cs:
    for _ in range(per_conn):
        c.open()
end, reported = time.time() + seconds, False
while time.time() < end:
    live = [c for c in cs if not c.closed]
    for c in select.select([c.sock for c in live], [], [], 0.1)[0]:
        next(x for x in live if x.sock is c).read()
    for c in live:
        c.step()
    if not reported and not any(c.todo for c in live):
        print(json.dumps({"holding": sum(len(c.win) for c in cs), **counts}), flush=True)
        reported = True
print(json.dumps({"holding": sum(len(c.win) for c in cs), **counts}), flush=True)
'''


def spawn_in_pod(pod, *argv, props=()):
    """argv as a container of the pod (a fresh scope in its slice, as root, with the unit
    properties props), in the background."""
    unit = "cri-containerd-%s.scope" % secrets.token_hex(32)
    return subprocess.Popen(["systemd-run", "--quiet", "--scope", "--collect", "--slice=" + pod.slice,
                             "--unit=" + unit, *("-p" + p for p in props), "--", *argv],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, timeout):
    try:
        return p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def health_latency():
    """One GET /v1/health as root on the host, on a connection of its own: seconds."""
    t0 = time.monotonic()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(10)
        s.connect(SOCKET)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: pinion\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    assert data.startswith(b"HTTP/1.1 200 "), data[:200]
    return time.monotonic() - t0


def health_p99(n):
    times = []
    for _ in range(n):
        times.append(health_latency())
        time.sleep(0.01)
    times.sort()
    return times[min(len(times) - 1, int(len(times) * 0.99))]


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(name, **labels):
    """The value of one series of the agent's /metrics (root on the host), 0 when absent."""
    code, text = api("/metrics")
    assert code == 200, text
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^%s\{([^}]*)\} (\S+)$" % re.escape(name), line)
        if m and ",".join(sorted(m.group(1).split(","))) == want:
            return float(m.group(2))
    return 0


@pytest.fixture(scope="module")
def pods():
    """One agent for this file: node.healthy() (identity with the local signer among the rest),
    the local API open to pods' users, and two identity pods, an attacker and a victim, whose
    certificates are issued."""
    node, paths = Node(), []
    pods = {"attacker": Pod("mallory", "burstable", annotations={"pinion.io/identity": "true"}),
            "victim": Pod("web", "besteffort", annotations={"pinion.io/identity": "true"})}
    try:
        node.healthy()
        node.conf("60-hostile-pods.conf", "[agent]\nsocket-mode=0666\n")
        paths = write_pods(pods.values())
        start_agent()
        wait_for("the pods' certificates", lambda: sorted(w["state"] for w in api_json("/v1/identity")["workloads"])
                 == ["issued"] * len(pods), timeout=T(90))
        wait_for("the Workload API socket", lambda: os.path.exists(WORKLOAD_SOCKET), timeout=T(30))
        yield pods
    finally:
        node.cleanup()
        remove_pods(paths)


def test_a_pipelining_pod_is_paced_and_the_host_and_another_pod_are_answered(pods):
    """Root in a pod pipelining requests on 2 x 8 connections for 30 s: paced (429 with Retry-After,
    the rest within its burst and rate), while root's /v1/health on the host keeps its p99 within
    max(150 ms, 3x idle) (the floor scaled for emulation) and another pod's non-root process
    gets its identity."""
    pid = main_pid()
    idle = health_p99(200)
    seconds = 30  # longer than the measurement, which is slow under emulation
    # Two containers: one interpreter is slower than the pace under emulation. Each has a CPU
    # limit (cpu.max, as containerd sets a container's limits.cpu): on the guest's two emulated
    # CPUs, interpreters spinning unlimited would measure the CPUs shared with them, not the
    # agent's loop.
    attackers = [spawn_in_pod(pods["attacker"], "python3", "-c", PIPELINE, SOCKET, "8", str(seconds), "/v1/status",
                              props=("CPUQuota=25%",)) for _ in range(2)]
    try:
        time.sleep(T(2))
        t0, cpu0 = time.monotonic(), cpu_seconds(pid)
        busy = health_p99(200)
        cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
        status, got = request_in_pod(pods["victim"], "/v1/identity", user=VICTIM_USER, timeout=T(30))
        during = time.monotonic() - t0
        running = all(p.poll() is None for p in attackers)
    finally:
        outputs = [finish(p, T(120)) for p in attackers]
    statuses, retry_after = {}, 0
    for out, err in outputs:
        assert out.strip(), "a pipelining client printed nothing: " + err[-2000:]
        result = json.loads(out.strip().splitlines()[-1])
        retry_after += result["retry_after"]
        for k, v in result["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    print("pipelining pod: health p99 idle %.1f ms, under attack %.1f ms (%.1f s of it, the agent at %.0f%% of a "
          "CPU); attacker got %r" % (idle * 1000, busy * 1000, during, cpu * 100, statuses))
    assert running, "the attack ended before the measurement did"
    assert status == 200 and got["id"] == "spiffe://%s/ns/default/sa/web" % TRUST_DOMAIN, (status, got)
    assert statuses.get("429", 0) > 0 and retry_after == statuses["429"], (statuses, retry_after)
    assert statuses.get("403", 0) <= API_BURST + API_RATE * (seconds + 2), statuses
    assert busy <= T(max(0.150 * EMULATION, 3 * idle)), "health p99 %.1f ms under attack, %.1f ms idle" % (
        busy * 1000, idle * 1000)
    assert metric("pinion_api_requests_total", route="/v1/status", code="429") >= statuses["429"]
    assert main_pid() == pid


def test_a_pod_holding_unfinished_grpc_requests_is_refused_while_another_pod_gets_its_svid(pods):
    """Root in a pod holds unfinished 64 KiB FetchJWTSVID requests, 2 on each of 4 connections
    (the most a connection may hold): the pod's own 4 messages' worth are held and the rest are
    refused with RESOURCE_EXHAUSTED, again and again; meanwhile another pod's FetchX509SVID is
    answered with its own SVID."""
    pid = main_pid()
    refused0 = metric("pinion_grpc_rejected_total", server="workload", reason="caller-request-bytes")
    exhausted0 = metric("pinion_grpc_calls_total", server="workload", method=HELD_METHOD, status="RESOURCE_EXHAUSTED")
    pb_dir = generate_messages()
    holder = spawn_in_pod(pods["attacker"], "python3", "-c", HOLDER, WORKLOAD_SOCKET, "4", "2", str(T(40)))
    try:
        first = holder.stdout.readline()
        assert first, "the holder died: " + holder.stderr.read()[-2000:]
        first = json.loads(first)
        victim = pods["victim"].run(
            "env", "PYTHONPATH=%s:%s" % (pb_dir, os.path.dirname(CLIENT)),
            "SPIFFE_ENDPOINT_SOCKET=unix://" + WORKLOAD_SOCKET,
            "python3", CLIENT, "svid", "--timeout", str(T(30)), timeout=T(90))
        holding = holder.poll() is None
        held_refused = metric("pinion_grpc_rejected_total", server="workload", reason="caller-request-bytes")
    finally:
        out, err = finish(holder, T(120))
        subprocess.run(["rm", "-rf", pb_dir])
    last = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    print("holding pod: %r at first, %r at the end; the victim: %s" % (first, last, victim.stdout[:200]))
    assert holding, "the holder ended before the victim's call did: " + err[-2000:]
    assert victim.returncode == 0, victim.stderr[-2000:]
    (svid,) = [json.loads(line) for line in victim.stdout.splitlines() if line.strip()]
    assert svid.get("svids") and svid["svids"][0]["spiffe_id"] == "spiffe://%s/ns/default/sa/web" % TRUST_DOMAIN, svid
    # 8 requests, 4 messages' worth held: the others refused as over the pod's own budget.
    assert first["refused"] >= 4 and first["goaway"] == 0, first
    assert held_refused - refused0 >= first["refused"], (held_refused, refused0, first)
    exhausted = metric("pinion_grpc_calls_total", server="workload", method=HELD_METHOD, status="RESOURCE_EXHAUSTED")
    assert exhausted - exhausted0 >= first["refused"], (exhausted, exhausted0, first)
    assert last and last["refused"] >= first["refused"], last
    assert main_pid() == pid
    assert health_latency() < T(10)
