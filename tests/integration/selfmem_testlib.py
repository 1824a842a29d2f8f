# SPDX-License-Identifier: MIT
"""The agent under its own memory limit: one piniond in a v1 memory cgroup made for the run,
every module that holds per-pod state working on the same pods, and a burst of every pod
changing at once. Used by test_self_memory_limit.py and tests/bench/selfmem-bench.py.

  World(work, pods=250).start()   the servers and namespaces the agent works with, shared by
                                  every run: a real ZooKeeper, a real nginx over HTTPS serving
                                  CONFIGS signed bundles, one network namespace per pod.
  run_burst(world, limit)         one agent in a fresh cgroup of `limit` bytes, the burst, the
                                  checks of what it did; returns a Run (peak, failcnt, oom kills,
                                  what was done and what was refused, with the errors' texts).

The burst, all at once: every pod file rewritten (a new IP, so every workload certificate is
issued again; Ready flipped, so every registration changes), every bundle republished and a
refresh asked for, and every pod's CNI ADD (a real veth into its namespace) with CNI_PARALLEL
calls in flight. Then everything flips back (Ready again, bundles once more) and every pod's CNI
DEL runs. Nothing is retried by the harness: what the agent refused stays counted as refused.
"""

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import pinion_testlib as tl
import configsync_testlib as cs
import podnet_testlib as pn
import reclaim_testlib as rt
import zkreg_testlib as zt

MiB = 1 << 20
CONFIGS = 5
CNI_PARALLEL = 16
SERVERSET = "/selfmem/svc"
CGROUP_PREFIX = "/pinion-selfmem-%d" % os.getpid()


def available():
    """None, or why the scenario cannot run here."""
    if os.geteuid() != 0:
        return "needs root (cgroups, network namespaces)"
    if tl.sanitized_build():
        return ("AddressSanitizer's shadow memory and quarantine are charged to the agent's cgroup: "
                "the limits are the normal build's, checked in its suite")
    if not rt.v1_available():
        return "needs the v1 memory hierarchy at %s" % rt.V1_ROOT
    if not zt.zookeeper_available():
        return "needs ZooKeeper"
    if not os.path.exists(cs.NGINX):
        return "needs nginx"
    if not os.path.exists(pn.PINION_CNI):
        return "needs pinion-cni (built)"
    return None


class World:
    def __init__(self, work, pods=250):
        self.work = work
        self.n = pods
        self.closers = []
        self.netns = []
        self.generation = 0

    def start(self):
        self.zk = zt.ZkStandalone().start()
        self.closers.append(self.zk.close)
        self.kz = zt.kazoo_client(self.zk.hosts)
        self.closers.append(lambda: (self.kz.stop(), self.kz.close()))
        self.ca = cs.TestCA(os.path.join(self.work, "ca"))
        d = os.path.join(self.work, "nginx")
        os.makedirs(d, mode=0o755)
        self.nginx = cs.Nginx(d, self.ca)
        self.closers.append(self.nginx.stop)
        self.sign_key, self.public_key = cs.ed25519_keypair(self.work)
        self.publish()
        self.closers.append(self._delete_netns)
        for i in range(self.n):
            self.netns.append(pn.Netns("%s-m%d" % (pn.PREFIX, i)))
        self.cidr = pn.free_pod_cidr(prefix=23)
        return self

    def _delete_netns(self):
        for ns in self.netns:
            ns.delete()

    def publish(self):
        """Every bundle's next version: four files, one of them 32 KiB."""
        self.generation += 1
        g = self.generation
        for c in range(CONFIGS):
            files = {"app.conf": b"generation %d\n" % g, "data/blob": os.urandom(32 << 10),
                     "data/small": b"x" * 512, "limits.yaml": b"max: %d\n" % (g * 7)}
            cs.write_bundle(self.nginx.root, "c%d" % c, files, "v%d" % g, sign_key=self.sign_key)
        return "v%d" % g

    def members(self):
        if not self.kz.exists(SERVERSET):
            return []
        return zt.endpoints(self.kz, SERVERSET)

    def close(self):
        for c in reversed(self.closers):
            try:
                c()
            except Exception as e:  # noqa: BLE001 - cleanup goes on
                print("selfmem: cleanup: %s" % e)

    def sections(self, a):
        s = {
            "identity": {"signer": "local", "trust-domain": "selfmem.test", "ca-dir": os.path.join(a.dir, "ca"),
                         "pod-tls-dir": os.path.join(a.dir, "pod-tls")},
            "network": {"pod-cidr": self.cidr, "address-quarantine": "0"},
            "zookeeper": {"servers": self.zk.hosts, "write-qps": "5000", "flap-damping": "0", "drain-delay": "0"},
        }
        for c in range(CONFIGS):
            s["config.c%d" % c] = cs.config_section(self.nginx.url("/c%d/manifest.json" % c),
                                                    os.path.join(a.dir, "configs", "c%d" % c), self.ca,
                                                    **{"public-key": self.public_key})
        return s


def pod_uid(i):
    return "5e1f0000-0000-4000-8000-%012d" % i


def pod(i, gen, ready):
    ip = "10.99.%d.%d" % (gen % 200, i % 250 + 1) if i < 250 else "10.98.%d.%d" % (i // 250, i % 250 + 1)
    return tl.make_pod("p%d" % i, namespace="selfmem", uid=pod_uid(i), ip=ip, service_account="sa%d" % (i % 8),
                       conditions={"Ready": ready},
                       annotations={"pinion.io/identity": "true", "pinion.io/serverset": SERVERSET,
                                    "pinion.io/configs": ",".join("c%d" % c for c in range(CONFIGS))})


class Run:
    def __init__(self, limit):
        self.limit = limit
        self.peak = self.failcnt = self.oom_kills = 0
        self.alive = False
        self.cni_ok = self.cni_refused = 0
        self.cni_errors = {}        # message -> count
        self.cni_del_failed = 0
        self.converged = False      # everything done once the burst was over
        self.log_since_burst = ""
        self.parts = {}
        self.kmem_settled = self.kmem_attached = 0
        self.cni_after = None        # one ADD once every pod was deleted
        self.podnet = {}             # podnet's /v1/status entry at the end
        self.allocated_after_add = None  # podnet's allocated addresses once the ADDs were answered
        self.refused_metric = None   # pinion_memory_refused_total{work="cni-add"} at the end
        self.stop_problem = None     # what Agent.close() found wrong at the final stop
        self.notes = []

    def summary(self):
        return ("limit %d MiB: peak %.1f MiB, failcnt %d, oom kills %d, alive %s, CNI ADD %d ok / %d refused, "
                "converged %s" % (self.limit // MiB, self.peak / MiB, self.failcnt, self.oom_kills, self.alive,
                                  self.cni_ok, self.cni_refused, self.converged))


class Sampler(threading.Thread):
    """The cgroup's usage and its parts every 50 ms: the maximum of each part (they
    need not peak together)."""
    PARTS = ("total_rss", "total_cache", "total_mapped_file", "total_shmem", "total_inactive_file", "total_active_file")

    def __init__(self, g):
        super().__init__(daemon=True)
        self.g = g
        self.max = {}
        self.halt = threading.Event()

    def sample(self):
        try:
            st = self.g.stat()
            row = {k: st.get(k, 0) for k in self.PARTS}
            row["kmem"] = self.g.value("memory.kmem.usage_in_bytes")
            row["usage"] = self.g.value("memory.usage_in_bytes")
            # As the agent's memory guard counts it: the page cache the kernel can drop is free.
            row["in_use"] = row["usage"] - max(0, row["total_cache"] - row["total_mapped_file"] - row["total_shmem"])
        except (OSError, ValueError):
            return
        for k, v in row.items():
            self.max[k] = max(self.max.get(k, 0), v)

    def run(self):
        while not self.halt.wait(0.05):
            self.sample()


def oom_kills(g):
    for line in g.read("memory.oom_control").splitlines():
        k, _, v = line.partition(" ")
        if k == "oom_kill":
            return int(v)
    return 0


def write_pods(a, pods):
    """Every pod file at once (each atomically, as the kubelet's static pods would be)."""
    for i, p in enumerate(pods):
        a.write_pod("p%d" % i, p)


def cni_all(world, a, command):
    conf = pn.pinion_conf(a)

    def one(i):
        return pn.cni(a, command, container_id="%064x" % (0x5e1f0000 + i), netns=world.netns[i], conf=conf,
                      args=pn.k8s_args("selfmem", "p%d" % i, pod_uid(i)))
    with concurrent.futures.ThreadPoolExecutor(CNI_PARALLEL) as ex:
        return list(ex.map(one, range(world.n)))


def converged(world, a, gen_version, ready, ip_gen, cni_ips=None):
    """Everything the last burst asked for is in place. A pod attached by podnet has the
    address podnet gave it (cni_ips: index -> address), the others the one in their file."""
    st = a.status()
    mods = {m["name"]: m for m in st["modules"]}
    if any(mods[m]["state"] != "running" for m in ("identity", "zkreg", "configsync", "podnet")):
        return False
    ids = a.get_json("/v1/identity")
    want_ips = {pod_uid(i): (cni_ips or {}).get(i) or pod(i, ip_gen, ready)["status"]["podIP"] for i in range(world.n)}
    issued = {w["uid"]: w for w in ids.get("workloads", []) if w.get("state") == "issued"}
    if len(issued) != world.n or any(want_ips[u] not in json.dumps(w.get("sans", [])) for u, w in issued.items()):
        return False
    for c in range(CONFIGS):
        if tl.unix_request(a.socket, "GET", "/v1/configs/c%d" % c).body.get("version") != gen_version:
            return False
    want_members = sorted("%s:8080" % ip for ip in want_ips.values()) if ready else []
    return world.members() == want_members


def run_burst(world, limit, settle_timeout=60, agent=None):
    """agent: more [agent] keys (memory-watermark=100% turns the guard off)."""
    r = Run(limit)
    g = rt.MemCgroup("%s-%d" % (CGROUP_PREFIX, limit // MiB)).create(limit=limit)
    a = tl.Agent(config={"agent": dict({"log-level": "info"}, **(agent or {}))})
    sampler = mark = None
    try:
        for section, keys in world.sections(a).items():
            a.sections[section] = keys
        a.write_config()
        a.cgroup = g.dir
        ip_gen = world.generation
        write_pods(a, [pod(i, ip_gen, True) for i in range(world.n)])
        a.start(timeout=60)
        version = "v%d" % world.generation
        tl.wait_until(lambda: converged(world, a, version, True, ip_gen), timeout=90, interval=0.5,
                      desc="the first %d pods settled" % world.n)
        r.kmem_settled = g.value("memory.kmem.usage_in_bytes")
        g.reset_peak()
        sampler = Sampler(g)
        sampler.start()
        mark = a.log_mark()

        # The burst: pods, bundles and CNI ADDs at once.
        version = world.publish()
        ip_gen += 1
        cni_results = []
        t = threading.Thread(target=lambda: cni_results.extend(cni_all(world, a, "ADD")))
        t.start()
        write_pods(a, [pod(i, ip_gen, False) for i in range(world.n)])
        for c in range(CONFIGS):
            a.request("POST", "/v1/configs/c%d/refresh" % c)
        t.join()
        cni_ips = {}
        for i, res in enumerate(cni_results):
            if res.rc == 0:
                r.cni_ok += 1
                cni_ips[i] = res.ip()
            else:
                r.cni_refused += 1
                msg = (res.json or {}).get("msg", "") + ": " + (res.json or {}).get("details", res.stderr.strip())
                r.cni_errors[msg] = r.cni_errors.get(msg, 0) + 1
        r.allocated_after_add = pn.podnet_status(a)["details"]["pool"]["allocated"]
        # ... and back.
        version = world.publish()
        write_pods(a, [pod(i, ip_gen, True) for i in range(world.n)])
        for c in range(CONFIGS):
            a.request("POST", "/v1/configs/c%d/refresh" % c)
        try:
            tl.wait_until(lambda: converged(world, a, version, True, ip_gen, cni_ips), timeout=settle_timeout, interval=0.5)
            r.converged = True
        except Exception as e:  # noqa: BLE001 - reported, the caller decides
            r.notes.append(str(e))
        r.kmem_attached = g.value("memory.kmem.usage_in_bytes")
        for res in cni_all(world, a, "DEL"):
            r.cni_del_failed += res.rc != 0
        # Below the watermark again: a pod is attached (and detached) as before.
        one = pn.cni(a, "ADD", container_id="%064x" % 0x5e1f0000, netns=world.netns[0],
                     args=pn.k8s_args("selfmem", "p0", pod_uid(0)))
        r.cni_after = one
        if one.rc == 0:
            pn.cni(a, "DEL", container_id="%064x" % 0x5e1f0000, netns=world.netns[0],
                   args=pn.k8s_args("selfmem", "p0", pod_uid(0)))
        r.podnet = pn.podnet_status(a)
        r.refused_metric = a.metrics().value("pinion_memory_refused_total", work="cni-add") or 0
        r.alive = a.running()
    except (OSError, AssertionError, tl.http.client.HTTPException) as e:
        # The agent gone mid-run (the OOM killer): what is left is counted below.
        r.notes.append("run stopped: %r" % e)
    finally:
        if mark is not None:
            with open(a.log_file, "rb") as f:
                f.seek(mark)
                r.log_since_burst = f.read().decode("utf-8", "replace")
        if sampler:
            sampler.halt.set()
            r.parts = sampler.max
        r.peak = g.peak()
        r.failcnt = g.failcnt()
        r.oom_kills = oom_kills(g)
        r.alive = r.alive and a.running()
        r.log_tail = a.log_tail(60) if a.proc else ""
        r.stop_problem = a.close()
        g.kill_all()
        g.remove()
    return r


def shipped_limits():
    """{where: bytes} of the memory limits the unit and the DaemonSet ship."""
    units = {"M": MiB, "Mi": MiB, "G": 1024 * MiB, "Gi": 1024 * MiB}
    with open(os.path.join(tl.SRCDIR, "units", "piniond.service.in")) as f:
        unit = f.read()
    with open(os.path.join(tl.SRCDIR, "units", "kubernetes", "daemonset.yaml")) as f:
        ds = f.read()
    out = {}
    for key in ("MemoryHigh", "MemoryMax"):
        m = re.search(r"^%s=(\d+)(M|G)$" % key, unit, re.M)
        assert m, "no %s= in the unit" % key
        out[key] = int(m.group(1)) * units[m.group(2)]
    m = re.search(r"limits:\n\s+memory: (\d+)(Mi|Gi)\n", ds)
    assert m, "no limits.memory in the DaemonSet"
    out["DaemonSet limits.memory"] = int(m.group(1)) * units[m.group(2)]
    return out
