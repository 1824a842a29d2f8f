#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""memory-bench: the agent's own memory with every module configured, idle, with 320 and with
1,000 identity pods, each with [agent] release-startup-pages on and off, beside the agent with
no module configured; and what the release costs the first requests after it.

    tests/bench/memory-bench.py [--pods 320,1000] [--rounds 3] [--settle 5] [--json F]

Agents one after the other, never two at once (a second piniond would share the library pages
and halve their Pss), each started fresh from its own temp dir, in a memory cgroup of its own
made for it (v1: the memory hierarchy; v2: below /sys/fs/cgroup when its memory controller is
delegated) and with its program's and libraries' pages evicted from the page cache first
(posix_fadvise DONTNEED: pages no running process maps go), so every agent starts cold and its
cgroup is charged for what it reads:
  none      no module configured: [agent] only (the peer);
  idle      every module configured and healthy: apiserver (the test apiserver, TLS, a token),
            identity (local CA, a JWT key), network (a free pod CIDR), zookeeper (a real
            ZooKeeper on loopback), config (a signed bundle from a real nginx over HTTPS),
            reclaim (a v1 memory cgroup made for the run, where there is one); one pod in the
            pods-dir, the caller of the first JWT-SVID below; --rounds times with the release on
            and off, the order alternating;
  N pods    the same plus N pods annotated pinion.io/identity=true, each with its workload
            certificate issued, with the release on and off.
Each is measured --settle seconds after it is done (modules running, certificates issued):
VmRSS and RssAnon (/proc/PID/status), Pss, Pss_Anon and Pss_File (/proc/PID/smaps_rollup), and
the working set of its cgroup: usage minus the inactive page cache (v1 memory.usage_in_bytes −
total_inactive_file, v2 memory.current − inactive_file), the memory the kernel would not take
first, with the cgroup's anonymous memory, page cache (the libraries' pages it read, the files
it wrote: the pods' certificates and keys in pod-tls-dir, its state files) and kernel memory
(inodes and dentries of those files, sockets, page tables); the median of 5 samples 0.5 s
apart. Pss counts a page shared with N processes as 1/N
of it, so the file-backed part moves with what else runs (another process with libcrypto mapped
lowers it); RssAnon and Pss_Anon do not, and neither does the release (it gives back file pages
only).

What the release costs, in the idle agents, measured the same way with it on and off: the
agent's major faults (/proc/PID/stat majflt) from READY + 2.5 s (after the release's second
pass) to the sample, then the first requests, nothing having called the agent since the
release: a CNI ADD through pinion-cni into a namespace made for it, a JWT-SVID minted through
the Workload API (FetchJWTSVID in HTTP/2 frames written by hand, from a process of the pod),
a GET /v1/status; each timed from the caller and with the major faults it caused, then each
once more (warm). The medians of the rounds.

Goals (the memory issue): RssAnon at most 3 MiB idle with every module configured, at most
6 MiB with 1,000 identity pods.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from benchjson import BenchJson  # noqa: E402
from pinion_testlib import Agent, BUILDDIR, PINIOND, make_pod, unix_request  # noqa: E402

KiB = 1024
GOAL_IDLE_KIB = 3 * 1024
GOAL_1000_KIB = 6 * 1024
FIGURES = ("RssAnon", "Pss_Anon", "WorkingSet", "CgAnon", "CgFile", "CgActiveFile", "CgActivated", "CgKernel", "Pss",
           "Pss_File", "VmRSS")
FIGURE_NAMES = {"WorkingSet": "cgroup working set", "CgAnon": "cgroup: anon", "CgFile": "cgroup: page cache",
                "CgActiveFile": "cgroup: active page cache (in the working set)",
                "CgActivated": "cgroup: page cache activated on refault (workingset_activate_file)",
                "CgKernel": "cgroup: kernel"}
FIRST_OPS = ("cni-add", "jwt-svid", "status")
OP_NAMES = {"cni-add": "CNI ADD", "jwt-svid": "JWT-SVID (Workload API)", "status": "GET /v1/status"}
SETTLED_AFTER_READY = 2.5  # the release's second pass is 2 s after READY (agent/self-memory.c)
NOBODY = 65534


# ---- what the agent holds --------------------------------------------------------------------

def proc_kib(pid):
    res = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"):
                res[k] = int(v.split()[0])
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB" and parts[0].rstrip(":") in ("Pss", "Pss_Anon", "Pss_File"):
                res[parts[0].rstrip(":")] = int(parts[1])
    return res


def majflt(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    return int(s[s.rindex(")") + 2:].split()[9])


class OwnCgroup:
    """A memory cgroup for one agent: v1's memory hierarchy, else v2 below /sys/fs/cgroup."""
    V1 = "/sys/fs/cgroup/memory"
    V2 = "/sys/fs/cgroup"

    @classmethod
    def available(cls):
        if os.path.exists(os.path.join(cls.V1, "memory.usage_in_bytes")):
            return 1
        try:
            with open(os.path.join(cls.V2, "cgroup.subtree_control")) as f:
                return 2 if "memory" in f.read().split() else None
        except OSError:
            return None

    def __init__(self, label):
        self.version = self.available()
        self.dir = None
        if self.version:
            self.dir = os.path.join(self.V1 if self.version == 1 else self.V2,
                                    "pinion-memory-bench-%d-%s" % (os.getpid(), label))
            os.makedirs(self.dir)

    def working_set(self):
        """{"WorkingSet": usage − inactive file, "CgAnon", "CgFile", "CgKernel": its parts} in KiB."""
        if not self.dir:
            return {}
        v1 = self.version == 1
        with open(os.path.join(self.dir, "memory.usage_in_bytes" if v1 else "memory.current")) as f:
            usage = int(f.read())
        with open(os.path.join(self.dir, "memory.stat")) as f:
            st = dict((k, int(v)) for k, v in (line.split() for line in f))
        if v1:
            with open(os.path.join(self.dir, "memory.kmem.usage_in_bytes")) as f:
                kernel = int(f.read())
        else:
            kernel = st.get("kernel", st.get("slab", 0) + st.get("kernel_stack", 0) + st.get("pagetables", 0) +
                            st.get("percpu", 0) + st.get("sock", 0))
        res = {"WorkingSet": (usage - st["total_inactive_file" if v1 else "inactive_file"]) // KiB,
               "CgAnon": st["total_rss" if v1 else "anon"] // KiB,
               "CgFile": st["total_cache" if v1 else "file"] // KiB,
               "CgActiveFile": st["total_active_file" if v1 else "active_file"] // KiB, "CgKernel": kernel // KiB}
        # A page read again soon after it was reclaimed (as the release's pages are on first
        # use) goes straight to the active list: a count of pages (v2, and v1 kernels that have it).
        activated = st.get("total_workingset_activate_file" if v1 else "workingset_activate_file")
        if activated is not None:
            res["CgActivated"] = activated * os.sysconf("SC_PAGE_SIZE") // KiB
        return res

    def remove(self):
        if not self.dir:
            return
        for _ in range(100):
            try:
                os.rmdir(self.dir)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)


def sample(pid, cg, n=5, interval=0.5):
    rows = []
    for i in range(n):
        if i:
            time.sleep(interval)
        r = proc_kib(pid)
        r.update(cg.working_set())
        rows.append(r)
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def program_files():
    """piniond, pinion-cni and the libraries they load (ldd)."""
    files = set()
    for prog in (PINIOND, os.path.join(BUILDDIR, "pinion-cni")):
        files.add(prog)
        out = subprocess.run(["ldd", prog], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            for p in parts:
                if p.startswith("/"):
                    files.add(os.path.realpath(p))
    return sorted(f for f in files if os.path.exists(f))


def evict(files):
    """Drops the files' cached pages that no running process maps (the kernel keeps those)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# ---- the world every module talks to ---------------------------------------------------------

class World:
    """The servers every module talks to, shared by every agent of the run."""

    def __init__(self, work):
        self.work = work
        self.closers = []

    def start(self):
        from zkreg_testlib import ZkStandalone
        from configsync_testlib import TestCA, Nginx, ed25519_keypair, write_bundle
        from reclaim_testlib import MemCgroup, v1_available
        from podnet_testlib import free_pod_cidr
        from test_identity_jwt import key_pem, new_key, write_secret
        from identity_testlib import PodCgroup, new_uid
        sys.path.insert(0, os.path.join(HERE, "..", "fakes"))

        self.zk = ZkStandalone().start()
        self.closers.append(self.zk.close)

        self.ca = TestCA(os.path.join(self.work, "ca"))
        self.nginx = Nginx(os.path.join(self.work, "nginx"), self.ca)
        self.closers.append(self.nginx.stop)
        key, self.public_key = ed25519_keypair(self.work)
        write_bundle(self.nginx.root, "app", {"app.yaml": b"greeting: hello\n"}, "v1", sign_key=key)

        self.cgroup = None
        if v1_available():
            self.cgroup = MemCgroup("/pinion-memory-bench-%d" % os.getpid()).create(limit=256 << 20)
            self.closers.append(self.cgroup.remove)

        self.jwt_key = os.path.join(self.work, "jwt.key")
        self.jwt_bundle = os.path.join(self.work, "jwt-bundle")
        write_secret(self.jwt_key, key_pem(new_key()))
        write_secret(self.jwt_bundle, b'{"keys": []}', 0o644)
        self.pod_cidr = free_pod_cidr(prefix=20)

        # The pod whose process asks for the JWT-SVID: a cgroup where the kubelet would put it
        # (v1: the pids hierarchy; the unified one where that is all there is).
        self.caller_uid = new_uid()
        self.caller_cg = PodCgroup(self.caller_uid, hierarchy="pids" if os.path.isdir("/sys/fs/cgroup/pids") else "")
        self.closers.append(self.caller_cg.close)

        self.fake = FakeApiserver(self.work)
        self.fake.start()
        self.closers.append(self.fake.stop)
        return self

    def caller_pod(self):
        return make_pod("caller", namespace="bench", uid=self.caller_uid, service_account="caller",
                        ip="10.255.255.1", annotations={"pinion.io/identity": "true"})

    def sections(self, a):
        s = {
            "apiserver": {"url": self.fake.url, "ca-file": self.fake.ca_file, "token-file": self.fake.token_file},
            "identity": {"signer": "local", "trust-domain": "bench.example", "ca-dir": os.path.join(a.dir, "ca"),
                         "pod-tls-dir": os.path.join(a.dir, "pods-tls"), "jwt-key-file": self.jwt_key,
                         "jwt-bundle-file": self.jwt_bundle},
            "network": {"pod-cidr": self.pod_cidr, "address-quarantine": "0s"},
            "zookeeper": {"servers": self.zk.hosts},
            "config.app": {"url": self.nginx.url("/app/manifest.json"), "dest": os.path.join(a.dir, "configs", "app"),
                           "ca-file": self.ca.ca_cert, "public-key": self.public_key, "interval": "1h"},
        }
        if self.cgroup:
            s["reclaim.bench"] = {"cgroup": self.cgroup.name, "high": "90%", "target": "80%"}
        return s

    def modules(self):
        return ["apiserver", "identity", "podnet", "zkreg", "configsync"] + (["reclaim"] if self.cgroup else [])

    def close(self):
        for c in reversed(self.closers):
            try:
                c()
            except Exception as e:  # noqa: BLE001 - cleanup goes on
                print("memory-bench: cleanup: %s" % e, file=sys.stderr)


class FakeApiserver:
    """tests/fakes/kube_apiserver.py out of process (TLS, a token), with this node's Node."""

    def __init__(self, work):
        self.dir = os.path.join(work, "apiserver")
        os.makedirs(self.dir)
        self.token_file = os.path.join(self.dir, "token")
        with open(self.token_file, "w") as f:
            f.write("memory-bench-token\n")
        self.proc = None

    def start(self):
        fake = os.path.join(HERE, "..", "fakes", "kube_apiserver.py")
        self.proc = subprocess.Popen([sys.executable, fake, "--port", "0", "--tls", "--token-file", self.token_file,
                                      "--workdir", os.path.join(self.dir, "work"), "--print-url"],
                                     stdout=subprocess.PIPE, stderr=open(os.path.join(self.dir, "log"), "wb"),
                                     start_new_session=True)
        self.url, self.ca_file = self.proc.stdout.readline().decode().split()
        self.control = self.proc.stdout.readline().decode().split()[1]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def identity_pods(n):
    return [make_pod("p%d" % i, namespace="bench", uid="00000000-0000-4000-8000-%012d" % i,
                     service_account="sa%d" % (i % 10), ip="10.%d.%d.%d" % (i >> 16, (i >> 8) & 255, i & 255),
                     annotations={"pinion.io/identity": "true"}) for i in range(n)]


# ---- the first requests after the release ------------------------------------------------------

# Run as a process of the caller pod: on each line "go" on stdin, one FetchJWTSVID on a new
# connection to the Workload API in HTTP/2 frames written by hand (no client library to load
# or warm), the seconds from connect to the whole first response message on stdout.
JWT_CALLER = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
from workload_api_testlib import h2_first_message
aud = b"svc"
req = b"\x0a" + bytes([len(aud)]) + aud
def once(path):
    t0 = time.perf_counter()
    msg = h2_first_message(path, "/SpiffeWorkloadAPI/FetchJWTSVID", req)
    t = time.perf_counter() - t0
    assert msg.count(b".") >= 2, msg[:200]
    return t
for line in sys.stdin:
    print(once(sys.argv[1]), flush=True)
"""


class FirstUse:
    """The three requests, each timed from the caller and with the agent's major faults."""

    def __init__(self, world, a, work):
        from podnet_testlib import Netns
        self.world = world
        self.a = a
        self.netns = [Netns("pinion-memory-bench-%d-%s" % (os.getpid(), i)) for i in ("first", "warm")]
        self.conf = {"cniVersion": "1.1.0", "name": "bench-pinion", "type": "pinion-cni", "socket": a.socket}
        # The caller runs as nobody, who may not read the checkout (the VM guest's is below
        # /root): it imports the test helpers from a copy it can read.
        self.pylib = tempfile.mkdtemp(prefix="pinion-memory-bench-py-")
        os.chmod(self.pylib, 0o755)
        integration = os.path.join(HERE, "..", "integration")
        for name in os.listdir(integration):
            if name.endswith(".py"):
                shutil.copy(os.path.join(integration, name), self.pylib)
        try:
            self.caller = subprocess.Popen(
                [sys.executable, "-c", JWT_CALLER, os.path.join(a.runtime_dir, "workload.sock"), self.pylib],
                preexec_fn=world.caller_cg.preexec(NOBODY), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True, cwd="/")
        except BaseException:
            shutil.rmtree(self.pylib, ignore_errors=True)
            raise

    def cni_add(self, i):
        from podnet_testlib import PINION_CNI, exec_plugin
        t0 = time.perf_counter()
        r = exec_plugin(PINION_CNI, "ADD", self.conf, container_id="memorybench%d" % i, netns=self.netns[i])
        t = time.perf_counter() - t0
        if r.rc != 0:
            raise RuntimeError("CNI ADD failed: %r" % r)
        return t

    def jwt(self, i):
        self.caller.stdin.write("go\n")
        self.caller.stdin.flush()
        line = self.caller.stdout.readline()
        if not line:
            raise RuntimeError("the JWT-SVID caller ended: %s" % self.caller.wait())
        return float(line)

    def status(self, i):
        t0 = time.perf_counter()
        r = unix_request(self.a.socket, "GET", "/v1/status")
        t = time.perf_counter() - t0
        if r.status != 200:
            raise RuntimeError("GET /v1/status: %d" % r.status)
        return t

    def run(self):
        """{op: (first ms, first majflt, warm ms, warm majflt)}."""
        pid = self.a.proc.pid
        fns = {"cni-add": self.cni_add, "jwt-svid": self.jwt, "status": self.status}
        res = {}
        for i, when in enumerate(("first", "warm")):
            for op in FIRST_OPS:
                f0 = majflt(pid)
                t = fns[op](i)
                res.setdefault(op, {})[when] = (t * 1000, majflt(pid) - f0)
        return res

    def close(self):
        from podnet_testlib import PINION_CNI, exec_plugin
        if self.caller.poll() is None:
            self.caller.stdin.close()
            self.caller.wait(10)
        shutil.rmtree(self.pylib, ignore_errors=True)
        for i, ns in enumerate(self.netns):
            exec_plugin(PINION_CNI, "DEL", self.conf, container_id="memorybench%d" % i, netns=ns)
            ns.delete()


# ---- one agent -------------------------------------------------------------------------------

def wait_done(a, world, n_identities, t_ready):
    """Modules running and the certificates issued, from /v1/status; returns the seconds since
    READY. Polls still going at READY + 2.5 s call the agent after the release's second pass
    (counted in the note: the first /v1/status is then not the first)."""
    deadline = time.monotonic() + 180
    names = world.modules()
    while True:
        st = unix_request(a.socket, "GET", "/v1/status").body
        mods = {m["name"]: m for m in st["modules"]}
        running = all(mods.get(n, {}).get("state") == "running" for n in names)
        issued = mods.get("identity", {}).get("details", {}).get("workloadsIssued")
        if running and issued == n_identities:
            return time.monotonic() - t_ready
        if time.monotonic() > deadline:
            raise RuntimeError("not done after 180 s: %s, %s issued\n%s" % (
                {n: mods.get(n, {}).get("state") for n in names}, issued, a.log_text()[-3000:]))
        time.sleep(0.1)


def measure(label, world, n_pods, release, settle, files, first_use=False):
    a = Agent(config={"agent": {"log-level": "info", "release-startup-pages": "yes" if release else "no"}})
    cg = OwnCgroup(label)
    fu = None
    try:
        if world:
            for section, keys in world.sections(a).items():
                a.sections[section] = keys
            a.write_config()
            a.write_pod("caller", world.caller_pod())
            for i, pod in enumerate(identity_pods(n_pods)):
                a.write_pod("p%d" % i, pod)
        a.cgroup = cg.dir
        evict(files)
        a.start(timeout=60)
        t_ready = time.monotonic()
        res = {}
        if world:
            res["done_s"] = wait_done(a, world, n_pods + 1, t_ready)
        # Nothing calls the agent from here to the first requests.
        time.sleep(max(0.0, t_ready + SETTLED_AFTER_READY - time.monotonic()))
        if release:
            a.wait_log(r"Released \d+ KiB of start-up file pages once settled", timeout=10)
        res["majflt_release"] = majflt(a.proc.pid)
        res["late"] = res.get("done_s", 0) > SETTLED_AFTER_READY
        time.sleep(settle)
        res.update(sample(a.proc.pid, cg))
        res["majflt_idle"] = majflt(a.proc.pid) - res["majflt_release"]
        if first_use:
            fu = FirstUse(world, a, a.dir)
            res["first"] = fu.run()
        res["modules"] = {m["name"]: m.get("state") for m in a.status()["modules"]}
        res["released"] = (a.metrics().value("pinion_startup_pages_released_bytes_total") or 0) / 1024
        res["warnings"] = len([line for line in a.log_text().splitlines() if "warning" in line.lower()])
        print("memory-bench: %-9s release %-3s RssAnon %5d KiB  Pss_Anon %5d  working set %5s  Pss %5d  "
              "Pss_File %5d  VmRSS %6d  majflt after release %d%s"
              % (label, "on" if release else "off", res["RssAnon"], res["Pss_Anon"], res.get("WorkingSet", "-"),
                 res["Pss"], res["Pss_File"], res["VmRSS"], res["majflt_idle"],
                 "" if "first" not in res else "  first: " + ", ".join(
                     "%s %.1f ms %d faults (warm %.1f ms)" % (op, v["first"][0], v["first"][1], v["warm"][0])
                     for op, v in res["first"].items())))
        return res
    finally:
        if fu:
            fu.close()
        a.close()
        cg.remove()


# ---- the report ------------------------------------------------------------------------------

def med(runs, key):
    return statistics.median(r[key] for r in runs)


def first_min(runs, op):
    return min(r["first"][op]["first"][0] for r in runs)


def first_med(runs, op, when, i):
    return statistics.median(r["first"][op][when][i] for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", default="320,1000", help="identity pod counts, comma-separated")
    ap.add_argument("--rounds", type=int, default=3, help="idle agents with the release on and off")
    ap.add_argument("--settle", type=float, default=5.0, help="idle seconds before sampling")
    ap.add_argument("--json")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("memory-bench: needs root (its own memory cgroups, a network namespace for the CNI ADD)")
        return 77
    pod_counts = [int(x) for x in args.pods.split(",") if x]
    # On cgroup v2 (the VM guest in `make bench`) a report of its own beside the host's v1 one.
    v2 = OwnCgroup.available() == 2
    bj = BenchJson("memory-v2" if v2 else "memory",
                   "The agent's own memory%s: every module configured, idle and with %s identity pods, "
                   "[agent] release-startup-pages on and off"
                   % (" on cgroup v2 (the VM guest)" if v2 else "", " and ".join(map(str, pod_counts))))
    files = program_files()
    work = tempfile.mkdtemp(prefix="memory-bench-")
    os.chmod(work, 0o755)
    world = World(work)
    idle = {True: [], False: []}
    loaded = {}
    try:
        world.start()
        none = measure("none", None, 0, False, args.settle, files)
        for rnd in range(args.rounds):
            for release in ((True, False) if rnd % 2 == 0 else (False, True)):
                idle[release].append(measure("idle", world, 0, release, args.settle, files, first_use=True))
        for n in pod_counts:
            loaded[n] = {release: measure("%d pods" % n, world, n, release, args.settle, files)
                         for release in (True, False)}
    finally:
        world.close()
        shutil.rmtree(work, ignore_errors=True)

    cgv = OwnCgroup.available()
    ws_name = {1: "memory.usage_in_bytes − total_inactive_file (v1)", 2: "memory.current − inactive_file (v2)"}.get(cgv)
    columns = [("idle", {r: {k: med(idle[r], k) for k in idle[r][0] if isinstance(idle[r][0][k], (int, float))}
                         for r in (True, False)})]
    columns += [("%d pods" % n, loaded[n]) for n in pod_counts]
    figures = [f for f in FIGURES if f in none]

    print("")
    print("| figure (KiB) | none | " + " | ".join("%s, on | %s, off" % (c, c) for c, _ in columns) + " |")
    print("|---|---:|" + "---:|---:|" * len(columns))
    for k in figures:
        print("| %s | %d | " % (FIGURE_NAMES.get(k, k), none[k]) + " | ".join("%d | %d" % (v[True][k], v[False][k]) for _, v in columns)
              + " |")
    print("| major faults after the release | %d | " % none["majflt_idle"] +
          " | ".join("%d | %d" % (v[True]["majflt_idle"], v[False]["majflt_idle"]) for _, v in columns) + " |")
    print("")
    print("| first request after the release (%d rounds) | release on: median, min | release off: median, min | "
          "major faults on / off (median) | warm, on / off |" % args.rounds)
    print("|---|---:|---:|---:|---:|")
    for op in FIRST_OPS:
        print("| %s | %.2f, %.2f ms | %.2f, %.2f ms | %d / %d | %.2f / %.2f ms |" % (
            OP_NAMES[op], first_med(idle[True], op, "first", 0), first_min(idle[True], op),
            first_med(idle[False], op, "first", 0), first_min(idle[False], op),
            first_med(idle[True], op, "first", 1), first_med(idle[False], op, "first", 1),
            first_med(idle[True], op, "warm", 0), first_med(idle[False], op, "warm", 0)))
    base = columns[0][1][False]["RssAnon"]
    for n in pod_counts:
        print("RssAnon per identity pod, %d pods: %.2f KiB ((with them − idle) / %d, release off)"
              % (n, (loaded[n][False]["RssAnon"] - base) / n, n))

    for label, v in columns:
        what = "every module configured, %s" % ("idle" if label == "idle" else label.replace("pods", "identity pods"))
        for k in figures:
            bj.row("%s, %s, release on" % (FIGURE_NAMES.get(k, k), what), v[True][k], v[False][k], "release-startup-pages=no, same run",
                   "KiB")
        bj.row("major faults after the release, %s" % what, v[True]["majflt_idle"], v[False]["majflt_idle"],
               "release-startup-pages=no, same run", "")
    for op in FIRST_OPS:
        bj.row("first %s after the release, median of %d" % (OP_NAMES[op], args.rounds),
               round(first_med(idle[True], op, "first", 0), 2), round(first_med(idle[False], op, "first", 0), 2),
               "release-startup-pages=no, same run", "ms")
        bj.row("first %s after the release, fastest of %d" % (OP_NAMES[op], args.rounds),
               round(first_min(idle[True], op), 2), round(first_min(idle[False], op), 2),
               "release-startup-pages=no, same run", "ms")
        bj.row("major faults of the first %s" % OP_NAMES[op], first_med(idle[True], op, "first", 1),
               first_med(idle[False], op, "first", 1), "release-startup-pages=no, same run", "")

    for n in pod_counts:
        bj.row("RssAnon per identity pod, %d pods, every module configured" % n,
               round((loaded[n][False]["RssAnon"] - base) / n, 2), None, None, "KiB")
    goals = [("idle", columns[0][1], GOAL_IDLE_KIB, "<= 3 MiB")]
    if 1000 in loaded:
        goals.append(("1000 pods", loaded[1000], GOAL_1000_KIB, "<= 6 MiB"))
    print("")
    for label, v, goal, words in goals:
        worst = max(v[True]["RssAnon"], v[False]["RssAnon"])
        met = worst <= goal
        bj.row("RssAnon, every module configured, %s" % label.replace("pods", "identity pods"), worst,
               none["RssAnon"], "same agent, no module configured", "KiB", goal=words, met=met)
        print("goal: RssAnon %s with every module, %s: %d KiB: %s" % (label, words, worst, "met" if met else "NOT met"))

    def slow(runs):
        return sum(1 for r in runs if r.get("late"))
    bj.note("Each agent alone (no other piniond of this run), in its own memory cgroup, started with its program's "
            "and libraries' unmapped pages evicted from the page cache. Working set: %s. Pss divides a shared page by "
            "the processes mapping it, so Pss_File moves with what else runs on the machine; RssAnon and Pss_Anon "
            "are the agent's own and the release does not change them. Start-up file pages released (KiB): idle %d, "
            "%s. Idle agents whose modules were still starting at READY + 2.5 s (the status polls then touched the "
            "API after the release): %d of %d. Modules: %s. Warnings logged: idle %d, none %d."
            % (ws_name or "no memory cgroup here", med(idle[True], "released"),
               ", ".join("%d pods %d" % (n, loaded[n][True]["released"]) for n in pod_counts),
               slow(idle[True]) + slow(idle[False]), 2 * args.rounds,
               ", ".join("%s %s" % kv for kv in sorted(idle[True][0]["modules"].items())),
               max(r["warnings"] for r in idle[True] + idle[False]), none["warnings"]))
    # A goal not met is in its row (met: false) and the goal lines; the run itself worked.
    bj.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
