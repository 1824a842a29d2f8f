#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""soak: a long churn run of one piniond, watching for leaks, RSS growth and descriptor growth.

    tests/bench/soak.py [--events 100000] [--rate 2000] [--max-pods 300] [--seed 1]
                        [--bounce-every 5000] [--modules zkreg,identity,configsync] [--settle 11]
                        [--valgrind] [--json FILE]
    make bench-soak     # in the build directory (SOAK_FLAGS='--events 20000')

The scenario
  The test apiserver (tests/fakes/kube_apiserver.py, in this process, TLS + token, its history
  bounded so it compacts) holds this node's pods; the agent watches it and also reads a pods-dir.
  --events changes are made at up to --rate per second, drawn with --seed: pods added (up to
  --max-pods live), updated (Ready flipped, an annotation or a label changed, the IP moved) and
  deleted on the apiserver, and every 50th event a static pod file written, rewritten or removed.
  Every --bounce-every events the server is disturbed, in turn: every watch cut abruptly; a
  refused-connection outage of a second; the history compacted so the agent's resume gets 410 and
  it relists; the next lists answering 500. At the end the agent must hold exactly the pods the
  server and the pods-dir hold.
  --modules (default: each whose server is installed) has the other modules work on the same
  churn: zkreg registers the pods (they carry pinion.io/serverset) in a real ZooKeeper that is
  restarted as one more kind of disturbance, and at the end ZooKeeper must hold exactly one
  member per Ready pod; identity (local CA) issues a certificate to every third pod and drops it
  with the pod; configsync fetches a bundle from a real nginx (HTTPS) that changes every 1,000
  events, and nginx is restarted as another disturbance; at the end the last version is in place.

What is measured
  The agent's VmRSS, its RssAnon (heap and anonymous maps: what a leak grows; VmRSS also counts
  library pages touched as new code paths run) and open descriptors, sampled every 0.5 s.
  "Warm-up" ends after 20% of the events; the end sample is taken after the convergence checks
  and --settle seconds of idleness (one heap-trim period of the agent). The table gives RSS and
  descriptors at the end of warm-up, their maximum after it, at the end, and the ratio end / warm-up (the peer of this benchmark is the agent itself, earlier in
  the same run). Under an ASan build LeakSanitizer checks for leaks at exit (exit status 23 and a
  report on stderr), with --valgrind the agent runs under valgrind --leak-check=full.

Exit status 0 when the agent converged, exited cleanly with no leak report and its descriptors
at the end are no more than at warm-up plus 2; 1 otherwise.
"""

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import threading
import time

import kazoo.exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "fakes"))

import pinion_testlib as tl  # noqa: E402
from kube_apiserver import FakeApiserver, make_pod  # noqa: E402
from benchjson import BenchJson  # noqa: E402
import configsync_testlib as cs  # noqa: E402
import zkreg_testlib as zt  # noqa: E402

MODULES = ("zkreg", "identity", "configsync")

NODE = "soak-node"
TOKEN = "soak-token"


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def rss_kib(pid):
    return status_kib(pid, "VmRSS")


def rss_anon_kib(pid):
    """The private anonymous part of the RSS (heap, anonymous maps): what a leak would grow.
    VmRSS also counts the shared libraries' pages, touched as new code paths run."""
    return status_kib(pid, "RssAnon")


def pss_kib(pid):
    """The proportional set size (/proc/PID/smaps_rollup): a shared page counts 1/N for N
    processes mapping it. Read once at the end: reading smaps walks the page tables."""
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


class Sampler(threading.Thread):
    def __init__(self, pid, period=0.5):
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.samples = []  # (t, events_done, rss_kib, fds, rss_anon_kib)
        self.events_done = 0
        self.stop = threading.Event()

    def sample(self):
        try:
            self.samples.append((time.monotonic(), self.events_done, rss_kib(self.pid), fd_count(self.pid),
                                 rss_anon_kib(self.pid)))
        except (FileNotFoundError, ProcessLookupError):
            pass

    def run(self):
        while not self.stop.wait(self.period):
            self.sample()


class Churn:
    """Draws the changes and applies them to the fake and the pods-dir."""

    def __init__(self, fake, agent, rng, max_pods, servers=None):
        self.fake, self.agent, self.rng, self.max_pods = fake, agent, rng, max_pods
        self.servers = servers or {}  # "zookeeper" / "nginx" -> an object with restart()
        self.live = {}  # name -> pod dict on the apiserver
        self.static = {}  # file name -> pod name in the pods-dir
        self.serial = 0
        self.counts = {"add": 0, "update": 0, "delete": 0, "static": 0, "bounce": 0}

    def _ip(self):
        return "10.%d.%d.%d" % (self.rng.randrange(1, 250), self.rng.randrange(0, 250), self.rng.randrange(1, 250))

    def apiserver_event(self):
        r = self.rng.random()
        if not self.live or (len(self.live) < self.max_pods and r < 0.4):
            self.serial += 1
            name = "soak-%06d" % self.serial
            annotations = {"pinion.io/serverset": "/soak/%d" % (self.serial % 7)}
            if self.serial % 3 == 0:
                annotations["pinion.io/identity"] = "true"
            pod = make_pod(name, node=NODE, ip=self._ip(), ready=self.rng.random() < 0.5,
                           labels={"app": "soak"}, annotations=annotations)
            self.fake.add_pod(pod)
            self.live[name] = pod
            self.counts["add"] += 1
        elif r < 0.8:
            name = self.rng.choice(list(self.live))
            what = self.rng.randrange(4)

            def change(p):
                if what == 0:
                    cond = p["status"].setdefault("conditions", [{"type": "Ready", "status": "False"}])
                    cond[0]["status"] = "False" if cond[0]["status"] == "True" else "True"
                elif what == 1:
                    p["metadata"].setdefault("annotations", {})["pinion.test/gen"] = str(self.serial)
                elif what == 2:
                    p["metadata"].setdefault("labels", {})["rev"] = str(self.rng.randrange(1000))
                else:
                    ip = self._ip()
                    p["status"]["podIP"] = ip
                    p["status"]["podIPs"] = [{"ip": ip}]
                return p
            self.live[name] = self.fake.patch_pod("default", name, change)
            self.counts["update"] += 1
        else:
            name = self.rng.choice(list(self.live))
            self.fake.delete_pod("default", name)
            del self.live[name]
            self.counts["delete"] += 1

    def static_event(self):
        r = self.rng.random()
        if not self.static or (len(self.static) < 20 and r < 0.5):
            self.serial += 1
            fname, name = "s%06d" % self.serial, "static-%06d" % self.serial
            self.agent.write_pod(fname, tl.make_pod(name, annotations={"pinion.test/gen": "0"}))
            self.static[fname] = name
        elif r < 0.8:
            fname = self.rng.choice(list(self.static))
            self.agent.write_pod(fname, tl.make_pod(self.static[fname], annotations={"pinion.test/gen": str(self.serial)}))
        else:
            fname = self.rng.choice(list(self.static))
            os.unlink(self.agent.pod_path(fname))
            del self.static[fname]
        self.counts["static"] += 1

    def bounce(self):
        kinds = 4 + len(self.servers)
        kind = self.counts["bounce"] % kinds
        self.counts["bounce"] += 1
        if kind >= 4:
            sorted(self.servers.items())[kind - 4][1].restart()
        elif kind == 0:
            self.fake.close_watches(abrupt=True)
        elif kind == 1:
            self.fake.outage("refuse")
            time.sleep(1.0)
            self.fake.recover()
        elif kind == 2:
            self.fake.compact()
            self.fake.close_watches(abrupt=False)
        else:
            self.fake.inject("500", count=3, verbs=["list"])
            self.fake.close_watches(abrupt=True)

    def expected(self):
        return sorted(["default/" + n for n in self.live] + ["default/" + n for n in self.static.values()])

    def expected_members(self):
        """{serverset path: sorted endpoints} of the Ready apiserver pods (static pods carry no
        serverset annotation)."""
        want = {}
        for p in self.live.values():
            conditions = p["status"].get("conditions") or []
            if conditions and conditions[0]["status"] != "True":
                continue
            path = p["metadata"]["annotations"]["pinion.io/serverset"]
            want.setdefault(path, []).append("%s:8080" % p["status"]["podIP"])
        return {k: sorted(v) for k, v in want.items()}


class NginxServer:
    """configsync's server: a real nginx over HTTPS; restart() keeps its port."""

    def __init__(self, work):
        self.ca = cs.TestCA(os.path.join(work, "ca"))
        d = os.path.join(work, "nginx")
        os.makedirs(d, mode=0o755)
        self.nginx = cs.Nginx(d, self.ca)
        self.version = 0

    def publish(self):
        self.version += 1
        cs.write_bundle(self.nginx.root, "soak", {"app.conf": b"generation %d\n" % self.version,
                                                   "data/blob": os.urandom(2048)}, "v%d" % self.version)

    def restart(self):
        self.nginx.restart()

    def close(self):
        self.nginx.stop()


class ZooKeeperServer:
    def __init__(self):
        # kazoo logs every dropped connection on stderr; the restarts are on purpose.
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        self.zk = zt.ZkStandalone().start()
        self.kz = zt.kazoo_client(self.zk.hosts)

    def restart(self):
        self.zk.restart()

    def members(self):
        try:
            return self._members()
        except kazoo.exceptions.SessionExpiredError:
            # A restart that outlasted this reader's own session (a loaded machine): a new
            # session reads the same tree.
            self.kz.stop()
            self.kz.close()
            self.kz = zt.kazoo_client(self.zk.hosts)
            return self._members()

    def _members(self):
        out = {}
        if not self.kz.exists("/soak"):
            return out
        for child in self.kz.get_children("/soak"):
            endpoints = zt.endpoints(self.kz, "/soak/" + child)
            if endpoints:
                out["/soak/" + child] = sorted(endpoints)
        return out

    def close(self):
        try:
            self.kz.stop()
            self.kz.close()
        finally:
            self.zk.close()


def available_modules():
    have = []
    if zt.zookeeper_available():
        have.append("zkreg")
    have.append("identity")  # the local CA needs nothing outside the agent
    if os.path.exists(cs.NGINX):
        have.append("configsync")
    return have


def agent_pods(agent):
    return sorted(p["namespace"] + "/" + p["name"] for p in agent.get_json("/v1/pods")["pods"])


def run(args, out=sys.stdout):
    tl.require_binary(tl.PINIOND)
    if args.valgrind:
        # pinion_testlib reads PINION_VALGRIND when it is imported, which was before this: set
        # what it derived from it (and the environment, for anything started later).
        os.environ["PINION_VALGRIND"] = "1"
        tl.VALGRIND = True
        tl.TIMEOUT_SCALE = max(tl.TIMEOUT_SCALE, 10)
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="pinion-soak-")
    os.chmod(work, 0o755)
    fake = FakeApiserver(tls=True, token=TOKEN, history_limit=20000, bookmark_interval=5.0).start()
    agent = sampler = None
    servers = {}
    result = {"events": args.events, "seed": args.seed, "modules": ["apiserver"] + args.modules}
    try:
        token_file = os.path.join(work, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        config = {
            "agent": {"log-level": "info", "stop-timeout": "5s"},
            "apiserver": {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
                          "qps": "50", "burst": "100", "backoff-initial": "100ms", "backoff-max": "1s",
                          "watch-timeout-min": "1m"}}
        if "zkreg" in args.modules:
            servers["zookeeper"] = ZooKeeperServer()
            config["zookeeper"] = {"servers": servers["zookeeper"].zk.hosts, "session-timeout": "4s",
                                   "write-qps": "2000", "flap-damping": "100ms", "drain-delay": "0"}
        if "identity" in args.modules:
            config["identity"] = {"signer": "local", "trust-domain": "soak.test",
                                  "ca-dir": os.path.join(work, "identity-ca"),
                                  "pod-tls-dir": os.path.join(work, "pod-tls")}
        if "configsync" in args.modules:
            servers["nginx"] = NginxServer(work)
            servers["nginx"].publish()
            config["config.soak"] = cs.config_section(servers["nginx"].nginx.url("soak/manifest.json"),
                                                      os.path.join(work, "configs", "soak"), servers["nginx"].ca,
                                                      interval="2s")
        agent = tl.Agent(config=config, node_name=NODE)
        agent.start(timeout=tl.T(30))
        sampler = Sampler(agent.proc.pid)
        sampler.sample()
        sampler.start()
        churn = Churn(fake, agent, rng, args.max_pods, servers)
        warm_at = int(args.events * 0.2)
        t0 = time.monotonic()
        for i in range(args.events):
            if i % 50 == 49:
                churn.static_event()
            else:
                churn.apiserver_event()
            if args.bounce_every and i % args.bounce_every == args.bounce_every - 1:
                churn.bounce()
            if "nginx" in servers and i % 1000 == 999:
                servers["nginx"].publish()
            sampler.events_done = i + 1
            if i + 1 == warm_at:
                # Warm-up includes the reads the end checks make (the first answer of a size
                # grows buffers once): the end compares like with like.
                agent_pods(agent)
                agent.metrics()
                if "nginx" in servers:
                    cs.get_config(agent, "soak")
                sampler.sample()
            # Pace to --rate: sleep when ahead of schedule.
            ahead = t0 + (i + 1) / args.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            if i % 1000 == 999:
                agent.check_alive()
        churn_seconds = time.monotonic() - t0

        # Converged: the agent holds exactly what the server and the pods-dir hold.
        want = churn.expected()
        tl.wait_until(lambda: agent_pods(agent) == want, tl.T(60), desc="agent converged on %d pods" % len(want))
        if "zookeeper" in servers:
            want_members = churn.expected_members()
            tl.wait_until(lambda: servers["zookeeper"].members() == want_members, tl.T(90),
                          desc="ZooKeeper holds one member per Ready pod")
            result["zookeeper_members"] = sum(len(v) for v in want_members.values())
        if "nginx" in servers:
            last = "v%d" % servers["nginx"].version
            agent.request("POST", "/v1/configs/soak/refresh")
            tl.wait_until(lambda: cs.get_config(agent, "soak")["version"] == last, tl.T(60),
                          desc="config soak at %s" % last)
            result["config_versions"] = servers["nginx"].version
        if "identity" in args.modules:
            m = agent.metrics()
            result["certificates_issued"] = int(sum(v for (_, _, v) in m.find(
                "pinion_identity_certificates_issued_total")))
            want_certs = sum(1 for p in churn.live.values() if "pinion.io/identity" in p["metadata"]["annotations"])
            tl.wait_until(lambda: agent.metrics().value("pinion_identity_workload_certificates") == want_certs,
                          tl.T(60), desc="one workload certificate per pod that asks (%d)" % want_certs)
        # The end sample once the agent has been idle for one heap-trim period (agent/manager.c
        # trims every 10 s): what it holds, not what the convergence checks just allocated.
        time.sleep(getattr(args, "settle", 0))
        sampler.sample()
        result["pss_kib_end"] = pss_kib(agent.proc.pid)
        sampler.stop.set()
        sampler.join(2)

        samples = sampler.samples
        warm = [s for s in samples if s[1] >= warm_at] or samples[-1:]
        w, end = warm[0], samples[-1]
        after = [s for s in samples if s[1] >= warm_at]
        result.update({
            "churn_seconds": round(churn_seconds, 1),
            "events_per_second": round(args.events / churn_seconds),
            "counts": churn.counts,
            "pods_at_end": len(want),
            "rss_kib": {"start": samples[0][2], "warm": w[2], "max_after_warm": max(s[2] for s in after),
                        "end": end[2]},
            "fds": {"start": samples[0][3], "warm": w[3], "max_after_warm": max(s[3] for s in after), "end": end[3]},
            "rss_anon_kib": {"start": samples[0][4], "warm": w[4], "max_after_warm": max(s[4] for s in after),
                             "end": end[4]},
            "apiserver_requests": len(fake.requests()),
        })
        result["rss_end_over_warm"] = round(end[2] / max(w[2], 1), 3)
        result["converged"] = True
    except AssertionError:
        # Not converged: what the agent said is the only clue left once its directory is gone.
        if agent:
            out.write("--- agent log, last lines ---\n%s\n" % agent.log_tail(120))
            if "zookeeper" in servers:
                try:
                    regs = agent.get_json("/v1/registrations")
                    states = {}
                    for reg in regs["registrations"]:
                        states[reg["state"]] = states.get(reg["state"], 0) + 1
                    out.write("registrations by state: %r; session %s\n" % (states, regs.get("session")))
                except Exception as e:  # noqa: BLE001 (a diagnostic only)
                    out.write("registrations unreadable: %s\n" % e)
        raise
    finally:
        problem = agent.close() if agent else None
        fake.stop()
        for server in servers.values():
            server.close()
        tl.shutil.rmtree(work, ignore_errors=True)
    result["exit_problem"] = problem
    result["ok"] = bool(result.get("converged")) and problem is None and \
        result["fds"]["end"] <= result["fds"]["warm"] + 2
    print_table(result, out)
    if args.json:
        write_json(args, result, sampler.samples if sampler else [], warm_at)
    return result


def leak_checker(args):
    """What checks for leaks at the agent's exit in this run: valgrind, LeakSanitizer (an ASan
    build: its runtime's symbols are in the binary) or nothing."""
    if args.valgrind:
        return "valgrind --leak-check=full"
    with open(tl.PINIOND, "rb") as f:
        return "LeakSanitizer (ASan build)" if b"__asan_init" in f.read() else None


def write_json(args, r, samples, warm_at):
    """The common schema (tests/bench/benchjson.py) on top of the fields above, with the samples
    as series. The peer of every figure is the agent itself at the end of warm-up."""
    checker = leak_checker(args)
    r["leak_checker"] = checker
    bj = BenchJson(args.name, "Soak: %d pod changes with server disturbances%s" % (
        r["events"], " (%s)" % checker if checker else ""))
    if "rss_kib" in r:
        m, f = r["rss_kib"], r["fds"]
        warm = "same agent at the end of warm-up (%d events)" % warm_at
        # Under a leak checker the RSS is the checker's too (valgrind's shadow memory, ASan's
        # quarantine), so the no-growth goal is judged on the plain run only.
        bj.row("VmRSS at the end", m["end"], m["warm"], warm, "KiB",
               goal=None if checker else "no growth after warm-up (<= 1.05)",
               met=None if checker else m["end"] <= m["warm"] * 1.05)
        bj.row("VmRSS, max after warm-up", m["max_after_warm"], m["warm"], warm, "KiB")
        a = r["rss_anon_kib"]
        bj.row("RssAnon (heap and anonymous maps) at the end", a["end"], a["warm"], warm, "KiB")
        if r.get("pss_kib_end"):
            bj.row("Pss at the end (smaps_rollup)", r["pss_kib_end"], unit="KiB")
        # The last sample taken while changes were still being made, apart from the end (after
        # the convergence wait): a growth that only shows at the end is not a growth per change.
        during = [smp for smp in samples if warm_at <= smp[1] < r["events"]]
        if during:
            bj.row("VmRSS, last sample while changes were made (%d events)" % during[-1][1], during[-1][2],
                   m["warm"], warm, "KiB")
        bj.row("open descriptors at the end", f["end"], f["warm"], warm, "", goal="flat (<= warm-up + 2)",
               met=f["end"] <= f["warm"] + 2)
        bj.row("open descriptors, max after warm-up", f["max_after_warm"], f["warm"], warm, "")
        bj.row("changes per second (paced to --rate %g)" % args.rate, r["events_per_second"], unit="/s")
    if checker:
        bj.row("leak report at exit (%s)" % checker, None, unit="", goal="none", met=r["exit_problem"] is None)
        bj.note("The agent ran under %s: its RSS includes the checker's own memory, so the RSS goal is "
                "judged in the plain run; the descriptors and the leak report are this run's." % checker)
    warm_t = next((s[0] for s in samples if s[1] >= warm_at), None)
    bj.note("Agent: %s. Exit: %s; converged on %d pods; changes: %s." % (
        tl.PINIOND, r["exit_problem"] or "clean (SIGTERM, status 0, no leak report)", r.get("pods_at_end", 0),
        ", ".join("%s %d" % kv for kv in r.get("counts", {}).items())))
    if samples:
        t0 = samples[0][0]
        xs = [round(s[0] - t0, 2) for s in samples]
        marks = [] if warm_t is None else [(round(warm_t - t0, 2), "end of warm-up")]
        bj.series("agent VmRSS over the run (warm-up ends at event %d)" % warm_at, "seconds", "KiB",
                  [("VmRSS", xs, [s[2] for s in samples]), ("RssAnon", xs, [s[4] for s in samples])],
                  marks=marks)
        bj.series("agent open descriptors over the run", "seconds", "descriptors",
                  [("fds", xs, [s[3] for s in samples])], kind="step", marks=marks)
        bj.series("changes made over the run", "seconds", "changes", [("changes", xs, [s[1] for s in samples])])
    bj.write(args.json, ok=r["ok"], extra=r)


def print_table(r, out):
    out.write("soak: %d events (%s) in %.1fs, %d/s; %d pods at the end; seed %d; modules %s\n" % (
        r["events"], ", ".join("%s %d" % kv for kv in r.get("counts", {}).items()), r.get("churn_seconds", 0),
        r.get("events_per_second", 0), r.get("pods_at_end", 0), r["seed"], ",".join(r["modules"])))
    if "zookeeper_members" in r:
        out.write("zookeeper: %d members at the end, one per Ready pod\n" % r["zookeeper_members"])
    if "certificates_issued" in r:
        out.write("identity: %d certificates issued\n" % r["certificates_issued"])
    if "config_versions" in r:
        out.write("configsync: %d bundle versions published, the last one in place\n" % r["config_versions"])
    if "rss_kib" in r:
        out.write("| | start | end of warm-up | max after warm-up | end | end / warm-up |\n|---|---|---|---|---|---|\n")
        m, f = r["rss_kib"], r["fds"]
        out.write("| VmRSS KiB | %d | %d | %d | %d | %.3f |\n" % (m["start"], m["warm"], m["max_after_warm"], m["end"],
                                                             r["rss_end_over_warm"]))
        a = r["rss_anon_kib"]
        out.write("| RssAnon KiB | %d | %d | %d | %d | %.3f |\n" % (a["start"], a["warm"], a["max_after_warm"],
                                                               a["end"], a["end"] / max(a["warm"], 1)))
        out.write("| open fds | %d | %d | %d | %d | %.3f |\n" % (f["start"], f["warm"], f["max_after_warm"], f["end"],
                                                              f["end"] / max(f["warm"], 1)))
    out.write("exit: %s\n" % (r["exit_problem"] or "clean (SIGTERM, status 0, no leak report)"))
    out.write("result: %s\n" % ("ok" if r["ok"] else "FAILED"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=100000)
    ap.add_argument("--rate", type=float, default=2000, help="changes per second at most")
    ap.add_argument("--max-pods", type=int, default=300)
    ap.add_argument("--bounce-every", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--settle", type=float, default=11,
                    help="seconds the agent idles before the end sample (one heap-trim period)")
    ap.add_argument("--modules", default=",".join(available_modules()),
                    help="besides apiserver: any of %s (default: those whose servers are installed)" % ",".join(MODULES))
    ap.add_argument("--valgrind", action="store_true")
    ap.add_argument("--json", help="the figures (common schema, tests/bench/benchjson.py) and every field")
    ap.add_argument("--name", default="soak", help="the benchmark's name in the JSON (default soak)")
    args = ap.parse_args(argv)
    if args.events < 10 or args.rate <= 0:
        ap.error("--events must be >= 10 and --rate > 0")
    args.modules = [m for m in args.modules.split(",") if m]
    if set(args.modules) - set(MODULES):
        ap.error("--modules: unknown %s" % ",".join(sorted(set(args.modules) - set(MODULES))))
    return 0 if run(args)["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
