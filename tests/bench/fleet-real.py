#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""fleet-real: N real piniond processes against the test apiserver through an outage, compared
with the fleet simulation (tests/sim/fleet-sim --policy pinion) run with the same parameters.

    tests/bench/fleet-real.py [--agents 100] [--outage 60s] [--no-status-writes] [--md F] [--csv F]
    make bench-fleet            # in the build directory: fleet-real.md, fleet-real.csv

The scenario
  One test apiserver (tests/fakes/kube_apiserver.py, out of process: TLS, a bearer token file)
  holding --pods-per-node pods for each of the nodes node-000 ... node-(N-1), and each node's
  Node object with a spec.podCIDR, as a real cluster has (the agent reads its Node once at start;
  a fake without Nodes made every agent ask again on its own backoff after the recovery, which
  doubled the recovery's requests against the simulation); N piniond, each in
  its own temp dir with its own config, socket and node-name and the same [apiserver] settings
  (log-level=info, log-format=json, stderr to a file). When every agent holds a watch (the fake
  counts N open watches), a short steady state, then the outage of T, then recovery, until every
  agent is synced again or --time-limit.

How the outage is made and how requests are counted (--outage-mode)
  refuse (default)  the fake closes its listening socket: every attempt is a connection refused
      at once, and the open watches are cut. Refused connections never reach the fake's request
      log, so the attempts are counted by the agents themselves: every failed attempt logs one
      "Watch failed: ... / List of ... failed: ...; retrying in" warning with a microsecond
      timestamp (log-format=json), which gives the per-second series; the total is checked
      against the sum over agents of pinion_apiserver_requests_total{code="error"} (/metrics),
      taken before the outage and at the end. This is the simulation's --down-mode refused.
  5xx  every API request gets 503 (no Retry-After) for T and the watches are cut abruptly; the
      attempts are counted in the fake's request log. An immediate failure as well, so also
      --down-mode refused (a 503 just costs a TLS handshake and a response).
  Recovery: the fake records one change (a pod on no node) and compacts its history to it before
  it answers again, so every resume from before the outage gets 410 and relists, as the
  simulation's default --gone-after-restart 1 (an apiserver restarting with an empty watch
  cache). --no-compact keeps the history (every resume succeeds; sim --gone-after-restart 0).
  After the recovery every request reaches the fake and is counted in its log; an agent is synced
  again at its first watch from a resourceVersion at or after the compaction point (the one
  after its relist), the simulation's "holds an established watch".

Status writes (--status-writes, the default; --no-status-writes for the reads alone)
  Every pod carries spec.readinessGates [{conditionType: pinion.io/ready}], the annotation
  pinion.io/configs: app and hostNetwork (no CNI ADD happens here, so the network is not one of
  its jobs); every agent has a [config.app] syncing one bundle from ONE real nginx on loopback
  (tests/integration/configsync_testlib.py, --config-interval 5s), [apiserver] event-batch
  (--event-batch 5s). So each pod's condition is written True once its config is there, and the
  agent announces ConfigSynced to the pods declaring the config when it takes a version.
  Steady state: once every agent holds a watch, the script waits until every pod's condition is
  True and no agent has a write to go (writesQueued, events queued or gathered: /v1/status), and
  counts the writes the test apiserver took for those pods (condition PATCHes, Event POSTs and
  series PATCHes) per pod; then --added-pods (1) more pods start on each running agent, counted
  the same way. The outage: the bundle becomes v2 as it begins, so every agent has an Event per
  pod to write while the apiserver is away; the attempts are the agents' own
  pinion_apiserver_requests_total{resource="pods/status"|"events",code="error"|"503"} deltas.
  After the recovery the run also waits (within --time-limit) until every pod has its v2 Event
  and no agent has a write to go; the writes per second stand beside the reads (the CSV's
  measured_writes, the markdown's per-second table), with the first, median and last write, the
  peak second, the agents drained, the pods with their v2 Event (once) and the events dropped
  (pinion_apiserver_events_total{result=dropped-*}). The reads' comparison with the simulation
  counts reads only (the status writes' requests carry their own resource label).

The simulation is run once per seed (--runs, seeds 1..R) with --agents N --outage T --policy
pinion --down-mode refused --capacity 1e9 (a small fleet never loads the model) --rtt 1ms and
the same --pods-per-node, backoff, token-bucket and watch-timeout settings. The table gives the
measured value, the mean over the seeds, their range, the ratio measured / mean, and whether the
measurement lies inside the seeds' range widened by 2.5 standard deviations (of the seeds) plus
2% of the mean: the runs scatter by the backoff's jitter alone, and the real clock adds
milliseconds per attempt (event-loop latency, connect time, the outage switch), which is what
the 2% is for. The CSV holds the per-second series side by side (t from the outage start).

Everything (processes, temp dirs) is cleaned up on exit, on Ctrl-C and on SIGTERM; children get
PR_SET_PDEATHSIG (setpriv) so that even a SIGKILL of this script takes them down. Exit status:
0 when every agent recovered and the outage's request count agrees, 1 otherwise, 2 on bad usage.
"""

import argparse
import csv
import datetime
import json
import math
import os
import re
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("PINION_SRCDIR") or os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from agentsocket import unix_get  # noqa: E402
from benchjson import BenchJson  # noqa: E402
FAKE = os.path.join(SRCDIR, "tests", "fakes", "kube_apiserver.py")
TOKEN = "fleet-real-token"
SETPRIV = shutil.which("setpriv")
PDEATHSIG = [SETPRIV, "--pdeathsig", "KILL", "--"] if SETPRIV else []
SCRUB_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
             "LISTEN_FDNAMES", "JOURNAL_STREAM", "INVOCATION_ID", "NODE_NAME",
             "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "MANAGERPID")
ATTEMPT_FAILED = re.compile(r"^(Watch failed|List of .* failed): .*; retrying in ")
READ_RESOURCES = ("pods", "nodes")
WRITE_RESOURCES = ("pods/status", "events")
READY_GATE = "pinion.io/ready"
CONFIG_NAME = "app"
TOLERANCE_SD = 2.5
TOLERANCE_REL = 0.02


def log(msg):
    sys.stderr.write("fleet-real: %s\n" % msg)
    sys.stderr.flush()


def default_builddir():
    return os.path.abspath(os.environ.get("PINION_BUILDDIR") or os.path.join(SRCDIR, "build"))


def parse_duration(text):
    """"800ms", "30s", "2m", "1h", "250us", a bare number of seconds -> seconds."""
    m = re.match(r"^\s*([0-9]*\.?[0-9]+)\s*(us|ms|s|min|m|h|)\s*$", str(text))
    if not m:
        raise argparse.ArgumentTypeError("not a duration: %r" % text)
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1, "": 1, "min": 60, "m": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) * scale


def fmt_duration(seconds):
    """Seconds -> a duration both piniond's config and fleet-sim accept."""
    ms = int(round(seconds * 1000))
    if ms % 1000 == 0:
        return "%ds" % (ms // 1000)
    return "%dms" % ms


def clean_env():
    env = dict(os.environ)
    for k in SCRUB_ENV:
        env.pop(k, None)
    env.setdefault("LC_ALL", "C.UTF-8")
    return env


def parse_log_time(text):
    """"2026-11-21T11:49:17.503655Z" -> epoch seconds."""
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def terminate(proc, timeout):
    """SIGTERM, then SIGKILL after timeout; never raises."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except OSError:
        pass


# ---------------------------------------------------------------------------------------------
# The test apiserver, out of process

class Fake:
    def __init__(self, root, nodes, pods_per_node, status_writes=False):
        self.dir = os.path.join(root, "fake")
        os.makedirs(self.dir)
        self.token_file = os.path.join(root, "token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        self.pods_file = os.path.join(self.dir, "pods.json")
        sys.path.insert(0, os.path.dirname(FAKE))
        sys.dont_write_bytecode = True  # no __pycache__ in the source tree
        from kube_apiserver import make_pod  # noqa: E402 (only the pod maker; nothing starts)
        pods = []
        for i, node in enumerate(nodes):
            for k in range(pods_per_node):
                pod = make_pod("app-%s-%d" % (node, k), node=node,
                               ip="10.%d.%d.%d" % (i // 250, i % 250, k + 2),
                               labels={"app": "app-%d" % k})
                if status_writes:
                    gate_pod(pod)
                pods.append(pod)
        with open(self.pods_file, "w") as f:
            json.dump(pods, f)
        self.proc = None
        self.url = self.ca_file = self.control = None

    def start(self, timeout=30):
        self.stderr = open(os.path.join(self.dir, "fake.log"), "wb")
        cmd = PDEATHSIG + [sys.executable, FAKE, "--port", "0", "--tls", "--token-file",
                           self.token_file, "--pods", self.pods_file, "--workdir",
                           os.path.join(self.dir, "work"), "--print-url"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=clean_env(), start_new_session=True)
        lines = []
        deadline = time.monotonic() + timeout
        buf = b""
        while len(lines) < 2:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise RuntimeError("the test apiserver did not start (see %s/fake.log)" % self.dir)
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    continue
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    lines.append(line.decode())
        self.url, self.ca_file = lines[0].split()
        self.control = lines[1].split()[1]
        return self

    def ctl(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.control + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def state(self):
        return self.ctl("GET", "/_fake/state")

    def requests(self, since=None):
        q = "" if since is None else "?since=%.6f" % since
        return self.ctl("GET", "/_fake/requests" + q)["requests"]

    def cpu_seconds(self):
        try:
            with open("/proc/%d/stat" % self.proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    def stop(self):
        terminate(self.proc, 15)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()


# ---------------------------------------------------------------------------------------------
# Status writes: what every pod asks for, the config it waits on, how the writes are counted

def gate_pod(pod):
    """The pod asks for the pinion.io/ready condition and declares the config "app". It uses the
    host's network: no CNI ADD happens here, so a network job would hold the condition False."""
    pod["spec"]["readinessGates"] = [{"conditionType": READY_GATE}]
    pod["spec"]["hostNetwork"] = True
    pod["metadata"].setdefault("annotations", {})["pinion.io/configs"] = CONFIG_NAME
    return pod


class Bundles:
    """One real nginx on loopback (HTTPS, a throwaway CA) serving the config every agent syncs
    (tests/integration/configsync_testlib.py)."""

    def __init__(self, root):
        sys.path.insert(0, os.path.join(SRCDIR, "tests", "integration"))
        import configsync_testlib as lib  # noqa: E402 (only with --status-writes)
        self.lib = lib
        d = os.path.join(root, "nginx")
        os.makedirs(d)
        os.chmod(d, 0o755)
        self.ca = lib.TestCA(os.path.join(root, "ca"))
        self.nginx = lib.Nginx(d, self.ca)
        self.publish("v1")

    def publish(self, version):
        self.lib.write_bundle(self.nginx.root, CONFIG_NAME,
                              {"app.yaml": ("version: %s\n" % version).encode()}, version)

    def section(self, dest, interval):
        return self.lib.config_section(self.nginx.url("%s/manifest.json" % CONFIG_NAME), dest,
                                       self.ca, interval=interval)

    def stop(self):
        self.nginx.stop()


def write_kind(entry):
    """A request-log entry -> "status", "event-create", "event-patch" or None (a read)."""
    if entry["verb"] == "patch" and entry["path"].endswith("/status"):
        return "status"
    if "/events" in entry["path"] and entry["verb"] in ("create", "patch"):
        return "event-" + entry["verb"]
    return None


def write_pod(entry):
    """The pod a write is about: the path of a status PATCH, regarding.name of an Event POST
    (a series PATCH names only the Event: None)."""
    if entry["path"].endswith("/status"):
        return entry["path"].split("/")[-2]
    try:
        return json.loads(entry.get("body") or "{}").get("regarding", {}).get("name")
    except ValueError:
        return None


def condition_status(entry):
    try:
        for c in json.loads(entry.get("body") or "{}")["status"]["conditions"]:
            if c.get("type") == READY_GATE:
                return c.get("status")
    except (ValueError, KeyError, TypeError):
        pass
    return None


def parse_metrics(text):
    """Prometheus text -> [(name, {label: value}, value)]."""
    out = []
    for line in text.splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)', line)
        if m:
            labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', m.group(2) or ""))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def summed(samples, name, **where):
    return sum(v for n, labels, v in samples
               if n == name and all(labels.get(k) in (w if isinstance(w, tuple) else (w,))
                                    for k, w in where.items()))


# ---------------------------------------------------------------------------------------------
# The agents



class Agent:
    def __init__(self, root, node, fake, args, bundles=None):
        self.node = node
        self.dir = os.path.join(root, "agents", node)
        self.socket = os.path.join(self.dir, "run", "pinion.sock")
        self.log_file = os.path.join(self.dir, "piniond.log")
        self.config_file = os.path.join(self.dir, "pinion.conf")
        os.makedirs(os.path.join(self.dir, "pods.d"))
        with open(self.config_file, "w") as f:
            f.write("[agent]\nnode-name=%s\nstate-dir=%s\nruntime-dir=%s\nsocket=%s\npods-dir=%s\n"
                    "log-level=info\nlog-format=json\nstop-timeout=5s\n\n"
                    % (node, os.path.join(self.dir, "state"), os.path.join(self.dir, "run"),
                       self.socket, os.path.join(self.dir, "pods.d")))
            f.write("[apiserver]\nurl=%s\ntoken-file=%s\nca-file=%s\n" % (fake.url, fake.token_file,
                                                                           fake.ca_file))
            for key in ("qps", "burst", "backoff-initial", "backoff-max", "backoff-reset",
                        "backoff-jitter", "watch-timeout-min"):
                f.write("%s=%s\n" % (key, args.agent_keys[key]))
            if bundles:
                f.write("event-batch=%s\n" % args.event_batch)
                section = bundles.section(os.path.join(self.dir, "configs", CONFIG_NAME),
                                          args.config_interval)
                f.write("\n[config.%s]\n" % CONFIG_NAME)
                for key, value in section.items():
                    f.write("%s=%s\n" % (key, value))
        self.proc = None

    def start(self, piniond):
        with open(self.log_file, "ab") as err:
            self.proc = subprocess.Popen(PDEATHSIG + [piniond, "--config", self.config_file],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err, cwd=self.dir, env=clean_env(),
                                         start_new_session=True)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def metrics(self):
        status, text = unix_get(self.socket, "/metrics")
        if status != 200:
            raise RuntimeError("%s: GET /metrics answered %d" % (self.node, status))
        return parse_metrics(text)

    @staticmethod
    def by_code(samples, resources=READ_RESOURCES):
        """{code: n} of pinion_apiserver_requests_total for these resources, summed over verbs
        (the reads by default: the watches' pods and nodes, not the status writes)."""
        out = {}
        for name, labels, value in samples:
            if name == "pinion_apiserver_requests_total" and labels.get("resource") in resources:
                out[labels.get("code")] = out.get(labels.get("code"), 0) + value
        return out

    def apiserver_details(self):
        status, text = unix_get(self.socket, "/v1/status")
        if status != 200:
            raise RuntimeError("%s: GET /v1/status answered %d" % (self.node, status))
        for m in json.loads(text).get("modules", []):
            if m.get("name") == "apiserver":
                return m.get("details") or {}
        return {}

    def writes_pending(self):
        """Writes still to go: queued for the apiserver, or events still gathered for a pod's
        start (posted as one when event-batch ends)."""
        d = self.apiserver_details()
        ev = d.get("podEvents") or {}
        return int(d.get("writesQueued", 0)) + int(ev.get("queued", 0)) + int(ev.get("gathering", 0))

    def rss_kib(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def failed_attempts(self):
        """Timestamps of the failed connection attempts this agent logged."""
        out = []
        with open(self.log_file, "rb") as f:
            for raw in f:
                try:
                    e = json.loads(raw)
                except ValueError:
                    continue
                if e.get("module") == "apiserver" and e.get("level") == "warning" and \
                        ATTEMPT_FAILED.match(e.get("msg", "")):
                    out.append(parse_log_time(e["time"]))
        return out

    def log_tail(self, n=15):
        try:
            with open(self.log_file, "rb") as f:
                return b"".join(f.readlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""


def stop_agents(agents, timeout=10):
    live = [a for a in agents if a.alive()]
    for a in live:
        try:
            a.proc.send_signal(signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    for a in live:
        try:
            a.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            a.proc.kill()
            a.proc.wait()


# ---------------------------------------------------------------------------------------------
# The real run

def node_of(entry):
    sel = (entry.get("params") or {}).get("fieldSelector", "")
    m = re.search(r"spec\.nodeName=([^,]+)", sel)
    return m.group(1) if m else None


def rv_of(entry):
    try:
        return int((entry.get("params") or {}).get("resourceVersion", ""))
    except ValueError:
        return None


def real_run(args, root):
    nodes = ["node-%03d" % i for i in range(args.agents)]
    piniond = os.path.join(args.builddir, "piniond")
    if not os.access(piniond, os.X_OK):
        raise RuntimeError("%s is not built (PINION_BUILDDIR=%s)" % (piniond, args.builddir))
    fake = Fake(root, nodes, args.pods_per_node, args.status_writes)
    agents = []
    bundles = None
    res = {"agents": args.agents, "outage_mode": args.outage_mode}
    sw = res["status"] = {} if args.status_writes else None
    try:
        fake.start()
        if args.status_writes:
            bundles = Bundles(root)
            log("config %r v1 served by nginx at %s" % (CONFIG_NAME, bundles.nginx.url("")))
        # Every kubelet's node has its Node object, with the pod CIDR the controller-manager
        # allocated: the agent reads it once at start (podnet with no pod-cidr configured asks
        # for it). Without the Nodes, every agent would keep asking for a missing Node on its
        # own backoff, requests no real cluster sees and the simulation does not model.
        for i, node in enumerate(nodes):
            fake.ctl("POST", "/_fake/nodes/set",
                     {"name": node, "podCIDR": "10.%d.%d.0/24" % (64 + i // 256, i % 256)})
        log("test apiserver at %s (control %s), %d pods, %d nodes"
            % (fake.url, fake.control, args.agents * args.pods_per_node, len(nodes)))
        for node in nodes:
            agents.append(Agent(root, node, fake, args, bundles))
        t_start = time.monotonic()
        for a in agents:
            a.start(piniond)
            time.sleep(args.start_interval)
        # Synced: every agent holds a watch (the fake counts them open).
        deadline = time.monotonic() + args.sync_timeout
        while True:
            dead = [a for a in agents if not a.alive()]
            if dead:
                raise RuntimeError("piniond for %s exited with %s:\n%s"
                                   % (dead[0].node, dead[0].proc.returncode, dead[0].log_tail()))
            watches = fake.state()["watches"]
            if watches >= args.agents:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("only %d of %d agents hold a watch after %.0fs: the test "
                                   "apiserver may not keep this many watches"
                                   % (watches, args.agents, args.sync_timeout))
            time.sleep(0.2)
        res["startup_seconds"] = time.monotonic() - t_start
        watching = {node_of(e) for e in fake.requests() if e["verb"] == "watch"}
        missing = set(nodes) - watching
        if missing:
            raise RuntimeError("no watch from %s" % sorted(missing)[:5])
        log("%d agents synced in %.1fs" % (args.agents, res["startup_seconds"]))
        if sw is not None:
            status_steady(args, fake, agents, sw)
        log("steady state for %.0fs" % args.steady)
        time.sleep(args.steady)
        res["rss_kib_total"] = sum(a.rss_kib() for a in agents)
        res["watches_before"] = fake.state()["watches"]
        samples_before = [a.metrics() for a in agents]
        before = [Agent.by_code(m) for m in samples_before]
        cpu0 = fake.cpu_seconds()

        # The outage.
        t0 = time.time()
        if args.outage_mode == "refuse":
            fake.ctl("POST", "/_fake/outage", {"mode": "refuse"})
        else:
            fake.ctl("POST", "/_fake/inject", {"fault": "503", "count": None})
            fake.ctl("POST", "/_fake/close-watches", {"abrupt": True})
        log("outage (%s) for %.0fs" % (args.outage_mode, args.outage))
        if sw is not None:
            # A new version while the apiserver is away: every agent syncs it within its
            # interval and has a ConfigSynced Event per pod to write, which must wait.
            bundles.publish("v2")
            sw["t_v2"] = time.time() - t0
        while time.time() < t0 + args.outage:
            dead = [a for a in agents if not a.alive()]
            if dead:
                raise RuntimeError("piniond for %s exited during the outage:\n%s"
                                   % (dead[0].node, dead[0].log_tail()))
            time.sleep(min(0.2, max(0.0, t0 + args.outage - time.time())))

        # Recovery: one change and a compaction first (every old resume gets 410).
        compacted = None
        if args.compact:
            fake.ctl("POST", "/_fake/pods/add",
                     {"metadata": {"name": "fleet-real-outage-marker", "namespace": "default"},
                      "spec": {"nodeName": "no-such-node",
                               "containers": [{"name": "m", "image": "example/m:1"}]}})
            compacted = int(fake.ctl("POST", "/_fake/compact", {})["compacted"])
        # A request the test apiserver takes while the recovery call is under way is already
        # answered normally: it belongs after the recovery though it is logged before t_rec.
        t_clear = time.time()
        if args.outage_mode == "refuse":
            fake.ctl("POST", "/_fake/recover", {})
        else:
            fake.ctl("POST", "/_fake/clear-faults", {})
        t_rec = time.time()
        res.update(t0=t0, t_rec=t_rec, outage_real=t_rec - t0, compacted=compacted)
        log("recovered after %.3fs%s" % (t_rec - t0, " (history compacted at %d)" % compacted
                                          if compacted else ""))

        def healthy(e):
            if e["verb"] != "watch" or e.get("status") not in (200, None):
                return False
            return compacted is None or (rv_of(e) is not None and rv_of(e) >= compacted)

        synced_at = {}
        deadline = t_rec + args.time_limit
        writes_done = sw is None
        while True:
            for e in fake.requests(since=t_rec):
                n = node_of(e)
                if n and n not in synced_at and healthy(e):
                    synced_at[n] = e["time"]
            if not writes_done and len(synced_at) == args.agents:
                writes_done = writes_drained(args, fake, agents, sw)
            if (len(synced_at) == args.agents and writes_done) or time.time() > deadline:
                break
            dead = [a for a in agents if not a.alive()]
            if dead:
                raise RuntimeError("piniond for %s exited during the recovery:\n%s"
                                   % (dead[0].node, dead[0].log_tail()))
            time.sleep(0.5)
        t_end = time.time()
        log("%d of %d agents synced again %.1fs after the recovery"
            % (len(synced_at), args.agents, (max(synced_at.values()) - t_rec) if synced_at else 0))
        time.sleep(1.0)  # let the last answers land in the logs and metrics

        samples_after = [a.metrics() for a in agents]
        after = [Agent.by_code(m) for m in samples_after]
        if sw is not None:
            sw["pending_at_end"] = [a.writes_pending() for a in agents]
            sw["events_at_end"] = fake.ctl("GET", "/_fake/events")["items"]
        cpu1 = fake.cpu_seconds()
        entries = fake.requests()
        attempts = []
        for a in agents:
            attempts.extend(a.failed_attempts())
        res["watches_after"] = fake.state()["watches"]
        res["fake_cpu_seconds"] = (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None
        res["alive_at_end"] = sum(a.alive() for a in agents)
    finally:
        stop_agents(agents)
        fake.stop()
        if bundles:
            bundles.stop()

    # --- measure ---
    api = [e for e in entries if e["verb"] in ("list", "watch", "get")]
    # The outage's requests are those it failed (refused, or answered 503), wherever the few
    # milliseconds of switching the outage on and off put them.
    if args.outage_mode == "refuse":
        outage_times = [t for t in attempts if t >= t0]
        res["requests_outage_metrics"] = int(sum(a.get("error", 0) - b.get("error", 0)
                                                 for a, b in zip(after, before)))
        res["failed_after_recovery"] = sum(1 for t in attempts if t > t_rec)
        res["api_requests_during_outage"] = sum(1 for e in api if t0 <= e["time"] < t_rec)
        counted = outage_times + [e["time"] for e in api]
    else:
        outage_times = [e["time"] for e in api if e["time"] >= t0 and e.get("fault") == "503"]
        res["requests_outage_metrics"] = int(sum(a.get("503", 0) - b.get("503", 0)
                                                 for a, b in zip(after, before)))
        counted = [e["time"] for e in api]
    res["requests_outage"] = len(outage_times)
    res["mean_rate_outage"] = len(outage_times) / args.outage
    post = [e for e in api if e["time"] >= t_clear and e.get("fault") is None]
    last_sync = max(synced_at.values()) if synced_at else t_end
    res["requests_recovery"] = sum(1 for e in post if e["time"] <= last_sync)
    res["lists_after_recovery"] = sum(1 for e in post if e["verb"] == "list")
    res["node_gets_after_recovery"] = sum(1 for e in post if e["verb"] == "get")
    res["gone_after_recovery"] = sum(1 for e in post if e["verb"] == "watch" and compacted
                                     and rv_of(e) is not None and rv_of(e) < compacted)
    res["synced"] = len(synced_at)
    delays = sorted(t - t_rec for t in synced_at.values())
    res["sync_delays"] = delays
    if len(delays) == args.agents:
        res["sync_p50"] = percentile(delays, 0.50)
        res["sync_p99"] = percentile(delays, 0.99)
        res["sync_max"] = delays[-1]
    else:
        res["sync_p50"] = res["sync_p99"] = res["sync_max"] = None

    # Per-second windows from the outage start (window k covers [t0 + k, t0 + k + 1)).
    first = -int(args.steady)
    last = int(math.ceil(last_sync - t0)) if synced_at else int(math.ceil(t_end - t0))
    # The writes the test apiserver took (in 5xx mode it logs the outage's refused ones too:
    # those are in the outage's attempts, not here).
    writes = [e for e in entries if write_kind(e) and e["time"] >= t0 + first and e.get("fault") is None]
    if writes and sw is not None:
        last = max(last, int(math.ceil(max(e["time"] for e in writes) - t0)))
    series = {}
    for k in range(first, last + 1):
        series[k] = {"requests": 0, "synced": 0, "up": 1, "writes": 0, "lists": 0}
    for t in counted:
        k = int(math.floor(t - t0))
        if k in series:
            series[k]["requests"] += 1
    for e in writes:
        k = int(math.floor(e["time"] - t0))
        if k in series:
            series[k]["writes"] += 1
    for e in api:
        k = int(math.floor(e["time"] - t0))
        if e["verb"] == "list" and e.get("fault") is None and k in series:
            series[k]["lists"] += 1
    for k, row in series.items():
        end = t0 + k + 1
        if k < 0:
            row["synced"] = args.agents
        else:
            row["synced"] = sum(1 for t in synced_at.values() if t < end)
        row["up"] = 0 if (t0 + k < t_rec and end > t0) else 1
    res["series"] = series
    res["peak_rate_recovery"] = max((series[k]["requests"] for k in series
                                     if int(args.outage) <= k < int(args.outage) + 10), default=0)
    if sw is not None:
        status_measure(args, sw, entries, series, samples_before, samples_after,
                       dict(t0=t0, t_clear=t_clear, t_rec=t_rec, last_sync=last_sync))
    return res


# ---------------------------------------------------------------------------------------------
# Status writes: steady state, outage, recovery

def gated_pods(fake):
    return [p for p in fake.ctl("GET", "/_fake/pods")["items"]
            if any(g.get("conditionType") == READY_GATE
                   for g in p.get("spec", {}).get("readinessGates") or [])]


def ready_condition(pod):
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == READY_GATE:
            return c
    return None


def wait_written(fake, agents, names, timeout, what):
    """Until every pod in names has the condition True in the fake and no agent has a write to
    go (events gathered for a pod's start included)."""
    deadline = time.monotonic() + timeout
    while True:
        pods = {p["metadata"]["name"]: p for p in gated_pods(fake)}
        not_true = [n for n in names if (ready_condition(pods.get(n, {})) or {}).get("status") != "True"]
        pending = None
        if not not_true:
            pending = [a.node for a in agents if a.writes_pending() > 0]
            if not pending:
                return
        if time.monotonic() > deadline:
            raise RuntimeError("%s: %d pods without %s=True (%s), agents with writes to go: %s"
                               % (what, len(not_true), READY_GATE, not_true[:3],
                                  "?" if pending is None else pending[:3]))
        time.sleep(1.0)


def writes_for(entries, names):
    """The writes about these pods: {"status", "status_true", "status_false", "event-create",
    "event-patch", "failed"} counts."""
    names = set(names)
    out = {"status": 0, "status_true": 0, "status_false": 0, "event-create": 0, "event-patch": 0,
           "failed": 0}
    for e in entries:
        kind = write_kind(e)
        if not kind:
            continue
        pod = write_pod(e) if kind != "event-patch" else e["path"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
        if pod not in names:
            continue
        out[kind] += 1
        if kind == "status":
            cs = condition_status(e)
            out["status_true" if cs == "True" else "status_false"] += 1
        if not 200 <= (e.get("status") or 0) < 300:
            out["failed"] += 1
    out["total"] = out["status"] + out["event-create"] + out["event-patch"]
    return out


def status_steady(args, fake, agents, sw):
    """Every agent starts with its pods, then one more pod per node starts on the running fleet:
    the writes each costs, from the test apiserver's log."""
    initial = [p["metadata"]["name"] for p in gated_pods(fake)]
    t = time.monotonic()
    wait_written(fake, agents, initial, args.sync_timeout, "initial pods")
    sw["initial_settle_seconds"] = time.monotonic() - t
    entries = fake.requests()
    sw["initial_pods"] = len(initial)
    sw["initial_writes"] = writes_for(entries, initial)
    sw["initial_per_pod"] = sw["initial_writes"]["total"] / max(1, len(initial))
    sw["initial_events_per_pod"] = events_per_pod(fake.ctl("GET", "/_fake/events")["items"], initial)
    sw["events_expected"] = sw["initial_writes"]["event-create"] > 0
    log("initial pods: %d writes for %d pods (%.2f a pod), settled %.1fs after the watches"
        % (sw["initial_writes"]["total"], len(initial), sw["initial_per_pod"],
           sw["initial_settle_seconds"]))
    added = []
    if args.added_pods:
        since = time.time()
        for i, a in enumerate(agents):
            for k in range(args.added_pods):
                name = "new-%s-%d" % (a.node, k)
                pod = make_pod_for(name, a.node, "10.%d.%d.%d" % (i // 250, i % 250, 100 + k))
                fake.ctl("POST", "/_fake/pods/add", gate_pod(pod))
                added.append(name)
        t = time.monotonic()
        wait_written(fake, agents, added, args.sync_timeout, "pods added to the running fleet")
        sw["added_settle_seconds"] = time.monotonic() - t
        sw["added_writes"] = writes_for(fake.requests(since=since), added)
        sw["added_per_pod"] = sw["added_writes"]["total"] / len(added)
        log("pods added to the running fleet: %d writes for %d pods (%.2f a pod)"
            % (sw["added_writes"]["total"], len(added), sw["added_per_pod"]))
    sw["added_pods"] = len(added)
    sw["pods"] = initial + added


def make_pod_for(name, node, ip):
    from kube_apiserver import make_pod  # noqa: E402 (Fake put it on the path)
    return make_pod(name, node=node, ip=ip, labels={"app": "added"})


def events_per_pod(events, names):
    """{n: pods with n Events} over names."""
    count = {n: 0 for n in names}
    for ev in events:
        n = (ev.get("regarding") or {}).get("name")
        if n in count:
            count[n] += 1
    hist = {}
    for v in count.values():
        hist[v] = hist.get(v, 0) + 1
    return {str(k): v for k, v in sorted(hist.items())}


def v2_events(events):
    """{pod name: Events whose note is the outage's new version}."""
    out = {}
    for ev in events:
        if " version v2 " in (ev.get("note") or ""):
            n = (ev.get("regarding") or {}).get("name")
            out[n] = out.get(n, 0) + 1
    return out


def writes_drained(args, fake, agents, sw):
    """After the recovery: every pod has its v2 Event (when this build posts events) and no agent
    has a write to go."""
    if sw.get("events_expected"):
        got = v2_events(fake.ctl("GET", "/_fake/events")["items"])
        if any(n not in got for n in sw["pods"]):
            return False
    return all(a.writes_pending() == 0 for a in agents)


def status_measure(args, sw, entries, series, samples_before, samples_after, t):
    t0, t_rec = t["t0"], t["t_rec"]
    # The outage: the writes the agents attempted (and the apiserver never saw, or answered 503).
    failed_code = ("error",) if args.outage_mode == "refuse" else ("503",)
    for res_name in WRITE_RESOURCES:
        sw["outage_attempts_" + res_name.replace("/", "_")] = int(sum(
            summed(a, "pinion_apiserver_requests_total", resource=res_name, code=failed_code) -
            summed(b, "pinion_apiserver_requests_total", resource=res_name, code=failed_code)
            for a, b in zip(samples_after, samples_before)))
    sw["outage_attempts"] = sw["outage_attempts_pods_status"] + sw["outage_attempts_events"]
    sw["events_dropped"] = int(sum(
        summed(a, "pinion_apiserver_events_total", result=("dropped-spam", "dropped-rate", "dropped-queue"))
        for a in samples_after))
    # After the recovery: every write the apiserver took.
    post = [e for e in entries if write_kind(e) and e["time"] >= t["t_clear"] and e.get("fault") is None]
    sw["recovery_writes"] = writes_for(post, sw["pods"])
    sw["recovery_writes_ok"] = sum(1 for e in post if 200 <= (e.get("status") or 0) < 300)
    if post:
        times = sorted(e["time"] - t_rec for e in post)
        sw["recovery_first_write"], sw["recovery_last_write"] = times[0], times[-1]
        sw["recovery_write_p50"] = percentile(times, 0.5)
        sw["recovery_write_seconds"] = len({int(math.floor(x)) for x in times})
    else:
        sw["recovery_first_write"] = sw["recovery_last_write"] = sw["recovery_write_p50"] = None
        sw["recovery_write_seconds"] = 0
    rec = [k for k in series if k >= int(math.floor(t_rec - t0))]
    sw["recovery_peak_writes"] = max((series[k]["writes"] for k in rec), default=0)
    sw["recovery_peak_total"] = max((series[k]["writes"] + series[k]["requests"] for k in rec), default=0)
    peak_k = max(rec, key=lambda k: (series[k]["writes"] + series[k]["requests"], -k), default=None)
    sw["recovery_peak_second"] = peak_k
    sw["recovery_peak_split"] = (series[peak_k]["requests"], series[peak_k]["writes"]) if peak_k is not None else None
    sw["recovery_reads_peak"] = max((series[k]["requests"] for k in rec), default=0)
    # The same seconds in the simulation's cost units: a list 1 + 1 per object (the node's pods),
    # a watch request or a write 1.
    per_list = args.pods_per_node + args.added_pods
    cost = {k: (series[k]["requests"] + per_list * series[k]["lists"], series[k]["writes"]) for k in rec}
    sw["cost_per_list"] = 1 + per_list
    sw["recovery_reads_cost_peak"] = max((c[0] for c in cost.values()), default=0)
    peak_c = max(rec, key=lambda k: (sum(cost[k]), -k), default=None)
    sw["recovery_cost_peak"] = sum(cost[peak_c]) if peak_c is not None else 0
    sw["recovery_cost_peak_split"] = cost[peak_c] if peak_c is not None else None
    sw["recovery_cost_reads"] = sum(c[0] for c in cost.values())
    sw["recovery_cost_writes"] = sum(c[1] for c in cost.values())
    # Nothing lost: each pod's Event for v2 arrived, once.
    events = sw.pop("events_at_end")
    got = v2_events(events)
    sw["pods_with_v2_event"] = sum(1 for n in sw["pods"] if got.get(n))
    sw["pods_with_duplicate_v2_event"] = sum(1 for n in sw["pods"] if got.get(n, 0) > 1)
    sw["events_per_pod_at_end"] = events_per_pod(events, sw["pods"])
    sw["agents_drained"] = sum(1 for n in sw.pop("pending_at_end") if n == 0)


def percentile(sorted_values, q):
    """The sim's percentile: the value at rank ceil(q × n)."""
    k = int(math.ceil(q * len(sorted_values)))
    return sorted_values[max(k, 1) - 1]


# ---------------------------------------------------------------------------------------------
# The simulation

def sim_command(args, seed, csv_file, summary_file):
    k = args.agent_keys
    cmd = [args.sim, "--policy", "pinion", "--agents", str(args.agents),
           "--outage", fmt_duration(args.outage), "--pods-per-node", str(args.pods_per_node),
           "--capacity", "1e9", "--rtt", "1ms", "--down-mode", "refused",
           "--gone-after-restart", "1" if args.compact else "0",
           "--backoff-initial", k["backoff-initial"], "--backoff-max", k["backoff-max"],
           "--backoff-jitter", k["backoff-jitter"], "--backoff-reset", k["backoff-reset"],
           "--qps", k["qps"], "--burst", k["burst"], "--watch-timeout-min", k["watch-timeout-min"],
           "--time-limit", fmt_duration(args.time_limit), "--seed", str(seed), "--runs", "1",
           "--csv", csv_file, "--summary-csv", summary_file]
    if not args.compact:
        cmd += ["--cache-window", "24h"]  # the fake keeps its whole history
    return cmd


def sim_runs(args, root):
    runs = []
    d = os.path.join(root, "sim")
    os.makedirs(d, exist_ok=True)
    for seed in range(1, args.runs + 1):
        c, s = os.path.join(d, "series-%d.csv" % seed), os.path.join(d, "summary-%d.csv" % seed)
        cmd = sim_command(args, seed, c, s)
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr))
        with open(s) as f:
            row = list(csv.DictReader(f))[0]
        series = {}
        with open(c) as f:
            for r in csv.DictReader(f):
                series[int(round(float(r["t"])))] = {"requests": int(r["requests"]),
                                                     "synced": int(r["synced"]),
                                                     "up": int(r["server_up"])}

        def sec(v):
            v = float(v)
            return None if math.isinf(v) else v
        run = {"seed": seed, "requests_outage": int(row["requests_outage"]),
               "requests_recovery": int(row["requests_total"]) - int(row["requests_outage"]),
               "unsynced": int(row["unsynced"]), "falls": int(row["falls"]),
               "sync_p50": sec(row["sync_p50"]), "sync_p99": sec(row["sync_p99"]),
               "sync_max": sec(row["sync_max"]), "series": series}
        run["mean_rate_outage"] = run["requests_outage"] / args.outage
        run["peak_rate_recovery"] = max((series[k]["requests"] for k in series
                                         if int(args.outage) <= k < int(args.outage) + 10),
                                        default=0)
        runs.append(run)
        if seed == 1:
            args.sim_cmdline = " ".join(cmd[:cmd.index("--csv")])
    return runs


# ---------------------------------------------------------------------------------------------
# The comparison

METRICS = [
    ("requests_outage", "requests during the outage", "%d", "%.1f"),
    ("mean_rate_outage", "mean requests/s during the outage", "%.2f", "%.2f"),
    ("peak_rate_recovery", "peak requests/s in the first 10 s after recovery", "%d", "%.1f"),
    ("requests_recovery", "requests from recovery until every agent is synced", "%d", "%.1f"),
    ("sync_p50", "synced after recovery, p50 (s)", "%.1f", "%.1f"),
    ("sync_max", "synced after recovery, max (s)", "%.1f", "%.1f"),
]


def tolerance(values):
    """[lo, hi]: the seeds' range widened by TOLERANCE_SD standard deviations and
    TOLERANCE_REL of the mean."""
    mean = statistics.mean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    widen = TOLERANCE_SD * sd + TOLERANCE_REL * abs(mean)
    return min(values) - widen, max(values) + widen


def compare(real, runs):
    rows = []
    for key, label, mfmt, sfmt in METRICS:
        values = [r[key] for r in runs if r[key] is not None]
        m = real.get(key)
        row = {"key": key, "label": label, "measured": m}
        if values:
            row["sim_mean"] = statistics.mean(values)
            row["sim_min"], row["sim_max"] = min(values), max(values)
            row["sim_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
            row["lo"], row["hi"] = tolerance(values)
            row["ratio"] = (m / row["sim_mean"]) if m is not None and row["sim_mean"] else None
            row["agrees"] = m is not None and row["lo"] <= m <= row["hi"] and \
                len(values) == len(runs)
        else:
            row.update(sim_mean=None, sim_min=None, sim_max=None, sim_sd=None, lo=None, hi=None,
                       ratio=None, agrees=False)
        row["mfmt"], row["sfmt"] = mfmt, sfmt
        rows.append(row)
    return rows


def markdown(args, real, runs, rows):
    out = []
    out.append("# Real fleet vs simulation: %d piniond, %.0f s outage (%s)\n"
               % (args.agents, args.outage, args.outage_mode))
    k = args.agent_keys
    out.append("%d real `piniond` against the test apiserver (TLS, token; %d pods per node). "
               "`[apiserver]` backoff-initial=%s backoff-max=%s backoff-jitter=%s "
               "backoff-reset=%s qps=%s burst=%s watch-timeout-min=%s.\n"
               % (args.agents, args.pods_per_node, k["backoff-initial"], k["backoff-max"],
                  k["backoff-jitter"], k["backoff-reset"], k["qps"], k["burst"],
                  k["watch-timeout-min"]))
    if args.outage_mode == "refuse":
        how = ("the test apiserver's port refused connections; attempts counted from the agents' "
               "own logs (one \"retrying in\" warning per refused attempt, µs timestamps), "
               "checked against the sum of the reads' `pinion_apiserver_requests_total"
               "{resource=\"pods\"|\"nodes\",code=\"error\"}`: "
               "%d" % real["requests_outage_metrics"])
    else:
        how = ("every API request was answered 503 (no Retry-After); attempts counted in the "
               "test apiserver's request log (agents' `pinion_apiserver_requests_total"
               "{resource=\"pods\"|\"nodes\",code=\"503\"}`: %d)" % real["requests_outage_metrics"])
    out.append("Outage: %s. Real outage %.3f s. %s; after recovery every request is counted "
               "in the test apiserver's log, and an agent is synced at its first watch from a "
               "resourceVersion at or after the compaction point.\n"
               % (how, real["outage_real"],
                  "Recovery: history compacted, every resume from before gets 410 and relists"
                  if args.compact else "Recovery: history kept, resumes succeed"))
    out.append("Simulation: `%s`, seeds 1..%d (`--down-mode refused`: an attempt to a down "
               "apiserver fails at once).\n" % (args.sim_cmdline, args.runs))
    out.append("| quantity | measured | simulated (mean of %d seeds) | sim min – max "
               "| measured / sim | agrees |" % args.runs)
    out.append("|---|---:|---:|---:|---:|---|")
    for r in rows:
        def f(fmt, v):
            return "—" if v is None else fmt % v
        out.append("| %s | %s | %s | %s – %s | %s | %s |"
                   % (r["label"], f(r["mfmt"], r["measured"]), f(r["sfmt"], r["sim_mean"]),
                      f(r["mfmt"], r["sim_min"]), f(r["mfmt"], r["sim_max"]),
                      f("%.2f", r["ratio"]), "yes" if r["agrees"] else "**no**"))
    out.append("| lists after recovery | %d | %d (one relist per agent) | | | %s |"
               % (real["lists_after_recovery"], args.agents if args.compact else 0,
                  "yes" if real["lists_after_recovery"] == (args.agents if args.compact else 0)
                  else "**no**"))
    out.append("| Node GETs after recovery | %d | 0 (each agent read its Node before the outage) "
               "| | | %s |" % (real["node_gets_after_recovery"],
                              "yes" if real["node_gets_after_recovery"] == 0 else "**no**"))
    out.append("")
    out.append("\"agrees\": inside the seeds' range widened by %.1f standard deviations of the "
               "seeds plus %d%% of their mean. Agents synced again: %d/%d%s; 410s after "
               "recovery: %d; failed attempts after recovery: %s; piniond alive at the end: "
               "%d/%d. Steady state: %.0f MiB RSS for all agents (%.1f MiB each); the test "
               "apiserver used %s CPU seconds from the outage to the end."
               % (TOLERANCE_SD, TOLERANCE_REL * 100, real["synced"], args.agents,
                  "" if real["synced"] == args.agents else " (time limit)",
                  real["gone_after_recovery"], real.get("failed_after_recovery", "—"),
                  real["alive_at_end"], args.agents, real["rss_kib_total"] / 1024,
                  real["rss_kib_total"] / 1024 / args.agents,
                  "%.1f" % real["fake_cpu_seconds"] if real["fake_cpu_seconds"] is not None
                  else "?"))
    if real.get("status") is not None:
        out.append("")
        out.extend(status_markdown(args, real))
    return "\n".join(out) + "\n"


def status_ok(args, sw):
    """Every agent drained its writes, and (when this build posts events) every pod got its Event
    for the outage's version, once, with nothing dropped."""
    if sw is None:
        return True
    events_ok = not sw["events_expected"] or (sw["pods_with_v2_event"] == len(sw["pods"]) and
                                             sw["pods_with_duplicate_v2_event"] == 0)
    return sw["agents_drained"] == args.agents and events_ok and sw["events_dropped"] == 0


def status_markdown(args, real):
    sw = real["status"]
    n = len(sw["pods"])

    def split(w):
        return ("%d condition PATCHes (%d True, %d False), %d Event POSTs, %d series PATCHes%s"
                % (w["status"], w["status_true"], w["status_false"], w["event-create"],
                   w["event-patch"], ", %d refused" % w["failed"] if w["failed"] else ""))

    def sec(v):
        return "—" if v is None else "%.1f" % v
    out = ["## Status writes through the outage (%d agents)\n" % args.agents]
    out.append("Every pod carries `readinessGates: [{conditionType: %s}]` and `pinion.io/configs: %s` "
               "(and hostNetwork: no CNI ADD happens here); every agent syncs the config `%s` from "
               "one nginx on loopback (interval %s, `event-batch=%s`). The bundle's version changed "
               "to v2 %.1f s into the outage, so every agent had an Event per pod to write while "
               "the apiserver was away; the condition stayed True (the config stayed present). "
               "Writes are counted in the test apiserver's log (what it took) and, during the "
               "outage, by the agents' `pinion_apiserver_requests_total{resource=\"pods/status\"|"
               "\"events\",code=\"%s\"}`.\n"
               % (READY_GATE, CONFIG_NAME, CONFIG_NAME, args.config_interval, args.event_batch,
                  sw.get("t_v2", 0), "error" if args.outage_mode == "refuse" else "503"))
    if not sw["events_expected"]:
        out.append("**This build posted no Event at a pod's start** (no module announces pod "
                   "events): the event rows below are zero, not measured.\n")
    out.append("| quantity | measured | goal |")
    out.append("|---|---:|---|")
    out.append("| writes per pod start, agents starting with their pods (%d pods) | %.2f | ≤ 2 (%s) |"
               % (sw["initial_pods"], sw["initial_per_pod"], split(sw["initial_writes"])))
    if sw["added_pods"]:
        out.append("| writes per pod start, a pod started on a running agent (%d pods) | %.2f | ≤ 2 (%s) |"
                   % (sw["added_pods"], sw["added_per_pod"], split(sw["added_writes"])))
    out.append("| write attempts during the outage (%s) | %d | bounded by the backoff, not by the "
               "queue (%d condition, %d event) |"
               % ("refused" if args.outage_mode == "refuse" else "answered 503",
                  sw["outage_attempts"], sw["outage_attempts_pods_status"],
                  sw["outage_attempts_events"]))
    out.append("| writes after recovery | %d | one Event per pod (%d pods; %s) |"
               % (sw["recovery_writes"]["total"], n, split(sw["recovery_writes"])))
    out.append("| first / median / last write after recovery (s) | %s / %s / %s | spread by the "
               "jittered backoff |" % (sec(sw["recovery_first_write"]), sec(sw["recovery_write_p50"]),
                                       sec(sw["recovery_last_write"])))
    out.append("| seconds with writes after recovery | %d | |" % sw["recovery_write_seconds"])
    out.append("| peak writes/s after recovery | %d | |" % sw["recovery_peak_writes"])
    split_peak = sw["recovery_peak_split"] or (0, 0)
    out.append("| peak requests/s after recovery, reads + writes (reads, writes in that second) "
               "| %d (%d, %d) | not dominated by writes |"
               % (sw["recovery_peak_total"], split_peak[0], split_peak[1]))
    cs = sw["recovery_cost_peak_split"] or (0, 0)
    out.append("| peak offered cost after recovery, reads + writes (reads, writes), in the "
               "simulation's units (a list %d, a watch or write 1) | %d (%d, %d) | not dominated by "
               "writes (reads alone peak at %d) |"
               % (sw["cost_per_list"], sw["recovery_cost_peak"], cs[0], cs[1],
                  sw["recovery_reads_cost_peak"]))
    out.append("| offered cost from recovery to the end: reads, writes | %d, %d | |"
               % (sw["recovery_cost_reads"], sw["recovery_cost_writes"]))
    out.append("| agents with no write to go at the end | %d/%d | all |"
               % (sw["agents_drained"], args.agents))
    out.append("| pods with their v2 Event (more than one) | %d/%d (%d) | all, once |"
               % (sw["pods_with_v2_event"], n, sw["pods_with_duplicate_v2_event"]))
    out.append("| events dropped (spam, rate, queue) | %d | 0 (one Event a pod during the outage; 256 an agent can hold) |"
               % sw["events_dropped"])
    out.append("")
    out.append("Events per pod at the end (Events: pods): %s."
               % ", ".join("%s: %d" % kv for kv in sw["events_per_pod_at_end"].items()))
    out.append("")
    rows = [k for k in sorted(real["series"]) if k >= int(args.outage) - 1]
    last = max([k for k in rows if real["series"][k]["writes"] or real["series"][k]["requests"]],
               default=None)
    if last is not None:
        out.append("Per second from the outage's start (the outage ends at %.1f s):\n"
                   % real["outage_real"])
        out.append("| second | reads (lists) | writes | agents synced |")
        out.append("|---:|---:|---:|---:|")
        for k in rows:
            if k > last:
                break
            r = real["series"][k]
            out.append("| %d | %d (%d) | %d | %d |" % (k, r["requests"], r["lists"], r["writes"],
                                                      r["synced"]))
        out.append("")
    return out


def write_csv(path, args, real, runs):
    keys = set(real["series"])
    for r in runs:
        keys |= {k for k in r["series"] if k >= min(real["series"])}
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t", "measured_requests", "sim_requests_seed1", "sim_requests_mean",
                    "sim_requests_min", "sim_requests_max", "measured_synced",
                    "sim_synced_seed1", "sim_synced_mean", "measured_up", "sim_up",
                    "measured_writes"])
        for k in sorted(keys):
            m = real["series"].get(k)
            # A run that ended (every agent synced) sends nothing more and stays synced.
            sims = [r["series"].get(k, {"requests": 0, "synced": args.agents - r["unsynced"],
                                        "up": 1}) for r in runs]
            req = [s["requests"] for s in sims]
            w.writerow([k, m["requests"] if m else "", sims[0]["requests"],
                        "%.2f" % statistics.mean(req), min(req), max(req),
                        m["synced"] if m else "", sims[0]["synced"],
                        "%.1f" % statistics.mean(s["synced"] for s in sims),
                        m["up"] if m else "", sims[0]["up"], m["writes"] if m else ""])


def write_png(path, csv_path, args):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no matplotlib (python3-matplotlib): no plot")
        return False
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    t = [int(r["t"]) for r in rows]

    def col(name):
        return [float(r[name]) if r[name] != "" else float("nan") for r in rows]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    a1.fill_between(t, col("sim_requests_min"), col("sim_requests_max"), step="post",
                    alpha=0.25, color="tab:blue", label="simulated, seeds' range")
    a1.step(t, col("sim_requests_mean"), where="post", color="tab:blue", label="simulated, mean")
    a1.step(t, col("measured_requests"), where="post", color="tab:red", label="measured")
    a1.set_ylabel("requests / s")
    a1.legend()
    a1.set_title("%d piniond, %.0f s outage (%s): measured vs fleet-sim"
                 % (args.agents, args.outage, args.outage_mode))
    a2.step(t, col("sim_synced_mean"), where="post", color="tab:blue", label="simulated, mean")
    a2.step(t, col("measured_synced"), where="post", color="tab:red", label="measured")
    a2.set_ylabel("agents synced")
    a2.set_xlabel("seconds since the outage began")
    for ax in (a1, a2):
        ax.axvspan(0, args.outage, color="grey", alpha=0.15)
    a2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


# ---------------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="N real piniond against the test apiserver through an outage, compared with "
                    "tests/sim/fleet-sim (see the top of this file).")
    ap.add_argument("--agents", type=int, default=100, help="real piniond processes (default 100)")
    ap.add_argument("--outage", type=parse_duration, default=60.0, help="the outage T (60s)")
    ap.add_argument("--outage-mode", choices=("refuse", "5xx"), default="refuse",
                    help="refuse: connections refused, attempts counted by the agents; 5xx: 503 "
                         "to everything, counted by the fake (default refuse)")
    ap.add_argument("--no-compact", dest="compact", action="store_false",
                    help="keep the history at recovery (sim --gone-after-restart 0)")
    ap.add_argument("--pods-per-node", type=int, default=3)
    ap.add_argument("--steady", type=float, default=3.0,
                    help="seconds of steady state before the outage (default 3)")
    ap.add_argument("--time-limit", type=parse_duration, default=180.0,
                    help="give up this long after the recovery (default 180s)")
    ap.add_argument("--sync-timeout", type=float, default=None,
                    help="seconds for every agent to sync at start (default 30 + N/5)")
    ap.add_argument("--start-interval", type=float, default=0.01,
                    help="seconds between two agent starts (default 0.01)")
    for key, default in (("backoff-initial", "800ms"), ("backoff-max", "30s"),
                         ("backoff-reset", "2m"), ("backoff-jitter", "1.0"), ("qps", "5"),
                         ("burst", "10"), ("watch-timeout-min", "5m")):
        ap.add_argument("--" + key, default=default,
                        help="[apiserver] %s, also passed to the sim (default %s)" % (key, default))
    ap.add_argument("--status-writes", dest="status_writes", action="store_true", default=True,
                    help="every pod carries the pinion.io/ready readiness gate and declares the "
                         "config app, which every agent syncs from one nginx; the bundle changes "
                         "during the outage (default)")
    ap.add_argument("--no-status-writes", dest="status_writes", action="store_false",
                    help="plain pods, no config: the reads alone")
    ap.add_argument("--added-pods", type=int, default=1,
                    help="with --status-writes: pods started on each running agent before the "
                         "outage (default 1)")
    ap.add_argument("--config-interval", default="5s",
                    help="with --status-writes: [config.app] interval (default 5s)")
    ap.add_argument("--event-batch", default="5s",
                    help="with --status-writes: [apiserver] event-batch (default 5s)")
    ap.add_argument("--runs", type=int, default=10, help="simulation seeds (default 10)")
    ap.add_argument("--builddir", default=default_builddir(),
                    help="where piniond and tests/sim/fleet-sim are (PINION_BUILDDIR, default "
                         "build/)")
    ap.add_argument("--md", help="write the table here too")
    ap.add_argument("--csv", help="the per-second series, measured and simulated side by side")
    ap.add_argument("--png", help="a plot (python3-matplotlib)")
    ap.add_argument("--json", help="every figure, for tests")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs) for a post-mortem")
    args = ap.parse_args(argv)
    if args.agents < 1 or args.agents > 1000:
        ap.error("--agents must be in 1..1000")
    if args.runs < 2:
        ap.error("--runs must be at least 2 (the tolerance needs a spread)")
    if args.outage < 1:
        ap.error("--outage must be at least 1s")
    args.builddir = os.path.abspath(args.builddir)
    args.sim = os.path.join(args.builddir, "tests", "sim", "fleet-sim")
    if args.sync_timeout is None:
        args.sync_timeout = 30 + args.agents / 5
    args.agent_keys = {k: getattr(args, k.replace("-", "_")) for k in
                       ("backoff-initial", "backoff-max", "backoff-reset", "backoff-jitter",
                        "qps", "burst", "watch-timeout-min")}
    return args


def write_json(args, real, runs, rows, ok):
    """Every figure: the common schema (tests/bench/benchjson.py; the peer of each measured figure
    is the simulation's mean over the seeds, in the same run) with this script's own fields beside
    it (args, real, sim, and the comparison rows as "comparison")."""
    bj = BenchJson("fleet", "Fleet: %d real piniond through a %.0f s apiserver outage, against the simulation"
                   % (args.agents, args.outage))
    peer = "fleet-sim, mean of %d seeds" % args.runs
    for r in rows:
        if r["measured"] is None:
            continue
        goal = met = None
        if r["key"] == "requests_outage":
            goal, met = "inside the seeds' range widened by 2.5 sd + 2%", r["agrees"]
        bj.row(r["label"], r["measured"], None if r["sim_mean"] is None else round(r["sim_mean"], 3), peer, "",
               goal=goal, met=met)
    bj.row("agents synced again after recovery", real["synced"], args.agents, "agents started", "",
           goal="all", met=real["synced"] == args.agents)
    sw = real.get("status")
    if sw is not None:
        bj.row("status writes per pod start, agents starting with their pods", round(sw["initial_per_pod"], 3),
               None, "", "", goal="≤ 2", met=sw["initial_per_pod"] <= 2)
        if sw["added_pods"]:
            bj.row("status writes per pod start, a pod started on a running agent",
                   round(sw["added_per_pod"], 3), None, "", "", goal="≤ 2", met=sw["added_per_pod"] <= 2)
        bj.row("status write attempts during the outage", sw["outage_attempts"], None, "", "")
        bj.row("peak writes/s after recovery", sw["recovery_peak_writes"], None, "", "")
        bj.row("pods with their Event for the outage's version", sw["pods_with_v2_event"], len(sw["pods"]),
               "pods", "", goal="all" if sw["events_expected"] else None,
               met=(sw["pods_with_v2_event"] == len(sw["pods"])) if sw["events_expected"] else None)
    bj.note("Outage mode %s, %s; the measured/simulated rows agree when the measurement lies in the seeds' "
            "range widened by 2.5 standard deviations plus 2%% of the mean: %s." % (
                args.outage_mode, "history compacted at recovery (every resume gets 410)" if args.compact
                else "history kept",
                ", ".join("%s %s" % (r["key"], "yes" if r["agrees"] else "NO") for r in rows)))
    keys = sorted(real["series"])
    sims = [[r["series"].get(k, {"requests": 0, "synced": args.agents - r["unsynced"], "up": 1}) for r in runs]
            for k in keys]
    bj.series("requests per second (outage from 0 to %.0f s)" % args.outage, "seconds since the outage began",
              "requests / s",
              [("measured", keys, [real["series"][k]["requests"] for k in keys]),
               ("simulated, mean", keys, [round(statistics.mean(x["requests"] for x in sk), 2) for sk in sims])],
              marks=[(0, "outage"), (round(args.outage), "recovery")])
    if sw is not None:
        bj.series("status writes per second (the test apiserver took them)", "seconds since the outage began",
                  "writes / s", [("measured", keys, [real["series"][k]["writes"] for k in keys])],
                  marks=[(0, "outage"), (round(args.outage), "recovery")])
    bj.series("agents synced", "seconds since the outage began", "agents",
              [("measured", keys, [real["series"][k]["synced"] for k in keys]),
               ("simulated, mean", keys, [round(statistics.mean(x["synced"] for x in sk), 1) for sk in sims])],
              kind="step", marks=[(0, "outage"), (round(args.outage), "recovery")])
    bj.write(args.json, ok=ok, extra={
        "args": {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, bool, dict, type(None)))},
        "real": {k: v for k, v in real.items() if k != "series"},
        "sim": [{k: v for k, v in r.items() if k != "series"} for r in runs],
        "comparison": rows})


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        new = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        if new < need:
            log("warning: RLIMIT_NOFILE %d < %d; the test apiserver may run out of descriptors"
                % (new, need))


def on_signal(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv=None):
    args = parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if not os.access(args.sim, os.X_OK):
        log("%s is not built (make, or set PINION_BUILDDIR)" % args.sim)
        return 2
    # The fake holds a descriptor per agent connection, the children inherit the limit.
    raise_fd_limit(4 * args.agents + 256)
    root = tempfile.mkdtemp(prefix="pinion-fleet-")
    try:
        runs = sim_runs(args, root)
        real = real_run(args, root)
        rows = compare(real, runs)
        text = markdown(args, real, runs, rows)
        sys.stdout.write(text)
        if args.md:
            with open(args.md, "w") as f:
                f.write(text)
        if args.csv or args.png:
            csv_path = args.csv or os.path.join(root, "fleet-real.csv")
            write_csv(csv_path, args, real, runs)
            if args.png:
                write_png(args.png, csv_path, args)
        ok = real["synced"] == args.agents and real["alive_at_end"] == args.agents and \
            rows[0]["agrees"] and status_ok(args, real.get("status"))
        if args.json:
            write_json(args, real, runs, rows, ok)
        if not ok:
            log("FAILED: %d/%d synced, %d/%d alive, outage requests %s, status writes %s"
                % (real["synced"], args.agents, real["alive_at_end"], args.agents,
                   "agree" if rows[0]["agrees"] else "disagree",
                   "drained, nothing lost" if status_ok(args, real.get("status"))
                   else "NOT drained or an Event missing"))
        return 0 if ok else 1
    except KeyboardInterrupt as e:
        log("interrupted (%s); cleaning up" % (e.args[0] if e.args else "SIGINT"))
        return 130
    except RuntimeError as e:
        log("error: %s" % e)
        return 1
    finally:
        if args.keep:
            log("kept %s" % root)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
