# SPDX-License-Identifier: MIT
"""The agent as an attacker on the node would feed it: table-driven regression cases for every
class of hostile input a probe of the real binaries found handled, each asserting what the agent
does with it, not only that it survived.

  1. malformed HTTP on the local API socket (request lines, methods, versions, header syntax,
     framing: Content-Length / Transfer-Encoding / chunks, NULs, sizes, percent-encoding,
     absolute-form, pipelining, half-closed sockets): a 4xx or a close, never a 5xx, never a 2xx
     for a malformed request; the agent keeps answering with the same PID and logs no warning.
  2. hostile static pods in pods-dir: reported in /v1/status pods.errors (or accepted verbatim
     where valid), a good pod beside them stays served, FIFOs and devices never block the agent.
  3. hostile CNI_NETNS for ADD: the spec's code, nothing allocated or wired on the host.
  4. hostile bundle manifests (one nginx, one agent): refused with last_error set, the last good
     version stays published, nothing appears outside dest.
  5. load: 900 long polls answered when their config arrives, 1,000 ADD+DEL into real network
     namespaces; afterwards no address allocated, no interface left, the agent's fd count as
     before.
  6. budgets on the local API and the metrics port: a trickled chunked body cut at the body
     deadline and an idle kept-alive connection closed (socket and TCP port); one source
     address trickling heads and bodies on 66 reconnecting connections while scrapes from
     another are answered; a caller's unfinished bodies held to its request-bytes budget (413
     and a close, others answered); a pod pipelining requests paced with 429 while root's
     /v1/health stays fast and another pod is answered.
  7. the gRPC servers (the Workload API, the CSI plugin): messages over 64 KiB refused before
     their bytes, malformed requests given the spec's status, a request that never completes
     reset after the body deadline, an outsider's refused calls paced (the agent's CPU stays
     low), and the pod still served between them.

  8. dying peers and descriptors: root in a pod whose connection's process exits unreaped (a
     zombie, which cgroup v1 shows in every hierarchy's root) asks for the host's routes on the
     local API and calls the Workload API: an outsider's answers; 100 children with throwaway
     uids that connect and exit share the one count of unattested peers; pods within their own
     caps at an open-file limit of 256 leave root answered and the agent not spinning.
One agent (and one nginx) per class, module-scoped, so that the file stays fast."""

import hashlib
import ipaddress
import json
import os
import re
import selectors
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from identity_testlib import PodCgroup, new_uid
from test_identity import identity_pod as identity_pod_object, start_local, wait_workload
from test_identity_jwt import key_pem, new_key, write_secret
from workload_api_testlib import PREFACE, PythonClient, call, frame, generate_messages, grpc_headers, \
    read_frames, spawn
from csi_testlib import Client as CsiClient, DRIVER, generate_messages as csi_messages
from pinion_testlib import T, Agent, free_port, make_pod, request_child, unix_request, wait_until, warnings_in
from attest_testlib import ZOMBIE_GRPC, ZOMBIE_HTTP
from test_attest_dying import UNATTESTED_CAP, N_THROWAWAY, hold_throwaway_connections, rejected, run_as_root_in
from test_fd_limit import test_pods_within_their_caps_leave_root_answered_at_a_low_limit as \
    pods_within_caps_at_a_low_limit
from configsync_testlib import Nginx, get_config, read_tree, test_ca, versions_in, write_bundle  # noqa: F401
from podnet_testlib import cni, free_pod_cidr, host_links, pinion_conf, podnet_status
from test_podnet import fnv_host_ifname
from test_api_conn import (check_idle_keepalive_is_closed, check_pipelining_pod_is_paced, check_request_bytes_budget,
                           check_trickled_body_is_cut, configure_budget_agent, pod_cgroup, unix_connect)
from test_metrics_listen import check_scrapes_survive_a_hostile_source

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces, nginx and FIFOs as root")


def module_agent(config=None):
    """A started agent for a whole module's cases; fails the last test if it crashed or does
    not stop cleanly."""
    a = Agent(config=config)
    try:
        a.start()
    except BaseException:
        a.close()
        raise
    return a


def close_agent(a):
    problem = a.close()
    if problem:
        pytest.fail(problem, pytrace=False)


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def fds(pid):
    """What the process's descriptors point at, sorted (for a failure message)."""
    out = []
    for n in os.listdir("/proc/%d/fd" % pid):
        try:
            out.append(os.readlink("/proc/%d/fd/%s" % (pid, n)))
        except OSError:
            pass
    return sorted(out)


# =============================================================================================
# 1. Malformed HTTP on the local API socket

def read_responses(data):
    """The HTTP responses in data, in order, as status codes. A response without a length
    ends at the close; a truncated one still counts (its status line arrived)."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        m = re.match(rb"HTTP/1\.[01] (\d{3})", head)
        assert m, "not an HTTP response: %r" % data[:200]
        out.append(int(m.group(1)))
        if not sep:
            break
        headers = {}
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower()] = v.strip()
        if b"close" in headers.get(b"connection", b"").lower():
            # Nothing may follow (libmicrohttpd 0.9.75 repeats the head of its own error
            # replies before their body: not a second response).
            break
        if b"content-length" in headers:
            data = rest[int(headers[b"content-length"]):]
        elif b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            while True:
                size, _, rest = rest.partition(b"\r\n")
                n = int(size.split(b";")[0] or b"0", 16)
                rest = rest[n + 2:]
                if n == 0:
                    break
            data = rest
        else:
            break
    return out


def exchange(path, payload, half_close=True, read=True, timeout=1.5):
    """Sends payload on a fresh connection (then shuts the write side unless half_close is
    False) and reads until the agent closes or goes quiet; returns the raw bytes. Quiet is
    allowed: for a few payloads (a request head that never ends, no request line at all)
    libmicrohttpd neither answers nor closes at the client's EOF; the connection layer's
    timeouts end those connections, which is not this file's subject."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(T(timeout))
    try:
        s.connect(path)
        try:
            s.sendall(payload)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed before reading it all: what it sent is still readable
        data = b""
        while read:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
        return data
    finally:
        s.close()


def req(line, *headers, body=b""):
    h = b"".join(x + b"\r\n" for x in headers)
    return line + b"\r\n" + h + b"\r\n" + body


HOST = b"Host: pinion"
GOOD = req(b"GET /v1/health HTTP/1.1", HOST)
LONG = 100000

# (id, payload, allowed): allowed is a tuple of sets, one per response in order (the last one
# for every further response); a set holds statuses and "4xx". No response at all (a close) is
# always allowed: what a case needs answered is spelled out as an exact status. The sets:
R4 = {"4xx"}
REJECT = (R4,)
# An unsupported major version: 505 is the status RFC 9110 (15.6.6) prescribes for it.
VERSION = ({"4xx", 505},)
# What RFC 9112 lets a server accept as the request it evidently means (lenient parsing of
# whitespace, a higher minor version, a normalised percent-encoding, an ignored Upgrade), or
# what libmicrohttpd 0.9.75 accepts where the RFC asks for a 400 (no or two Host fields, bad
# header syntax): harmless on a Unix socket, where no proxy interprets the request differently
# and the caller is identified by its credentials, not by any header. Either way: the request
# it means (200), or a 4xx; never a 5xx.
LENIENT = ({200, "4xx"},)
HTTP_CASES = [
    # --- request lines ---
    ("empty-line", b"\r\n\r\n", REJECT),
    ("method-only", b"GET\r\n\r\n", REJECT),
    ("http09", b"GET /v1/health\r\n\r\n", REJECT),
    ("extra-token", req(b"GET /v1/health HTTP/1.1 extra", HOST), REJECT),
    ("double-space-after-method", req(b"GET  /v1/health HTTP/1.1", HOST), LENIENT),
    ("double-space-before-version", req(b"GET /v1/health  HTTP/1.1", HOST), REJECT),
    ("leading-space", req(b" GET /v1/health HTTP/1.1", HOST), REJECT),
    ("tabs", req(b"GET\t/v1/health\tHTTP/1.1", HOST), REJECT),
    ("spaces-only", b"     \r\n\r\n", REJECT),
    ("binary-garbage", b"\x00\x01\x02garbage\r\n\r\n", REJECT),
    ("tls-client-hello", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + os.urandom(64), REJECT),
    ("h2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", VERSION),
    # --- methods ---
    ("lowercase-method", req(b"get /v1/health HTTP/1.1", HOST), REJECT),
    ("unknown-method", req(b"BREW /coffee HTTP/1.1", HOST), REJECT),
    ("method-with-symbols", req(b"G@T /v1/health HTTP/1.1", HOST), REJECT),
    ("long-method", req(b"G" * 10000 + b" /v1/health HTTP/1.1", HOST), REJECT),
    ("connect", req(b"CONNECT pinion:80 HTTP/1.1", HOST), REJECT),
    ("trace", req(b"TRACE /v1/health HTTP/1.1", HOST), REJECT),
    ("options-asterisk", req(b"OPTIONS * HTTP/1.1", HOST), REJECT),
    ("delete-health", req(b"DELETE /v1/health HTTP/1.1", HOST), REJECT),
    ("put-health", req(b"PUT /v1/health HTTP/1.1", HOST, b"Content-Length: 2", body=b"{}"), REJECT),
    ("patch-status", req(b"PATCH /v1/status HTTP/1.1", HOST, b"Content-Length: 2", body=b"{}"), REJECT),
    ("post-get-route", req(b"POST /v1/pods HTTP/1.1", HOST, b"Content-Length: 2", body=b"{}"), REJECT),
    # --- versions ---
    ("version-2.0", req(b"GET /v1/health HTTP/2.0", HOST), VERSION),
    ("version-1.2", req(b"GET /v1/health HTTP/1.2", HOST), LENIENT),
    ("version-9.9", req(b"GET /v1/health HTTP/9.9", HOST), VERSION),
    ("version-no-minor", req(b"GET /v1/health HTTP/1", HOST), REJECT),
    ("version-letters", req(b"GET /v1/health HTTP/x.y", HOST), REJECT),
    ("version-lowercase", req(b"GET /v1/health http/1.1", HOST), REJECT),
    ("version-three-parts", req(b"GET /v1/health HTTP/1.1.1", HOST), REJECT),
    ("version-leading-zero", req(b"GET /v1/health HTTP/01.1", HOST), REJECT),
    ("version-not-http", req(b"GET /v1/health FTP/1.1", HOST), REJECT),
    # --- header syntax ---
    ("no-host-1.1", req(b"GET /v1/health HTTP/1.1"), LENIENT),
    ("two-hosts", req(b"GET /v1/health HTTP/1.1", HOST, b"Host: other"), LENIENT),
    ("header-no-colon", req(b"GET /v1/health HTTP/1.1", HOST, b"NoColonHere"), REJECT),
    ("space-before-colon", req(b"GET /v1/health HTTP/1.1", b"Host : pinion"), LENIENT),
    ("empty-header-name", req(b"GET /v1/health HTTP/1.1", HOST, b": value"), LENIENT),
    ("obs-fold", req(b"GET /v1/health HTTP/1.1", HOST, b"X-A: a", b" folded"), LENIENT),
    ("nul-in-header-name", req(b"GET /v1/health HTTP/1.1", HOST, b"X-\x00A: a"), REJECT),
    ("nul-in-header-value", req(b"GET /v1/health HTTP/1.1", HOST, b"X-A: a\x00b"), LENIENT),
    ("ctl-in-header-value", req(b"GET /v1/health HTTP/1.1", HOST, b"X-A: a\x01\x7fb"), LENIENT),
    ("high-bytes-header-name", req(b"GET /v1/health HTTP/1.1", HOST, b"X-\xff\xfe: a"), LENIENT),
    ("bare-cr", b"GET /v1/health HTTP/1.1\rHost: pinion\r\r", REJECT),
    ("many-headers", req(b"GET /v1/health HTTP/1.1", HOST, *[b"X-%d: v" % i for i in range(5000)]), REJECT),
    ("long-header-value", req(b"GET /v1/health HTTP/1.1", HOST, b"X-Long: " + b"b" * LONG), REJECT),
    ("long-header-name", req(b"GET /v1/health HTTP/1.1", HOST, b"X" * LONG + b": v"), REJECT),
    ("long-uri", req(b"GET /" + b"a" * LONG + b" HTTP/1.1", HOST), REJECT),
    ("long-query", req(b"GET /v1/health?" + b"a=b&" * (LONG // 4) + b" HTTP/1.1", HOST), REJECT),
    # --- Content-Length and Transfer-Encoding ---
    ("cl-negative", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Content-Length: -5"), REJECT),
    ("cl-letters", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Content-Length: abc"), REJECT),
    ("cl-exponent", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Content-Length: 1e3"), REJECT),
    ("cl-overflow", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Content-Length: 99999999999999999999999"),
     REJECT),
    ("cl-conflicting", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Content-Length: 2",
                           b"Content-Length: 3", body=b"{}x"), REJECT),
    ("cl-list", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Content-Length: 2, 3", body=b"{}x"), REJECT),
    ("cl-and-te", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Content-Length: 4",
                      b"Transfer-Encoding: chunked", body=b"0\r\n\r\nGET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n"),
     # Transfer-Encoding wins (RFC 9112 6.3): an empty body, then the same caller's next
     # request with the same credentials (no proxy in front for whom it could be smuggled).
     (R4, {200, "4xx"})),
    ("te-unknown", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: xchunked",
                       body=b"0\r\n\r\n"), REJECT),
    ("te-gzip-chunked", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: gzip, chunked",
                            body=b"0\r\n\r\n"), REJECT),
    ("te-identity", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: identity",
                        body=b"{}"), REJECT),
    ("te-twice", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: chunked",
                     b"Transfer-Encoding: chunked", body=b"2\r\n{}\r\n0\r\n\r\n"), REJECT),
    ("te-on-get", req(b"GET /v1/health HTTP/1.1", HOST, b"Transfer-Encoding: chunked", body=b"1\r\nx\r\n0\r\n\r\n"),
     REJECT),
    ("chunk-size-letters", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: chunked",
                               body=b"zz\r\n{}\r\n0\r\n\r\n"), REJECT),
    ("chunk-size-negative", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: chunked",
                                body=b"-1\r\n{}\r\n0\r\n\r\n"), REJECT),
    ("chunk-size-huge", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: chunked",
                            body=b"ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n"), REJECT),
    ("chunk-size-0x", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: chunked",
                          body=b"0x2\r\n{}\r\n0\r\n\r\n"), REJECT),
    ("chunk-data-overruns", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: chunked",
                                body=b"2\r\n{}xxxx\r\n0\r\n\r\n"), REJECT),
    ("chunk-no-terminator", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: chunked",
                                body=b"2\r\n{}\r\n"), REJECT),
    ("chunk-big-body", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Transfer-Encoding: chunked",
                           body=b"100000\r\n" + b"x" * 0x100000 + b"\r\n0\r\n\r\n"), REJECT),
    ("expect-100-huge", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Expect: 100-continue",
                            b"Content-Length: 1000000000"), REJECT),
    ("body-on-get", req(b"GET /v1/health HTTP/1.1", HOST, b"Content-Length: 5", body=b"hello"), REJECT),
    ("short-body-then-eof", req(b"POST /v1/configs/x/refresh HTTP/1.1", HOST, b"Content-Length: 100",
                                body=b"0123456789"), REJECT),
    # --- NULs ---
    ("nul-in-method", req(b"G\x00ET /v1/health HTTP/1.1", HOST), REJECT),
    ("nul-in-path", req(b"GET /v1/he\x00alth HTTP/1.1", HOST), REJECT),
    ("nul-in-version", req(b"GET /v1/health HTTP/1.1\x00", HOST), REJECT),
    ("nuls-only", b"\x00" * 4096, REJECT),
    ("percent-nul", req(b"GET /v1/health%00 HTTP/1.1", HOST), REJECT),
    # --- percent-encoding and path tricks ---
    ("encoded-route", req(b"GET /v1/%68ealth HTTP/1.1", HOST), LENIENT),
    ("encoded-dotdot", req(b"GET /v1/pods/%2e%2e/x HTTP/1.1", HOST), REJECT),
    ("encoded-slash-traversal", req(b"GET /v1/pods/%2E%2E%2F%2E%2E%2Fhealth HTTP/1.1", HOST), REJECT),
    ("encoded-absolute", req(b"GET /v1/pods/default/%2fetc%2fpasswd HTTP/1.1", HOST), REJECT),
    ("lone-percent", req(b"GET /v1/pods/% HTTP/1.1", HOST), REJECT),
    ("double-encoding", req(b"GET /v1/pods/%252e%252e/x HTTP/1.1", HOST), REJECT),
    ("overlong-utf8-dot", req(b"GET /v1/pods/%c0%ae%c0%ae/x HTTP/1.1", HOST), REJECT),
    ("invalid-utf8", req(b"GET /v1/pods/%ff%fe/%80 HTTP/1.1", HOST), REJECT),
    ("raw-high-bytes", req(b"GET /v1/pods/\xff\xfe/x HTTP/1.1", HOST), REJECT),
    ("empty-segment", req(b"GET /v1//health HTTP/1.1", HOST), REJECT),
    ("dot-segment", req(b"GET /v1/./health HTTP/1.1", HOST), REJECT),
    ("dotdot-segment", req(b"GET /v1/../v1/health HTTP/1.1", HOST), REJECT),
    ("double-leading-slash", req(b"GET //v1/health HTTP/1.1", HOST), REJECT),
    ("trailing-slash", req(b"GET /v1/health/ HTTP/1.1", HOST), REJECT),
    ("no-leading-slash", req(b"GET v1/health HTTP/1.1", HOST), REJECT),
    ("backslashes", req(b"GET \\v1\\health HTTP/1.1", HOST), REJECT),
    ("encoded-space-in-config", req(b"GET /v1/configs/a%20b HTTP/1.1", HOST), REJECT),
    ("encoded-newline-in-pod", req(b"GET /v1/pods/default/a%0d%0aX-Injected:%201 HTTP/1.1", HOST), REJECT),
    # --- other request targets ---
    ("absolute-form-other-host", req(b"GET http://evil.example/v1/health HTTP/1.1", HOST), REJECT),
    ("absolute-form-https", req(b"GET https://pinion/v1/status HTTP/1.1", HOST), REJECT),
    ("authority-form-get", req(b"GET pinion:80 HTTP/1.1", HOST), REJECT),
    ("asterisk-get", req(b"GET * HTTP/1.1", HOST), REJECT),
    ("fragment", req(b"GET /v1/health#frag HTTP/1.1", HOST), LENIENT),
    # --- upgrades ---
    # Never switched (no 101): answered as the plain request it also is.
    ("upgrade-websocket", req(b"GET /v1/health HTTP/1.1", HOST, b"Connection: Upgrade", b"Upgrade: websocket",
                              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", b"Sec-WebSocket-Version: 13"), ({200},)),
    ("upgrade-h2c", req(b"GET /v1/health HTTP/1.1", HOST, b"Connection: Upgrade, HTTP2-Settings", b"Upgrade: h2c",
                        b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"), ({200},)),
    # --- pipelining: the good request is answered, the junk after it is not ---
    ("good-then-junk", GOOD + b"\x00\x01junk\r\n\r\n", ({200}, R4)),
    ("good-then-half-request", GOOD + b"GET /v1/status HTTP/1.1\r\nHost: x\r\n", ({200}, R4)),
    ("good-then-long-junk", GOOD + b"J" * LONG, ({200}, R4)),
    ("many-good-then-junk", GOOD * 50 + b"BREW /x HTCPCP/1.0\r\n\r\n", tuple([{200}] * 50) + (R4,)),
    ("good-close-then-more", req(b"GET /v1/health HTTP/1.1", HOST, b"Connection: close") + GOOD, ({200}, set())),
    # --- half-closed and abandoned sockets ---
    ("nothing-then-eof", b"", REJECT),
    ("partial-line-then-eof", b"GET /v1/hea", REJECT),
    ("unterminated-head-then-eof", b"GET /v1/health HTTP/1.1\r\nHost: pinion\r\n", REJECT),
    ("partial-header-then-eof", b"GET /v1/health HTTP/1.1\r\nHost: pin", REJECT),
]


@pytest.fixture(scope="module")
def http_agent():
    # configsync runs (one config, its server down) so that its routes' handlers answer the
    # requests that get through: a disabled module's routes would answer them all 503.
    a = module_agent(config={"config.y": {"url": "https://127.0.0.1:1/y/manifest.json", "interval": "1h",
                                          "dest": "/nonexistent-pinion-hostile/y", "timeout": "2s",
                                          "backoff-initial": "1h", "backoff-max": "1h"}})
    a.hostile_mark = a.log_mark()
    yield a
    close_agent(a)


def check_statuses(what, statuses, allowed):
    for i, st in enumerate(statuses):
        want = allowed[min(i, len(allowed) - 1)]
        ok = st in want or ("4xx" in want and 400 <= st < 500)
        assert ok, "%s: response %d is %d, allowed %s: all %r" % (what, i, st, sorted(map(str, want)), statuses)
    needed = [w for w in allowed if w and "4xx" not in w]
    assert len(statuses) >= len(needed), "%s: %d responses %r, expected at least %d" % (
        what, len(statuses), statuses, len(needed))


@pytest.mark.parametrize("what,payload,allowed", HTTP_CASES, ids=[c[0] for c in HTTP_CASES])
def test_malformed_http_is_refused_and_the_agent_keeps_serving(http_agent, what, payload, allowed):
    a = http_agent
    pid = a.pid
    statuses = read_responses(exchange(a.socket, payload))
    check_statuses(what, statuses, allowed)
    a.check_alive()
    assert a.pid == pid
    assert a.health()["status"] == "ok"


def test_abandoned_connections_leave_the_agent_serving(http_agent):
    """Clients that send a request and close (reset) at once without reading, 200 times."""
    a = http_agent
    before = fd_count(a.pid)
    for i in range(200):
        exchange(a.socket, GOOD if i % 2 else b"GET /v1/status HTTP/1.1\r\n", half_close=False, read=False)
    assert a.health()["status"] == "ok"
    wait_until(lambda: fd_count(a.pid) <= before, 10, desc="the agent's fds back to %d" % before)


def test_bad_http_clients_log_no_warning(http_agent):
    """A client's bad request is the client's problem: a healthy node logs no warning for it
    (the API layer answers it and at most notes it at debug level)."""
    a = http_agent
    with open(a.log_file, "rb") as f:
        f.seek(a.hostile_mark)
        text = f.read().decode("utf-8", "replace")
    assert not warnings_in(text), "\n".join(warnings_in(text)[:20])
    assert a.health()["status"] == "ok"


# =============================================================================================
# 2. Hostile static pods in pods-dir

def pod_with(name, path, value, uid=None):
    """make_pod(name) with the field at path (dotted, list indices as numbers) set to value."""
    pod = make_pod(name, uid=uid or "uid-" + name)
    node = pod
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node.setdefault(k, {})
    last = keys[-1]
    if last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return json.dumps(pod)


def annotated(name, key, value):
    return json.dumps(make_pod(name, uid="uid-" + name, annotations={key: value}))


HUGE = "x" * (900 * 1024)
# (file name, content, what /v1/status pods.errors says about it: a substring of its entry).
BAD_PODS = [
    ("t-apiversion", pod_with("t-apiversion", "apiVersion", 1), "apiVersion"),
    ("t-kind", pod_with("t-kind", "kind", "Deployment"), "kind"),
    ("t-metadata", pod_with("t-metadata", "metadata", []), "metadata"),
    ("t-name", pod_with("t-name", "metadata.name", 5), "metadata.name"),
    ("t-namespace", pod_with("t-namespace", "metadata.namespace", ["x"]), "metadata.namespace"),
    ("t-uid", pod_with("t-uid", "metadata.uid", {"a": 1}), "metadata.uid"),
    ("t-labels", pod_with("t-labels", "metadata.labels", "app=x"), "metadata.labels"),
    ("t-label-value", pod_with("t-label-value", "metadata.labels", {"app": 7}), "metadata.labels"),
    ("t-annotations", pod_with("t-annotations", "metadata.annotations", [1, 2]), "metadata.annotations"),
    ("t-annotation-value", pod_with("t-annotation-value", "metadata.annotations", {"pinion.io/identity": True}),
     "metadata.annotations"),
    ("t-resourceversion", pod_with("t-resourceversion", "metadata.resourceVersion", 12), "metadata.resourceVersion"),
    ("t-spec", pod_with("t-spec", "spec", "none"), "spec"),
    ("t-containers", pod_with("t-containers", "spec.containers", {"name": "main"}), "spec.containers"),
    ("t-container", pod_with("t-container", "spec.containers.0", "main"), "spec.containers"),
    ("t-ports", pod_with("t-ports", "spec.containers.0.ports", "8080"), "ports"),
    ("t-port-number", pod_with("t-port-number", "spec.containers.0.ports.0.containerPort", "8080"), "containerPort"),
    ("t-port-range", pod_with("t-port-range", "spec.containers.0.ports.0.containerPort", 70000), "containerPort"),
    ("t-port-negative", pod_with("t-port-negative", "spec.containers.0.ports.0.containerPort", -1), "containerPort"),
    ("t-port-float", pod_with("t-port-float", "spec.containers.0.ports.0.containerPort", 80.5), "containerPort"),
    ("t-protocol", pod_with("t-protocol", "spec.containers.0.ports.0.protocol", "ICMP"), "protocol"),
    ("t-hostnetwork", pod_with("t-hostnetwork", "spec.hostNetwork", "yes"), "hostNetwork"),
    ("t-nodename", pod_with("t-nodename", "spec.nodeName", 3), "nodeName"),
    ("t-serviceaccount", pod_with("t-serviceaccount", "spec.serviceAccountName", ["sa"]), "serviceAccountName"),
    ("t-status", pod_with("t-status", "status", 1), "status"),
    ("t-phase", pod_with("t-phase", "status.phase", {}), "phase"),
    ("t-podip", pod_with("t-podip", "status.podIP", "999.1.1.1"), "podIP"),
    ("t-podips", pod_with("t-podips", "status.podIPs", [{"ip": 5}]), "podIPs"),
    ("t-conditions", pod_with("t-conditions", "status.conditions", {"Ready": True}), "conditions"),
    ("t-containerid", pod_with("t-containerid", "status.containerStatuses",
                               [{"name": "main", "containerID": "containerd://../../x"}]), "containerID"),
    # Names and identities no Kubernetes object can have.
    ("n-slash", json.dumps(make_pod("a/b", uid="uid-n-slash")), "metadata.name"),
    ("n-dotdot", json.dumps(make_pod("..", uid="uid-n-dotdot")), "metadata.name"),
    # cJSON ends a string at a NUL: read as "a", this file would serve a pod it does not name.
    ("n-nul", json.dumps(make_pod("a\u0000b", uid="uid-n-nul")), "NUL"),
    ("n-nul-annotation", json.dumps(make_pod("n-nul-annotation", uid="uid-n-nul-annotation",
                                             annotations={"pinion.io/serverset": "/svc/a\u0000/../../x"})), "NUL"),
    ("n-raw-nul", json.dumps(make_pod("a-raw", uid="uid-n-raw-nul")).replace("a-raw", "a\x00raw").encode(), ""),
    ("n-unicode", json.dumps(make_pod("p\u00f6d-\u2603", uid="uid-n-unicode")), "metadata.name"),
    ("n-huge-name", json.dumps(make_pod("a" * 5000, uid="uid-n-huge")), "metadata.name"),
    ("n-namespace-slash", json.dumps(make_pod("n-ns", namespace="../kube-system", uid="uid-n-ns")),
     "metadata.namespace"),
    ("n-dup-uid", json.dumps(make_pod("n-dup-uid", uid="uid-good")), "already used"),
    ("n-dup-name", json.dumps(make_pod("good", uid="uid-other")), "already declared"),
    # Not a pod at all.
    ("j-binary", b"\xff\xfe\x00\x01garbage", ""),
    ("j-array", "[1, 2, 3]", ""),
    ("j-deep", "[" * 100000 + "]" * 100000, ""),
    ("j-deep-object", '{"a":' * 50000 + "1" + "}" * 50000, ""),
    ("j-empty", "", ""),
    ("j-truncated", json.dumps(make_pod("j-truncated"))[:-20], ""),
    ("j-trailing", json.dumps(make_pod("j-trailing", uid="uid-j-trailing")) + "{}", ""),
    ("j-too-big", json.dumps(make_pod("j-too-big", uid="uid-j-too-big", annotations={"a": HUGE + HUGE})),
     "larger than 1 MiB"),
]

# Valid pods whose annotation values are hostile to whoever reads them: the pod is served and the
# value is kept byte for byte (modules judge it later and say so on their own pages).
ODD_ANNOTATIONS = [
    ("a-identity-huge", "pinion.io/identity", HUGE),
    ("a-identity-newlines", "pinion.io/identity", "spiffe://x\n\rwarning: forged log line\u001b[2J"),
    ("a-configs-traversal", "pinion.io/configs", "../../etc,/etc/shadow, ,,,"),
    ("a-configs-many", "pinion.io/configs", ",".join("c%d" % i for i in range(20000))),
    ("a-serverset-traversal", "pinion.io/serverset", "/../../zookeeper/quota"),
    ("a-serverset-unicode", "pinion.io/serverset", "/svc/\u202e\ud7ff\U0001f4a5\\"),
    ("a-backslash-u0000", "pinion.io/configs", "\\u0000 is text here"),
]


def pods_errors(a):
    return a.status()["pods"]["errors"]


def error_for(errors, path):
    for e in errors:
        text = e if isinstance(e, str) else json.dumps(e)
        if path in text:
            return text
    return None


@pytest.fixture(scope="module")
def pods_agent():
    a = module_agent()
    a.write_pod("good", make_pod("good", uid="uid-good"))
    a.wait_pod("default", "good")
    yield a
    close_agent(a)


def good_pod_served(a):
    pods = {(p["namespace"], p["name"]) for p in a.pods()["pods"]}
    assert ("default", "good") in pods, pods
    assert a.health()["status"] == "ok"


def test_hostile_pod_files_are_reported_and_the_good_one_stays(pods_agent):
    a = pods_agent
    pid = a.pid
    paths = {name: a.pod_path(name) for name, _, _ in BAD_PODS}
    try:
        check_bad_pods(a, pid, paths)
    finally:
        for path in paths.values():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    wait_until(lambda: not pods_errors(a), 10, desc="pods.errors empty once the files are gone")


def check_bad_pods(a, pid, paths):
    for name, content, _ in BAD_PODS:
        a.write_pod(name, content)

    def all_listed():
        errors = pods_errors(a)
        return all(error_for(errors, p) for p in paths.values()) and errors
    errors = wait_until(all_listed, 15, desc="every hostile pod file in pods.errors")
    for name, _, says in BAD_PODS:
        text = error_for(errors, paths[name])
        assert says in text, "%s: %r does not say %r" % (name, text, says)
    served = {p["name"] for p in a.pods()["pods"]}
    assert served == {"good"}, served
    assert a.pid == pid
    good_pod_served(a)


def test_hostile_annotation_values_are_kept_verbatim(pods_agent):
    a = pods_agent
    for name, key, value in ODD_ANNOTATIONS:
        a.write_pod(name, annotated(name, key, value))
    for name, key, value in ODD_ANNOTATIONS:
        a.wait_pod("default", name)
        got = a.get_json("/v1/pods/default/%s" % name)["annotations"].get(key)
        assert got == value, "%s: %r" % (name, (got or "")[:200])
    good_pod_served(a)
    for name, _, _ in ODD_ANNOTATIONS:
        a.remove_pod(name)
        a.wait_pod_gone("default", name)


def special_files(d):
    """Non-regular things a pods-dir entry can point at: each must be refused without being
    opened for reading (a FIFO with no writer would block the agent for good)."""
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(os.path.join(d, "sock"))
    os.makedirs(os.path.join(d, "dir"))
    return sock, {
        "s-fifo": fifo,
        "s-dev-zero": "/dev/zero",
        "s-dev-urandom": "/dev/urandom",
        "s-dev-null": "/dev/null",
        "s-socket": os.path.join(d, "sock"),
        "s-dir": os.path.join(d, "dir"),
        "s-dangling": os.path.join(d, "missing"),
        "s-loop": None,  # a link to itself
    }


def test_links_to_fifos_devices_and_loops_do_not_stall_the_agent(pods_agent, tmp_path):
    a = pods_agent
    sock, targets = special_files(str(tmp_path))
    try:
        paths = {}
        for name, target in targets.items():
            link = a.pod_path(name)
            os.symlink(target or link, link)
            paths[name] = link
        errors = wait_until(lambda: (lambda e: e if all(error_for(e, p) for p in paths.values()) else None)(
            pods_errors(a)), 15, desc="every special file in pods.errors")
        for name in ("s-fifo", "s-dev-zero", "s-dev-urandom", "s-dev-null", "s-socket"):
            assert "not a regular file" in error_for(errors, paths[name]), (name, error_for(errors, paths[name]))
        good_pod_served(a)
        # A writer shows up on the FIFO: still refused, nothing read from it.
        fd = os.open(targets["s-fifo"], os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(fd, json.dumps(make_pod("from-fifo", uid="uid-fifo")).encode())
            os.utime(a.pods_dir)
            a.write_pod("poke", make_pod("poke", uid="uid-poke"))
            a.wait_pod("default", "poke")
            assert "from-fifo" not in {p["name"] for p in a.pods()["pods"]}
        finally:
            os.close(fd)
    finally:
        sock.close()
        for name in list(targets) + ["poke"]:
            try:
                os.unlink(a.pod_path(name))
            except FileNotFoundError:
                pass
    wait_until(lambda: not pods_errors(a), 10, desc="pods.errors empty once the links are gone")
    good_pod_served(a)


def test_files_that_change_while_read(pods_agent, tmp_path):
    """A pod file rewritten in place (truncated, grown, half-written) and a name that flips
    between a regular file and a FIFO, as fast as the test can, while the agent rescans: the
    agent never blocks and ends up serving the last good content."""
    a = pods_agent
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    regular = str(tmp_path / "regular.json")
    with open(regular, "w") as f:
        f.write(json.dumps(make_pod("flip", uid="uid-flip")))
    stop = time.monotonic() + 2
    inplace = a.pod_path("inplace")
    flip = a.pod_path("flip")
    versions = [json.dumps(make_pod("inplace", uid="uid-inplace", labels={"v": str(i)}, annotations={"pad": "p" * (i * 997 % 50000)}))
                for i in range(8)]
    i = 0
    while time.monotonic() < stop:
        with open(inplace, "w") as f:  # not atomic: the agent may see any prefix of it
            data = versions[i % len(versions)]
            f.write(data[:len(data) // 2])
            f.flush()
            f.write(data[len(data) // 2:])
        tmp = flip + ".tmp"
        os.symlink(fifo if i % 2 else regular, tmp)
        os.rename(tmp, flip)  # a ".tmp" name is not a pod file name
        i += 1
        assert a.running()
    final = json.dumps(make_pod("inplace", uid="uid-inplace", labels={"v": "final"}))
    with open(inplace, "w") as f:
        f.write(final)
    os.unlink(flip)
    a.wait_pod("default", "inplace", lambda p: p.get("labels", {}).get("v") == "final", timeout=15)
    good_pod_served(a)
    a.remove_pod("inplace")
    a.wait_pod_gone("default", "inplace")
    assert not pods_errors(a)


# =============================================================================================
# 3. Hostile CNI_NETNS for ADD

@pytest.fixture(scope="module")
def podnet_agent():
    cidr = free_pod_cidr(prefix=22)
    # No quarantine: the load case below hands out and takes back 1,000 addresses in a row.
    a = module_agent(config={"network": {"pod-cidr": cidr, "address-quarantine": "0s"}})
    a.pod_cidr = cidr
    yield a
    close_agent(a)


def host_net(a, container_ids):
    """What ADD could have wired on the host for these attachments: their host ends (by the
    name the agent derives), addresses and routes in the pod CIDR, the default route. Only
    this test's own: other tests on the machine may add interfaces meanwhile."""
    names = {fnv_host_ifname(c, "eth0") for c in container_ids}
    links = sorted(n for n in host_links() if n in names)
    net = ipaddress.ip_network(a.pod_cidr)

    def ours(line):
        for tok in line.split():
            try:
                if ipaddress.ip_network(tok, strict=False).subnet_of(net):
                    return True
            except (ValueError, TypeError):
                pass
        return False
    addrs = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    default = subprocess.run(["ip", "-4", "route", "show", "default"], capture_output=True, text=True).stdout
    return links, [l for l in addrs.splitlines() if ours(l)], [l for l in routes.splitlines() if ours(l)], default


class NetnsTargets:
    """The paths the cases point CNI_NETNS at, made in d; close() removes what needs more than d."""

    def __init__(self, d):
        self.d = d
        self.fifo = os.path.join(d, "fifo")
        os.mkfifo(self.fifo)
        self.regular = os.path.join(d, "file")
        with open(self.regular, "w") as f:
            f.write("not a namespace\n")
        self.directory = os.path.join(d, "dir")
        os.mkdir(self.directory)
        self.loop = os.path.join(d, "loop")
        os.symlink(self.loop, self.loop)
        self.to_host = os.path.join(d, "to-host")
        os.symlink("/proc/1/ns/net", self.to_host)
        self.sock_path = os.path.join(d, "sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.sock_path)
        # A network namespace whose only process is gone: its /proc path no longer exists.
        p = subprocess.Popen(["unshare", "--net", "sleep", "60"])
        time.sleep(0.2)
        self.dead = "/proc/%d/ns/net" % p.pid
        p.kill()
        p.wait()
        # A named namespace deleted again: the path a runtime could still hold.
        name = "pinion-hostile-%d-gone" % os.getpid()
        subprocess.run(["ip", "netns", "add", name], check=True)
        subprocess.run(["ip", "netns", "del", name], check=True)
        self.deleted = "/var/run/netns/" + name

    def close(self):
        self.sock.close()


def netns_cases(t):
    """(id, CNI_NETNS, the CNI code): 4 for what is not another network namespace (the spec's
    "invalid necessary environment variable"), 3 for a path that does not exist."""
    return [
        ("host-pid1", "/proc/1/ns/net", 4),
        ("agent-self", "/proc/self/ns/net", 4),
        ("agent-thread-self", "/proc/thread-self/ns/net", 4),
        ("test-process", "/proc/%d/ns/net" % os.getpid(), 4),
        ("link-to-host", t.to_host, 4),
        ("dotdot-to-host", "/var/run/netns/../../proc/1/ns/net", 4),
        ("regular-file", t.regular, 4),
        ("directory", t.directory, 4),
        ("ns-directory", "/proc/self/ns", 4),
        ("symlink-loop", t.loop, 4),
        ("fifo", t.fifo, 4),
        ("dev-zero", "/dev/zero", 4),
        ("dev-null", "/dev/null", 4),
        ("unix-socket", t.sock_path, 4),
        ("mount-ns", "/proc/self/ns/mnt", 4),
        ("pid-ns", "/proc/self/ns/pid", 4),
        ("user-ns", "/proc/self/ns/user", 4),
        ("uts-ns", "/proc/1/ns/uts", 4),
        ("relative", "netns/x", 4),
        ("dot-relative", "./proc/1/ns/net", 4),
        ("overlong", "/" + "a" * 5000, 4),
        ("long-component", "/" + "a" * 4000, 4),
        ("newline", "/proc/1/ns/net\n", 4),
        ("dead-process", t.dead, 3),
        ("deleted-netns", t.deleted, 3),
        ("missing", "/nonexistent/netns", 3),
    ]


def test_hostile_netns_paths_get_the_spec_codes_and_wire_nothing(podnet_agent, tmp_path):
    a = podnet_agent
    pid = a.pid
    t = NetnsTargets(str(tmp_path))
    try:
        cases = netns_cases(t)
        ids = ["hostile-%d" % i for i in range(len(cases))] + ["hostile-nul", "hostile-number"]
        before = host_net(a, ids)
        assert before[:3] == ([], [], []), before
        for i, (what, path, code) in enumerate(cases):
            r = cni(a, "ADD", "hostile-%d" % i, path, timeout=20)
            assert r.rc != 0 and r.code == code, (what, path[:80], r)
            if code == 4:
                assert "CNI_NETNS" in r.json["msg"] + r.json.get("details", ""), (what, r)
            assert r.json["msg"], (what, r)
            assert podnet_status(a)["details"]["pool"]["allocated"] == 0, what
            assert a.running() and a.pid == pid, what
        # Straight to the API, where a JSON string can hold what an environment cannot: a NUL
        # (the path ends there: the host's namespace, refused) and a non-string.
        for what, netns, code in (("nul", "/proc/1/ns/net\u0000/../../run/netns/x", 4), ("number", 7, 6)):
            r = unix_request(a.socket, "POST", "/v1/cni", body={
                "command": "ADD", "containerID": "hostile-" + what, "netns": netns, "ifname": "eth0",
                "config": pinion_conf(a)})
            assert 400 <= r.status < 500 and r.body["cni"]["code"] == code, (what, r)
        assert host_net(a, ids) == before
        # Each reached the agent and was counted as a failed ADD, but for the four the plugin
        # itself refuses (relative, overlong, a control character) before connecting and the
        # undecodable request (no operation to count it under).
        assert a.metrics().value("pinion_podnet_operations_total", verb="ADD", result="error") == len(ids) - 5
        assert podnet_status(a)["details"]["pool"]["allocated"] == 0
        assert podnet_status(a)["state"] == "running"
        assert a.health()["status"] == "ok"
    finally:
        t.close()


# =============================================================================================
# 4. Hostile bundles

PAYLOAD = b"ESCAPED\n"
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()
GOOD_FILES = {"app.yaml": b"version: 1\n", "conf/db.ini": b"[db]\nhost=a\n"}


def entry(path="x.conf", **kw):
    """A manifest entry for the served payload (valid unless kw says otherwise; a value of
    None drops the key)."""
    e = {"path": path, "url": "payload", "size": len(PAYLOAD), "sha256": PAYLOAD_SHA, "mode": "0644"}
    e.update(kw)
    return {k: v for k, v in e.items() if v is not None}


def manifest(files, version="v-hostile", **top):
    m = {"version": version, "files": files}
    m.update(top)
    return {k: v for k, v in m.items() if v is not None}


def deep(n):
    return '{"version": "v", "files": ' + "[" * n + "]" * n + "}"


def chains(n, depth, **kw):
    """n files, each at the end of its own chain of depth directories ("c<i>/d/d/.../f<i>")."""
    return [entry("c%d/" % i + "d/" * (depth - 1) + "f%d" % i, **kw) for i in range(n)]


EMPTY_SHA = hashlib.sha256(b"").hexdigest()


# (id, the manifest (a dict, or bytes as served), what last_error says: a regex).
BAD_BUNDLES = [
    # --- not a manifest ---
    ("not-json", b"{not json", r"not valid JSON"),
    ("empty", b"", r"not valid JSON"),
    ("array", b"[]", r"not a JSON object"),
    ("string", b'"manifest"', r"not a JSON object"),
    ("null", b"null", r"not a JSON object"),
    ("nul-byte", b'{"version": "v\x00", "files": []}', r"NUL"),
    ("deep-nesting", deep(5000).encode(), r"not valid JSON"),
    ("too-big", b'{"version": "v", "files": [], "pad": "' + b"x" * (17 << 20) + b'"}', r"larger than"),
    # --- version ---
    ("version-missing", manifest([entry()], version=None), r"version"),
    ("version-empty", manifest([entry()], version=""), r"version"),
    ("version-number", manifest([entry()], version=7), r"version"),
    ("version-control", manifest([entry()], version="v\n2"), r"version: contains a control character"),
    ("version-long", manifest([entry()], version="v" * 300), r"version: longer than"),
    # --- files ---
    ("files-missing", {"version": "v"}, r"files: missing or not an array"),
    ("files-object", manifest({"x": entry()}), r"files: missing or not an array"),
    ("files-too-many", manifest([entry("f%d" % i) for i in range(10001)]), r"more than 10000 entries"),
    ("entry-string", manifest(["x.conf"]), r"files\[0\]: not an object"),
    ("entry-null", manifest([None]), r"files\[0\]: not an object"),
    # --- paths ---
    ("path-missing", manifest([entry(path=None)]), r"files\[0\]\.path: missing"),
    ("path-number", manifest([entry(path=5)]), r"files\[0\]\.path: missing or not a string"),
    ("path-empty", manifest([entry(path="")]), r"is empty"),
    ("path-absolute", manifest([entry(path="/etc/pinion-hostile-%d" % os.getpid())]), r"is absolute"),
    ("path-dotdot", manifest([entry(path="../escape")]), r"escapes dest"),
    ("path-deep-dotdot", manifest([entry(path="a/../../../escape")]), r"escapes dest"),
    ("path-dot", manifest([entry(path="./x.conf")]), r"'\.' component"),
    ("path-empty-component", manifest([entry(path="a//b")]), r"empty component"),
    ("path-trailing-slash", manifest([entry(path="dir/")]), r"empty component"),
    ("path-data-link", manifest([entry(path="..data")]), r"reserved"),
    ("path-into-data-link", manifest([entry(path="..data/../../escape")]), r"reserved"),
    ("path-version-dir", manifest([entry(path="..2026_01_01/x")]), r"reserved"),
    ("path-control", manifest([entry(path="a\nb")]), r"control character"),
    ("path-del", manifest([entry(path="a\x7fb")]), r"control character"),
    ("path-too-long", manifest([entry(path="a/" * 600 + "x")]), r"too long"),
    ("path-long-component", manifest([entry(path="a" * 300)]), r"longer than 255"),
    ("path-duplicate", manifest([entry("x.conf"), entry("x.conf")]), r"appears twice"),
    ("path-file-and-dir", manifest([entry("conf"), entry("conf/db.ini")]), r"is a file and a directory"),
    # --- what a version makes on disk: refused before anything is written ---
    # 60 empty files 507 directories deep (a 68 KB manifest): 30,425 directories for 0 bytes.
    ("dirs-507-deep", manifest(chains(60, 507, size=0, sha256=EMPTY_SHA)),
     r"is 507 directories deep, more than max-depth \(32\)"),
    ("dirs-33-deep", manifest([entry("d/" * 33 + "x.conf")]), r"is 33 directories deep, more than max-depth \(32\)"),
    ("dirs-over-max", manifest(chains(63, 32, size=0, sha256=EMPTY_SHA) + [entry("c63/d/x.conf")]),
     r"2018 directories, more than max-directories \(2000\)"),
    ("entries-over-max", manifest([entry("f%d" % i, size=0, sha256=EMPTY_SHA) for i in range(9500)] +
                                  [entry("d%d/f" % i, size=0, sha256=EMPTY_SHA) for i in range(500)]),
     r"20500 entries \(10000 files, 500 directories, 10000 links in dest\), more than max-entries \(20000\)"),
    ("serial-negative", manifest([entry()], serial=-1), r"serial: not a whole number"),
    ("serial-string", manifest([entry()], serial="7"), r"serial: not a whole number"),
    # --- url ---
    ("url-missing", manifest([entry(url=None)]), r"url: missing"),
    ("url-empty", manifest([entry(url="")]), r"url: missing"),
    ("url-number", manifest([entry(url=1)]), r"url: missing"),
    ("url-file-scheme", manifest([entry(url="file:///etc/shadow")]), r"Protocol not supported"),
    ("url-gopher", manifest([entry(url="gopher://127.0.0.1/x")]), r"Protocol not supported"),
    ("url-404", manifest([entry(url="no-such-file")]), r"404"),
    # --- size, sha256, mode ---
    ("size-negative", manifest([entry(size=-1)]), r"size: not a whole number"),
    ("size-string", manifest([entry(size="8")]), r"size: not a whole number"),
    ("size-fraction", manifest([entry(size=7.5)]), r"size: not a whole number"),
    ("size-huge", manifest([entry(size=2 ** 70)]), r"size: not a whole number"),
    ("size-overflow", manifest([entry("f%d" % i, size=2 ** 53) for i in range(2100)]), r"sizes overflow|exceed max-size"),
    ("size-over-max", manifest([entry(size=5 << 20)]), r"exceed max-size"),
    ("size-lie-short", manifest([entry(size=3)]), r"larger than the 3 bytes declared"),
    ("size-lie-long", manifest([entry(size=len(PAYLOAD) + 100)]), r"8 bytes, 108 declared"),
    ("sha-short", manifest([entry(sha256="abc")]), r"sha256: not 64 hex digits"),
    ("sha-not-hex", manifest([entry(sha256="zz" * 32)]), r"sha256: not 64 hex digits"),
    ("sha-number", manifest([entry(sha256=12)]), r"sha256: not 64 hex digits"),
    ("sha-lie", manifest([entry(sha256="ab" * 32)]), r"sha256 %s, manifest says (ab)+" % PAYLOAD_SHA),
    ("body-oversized", manifest([entry(url="big")]), r"larger than the 8 bytes declared"),
    ("mode-setuid", manifest([entry(mode="4755")]), r"only permission bits"),
    ("mode-not-octal", manifest([entry(mode="0999")]), r"not an octal string"),
    ("mode-word", manifest([entry(mode="rwxrwxrwx")]), r"not an octal string"),
    ("mode-number", manifest([entry(mode=420)]), r"not an octal string"),
]


# Refused for what they would make on disk: before anything is written (not even a version
# directory appears in dest, whose mtime stays), with last_error_kind "limit".
LIMIT_CASES = {"dirs-507-deep", "dirs-33-deep", "dirs-over-max", "entries-over-max"}


def serve_manifest(root, name, data):
    """Serves data as root/name/manifest.json (atomically; a new mtime, so a new ETag)."""
    if isinstance(data, (dict, list)):
        data = json.dumps(data).encode()
    base = os.path.join(root, name)
    tmp = os.path.join(base, ".manifest.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    path = os.path.join(base, "manifest.json")
    os.rename(tmp, path)
    serve_manifest.n += 1
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + serve_manifest.n * 1_000_000_000))


serve_manifest.n = 0


@pytest.fixture(scope="module")
def bundle_env(test_ca):
    d = tempfile.mkdtemp(prefix="pinion-hostile-")
    os.chmod(d, 0o755)
    nginx = Nginx(os.path.join(d, "nginx"), test_ca)
    agents = []
    try:
        area = os.path.join(d, "area")
        os.makedirs(area)
        dest = os.path.join(area, "dest")
        write_bundle(nginx.root, "app", GOOD_FILES, "v1")
        with open(os.path.join(nginx.root, "app", "payload"), "wb") as f:
            f.write(PAYLOAD)
        with open(os.path.join(nginx.root, "app", "big"), "wb") as f:
            f.write(PAYLOAD * ((6 << 20) // len(PAYLOAD)))
        # No retries of their own (backoff of an hour): each case is one fetch, on refresh.
        section = {"url": nginx.url("app/manifest.json"), "dest": dest, "ca-file": test_ca.ca_cert,
                   "interval": "1h", "backoff-initial": "1h", "backoff-max": "1h", "timeout": "10s",
                   "max-size": "4M"}
        lp = {"url": nginx.url("lp%d/manifest.json"), "dest": os.path.join(d, "lp%d"), "ca-file": test_ca.ca_cert,
              "interval": "1h", "backoff-initial": "1h", "backoff-max": "1h", "timeout": "10s"}
        cfg = {"config.app": section}
        for i in (1, 2):
            cfg["config.lp%d" % i] = {k: (v % i if k in ("url", "dest") else v) for k, v in lp.items()}
        a = module_agent(config=cfg)
        agents.append(a)
        wait_until(lambda: get_config(a, "app")["version"] == "v1", 15, desc="app at v1")
        yield {"agent": a, "nginx": nginx, "dest": dest, "area": area, "dir": d}
    finally:
        for a in agents:
            problem = a.close()
            if problem:
                pytest.fail(problem, pytrace=False)
        nginx.stop()
        shutil.rmtree(d, ignore_errors=True)


def tree_outside(d, dest):
    """Every path under d but dest's own tree (and nginx's), with its type."""
    out = []
    for dirpath, dirs, files in os.walk(d):
        if dirpath.startswith(dest) or "/nginx" in dirpath[len(d):]:
            continue
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            if not p.startswith(dest) and not p.startswith(os.path.join(d, "nginx")):
                out.append(p)
    return sorted(out)


@pytest.mark.parametrize("what,data,says", BAD_BUNDLES, ids=[c[0] for c in BAD_BUNDLES])
def test_hostile_bundle_is_refused_and_the_last_good_stays(bundle_env, what, data, says):
    a, dest = bundle_env["agent"], bundle_env["dest"]
    outside = tree_outside(bundle_env["dir"], dest)
    version_dirs = versions_in(dest)
    dest_mtime = os.stat(dest).st_mtime_ns
    before = get_config(a, "app")["failures"]
    serve_manifest(bundle_env["nginx"].root, "app", data)
    r = a.request("POST", "/v1/configs/app/refresh")
    assert r.status == 202, r
    c = wait_until(lambda: (lambda c: c if c["failures"] > before and c["state"] != "fetching" else None)(
        get_config(a, "app")), 20, desc="%s: the refresh failed" % what)
    assert c["failures"] == before + 1, c
    assert c["present"] and c["version"] == "v1", (what, c)
    assert c["last_error"] and re.search(says, c["last_error"]), (what, c["last_error"])
    if what in LIMIT_CASES:
        assert c["last_error_kind"] == "limit", (what, c)
        assert os.stat(dest).st_mtime_ns == dest_mtime, "%s: something was made in dest" % what
    assert read_tree(dest) == GOOD_FILES, what
    assert versions_in(dest) == version_dirs, what
    assert tree_outside(bundle_env["dir"], dest) == outside, what
    assert not os.path.exists("/etc/pinion-hostile-%d" % os.getpid())
    assert a.health()["status"] == "ok"


# =============================================================================================
# 5. Load: many long polls at once, many ADDs in a row

def parse_reply(data):
    """(status, JSON body) of one whole HTTP/1.1 reply read to the close."""
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        out = b""
        while body:
            size, _, body = body.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if n == 0:
                break
            out += body[:n]
            body = body[n + 2:]
        body = out
    return status, json.loads(body)


def open_long_polls(path, urls):
    """One connection per url, each sent its GET (Connection: close); returns the sockets."""
    socks = []
    try:
        for url in urls:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            socks.append(s)
            s.connect(path)
            s.sendall(b"GET %s HTTP/1.1\r\nHost: pinion\r\nConnection: close\r\n\r\n" % url.encode())
            s.setblocking(False)
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


def read_all(socks, timeout):
    """Reads every socket to its close (or until timeout): {socket: bytes}."""
    sel = selectors.DefaultSelector()
    data = {}
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
        data[s] = b""
    open_ = len(socks)
    deadline = time.monotonic() + T(timeout)
    while open_ and time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except ConnectionResetError:
                chunk = b""
            if chunk:
                data[s] += chunk
            else:
                sel.unregister(s)
                open_ -= 1
    sel.close()
    return data


# The fetcher's own connections to nginx (and their TLS sessions) come and go meanwhile; a leak of
# what 900 connections hold would be hundreds.
FD_SLACK = 5


def test_900_long_polls_are_all_answered_when_their_configs_arrive(bundle_env):
    a, nginx = bundle_env["agent"], bundle_env["nginx"]
    assert not get_config(a, "lp1")["present"] and not get_config(a, "lp2")["present"]
    base_fds = fd_count(a.pid)
    before = fds(a.pid)
    urls = ["/v1/configs/lp%d?wait=60s" % (1 + i % 2) for i in range(900)]
    socks = open_long_polls(a.socket, urls)
    try:
        # Held, not answered: nothing arrives while the configs are absent, and the API still
        # answers everyone else.
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        early = sel.select(T(1))
        sel.close()
        assert not early, "%d long polls answered or closed before their config arrived" % len(early)
        assert a.health()["status"] == "ok"
        wait_until(lambda: fd_count(a.pid) >= base_fds + 900 - FD_SLACK, 10, desc="900 connections accepted")
        for i in (1, 2):
            write_bundle(nginx.root, "lp%d" % i, {"f": b"lp%d\n" % i}, "lp%d-v1" % i)
            assert a.request("POST", "/v1/configs/lp%d/refresh" % i).status == 202
        replies = read_all(socks, 30)
    finally:
        for s in socks:
            s.close()
    bad = []
    for i, (s, url) in enumerate(zip(socks, urls)):
        data = replies.get(s, b"")
        want = "lp%d-v1" % (1 + i % 2)
        try:
            status, body = parse_reply(data)
            ok = status == 200 and body["present"] is True and body["version"] == want
        except (ValueError, IndexError, KeyError):
            ok = False
        if not ok:
            bad.append((i, data[:200]))
    assert not bad, "%d of 900 long polls not answered with their config: %r" % (len(bad), bad[:5])
    wait_until(lambda: fd_count(a.pid) <= base_fds + FD_SLACK, 10,
               desc="the agent's fds back to %d: %s -> %s" % (base_fds, before, fds(a.pid)))
    assert a.health()["status"] == "ok"


CNI_ROUNDS = 1000


def test_1000_add_del_in_a_row_leak_nothing(podnet_agent):
    a = podnet_agent
    names = ["pinion-hostile-%d-load-%d" % (os.getpid(), i) for i in range(4)]
    for n in names:
        subprocess.run(["ip", "netns", "add", n], check=True)
    ids = ["load-%d" % i for i in range(CNI_ROUNDS)]
    try:
        paths = ["/var/run/netns/" + n for n in names]
        # One round first: what the agent opens once (netlink, state files) is not a leak.
        assert cni(a, "ADD", "warmup", paths[0]).rc == 0
        assert cni(a, "DEL", "warmup", paths[0]).rc == 0
        base_fds = fd_count(a.pid)
        net = ipaddress.ip_network(a.pod_cidr)
        seen = set()
        for i, cid in enumerate(ids):
            r = cni(a, "ADD", cid, paths[i % len(paths)])
            assert r.rc == 0, (i, r)
            ip = ipaddress.ip_address(r.ip())
            assert ip in net, (i, r)
            seen.add(ip)
            d = cni(a, "DEL", cid, paths[i % len(paths)])
            assert d.rc == 0, (i, d)
        assert len(seen) > 1, "every ADD got the same address: %s" % seen
        pool = podnet_status(a)["details"]["pool"]
        assert pool["allocated"] == 0, pool
        # DEL answers once the address is released; the host ends go in the background.
        default = subprocess.run(["ip", "-4", "route", "show", "default"], capture_output=True, text=True).stdout
        wait_until(lambda: host_net(a, ids) == ([], [], [], default), 10, desc="no host end, address or route left")
        for p in paths:
            inside = subprocess.run(["ip", "-n", os.path.basename(p), "-o", "link", "show"], capture_output=True,
                                    text=True).stdout
            assert "eth0" not in inside, inside
        wait_until(lambda: fd_count(a.pid) <= base_fds, 10, desc="the agent's fds back to %d" % base_fds)
        m = a.metrics()
        assert m.value("pinion_podnet_operations_total", verb="ADD", result="ok") >= CNI_ROUNDS + 1
        assert m.value("pinion_podnet_operations_total", verb="DEL", result="ok") >= CNI_ROUNDS + 1
        assert a.health()["status"] == "ok"
    finally:
        for n in names:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


# =============================================================================================
# 6. Budgets on the local API and the metrics port

@pytest.fixture(scope="module")
def budget_env():
    """An agent with a body-reading POST route for everyone (test_api_conn.configure_budget_agent)
    and the metrics port on loopback."""
    address = "127.0.0.1:%d" % free_port()
    a = Agent()
    try:
        configure_budget_agent(a, **{"metrics-listen": address})
        a.start()
    except BaseException:
        a.close()
        raise
    yield a, address
    close_agent(a)


def tcp_connect(address):
    host, port = address.rsplit(":", 1)
    return lambda: socket.create_connection((host, int(port)), timeout=5)


@pytest.mark.parametrize("where", ["socket", "metrics-port"])
def test_a_trickled_chunked_body_is_cut(budget_env, where):
    a, address = budget_env
    before = a.metrics().value("pinion_api_connections_closed_total", reason="body") or 0
    if where == "socket":
        check_trickled_body_is_cut(unix_connect(a.socket),
                                   b"GET /v1/health HTTP/1.1\r\nHost: pinion\r\nTransfer-Encoding: chunked\r\n\r\n")
    else:
        check_trickled_body_is_cut(tcp_connect(address),
                                   b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert a.metrics().value("pinion_api_connections_closed_total", reason="body") == before + 1
    assert a.health()["status"] == "ok"


@pytest.mark.parametrize("where", ["socket", "metrics-port"])
def test_an_idle_connection_is_closed(budget_env, where):
    a, address = budget_env
    before = a.metrics().value("pinion_api_connections_closed_total", reason="idle") or 0
    if where == "socket":
        check_idle_keepalive_is_closed(unix_connect(a.socket), b"GET /v1/health HTTP/1.1\r\nHost: pinion\r\n\r\n")
    else:
        check_idle_keepalive_is_closed(tcp_connect(address), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert a.metrics().value("pinion_api_connections_closed_total", reason="idle") >= before + 1


def test_one_source_cannot_take_the_metrics_port(budget_env):
    check_scrapes_survive_a_hostile_source(budget_env[1])


def test_request_bytes_are_budgeted_per_caller(budget_env):
    check_request_bytes_budget(budget_env[0])


def test_a_pipelining_pod_is_paced(budget_env):
    a = budget_env[0]
    cg_a, cg_b = pod_cgroup(new_uid()), pod_cgroup(new_uid())
    try:
        check_pipelining_pod_is_paced(a, cg_a, cg_b)
    finally:
        cg_a.close()
        cg_b.close()


# =============================================================================================
# 7. The gRPC servers (the Workload API, the CSI plugin)

GRPC_NOBODY = 65534
GRPC_MAX_MESSAGE = 64 * 1024


class GrpcEnv:
    """One agent serving the Workload API (a pod with an identity, JWT keys) and the CSI plugin."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="pinion-hostile-grpc-")
        os.chmod(self.dir, 0o755)
        self.agent = self.cgroup = self.pb_dir = self.csi_pb_dir = None
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    def start(self):
        uid = new_uid()
        try:
            self.cgroup = PodCgroup(uid, hierarchy="pids")
        except (OSError, RuntimeError) as e:
            pytest.skip("cannot create test cgroups: %s" % e)
        write_secret(os.path.join(self.dir, "jwt.key"), key_pem(new_key()))
        write_secret(os.path.join(self.dir, "jwt-bundle"), b'{"keys": []}', 0o644)
        self.csi_socket = os.path.join(self.dir, "plugins", DRIVER, "csi.sock")
        os.makedirs(os.path.join(self.dir, "pods"))
        self.agent = module_agent(config={
            "agent": {"socket-mode": "0666"},
            "identity": {"signer": "local", "trust-domain": "hostile.test", "ca-dir": os.path.join(self.dir, "ca"),
                         "pod-tls-dir": os.path.join(self.dir, "pods-tls"),
                         "jwt-key-file": os.path.join(self.dir, "jwt.key"),
                         "jwt-bundle-file": os.path.join(self.dir, "jwt-bundle")},
            "csi": {"enable": "yes", "socket": self.csi_socket, "registration-dir": "",
                    "pods-root": os.path.join(self.dir, "pods")}})
        self.socket = os.path.join(self.agent.runtime_dir, "workload.sock")
        self.pb_dir = generate_messages()
        self.pb = PythonClient(self.pb_dir)
        self.agent.write_pod("web", identity_pod_object("web", uid, ns="shop", sa="front"))
        wait_workload(self.agent, "web")
        wait_until(lambda: os.path.exists(self.socket) and os.path.exists(self.csi_socket), desc="gRPC sockets")
        self.csi_pb_dir, self.csi, _ = csi_messages()

    def close(self):
        problem = self.agent.close() if self.agent else None
        if self.cgroup:
            self.cgroup.close()
        for d in (self.pb_dir, self.csi_pb_dir, self.dir):
            if d:
                shutil.rmtree(d, ignore_errors=True)
        if problem:
            pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="module")
def grpc_env():
    env = GrpcEnv()
    yield env
    env.close()


# (what, client arguments, the status, words of its details)
GRPC_CASES = [
    ("message over 64 KiB", ["jwt-svid", "--raw-zeros", GRPC_MAX_MESSAGE + 1], "RESOURCE_EXHAUSTED", "65536"),
    ("a 4 MiB message", ["jwt-svid", "--raw-zeros", 4 * 1024 * 1024], "RESOURCE_EXHAUSTED", "65536"),
    ("64 KiB of garbage", ["jwt-svid", "--raw-zeros", GRPC_MAX_MESSAGE], "INVALID_ARGUMENT", "malformed"),
    ("17 audiences", ["jwt-svid"] + sum([["--audience", "a%d" % i] for i in range(17)], []), "INVALID_ARGUMENT",
     "audience"),
    ("no security header", ["svid", "--no-header"], "INVALID_ARGUMENT", "security header"),
]


@pytest.mark.parametrize("what,args,status,says", GRPC_CASES, ids=[c[0] for c in GRPC_CASES])
def test_hostile_grpc_requests_get_their_status(grpc_env, what, args, status, says):
    e = grpc_env
    (r,) = call(e.pb, e.socket, *args, cg=e.cgroup, uid=GRPC_NOBODY)
    assert r.get("error") == status and says in r.get("details", ""), r
    (ok,) = call(e.pb, e.socket, "jwt-svid", "--audience", "x", cg=e.cgroup, uid=GRPC_NOBODY)
    assert ok.get("svids"), ok
    e.agent.check_alive()


def test_csi_refuses_a_message_over_64k(grpc_env):
    e = grpc_env
    c = CsiClient(e.csi_socket)
    try:
        code, details = c.code("/csi.v1.Node/NodePublishVolume", bytes(GRPC_MAX_MESSAGE + 1),
                               e.csi.NodePublishVolumeResponse)
        assert code.name == "RESOURCE_EXHAUSTED" and "65536" in details, (code, details)
        info = c.call("/csi.v1.Node/NodeGetInfo", e.csi.NodeGetInfoRequest(), e.csi.NodeGetInfoResponse)
        assert info.node_id
    finally:
        c.close()


def test_unfinished_request_is_reset_after_the_body_deadline(grpc_env):
    e = grpc_env
    s = socket.socket(socket.AF_UNIX)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.connect(e.socket)
        # Headers and half a message, then nothing: within 10 s (the body deadline) the stream
        # is reset with CANCEL (8) and what it held is freed; the connection may stay.
        s.sendall(PREFACE + frame(4, 0, 0, b"") + frame(1, 4, 1, grpc_headers("/SpiffeWorkloadAPI/FetchJWTSVID")) +
                  frame(0, 0, 1, bytes([0, 0, 0, 0, 100]) + bytes(50)))
        t0 = time.monotonic()
        frames = read_frames(s, timeout=T(14), until=lambda fs: any(f[0] == 3 and f[2] == 1 for f in fs))
        resets = [f for f in frames if f[0] == 3 and f[2] == 1]
        assert resets and int.from_bytes(resets[0][3], "big") == 8, frames
        assert time.monotonic() - t0 >= 5
    finally:
        s.close()
    e.agent.check_alive()


def test_an_outsiders_refused_calls_are_paced(grpc_env):
    e = grpc_env
    pid = e.agent.pid
    # Nobody outside any pod: every call is PERMISSION_DENIED, each one attested through /proc.
    p = spawn(e.pb, e.socket, "flood", "--audience", "x", "--streams", "200", "--seconds", "5", "--timeout", "30",
              uid=GRPC_NOBODY)
    try:
        time.sleep(1)
        with open("/proc/%d/stat" % pid) as f:
            c0 = sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])
        t0 = time.monotonic()
        time.sleep(3)
        with open("/proc/%d/stat" % pid) as f:
            c1 = sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])
        used = (c1 - c0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)
        out, _ = p.communicate(timeout=T(60))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    counts = json.loads(out.splitlines()[-1])["counts"]
    print("an outsider's refused calls: %s; agent CPU %.0f%%" % (counts, used * 100))
    assert set(counts) <= {"PERMISSION_DENIED", "DEADLINE_EXCEEDED"}, counts
    # The outsider's calls run at its pace (512 at once, 100 a second), not as fast as it sends.
    assert counts.get("PERMISSION_DENIED", 0) <= 512 + 100 * 8, counts
    assert used < 0.5, "the agent used %.0f%% of a CPU for an outsider's refused calls" % (used * 100)
    assert e.agent.health()["status"] == "ok"


# =============================================================================================
# 8. Dying peers and descriptors (the attacks of test_attest_dying.py and test_fd_limit.py, on
# agents of their own)

@pytest.fixture
def dying_env(agent_factory, pod_cgroups):
    """An identity agent any local process may reach, with pod-a (the attacker's) and pod-b."""
    a = start_local(agent_factory, agent={"socket-mode": "0666"})
    uid_a, uid_b = new_uid(), new_uid()
    a.write_pod("pod-a", identity_pod_object("pod-a", uid_a, sa="a"))
    a.write_pod("pod-b", identity_pod_object("pod-b", uid_b, sa="b"))
    wait_workload(a, "pod-b")
    return a, pod_cgroups(uid_a), pod_cgroups(uid_b)


def test_a_zombies_requests_are_an_outsiders(dying_env):
    a, cg_a, _ = dying_env
    requests = [("GET", "/v1/status", None), ("GET", "/v1/pods", None),
                ("GET", "/v1/identity?pod=default/pod-b", None)]
    answers = run_as_root_in(cg_a, ZOMBIE_HTTP, a.socket, json.dumps(requests), T(20))
    assert [(x["state"], x["status"]) for x in answers] == [("Z", 403)] * len(requests), answers
    workload = os.path.join(a.runtime_dir, "workload.sock")
    got = run_as_root_in(cg_a, ZOMBIE_GRPC, workload, T(10))
    assert got["state"] == "Z", got
    line = wait_until(lambda: re.search(r"Workload API: \S+ refused for pid %d: (.*)" % got["child"],
                                        a.log_text()), 10, desc="the zombie's call refused")
    assert line.group(1).startswith("cannot attest the caller"), line.group(0)
    assert a.health()["status"] == "ok"


@pytest.mark.parametrize("surface", ["api", "workload"])
def test_throwaway_uids_hold_only_the_unattested_count(dying_env, surface):
    a, cg_a, cg_b = dying_env
    path = a.socket if surface == "api" else os.path.join(a.runtime_dir, "workload.sock")
    p, count = hold_throwaway_connections(a, cg_a, path, 42000 if surface == "api" else 42200)
    try:
        wait_until(lambda: count()["closed"] >= N_THROWAWAY - UNATTESTED_CAP, 10, desc="the connections over the cap closed")
        assert count()["open"] <= UNATTESTED_CAP
        family = "pinion_api_connections_rejected_total" if surface == "api" else "pinion_grpc_rejected_total"
        assert rejected(a, family, "unattested") >= N_THROWAWAY - UNATTESTED_CAP
        out = request_child(a.socket, "GET", "/v1/identity", None, 10, preexec_fn=cg_b.preexec(65534))
        assert out.get("status") == 200, out
        assert unix_request(a.socket, "GET", "/v1/health").status == 200
    finally:
        p.stdin.close()
        p.wait(T(10))


def test_pods_within_their_caps_at_a_low_open_file_limit(agent_factory):
    pods_within_caps_at_a_low_limit(agent_factory)
