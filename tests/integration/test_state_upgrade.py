"""State files across releases (docs/design-notes.md, "State files and versions"): the agent
starts on the state directory the previous release left (tests/fixtures/state-v1, made by
its make-fixture with that release's build after a kill -9 with pods attached) and keeps every
address, the node certificate, the bundle and the registrations; a state file of a newer
release stops it with exit 78, a message naming the file and its version, and the file as it
was."""

import hashlib
import http.server
import json
import os
import subprocess
import threading

import pytest

import upgrade_testlib as U
import zkreg_testlib as zt
from pinion_testlib import log_lines, wait_until
from zkreg_testlib import kz, zk  # noqa: F401 (fixtures)
from podnet_testlib import Netns, cni, pinion_conf, podnet_state_on_disk

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")

FIXTURE = "state-v1"
EX_CONFIG = 78


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


@pytest.fixture
def installed():
    fx = U.install(FIXTURE)
    handler = lambda *a, **kw: Quiet(*a, directory=os.path.join(U.BASE, "bundle"), **kw)  # noqa: E731
    try:
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", U.HTTP_PORT), handler)
    except OSError as e:
        U.remove()
        pytest.skip("port %d (the fixture's bundle URL) is taken: %s" % (U.HTTP_PORT, e))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield fx
    finally:
        httpd.shutdown()
        httpd.server_close()
        U.remove()


@pytest.fixture
def attached(installed):
    """The fixture's pods still attached, as on a node being upgraded: each one's namespace at
    the recorded path with its veth pair, the host end under the recorded name. Without them the
    new agent rightly releases the addresses as gone once they are older than gc-grace."""
    made = []
    try:
        for a in podnet_state_on_disk(os.path.join(U.BASE, "state"))["allocations"]:
            ns = Netns(os.path.basename(a["netns"]))
            made.append(ns)
            subprocess.run(["ip", "link", "add", a["hostIfname"], "type", "veth", "peer", "name", "pod0",
                            "netns", ns.name], check=True, capture_output=True)
        yield installed
    finally:
        for ns in made:
            ns.delete()


def module(a, name):
    return [m for m in a.status()["modules"] if m["name"] == name][0]


def state_path(*p):
    return os.path.join(U.BASE, "state", *p)


def test_previous_release_state_is_kept(attached, agent_factory, zk, kz):
    fx = attached
    a = agent_factory(config=U.agent_config(zk.hosts), node_name="fixture-node", timeout=30)

    # podnet: every address the previous release handed out is still held by its container.
    held = {x["containerID"]: x["ip"] for x in podnet_state_on_disk(os.path.join(U.BASE, "state"))["allocations"]}
    assert held == {p["containerID"]: p["ip"] for p in fx["pods"].values()}, held
    assert module(a, "podnet")["state"] == "running", module(a, "podnet")
    # ... and none of them is handed out again.
    ns = Netns("pinion-upgrade-new")
    try:
        r = cni(a, "ADD", container_id="%064x" % 0xbeef, netns=ns, conf=pinion_conf(a),
                args="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=new;K8S_POD_UID=u-new")
        assert r.rc == 0, r
        assert r.ip().startswith("10.251.77.") and r.ip() not in held.values(), r.ip()
        assert cni(a, "DEL", container_id="%064x" % 0xbeef, netns=ns, conf=pinion_conf(a)).rc == 0
    finally:
        ns.delete()

    # identity: the node certificate is reused, not requested again.
    wait_until(lambda: module(a, "identity")["state"] == "running", timeout=30, desc="identity running")
    node = module(a, "identity")["details"]["node"]
    want = fx["nodeCertificate"]["details"]["node"]
    assert node["serial"] == want["serial"] and node["issued"] == 0, node
    assert "reusing serial %s" % want["serial"] in a.log_text()

    # configsync: the published tree is adopted (last known good, the same version directory).
    cfg = a.get_json("/v1/configs/app")
    assert cfg.get("version") == fx["configVersion"], cfg
    data = os.readlink(os.path.join(U.BASE, "configs", "app", "..data"))
    assert os.path.isdir(os.path.join(U.BASE, "configs", "app", data))
    assert "found version v1" in a.log_text()

    # zkreg: the previous session's file is read (not ignored), and every pod is registered again
    # at the address it had.
    want_eps = sorted("%s:8080" % p["ip"] for p in fx["pods"].values())
    zt.wait_endpoints(kz, U.SERVERSET, want_eps, timeout=30)
    log = a.log_text()
    assert "Ignoring %s" % state_path("zkreg", "session") not in log, log

    # reclaim: the record of the previous release is read and settled (its cgroup is gone).
    assert "recorded cgroup /pinion-fixture-gone/target is gone" in log, log
    assert not os.path.exists(state_path("reclaim", "target.json"))
    assert not os.path.exists(state_path("reclaim", "target.lowered"))

    # Written again by this release, each file carries its version.
    with open(state_path("zkreg", "session")) as f:
        assert f.read().startswith("v2 ")
    # (The reused node credential is written again, with its "format", at its next renewal.)
    assert not os.path.exists(state_path("identity", "node", "..data", "format"))
    with open(state_path("configsync", "app.json")) as f:
        assert json.load(f).get("version") in (None, 1)
    # A healthy start on the previous release's state: nothing to warn about.
    assert not [line for line in log_lines(log) if line.startswith("warning")], log


def _bump_json(path, version=9):
    with open(path) as f:
        o = json.load(f)
    o["version"] = version
    with open(path, "w") as f:
        json.dump(o, f)


def _bump_text(path, version=9):
    with open(path) as f:
        text = f.read()
    if text.startswith("v") and " " in text:
        text = text.split(" ", 1)[1]
    with open(path, "w") as f:
        f.write("v%d %s" % (version, text))


def _newer_snapshot(path):
    with open(path, "w") as f:
        json.dump({"version": 9, "cidr": U.POD_CIDR, "allocations": []}, f)


def _newer_cred(path):
    with open(path, "w") as f:
        f.write("v9\n")


def _newer_drain(path):
    # The previous release had no drain file: a newer one is made from nothing.
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path, "w") as f:
        json.dump({"version": 9, "drained": False}, f)


NEWER = {
    "zkreg-session": (("zkreg", "session"), _bump_text),
    "zkreg-drain": (("zkreg", "drain"), _newer_drain),
    "podnet-allocations": (("podnet", "allocations.json"), _newer_snapshot),
    "configsync-bundle": (("configsync", "app.json"), _bump_json),
    "identity-node": (("identity", "node", "..data", "format"), _newer_cred),
    "reclaim-record": (("reclaim", "target.json"), _bump_json),
    "reclaim-lowered": (("reclaim", "target.lowered"), _bump_text),
}


def _digest_tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for f in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            p = os.path.join(d, f)
            if os.path.islink(p):
                out[p] = "-> " + os.readlink(p)
            else:
                with open(p, "rb") as fh:
                    out[p] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.mark.parametrize("which", sorted(NEWER))
def test_newer_state_is_refused_untouched(installed, agent_factory, which):
    rel, bump = NEWER[which]
    path = state_path(*rel)
    bump(path)
    with open(path, "rb") as f:
        before = f.read()
    st = os.stat(path)
    # The refusing module writes nothing of its own before it refuses (other modules, started
    # earlier, may have rewritten theirs in formats they know).
    own = _digest_tree(state_path(rel[0]))
    # No ZooKeeper listens there: nothing but the files decides.
    a = agent_factory(config=U.agent_config("127.0.0.1:%d" % zt.free_port()), node_name="fixture-node",
                      wait=False)
    rc = a.wait_exit(timeout=30)
    a.expected_exit = True
    a.assert_exit(rc, EX_CONFIG)
    log = a.log_text()
    assert path in log and "version 9" in log, log
    with open(path, "rb") as f:
        assert f.read() == before
    assert os.stat(path).st_mtime_ns == st.st_mtime_ns
    assert _digest_tree(state_path(rel[0])) == own
