# SPDX-License-Identifier: MIT
"""JWT-SVIDs across two agents of one trust domain: each has its own local CA (the X.509 side is
not what makes tokens portable), both read the same trust-domain JWT key file. A pod on agent A
gets a token; agent B validates it; wrong audience, expiry, a foreign key and a forged kid are
refused; a key rotation (new public key published first, then the private key switched) keeps
old tokens valid until the old key is retired. Every token and JWKS is also checked here with
python3-cryptography, independently of the agent's code, and tokens forged here validate there."""

import base64
import hashlib
import json
import os
import time

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from identity_testlib import new_uid
from pinion_testlib import make_pod, request_child, wait_until

TD = "jwt.test"


def b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def new_key():
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def pub_pem(key):
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def thumbprint(pub):
    """RFC 7638, computed here from the key, not from what the agent says."""
    n = pub.public_numbers()
    canon = '{"crv":"P-256","kty":"EC","x":"%s","y":"%s"}' % (b64u(n.x.to_bytes(32, "big")), b64u(n.y.to_bytes(32, "big")))
    return b64u(hashlib.sha256(canon.encode()).digest())


# P-256's group order: (r, s) and (r, N - s) are both valid ECDSA signatures of one message.
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def signature_s(token):
    return int.from_bytes(unb64u(token.rsplit(".", 1)[1])[32:], "big")


def with_flipped_s(token):
    """The token's twin: its signature's s replaced by N - s (still a valid ECDSA signature)."""
    head, s64 = token.rsplit(".", 1)
    raw = unb64u(s64)
    return head + "." + b64u(raw[:32] + (P256_N - int.from_bytes(raw[32:], "big")).to_bytes(32, "big"))


def forge(key, claims, kid=None, alg="ES256", high_s=False):
    """A token signed here; its s is the low one of its two spellings, as pinion mints (high_s:
    the other one)."""
    header = {"alg": alg, "kid": kid or thumbprint(key.public_key()), "typ": "JWT"}
    signing_input = b64u(json.dumps(header).encode()) + "." + b64u(json.dumps(claims).encode())
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    if (s > P256_N // 2) != high_s:
        s = P256_N - s
    return signing_input + "." + b64u(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def verify_independently(token, jwks, audience):
    """Checks token against jwks with python3-cryptography alone; returns the claims."""
    h64, c64, s64 = token.split(".")
    header, claims, sig = json.loads(unb64u(h64)), json.loads(unb64u(c64)), unb64u(s64)
    assert header["alg"] == "ES256" and header["typ"] == "JWT", header
    keys = {k["kid"]: k for k in jwks["keys"]}
    jwk = keys[header["kid"]]
    assert jwk["kty"] == "EC" and jwk["crv"] == "P-256" and jwk["use"] == "jwt-svid" and "d" not in jwk
    pub = ec.EllipticCurvePublicNumbers(int.from_bytes(unb64u(jwk["x"]), "big"), int.from_bytes(unb64u(jwk["y"]), "big"),
                                        ec.SECP256R1()).public_key()
    assert thumbprint(pub) == header["kid"]
    assert len(sig) == 64
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    pub.verify(der, (h64 + "." + c64).encode(), ec.ECDSA(hashes.SHA256()))  # raises if bad
    assert audience in claims["aud"] and claims["exp"] > time.time()
    return claims


def write_secret(path, data, mode=0o600):
    """Replaced by rename, as a config bundle or any file distribution does."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def start_agent(agent_factory, name, jwt_dir, **identity):
    a = agent_factory(start=False, node_name=name)
    ident = {"signer": "local", "trust-domain": TD, "ca-dir": os.path.join(a.dir, "ca"),
             "pod-tls-dir": os.path.join(a.dir, "pods-tls"),
             "jwt-key-file": os.path.join(jwt_dir, "jwt.key"), "jwt-bundle-file": os.path.join(jwt_dir, "jwt-bundle")}
    ident.update(identity)
    a.sections["identity"] = {k: v for k, v in ident.items() if v is not None}
    a.agent_keys.update({"socket-mode": "0666"})
    a.write_config()
    a.start()
    return a


def post(a, path, body, cg=None):
    out = request_child(a.socket, "POST", path, body, 10,
                        **({"preexec_fn": cg.preexec(65534)} if cg else {}))
    assert "oserror" not in out, out
    try:
        return out["status"], json.loads(out["body"])
    except ValueError:
        return out["status"], out["body"]


def validate(a, token, audience):
    return post(a, "/v1/identity/jwt/validate", {"token": token, "audience": audience})


def jwt_status(a):
    return {m["name"]: m for m in a.status()["modules"]}["identity"]["details"]["jwt"]


def bundle(a):
    return a.get_json("/v1/identity/jwt-bundle")


def kids(a):
    return [k["kid"] for k in bundle(a)["keys"]]


def test_two_agents_share_the_trust_domain_key(agent_factory, tmp_path, pod_cgroups):
    jwt_dir = str(tmp_path)
    key1, key2, stranger = new_key(), new_key(), new_key()
    kid1, kid2 = thumbprint(key1.public_key()), thumbprint(key2.public_key())
    write_secret(os.path.join(jwt_dir, "jwt.key"), key_pem(key1))
    write_secret(os.path.join(jwt_dir, "jwt-bundle"), b"{\"keys\": []}", 0o644)
    a = start_agent(agent_factory, "node-a", jwt_dir)
    b = start_agent(agent_factory, "node-b", jwt_dir)
    assert kids(a) == [kid1] and kids(b) == [kid1]
    assert jwt_status(a)["signingKid"] == kid1

    uid = new_uid()
    a.write_pod("web", make_pod("web", namespace="shop", uid=uid, service_account="web", ip="10.1.2.3",
                                annotations={"pinion.io/identity": "true"}))
    cg = pod_cgroups(uid)
    spiffe = "spiffe://%s/ns/shop/sa/web" % TD

    def mint(audience=("svc",)):
        status, body = post(a, "/v1/identity/jwt", {"audience": list(audience)}, cg)
        return body if status == 200 else None
    got = wait_until(mint, 15, desc="a token for the pod")
    assert got["spiffe_id"] == spiffe
    t1 = got["token"]
    claims = verify_independently(t1, bundle(b), "svc")
    assert claims["sub"] == spiffe and claims["aud"] == ["svc"]
    assert claims["exp"] - claims["iat"] == 300  # jwt-svid-lifetime's default, 5m
    assert abs(claims["iat"] - time.time()) < 5
    # Minted with the low s, always; its high-s twin verifies here all the same.
    tokens = [t1] + [mint()["token"] for _ in range(20)]
    assert all(signature_s(t) <= P256_N // 2 for t in tokens), [hex(signature_s(t)) for t in tokens]
    twin = with_flipped_s(t1)
    assert verify_independently(twin, bundle(b), "svc") == claims

    # Agent B, another node with its own CA, validates it; a pod on B could as well (public).
    status, body = validate(b, t1, "svc")
    assert status == 200 and body["spiffe_id"] == spiffe and body["claims"]["sub"] == spiffe, body
    out = request_child(b.socket, "POST", "/v1/identity/jwt/validate", {"token": t1, "audience": "svc"}, 10,
                        user=65534, group=65534, extra_groups=[])
    assert out["status"] == 200, out

    # Refused: the wrong audience, an expired token, a key outside the bundle, a forged kid,
    # a signature of another algorithm's name.
    for token, audience, why in (
            (t1, "other", "audience"),
            (forge(key1, {"sub": spiffe, "aud": ["svc"], "exp": int(time.time()) - 120}), "svc", "expired"),
            (forge(stranger, {"sub": spiffe, "aud": ["svc"], "exp": int(time.time()) + 60}), "svc", "unknown kid"),
            (forge(stranger, {"sub": spiffe, "aud": ["svc"], "exp": int(time.time()) + 60}, kid=kid1), "svc", "bad signature"),
            (forge(key1, {"sub": spiffe, "aud": ["svc"], "exp": int(time.time()) + 60}, alg="none"), "svc", "algorithm"),
            (forge(key1, {"sub": "spiffe://other.test/x", "aud": "svc", "exp": int(time.time()) + 60}), "svc", "trust domain"),
            (twin, "svc", "high-s"),
            (forge(key1, {"sub": spiffe, "aud": "svc", "exp": int(time.time()) + 60}, high_s=True), "svc", "high-s"),
            (t1[:-3], "svc", "")):
        status, body = validate(b, token, audience)
        assert status == 401 and why in body["error"], (why, status, body)
    # A token made here with the trust domain's key is as good as the agent's own.
    status, body = validate(b, forge(key1, {"sub": spiffe, "aud": "svc", "exp": int(time.time()) + 60}), "svc")
    assert status == 200 and body["spiffe_id"] == spiffe, body

    # A pod asks for itself only; root names the pod; an outsider gets nothing.
    status, body = post(a, "/v1/identity/jwt", {"audience": "svc", "pod": "shop/web"}, cg)
    assert status == 403, body
    status, body = post(a, "/v1/identity/jwt", {"audience": "svc", "pod": "shop/web"})
    assert status == 200 and body["spiffe_id"] == spiffe, body
    status, body = post(a, "/v1/identity/jwt", {"audience": "svc"})
    assert status == 400 and "pod" in body["error"], body
    status, body = post(a, "/v1/identity/jwt", {"audience": []}, cg)
    assert status == 400, body
    out = request_child(a.socket, "POST", "/v1/identity/jwt", {"audience": "svc", "pod": "shop/web"}, 10,
                        user=65534, group=65534, extra_groups=[])
    assert out["status"] == 403, out

    # Rotation, step 1: the new public key is published everywhere (the bundle file); the old
    # key still signs. Both agents pick the file up without a reload.
    write_secret(os.path.join(jwt_dir, "jwt-bundle"), pub_pem(key2), 0o644)
    wait_until(lambda: kids(a) == [kid1, kid2] and kids(b) == [kid1, kid2], 10, desc="key2 published")
    assert validate(b, t1, "svc")[0] == 200
    # Step 2: the private key is switched; the old public key stays published until the last
    # token it signed has expired.
    write_secret(os.path.join(jwt_dir, "jwt-bundle"), pub_pem(key1) + pub_pem(key2), 0o644)
    write_secret(os.path.join(jwt_dir, "jwt.key"), key_pem(key2))
    wait_until(lambda: kids(a)[0] == kid2 and kids(b)[0] == kid2, 10, desc="key2 signs")
    assert sorted(kids(b)) == sorted([kid1, kid2])
    t2 = mint()["token"]
    assert json.loads(unb64u(t2.split(".")[0]))["kid"] == kid2
    verify_independently(t2, bundle(b), "svc")
    assert validate(b, t2, "svc")[0] == 200
    assert validate(b, t1, "svc")[0] == 200, "a token of the old key before its expiry"
    # Step 3: the old key retired: its tokens are refused.
    write_secret(os.path.join(jwt_dir, "jwt-bundle"), pub_pem(key2), 0o644)
    wait_until(lambda: kids(b) == [kid2], 10, desc="key1 retired")
    status, body = validate(b, t1, "svc")
    assert status == 401 and "unknown kid" in body["error"], body
    assert validate(b, t2, "svc")[0] == 200

    # A broken key file keeps the key that was loaded, and says why.
    write_secret(os.path.join(jwt_dir, "jwt.key"), b"not a key")
    wait_until(lambda: jwt_status(a)["error"], 10, desc="the error shown")
    assert kids(a)[0] == kid2 and mint() is not None
    # Nothing of the private keys reaches the log.
    for k in (key1, key2):
        for line in key_pem(k).decode().splitlines()[1:-1]:
            assert line not in a.log_text() and line not in b.log_text()


def test_without_a_key_jwt_routes_say_so(agent_factory, tmp_path):
    a = start_agent(agent_factory, "node-c", str(tmp_path), **{"jwt-key-file": None, "jwt-bundle-file": None})
    r = a.get("/v1/identity/jwt-bundle")
    assert r.status == 503 and "not configured" in r.body["error"], r.raw
    status, body = post(a, "/v1/identity/jwt/validate", {"token": "a.b.c", "audience": "svc"})
    assert status == 503 and "not configured" in body["error"], body
    # Configured on reload, no restart: a bundle file alone validates but does not mint.
    other = new_key()
    write_secret(str(tmp_path / "pub.pem"), pub_pem(other), 0o644)
    a.sections["identity"]["jwt-bundle-file"] = str(tmp_path / "pub.pem")
    a.write_config()
    a.sighup()
    wait_until(lambda: a.get("/v1/identity/jwt-bundle").status == 200, 10, desc="the bundle file loaded")
    assert kids(a) == [thumbprint(other.public_key())]
    assert jwt_status(a)["signingKid"] is None
    spiffe = "spiffe://%s/ns/x/sa/y" % TD
    status, body = validate(a, forge(other, {"sub": spiffe, "aud": "svc", "exp": int(time.time()) + 60}), "svc")
    assert status == 200 and body["spiffe_id"] == spiffe, body
    a.write_pod("p", make_pod("p", namespace="x", uid=new_uid(), service_account="y",
                              annotations={"pinion.io/identity": "true"}))
    r = wait_until(lambda: (lambda r: r if r.status != 404 else None)(
        a.request("POST", "/v1/identity/jwt", body={"audience": "svc", "pod": "x/p"})), 10, desc="the pod known")
    assert r.status == 503 and "no JWT signing key" in r.body["error"], r.raw


def test_a_key_readable_by_others_is_refused(agent_factory, tmp_path):
    key = new_key()
    write_secret(str(tmp_path / "jwt.key"), key_pem(key), 0o644)
    a = start_agent(agent_factory, "node-d", str(tmp_path), **{"jwt-bundle-file": None})
    r = a.get("/v1/identity/jwt-bundle")
    assert r.status == 503 and "group or others" in r.body["error"], r.raw
    # Fixed in place: picked up without a restart.
    os.chmod(str(tmp_path / "jwt.key"), 0o600)
    wait_until(lambda: a.get("/v1/identity/jwt-bundle").status == 200, 10, desc="the key loaded")
    assert kids(a) == [thumbprint(key.public_key())]


@pytest.mark.parametrize("text, reason", [
    ("jwt-svid-lifetime=1s", "jwt-svid-lifetime must be between 10s and 24h"),
    ("jwt-svid-lifetime=48h", "jwt-svid-lifetime must be between 10s and 24h"),
])
def test_bad_jwt_config_is_refused(agent_factory, text, reason):
    a = agent_factory(extra="[identity]\nsigner=local\ntrust-domain=%s\nca-dir=/tmp/x\n%s\n" % (TD, text), start=False)
    rc, out, err = a.check_config()
    assert rc == 78, (rc, out, err)
    assert reason in err, err
