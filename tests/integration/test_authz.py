# SPDX-License-Identifier: MIT
"""The local API's authorization as a matrix: every route the agent serves x six principals
(root; a member of socket-group; a process in pod-a's cgroup; root in pod-a's cgroup; a process
in pod-b's cgroup asking about pod-a; an outsider; root in a systemd service with an identity,
[service.web]), against one agent with every module enabled (apiserver against the
test apiserver, identity with the local CA, configsync against real nginx, zkreg against a real
ZooKeeper, podnet with a real network namespace, reclaim on a real v1 memory cgroup).

The expected matrix is the table in docs/api.md ("Authorization"), parsed here; the routes the
agent serves are read from the route tables in the sources (every `struct api_route` row), and
the two must cover each other, so a new route cannot escape the matrix. Each cell is one request
from a real process with the principal's credentials (SO_PEERCRED, cgroup). Denied requests must
answer 403 and change nothing (a denied refresh fetches nothing, a denied drain drains nothing, a
denied CNI DEL unwires nothing); allowed mutating requests are run with their real effect.

Then the attacks on attestation and privilege, each refused: a host user's own cgroup named for
another pod; root in a pod acting as the host; a process in a pod's cgroup but in none of its
listed containers; and the agent's own pod (a DaemonSet) keeping root's `kubectl exec`."""

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest

from pinion_testlib import (POD_CGROUP_TOP, SERVICE_CGROUP_ROOT, SRCDIR, acl_entries, make_pod, new_container_id, pod_cgroup_path,
                            remove_cgroup_tree, request_child, run_piniond, unix_request, wait_until)
import configsync_testlib as cs
import podnet_testlib as pt
import reclaim_testlib as rt
import zkreg_testlib as zt
from identity_testlib import PodCgroup, ServiceCgroup
from configsync_testlib import nginx, test_ca  # noqa: F401 (fixtures)
from zkreg_testlib import kz, zk  # noqa: F401 (fixtures)
from podnet_testlib import netns  # noqa: F401 (fixture)

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver  # noqa: E402

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="ZooKeeper (Debian zookeeper) is not installed")

PRINCIPALS = ["root", "group", "pod", "root in pod", "other pod", "outsider", "root in service"]
SERVICE_UNIT = "authz-web.service"
SOCKET_GROUP = "games"                  # an existing group no other test uses
GROUP_UID, POD_A_UID, POD_B_UID, OUTSIDER_UID = 40104, 40101, 40102, 40103
SERVERSET = "/pinion-authz-%d" % os.getpid()


# ---- the expected matrix (docs/api.md) and the served routes (the sources) ----

def doc_matrix():
    """[(method, request, {principal: "200" | "200 own" | "403" ...})] from docs/api.md."""
    with open(os.path.join(SRCDIR, "docs", "api.md")) as f:
        text = f.read()
    section = text.split("\n## Authorization\n", 1)
    assert len(section) == 2, "docs/api.md has no '## Authorization' section"
    rows = []
    for line in section[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 + len(PRINCIPALS) or not re.fullmatch(r"[A-Z]+", cells[0]):
            continue
        assert cells[1].startswith("`") and cells[1].endswith("`"), line
        expect = dict(zip(PRINCIPALS, cells[2:]))
        for p, e in expect.items():
            assert re.fullmatch(r"\d{3}( own)?", e), "bad cell %r for %s in %r" % (e, p, line)
        rows.append((cells[0], cells[1].strip("`"), expect))
    assert rows, "the Authorization table in docs/api.md is empty"
    return rows


ROUTE_ROW = re.compile(r'\{\s*"(GET|POST|PUT|PATCH|DELETE|HEAD)"\s*,\s*"(/[^"]*)"\s*,')


def source_routes():
    """{(method, pattern)} of every row of every route table in agent/ and modules/."""
    routes = set()
    for top in ("agent", "modules"):
        for dirpath, _, files in os.walk(os.path.join(SRCDIR, top)):
            for name in files:
                if name.endswith(".c"):
                    with open(os.path.join(dirpath, name)) as f:
                        text = f.read()
                    routes |= set(ROUTE_ROW.findall(text))
                    # A row spelled with designated initializers would escape the parser.
                    assert not re.search(r"\.pattern\s*=", text), "%s: write route rows positionally" % name
    return routes


def pattern_matches(pattern, request):
    path = request.split("?", 1)[0].strip("/").split("/")
    pat = pattern.strip("/").split("/")
    return len(path) == len(pat) and all(p == "{}" or p == s for p, s in zip(pat, path))


def test_the_matrix_covers_every_served_route():
    """Every route table row of the sources has a row in the matrix and every matrix row is a
    route the sources serve: a route added without its authorization written down fails here."""
    served = source_routes()
    assert len(served) >= 15, served  # the parser still finds the tables
    rows = doc_matrix()
    covered = set()
    for method, request, _ in rows:
        hits = {(m, p) for m, p in served if m == method and pattern_matches(p, request)}
        assert len(hits) == 1, "matrix row %s %s matches %s of the served routes" % (method, request, hits)
        covered |= hits
    assert served - covered == set(), "routes served but missing from the matrix in docs/api.md"


# ---- principals: real processes with the principal's credentials ----

class Principal:
    def __init__(self, name, uid=None, groups=(), cgroup=None, gid=None):
        self.name, self.uid, self.groups, self.cgroup, self.gid = name, uid, list(groups), cgroup, gid

    def _preexec(self):
        uid, gid, groups, cg = self.uid, self.gid, self.groups, self.cgroup

        def fn():
            if cg is not None:  # into the pod's cgroup first, while still root
                with open(os.path.join(cg.path, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            if uid is not None:
                os.setgroups(groups)
                os.setgid(gid if gid is not None else uid)
                os.setuid(uid)
        return fn

    def request(self, socket_path, method, url, body=None):
        """(status, parsed body or text, raw); raises OSError if it cannot connect."""
        out = request_child(socket_path, method, url, body, 30, preexec_fn=self._preexec())
        if "oserror" in out:
            raise OSError(out["oserror"], "%s: %s" % (self.name, out["message"]))
        raw = out["body"]
        try:
            parsed = json.loads(raw) if "json" in out["headers"].get("content-type", "") else raw
        except ValueError:
            parsed = raw
        return out["status"], parsed, raw


def group_gid():
    import grp
    return grp.getgrnam(SOCKET_GROUP).gr_gid


# ---- the world: one agent, every module ----

class World:
    pass


@pytest.fixture
def world(agent_factory, zk, kz, nginx, test_ca, netns, tmp_dir):  # noqa: F811
    w = World()
    w.kz = kz
    w.nginx = nginx
    cleanups = []
    try:
        w.uid_a, w.uid_b = str(uuid.uuid4()), str(uuid.uuid4())
        w.cg_a, w.cg_b = PodCgroup(w.uid_a), PodCgroup(w.uid_b)
        cleanups += [w.cg_a.close, w.cg_b.close]
        w.cg_service = ServiceCgroup(SERVICE_UNIT)
        cleanups.append(w.cg_service.close)
        fake = FakeApiserver(tls=True, token="authz-token").start()
        cleanups.append(fake.stop)
        token_file = os.path.join(tmp_dir, "token")
        with open(token_file, "w") as f:
            f.write("authz-token\n")
        ca_dir = tempfile.mkdtemp(prefix="authz-ca-")
        cleanups.append(lambda: shutil.rmtree(ca_dir, ignore_errors=True))
        memcg = None
        if rt.v1_available():
            memcg = rt.MemCgroup("/pinion-authz-%d" % os.getpid()).create(limit=64 * rt.MiB)
            cleanups.append(memcg.remove)
        jwt_key = os.path.join(tmp_dir, "jwt.key")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-out", jwt_key], check=True, capture_output=True)
        os.chmod(jwt_key, 0o600)
        for name in ("a", "b"):
            cs.write_bundle(nginx.root, name, {"%s.yaml" % name: b"config %s\n" % name.encode()}, "v1")
        config = {
            "agent": {"socket-mode": "0666", "socket-group": SOCKET_GROUP,
                      "service-cgroup-roots": SERVICE_CGROUP_ROOT},
            "service.web": {"unit": SERVICE_UNIT},
            "apiserver": {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
                          "backoff-initial": "100ms", "backoff-max": "1s"},
            "identity": {"signer": "local", "trust-domain": "authz.test", "ca-dir": ca_dir,
                         "pod-tls-dir": os.path.join(tmp_dir, "pod-tls"), "jwt-key-file": jwt_key},
            "zookeeper": {"servers": zk.hosts, "session-timeout": "4s", "drain-delay": "10m"},
            "network": {"pod-cidr": pt.free_pod_cidr()},
            "reclaim.authz": {"cgroup": memcg.name if memcg else "/pinion-authz-missing-%d" % os.getpid()},
            "csi": {"enable": "yes", "socket": os.path.join(tmp_dir, "kubelet", "plugins", "csi.sock"),
                    "registration-dir": os.path.join(tmp_dir, "kubelet", "registry"),
                    "pods-root": os.path.join(tmp_dir, "kubelet", "pods")},
        }
        for name in ("a", "b"):
            config["config." + name] = cs.config_section(nginx.url("%s/manifest.json" % name),
                                                         os.path.join(tmp_dir, "configs", name), test_ca)
        a = agent_factory(config=config, timeout=30)
        for name, uid in (("a", w.uid_a), ("b", w.uid_b)):
            a.write_pod("pod-" + name, make_pod("pod-" + name, uid=uid, service_account="sa-" + name, annotations={
                "pinion.io/serverset": "%s/%s" % (SERVERSET, name), "pinion.io/port": "http",
                "pinion.io/configs": name, "pinion.io/identity": "true"}))
        w.agent = a
        w.netns = netns()
        gid = group_gid()
        w.principals = {
            "root": Principal("root"),
            "group": Principal("group", GROUP_UID, groups=[gid]),
            "pod": Principal("pod", POD_A_UID, cgroup=w.cg_a),
            "root in pod": Principal("root in pod", cgroup=w.cg_a),
            "other pod": Principal("other pod", POD_B_UID, cgroup=w.cg_b),
            "outsider": Principal("outsider", OUTSIDER_UID),
            "root in service": Principal("root in service", cgroup=w.cg_service),
        }
        # Every module running and both pods registered (their configs present, identities issued).
        wait_until(lambda: all(m["state"] == "running" for m in a.status()["modules"]), 30,
                   desc="every module running: %s" % [(m["name"], m["state"], m["reason"])
                                                      for m in a.status()["modules"]])
        wait_until(lambda: sorted(r["state"] for r in registrations(a)) == ["registered", "registered"], 30,
                   desc="both pods registered")
        r = a.request("POST", "/v1/identity/jwt", body={"audience": "authz", "pod": "default/pod-a"})
        assert r.status == 200, r.raw
        w.jwt_token = r.body["token"]
        yield w
    finally:
        for fn in reversed(cleanups):
            fn()


def registrations(agent):
    return agent.get_json("/v1/registrations")["registrations"]


def root_get(w, path):
    return w.agent.get_json(path)


# ---- what "own" means, and the effects of the mutating routes ----

def pods_of(entries, key):
    return sorted(e[key] for e in entries)


def check_allowed_body(w, request, principal, body, raw, own):
    """The content of an allowed answer: a pod sees its own entries only; privileged callers see
    all, never a private key."""
    me = {"pod": "a", "root in pod": "a", "other pod": "b"}.get(principal)
    if request == "/v1/identity":
        if own and principal == "root in service":
            assert body["id"] == "spiffe://authz.test/service/authz-web", body["id"]
            assert "PRIVATE KEY" in body["private_key"]
        elif own:
            assert body["id"] == "spiffe://authz.test/ns/default/sa/sa-" + me, body["id"]
            assert "PRIVATE KEY" in body["private_key"]
        else:
            assert "PRIVATE KEY" not in raw
            assert sorted(x.get("service") or x["name"] for x in body["workloads"]) == ["authz-web.service", "pod-a",
                                                                                          "pod-b"]
    elif request == "/v1/configs":
        assert pods_of(body["configs"], "name") == ([me] if own else ["a", "b"]), body
        assert ("pods" in body) == (not own), body
    elif request == "/v1/registrations":
        assert pods_of(body["registrations"], "pod") == (["default/pod-" + me] if own
                                                         else ["default/pod-a", "default/pod-b"]), body
    elif request == "/v1/pods/default/pod-a":
        assert body["uid"] == w.uid_a
    elif request == "/v1/configs/a":
        assert body["name"] == "a" and body["present"] is True
    elif request == "/v1/pods?watch=1":
        assert json.loads(raw)["type"] == "ADDED"
    elif request == "/v1/identity/bundle":
        assert "BEGIN CERTIFICATE" in raw
    elif request == "/metrics":
        assert "pinion_build_info" in raw
    elif request == "/v1/identity/jwt" and principal == "root in service":
        # the service's own token
        assert body["spiffe_id"] == "spiffe://authz.test/service/authz-web", body
    elif request in ("/v1/identity/jwt", "/v1/identity/jwt/validate"):
        # pod-a's token: the pod's own, or the one root named, or the one being validated.
        assert body["spiffe_id"] == "spiffe://authz.test/ns/default/sa/sa-a", body
    elif request == "/v1/identity/jwt-bundle":
        assert body["keys"][0]["use"] == "jwt-svid" and "d" not in body["keys"][0], body
    else:
        assert own is False


def fetches(w, name):
    return root_get(w, "/v1/configs/" + name)["fetches"]


def config_idle(w, name, after):
    c = root_get(w, "/v1/configs/" + name)
    return c["fetches"] > after and c["state"] == "synced"


def drained(w):
    return w.agent.get_json("/v1/registrations")["drained"]


def member_status(w, name):
    ms = zt.members(w.kz, "%s/%s" % (SERVERSET, name))
    return [m["status"] for m in ms.values()]


def set_drained(w, want):
    if drained(w) != want:
        assert w.agent.request("POST", "/v1/registrations/" + ("drain" if want else "undrain")).status == 200
    if want:
        wait_until(lambda: member_status(w, "a") == ["STOPPING"], 20, desc="pod-a's member STOPPING")
    else:
        wait_until(lambda: member_status(w, "a") == ["ALIVE"], 20, desc="pod-a's member ALIVE")


class Effects:
    """Per mutating request: prepare(), the body to send as each principal, and the checks
    that the request took effect (allowed) or left everything as it was (denied)."""

    def __init__(self, w):
        self.w = w
        self.cid = "authz%d" % os.getpid()

    def prepare(self, request, principal):
        w = self.w
        if request == "/v1/configs/a/refresh":
            self.before = fetches(w, "a")
        elif request == "/v1/registrations/drain":
            set_drained(w, False)
        elif request == "/v1/registrations/undrain":
            set_drained(w, True)
        elif request == "/v1/cni":
            self.before = self.allocations()

    def body(self, request, principal):
        if request == "/v1/identity/jwt":
            # Privileged callers name the pod; a pod asks for itself; the other pod names pod-a.
            named = principal in ("root", "group", "other pod")
            return dict({"audience": ["authz"]}, **({"pod": "default/pod-a"} if named else {}))
        if request == "/v1/identity/jwt/validate":
            return {"token": self.w.jwt_token, "audience": "authz"}
        if request != "/v1/cni":
            return None
        # root wires pod-a's namespace for real; everyone after root tries to unwire it.
        return {"command": "ADD" if principal == "root" else "DEL", "containerID": self.cid,
                "netns": self.w.netns.path, "ifname": "eth0",
                "args": pt.k8s_args("default", "pod-a", self.w.uid_a),
                "config": {"cniVersion": "1.1.0", "name": "pinion", "type": "pinion-cni"}}

    def allocations(self):
        return [x for x in pt.podnet_status(self.w.agent)["details"]["pool"]["allocations"]
                if x["containerID"] == self.cid]

    def check(self, request, principal, allowed, body):
        w = self.w
        if request == "/v1/configs/a/refresh":
            if allowed:
                wait_until(lambda: config_idle(w, "a", self.before), 20, desc="the refresh fetched")
            else:
                # A barrier: refresh b as root and wait for it; a queued refresh of a would have
                # run by then too.
                b0 = fetches(w, "b")
                assert w.agent.request("POST", "/v1/configs/b/refresh").status == 202
                wait_until(lambda: config_idle(w, "b", b0), 20, desc="b refreshed")
                assert fetches(w, "a") == self.before, "a denied refresh fetched"
        elif request == "/v1/registrations/drain":
            if allowed:
                assert drained(w) is True
                wait_until(lambda: member_status(w, "a") == ["STOPPING"], 20, desc="drained member STOPPING")
            else:
                assert drained(w) is False and member_status(w, "a") == ["ALIVE"], "a denied drain drained"
        elif request == "/v1/registrations/undrain":
            if allowed:
                assert drained(w) is False
                wait_until(lambda: member_status(w, "a") == ["ALIVE"], 20, desc="undrained member ALIVE")
            else:
                assert drained(w) is True and member_status(w, "a") == ["STOPPING"], "a denied undrain undrained"
        elif request == "/v1/cni":
            now = self.allocations()
            if allowed:  # root's ADD: one allocation, an address inside the pod's namespace
                assert len(now) == 1, now
                ip = body["result"]["ips"][0]["address"].split("/")[0]
                assert ip in w.netns.run("ip", "-4", "addr", "show", "eth0").stdout
            else:
                assert now == self.before and len(now) == 1, "a denied CNI DEL unwired the pod"
                assert w.netns.run("ip", "link", "show", "eth0", check=False).returncode == 0

    def cleanup(self):
        """Undrains and unwires pod-a (root's CNI DEL really unwires it)."""
        w = self.w
        set_drained(w, False)
        r = unix_request(w.agent.socket, "POST", "/v1/cni", body=self.body("/v1/cni", "outsider"))
        assert r.status == 200, r
        assert self.allocations() == []


def check_beyond_the_table(w):
    """The rules around the table (docs/api.md), on the same agent."""
    sock = w.agent.socket
    # A known path with the other method: 405, even for an outsider, before authorization.
    for method, pattern in sorted(source_routes()):
        path = pattern.replace("{}/{}", "default/pod-a").replace("{}", "a")
        other = "POST" if method == "GET" else "GET"
        status, body, raw = w.principals["outsider"].request(sock, other, path)
        assert status == 405, (other, path, raw)
    assert drained(w) is False
    # A process in a pod this node does not have is no pod, nor the host: what pods may read it
    # may not, and as root not what the host may.
    cg = PodCgroup(str(uuid.uuid4()))
    try:
        for stranger in (Principal("unknown pod", POD_A_UID, cgroup=cg), Principal("root in unknown pod", cgroup=cg)):
            for path in ("/v1/identity", "/v1/configs", "/v1/configs/a", "/v1/registrations", "/v1/status"):
                status, body, raw = stranger.request(sock, "GET", path)
                assert status == 403, (stranger.name, path, raw)
    finally:
        cg.close()


MUTATING = {"/v1/configs/a/refresh", "/v1/registrations/drain", "/v1/registrations/undrain", "/v1/cni"}


def test_authorization_matrix(world):
    w = world
    effects = Effects(w)
    cells = []
    try:
        for method, request, expect in doc_matrix():
            for principal in PRINCIPALS:
                want = expect[principal]
                status_want, own = int(want.split()[0]), want.endswith(" own")
                if request in MUTATING:
                    effects.prepare(request, principal)
                body_sent = effects.body(request, principal)
                status, body, raw = w.principals[principal].request(w.agent.socket, method, request, body_sent)
                what = "%s %s as %s" % (method, request, principal)
                assert status == status_want, "%s: %d, the matrix says %s: %s" % (what, status, want, raw[:300])
                allowed = status < 400
                if not allowed:
                    assert body == {"error": body["error"], "code": status}, "%s: %r" % (what, raw)
                else:
                    check_allowed_body(w, request, principal, body, raw, own)
                if request in MUTATING:
                    effects.check(request, principal, allowed, body)
                cells.append((method, request, principal, status))
        effects.cleanup()
    except BaseException:
        try:
            effects.cleanup()
        except Exception:
            pass
        raise
    check_beyond_the_table(w)
    # The agent survived all of it, and every cell of the table was run.
    assert w.agent.health()["status"] == "ok"
    assert len(cells) == len(doc_matrix()) * len(PRINCIPALS)
    print("authz matrix: %d cells, %d allowed, %d denied" % (
        len(cells), sum(1 for c in cells if c[3] < 400), sum(1 for c in cells if c[3] >= 400)))


def test_default_socket_mode_keeps_pods_and_outsiders_out(agent_factory, tmp_dir):
    """With socket-mode 0660 (the default) only root and socket-group can connect at all: a pod's
    non-root process and an outsider get EACCES from connect(), before any route is asked."""
    uid = str(uuid.uuid4())
    cg = PodCgroup(uid)
    try:
        a = agent_factory(config={"agent": {"socket-group": SOCKET_GROUP}})
        a.write_pod("pod-a", make_pod("pod-a", uid=uid))
        a.wait_pod("default", "pod-a")
        st = os.stat(a.socket)
        # The socket stays root's; the group is let in by an ACL entry with the mode's group bits.
        assert oct(st.st_mode & 0o777) == "0o660" and (st.st_uid, st.st_gid) == (0, 0)
        assert acl_entries(a.socket)[("group", group_gid())] == 6
        assert Principal("root").request(a.socket, "GET", "/v1/status")[0] == 200
        assert Principal("group", GROUP_UID, groups=[group_gid()]).request(a.socket, "GET", "/v1/status")[0] == 200
        for p in (Principal("pod", POD_A_UID, cgroup=cg), Principal("outsider", OUTSIDER_UID)):
            with pytest.raises(OSError) as e:
                p.request(a.socket, "GET", "/v1/health")
            assert e.value.errno == errno.EACCES, e.value
    finally:
        cg.close()


def test_socket_group_is_read_at_reload_and_counts_as_primary_or_supplementary(agent_factory):
    """socket-group as a primary or a supplementary group makes a caller privileged; removed by
    a reload (SIGHUP), it no longer does (for new connections)."""
    gid = group_gid()
    a = agent_factory(config={"agent": {"socket-mode": "0666", "socket-group": SOCKET_GROUP}})
    supplementary = Principal("group", GROUP_UID, groups=[gid])
    primary = Principal("group (primary)", GROUP_UID, gid=gid)
    for p in (supplementary, primary):
        assert p.request(a.socket, "GET", "/v1/status")[0] == 200, p.name
    assert acl_entries(a.socket)[("group", gid)] == 6
    reloads = a.status()["config"]["reloads"]
    a.write_config(agent={"socket-group": None})
    a.sighup()
    wait_until(lambda: a.status()["config"]["reloads"] > reloads, 10, desc="the reload")
    for p in (supplementary, primary):
        status, body, raw = p.request(a.socket, "GET", "/v1/status")
        assert status == 403, (p.name, raw)
    # Its ACL entry went with it: the mode alone again.
    assert acl_entries(a.socket) == {}


# ---- the attacks on attestation and privilege ----

HOST_USER_UID = 40105


class DelegatedCgroup:
    """A host user's delegated cgroup subtree, as systemd gives every user@UID.service one: a
    directory owned by the user (outside the pod roots), where the user makes what cgroups it
    likes and moves its own processes. In the pids hierarchy, below this test's own top."""

    def __init__(self, uid):
        self.uid = uid
        self.base = "/sys/fs/cgroup/pids"
        if not os.path.isdir(self.base):
            pytest.skip("no cgroup v1 pids hierarchy")
        self.rel = "/%s/user.slice/user-%d.slice/user@%d.service" % (POD_CGROUP_TOP, uid, uid)
        self.path = os.path.join(self.base, self.rel.lstrip("/"))
        os.makedirs(self.path)
        for name in ("", "cgroup.procs", "tasks"):
            os.chown(os.path.join(self.path, name), uid, uid)

    def principal(self, sub):
        """A process of the user that makes sub in its subtree and moves itself there, as the user
        (no privilege of root's is used for it)."""
        uid, path = self.uid, os.path.join(self.path, sub)

        class Spoofer(Principal):
            def _preexec(self):
                def fn():
                    os.setgroups([])
                    os.setgid(uid)
                    os.setuid(uid)
                    os.makedirs(path, exist_ok=True)
                    with open(os.path.join(path, "cgroup.procs"), "w") as f:
                        f.write(str(os.getpid()))
                return fn
        return Spoofer("host user in %s" % sub, uid)

    def close(self):
        remove_cgroup_tree(self.base, self.rel)


def test_a_host_users_cgroup_named_for_a_pod_is_no_pod(world):
    """A non-root host user makes a cgroup named for pod-b in its delegated subtree (in each of
    the kubelet's spellings, even the whole kubepods layout below its own directory) and asks
    as pod-b: no identity, no key, no configs, no registrations."""
    w = world
    d = DelegatedCgroup(HOST_USER_UID)
    cid = new_container_id()
    try:
        for sub in ("pod" + w.uid_b,
                    "kubepods/besteffort/pod%s/%s" % (w.uid_b, cid),
                    "kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope" % (w.uid_b.replace("-", "_"), cid)):
            p = d.principal(sub)
            for path in ("/v1/identity", "/v1/configs", "/v1/registrations"):
                status, body, raw = p.request(w.agent.socket, "GET", path)
                assert status == 403, (sub, path, raw[:300])
                assert "PRIVATE KEY" not in raw and "sa-b" not in raw, (sub, path)
    finally:
        d.close()
    # pod-b itself still gets its own.
    status, body, raw = w.principals["other pod"].request(w.agent.socket, "GET", "/v1/identity")
    assert status == 200 and body["id"] == "spiffe://authz.test/ns/default/sa/sa-b", raw[:300]


def pod_b_state(w):
    """What pod-b's IP and identity are, as root on the host sees them."""
    pod = root_get(w, "/v1/pods/default/pod-b")
    ident = root_get(w, "/v1/identity?pod=default/pod-b")
    assert ident["serial"] and ident["sans"], ident
    return pod["ips"], ident["serial"], ident["sans"], ident["generation"]


def test_root_in_a_pod_is_that_pod(world):
    """A container running as root is its pod, not the host: it lists no pods, reads no status,
    drains nothing, and cannot rewrite another pod's IP through POST /v1/cni; it still gets its
    own pod's identity."""
    w = world
    sock = w.agent.socket
    root_in_a = w.principals["root in pod"]
    before = pod_b_state(w)
    cid = "attack%d" % os.getpid()
    add_b = {"command": "ADD", "containerID": cid, "netns": w.netns.path, "ifname": "eth0",
             "args": pt.k8s_args("default", "pod-b", w.uid_b),
             "config": {"cniVersion": "1.1.0", "name": "pinion", "type": "pinion-cni"}}
    try:
        status, answer, raw = root_in_a.request(sock, "POST", "/v1/cni", add_b)
        assert status == 403 and pod_b_state(w) == before, (raw[:300], before, pod_b_state(w))
        for method, path in (("POST", "/v1/registrations/drain"), ("GET", "/v1/pods"), ("GET", "/v1/status"),
                             ("GET", "/v1/identity?pod=default/pod-b")):
            status, answer, raw = root_in_a.request(sock, method, path)
            assert status == 403, (method, path, raw[:300])
        assert drained(w) is False and member_status(w, "a") == ["ALIVE"] and member_status(w, "b") == ["ALIVE"]
        assert [x for x in pt.podnet_status(w.agent)["details"]["pool"]["allocations"] if x["containerID"] == cid] == []
        assert pod_b_state(w) == before
    finally:
        # Had it been let through: undo it (the host's root may).
        set_drained(w, False)
        unix_request(sock, "POST", "/v1/cni", body=dict(add_b, command="DEL"))
    status, body, raw = root_in_a.request(sock, "GET", "/v1/identity")
    assert status == 200 and body["id"] == "spiffe://authz.test/ns/default/sa/sa-a", raw[:300]
    assert "PRIVATE KEY" in body["private_key"]


class PodCgroupAt:
    """pod uid's own cgroup (no container), made by the kubelet as the pod's parent: exists as
    long as some container's cgroup of the pod does."""

    def __init__(self, uid, container_id):
        self.path = os.path.join("/sys/fs/cgroup/pids", pod_cgroup_path(uid, container_id).lstrip("/"))
        assert os.path.isdir(self.path), self.path


def test_only_the_containers_the_status_lists_speak_for_their_pod(world):
    """Once pod-a's status lists its containers, a process in pod-a's cgroup but in another
    container's (or in the pod's own) is nobody; the listed container still is pod-a."""
    w = world
    sock = w.agent.socket
    pod = make_pod("pod-a", uid=w.uid_a, service_account="sa-a", annotations={
        "pinion.io/serverset": "%s/a" % SERVERSET, "pinion.io/port": "http",
        "pinion.io/configs": "a", "pinion.io/identity": "true"})
    pod["status"]["containerStatuses"] = [{"name": "main", "containerID": "containerd://" + w.cg_a.container_id}]
    pod["status"]["initContainerStatuses"] = [{"name": "init", "containerID": "containerd://" + new_container_id()}]
    w.agent.write_pod("pod-a", pod)
    # Until the store has the new status the pod's own cgroup still speaks for it: a barrier.
    in_pod_cgroup = Principal("pod cgroup", POD_A_UID, cgroup=PodCgroupAt(w.uid_a, None))
    wait_until(lambda: in_pod_cgroup.request(sock, "GET", "/v1/identity")[0] == 403, 20,
               desc="pod-a's listed containers in the store")
    unlisted = PodCgroup(w.uid_a)  # pod-a's cgroup, a container the status does not list
    try:
        for name, cg in (("unlisted container", unlisted), ("pod cgroup", PodCgroupAt(w.uid_a, None))):
            for uid in (POD_A_UID, None):
                p = Principal("%s as %s" % (name, uid or "root"), uid, cgroup=cg)
                for path in ("/v1/identity", "/v1/configs", "/v1/registrations", "/v1/status"):
                    status, body, raw = p.request(sock, "GET", path)
                    assert status == 403, (p.name, path, raw[:300])
                    assert "PRIVATE KEY" not in raw
    finally:
        unlisted.close()
    status, body, raw = w.principals["pod"].request(sock, "GET", "/v1/identity")
    assert status == 200 and body["id"] == "spiffe://authz.test/ns/default/sa/sa-a", raw[:300]


def test_the_agents_own_pod_keeps_roots_exec(agent_factory):
    """piniond run as a DaemonSet pod: root in the agent's own pod (kubectl exec) is the host's
    root; root in any other pod is not."""
    own_uid, other_uid = str(uuid.uuid4()), str(uuid.uuid4())
    own, other = PodCgroup(own_uid), PodCgroup(other_uid)
    try:
        a = agent_factory(config={"agent": {"socket-mode": "0666"}}, start=False)
        a.cgroup = own.path
        a.write_pod("other", make_pod("other", uid=other_uid))
        a.start()
        a.wait_pod("default", "other")
        for path in ("/v1/status", "/v1/pods"):
            status, body, raw = Principal("root in another pod", cgroup=other).request(a.socket, "GET", path)
            assert status == 403, (path, raw[:300])
            status, body, raw = Principal("root in the agent's pod", cgroup=own).request(a.socket, "GET", path)
            assert status == 200, (path, raw[:300])
        assert "piniond runs in pod %s" % own_uid in a.log_text()
        # Not root there: not privileged either.
        status, body, raw = Principal("user in the agent's pod", OUTSIDER_UID, cgroup=own).request(a.socket, "GET", "/v1/status")
        assert status == 403, raw[:300]
        a.assert_exit(a.sigterm())
    finally:
        own.close()
        other.close()


def test_pod_cgroup_roots_are_checked(agent_factory):
    """No roots at all would make every pod's root the host's; "/" or a relative path would make
    anything a pod: refused with the line, and the default is the kubelet's."""
    a = agent_factory(start=False)
    for value in ("", "/", "kubepods", "/kubepods/", "/a/../kubepods", "/kubepods /a//b"):
        a.write_config(agent={"pod-cgroup-roots": value})
        rc, out, err = a.check_config()
        assert rc == 78 and "pod-cgroup-roots" in err, (value, rc, err)
    a.write_config(agent={"pod-cgroup-roots": None})
    rc, out, err = a.check_config()
    assert rc == 0, err
    rc, out, err = run_piniond("--list-config-keys")
    assert "pod-cgroup-roots=/kubepods /kubepods.slice" in out.splitlines(), out
