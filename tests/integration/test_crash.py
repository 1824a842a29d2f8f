# SPDX-License-Identifier: MIT
"""Crash consistency: one piniond with every module doing real work at once is
killed with SIGKILL at random moments and restarted on the same state-dir, again and again, while
the activity goes on; afterwards its state must be whole and the world it manages consistent.

The activity (each in its own thread, running through every kill and restart):
  configsync  a bundle served by real nginx over HTTPS changes version every ~150 ms (a file that
              never changes, so published files are hard-linked into new versions, and files
              that change every version); the test asks for a refresh after each change.
  podnet      pinion-cni ADDs and DELs attachments for a small pool of network namespaces made by
              the test; an operation the kill interrupted is either DELeted again (as a kubelet
              does) or abandoned to the final GC (its namespace is replaced by a fresh one).
  identity    the local signer with 10 s node and workload lifetimes: the node certificate is
              renewed every few seconds (also right at start: the CA backdates notBefore, so a
              restart often finds it past its renewal point), and every restart issues every pod
              a fresh certificate and key in pod-tls-dir.
  zkreg       four static pods registered in a real ZooKeeper; their Ready condition flips every
              few hundred ms (flap damping off, so every flip is a create or a delete).
  reclaim     a v1 memory cgroup with a writer streaming page cache through it (throttled, files
              rewritten in a ring), so its limit is lowered (the agent's throttle, and below it
              a step's value) and put back in episodes all the time (2M steps, the 100 ms check:
              every short-lived agent between two kills reclaims).

The kills: after each start the test waits until /v1/status answers (every restart must come up,
and the daemon must never exit by itself), then waits a random 0-150 ms and kills; about one in
seven kills lands right at startup instead (0-60 ms after exec, before the API is up) to hit the
recovery code itself, and one in five of the others is aimed at a reclaim step (the test polls
the cgroup's limit and kills as soon as it sees it below the throttle: a step's value is in
force only for microseconds between two writes, which random kills almost never meet).

After every kill, before the next start, the whole state-dir and the agent's other directories
(configsync's dest, pod-tls-dir, the local CA) are walked and every entry classified; a kind the
walker does not know fails the test, so a new state file cannot escape the check:
  configsync/NAME.json   parses; its manifest is one the server published, manifest_sha256 fits
  podnet/allocations.json parses; every address inside the pod CIDR, none and no attachment twice
  reclaim/NAME.json      parses; names our cgroup and its ORIGINAL limit (never a lowered one)
  reclaim/NAME.lowered   "v2 " and two fixed-width numbers (or empty: killed between open and pwrite)
  zkreg/session          one "v2 <16 hex> <32 hex>" line
  identity/node/, pod-tls-dir/UID/, configs dest   atomic directories: ..data points at a
                         version; the published version and every kept older one is whole
                         (key fits certificate; bundle files byte-equal to the manifest of the
                         version its version.txt names, modes as published: one version, never a
                         mix); top-level links point through ..data
  ca-dir                 ca.crt and ca.key, the key fits
A leftover temp file, an unpublished (newer) version directory, ..data_tmp/..link_tmp, a
..trash directory or a staged new pod directory (pod-tls-dir/..new-*) is allowed right after a
kill (the next start removes them) but not at the end.

After the last kill the agent starts once more and settles; the activity stops in a known final
state; the runtime's CNI GC runs (valid attachments: the ones the test holds); then:
  - podnet: the allocations are exactly the attachments the test holds, no address twice, each
    namespace's eth0 carries its allocation's address and every other namespace has no eth0;
  - ZooKeeper (read with kazoo): the final start closes the session the last killed agent saved
    (zkreg's reaper: logged, and that session's members go); after the session timeout (the members of sessions that a kill
    left and the restarted agent could not close expire then) exactly one member per ready pod,
    none for an unready one, each owned by the agent's current session;
  - after SIGTERM: every member deleted, the cgroup's original limit in force, no reclaim record
    left, and the final walk (no temp file, no partial version) passes.
Any AddressSanitizer/UBSan report in the log fails the test.

Knobs (environment):
  PINION_CRASH_KILLS   number of kills (default 200; 50 under an ASan build, detected from the
                       piniond binary, to keep CI within its budget)
  PINION_CRASH_SEED    seed of the delays and choices (default: random; printed either way)
"""

import hashlib
import ipaddress
import json
import os
import random
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time

import pytest

from pinion_testlib import diag, make_pod, sanitized_build, unix_request, wait_until
import configsync_testlib as cs
import podnet_testlib as pn
import reclaim_testlib as rl
import zkreg_testlib as zt
from configsync_testlib import nginx, test_ca  # noqa: F401 (fixtures)
from zkreg_testlib import kz, zk  # noqa: F401 (fixtures)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and cgroups need root"),
    pytest.mark.skipif(not zt.zookeeper_available(), reason="ZooKeeper (Debian zookeeper) is not installed"),
    pytest.mark.skipif(not rl.v1_available(), reason="no cgroup v1 memory hierarchy"),
]

PREFIX = "pinion-crash-%d" % os.getpid()
SERVERSET = "/crash-%d/svc" % os.getpid()
MiB = 1 << 20
LIMIT = 64 * MiB
N_PODS = 4
N_NETNS = 6


def kill_count():
    v = os.environ.get("PINION_CRASH_KILLS")
    if v:
        return int(v)
    return 50 if sanitized_build() else 200


# ---- the page-cache writer in the reclaim cgroup: a ring of files rewritten at a bounded rate ----

WRITER = r'''
import os, sys, time
d, files, size, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
chunk = 1 << 20
buf = os.urandom(chunk)
n = 0
t0, written = time.monotonic(), 0
while True:
    fd = os.open(os.path.join(d, "ring-%d" % (n % files)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for _ in range(size // chunk):
        os.write(fd, buf)
        os.fdatasync(fd)
        written += chunk
        ahead = written / rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    os.close(fd)
    n += 1
'''


# ---- the crash-state walker ----

class Walk:
    """Classifies every entry of the agent's directories. final=False: the state right after a
    kill (temp files and unpublished version directories are leftovers the next start removes);
    final=True: after a clean stop (none may be left)."""

    def __init__(self, env, final):
        self.env = env
        self.final = final
        self.counts = {}
        self.problems = []
        self.leftovers = []   # (kind, directory)
        self.bundle_versions = set()
        self.published = {}   # directory -> the version ..data points at

    def count(self, kind):
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def bad(self, path, why):
        self.problems.append("%s: %s" % (path, why))

    def leftover(self, path, kind):
        self.count(kind)
        self.leftovers.append((kind, os.path.dirname(path)))
        if self.final:
            self.bad(path, "leftover %s after a clean stop" % kind)

    # -- generic pieces --

    @staticmethod
    def is_temp(name):
        return name.startswith(".#")   # fs.c's fs_write_file_atomic() temp files

    def load_json(self, path):
        try:
            with open(path, "rb") as f:
                return json.loads(f.read())
        except (OSError, ValueError) as e:
            self.bad(path, "does not parse as JSON: %s" % e)
            return None

    def cert_key_pair(self, cert_path, key_path):
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        try:
            with open(cert_path, "rb") as f:
                cert = x509.load_pem_x509_certificate(f.read())  # the first (leaf) certificate
            with open(key_path, "rb") as f:
                key = serialization.load_pem_private_key(f.read(), password=None)
        except (OSError, ValueError) as e:
            self.bad(cert_path, "certificate/key do not load: %s" % e)
            return
        pub = lambda k: k.public_bytes(serialization.Encoding.DER,  # noqa: E731
                                       serialization.PublicFormat.SubjectPublicKeyInfo)
        if pub(cert.public_key()) != pub(key.public_key()):
            self.bad(cert_path, "the key in %s does not fit the certificate" % key_path)
        else:
            self.count("cert/key pair")

    def atomic_dir(self, dest, version_ok, top_names=None):
        """dest in atomic-dir layout: ..data -> ..<version>, top-level links -> ..data/<entry>,
        version directories (each checked with version_ok(path) -> problem or None)."""
        entries = sorted(os.listdir(dest))
        if "..data" not in entries:
            self.bad(dest, "no ..data link")
            return None
        current = os.readlink(os.path.join(dest, "..data"))
        if not re.match(r"^\.\.\d{4}_\d\d_\d\d_", current) or current not in entries:
            self.bad(dest, "..data points at %r" % current)
            return None
        for name in entries:
            p = os.path.join(dest, name)
            st = os.lstat(p)
            if name == "..data":
                self.count("..data link")
            elif name in ("..data_tmp", "..link_tmp") and stat.S_ISLNK(st.st_mode):
                self.leftover(p, "%s link" % name)   # a swap the kill interrupted
            elif name.startswith("..trash..") and stat.S_ISDIR(st.st_mode):
                self.leftover(p, "trash dir")         # a prune the kill interrupted
            elif re.match(r"^\.\.\d{4}_\d\d_\d\d_", name) and stat.S_ISDIR(st.st_mode):
                why = version_ok(p)
                if name == current:
                    self.count("published version")
                    self.published[dest] = name
                    if why:
                        self.bad(p, "the published version is not whole: %s" % why)
                elif name > current:
                    # Newer than the published one: a begin/commit the kill interrupted.
                    self.leftover(p, "unpublished version dir")
                else:
                    self.count("older version")
                    if why:
                        self.bad(p, "a kept older version is not whole: %s" % why)
            elif stat.S_ISLNK(st.st_mode) and not name.startswith(".."):
                if os.readlink(p) != "..data/" + name:
                    self.bad(p, "top-level link points at %r" % os.readlink(p))
                elif not os.path.exists(p):
                    self.bad(p, "top-level link to nothing in the published version")
                else:
                    self.count("top-level link")
            else:
                self.bad(p, "unknown entry in an atomic directory")
        if top_names is not None:
            tops = {n for n in entries if not n.startswith("..")}
            want = set(top_names(os.path.join(dest, current)))
            if tops != want:
                self.bad(dest, "top-level links %s, the published version has %s" % (sorted(tops), sorted(want)))
        return os.path.join(dest, current)

    # -- state-dir --

    def state_dir(self, root):
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            if rel == "identity/node":
                dirnames[:] = []
                self.identity_node(dirpath)
                continue
            for d in list(dirnames):
                if os.path.relpath(os.path.join(dirpath, d), root) not in ("configsync", "identity", "identity/node",
                                                                          "podnet", "reclaim", "zkreg"):
                    self.bad(os.path.join(dirpath, d), "unknown directory in state-dir")
                    dirnames.remove(d)
            for name in filenames:
                self.count("state file")
                self.state_file(rel, os.path.join(dirpath, name), name)

    def state_file(self, rel, path, name):
        if self.is_temp(name):
            self.leftover(path, "temp file")
        elif rel == "configsync" and name.endswith(".json"):
            self.configsync_state(path)
        elif rel == "podnet" and name == "allocations.json":
            self.podnet_state(path)
        elif rel == "podnet" and name == "allocations.journal":
            self.count("podnet journal")  # (checked with allocations.json, replayed onto it)
        elif rel == "reclaim" and name.endswith(".json"):
            self.reclaim_record(path)
        elif rel == "reclaim" and name.endswith(".lowered"):
            self.reclaim_lowered(path)
        elif rel == "zkreg" and name == "session":
            with open(path) as f:
                text = f.read()
            if not re.match(r"^v2 [0-9a-f]{16} [0-9a-f]{32}\n$", text):
                self.bad(path, "not a session line: %r" % text)
            self.count("zkreg session")
        else:
            self.bad(path, "unknown kind of file in state-dir")

    def configsync_state(self, path):
        o = self.load_json(path)
        if o is None:
            return
        self.count("configsync state")
        man = o.get("manifest")
        if not isinstance(man, str) or man.encode() not in self.env.manifests_by_bytes:
            self.bad(path, "its manifest is not one the server published")
        elif hashlib.sha256(man.encode()).hexdigest() != o.get("manifest_sha256"):
            self.bad(path, "manifest_sha256 does not match its manifest")

    def podnet_state(self, path):
        if self.load_json(path) is None:
            return
        try:
            o = pn.podnet_state_on_disk(os.path.dirname(os.path.dirname(path)))
        except (ValueError, KeyError, AssertionError) as e:
            self.bad(path, "the journal does not replay: %s" % e)
            return
        self.count("podnet allocations")
        net = ipaddress.ip_network(self.env.cidr)
        ips, keys = set(), set()
        for a in o.get("allocations", []):
            ip = ipaddress.ip_address(a["ip"])
            if ip not in net:
                self.bad(path, "allocation %s outside %s" % (ip, net))
            if ip in ips or (a["containerID"], a["ifname"]) in keys:
                self.bad(path, "allocation %s given twice" % a)
            ips.add(ip)
            keys.add((a["containerID"], a["ifname"]))

    def reclaim_record(self, path):
        o = self.load_json(path)
        if o is None:
            return
        self.count("reclaim record")
        if o.get("cgroup") != self.env.cgroup.name or o.get("limit") != LIMIT:
            self.bad(path, "record %s is not the cgroup's original limit %d" % (o, LIMIT))

    def reclaim_lowered(self, path):
        with open(path, "rb") as f:
            data = f.read()
        # Written with one pwrite of a fixed width; empty if the kill came between open and pwrite
        # (the value is then unknown, which the restore handles).
        if data and not re.match(rb"^v2 \d{20} \d{20}\n$", data):
            self.bad(path, "torn lowered note %r" % data)
        self.count("reclaim lowered note")

    def identity_node(self, dest):
        def whole(v):
            for n in ("cert.pem", "key.pem", "ca.pem"):
                if not os.path.isfile(os.path.join(v, n)):
                    return "no %s" % n
            if sorted(os.listdir(v)) != ["ca.pem", "cert.pem", "format", "key.pem"]:
                return "unexpected files %s" % os.listdir(v)
            self.cert_key_pair(os.path.join(v, "cert.pem"), os.path.join(v, "key.pem"))
            return None
        self.atomic_dir(dest, whole, top_names=lambda cur: os.listdir(cur))

    # -- the agent's other directories --

    def configsync_dest(self, dest):
        def whole(v):
            files = {}
            for dirpath, _, names in os.walk(v):
                for n in names:
                    p = os.path.join(dirpath, n)
                    with open(p, "rb") as f:
                        files[os.path.relpath(p, v)] = (f.read(), "%04o" % (os.stat(p).st_mode & 0o7777))
            try:
                version = files["version.txt"][0].decode()
            except KeyError:
                return "no version.txt"
            self.bundle_versions.add(version)
            want = self.env.bundles.get(version)
            if want is None:
                return "version %r was never served" % version
            if {p: c for p, (c, _) in files.items()} != {p: c for p, (c, _) in want.items()}:
                return "files differ from manifest %s (a mix of versions?)" % version
            for p, (c, mode) in want.items():
                # The declared mode without the group's and others' bits (no group=, no
                # world-readable= in this section).
                effective = "%04o" % (int(mode, 8) & 0o700)
                if files[p][1] != effective:
                    return "%s has mode %s, the manifest says %s (so %s)" % (p, files[p][1], mode, effective)
            self.count("bundle file")
            return None
        self.atomic_dir(dest, whole, top_names=lambda cur: os.listdir(cur))

    def pod_tls(self, root):
        for uid in sorted(os.listdir(root)):
            p = os.path.join(root, uid)
            if self.is_temp(uid):
                self.leftover(p, "temp file")
                continue
            if uid.startswith("..new-"):  # a new pod's directory staged, not yet renamed into place
                self.leftover(p, "staged pod directory")
                continue
            if uid not in self.env.pod_uids:
                self.bad(p, "a pod-tls-dir entry for no pod of ours")
                continue

            def whole(v):
                if sorted(os.listdir(v)) != ["bundle.pem", "cert.pem", "key.pem"]:
                    return "files %s" % sorted(os.listdir(v))
                self.cert_key_pair(os.path.join(v, "cert.pem"), os.path.join(v, "key.pem"))
                return None
            self.atomic_dir(p, whole, top_names=lambda cur: os.listdir(cur))

    def ca_dir(self, root):
        names = sorted(os.listdir(root))
        for n in names:
            if self.is_temp(n):
                self.leftover(os.path.join(root, n), "temp file")
            elif n not in ("ca.crt", "ca.key"):
                self.bad(os.path.join(root, n), "unknown file in ca-dir")
        self.cert_key_pair(os.path.join(root, "ca.crt"), os.path.join(root, "ca.key"))

    def run(self):
        e = self.env
        with e.bundle_lock:
            self._run()
        return self

    def _run(self):
        e = self.env
        self.state_dir(e.agent.state_dir)
        if os.path.exists(e.dest):
            self.configsync_dest(e.dest)
        if os.path.exists(e.pod_tls_dir):
            self.pod_tls(e.pod_tls_dir)
        if os.path.exists(e.ca_dir):
            self.ca_dir(e.ca_dir)


# ---- the activity ----

class Activity:
    """The drivers. Each runs in a thread until stop is set; errors from the agent being down are
    expected and counted, anything else is recorded as a failure."""

    def __init__(self, env, seed):
        self.env = env
        self.stop = threading.Event()
        self.rngs = {k: random.Random("%d-%s" % (seed, k)) for k in ("bundle", "cni", "pods")}
        self.failures = []
        self.stats = {"bundle versions": 0, "ADD ok": 0, "ADD failed": 0, "DEL ok": 0, "DEL failed": 0,
                      "abandoned attachments": 0, "readiness flips": 0}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._guard, args=(f,), daemon=True)
                        for f in (self.bundles, self.cni, self.pods)]

    def bump(self, k):
        with self.lock:
            self.stats[k] += 1

    def _guard(self, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 (reported by the test)
            import traceback
            self.failures.append("%s: %s\n%s" % (fn.__name__, e, traceback.format_exc()))

    def start(self):
        for t in self.threads:
            t.start()

    def halt(self):
        """Stops the drivers and waits for them (also on failure: no namespace may be made after
        the cleanup looked)."""
        self.stop.set()
        for t in self.threads:
            if t.is_alive():
                t.join(90)

    def finish(self):
        self.halt()
        assert not self.failures, "\n".join(self.failures)

    def bundles(self):
        e, rng = self.env, self.rngs["bundle"]
        while not self.stop.is_set():
            e.publish_bundle()
            self.bump("bundle versions")
            try:
                unix_request(e.agent.socket, "POST", "/v1/configs/app/refresh", timeout=2)
            except OSError:
                pass
            self.stop.wait(rng.uniform(0.08, 0.22))

    def cni(self):
        e, rng = self.env, self.rngs["cni"]
        while not self.stop.is_set():
            slot = rng.randrange(len(e.slots))
            s = e.slots[slot]
            if s["state"] == "free":
                e.seq += 1
                cid = "crash-%d" % e.seq
                r = pn.cni(e.agent, "ADD", cid, s["ns"], args=pn.k8s_args("default", "net%d" % slot, "uid-net-%d" % e.seq),
                           conf=e.cni_conf(), timeout=30)
                if r.rc == 0:
                    s.update(state="live", cid=cid, ip=r.ip())
                    self.bump("ADD ok")
                else:
                    self.bump("ADD failed")
                    self.uncertain(s, cid, rng)
            elif s["state"] == "live" and rng.random() < 0.6:
                pass  # attachments live a while (some are live at the end)
            else:
                r = pn.cni(e.agent, "DEL", s["cid"], s["ns"], conf=e.cni_conf(), timeout=30)
                if r.rc == 0:
                    s.update(state="free", cid=None, ip=None)
                    self.bump("DEL ok")
                else:
                    self.bump("DEL failed")
                    self.uncertain(s, s["cid"], rng)
            self.stop.wait(rng.uniform(0.01, 0.05))

    def uncertain(self, s, cid, rng):
        """An operation the agent may or may not have done: mostly the runtime DELs it again
        (the slot's next turn); one in four it forgets it, for the final GC to find."""
        if rng.random() < 0.75:
            s.update(state="uncertain", cid=cid, ip=None)
        else:
            self.env.abandon(s)
            self.bump("abandoned attachments")

    def pods(self):
        e, rng = self.env, self.rngs["pods"]
        while not self.stop.is_set():
            i = rng.randrange(N_PODS)
            e.ready[i] = not e.ready[i]
            e.write_pod(i)
            self.bump("readiness flips")
            self.stop.wait(rng.uniform(0.1, 0.4))


class CrashEnv:
    def __init__(self, agent_dir, zk, nginx, test_ca):
        self.zk = zk
        self.nginx = nginx
        self.test_ca = test_ca
        self.dest = os.path.join(agent_dir, "configs", "app")
        self.pod_tls_dir = os.path.join(agent_dir, "pod-tls")
        self.ca_dir = os.path.join(agent_dir, "ca")
        self.cidr = pn.free_pod_cidr()
        self.bundles = {}              # version -> {path: (bytes, mode)}
        self.manifests_by_bytes = set()
        self.version_n = 0
        self.pod_uids = ["c7a5e0de-0000-4000-8000-%012d" % (os.getpid() * 10 + i) for i in range(N_PODS)]
        self.ports = [zt.free_port() for _ in range(N_PODS)]
        self.bundle_lock = threading.Lock()  # a version is known before the agent can fetch it
        self.ready = [True] * N_PODS
        self.pod_lock = threading.Lock()
        self.netns = []
        self.slots = []
        self.seq = 0
        self.agent = None
        self.cgroup = None

    def place(self, path):
        """path for a report: relative to the state-dir or the test's dir, pod UIDs folded."""
        for root, name in ((self.agent.state_dir, "state-dir"), (self.base, "")):
            if path == root or path.startswith(root + "/"):
                path = os.path.join(name, os.path.relpath(path, root))
                break
        return re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "UID", path)

    # configsync
    def publish_bundle(self):
        self.version_n += 1
        version = "v%d" % self.version_n
        files = {
            "version.txt": (version.encode(), "0644"),
            "static/fixed.conf": (b"never changes\n" * 64, "0644"),
            "data/blob.bin": (random.Random(self.version_n).randbytes(8192 + self.version_n % 4096), "0600"),
            "bin/hook.sh": (("#!/bin/sh\necho %s\n" % version).encode(), "0755"),
        }
        with self.bundle_lock:
            data = cs.write_bundle(self.nginx.root, "app", files, version)
            self.bundles[version] = files
            self.manifests_by_bytes.add(data)

    # podnet
    def new_netns(self):
        ns = pn.Netns("%s-%d" % (PREFIX, len(self.netns)))
        self.netns.append(ns)
        return ns

    def abandon(self, slot):
        slot["abandoned"].append((slot["ns"], slot["cid"]))
        slot.update(ns=self.new_netns(), state="free", cid=None, ip=None)

    def cni_conf(self):
        return pn.pinion_conf(self.agent, version="1.1.0")

    # pods
    def pod(self, i):
        return make_pod("p%d" % i, uid=self.pod_uids[i], ip="127.0.0.1", ports=[("http", self.ports[i])],
                        conditions={"Ready": self.ready[i]},
                        annotations={"pinion.io/serverset": SERVERSET, "pinion.io/port": "http",
                                     "pinion.io/configs": "app", "pinion.io/identity": "true"})

    def write_pod(self, i):
        with self.pod_lock:
            self.agent.write_pod("p%d" % i, self.pod(i))

    def cleanup(self):
        for ns in self.netns:
            ns.delete()


@pytest.fixture
def crash_env(zk, nginx, test_ca):
    d = tempfile.mkdtemp(prefix="pinion-crash-")
    os.chmod(d, 0o755)
    env = CrashEnv(d, zk, nginx, test_ca)
    env.base = d
    stream = tempfile.mkdtemp(prefix="pinion-crash-stream-", dir=rl.disk_tmpdir())
    env.stream_dir = stream
    env.cgroup = rl.MemCgroup("/%s-web" % PREFIX)
    try:
        yield env
    finally:
        env.cgroup.remove()
        env.cleanup()
        shutil.rmtree(stream, ignore_errors=True)
        shutil.rmtree(d, ignore_errors=True)


def status_up(a):
    try:
        return unix_request(a.socket, "GET", "/v1/status", timeout=2).status == 200
    except OSError:
        return False


# The limit the agent keeps in force between steps (high 60%: just under halfway to the limit),
# whole pages.
THROTTLE = (LIMIT * 60 // 100 + (LIMIT - LIMIT * 60 // 100) // 2 - 1) // 4096 * 4096


def wait_for_lowered_limit(cgroup, timeout):
    """Returns as soon as the cgroup's limit is below the throttle (a step's value: True), or
    after timeout."""
    fd = os.open(os.path.join(cgroup.dir, "memory.limit_in_bytes"), os.O_RDONLY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if int(os.pread(fd, 32, 0)) < THROTTLE:
                return True
        return False
    finally:
        os.close(fd)


def reclaim_target(a):
    for t in a.get_json("/v1/reclaim")["targets"]:
        if t["name"] == "web":
            return t
    return None


def saved_session(a):
    """The ZooKeeper session id the agent saved in state-dir (None if none)."""
    try:
        with open(os.path.join(a.state_dir, "zkreg", "session")) as f:
            return int(f.read().split()[0], 16)
    except (OSError, ValueError, IndexError):
        return None


def zk_members(kz):
    """[(pod endpoint, ephemeralOwner)] of every member under SERVERSET."""
    out = []
    for _, data, st in zt.member_raw(kz, SERVERSET):
        m = json.loads(data)
        out.append(("%s:%d" % (m["serviceEndpoint"]["host"], m["serviceEndpoint"]["port"]), st.ephemeralOwner))
    return out


def test_kill9_at_random_moments_leaves_consistent_state(agent_factory, crash_env, kz):
    env = crash_env
    kills = kill_count()
    seed = int(os.environ.get("PINION_CRASH_SEED") or random.SystemRandom().randrange(1 << 32))
    rng = random.Random(seed)
    diag("crash: seed %d (PINION_CRASH_SEED=%d to repeat), %d kills%s" % (
        seed, seed, kills, " (ASan build)" if sanitized_build() else ""))
    print("crash: PINION_CRASH_SEED=%d PINION_CRASH_KILLS=%d" % (seed, kills))
    t_start = time.monotonic()

    env.cgroup.create(LIMIT)
    env.publish_bundle()
    for i in range(N_NETNS):
        env.slots.append({"ns": env.new_netns(), "state": "free", "cid": None, "ip": None, "abandoned": []})

    a = agent_factory(start=False, config={
        "zookeeper": {"servers": env.zk.hosts, "session-timeout": "2s", "flap-damping": "0"},
        "config.app": cs.config_section(env.nginx.url("app/manifest.json"), env.dest, env.test_ca),
        "identity": {"signer": "local", "trust-domain": "crash.test", "ca-dir": env.ca_dir,
                     "node-cert-lifetime": "10s", "workload-cert-lifetime": "10s", "pod-tls-dir": env.pod_tls_dir},
        "network": {"pod-cidr": env.cidr, "gc-grace": "0s", "address-quarantine": "1s"},
        # Small steps (many limit writes per episode) and the 100 ms check: each short-lived
        # agent between two kills still reclaims (the usage threshold fires only on crossing it).
        "reclaim.web": {"cgroup": env.cgroup.name, "high": "60%", "target": "40%", "min-file": "4M",
                        "step": "2M", "interval": "100ms"},
    })
    env.agent = a
    for i in range(N_PODS):
        env.write_pod(i)
    writer = env.cgroup.run([rl.PYTHON, "-c", WRITER, env.stream_dir, "6", str(16 * MiB), str(40 * MiB)],
                            stdout=subprocess.DEVNULL)
    activity = Activity(env, seed)

    a.start()
    wait_until(lambda: reclaim_target(a) and reclaim_target(a)["reclaims"] > 0, 30, desc="reclaim episodes")
    activity.start()

    walked = {"walks": 0, "entries": 0, "leftovers": 0}
    seen = {"seconds to /v1/status": 0.0, "kills after which a pod had 2+ members": 0, "most extra members at once": 0, "kills aimed at a lowered limit": 0, "kills while a step's limit was in force": 0, "leftovers": {}, "versions": {}}
    early = up = 0
    try:
        for k in range(kills):
            if rng.random() < 0.15:
                # Right at startup: the recovery code itself is what gets killed.
                time.sleep(rng.uniform(0, 0.06))
                early += 1
            else:
                t_up = time.monotonic()
                wait_until(lambda: a.proc.poll() is not None or status_up(a), 30, interval=0.01,
                           desc="restart %d answering /v1/status" % k)
                seen["seconds to /v1/status"] += time.monotonic() - t_up
                up += 1
                if rng.random() < 0.2:
                    # Aimed at a reclaim step: a step's limit is in force only between two
                    # writes (microseconds), which a random kill almost never finds.
                    seen["kills aimed at a lowered limit"] += 1
                    wait_for_lowered_limit(env.cgroup, rng.uniform(0.05, 0.15))
                else:
                    time.sleep(rng.uniform(0, 0.15))
            a.check_alive()  # it never exits on its own: only our kills end it
            rc = a.kill9()
            assert rc == -9, "piniond exited with %d before kill %d" % (rc, k)
            if env.cgroup.limit() < THROTTLE:
                seen["kills while a step's limit was in force"] += 1
            # What an operator sees meanwhile: members of killed sessions until the next start
            # closes the last one (older ones expire after the session timeout).
            eps = [ep for ep, _ in zk_members(kz)]
            extra = len(eps) - len(set(eps))
            seen["kills after which a pod had 2+ members"] += extra > 0
            seen["most extra members at once"] = max(seen["most extra members at once"], extra)
            w = Walk(env, final=False).run()
            for kind, where in w.leftovers:
                key = "%s in %s" % (kind, env.place(where))
                seen["leftovers"][key] = seen["leftovers"].get(key, 0) + 1
            for d, v in w.published.items():
                seen["versions"].setdefault(env.place(d), set()).add(d + v)
            assert not w.problems, "after kill %d (seed %d):\n%s" % (k, seed, "\n".join(w.problems))
            walked["walks"] += 1
            walked["entries"] += sum(w.counts.values())
            walked["leftovers"] += sum(v for kk, v in w.counts.items()
                                       if kk in LEFTOVERS)
            if k < kills - 1:
                a.start(wait=False)
        t_kills = time.monotonic() - t_start
        # The last start must come up and settle like any other, and close the session the last
        # killed agent left (its members go at once; older killed sessions just expire).
        predecessor = saved_session(a)
        a.start(wait=False)
        a.wait_ready(T_SETTLE)
        session = int(a.get_json("/v1/registrations")["session_id"], 16)
        seen["stale members at the last start"] = len([m for m in zk_members(kz) if m[1] != session])
        if predecessor:
            a.wait_log(r"Closing session 0x%x left by the previous agent|previous agent's session 0x%x has "
                       r"already expired" % (predecessor, predecessor), 20)
            wait_until(lambda: all(o != predecessor for _, o in zk_members(kz)), 20,
                       desc="the killed agent's members gone")
        activity.finish()
        final = finish_and_check(env, a, kz, writer, walked)
    finally:
        activity.halt()
        if writer.poll() is None:
            writer.kill()
            writer.wait()

    log = open(a.log_file, errors="replace").read()
    assert "AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]
    seen["limit restores at start"] = len(re.findall(r"Restored the memory limit|found: restoring it before", log))
    seen["previous sessions closed at start"] = len(re.findall(r"Closing session 0x[0-9a-f]+ left by the previous", log))
    seen["versions"] = {k: len(v) for k, v in seen["versions"].items()}
    seen["seconds to /v1/status"] = "%.3f on average" % (seen["seconds to /v1/status"] / max(up, 1))
    summary = ("crash: %d kills (%d at startup, %d after /v1/status answered) in %.1fs, %.1fs in all; activity %s; "
               "crash walks %d (%d entries, %d leftovers the next start removed); seen %s; final %s" % (
                   kills, early, up, t_kills, time.monotonic() - t_start, activity.stats,
                   walked["walks"], walked["entries"], walked["leftovers"], seen, final))
    diag(summary)
    print(summary)


T_SETTLE = 30
LEFTOVERS = ("temp file", "unpublished version dir", "..data_tmp link", "..link_tmp link", "trash dir")


def finish_and_check(env, a, kz, writer, walked):
    """The final restart is up: everything settles, the runtime's GC runs, the invariants hold
    while it runs and after a clean stop. Returns what was checked."""
    out = {}
    # -- pods: a known final readiness (at least one of each) --
    for i in range(N_PODS):
        env.ready[i] = i % 2 == 0
        env.write_pod(i)
    ready_eps = sorted("127.0.0.1:%d" % env.ports[i] for i in range(N_PODS) if env.ready[i])

    # -- podnet: the runtime DELs what it is unsure of, then GCs with what it holds --
    for slot in env.slots:
        if slot["state"] == "uncertain":
            r = pn.cni(a, "DEL", slot["cid"], slot["ns"], conf=env.cni_conf())
            assert r.rc == 0, r
            slot.update(state="free", cid=None, ip=None)
    live = [s for s in env.slots if s["state"] == "live"]
    valid = [{"containerID": s["cid"], "ifname": "eth0"} for s in live]
    gc = pn.cni(a, "GC", conf=pn.pinion_conf(a, version="1.1.0", **{"cni.dev/valid-attachments": valid}))
    assert gc.rc == 0, gc
    wait_until(lambda: pn.podnet_status(a)["details"]["pool"]["interfacesBeingDeleted"] == 0, 20,
               desc="veth deletions done")
    pool = pn.podnet_status(a)["details"]["pool"]
    allocs = {(x["containerID"], x["ip"]) for x in pool["allocations"]}
    assert allocs == {(s["cid"], s["ip"]) for s in live}, (allocs, live)
    ips = [x["ip"] for x in pool["allocations"]]
    assert len(ips) == len(set(ips)), "an address given twice: %s" % pool["allocations"]
    on_disk = pn.podnet_state_on_disk(a.state_dir)["allocations"]
    assert sorted((x["containerID"], x["ip"]) for x in on_disk) == sorted(allocs)
    abandoned = [ns for s in env.slots for ns, _ in s["abandoned"]]
    for s in env.slots:
        addr = s["ns"].run("ip", "-4", "-o", "addr", "show", "dev", "eth0", check=False).stdout
        if s["state"] == "live":
            assert " %s/32 " % s["ip"] in addr, "namespace %s (attachment %s) does not carry its address %s: %r" % (
                s["ns"].name, s["cid"], s["ip"], addr)
        else:
            assert addr == "", "namespace %s holds no attachment but is still wired (a leak GC did not find): %r" % (
                s["ns"].name, addr)
    for ns in abandoned:
        wait_until(lambda: ns.run("ip", "link", "show", "eth0", check=False).returncode != 0, 20,
                   desc="the abandoned attachment in %s removed by GC" % ns.name)
    out["podnet"] = "%d live attachments = allocations, %d namespaces checked (%d abandoned to GC)" % (
        len(live), len(env.slots) + len(abandoned), len(abandoned))

    # -- ZooKeeper: what an operator sees once the killed sessions' timeout has passed --
    registrations = a.get_json("/v1/registrations")
    session = int(registrations["session_id"], 16)
    stale_now = [m for m in zk_members(kz) if m[1] != session]

    seen = []

    def converged():
        ms = zk_members(kz)
        seen[:] = ms
        return sorted(ep for ep, _ in ms) == ready_eps and all(o == session for _, o in ms)
    try:
        wait_until(converged, 30, interval=0.2, desc="one member per ready pod, all of the current session")
    except AssertionError as e:
        raise AssertionError("%s; members (endpoint, session): %s; ready: %s; session 0x%x" % (
            e, seen, ready_eps, session))
    time.sleep(1)
    assert converged(), (seen, ready_eps)
    out["zookeeper"] = "%d members for %d ready pods, 0 duplicates (%d stale members of killed sessions " \
        "seen before the timeout)" % (len(ready_eps), len(ready_eps), len(stale_now))

    # -- reclaim is still at work; configs and identity settled --
    t0 = reclaim_target(a)["reclaims"]
    wait_until(lambda: reclaim_target(a)["reclaims"] > t0, 30, desc="reclaim episodes after the last restart")

    # -- a clean stop, as an operator would --
    a.assert_exit(a.sigterm(), 0)
    writer.kill()
    writer.wait()
    assert env.cgroup.limit() == LIMIT, "the cgroup's limit is %d, its original %d" % (env.cgroup.limit(), LIMIT)
    left = os.listdir(os.path.join(a.state_dir, "reclaim")) if os.path.isdir(os.path.join(a.state_dir, "reclaim")) else []
    assert left == [], "reclaim records left after a clean stop: %s" % left
    assert zk_members(kz) == [], "members left after SIGTERM: %s" % zk_members(kz)
    w = Walk(env, final=True).run()
    assert not w.problems, "after the final stop:\n%s" % "\n".join(w.problems)
    out["reclaim"] = "limit %d restored, no record left" % LIMIT
    out["final walk"] = dict(w.counts)
    return out


def test_leftovers_of_an_interrupted_write_go_at_the_next_start(agent_factory, tmp_dir):
    """What a kill in the middle of a write leaves in state-dir (an unfinished version of the node
    certificate, a stale ..data_tmp, fs_write_file_atomic() temp files) is gone after the next start
    and stop, also when nothing is written again (the node certificate is reused). The random kills
    above meet these only by chance; this plants them."""
    ca = os.path.join(tmp_dir, "ca")
    a = agent_factory(config={"identity": {"signer": "local", "trust-domain": "crash.test", "ca-dir": ca,
                                           "node-cert-lifetime": "1h"},
                              "zookeeper": {"servers": "127.0.0.1:1", "session-timeout": "2s"}})
    node = os.path.join(a.state_dir, "identity", "node")
    wait_until(lambda: os.path.exists(os.path.join(node, "cert.pem")), 20, desc="node certificate")
    a.assert_exit(a.sigterm(), 0)
    current = os.readlink(os.path.join(node, "..data"))
    unfinished = os.path.join(node, "..2999_01_01_00_00_00.000000000")   # newer than any real one
    os.mkdir(unfinished)
    with open(os.path.join(unfinished, "key.pem"), "w") as f:
        f.write("-----BEGIN PRIVATE KEY-----\n")
    os.symlink(current, os.path.join(node, "..data_tmp"))
    planted = [unfinished, os.path.join(node, "..data_tmp")]
    for d in ("configsync", "zkreg"):
        os.makedirs(os.path.join(a.state_dir, d), exist_ok=True)
        planted.append(os.path.join(a.state_dir, d, ".#x.json.AbC123"))
        with open(planted[-1], "w") as f:
            f.write("{\"half")
    a.start()
    a.wait_log("node certificate: reusing serial")
    a.assert_exit(a.sigterm(), 0)
    assert os.readlink(os.path.join(node, "..data")) == current
    left = [p for p in planted if os.path.lexists(p)]
    assert left == [], left
