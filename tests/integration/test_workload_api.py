"""The SPIFFE Workload API (gRPC over HTTP/2 on [identity] workload-socket), driven by an
independent client stack: Debian's python3-grpcio with messages protoc generates from our
proto/workload.proto. Clients run as processes of pods (kubelet-layout cgroups below the test
roots) and find the agent through SPIFFE_ENDPOINT_SOCKET=unix:///... Chains are checked with
python3-cryptography against the bundle FetchX509Bundles hands out."""

import os
import shutil
import socket
import stat
import subprocess
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from identity_testlib import new_uid
from pinion_testlib import make_pod, wait_until
from test_identity import TD, identity_pod, start_local, wait_workload
from workload_api_testlib import (PREFACE, PythonClient, call, der_certs, frame, generate_messages, grpc_headers,
                                  raw_exchange, spawn)

NOBODY = 65534


@pytest.fixture(scope="module")
def pb():
    d = generate_messages()
    yield PythonClient(d)
    shutil.rmtree(d, ignore_errors=True)


def workload_socket(a):
    return os.path.join(a.runtime_dir, "workload.sock")


def start(agent_factory, **identity):
    a = start_local(agent_factory, identity=identity)
    wait_until(lambda: os.path.exists(workload_socket(a)), desc="workload socket")
    return a


def pod_with_identity(a, pod_cgroups, name="web", ns="shop", sa="front"):
    uid = new_uid()
    a.write_pod(name, identity_pod(name, uid, ns=ns, sa=sa))
    wait_workload(a, name)
    return pod_cgroups(uid, hierarchy="pids"), "spiffe://%s/ns/%s/sa/%s" % (TD, ns, sa)


def verify_svid(svid, bundle_der):
    """The leaf's URI SAN is the SPIFFE ID, its key matches, and its chain verifies against the
    bundle (python3-cryptography: signature by signature up to a bundle root)."""
    chain = [x509.load_der_x509_certificate(c) for c in der_certs(bytes.fromhex(svid["x509_svid"]))]
    roots = [x509.load_der_x509_certificate(c) for c in der_certs(bundle_der)]
    leaf = chain[0]
    uris = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.UniformResourceIdentifier)
    assert uris == [svid["spiffe_id"]]
    key = serialization.load_der_private_key(bytes.fromhex(svid["key"]), None)
    assert key.public_key().public_numbers() == leaf.public_key().public_numbers()
    issuers = chain[1:] + roots
    cert = leaf
    for _ in range(len(issuers) + 1):
        parent = next((c for c in issuers if c.subject == cert.issuer), None)
        assert parent is not None, "no issuer for %s in chain and bundle" % cert.subject
        parent.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        if parent in roots:
            return leaf
        cert = parent
    raise AssertionError("chain does not end at a bundle root")


def agent_fds(a):
    return len(os.listdir("/proc/%d/fd" % a.pid))


# ---------------------------------------------------------------------------------------------

def test_socket_is_open_to_everyone_and_beside_the_api_socket(agent_factory):
    a = start(agent_factory)
    st = os.lstat(workload_socket(a))
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666 and st.st_uid == 0


def test_pod_gets_its_svid_that_verifies_against_the_bundles(agent_factory, pod_cgroups, pb):
    a = start(agent_factory)
    cg, spiffe_id = pod_with_identity(a, pod_cgroups)
    other, other_id = pod_with_identity(a, pod_cgroups, name="db", ns="data", sa="pg")

    svid_resp = call(pb, workload_socket(a), "svid", cg=cg, uid=NOBODY)
    assert len(svid_resp) == 1 and "error" not in svid_resp[0], svid_resp
    (svid,) = svid_resp[0]["svids"]
    assert svid["spiffe_id"] == spiffe_id
    print("first FetchX509SVID response %.1f ms after connecting" % (svid_resp[0]["elapsed"] * 1000))
    (bundles,) = call(pb, workload_socket(a), "bundles", cg=cg, uid=NOBODY)
    assert list(bundles["bundles"]) == ["spiffe://" + TD]
    bundle = bytes.fromhex(bundles["bundles"]["spiffe://" + TD])
    assert bytes.fromhex(svid["bundle"]) == bundle
    verify_svid(svid, bundle)
    # The bundle is the CA the HTTP API names too.
    ca = x509.load_pem_x509_certificate(a.get("/v1/identity/bundle").raw.encode())
    assert ca.public_bytes(serialization.Encoding.DER) in der_certs(bundle)

    # Another pod gets its own identity, another key; root inside a pod gets only its pod's.
    (o,) = call(pb, workload_socket(a), "svid", cg=other, uid=0)
    assert o["svids"][0]["spiffe_id"] == other_id
    assert o["svids"][0]["key"] != svid["key"]
    verify_svid(o["svids"][0], bundle)


def test_the_spec_errors(agent_factory, pod_cgroups, pb):
    a = start(agent_factory)
    cg, _ = pod_with_identity(a, pod_cgroups)
    sock = workload_socket(a)
    for op in ("svid", "bundles", "jwt-svid", "jwt-bundles", "validate"):
        (r,) = call(pb, sock, op, "--no-header", cg=cg, uid=NOBODY)
        assert r["error"] == "INVALID_ARGUMENT", (op, r)
        assert "workload.spiffe.io" in r["details"]
    # Without a JWT key on this node the JWT RPCs say so; a bad request is refused before that.
    (r,) = call(pb, sock, "jwt-svid", "--audience", "svc", cg=cg, uid=NOBODY)
    assert r["error"] == "UNAVAILABLE" and "jwt" in r["details"].lower(), r
    (r,) = call(pb, sock, "jwt-svid", cg=cg, uid=NOBODY)
    assert r["error"] == "INVALID_ARGUMENT" and "audience" in r["details"], r
    (r,) = call(pb, sock, "validate", cg=cg, uid=NOBODY)
    assert r["error"] == "INVALID_ARGUMENT", r

    # No identity: an outsider (another user in no pod), the host's root, a pod not annotated,
    # a pod this node does not know.
    plain_uid = new_uid()
    a.write_pod("plain", make_pod("plain", uid=plain_uid))
    a.wait_pod("default", "plain")
    for who, kw in (("outsider", {"uid": NOBODY}), ("host root", {}),
                    ("pod without identity", {"cg": pod_cgroups(plain_uid), "uid": NOBODY}),
                    ("unknown pod", {"cg": pod_cgroups(new_uid()), "uid": NOBODY})):
        for op in ("svid", "bundles", "jwt-svid", "jwt-bundles", "validate"):
            (r,) = call(pb, sock, op, "--audience", "svc", "--token", "x.y.z", **kw)
            assert r["error"] == "PERMISSION_DENIED", (who, op, r)

    # A message of the wrong shape (not a protobuf at all).
    (r,) = call(pb, sock, "svid", "--raw", "ffffffff0f", cg=cg, uid=NOBODY)
    assert r["error"] == "INVALID_ARGUMENT" and "malformed" in r["details"], r
    m = a.metrics()
    assert m.value("pinion_grpc_calls_total", server="workload", method="/SpiffeWorkloadAPI/FetchX509SVID",
                   status="PERMISSION_DENIED") >= 4
    promtool = shutil.which("promtool")
    if promtool:
        r = a.request("GET", "/metrics")
        p = subprocess.run([promtool, "check", "metrics"], input=r.raw, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stdout + p.stderr
    a.check_alive()


def test_rotation_is_pushed_on_an_open_stream(agent_factory, pod_cgroups, pb):
    a = start(agent_factory, **{"workload-cert-lifetime": "10s"})
    cg, spiffe_id = pod_with_identity(a, pod_cgroups)
    t0 = time.time()
    got = call(pb, workload_socket(a), "svid", "--count", 2, "--timeout", 30, cg=cg, uid=NOBODY)
    assert len(got) == 2 and all("svids" in g for g in got), got
    first, second = (g["svids"][0] for g in got)
    assert first["spiffe_id"] == second["spiffe_id"] == spiffe_id
    assert first["x509_svid"] != second["x509_svid"] and first["key"] != second["key"]
    leaf1 = x509.load_der_x509_certificate(der_certs(bytes.fromhex(first["x509_svid"]))[0])
    # Pushed within the renewal window (70-90% of the lifetime), before the first one expired.
    assert got[1]["t"] < leaf1.not_valid_after.timestamp() + 1
    assert got[1]["t"] - t0 < 15
    verify_svid(second, bytes.fromhex(second["bundle"]))


def test_500_concurrent_streams_then_cancelled(agent_factory, pod_cgroups, pb):
    a = start(agent_factory)
    cg, spiffe_id = pod_with_identity(a, pod_cgroups)
    fds = agent_fds(a)
    rss = a.rss_kib()
    p = spawn(pb, workload_socket(a), "many", "--streams", 500, cg=cg, uid=NOBODY)
    try:
        import json
        line = p.stdout.readline()
        assert line, p.stderr.read()[-3000:]
        r = json.loads(line)
        assert r["answered"] == 500 and r["ids"] == [spiffe_id], r
        m = a.metrics()
        assert m.value("pinion_grpc_streams_open", server="workload") == 500
        rss_open = a.rss_kib()
        p.stdin.write("\n")
        p.stdin.flush()
        assert json.loads(p.stdout.readline()) == {"cancelled": 500}
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    wait_until(lambda: a.metrics().value("pinion_grpc_streams_open", server="workload") == 0,
               desc="streams closed")
    wait_until(lambda: agent_fds(a) <= fds, desc="agent fds back to %d" % fds)
    assert a.health()["status"] in ("ok", "healthy", "pass") or a.health()
    a.check_alive()
    print("500 streams answered in %.3fs; agent RSS %d KiB -> %d KiB with them open (%.1f KiB per stream)"
          % (r["seconds"], rss, rss_open, (rss_open - rss) / 500.0))


def test_deadline_exceeded_is_honoured(agent_factory, pod_cgroups, pb):
    a = start(agent_factory)
    cg, _ = pod_with_identity(a, pod_cgroups)
    t0 = time.time()
    got = call(pb, workload_socket(a), "svid", "--count", 5, "--timeout", 1.5, cg=cg, uid=NOBODY)
    assert "svids" in got[0] and got[-1]["error"] == "DEADLINE_EXCEEDED", got
    assert time.time() - t0 < 10
    wait_until(lambda: a.metrics().value("pinion_grpc_streams_open", server="workload") == 0, desc="stream ended")


def test_hostile_input_never_crashes(agent_factory, pod_cgroups, pb):
    a = start(agent_factory)
    cg, _ = pod_with_identity(a, pod_cgroups)
    sock = workload_socket(a)
    fds = agent_fds(a)
    settings = frame(4, 0, 0, b"")
    path = "/SpiffeWorkloadAPI/FetchX509SVID"

    # Not HTTP/2 at all: a GOAWAY and the connection closed.
    frames = raw_exchange(sock, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(4096))
    assert all(f[0] in (4, 7) for f in frames), frames
    # Garbage after a valid preface.
    raw_exchange(sock, PREFACE + settings + os.urandom(8192))
    # A gRPC message announcing 4 GiB: RESOURCE_EXHAUSTED at once, without waiting for the bytes.
    frames = raw_exchange(sock, PREFACE + settings + frame(1, 4, 1, grpc_headers(path)) +
                          frame(0, 0, 1, b"\x00\xff\xff\xff\xff"))
    assert any(f[0] == 1 and f[2] == 1 for f in frames), frames  # response headers and trailers
    # A compressed flag without grpc-encoding, a truncated message, two messages: errors.
    for body in (b"\x01\x00\x00\x00\x00", b"\x00\x00\x00\x00\x09ab", b"\x00\x00\x00\x00\x00" * 2):
        frames = raw_exchange(sock, PREFACE + settings + frame(1, 4, 1, grpc_headers(path)) + frame(0, 1, 1, body))
        assert any(f[0] == 1 and f[2] == 1 for f in frames), frames
    # Not gRPC (another content-type): a plain HTTP status, the agent carries on.
    raw_exchange(sock, PREFACE + settings + frame(1, 5, 1, grpc_headers(path).replace(b"application/grpc",
                                                                                       b"text/plainxxxxxx")))
    # A connection that never sends a request is closed at the header deadline; others go on.
    idle = socket.socket(socket.AF_UNIX)
    idle.connect(sock)
    try:
        (r,) = call(pb, sock, "svid", cg=cg, uid=NOBODY)
        assert "svids" in r, r
    finally:
        idle.close()
    wait_until(lambda: agent_fds(a) <= fds, desc="agent fds back to %d" % fds)
    assert a.metrics().value("pinion_grpc_rejected_total", server="workload", reason="protocol") >= 1
    a.check_alive()


def test_empty_workload_socket_disables_it(agent_factory):
    a = start_local(agent_factory, identity={"workload-socket": ""})
    wait_workload_api_absent = not os.path.exists(workload_socket(a))
    assert wait_workload_api_absent
    a.check_alive()


# One uid outside pods opens more connections than a caller may hold: the ones over the limit
# are closed at once (no SETTINGS from the server), the others are served.
CONNECT_MANY = r"""
import socket, sys
path, n = sys.argv[1], int(sys.argv[2])
socks, served, refused = [], 0, 0
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    try:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed at accept already: one over the limit
    socks.append(s)
for s in socks:
    s.settimeout(5)
    try:
        served += 1 if s.recv(9) else 0
    except (socket.timeout, ConnectionResetError):
        pass
print(served, n - served)
"""


def test_one_caller_cannot_take_every_connection(agent_factory, pod_cgroups, pb):
    import subprocess
    import sys
    a = start(agent_factory)
    cg, _ = pod_with_identity(a, pod_cgroups)

    def run_as_nobody():
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    p = subprocess.run([sys.executable, "-c", CONNECT_MANY, workload_socket(a), "80"], preexec_fn=run_as_nobody,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    served, refused = map(int, p.stdout.split())
    assert (served, refused) == (64, 16), p.stdout
    assert a.metrics().value("pinion_grpc_rejected_total", server="workload", reason="caller-connections") == 16
    # Its connections counted against its uid alone: a pod is served all the same.
    (r,) = call(pb, workload_socket(a), "svid", cg=cg, uid=NOBODY)
    assert "svids" in r, r


def test_stream_ends_when_the_pod_goes(agent_factory, pod_cgroups, pb):
    import json
    a = start(agent_factory)
    uid = new_uid()
    a.write_pod("web", identity_pod("web", uid, ns="shop", sa="front"))
    wait_workload(a, "web")
    cg = pod_cgroups(uid, hierarchy="pids")
    p = spawn(pb, workload_socket(a), "svid", "--count", 2, cg=cg, uid=NOBODY)
    try:
        first = json.loads(p.stdout.readline())
        assert first["svids"][0]["spiffe_id"] == "spiffe://%s/ns/shop/sa/front" % TD, first
        a.remove_pod("web")
        line = p.stdout.readline()
        assert line, p.stderr.read()[-3000:]
        end = json.loads(line)
        assert end["error"] == "PERMISSION_DENIED" and "no longer" in end["details"], end
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_replaced_workload_socket_is_noticed_and_rebound(agent_factory, pod_cgroups, pb):
    """As the local API's (test_api_conn.py): the workload socket moved aside and an impostor
    listening at its path; the agent notices, binds a fresh socket over it, and a grpcio client
    through the path gets its SVID from the agent again."""
    a = start(agent_factory)
    cg, spiffe_id = pod_with_identity(a, pod_cgroups)
    path = workload_socket(a)
    (r,) = call(pb, path, "svid", cg=cg, uid=NOBODY)
    assert r["svids"][0]["spiffe_id"] == spiffe_id, r

    def replaced():
        return a.metrics().value("pinion_grpc_socket_replaced_total", server="workload") or 0

    aside = os.path.join(os.path.dirname(path), "moved-aside.sock")
    staged = os.path.join(os.path.dirname(path), "impostor.sock")
    impostor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.rename(path, aside)
        # Bound under its own name and renamed over the path, so that its inode is known for
        # certain: the agent may already have put a fresh socket at the path, and the rename
        # replaces that one too.
        impostor.bind(staged)
        impostor.listen(16)
        impostor_ino = os.lstat(staged).st_ino
        os.rename(staged, path)
        wait_until(lambda: replaced() >= 1, 5, desc="the agent noticed")
        # A first repair that fails (it logs "retrying") is retried by the 5 s periodic check.
        wait_until(lambda: os.path.exists(path) and os.lstat(path).st_ino != impostor_ino, 12,
                   desc="a fresh socket of the agent's at the path")
        a.wait_log(r"gRPC workload socket %s is no longer ours" % path, timeout=5)
        st = os.lstat(path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666
        started = time.monotonic()
        (r,) = call(pb, path, "svid", cg=cg, uid=NOBODY, timeout=30)
        assert r["svids"][0]["spiffe_id"] == spiffe_id, r
        assert time.monotonic() - started < 10
        # Still ours after a while (the check does not flap), and the agent keeps serving.
        before = replaced()
        time.sleep(1)
        assert replaced() == before
        # The local API's own counter is not touched by it.
        assert (a.metrics().value("pinion_api_socket_replaced_total") or 0) == 0
    finally:
        impostor.close()
        for leftover in (aside, staged):
            if os.path.lexists(leftover):
                os.unlink(leftover)
    a.check_alive()
