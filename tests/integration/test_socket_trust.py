# SPDX-License-Identifier: MIT
"""The agent's socket cannot be replaced, and clients only talk to the agent's socket.

- The agent binds in a sockets-only directory it made root:root 0755 and refuses to start in one
  others could change (a symlink, not a directory, group/other-writable, someone else's).
  <runtime-dir>/pinion.sock, where clients of old look, is a symlink into it.
- pinionctl and pinion-cni refuse, before connecting, a socket whose directories or owner would
  let someone else have put it there, and after connecting a peer that is not root: the
  impostor never gets a byte (for pinion-cni ADD the body names the pod).
- A "pod" (own mount namespace, root) that mounts the sockets directory read-only as the shipped
  manifests do can neither move the socket aside nor bind its own there, and still reaches the
  agent through it; with the old layout (the runtime dir shared read-write) it could.
- Below the sockets directory of an agent running every module there is nothing but sockets."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from pinion_testlib import EXIT_CONFIG, PINIONCTL, clean_env, make_pod, wait_until
import configsync_testlib as cs
import podnet_testlib as pt
from configsync_testlib import nginx, test_ca  # noqa: F401 (fixtures)
from podnet_testlib import netns  # noqa: F401 (fixture)

NOBODY = 65534
NETNS = "/var/run/netns/pinion-impostor-test"  # never opened: the plugin refuses first

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (socket owners, mount namespaces)")


def sockets_agent(agent_factory, config=None, **kw):
    """An agent whose socket is <runtime-dir>/sockets/pinion.sock, the shipped layout."""
    a = agent_factory(config=config, start=False)
    a.sockets_dir = os.path.join(a.runtime_dir, "sockets")
    a.socket = os.path.join(a.sockets_dir, "pinion.sock")
    a.agent_keys["socket"] = a.socket
    a.write_config()
    return a


def ctl(socket_path, *args, env=None):
    e = clean_env(env)
    e.pop("PINION_SOCKET", None)
    return subprocess.run([PINIONCTL, "--socket", socket_path] + list(args), capture_output=True, text=True,
                          timeout=30, env=e)


# ---- the agent's side ----

def test_agent_makes_the_sockets_dir_and_links_the_old_path(agent_factory):
    a = sockets_agent(agent_factory)
    a.start()
    st = os.lstat(a.sockets_dir)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o755 and st.st_uid == 0
    assert stat.S_ISSOCK(os.lstat(a.socket).st_mode)
    legacy = os.path.join(a.runtime_dir, "pinion.sock")
    assert os.readlink(legacy) == "sockets/pinion.sock"
    for path in (a.socket, legacy):
        p = ctl(path, "health")
        assert p.returncode == 0 and p.stdout.strip() == "ok", (path, p)


def _symlink_dir(a):
    real = a.sockets_dir + ".real"
    os.makedirs(real, 0o755)
    os.symlink(real, a.sockets_dir)


def _file(a):
    with open(a.sockets_dir, "w") as f:
        f.write("x")


def _mode(mode):
    def make(a):
        os.makedirs(a.sockets_dir)
        os.chmod(a.sockets_dir, mode)
    return make


def _owned_by_nobody(a):
    os.makedirs(a.sockets_dir, 0o755)
    os.chown(a.sockets_dir, NOBODY, NOBODY)


UNSAFE_DIRS = [
    ("world-writable", _mode(0o777), "writable by group or other"),
    ("group-writable", _mode(0o775), "writable by group or other"),
    ("sticky-world-writable", _mode(0o1777), "writable by group or other"),
    ("symlink", _symlink_dir, "is a symlink"),
    ("not-a-directory", _file, "not a directory"),
    ("owned-by-nobody", _owned_by_nobody, "owned by uid 65534"),
]


@pytest.mark.parametrize("case", UNSAFE_DIRS, ids=[c[0] for c in UNSAFE_DIRS])
def test_agent_refuses_a_socket_dir_others_can_change(agent_factory, case):
    _, make, why = case
    a = sockets_agent(agent_factory)
    os.makedirs(a.runtime_dir, 0o755)
    make(a)
    a.start(wait=False)
    rc = a.wait_exit(15)
    a.expected_exit = True
    log = a.log_text()
    assert rc == EXIT_CONFIG, "exit %d\n%s" % (rc, log)
    assert "Refusing to serve on %s" % a.socket in log and why in log, log
    assert not os.path.exists(a.socket) or not stat.S_ISSOCK(os.lstat(a.socket).st_mode)


# ---- impostors ----

# Binds PATH as root, optionally chowns the socket to CHOWN and drops to uid RUNAS before
# listen() (SO_PEERCRED then names RUNAS), and reports every connection and the bytes it got.
_IMPOSTOR = r"""
import os, socket, sys
path, chown, runas = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o666)
if chown >= 0:
    os.chown(path, chown, chown)
if runas >= 0:
    os.setgroups([]); os.setresgid(runas, runas, runas); os.setresuid(runas, runas, runas)
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(2)
    got = b""
    try:
        while len(got) < 65536:
            b = c.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    print("conn %d" % len(got), flush=True)
    c.close()
"""


class Impostor:
    def __init__(self, path, chown=-1, runas=-1):
        self.path = path
        self.proc = subprocess.Popen([sys.executable, "-c", _IMPOSTOR, path, str(chown), str(runas)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self):
        """Stops it; returns the bytes each connection sent."""
        time.sleep(0.5)  # the clients have exited: their connections are at EOF
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=10)
        return [int(line.split()[1]) for line in out.splitlines() if line.startswith("conn ")]


def _world_writable_dir(d):
    os.chmod(d, 0o777)
    return {}, "writable by group or other"


def _nobody_socket(d):
    return {"chown": NOBODY}, "owned by uid 65534"


def _nobody_peer(d):
    return {"runas": NOBODY}, "runs as uid 65534"


IMPOSTORS = [
    ("in-a-world-writable-dir", _world_writable_dir, False),
    ("socket-owned-by-nobody", _nobody_socket, False),
    ("peer-runs-as-nobody", _nobody_peer, True),
]


@pytest.fixture
def impostor_dir():
    d = tempfile.mkdtemp(prefix="pinion-impostor-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _cni_add(socket_path, env=None):
    conf = {"cniVersion": "1.1.0", "name": "pinion", "type": "pinion-cni", "socket": socket_path}
    return pt.exec_plugin(pt.PINION_CNI, "ADD", conf, container_id="impostor-c1", netns=NETNS,
                          args=pt.k8s_args("default", "victim", "uid-victim-1"), env=env)


@pytest.mark.parametrize("case", IMPOSTORS, ids=[c[0] for c in IMPOSTORS])
def test_clients_refuse_an_impostor(impostor_dir, case):
    _, setup, connects = case
    kw, why = setup(impostor_dir)
    path = os.path.join(impostor_dir, "pinion.sock")
    imp = Impostor(path, **kw)
    try:
        p = ctl(path, "identity")
        r = _cni_add(path)
    finally:
        conns = imp.stop()
    # Refused before connecting, or (the peer check) connected and refused before sending:
    # the impostor got no byte of either request.
    assert conns == ([0, 0] if connects else []), "bytes the impostor got per connection: %r" % conns
    assert p.returncode == 3, p
    assert "refusing the socket %s" % path in p.stderr and why in p.stderr, p.stderr
    assert r.rc != 0 and r.json, r
    assert r.code == 11 and r.json["msg"] == "refusing a socket that is not the pinion agent's", r
    assert why in r.json["details"], r


def test_socket_owner_override_trusts_that_uid(impostor_dir):
    """PINION_SOCKET_OWNER names an unprivileged agent's uid: its socket and peer are trusted
    (here an impostor: it gets the request, which shows the checks let it through)."""
    path = os.path.join(impostor_dir, "pinion.sock")
    imp = Impostor(path, chown=NOBODY, runas=NOBODY)
    try:
        p = ctl(path, "--timeout", "1", "health", env={"PINION_SOCKET_OWNER": str(NOBODY)})
        r = _cni_add(path, env={"PINION_SOCKET_OWNER": str(NOBODY)})
    finally:
        conns = imp.stop()
    assert "refusing" not in p.stderr, p
    assert "refusing" not in r.stdout, r
    assert len(conns) == 2 and all(n > 0 for n in conns), conns
    bad = ctl(path, "health", env={"PINION_SOCKET_OWNER": "nobody"})
    assert bad.returncode == 2 and "PINION_SOCKET_OWNER=nobody is not a uid" in bad.stderr, bad


def test_clients_still_reach_the_agent_through_safe_paths(agent_factory):
    """The checks pass for the agent itself: its socket, the legacy link, a path through a
    symlinked directory."""
    a = sockets_agent(agent_factory, config={"network": {"pod-cidr": pt.free_pod_cidr()}})
    a.start()
    link_dir = tempfile.mkdtemp(prefix="pinion-link-")
    try:
        os.chmod(link_dir, 0o755)
        os.symlink(a.sockets_dir, os.path.join(link_dir, "s"))
        for path in (a.socket, os.path.join(a.runtime_dir, "pinion.sock"), os.path.join(link_dir, "s", "pinion.sock")):
            p = ctl(path, "health")
            assert p.returncode == 0, (path, p)
            conf = {"cniVersion": "1.1.0", "name": "pinion", "type": "pinion-cni", "socket": path}
            r = pt.exec_plugin(pt.PINION_CNI, "STATUS", conf)
            assert r.rc == 0, (path, r)
    finally:
        shutil.rmtree(link_dir, ignore_errors=True)


# ---- a pod's view ----

_POD_SCRIPT = r"""
set -u
mount --make-rprivate /
mount --bind "$SRC" "$MNT"
if [ "$RO" = 1 ]; then mount -o remount,bind,ro "$MNT"; fi
mv "$MNT/pinion.sock" "$MNT/moved.sock" 2>&1; echo "mv=$?"
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.bind(sys.argv[1]); print("bind=0")
except OSError as e:
    print("bind=%s" % e.errno)
' "$MNT/evil.sock"
[ -e "$MNT/moved.sock" ] && mv "$MNT/moved.sock" "$MNT/pinion.sock"
rm -f "$MNT/evil.sock"
"$PINIONCTL" --socket "$MNT/$SOCK" health; echo "ctl=$?"
"""


def _as_pod(src, mnt, ro, sock="pinion.sock"):
    env = clean_env({"SRC": src, "MNT": mnt, "RO": "1" if ro else "0", "PINIONCTL": PINIONCTL, "SOCK": sock})
    p = subprocess.run(["unshare", "-m", "sh", "-c", _POD_SCRIPT], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 0, p
    return p.stdout


def test_a_pod_cannot_replace_the_socket_through_its_read_only_mount(agent_factory, tmp_dir):
    a = sockets_agent(agent_factory)
    a.start()
    mnt = os.path.join(tmp_dir, "pod-run-pinion-sockets")
    os.makedirs(mnt)
    out = _as_pod(a.sockets_dir, mnt, ro=True)
    assert "Read-only file system" in out and "mv=1" in out, out
    assert "bind=30" in out, out  # EROFS
    assert "ok\nctl=0" in out, out
    assert sorted(os.listdir(a.sockets_dir)) == ["pinion.sock"]
    assert ctl(a.socket, "health").returncode == 0


def test_old_layout_let_a_pod_move_the_socket(agent_factory, tmp_dir):
    """The control for the test above: the runtime dir shared read-write, as the DaemonSet did,
    lets the pod's root move the socket aside and bind its own (the script moves it back)."""
    a = agent_factory()
    mnt = os.path.join(tmp_dir, "pod-run-pinion")
    os.makedirs(mnt)
    out = _as_pod(a.runtime_dir, mnt, ro=False)
    assert "mv=0" in out and "bind=0" in out, out
    assert ctl(a.socket, "health").returncode == 0


# ---- nothing but sockets below the sockets dir ----

def test_only_sockets_below_the_sockets_dir_with_every_module(agent_factory, nginx, test_ca, tmp_dir, netns):
    ca_dir = tempfile.mkdtemp(prefix="pinion-sockdir-ca-")
    try:
        cs.write_bundle(nginx.root, "app", {"app.yaml": b"secret: 1\n"}, "v1")
        a = sockets_agent(agent_factory, config={
            "identity": {"signer": "local", "trust-domain": "sockdir.test", "ca-dir": ca_dir},
            "config.app": cs.config_section(nginx.url("app/manifest.json"), os.path.join(tmp_dir, "configs", "app"),
                                            test_ca),
            "network": {"pod-cidr": pt.free_pod_cidr()},
        })
        a.sections["identity"]["pod-tls-dir"] = os.path.join(a.runtime_dir, "pods")
        a.write_config()
        a.start(timeout=30)
        a.write_pod("web", make_pod("web", uid="uid-sockdir-web", ip=None, annotations={
            "pinion.io/configs": "app", "pinion.io/identity": "true"}))
        a.wait_pod("default", "web")
        ns = netns()
        r = pt.cni(a, "ADD", "sockdir-c1", ns, args=pt.k8s_args("default", "web", "uid-sockdir-web"))
        assert r.rc == 0, r
        # Everything the modules write exists: the pod's key, the config, the address.
        wait_until(lambda: "spiffe://sockdir.test/" in str(a.get_json("/v1/identity?pod=default/web")), 20,
                   desc="identity issued")
        wait_until(lambda: os.path.exists(os.path.join(tmp_dir, "configs", "app", "app.yaml")), 20,
                   desc="config delivered")
        keys = [os.path.join(d, f) for d, _, fs in os.walk(a.runtime_dir) for f in fs if f.endswith(".pem")]
        assert keys, "no pod TLS files under %s" % a.runtime_dir
        found = []
        for d, dirs, files in os.walk(a.sockets_dir):
            for name in dirs + files:
                p = os.path.join(d, name)
                found.append((p, stat.S_IFMT(os.lstat(p).st_mode)))
        assert found and all(kind == stat.S_IFSOCK for _, kind in found), found
        assert pt.cni(a, "DEL", "sockdir-c1", ns).rc == 0
    finally:
        shutil.rmtree(ca_dir, ignore_errors=True)
