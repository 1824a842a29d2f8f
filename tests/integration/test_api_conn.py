# SPDX-License-Identifier: MIT
"""The local API's connection layer against callers that try to hijack or stall it: a listen
socket that comes back after the connection limit was hit, limits per pod (not per uid) and a
header deadline, a PID reused between connect and accept, slow stream readers, and the socket
file replaced by an impostor. Each test drives the real daemon with real processes (pods are
processes placed in pod cgroups)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from identity_testlib import PodCgroup, new_uid
from pinion_testlib import T, diag, make_pod, sanitized_build, unix_request, unix_request_as, wait_until

POD_UID_A = 40301   # the same uid in two pods
OUTSIDER_UID = 40303


def pod_cgroup(uid):
    try:
        return PodCgroup(uid, hierarchy="pids")
    except (OSError, RuntimeError) as e:
        pytest.skip("cannot create test cgroups: %s" % e)


def counter(agent, name, **labels):
    return sum(v for (_, _, v) in agent.metrics().find(name, **labels))


def health_answers(path, timeout=2):
    try:
        r = unix_request(path, "GET", "/v1/health", timeout=timeout)
    except OSError:
        return False
    return r.status in (200, 503) and isinstance(r.body, dict) and "version" in r.body and "failing" in r.body


# ---- a listen socket that always comes back ----

def test_listen_socket_comes_back_after_the_connection_limit(agent_factory):
    # 1,010 watch streams held, then all closed at once: the API answers again (MHD, once at
    # its connection limit, stopped polling its listen socket for good).
    a = agent_factory()
    held = []
    try:
        for _ in range(1010):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(a.socket)
            s.sendall(b"GET /v1/pods?watch=1 HTTP/1.1\r\nHost: pinion\r\n\r\n")
            held.append(s)
        # The agent took every one it could and closed the rest at accept (no reply, EOF);
        # wait until it has seen them all (the last ones answered or closed).
        def settled():
            n = 0
            for s in held:
                s.setblocking(False)
                try:
                    s.recv(1 << 16, socket.MSG_PEEK)
                    n += 1
                except BlockingIOError:
                    pass
                except OSError:
                    n += 1
            return n >= 1000
        wait_until(settled, 20, desc="1,000 streams open")
        time.sleep(1)
    finally:
        for s in held:
            s.close()
    wait_until(lambda: health_answers(a.socket), 10, desc="the API answers after the streams closed")
    assert a.health()["status"] == "ok"
    assert counter(a, "pinion_api_connections_rejected_total", reason="total") >= 10
    a.check_alive()


# ---- limits per pod, the header deadline ----

# Opens N connections that send a request head slowly (a header line a second, never the
# blank line); prints how many were closed at once, then (after a line on stdin) when each
# was closed, seconds after it was opened.
TRICKLE = r"""
import json, socket, sys, time
path, n, trickle = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
conns = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    try:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
    except OSError:
        pass
    s.setblocking(False)
    conns.append((s, time.time()))

def closed(s):
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True

time.sleep(0.5)
closed_at = [None] * n
for i, (s, t) in enumerate(conns):
    if closed(s):
        closed_at[i] = time.time() - t
print(json.dumps({"early": sum(c is not None for c in closed_at)}), flush=True)
sys.stdin.readline()
end = time.time() + trickle
while time.time() < end and any(c is None for c in closed_at):
    for i, (s, t) in enumerate(conns):
        if closed_at[i] is not None:
            continue
        if closed(s):
            closed_at[i] = time.time() - t
            continue
        try:
            s.send(b"X-Slow: 1\r\n")
        except OSError:
            closed_at[i] = time.time() - t
    time.sleep(1)
print(json.dumps({"closed_at": closed_at}), flush=True)
"""


def test_one_pod_cannot_starve_another_pod_of_the_same_uid(agent_factory):
    a = agent_factory(config={"agent": {"socket-mode": "0666"}})
    cg_a, cg_b = pod_cgroup(new_uid()), pod_cgroup(new_uid())
    p = None
    try:
        # Pod A, as uid 40301: 33 connections trickling headers; the 33rd is over its pod's 32.
        p = subprocess.Popen([sys.executable, "-c", TRICKLE, a.socket, "33", "25"], preexec_fn=cg_a.preexec(POD_UID_A),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        early = json.loads(p.stdout.readline())["early"]
        assert early == 1, early
        # Pod B, same uid, is not counted with A: it is answered while A holds its 32.
        out = subprocess.run([sys.executable, "-c", ONE_GET, a.socket, "/v1/health"], preexec_fn=cg_b.preexec(POD_UID_A),
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0 and json.loads(out.stdout)["status"] in (200, 503), (out.stdout, out.stderr)
        # The tricklers never finish a head: each is closed ~10 s after it was opened, though it
        # keeps sending (the idle timeout alone would keep them for good).
        t0 = time.time()
        p.stdin.write("go\n")
        p.stdin.flush()
        closed_at = json.loads(p.stdout.readline())["closed_at"]
        assert all(c is not None for c in closed_at), (closed_at, time.time() - t0)
        assert all(8 <= c <= 14 for c in closed_at if c > 1), closed_at
        assert counter(a, "pinion_api_header_timeouts_total") >= 32
        assert counter(a, "pinion_api_connections_rejected_total", reason="pod") >= 1
    finally:
        if p:
            p.kill()
            p.wait()
        cg_a.close()
        cg_b.close()
    a.check_alive()


# One GET, Connection: close; the status and body as JSON on stdout.
ONE_GET = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
s.connect(sys.argv[1])
s.sendall(("GET %s HTTP/1.1\r\nHost: pinion\r\nConnection: close\r\n\r\n" % sys.argv[2]).encode())
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
print(json.dumps({"status": int(head.split(b" ")[1]), "body": body.decode("utf-8", "replace")}))
"""


# ---- a PID reused between connect and accept ----

# Connects, sends GET /v1/identity, prints its PID and exits; a child keeps the connection and
# writes the answer to argv[2].
CONNECT_AND_EXIT = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/identity HTTP/1.1\r\nHost: pinion\r\nConnection: close\r\n\r\n")
print(os.getpid(), flush=True)
if os.fork():
    os._exit(0)
os.close(1)
s.settimeout(60)
data = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except OSError:
    pass
with open(sys.argv[2] + ".tmp", "wb") as f:
    f.write(data)
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
"""

# Forks until a child gets PID argv[1] (ns_last_pid); that child stays until stdin closes.
REUSE_PID = r"""
import os, sys, time
target = int(sys.argv[1])
for attempt in range(20000):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(target - 1))
    pid = os.fork()
    if pid == 0:
        if os.getpid() == target:
            sys.stdin.read()
        os._exit(0)
    if pid == target:
        print("reused", flush=True)
        os.waitpid(pid, 0)
        sys.exit(0)
    os.waitpid(pid, 0)
print("failed", flush=True)
"""


# Runs argv[1:] with getsockopt(SOL_SOCKET, SO_PEERPIDFD) failing with ENOPROTOOPT, as on a
# kernel older than 6.5 (a seccomp filter, inherited across exec).
NO_PEERPIDFD = r"""
import ctypes, errno, os, socket, struct, sys
def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)
LD, JEQ, RET = 0x20, 0x15, 0x06
prog = b"".join([
    insn(LD, 0, 0, 4), insn(JEQ, 0, 7, 0xc000003e),    # x86_64
    insn(LD, 0, 0, 0), insn(JEQ, 0, 5, 55),            # getsockopt
    insn(LD, 0, 0, 24), insn(JEQ, 0, 3, 1),            # SOL_SOCKET
    insn(LD, 0, 0, 32), insn(JEQ, 0, 1, 77),           # SO_PEERPIDFD
    insn(RET, 0, 0, 0x00050000 | errno.ENOPROTOOPT), insn(RET, 0, 0, 0x7fff0000)])
buf = ctypes.create_string_buffer(prog)
fprog = struct.pack("HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
fbuf = ctypes.create_string_buffer(fprog)
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.addressof(fbuf), 0, 0) != 0:
    sys.exit("seccomp: %s" % os.strerror(ctypes.get_errno()))
a, b = socket.socketpair()
try:
    a.getsockopt(socket.SOL_SOCKET, 77, 4)
    sys.exit("SO_PEERPIDFD still answers")
except OSError as e:
    if e.errno != errno.ENOPROTOOPT:
        sys.exit("SO_PEERPIDFD: %s" % e)
os.execv(sys.argv[1], sys.argv[1:])
"""


@pytest.mark.parametrize("kernel", ["pidfd", "no-pidfd"])
def test_a_reused_pid_does_not_lend_its_pod(agent_factory, tmp_dir, kernel):
    # With SO_PEERPIDFD the process that connected is known to have exited; without (Linux
    # before 6.5, forced here), the process now at the PID (root in pod B) lacks the uid and
    # gid the outsider connected with.
    if os.uname().machine != "x86_64" and kernel == "no-pidfd":
        pytest.skip("the seccomp filter is written for x86_64")
    a = agent_factory(start=False)
    if kernel == "no-pidfd":
        plain = a.command
        a.command = lambda *args: [sys.executable, "-c", NO_PEERPIDFD] + plain(*args)
    a.sections["identity"] = {"signer": "local", "trust-domain": "example.org",
                              "ca-dir": os.path.join(a.dir, "ca"), "pod-tls-dir": os.path.join(a.dir, "pods-tls")}
    a.agent_keys.update({"socket-mode": "0666"})
    a.write_config()
    a.start()
    uid_b = new_uid()
    a.write_pod("b", make_pod("b", uid=uid_b, annotations={"pinion.io/identity": "true"}))
    wait_until(lambda: any(w["name"] == "b" and w["state"] == "issued" for w in a.get_json("/v1/identity")["workloads"]),
               15, desc="pod b's identity issued")
    cg_b = pod_cgroup(uid_b)
    answers = os.path.join(tmp_dir, "answers")
    os.mkdir(answers)
    os.chmod(answers, 0o777)  # the outsider writes its answer here
    answer = os.path.join(answers, "answer")
    reuser = None
    try:
        # Pod B's own process gets its identity: what the impostor must not get.
        out = subprocess.run([sys.executable, "-c", ONE_GET, a.socket, "/v1/identity"], preexec_fn=cg_b.preexec(),
                             capture_output=True, text=True, timeout=30)
        assert json.loads(out.stdout)["status"] == 200, out.stdout

        a.send_signal(signal.SIGSTOP)
        try:
            def outsider():
                os.setgid(OUTSIDER_UID)
                os.setuid(OUTSIDER_UID)
            p = subprocess.Popen([sys.executable, "-c", CONNECT_AND_EXIT, a.socket, answer], preexec_fn=outsider,
                                 stdout=subprocess.PIPE, text=True)
            pid = int(p.stdout.readline())
            p.wait(10)  # reaped: its PID is free
            reuser = subprocess.Popen([sys.executable, "-c", REUSE_PID, str(pid)], preexec_fn=cg_b.preexec(),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            got = reuser.stdout.readline().strip()
            if got != "reused":
                pytest.skip("could not make a process reuse PID %d" % pid)
            with open("/proc/%d/cgroup" % pid) as f:
                assert uid_b in f.read()  # the PID now belongs to pod B
        finally:
            a.send_signal(signal.SIGCONT)
        wait_until(lambda: os.path.exists(answer), 20, desc="the outsider's connection answered")
        with open(answer, "rb") as f:
            data = f.read()
        head, _, body = data.partition(b"\r\n\r\n")
        assert b"PRIVATE KEY" not in body and b"private_key" not in body, head
        assert int(head.split(b" ")[1]) == 403, data[:300]
    finally:
        if reuser:
            reuser.stdin.close()
            reuser.wait(10)
        cg_b.close()
    a.check_alive()


# ---- slow stream readers ----

def test_slow_watch_readers_are_dropped_not_buffered(agent_factory):
    a = agent_factory()
    big = "x" * (900 * 1024)
    uid = new_uid()
    a.write_pod("big", make_pod("big", uid=uid, annotations={"blob": big + "0"}))
    wait_until(lambda: a.status()["pods"]["count"] == 1, 10, desc="the big pod loaded")

    # A reader that keeps up, from the current generation on.
    events, ended = [], threading.Event()
    reader = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    reader.connect(a.socket)
    gen0 = a.status()["pods"]["generation"]
    reader.sendall(b"GET /v1/pods?watch=1&resourceVersion=%d HTTP/1.1\r\nHost: pinion\r\n\r\n" % gen0)

    def read_events():
        f = reader.makefile("rb")
        try:
            while f.readline() not in (b"\r\n", b""):  # the response head
                pass
            body = b""
            while True:  # chunked: size line, data, CRLF; events are the body's lines
                size = int(f.readline().strip() or b"0", 16)
                if size == 0:
                    break
                body += f.read(size)
                f.read(2)
                while b"\n" in body:
                    line, body = body.split(b"\n", 1)
                    events.append(json.loads(line))
        except (OSError, ValueError):
            pass
        ended.set()
    t = threading.Thread(target=read_events, daemon=True)
    t.start()

    # 40 streams that never read a byte.
    stalled = []
    try:
        for _ in range(40):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(a.socket)
            s.sendall(b"GET /v1/pods?watch=1&resourceVersion=%d HTTP/1.1\r\nHost: pinion\r\n\r\n" % gen0)
            stalled.append(s)
        wait_until(lambda: a.status()["pods"]["generation"] == gen0, 5)
        time.sleep(0.5)
        rss0 = a.rss_kib()
        for i in range(25):
            before = a.status()["pods"]["generation"]
            a.write_pod("big", make_pod("big", uid=uid, annotations={"blob": big + str(i + 1)}))
            wait_until(lambda: a.status()["pods"]["generation"] > before, 10, desc="rewrite %d seen" % i)
            # The reading watcher keeps up: it has this change before the next one is made (a
            # pods-dir file is applied the moment it is written, and two 900 KB events behind
            # is past the 1 MiB a stream may hold: a reader that far behind is a slow one).
            now = a.status()["pods"]["generation"]
            wait_until(lambda: events and events[-1].get("generation", 0) >= now, 20,
                       desc="the reading watcher saw generation %d" % now)
        final = a.status()["pods"]["generation"]
        wait_until(lambda: events and events[-1].get("generation") == final, 20,
                   desc="the reading watcher saw generation %d" % final)
        growth_mib = (a.rss_kib() - rss0) / 1024
        diag("slow readers: RSS %d KiB -> %d KiB (+%.1f MiB)" % (rss0, a.rss_kib(), growth_mib))
        if not sanitized_build():
            assert growth_mib < 64, "RSS grew by %.0f MiB" % growth_mib
        dropped = counter(a, "pinion_api_streams_dropped_total", route="/v1/pods")
        diag("slow readers: %d streams dropped" % dropped)
        assert dropped >= 40, dropped
    finally:
        for s in stalled:
            s.close()
    # The reader got every change, in order, and its stream is still open.
    gens = [e["generation"] for e in events if e["type"] == "MODIFIED"]
    assert gens == list(range(gen0 + 1, final + 1)), gens
    assert not ended.is_set()
    reader.close()
    a.check_alive()


def read_watch(sock, events, want):
    """Reads the chunked NDJSON stream on sock into events until want(events) or its end."""
    f = sock.makefile("rb")
    while f.readline() not in (b"\r\n", b""):
        pass
    body = b""
    while not want(events):
        size = int(f.readline().strip() or b"0", 16)
        if size == 0:
            return False
        body += f.read(size)
        f.read(2)
        while b"\n" in body:
            line, body = body.split(b"\n", 1)
            events.append(json.loads(line))
    return True


def test_a_large_initial_state_is_not_counted_against_the_stream_cap(agent_factory):
    # The replay of 2.7 MiB of pods to a new watcher that has not read yet is not "falling
    # behind": a live event after it is queued, not a reason to cut the watcher off.
    a = agent_factory()
    for i in range(3):  # pod files are at most 1 MiB
        a.write_pod("big%d" % i, make_pod("big%d" % i, uid=new_uid(), annotations={"blob": "y" * (900 << 10)}))
    wait_until(lambda: a.status()["pods"]["count"] == 3, 10, desc="three 900 KiB pods loaded")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        s.connect(a.socket)
        s.sendall(b"GET /v1/pods?watch=1 HTTP/1.1\r\nHost: pinion\r\n\r\n")
        time.sleep(0.5)  # replayed, unread
        a.write_pod("small", make_pod("small", uid=new_uid()))
        wait_until(lambda: a.status()["pods"]["count"] == 4, 10, desc="the small pod loaded")
        time.sleep(0.5)
        events = []
        s.settimeout(10)
        assert read_watch(s, events, lambda ev: any(e["type"] == "ADDED" and e["pod"]["name"] == "small" for e in ev)), \
            [e["type"] for e in events]
        assert [e["type"] for e in events] == ["ADDED", "ADDED", "ADDED", "SYNCED", "ADDED"]
        assert counter(a, "pinion_api_streams_dropped_total") == 0
    finally:
        s.close()
    a.check_alive()


# ---- the socket file replaced ----

@pytest.mark.parametrize("socket_kind", ["bound", "inherited"])
def test_a_replaced_socket_is_noticed_and_rebound(agent_factory, tmp_dir, socket_kind):
    if socket_kind == "inherited":
        a = agent_factory(socket_activate=True)  # systemd-socket-activate binds it
        wait_until(lambda: os.path.exists(a.socket), 5, desc="the activation socket")
        assert unix_request(a.socket, "GET", "/v1/health", timeout=15).status == 200
        a.wait_ready()
    else:
        a = agent_factory()
    aside = os.path.join(os.path.dirname(a.socket), "moved-aside.sock")
    staged = os.path.join(os.path.dirname(a.socket), "impostor.sock")
    impostor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.rename(a.socket, aside)
        # Renamed over the path rather than bound at it: the agent may already have put a fresh
        # socket there, and the impostor must still take the path.
        impostor.bind(staged)
        impostor.listen(16)
        os.rename(staged, a.socket)
        # A first repair that fails (it logs "retrying") is retried by the 5 s periodic check.
        wait_until(lambda: health_answers(a.socket), 12, desc="the path reaches the agent again")
        assert counter(a, "pinion_api_socket_replaced_total") >= 1
        a.wait_log(r"socket %s is no longer ours" % a.socket, timeout=5)
        st = os.lstat(a.socket)
        assert oct(st.st_mode & 0o7777) == oct(0o660)
        # Still ours after a while (the check does not flap), and the agent keeps serving.
        before = counter(a, "pinion_api_socket_replaced_total")
        time.sleep(1)
        assert health_answers(a.socket)
        assert counter(a, "pinion_api_socket_replaced_total") == before
    finally:
        impostor.close()
        for leftover in (aside, staged):
            if os.path.lexists(leftover):
                os.unlink(leftover)
    a.check_alive()


# ---- deadlines on the body and between requests, budgets and pacing per caller ----
# Shared with test_metrics_listen.py and test_hostile_input.py (section 6), which run the same
# checks on the TCP port and on their own agent.

DEADLINE = 10  # seconds: API_IDLE_TIMEOUT_USEC, API_HEADER_TIMEOUT_USEC, API_BODY_TIMEOUT_USEC
MIB = 1 << 20


def configure_budget_agent(a, **agent_keys):
    """Gives an unstarted agent a POST route that reads a body from anyone (the identity module's
    /v1/identity/jwt/validate) and a socket every uid may connect to."""
    a.sections["identity"] = {"signer": "local", "trust-domain": "example.org",
                              "ca-dir": os.path.join(a.dir, "ca"), "pod-tls-dir": os.path.join(a.dir, "pods-tls")}
    a.agent_keys.update({"socket-mode": "0666"})
    a.agent_keys.update(agent_keys)
    a.write_config()


def unix_connect(path):
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s
    return connect


def read_until_closed(s, limit, tick=None):
    """Reads s until the peer closes it; calls tick(s) whenever a second passes without data.
    Returns (seconds until the close or None if still open after limit, what was read)."""
    t0 = time.monotonic()
    s.settimeout(1)
    data = b""
    while time.monotonic() - t0 < limit:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            if tick:
                try:
                    tick(s)
                except OSError:
                    return time.monotonic() - t0, data
            continue
        except OSError:
            return time.monotonic() - t0, data
        if not chunk:
            return time.monotonic() - t0, data
        data += chunk
    return None, data


def check_trickled_body_is_cut(connect, head):
    """A chunked body sent a byte a second (each chunk keeps the connection busy) is cut about
    10 s after its head: a 408 or a bare close, never held for good."""
    s = connect()
    try:
        s.sendall(head + b"1\r\nx\r\n")
        closed, data = read_until_closed(s, T(DEADLINE + 15), tick=lambda s: s.sendall(b"1\r\nx\r\n"))
    finally:
        s.close()
    assert closed is not None, "a trickled body still open after %d s" % T(DEADLINE + 15)
    assert DEADLINE - 2 <= closed <= T(DEADLINE + 4), closed
    assert data == b"" or data.startswith(b"HTTP/1.1 408 "), data[:200]


def http_response_end(data):
    """The length of the first complete response (with Content-Length) in data, or None."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    n = int(m.group(1)) if m else 0
    return len(head) + 4 + n if len(rest) >= n else None


def check_idle_keepalive_is_closed(connect, request):
    """A kept-alive connection that sends nothing after its answer is closed about 10 s later."""
    s = connect()
    try:
        s.sendall(request)
        s.settimeout(T(5))
        data = b""
        while http_response_end(data) is None:
            chunk = s.recv(65536)
            assert chunk, "closed before the answer: %r" % data
            data += chunk
        assert data.startswith(b"HTTP/1.1 200 "), data[:200]
        closed, more = read_until_closed(s, T(DEADLINE + 15))
    finally:
        s.close()
    assert closed is not None, "an idle connection still open after %d s" % T(DEADLINE + 15)
    assert DEADLINE - 2 <= closed <= T(DEADLINE + 4), closed
    assert more == b"", more[:200]


def first_status(data):
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", data)
    return int(m.group(1)) if m else None


VALIDATE = b"POST /v1/identity/jwt/validate HTTP/1.1\r\nHost: pinion\r\nContent-Type: application/json\r\n"


def check_request_bytes_budget(a):
    """Root's unfinished bodies (declared, or chunked as they come) are held to its 4 MiB: the one
    over it gets 413 and a close, at once; another caller and root's next requests are answered."""
    connect = unix_connect(a.socket)
    held = []
    try:
        # 3 MiB + 900 KiB declared and partly sent: held from the head on.
        for length in (MIB, MIB, MIB, 900 << 10):
            s = connect()
            s.sendall(VALIDATE + b"Content-Length: %d\r\n\r\n{" % length + b" " * 4096)
            held.append(s)
        time.sleep(T(0.5))
        # One more declared MiB is over root's budget: refused before its body is read.
        s = connect()
        try:
            s.sendall(VALIDATE + b"Content-Length: %d\r\n\r\n{" % MIB)
            closed, data = read_until_closed(s, T(5))
        finally:
            s.close()
        assert first_status(data) == 413 and b"body bytes" in data, data[:300]
        assert closed is not None, "the refused connection stays open"
        # A chunked body grows past the 124 KiB left: refused mid-body, and closed.
        s = connect()
        try:
            s.sendall(VALIDATE + b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n%s\r\n" % (16 << 10, b" " * (16 << 10))
            try:
                for _ in range(16):
                    s.sendall(chunk)
            except OSError:
                pass
            closed, data = read_until_closed(s, T(5))
        finally:
            s.close()
        assert first_status(data) == 413 and b"body bytes" in data, data[:300]
        assert closed is not None, "the refused chunked connection stays open"
        # Others are not affected: an outsider's small body is read and answered.
        r = unix_request_as(OUTSIDER_UID, a.socket, "POST", "/v1/identity/jwt/validate",
                            body={"token": "x.y.z", "audience": "a"})
        assert r.status not in (413, 429) and "body bytes" not in r.raw, r
        assert a.health()["status"] == "ok"
    finally:
        for s in held:
            s.close()
    # Released with the requests: root's next body fits again.
    r = a.request("POST", "/v1/identity/jwt/validate", body={"token": "x.y.z", "audience": "a"})
    assert r.status != 413 and "body bytes" not in r.raw, r


# Pipelines 32 requests at a time on each of N connections for S seconds (a thread each),
# sending the next 32 once their answers are in; prints the statuses it got and how many 429s
# carried Retry-After.
PIPELINE = r"""
import collections, json, re, socket, sys, threading, time
path, n, seconds, url = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
batch = ("GET %s HTTP/1.1\r\nHost: pinion\r\n\r\n" % url).encode() * 32
statuses, retry_after, lock = collections.Counter(), [0], threading.Lock()
end = time.time() + seconds
def count(data):
    data = data[:data.rfind(b"}\n") + 2]  # complete answers only (each ends its JSON body)
    with lock:
        statuses.update(int(c) for c in re.findall(rb"HTTP/1\.1 (\d{3}) ", data))
        retry_after[0] += data.count(b"Retry-After: ")
def run():
    s = None
    while time.time() < end:
        data = b""
        try:
            if s is None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
            s.sendall(batch)
            while data.count(b"HTTP/1.1 ") < 32 or not data.endswith(b"}\n"):
                s.settimeout(max(0.01, end - time.time()))
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise OSError("closed")
                data += chunk
        except OSError:
            if s:
                s.close()
            s = None
        count(data)
threads = [threading.Thread(target=run) for _ in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"statuses": {str(k): v for k, v in statuses.items()}, "retry_after": retry_after[0]}))
"""


def health_p99(path, n):
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        r = unix_request(path, "GET", "/v1/health", timeout=10)
        times.append(time.monotonic() - t0)
        assert r.status == 200, r
        time.sleep(0.01)
    times.sort()
    return times[min(len(times) - 1, int(len(times) * 0.99))]


def check_pipelining_pod_is_paced(a, cg_attacker, cg_other):
    """Root in a pod pipelining requests on 3 processes x 8 connections: it gets 429s with
    Retry-After past its pace, root's /v1/health stays within max(150 ms, 3x idle p99), another
    pod is answered."""
    idle = health_p99(a.socket, 100)
    attackers = [subprocess.Popen([sys.executable, "-c", PIPELINE, a.socket, "8", "8", "/v1/status"],
                                  preexec_fn=cg_attacker.preexec(), stdout=subprocess.PIPE, text=True)
                 for _ in range(3)]
    try:
        time.sleep(1)
        busy = health_p99(a.socket, 150)
        out = subprocess.run([sys.executable, "-c", ONE_GET, a.socket, "/v1/health"], preexec_fn=cg_other.preexec(),
                             capture_output=True, text=True, timeout=T(30))
        results = [json.loads(p.communicate(timeout=T(60))[0]) for p in attackers]
    finally:
        for p in attackers:
            if p.poll() is None:
                p.kill()
                p.wait()
    statuses, retry_after = {}, 0
    for r in results:
        retry_after += r["retry_after"]
        for k, v in r["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    diag("pipelining pod: health p99 idle %.1f ms, under attack %.1f ms; attacker got %r" % (
        idle * 1000, busy * 1000, statuses))
    assert json.loads(out.stdout)["status"] == 200, (out.stdout, out.stderr)
    assert statuses.get("429", 0) > 0 and retry_after == statuses["429"], (statuses, retry_after)
    # Paced: about 100 a second after a burst of 200, over ~8 s.
    assert statuses.get("403", 0) <= 200 + 100 * T(10), statuses
    assert busy <= T(max(0.150, 3 * idle)), "health p99 %.1f ms under attack, %.1f ms idle" % (busy * 1000, idle * 1000)
    assert counter(a, "pinion_api_requests_total", route="/v1/status", code="429") >= statuses["429"]


def test_a_trickled_body_is_cut_at_the_body_deadline(agent_factory):
    a = agent_factory()
    check_trickled_body_is_cut(unix_connect(a.socket),
                               b"GET /v1/health HTTP/1.1\r\nHost: pinion\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert counter(a, "pinion_api_connections_closed_total", reason="body") == 1
    assert counter(a, "pinion_api_requests_total", route="/v1/health", code="408") == 1
    a.check_alive()


def test_an_idle_keepalive_connection_is_closed(agent_factory):
    a = agent_factory()
    check_idle_keepalive_is_closed(unix_connect(a.socket), b"GET /v1/health HTTP/1.1\r\nHost: pinion\r\n\r\n")
    assert counter(a, "pinion_api_connections_closed_total", reason="idle") == 1
    # Idle is not a slow head.
    assert counter(a, "pinion_api_header_timeouts_total") == 0
    a.check_alive()


def test_request_bytes_are_budgeted_per_caller(agent_factory):
    a = agent_factory(start=False)
    configure_budget_agent(a)
    a.start()
    check_request_bytes_budget(a)
    a.check_alive()


def test_a_pipelining_pod_is_paced_and_root_stays_answered(agent_factory):
    a = agent_factory(config={"agent": {"socket-mode": "0666"}})
    cg_a, cg_b = pod_cgroup(new_uid()), pod_cgroup(new_uid())
    try:
        check_pipelining_pod_is_paced(a, cg_a, cg_b)
    finally:
        cg_a.close()
        cg_b.close()
    a.check_alive()
