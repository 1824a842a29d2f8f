"""The gRPC server's bounds, on the Workload API, against pods that attack it (docs/workload-api.md,
"The gRPC server"): a message over 64 KiB is refused before its bytes arrive; one pod's
unfinished requests take its own request-bytes budget, not another pod's; out of file
descriptors, accepting pauses instead of spinning and logs one warning; three pods pipelining
FetchJWTSVID as fast as they can are paced, root's /v1/health keeps its latency and a fourth pod
gets its JWT-SVID and its X.509-SVID."""

import json
import os
import resource
import socket
import subprocess
import sys
import time

import pytest

from pinion_testlib import T, log_lines, unix_request, wait_until
from test_identity_jwt import start_agent
from test_workload_api import pb, workload_socket as sock  # noqa: F401 (pb: a fixture)
from test_workload_api_jwt import identity_pod, keys  # noqa: F401 (keys: a fixture)
from workload_api_testlib import call, spawn

NOBODY = 65534
MAX_MESSAGE = 64 * 1024
# The server's defaults (agent/grpc/grpc-server.c): calls a second and at once, per caller.
RATE, BURST = 100, 512

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="pods' cgroups and other users need root")

# A pod's process that opens connections and sends requests it does not finish: HEADERS, then
# DATA declaring `declared` bytes of message and sending `send` bytes in all (prefix included),
# within HTTP/2 flow control (the agent's WINDOW_UPDATEs are read). Prints how many streams the
# agent ended (refused) and waits on stdin before it lets go.
HOLDER = r'''
import json, select, socket, struct, sys, time
path, conns, per_conn, declared, send = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def frame(t, f, sid, p):
    return struct.pack(">I", len(p))[1:] + bytes([t, f]) + struct.pack(">I", sid) + p
def lit(n, v):
    return b"\x00" + bytes([len(n)]) + n.encode() + bytes([len(v)]) + v.encode()
HDRS = b"".join(lit(n, v) for n, v in [(":method", "POST"), (":scheme", "http"),
    (":path", "/SpiffeWorkloadAPI/FetchJWTSVID"), (":authority", "localhost"),
    ("content-type", "application/grpc"), ("te", "trailers"), ("workload.spiffe.io", "true")])
class C:
    def __init__(s):
        s.sock = socket.socket(socket.AF_UNIX)
        s.sock.connect(path)
        s.sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
        s.buf, s.cwin, s.win, s.ended, s.closed = b"", 65535, {}, set(), False
    def pump(s, wait):
        if not select.select([s.sock], [], [], wait)[0]:
            return
        d = s.sock.recv(1 << 20)
        if not d:
            s.closed = True
            return
        s.buf += d
        while len(s.buf) >= 9:
            n = int.from_bytes(s.buf[:3], "big")
            if len(s.buf) < 9 + n:
                break
            t, fl, sid, p = s.buf[3], s.buf[4], int.from_bytes(s.buf[5:9], "big") & 0x7fffffff, s.buf[9:9 + n]
            s.buf = s.buf[9 + n:]
            if t == 8:
                inc = int.from_bytes(p, "big") & 0x7fffffff
                if sid == 0:
                    s.cwin += inc
                else:
                    s.win[sid] = s.win.get(sid, 65535) + inc
            elif t == 4 and not fl & 1:
                s.sock.sendall(frame(4, 1, 0, b""))
            elif t == 3 or (t == 1 and fl & 1):
                s.ended.add(sid)
            elif t == 7:
                s.closed = True
    def request(s, sid):
        s.sock.sendall(frame(1, 4, sid, HDRS))
        s.win.setdefault(sid, 65535)
        data = bytes([0]) + struct.pack(">I", declared) + b"\x00" * (send - 5)
        end = time.time() + 30
        while data and sid not in s.ended and not s.closed and time.time() < end:
            n = min(16384, len(data), s.cwin, s.win[sid])
            if n <= 0:
                s.pump(0.2)
                continue
            s.sock.sendall(frame(0, 0, sid, data[:n]))
            data, s.cwin, s.win[sid] = data[n:], s.cwin - n, s.win[sid] - n
            s.pump(0)
cs = [C() for _ in range(conns)]
for c in cs:
    for i in range(per_conn):
        c.request(1 + 2 * i)
for c in cs:
    c.pump(0.3)
print(json.dumps({"ended": sum(len(c.ended) for c in cs), "closed": sum(c.closed for c in cs)}), flush=True)
sys.stdin.readline()
'''


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hold_requests(a, cg, conns, per_conn, declared, send):
    p = subprocess.Popen([sys.executable, "-c", HOLDER, sock(a), str(conns), str(per_conn), str(declared), str(send)],
                         preexec_fn=cg.preexec(NOBODY), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line, "the holder died"
    return p, json.loads(line)


def let_go(p):
    try:
        p.stdin.close()
        p.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        p.kill()
        p.wait()


def rejected(a, reason):
    return a.metrics().value("pinion_grpc_rejected_total", server="workload", reason=reason) or 0


# ---------------------------------------------------------------------------------------------

def test_a_message_over_64k_is_refused(agent_factory, pod_cgroups, pb, keys):
    a = start_agent(agent_factory, "node-a", keys[1])
    cg, _ = identity_pod(a, pod_cgroups, "web")
    # Not a JWTSVIDRequest either way: the size is judged first, then the message.
    (r,) = call(pb, sock(a), "jwt-svid", "--raw-zeros", MAX_MESSAGE + 1, cg=cg, uid=NOBODY)
    assert r["error"] == "RESOURCE_EXHAUSTED" and "65536" in r["details"], r
    (r,) = call(pb, sock(a), "jwt-svid", "--raw-zeros", MAX_MESSAGE, cg=cg, uid=NOBODY)
    assert r["error"] == "INVALID_ARGUMENT" and "malformed" in r["details"], r


def test_one_pods_unfinished_requests_do_not_starve_another_pod(agent_factory, pod_cgroups, pb, keys):
    a = start_agent(agent_factory, "node-a", keys[1])
    attacker, _ = identity_pod(a, pod_cgroups, "mallory", sa="m")
    victim, victim_id = identity_pod(a, pod_cgroups, "web")
    rss0 = rss_kib(a.pid)
    # 16 requests of 4 MiB, each a few bytes short, two per connection: the whole of what the
    # server once held for everyone. Refused now before their bytes (the message limit), and the
    # largest that fit take only the attacker's budget.
    big, _ = hold_requests(a, attacker, 8, 2, 4 * 1024 * 1024 - 4, 4 * 1024 * 1024)
    fit, held = hold_requests(a, attacker, 4, 4, MAX_MESSAGE, MAX_MESSAGE)
    try:
        (r,) = call(pb, sock(a), "svid", "--timeout", str(T(10)), cg=victim, uid=NOBODY)
        assert r.get("svids") and r["svids"][0]["spiffe_id"] == victim_id, r
        (r,) = call(pb, sock(a), "jwt-svid", "--audience", "x", "--timeout", str(T(10)), cg=victim, uid=NOBODY)
        assert r.get("svids"), r
        assert rss_kib(a.pid) - rss0 < 16 * 1024, "the agent grew by %d KiB" % (rss_kib(a.pid) - rss0)
        assert held["ended"] >= 16 - 4, held  # four messages' worth are the pod's own budget
        assert rejected(a, "caller-request-bytes") >= 1
    finally:
        let_go(big)
        let_go(fit)
    a.check_alive()


def test_out_of_fds_accepting_pauses_with_one_warning(agent_factory, pod_cgroups, pb, keys):
    a = start_agent(agent_factory, "node-a", keys[1])
    pod, pod_id = identity_pod(a, pod_cgroups, "web")
    open_fds = len(os.listdir("/proc/%d/fd" % a.pid))
    hard = resource.prlimit(a.pid, resource.RLIMIT_NOFILE)[1]
    limit = open_fds + 30
    resource.prlimit(a.pid, resource.RLIMIT_NOFILE, (limit, hard))
    fillers = []
    mark = a.log_mark()
    try:
        # Root's connections (uncounted per caller) until the agent has no descriptor left; the
        # rest wait in the backlog, the socket stays readable.
        for _ in range(80):
            s = socket.socket(socket.AF_UNIX)
            s.setblocking(False)
            try:
                s.connect(sock(a))
            except BlockingIOError:
                pass
            fillers.append(s)
        # (not /metrics: the local API has no descriptor left either)
        wait_until(lambda: len(os.listdir("/proc/%d/fd" % a.pid)) >= limit - 1, desc="the agent out of fds",
                   timeout=T(10))
        t0, c0 = time.monotonic(), cpu_seconds(a.pid)
        time.sleep(3)
        used = (cpu_seconds(a.pid) - c0) / (time.monotonic() - t0)
        print("agent CPU while out of fds: %.1f%%" % (used * 100))
        assert used < 0.25, "the agent used %.0f%% of a CPU while out of fds" % (used * 100)
        with open(a.log_file, "rb") as f:
            f.seek(mark)
            text = f.read().decode("utf-8", "replace")
        warned = [l for l in log_lines(text) if "gRPC workload" in l and l.startswith("warning:")]
        assert len(warned) == 1, "%d warnings: %s" % (len(warned), warned[:3])
        assert "cannot accept connections for now" in warned[0], warned
    finally:
        for s in fillers:
            s.close()
    resource.prlimit(a.pid, resource.RLIMIT_NOFILE, (hard, hard))
    # Its connections gone, the agent accepts again: root's health, the pod's SVID.
    wait_until(lambda: unix_request(a.socket, "GET", "/v1/health").status == 200, desc="health", timeout=T(10))
    (r,) = call(pb, sock(a), "svid", "--timeout", str(T(10)), cg=pod, uid=NOBODY)
    assert r.get("svids") and r["svids"][0]["spiffe_id"] == pod_id, r
    a.wait_log(r"gRPC workload: accepting connections again", since=mark)
    assert rejected(a, "accept-failed") >= 1
    a.check_alive()


def health_latencies(a, n, pause=0.02):
    out = []
    for _ in range(n):
        t = time.monotonic()
        assert unix_request(a.socket, "GET", "/v1/health", timeout=10).status == 200
        out.append(time.monotonic() - t)
        time.sleep(pause)
    return out


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def test_three_pods_pipelining_jwt_svids_are_paced(agent_factory, pod_cgroups, pb, keys):
    a = start_agent(agent_factory, "node-a", keys[1])
    floods = [identity_pod(a, pod_cgroups, "flood%d" % i, sa="f%d" % i)[0] for i in range(3)]
    fourth, fourth_id = identity_pod(a, pod_cgroups, "quiet", sa="q")
    idle = p99(health_latencies(a, 150))
    seconds = 8
    procs = [spawn(pb, sock(a), "flood", "--audience", "x", "--streams", "200", "--seconds", str(seconds),
                   "--timeout", str(T(30)), cg=cg, uid=NOBODY) for cg in floods]
    try:
        time.sleep(1)
        t0 = time.monotonic()
        busy = health_latencies(a, 150)
        (j,) = call(pb, sock(a), "jwt-svid", "--audience", "y", "--timeout", str(T(5)), cg=fourth, uid=NOBODY)
        (x,) = call(pb, sock(a), "svid", "--timeout", str(T(5)), cg=fourth, uid=NOBODY)
        during = time.monotonic() - t0
        results = [json.loads(p.communicate(timeout=T(120))[0].splitlines()[-1]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    print("health p99 idle %.1f ms, under three floods %.1f ms; floods: %s" % (idle * 1000, p99(busy) * 1000, results))
    assert during > 2, "the floods ended before the measurement"
    assert j.get("svids") and j["svids"][0]["spiffe_id"] == fourth_id, j
    assert x.get("svids") and x["svids"][0]["spiffe_id"] == fourth_id, x
    for r in results:
        ok = r["counts"].get("OK", 0)
        assert 0 < ok <= BURST + RATE * (seconds + 3), r
    assert p99(busy) < T(max(0.150, 3 * idle)), "health p99 %.1f ms under attack, %.1f ms idle" % (
        p99(busy) * 1000, idle * 1000)
    a.check_alive()
