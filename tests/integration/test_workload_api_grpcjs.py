"""The SPIFFE Workload API driven by a second, independent client stack: npm's @grpc/grpc-js with
@grpc/proto-loader reading our proto/workload.proto (workload_api_client.js, pinned packages
from tests/integration/grpcjs installed by scripts/npm-deps into a cache outside the tree). The
client runs as a process of a pod, as another user, and finds the agent through
SPIFFE_ENDPOINT_SOCKET=unix:///... What it gets is checked twice: with python3-cryptography, by
the same checks as the python3-grpcio tests, and by the client itself with node's crypto.
Without the npm packages (no cache, no registry) these tests fail: they are never skipped."""

import json
import subprocess
import time

import pytest
from cryptography import x509

from pinion_testlib import wait_until
from test_identity import TD
from test_identity_jwt import TD as JWT_TD
from test_identity_jwt import start_agent, thumbprint, verify_independently
from test_workload_api import NOBODY, agent_fds, pod_with_identity, start, verify_svid, workload_socket
from test_workload_api_jwt import identity_pod as jwt_identity_pod
from test_workload_api_jwt import keys  # noqa: F401 (a fixture)
from workload_api_testlib import NodeClient, call, der_certs, npm_packages, spawn

OPS = ("svid", "bundles", "jwt-svid", "jwt-bundles", "validate")


@pytest.fixture(scope="module")
def js():
    try:
        modules = npm_packages()
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
        pytest.fail("the @grpc/grpc-js client stack is not installed: %s" % e, pytrace=False)
    return NodeClient(modules)


def test_x509_svid_verifies_against_the_bundles(agent_factory, pod_cgroups, js):
    a = start(agent_factory)
    cg, spiffe_id = pod_with_identity(a, pod_cgroups)
    sock = workload_socket(a)

    (r,) = call(js, sock, "svid", cg=cg, uid=NOBODY)
    assert "svids" in r, r
    (svid,) = r["svids"]
    assert svid["spiffe_id"] == spiffe_id
    print("grpc-js: first FetchX509SVID response %.1f ms after connecting" % (r["elapsed"] * 1000))
    (b,) = call(js, sock, "bundles", cg=cg, uid=NOBODY)
    assert list(b["bundles"]) == ["spiffe://" + TD], b
    bundle = bytes.fromhex(b["bundles"]["spiffe://" + TD])
    assert bytes.fromhex(svid["bundle"]) == bundle
    verify_svid(svid, bundle)
    # The same checks in node's own crypto, as a JS workload would make them.
    (v,) = call(js, sock, "verify-svid", cg=cg, uid=NOBODY)
    assert v == {"verified": True, "spiffe_id": spiffe_id}, v

    # Root inside another pod gets that pod's identity and key, nothing of the first one's.
    other, other_id = pod_with_identity(a, pod_cgroups, name="db", ns="data", sa="pg")
    (o,) = call(js, sock, "svid", cg=other, uid=0)
    assert o["svids"][0]["spiffe_id"] == other_id and o["svids"][0]["key"] != svid["key"]
    verify_svid(o["svids"][0], bundle)
    a.check_alive()


def test_jwt_svid_verifies_against_the_jwks_and_validates(agent_factory, pod_cgroups, js, keys):
    key, jwt_dir = keys
    a = start_agent(agent_factory, "node-a", jwt_dir)
    b = start_agent(agent_factory, "node-b", jwt_dir)
    cg_a, id_a = jwt_identity_pod(a, pod_cgroups, "web")
    cg_b, _ = jwt_identity_pod(b, pod_cgroups, "api", sa="back")
    sock_a, sock_b = workload_socket(a), workload_socket(b)

    (r,) = call(js, sock_a, "jwt-svid", "--audience", "svc", "--audience", "other", cg=cg_a, uid=NOBODY)
    assert "svids" in r, r
    (svid,) = r["svids"]
    assert svid["spiffe_id"] == id_a
    (bundles,) = call(js, sock_a, "jwt-bundles", cg=cg_a, uid=NOBODY)
    jwks = bundles["bundles"]["spiffe://" + JWT_TD]
    assert [k["kid"] for k in jwks["keys"]] == [thumbprint(key.public_key())]
    claims = verify_independently(svid["svid"], jwks, "svc")
    assert claims["sub"] == id_a and sorted(claims["aud"]) == ["other", "svc"]
    # Verified in node's crypto against the JWKS it fetches itself; a signature changed by one
    # character, or another audience, is not.
    (v,) = call(js, sock_b, "verify-jwt", "--audience", "svc", "--token", svid["svid"], cg=cg_b, uid=NOBODY)
    assert v == {"verified": True, "sub": id_a, "kid": thumbprint(key.public_key())}, v
    h64, c64, s64 = svid["svid"].split(".")
    forged = "%s.%s.%s" % (h64, c64, s64[:20] + ("A" if s64[20] != "A" else "B") + s64[21:])
    (v,) = call(js, sock_b, "verify-jwt", "--audience", "svc", "--token", forged, cg=cg_b, uid=NOBODY)
    assert v == {"verified": False, "reason": "bad signature"}, v
    (v,) = call(js, sock_b, "verify-jwt", "--audience", "nope", "--token", svid["svid"], cg=cg_b, uid=NOBODY)
    assert v == {"verified": False, "reason": "audience"}, v

    # Validated by the other node's agent; the claims come back as a Struct.
    (v,) = call(js, sock_b, "validate", "--audience", "svc", "--token", svid["svid"], cg=cg_b, uid=NOBODY)
    assert v.get("spiffe_id") == id_a, v
    assert v["claims"]["sub"] == id_a and "svc" in v["claims"]["aud"] and v["claims"]["exp"] > time.time(), v
    # Another audience: refused with the spec's code.
    (v,) = call(js, sock_b, "validate", "--audience", "nope", "--token", svid["svid"], cg=cg_b, uid=NOBODY)
    assert v["error"] == "INVALID_ARGUMENT" and "aud" in v["details"], v
    a.check_alive()
    b.check_alive()


def test_the_spec_errors(agent_factory, pod_cgroups, js):
    a = start(agent_factory)
    cg, _ = pod_with_identity(a, pod_cgroups)
    sock = workload_socket(a)
    for op in OPS:
        (r,) = call(js, sock, op, "--no-header", "--audience", "svc", "--token", "x.y.z", cg=cg, uid=NOBODY)
        assert r["error"] == "INVALID_ARGUMENT" and "workload.spiffe.io" in r["details"], (op, r)
    # An outsider (another user, in no pod) has no identity.
    for op in OPS:
        (r,) = call(js, sock, op, "--audience", "svc", "--token", "x.y.z", uid=NOBODY)
        assert r["error"] == "PERMISSION_DENIED", (op, r)
    a.check_alive()


def test_rotation_is_pushed_on_an_open_stream(agent_factory, pod_cgroups, js):
    a = start(agent_factory, **{"workload-cert-lifetime": "10s"})
    cg, spiffe_id = pod_with_identity(a, pod_cgroups)
    t0 = time.time()
    got = call(js, workload_socket(a), "svid", "--count", 2, "--timeout", 30, cg=cg, uid=NOBODY)
    assert len(got) == 2 and all("svids" in g for g in got), got
    first, second = (g["svids"][0] for g in got)
    assert first["spiffe_id"] == second["spiffe_id"] == spiffe_id
    assert first["x509_svid"] != second["x509_svid"] and first["key"] != second["key"]
    leaf1 = x509.load_der_x509_certificate(der_certs(bytes.fromhex(first["x509_svid"]))[0])
    # Pushed within the renewal window, before the first certificate expired.
    assert got[1]["t"] < leaf1.not_valid_after.timestamp() + 1, (got[1]["t"], leaf1.not_valid_after)
    assert got[1]["t"] - t0 < 15
    verify_svid(second, bytes.fromhex(second["bundle"]))


def test_500_concurrent_streams_then_cancelled(agent_factory, pod_cgroups, js):
    a = start(agent_factory)
    cg, spiffe_id = pod_with_identity(a, pod_cgroups)
    fds = agent_fds(a)
    rss = a.rss_kib()
    p = spawn(js, workload_socket(a), "many", "--streams", 500, cg=cg, uid=NOBODY)
    try:
        line = p.stdout.readline()
        assert line, p.stderr.read()[-3000:]
        r = json.loads(line)
        assert r["answered"] == 500 and r["ids"] == [spiffe_id], r
        assert a.metrics().value("pinion_grpc_streams_open", server="workload") == 500
        rss_open = a.rss_kib()
        p.stdin.write("\n")
        p.stdin.flush()
        assert json.loads(p.stdout.readline()) == {"cancelled": 500}
        assert p.wait(30) == 0, p.stderr.read()[-3000:]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    wait_until(lambda: a.metrics().value("pinion_grpc_streams_open", server="workload") == 0, desc="streams closed")
    wait_until(lambda: agent_fds(a) <= fds, desc="agent fds back to %d" % fds)
    (r2,) = call(js, workload_socket(a), "svid", cg=cg, uid=NOBODY)  # still serving
    assert r2["svids"][0]["spiffe_id"] == spiffe_id, r2
    a.check_alive()
    print("grpc-js: 500 streams answered in %.3fs; agent RSS %d KiB -> %d KiB with them open (%.1f KiB per stream)"
          % (r["seconds"], rss, rss_open, (rss_open - rss) / 500.0))

