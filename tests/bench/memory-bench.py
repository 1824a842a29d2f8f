#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""memory-bench: the agent's memory with every module configured, idle and with 320 identity
pods, beside the same agent with no module configured, measured in the same run.

    tests/bench/memory-bench.py [--pods 320] [--settle 5] [--json F]

Three agents, one after the other (never two at once: a second piniond would share the
library pages and halve their Pss), each started fresh from its own temp dir:
  none      no module configured: [agent] only (the peer);
  idle      every module configured and healthy: apiserver (the test apiserver, TLS, a token),
            identity (local CA), network (a pod CIDR), zookeeper (a real ZooKeeper on loopback),
            config (a signed bundle from a real nginx over HTTPS), reclaim (a v1 memory cgroup
            made for the run); measured once every module is running and the agent has been
            idle for --settle seconds;
  loaded    the same, plus --pods pods in the pods-dir annotated pinion.io/identity=true, each
            with its workload certificate issued; measured after --settle seconds.
Figures: VmRSS and RssAnon (/proc/PID/status), Pss, Pss_Anon and Pss_File
(/proc/PID/smaps_rollup): the median of 5 samples 0.5 s apart. Pss counts a page shared with
N processes as 1/N of it, so the file-backed part depends on what else runs on the machine
(another process with libcrypto mapped lowers it); Pss_Anon and RssAnon do not. The agent
gives its start-up file pages back once ready and 2 s later ([agent] release-startup-pages, on
by default), so
the figures are of what it touched again since; the log line and
pinion_startup_pages_released_bytes_total say how much it released.

Goals (the performance issue): Pss at most 5 MiB idle with every module configured, at most
7 MiB with 320 identity pods.
"""

import argparse
import json
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
from pinion_testlib import Agent, make_pod, unix_request  # noqa: E402

GOAL_IDLE_KIB = 5 * 1024
GOAL_LOADED_KIB = 7 * 1024


def status_kib(pid):
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


def sample(pid, n=5, interval=0.5):
    rows = []
    for i in range(n):
        if i:
            time.sleep(interval)
        rows.append(status_kib(pid))
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def modules_state(a):
    st = unix_request(a.socket, "GET", "/v1/status").body
    return {m["name"]: m for m in st["modules"]}


def wait_modules(a, names, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        mods = modules_state(a)
        states = {n: mods.get(n, {}).get("state") for n in names}
        if all(s == "running" for s in states.values()):
            return mods
        if time.monotonic() > deadline:
            raise RuntimeError("modules not running after %ds: %s\n%s" % (timeout, states, a.log_text()[-3000:]))
        time.sleep(0.1)


class World:
    """The servers every module talks to, shared by the idle and loaded agents."""

    def __init__(self, work):
        self.work = work
        self.closers = []

    def start(self):
        from zkreg_testlib import ZkStandalone
        from configsync_testlib import TestCA, Nginx, ed25519_keypair, write_bundle
        from reclaim_testlib import MemCgroup, v1_available
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

        self.fake = FakeApiserver(self.work)
        self.fake.start()
        self.closers.append(self.fake.stop)
        return self

    def sections(self, a):
        s = {
            "apiserver": {"url": self.fake.url, "ca-file": self.fake.ca_file, "token-file": self.fake.token_file},
            "identity": {"signer": "local", "trust-domain": "bench.example", "ca-dir": os.path.join(a.dir, "ca"),
                         "pod-tls-dir": os.path.join(a.dir, "pods-tls")},
            "network": {"pod-cidr": "10.251.0.0/16"},
            "zookeeper": {"servers": self.zk.hosts},
            "config.app": {"url": self.nginx.url("/app/manifest.json"), "dest": os.path.join(a.dir, "configs", "app"),
                           "ca-file": self.ca.ca_cert, "public-key": self.public_key, "interval": "1h"},
        }
        if self.cgroup:
            s["reclaim.bench"] = {"cgroup": self.cgroup.name, "high": "90%", "target": "80%"}
        return s

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


def measure(name, world, pods, settle):
    a = Agent(config={"agent": {"log-level": "info"}})
    try:
        if world:
            for section, keys in world.sections(a).items():
                a.sections[section] = keys
            a.write_config()
        a.start()
        if world:
            names = ["apiserver", "identity", "podnet", "zkreg", "configsync"] + (["reclaim"] if world.cgroup else [])
            wait_modules(a, names)
        for i, pod in enumerate(pods):
            with open(os.path.join(a.pods_dir, ".p%d.tmp" % i), "w") as f:
                json.dump(pod, f)
            os.rename(os.path.join(a.pods_dir, ".p%d.tmp" % i), os.path.join(a.pods_dir, "p%d.json" % i))
        if pods:
            deadline = time.monotonic() + 120
            while modules_state(a)["identity"]["details"].get("workloadsIssued") != len(pods):
                if time.monotonic() > deadline:
                    raise RuntimeError("%s: identities not issued after 120 s" % name)
                time.sleep(0.1)
        time.sleep(settle)
        res = sample(a.proc.pid)
        res["modules"] = {k: v.get("state") for k, v in modules_state(a).items()}
        res["released"] = (a.metrics().value("pinion_startup_pages_released_bytes_total") or 0) / 1024
        warnings = [line for line in a.log_text().splitlines() if "warning" in line.lower()]
        res["warnings"] = len(warnings)
        print("memory-bench: %-6s VmRSS %6d KiB  RssAnon %5d  Pss %5d  Pss_Anon %5d  Pss_File %5d  (warnings %d)"
              % (name, res["VmRSS"], res["RssAnon"], res["Pss"], res["Pss_Anon"], res["Pss_File"], len(warnings)))
        return res
    finally:
        a.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=320)
    ap.add_argument("--settle", type=float, default=5.0, help="idle seconds before sampling")
    ap.add_argument("--json")
    args = ap.parse_args()
    bj = BenchJson("memory", "Memory: every module configured, idle and with %d identity pods, "
                             "against the agent with no module" % args.pods)
    work = tempfile.mkdtemp(prefix="memory-bench-")
    world = World(work)
    try:
        world.start()
        none = measure("none", None, [], args.settle)
        idle = measure("idle", world, [], args.settle)
        loaded = measure("loaded", world, identity_pods(args.pods), args.settle)
    finally:
        world.close()
        shutil.rmtree(work, ignore_errors=True)

    for label, r, goal in (("idle, every module configured", idle, GOAL_IDLE_KIB),
                           ("%d identity pods, every module configured" % args.pods, loaded, GOAL_LOADED_KIB)):
        bj.row("Pss, %s" % label, r["Pss"], none["Pss"], "same agent, no module configured", "KiB",
               goal="<= %d MiB" % (goal // 1024), met=r["Pss"] <= goal)
        for k in ("Pss_Anon", "Pss_File", "RssAnon", "VmRSS"):
            bj.row("%s, %s" % (k, label), r[k], none[k], "same agent, no module configured", "KiB")
    bj.note("Each agent alone on the machine (no other piniond), median of 5 samples. Pss divides a shared "
            "page by the processes mapping it, so Pss_File moves with what else runs; Pss_Anon and RssAnon "
            "are the agent's own. Start-up file pages each agent gave back once ready: none %d KiB, "
            "idle %d KiB, loaded %d KiB. Modules: %s. Warnings logged: none %d, idle %d, loaded %d."
            % (none["released"], idle["released"], loaded["released"],
               ", ".join("%s %s" % kv for kv in sorted(idle["modules"].items())), none["warnings"],
               idle["warnings"], loaded["warnings"]))
    ok = idle["Pss"] <= GOAL_IDLE_KIB and loaded["Pss"] <= GOAL_LOADED_KIB
    print("")
    print("| figure | none | idle | loaded |")
    print("|---|---:|---:|---:|")
    for k in ("Pss", "Pss_Anon", "Pss_File", "RssAnon", "VmRSS"):
        print("| %s (KiB) | %d | %d | %d |" % (k, none[k], idle[k], loaded[k]))
    print("")
    print("goals: idle Pss <= 5 MiB: %s; loaded Pss <= 7 MiB: %s"
          % ("met" if idle["Pss"] <= GOAL_IDLE_KIB else "NOT met", "met" if loaded["Pss"] <= GOAL_LOADED_KIB else "NOT met"))
    bj.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
