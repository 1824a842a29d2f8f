"""The Workload API's JWT RPCs (FetchJWTSVID, FetchJWTBundles, ValidateJWTSVID) over gRPC, driven
by Debian's python3-grpcio from pod processes: a JWT-SVID minted on one agent verifies against the
JWKS that FetchJWTBundles hands out (checked here with python3-cryptography alone) and validates
on a second agent of the same trust domain; the JWKS stream gets a new response when the keys
change."""

import json
import os

import pytest

from identity_testlib import new_uid
from pinion_testlib import wait_until
from test_identity_jwt import TD, forge, key_pem, new_key, pub_pem, start_agent, thumbprint, verify_independently, \
    with_flipped_s, write_secret
from test_workload_api import pb, workload_socket as sock  # noqa: F401 (pb: a fixture)
from workload_api_testlib import call, spawn

NOBODY = 65534


def identity_pod(a, pod_cgroups, name, ns="shop", sa="front"):
    uid = new_uid()
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "uid": uid, "annotations": {"pinion.io/identity": "true"}},
           "spec": {"serviceAccountName": sa, "containers": [{"name": "c", "image": "x"}]},
           "status": {"phase": "Running", "podIP": "10.9.0.%d" % (len(name) + 2),
                      "conditions": [{"type": "Ready", "status": "True"}]}}
    a.write_pod(name, pod)
    wait_until(lambda: any(w.get("name") == name and w.get("id") for w in
                           a.get_json("/v1/identity")["workloads"]), desc="identity of " + name)
    wait_until(lambda: os.path.exists(sock(a)), desc="workload socket")
    return pod_cgroups(uid, hierarchy="pids"), "spiffe://%s/ns/%s/sa/%s" % (TD, ns, sa)


@pytest.fixture
def keys(tmp_path):
    key = new_key()
    write_secret(str(tmp_path / "jwt.key"), key_pem(key))
    write_secret(str(tmp_path / "jwt-bundle"), b'{"keys": []}', 0o644)
    return key, str(tmp_path)


def test_jwt_svid_verifies_against_the_jwks_and_validates_on_another_agent(agent_factory, pod_cgroups, pb, keys):
    key, jwt_dir = keys
    a = start_agent(agent_factory, "node-a", jwt_dir)
    b = start_agent(agent_factory, "node-b", jwt_dir)
    cg_a, id_a = identity_pod(a, pod_cgroups, "web")
    cg_b, _ = identity_pod(b, pod_cgroups, "api", sa="back")

    (r,) = call(pb, sock(a), "jwt-svid", "--audience", "svc", "--audience", "other", cg=cg_a, uid=NOBODY)
    assert "svids" in r, r
    (svid,) = r["svids"]
    assert svid["spiffe_id"] == id_a
    (bundles,) = call(pb, sock(a), "jwt-bundles", cg=cg_a, uid=NOBODY)
    jwks = bundles["bundles"]["spiffe://" + TD]
    assert [k["kid"] for k in jwks["keys"]] == [thumbprint(key.public_key())]
    claims = verify_independently(svid["svid"], jwks, "svc")
    assert claims["sub"] == id_a and sorted(claims["aud"]) == ["other", "svc"]

    # Node B's pod validates node A's token through its own agent.
    (v,) = call(pb, sock(b), "validate", "--audience", "svc", "--token", svid["svid"], cg=cg_b, uid=NOBODY)
    assert v["spiffe_id"] == id_a, v
    assert v["claims"]["sub"] == id_a and "svc" in v["claims"]["aud"] and v["claims"]["exp"] > 0, v

    # Refused: another audience, a token of a key not in the bundle, garbage; the spec's code.
    (v,) = call(pb, sock(b), "validate", "--audience", "nope", "--token", svid["svid"], cg=cg_b, uid=NOBODY)
    assert v["error"] == "INVALID_ARGUMENT" and "aud" in v["details"], v
    stranger = forge(new_key(), {"sub": id_a, "aud": ["svc"], "exp": 4102444800, "iat": 1700000000})
    (v,) = call(pb, sock(b), "validate", "--audience", "svc", "--token", stranger, cg=cg_b, uid=NOBODY)
    assert v["error"] == "INVALID_ARGUMENT", v
    (v,) = call(pb, sock(b), "validate", "--audience", "svc", "--token", "a.b.c", cg=cg_b, uid=NOBODY)
    assert v["error"] == "INVALID_ARGUMENT", v
    # The token's high-s twin (s -> n-s: a valid ECDSA signature too) is not the token.
    (v,) = call(pb, sock(b), "validate", "--audience", "svc", "--token", with_flipped_s(svid["svid"]), cg=cg_b, uid=NOBODY)
    assert v["error"] == "INVALID_ARGUMENT" and "high-s" in v["details"], v

    # A pod asks for another SPIFFE ID than its own: none of its business.
    (r,) = call(pb, sock(a), "jwt-svid", "--audience", "svc", "--spiffe-id", "spiffe://%s/ns/x/sa/y" % TD,
                cg=cg_a, uid=NOBODY)
    assert r["error"] == "PERMISSION_DENIED", r
    # Root inside the pod gets the pod's token, nothing more.
    (r,) = call(pb, sock(a), "jwt-svid", "--audience", "svc", cg=cg_a, uid=0)
    assert r["svids"][0]["spiffe_id"] == id_a
    a.check_alive()
    b.check_alive()


def test_jwt_bundles_stream_pushes_a_key_change(agent_factory, pod_cgroups, pb, keys):
    key, jwt_dir = keys
    a = start_agent(agent_factory, "node-a", jwt_dir)
    cg, _ = identity_pod(a, pod_cgroups, "web")
    p = spawn(pb, sock(a), "jwt-bundles", "--count", "2", "--timeout", "60", cg=cg, uid=NOBODY)
    try:
        first = json.loads(p.stdout.readline())
        assert [k["kid"] for k in first["bundles"]["spiffe://" + TD]["keys"]] == [thumbprint(key.public_key())]
        # The next key is published (the first step of a rotation): the open stream hears it.
        nxt = new_key()
        write_secret(os.path.join(jwt_dir, "jwt-bundle"), pub_pem(nxt), 0o644)
        second = json.loads(p.stdout.readline())
        kids = sorted(k["kid"] for k in second["bundles"]["spiffe://" + TD]["keys"])
        assert kids == sorted([thumbprint(key.public_key()), thumbprint(nxt.public_key())]), second
        assert second["t"] > first["t"]
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    a.check_alive()
