# SPDX-License-Identifier: MIT
"""No secret in any log line, across modules. One agent, every module enabled, log level debug,
doing the real work that handles secrets:

  apiserver   the bearer token (fake apiserver over TLS), then a rotated token the agent does
              not have yet (401s), then the new one in the token file
  identity    cfssl as the CA with its authsign HMAC key; the node key, the node CA key, a
              pod's key (fetched by a process in the pod's cgroup, and on disk)
  configsync  a bundle behind HTTP basic auth on real nginx, the credentials in the URL's
              userinfo; a second config with a wrong password (401s)
  zkreg       a real ZooKeeper registration (zkreg has no ZooKeeper auth: no credential exists)
  podnet, reclaim  enabled and running (they handle no secret)

Every secret value the test knows (and the forms it travels in: base64 of user:password, the
base64 lines of each private key) must appear nowhere in the agent's whole log (stderr), its
stdout, any pinionctl output (human and --json) but a pod's own identity, /metrics, the API's
answers to privileged callers and its error bodies; no "PRIVATE KEY" block in the log either."""

import base64
import os
import subprocess
import sys
import tempfile
import uuid

import pytest

from pinion_testlib import SRCDIR, make_pod, wait_until
import configsync_testlib as cs
import podnet_testlib as pt
import zkreg_testlib as zt
from configsync_testlib import test_ca  # noqa: F401 (fixture)
from identity_testlib import AUTH_KEY, CfsslServer, PodCgroup, request_from
from zkreg_testlib import kz, zk  # noqa: F401 (fixtures)

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver  # noqa: E402

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="ZooKeeper (Debian zookeeper) is not installed")

USER = "cfg-user"


def key_fragments(pem):
    """The base64 lines of a PEM private key: any one of them in a log is a leak."""
    lines = [l.strip() for l in pem.splitlines() if l.strip() and not l.startswith("-----")]
    assert lines, pem
    return [l for l in lines if len(l) >= 16]


@pytest.fixture
def private_nginx(test_ca):  # noqa: F811
    """nginx whose /private/ needs HTTP basic auth as USER with a random password."""
    d = tempfile.mkdtemp(prefix="secrets-nginx-")
    os.chmod(d, 0o755)
    password = "pw-" + uuid.uuid4().hex
    hashed = subprocess.run(["openssl", "passwd", "-apr1", password], capture_output=True, text=True,
                            check=True).stdout.strip()
    users = os.path.join(d, "htpasswd")
    with open(users, "w") as f:
        f.write("%s:%s\n" % (USER, hashed))
    n = cs.Nginx(d, test_ca, extra_locations='        location /private/ { auth_basic "pinion"; '
                                              'auth_basic_user_file %s; }' % users)
    n.password = password
    try:
        yield n
    finally:
        n.stop()
        subprocess.run(["rm", "-rf", d])


def with_userinfo(url, password):
    return url.replace("https://", "https://%s:%s@" % (USER, password), 1)


@pytest.mark.parametrize("signer", ["cfssl", "kubernetes"])
def test_no_secret_in_logs_output_metrics_or_errors(signer, agent_factory, zk, kz, private_nginx, test_ca, tmp_dir):
    """signer cfssl: the authsign key and the node CA key; kubernetes: the bootstrap token (the
    apiserver token here) through the CSR API, and the local CA's key in ca-dir."""
    nginx = private_nginx
    token_a, token_b = "tok-a-" + uuid.uuid4().hex, "tok-b-" + uuid.uuid4().hex
    wrong_password = "wrong-" + uuid.uuid4().hex
    fake = FakeApiserver(tls=True, token=token_a).start()
    cfssl = CfsslServer()
    pod_uid = str(uuid.uuid4())
    cg = PodCgroup(pod_uid)
    try:
        cfssl.start()
        token_file = os.path.join(tmp_dir, "token")
        with open(token_file, "w") as f:
            f.write(token_a + "\n")
        cs.write_bundle(os.path.join(nginx.root, "private"), "app", {"app.yaml": b"greeting: hi\n"}, "v1")
        manifest = nginx.url("private/app/manifest.json")
        pod_tls = os.path.join(tmp_dir, "pod-tls")
        ca_dir = os.path.join(tmp_dir, "ca")
        if signer == "cfssl":
            identity = dict(cfssl.config(), **{"pod-tls-dir": pod_tls})
        else:
            identity = {"signer": "kubernetes", "trust-domain": "secrets.test", "bootstrap-token-file": token_file,
                        "ca-dir": ca_dir, "pod-tls-dir": pod_tls}
        a = agent_factory(config={
            "agent": {"socket-mode": "0666", "log-level": "debug"},
            "apiserver": {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
                          "backoff-initial": "100ms", "backoff-max": "1s"},
            "identity": identity,
            "config.app": cs.config_section(with_userinfo(manifest, nginx.password),
                                            os.path.join(tmp_dir, "configs", "app"), test_ca),
            "config.bad": cs.config_section(with_userinfo(manifest, wrong_password),
                                            os.path.join(tmp_dir, "configs", "bad"), test_ca),
            "zookeeper": {"servers": zk.hosts, "session-timeout": "4s"},
            "network": {"pod-cidr": pt.free_pod_cidr()},
            "reclaim.none": {"cgroup": "/pinion-secrets-missing-%d" % os.getpid()},
        }, timeout=30)
        a.write_pod("web", make_pod("web", uid=pod_uid, annotations={
            "pinion.io/serverset": "/pinion-secrets-%d/web" % os.getpid(), "pinion.io/port": "http",
            "pinion.io/configs": "app", "pinion.io/identity": "true"}))

        if signer == "kubernetes":  # the node's CSR, made with the bootstrap token, approved
            (csr, _), = wait_until(lambda: fake.csrs() or None, 20, desc="the node's CSR").items()
            fake.approve_csr(csr)

        # The real work: the bundle through basic auth, certificates from the CA, the registration.
        wait_until(lambda: a.get_json("/v1/configs/app")["present"], 30, desc="app synced through basic auth")
        wait_until(lambda: a.get_json("/v1/configs/bad")["last_error_kind"] == "http", 30,
                   desc="bad fails with the wrong password")
        assert "401" in a.get_json("/v1/configs/bad")["last_error"]
        # The URL is shown with its password redacted (the user and the rest as configured).
        assert a.get_json("/v1/configs/app")["url"] == with_userinfo(manifest, "redacted")
        wait_until(lambda: [r["state"] for r in a.get_json("/v1/registrations")["registrations"]] == ["registered"], 30,
                   desc="web registered")
        wait_until(lambda: a.get_json("/v1/identity")["node"].get("state") == "valid", 30,
                   desc="the node certificate issued")
        status, own = request_from(cg, a.socket, "/v1/identity", uid=65534)
        assert status == 200 and "PRIVATE KEY" in own["private_key"], (status, own)

        # The apiserver's token rotates: 401s until the token file has the new one.
        fake.set_token(token_b)
        fake.close_watches()
        wait_until(lambda: fake.count(status=401) >= 1, 20, desc="a 401 for the old token")
        with open(token_file + ".new", "w") as f:
            f.write(token_b + "\n")
        os.rename(token_file + ".new", token_file)
        wait_until(lambda: [m for m in a.status()["modules"] if m["name"] == "apiserver"][0]["state"] == "running",
                   20, desc="apiserver running with the new token")

        # Every secret the test knows, and the forms they travel in.
        overview = a.get_json("/v1/identity")
        with open(overview["node"]["keyFile"]) as f:
            node_key = f.read()
        if signer == "cfssl":
            with open(overview["nodeCA"]["keyFile"]) as f:
                ca_key = f.read()
        else:
            with open(os.path.join(ca_dir, "ca.key")) as f:
                ca_key = f.read()
        with open(os.path.join(pod_tls, pod_uid, "key.pem")) as f:
            pod_key_file = f.read()
        assert pod_key_file == own["private_key"]
        secrets = {"apiserver token": token_a, "rotated apiserver token": token_b,
                   "configsync password": nginx.password, "wrong configsync password": wrong_password,
                   "basic auth header": base64.b64encode(("%s:%s" % (USER, nginx.password)).encode()).decode(),
                   "wrong basic auth header": base64.b64encode(("%s:%s" % (USER, wrong_password)).encode()).decode(),
                   }
        if signer == "cfssl":
            secrets["cfssl auth key"] = AUTH_KEY
        for name, pem in (("node key", node_key), ("CA key", ca_key), ("pod key", own["private_key"])):
            for i, frag in enumerate(key_fragments(pem)):
                secrets["%s line %d" % (name, i + 1)] = frag

        # Where they must not be.
        places = {}
        for path in ("/v1/health", "/v1/status", "/v1/pods", "/v1/identity", "/v1/configs", "/v1/configs/app",
                     "/v1/configs/bad", "/v1/registrations", "/v1/reclaim", "/metrics", "/v1/identity?pod=default/web"):
            places["GET " + path] = a.get(path).raw
        # Error bodies, as root and as others.
        for method, path in (("GET", "/v1/configs/nope"), ("GET", "/v1/pods/default/nope"),
                             ("POST", "/v1/configs/nope/refresh"), ("GET", "/v1/identity?pod=default/nope"),
                             ("GET", "/v1/configs/app?wait=bogus"), ("GET", "/nope")):
            r = a.request(method, path)
            assert r.status >= 400, (path, r)
            places["%s %s -> %d" % (method, path, r.status)] = r.raw
        for path in ("/v1/configs/app", "/v1/configs", "/v1/identity", "/v1/status", "/metrics"):
            r = a.request("GET", path, as_uid=65534)
            places["GET %s as nobody -> %d" % (path, r.status)] = r.raw
        r = a.request("POST", "/v1/cni", body={"command": "ADD", "config": {"cniVersion": "1.1.0"}})
        places["POST /v1/cni (bad) -> %d" % r.status] = r.raw
        for cmd in ("health", "status", "pods", "identity", "configs", "registrations", "reclaim", "metrics"):
            for args in ((cmd,), ("--json", cmd)):
                res = a.ctl(*args)
                places["pinionctl " + " ".join(args)] = res.stdout + res.stderr
        res = a.ctl("wait-config", "bad", "--timeout", "1")
        places["pinionctl wait-config bad"] = res.stdout + res.stderr
        assert res.rc == 1, res

        a.stop()
        places["the agent's log (stderr)"] = a.log_text(since_start=False)
        with open(a.stdout_file, errors="replace") as f:
            places["the agent's stdout"] = f.read()
        assert "Listing and watching" in places["the agent's log (stderr)"]  # the log is the debug log

        leaks = ["%s in %s" % (sname, pname) for pname, text in places.items()
                 for sname, value in secrets.items() if value in text]
        assert leaks == [], "secrets leaked:\n" + "\n".join(leaks)
        for pname, text in places.items():
            assert "PRIVATE KEY" not in text, "a private key in %s" % pname
        print("secrets: %d values checked in %d places, log %d bytes" % (
            len(secrets), len(places), len(places["the agent's log (stderr)"])))
    finally:
        cg.close()
        cfssl.close()
        fake.stop()
