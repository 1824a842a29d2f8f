#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""node-watch-fanout: what the Node watch of `[network] routing = nodes` costs real agents and
the apiserver, beside agents that watch their pods alone (`routing = none`), in the same run.

    tests/bench/node-watch-fanout.py [--agents 20] [--peers 5] [--nodes 2500] [--json F]
    make bench-node-watch      # in the build directory (root: network namespaces)

The scenario
  One test apiserver (tests/fakes/kube_apiserver.py, plain HTTP) holding --nodes Node objects as
  a kubelet writes them (labels, annotations, managedFields, five conditions, capacity,
  nodeInfo, --images container images; the size is printed), each with an InternalIP on one
  /16 and a /24 pod CIDR, and --pods-per-node pods for each agent's node. --agents piniond with
  `[network] routing = nodes` and --peers with `routing = none`, the same config otherwise; every
  agent runs in its own network namespace (podnet installs a route per Node there), all joined
  by a bridge in a hub namespace where the apiserver and this script run (the script re-executes
  itself inside it). Everything is created here and removed on exit, on failure and on SIGTERM.
  When every agent is synced (Node agents: a Node watch open and every route installed), two
  generators run: every Node's status is rewritten once per --status-period (the heartbeat
  times of its conditions and of its kubelet managedFields entry: nothing a route uses), i.e.
  nodes/period MODIFIED events to every Node watcher, and every pod changes once per
  --pod-period. After --warmup, the agents' counters and CPU are taken, and again after
  --duration.
  Then an apiserver restart: the test apiserver cuts every watch and refuses connections for
  --outage, then compacts its history (every resume gets 410, as after a restart with an empty
  watch cache), and the agents' requests until every agent is synced again are counted by
  resource (their own pinion_apiserver_requests_total), with the bytes of the lists.

Per agent it reports events/min and bytes/min by resource (bytes: events × the size of the
event on the wire, measured here; bookmarks not counted), requests/min, CPU (utime + stime from
/proc/PID/stat, and the scheduler's nanosecond runtime from /proc/PID/schedstat) and CPU per
1,000 Node events (the Node agents' CPU minus the peers', over the Node events they received),
and the ratios Node agent / peer. Exit status 0 when every agent synced and recovered, 1
otherwise, 2 on bad usage, 77 when not root or `ip` is missing.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("PINION_SRCDIR") or os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from agentsocket import unix_get  # noqa: E402
from benchjson import BenchJson  # noqa: E402

FAKE = os.path.join(SRCDIR, "tests", "fakes", "kube_apiserver.py")
TOKEN = "node-watch-fanout-token"
SETPRIV = shutil.which("setpriv")
PDEATHSIG = [SETPRIV, "--pdeathsig", "KILL", "--"] if SETPRIV else []
SCRUB_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
             "LISTEN_FDNAMES", "JOURNAL_STREAM", "INVOCATION_ID", "NODE_NAME",
             "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "MANAGERPID")
HUB_ADDR = "10.99.0.1"
BOOKMARK = "BOOKMARK"  # the type label of bookmarks in pinion_apiserver_watch_events_total
# The test apiserver binds loopback addresses only, a guard for tests in the host's namespace;
# here it runs in the hub namespace this script made, on the hub bridge's address, which only
# the agents' namespaces reach. This starts its main() with that address let through.
FAKE_ON_HUB = """
import os, sys
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
sys.dont_write_bytecode = True
import kube_apiserver as k
init = k.FakeApiserver.__init__
def init_on_hub(self, *a, host="127.0.0.1", **kw):
    init(self, *a, **kw)
    self.host = host
k.FakeApiserver.__init__ = init_on_hub
import kube_control
sys.exit(kube_control.main(sys.argv[1:]))
"""
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    sys.stderr.write("node-watch-fanout: %s\n" % msg)
    sys.stderr.flush()


def run(*cmd, check=True):
    return subprocess.run(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, check=check)


def clean_env():
    env = dict(os.environ)
    for k in SCRUB_ENV:
        env.pop(k, None)
    env.setdefault("LC_ALL", "C.UTF-8")
    return env


# ---------------------------------------------------------------------------------------------
# Objects as a kubelet and the controller-manager write them

def node_address(i):
    """The InternalIP of Node i: all on the hub's /16, so every peer is directly connected."""
    return "10.99.%d.%d" % (10 + i // 250, i % 250 + 1)


def node_pod_cidr(i):
    return "10.%d.%d.0/24" % (128 + i // 256, i % 256)


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def real_node(i, name, address, images, heartbeat):
    """A Node as a v1.29 kubelet on a cloud VM posts it, with kubeadm's and the
    controller-manager's fields: what a Node watch carries on a real cluster."""
    rnd = random.Random(i)
    created = rfc3339(1767225600 - 86400 * rnd.randint(1, 90))
    hb = rfc3339(heartbeat)
    zone = "zone-%s" % "abc"[i % 3]
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": "n2-standard-16", "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "n2-standard-16",
        "topology.kubernetes.io/region": "region-1", "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/region": "region-1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "node-pool": "pool-%d" % (i % 4), "pinion.test/segment": "l2-0",
    }
    annotations = {
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "csi.volume.kubernetes.io/nodeid": json.dumps({"pd.csi.storage.gke.io": "projects/p/zones/%s/instances/%s"
                                                        % (zone, name)}),
        "container.googleapis.com/instance_id": str(rnd.randint(10**18, 10**19)),
    }
    conditions = []
    for ctype, status, reason, msg in (
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status. AppArmor enabled"),
            ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route")):
        conditions.append({"type": ctype, "status": status, "lastHeartbeatTime": hb,
                           "lastTransitionTime": created, "reason": reason, "message": msg})
    resources = {"cpu": "16", "ephemeral-storage": "101430960Ki", "hugepages-1Gi": "0",
                 "hugepages-2Mi": "0", "memory": "65851340Ki", "pods": "110"}
    allocatable = dict(resources, cpu="15890m", memory="60913100Ki", **{"ephemeral-storage": "47093746742"})
    imgs = []
    for k in range(images):
        repo = "registry.example.com/team-%d/service-%d" % (k % 7, k)
        digest = "%064x" % rnd.getrandbits(256)
        imgs.append({"names": ["%s@sha256:%s" % (repo, digest), "%s:v1.%d.%d" % (repo, k, rnd.randint(0, 30))],
                     "sizeBytes": rnd.randint(5 * 10**6, 900 * 10**6)})
    fields_kubelet = {"f:metadata": {"f:annotations": {".": {}, "f:volumes.kubernetes.io/controller-managed-attach-detach": {}},
                                     "f:labels": {".": {}, **{"f:%s" % k: {} for k in labels}}},
                      "f:status": {"f:conditions": {'k:{"type":"%s"}' % c["type"]: {
                          ".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {},
                          "f:reason": {}, "f:status": {}, "f:type": {}} for c in conditions},
                          "f:images": {}, "f:nodeInfo": {"f:bootID": {}}, "f:allocatable": {}, "f:capacity": {}}}
    managed = [
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": created,
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}},
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": created,
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}},
                                                "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, 'v:"%s"' % node_pod_cidr(i): {}}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": hb,
         "fieldsType": "FieldsV1", "fieldsV1": fields_kubelet, "subresource": "status"},
    ]
    return {
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "uid": "%08x-%04x-4%03x-a%03x-%012x" % (rnd.getrandbits(32), rnd.getrandbits(16),
                                                                         rnd.getrandbits(12), rnd.getrandbits(12),
                                                                         rnd.getrandbits(48)),
                     "creationTimestamp": created, "labels": labels, "annotations": annotations,
                     "managedFields": managed},
        "spec": {"podCIDR": node_pod_cidr(i), "podCIDRs": [node_pod_cidr(i)],
                 "providerID": "gce://p/%s/%s" % (zone, name)},
        "status": {
            "capacity": resources, "allocatable": allocatable, "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "%032x" % rnd.getrandbits(128), "systemUUID": "%032x" % rnd.getrandbits(128),
                         "bootID": "%032x" % rnd.getrandbits(128), "kernelVersion": "6.1.0-18-cloud-amd64",
                         "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "containerd://1.7.13",
                         "kubeletVersion": "v1.29.4", "kubeProxyVersion": "v1.29.4", "operatingSystem": "linux",
                         "architecture": "amd64"},
            "images": imgs,
        },
    }


def wire_bytes(obj, etype="MODIFIED"):
    """Bytes of one watch event line as the test apiserver (and a real one) sends it."""
    return len(('{"type":"%s","object":' % etype).encode()) + \
        len(json.dumps(obj, separators=(",", ":")).encode()) + 2


# ---------------------------------------------------------------------------------------------
# The network: a hub namespace with a bridge (the apiserver, this script), one namespace per agent

class Netns:
    def __init__(self, tag):
        self.tag = tag
        self.hub = "pnfan-%s-hub" % tag
        self.agents = []

    def create_hub(self):
        run("ip", "netns", "add", self.hub)
        self.ip_hub("link", "set", "lo", "up")
        self.ip_hub("link", "add", "br0", "type", "bridge")
        self.ip_hub("addr", "add", HUB_ADDR + "/16", "dev", "br0")
        self.ip_hub("link", "set", "br0", "up")

    def ip_hub(self, *args):
        return run("ip", "-n", self.hub, *args)

    def add_agent(self, k, address):
        ns = "pnfan-%s-a%d" % (self.tag, k)
        self.agents.append(ns)
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", "v%d" % k, "netns", self.hub, "type", "veth", "peer", "name", "eth0", "netns", ns)
        self.ip_hub("link", "set", "v%d" % k, "master", "br0", "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "addr", "add", address + "/16", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        return ns

    def remove(self):
        for ns in self.agents + [self.hub]:
            run("ip", "netns", "del", ns, check=False)


# ---------------------------------------------------------------------------------------------
# Inside the hub: the test apiserver, the agents, the measurement

class Fake:
    def __init__(self, root):
        self.dir = os.path.join(root, "fake")
        os.makedirs(self.dir)
        self.token_file = os.path.join(root, "token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        self.proc = None

    def start(self, pods_file):
        self.stderr = open(os.path.join(self.dir, "fake.log"), "wb")
        cmd = PDEATHSIG + [sys.executable, "-c", FAKE_ON_HUB, FAKE, "--host", HUB_ADDR, "--port", "0", "--token-file",
                           self.token_file, "--pods", pods_file, "--workdir", os.path.join(self.dir, "work"),
                           "--print-url", "--bookmark-interval", "60"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=clean_env(), start_new_session=True)
        lines = [self.proc.stdout.readline().decode().strip() for _ in range(2)]
        if not all(lines):
            raise RuntimeError("the test apiserver did not start (see %s/fake.log)" % self.dir)
        self.url = lines[0].split()[0]
        self.control = lines[1].split()[1]

    def ctl(self, method, path, body=None, timeout=120):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.control + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def requests(self, since=None, verb=None):
        q = []
        if since is not None:
            q.append("since=%.6f" % since)
        if verb:
            q.append("verb=" + verb)
        return self.ctl("GET", "/_fake/requests" + ("?" + "&".join(q) if q else ""))["requests"]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()



def resource_of(req):
    """"pods" or "nodes" for a request to /api/v1/pods, /api/v1/nodes (and below)."""
    parts = req["path"].split("/")
    return "nodes" if "nodes" in parts[3:4] else "pods"


METRIC = re.compile(r'^(pinion_[a-z_]+)(?:\{([^}]*)\})?\s+(\S+)$')


class Agent:
    def __init__(self, root, k, name, address, routing, cidr, fake, args):
        self.k, self.name, self.address, self.routing = k, name, address, routing
        self.dir = os.path.join(root, "agents", name)
        self.socket = os.path.join(self.dir, "run", "pinion.sock")
        self.log_file = os.path.join(self.dir, "piniond.log")
        self.config_file = os.path.join(self.dir, "pinion.conf")
        os.makedirs(os.path.join(self.dir, "pods.d"))
        with open(self.config_file, "w") as f:
            f.write("[agent]\nnode-name=%s\nstate-dir=%s\nruntime-dir=%s\nsocket=%s\npods-dir=%s\n"
                    "log-level=info\nstop-timeout=5s\n\n"
                    % (name, os.path.join(self.dir, "state"), os.path.join(self.dir, "run"), self.socket,
                       os.path.join(self.dir, "pods.d")))
            f.write("[apiserver]\nurl=%s\ntoken-file=%s\n" % (fake.url, fake.token_file))
            for key in ("qps", "burst", "backoff-initial", "backoff-max", "watch-timeout-min"):
                f.write("%s=%s\n" % (key, getattr(args, key.replace("-", "_"))))
            f.write("\n[network]\npod-cidr=%s\nrouting=%s\n" % (cidr, routing))
        self.proc = None
        self.netns = None

    def start(self, piniond, netns):
        self.netns = netns
        with open(self.log_file, "ab") as err:
            self.proc = subprocess.Popen(["ip", "netns", "exec", netns] + PDEATHSIG + [piniond, "--config",
                                                                                       self.config_file],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                         cwd=self.dir, env=clean_env(), start_new_session=True)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def metrics(self):
        """{(name, labels): value} of the agent's pinion_* metrics."""
        status, text = unix_get(self.socket, "/metrics")
        if status != 200:
            raise RuntimeError("%s: GET /metrics answered %d" % (self.name, status))
        out = {}
        for line in text.splitlines():
            m = METRIC.match(line)
            if m:
                out[(m.group(1), m.group(2) or "")] = float(m.group(3))
        return out

    def cpu(self):
        """(utime + stime in seconds, scheduler runtime in seconds) of piniond."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = (int(fields[11]) + int(fields[12])) / CLK_TCK
        with open("/proc/%d/schedstat" % self.proc.pid) as f:
            ns = int(f.read().split()[0])
        return ticks, ns / 1e9

    def routes(self):
        out = run("ip", "-n", self.netns, "-4", "route", "show", "proto", "177", check=False).stdout
        return sum(1 for line in out.splitlines() if " via " in line)

    def log_tail(self, n=15):
        try:
            with open(self.log_file, "rb") as f:
                return b"".join(f.readlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def metric_sum(m, name, **labels):
    """Sum of a metric's samples whose labels include `labels`."""
    total = 0.0
    for (n, lab), v in m.items():
        if n != name:
            continue
        if all('%s="%s"' % (k, val) in lab for k, val in labels.items()):
            total += v
    return total


class Generator(threading.Thread):
    """Rewrites objects at a steady rate through the control API: fn(i) for i = 0, 1, ... every
    1/rate seconds (with catch-up), until stopped."""

    def __init__(self, rate, fn):
        super().__init__(daemon=True)
        self.rate, self.fn = rate, fn
        self.stopped = threading.Event()
        self.done = 0
        self.errors = 0

    def run(self):
        t0 = time.monotonic()
        while not self.stopped.is_set():
            due = t0 + self.done / self.rate
            wait = due - time.monotonic()
            if wait > 0 and self.stopped.wait(wait):
                break
            try:
                self.fn(self.done)
            except Exception:  # noqa: BLE001 -- counted and reported
                self.errors += 1
            self.done += 1

    def stop(self):
        self.stopped.set()
        self.join(10)


def wait_for(what, cond, timeout, agents, why=None):
    deadline = time.monotonic() + timeout
    said = time.monotonic()
    while True:
        dead = [a for a in agents if not a.alive()]
        if dead:
            raise RuntimeError("piniond for %s exited with %s:\n%s" % (dead[0].name, dead[0].proc.returncode,
                                                                       dead[0].log_tail()))
        if cond():
            return
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for %s%s" % (what, ": " + why["why"] if why else ""))
        if why and time.monotonic() - said > 10:
            log("waiting for %s: %s" % (what, why["why"]))
            said = time.monotonic()
        time.sleep(0.5)


def snapshot(agents):
    return {a.name: {"m": a.metrics(), "cpu": a.cpu(), "t": time.monotonic()} for a in agents}


def per_agent(agents, before, after, fn):
    return [fn(a, before[a.name], after[a.name]) for a in agents]


def hub_main(args, root, netns_names):
    piniond = os.path.join(args.builddir, "piniond")
    fake = Fake(root)
    n_agents = args.agents + args.peers
    names = ["node-%04d" % i for i in range(args.nodes)]
    # The agents take the first Nodes: agent k is Node k, at its namespace's address.
    now = time.time()
    nodes = [real_node(i, names[i], node_address(i), args.images, now) for i in range(args.nodes)]
    node_event_bytes = statistics.mean(wire_bytes(n) for n in nodes[:50])
    sys.path.insert(0, os.path.dirname(FAKE))
    sys.dont_write_bytecode = True
    from kube_apiserver import make_pod  # noqa: E402
    pods = [make_pod("app-%s-%d" % (names[k], j), node=names[k], ip="%s" % node_pod_cidr(k).replace(".0/24", ".%d" % (j + 2)),
                     labels={"app": "app-%d" % j}) for k in range(n_agents) for j in range(args.pods_per_node)]
    pod_event_bytes = statistics.mean(wire_bytes(p) for p in pods[:50]) if pods else 0
    pods_file = os.path.join(root, "pods.json")
    with open(pods_file, "w") as f:
        json.dump(pods, f)
    fake.start(pods_file)
    agents = []
    res = {"nodes": args.nodes, "node_event_bytes": round(node_event_bytes), "pod_event_bytes": round(pod_event_bytes),
           "images": args.images}
    try:
        t0 = time.monotonic()
        for i, n in enumerate(nodes):
            fake.ctl("POST", "/_fake/nodes/set", {"name": n["metadata"]["name"], "node": n})
        log("test apiserver at %s: %d Nodes (%d bytes each on the wire, %d images), %d pods, loaded in %.0fs"
            % (fake.url, args.nodes, node_event_bytes, args.images, len(pods), time.monotonic() - t0))
        for k in range(n_agents):
            routing = "nodes" if k < args.agents else "none"
            agents.append(Agent(root, k, names[k], node_address(k), routing, node_pod_cidr(k), fake, args))
        for a, ns in zip(agents, netns_names):
            a.start(piniond, ns)
            time.sleep(args.start_interval)
        node_agents = [a for a in agents if a.routing == "nodes"]

        waiting = {"why": ""}

        def synced():
            for a in agents:
                try:
                    m = a.metrics()
                except (OSError, RuntimeError) as err:
                    waiting["why"] = "%s: no metrics (%s)" % (a.name, err)
                    return False
                if metric_sum(m, "pinion_apiserver_cache_pods") < args.pods_per_node:
                    waiting["why"] = "%s: its pods not listed yet" % a.name
                    return False
                if a.routing != "nodes":
                    continue
                cached, routes = metric_sum(m, "pinion_apiserver_cache_nodes"), a.routes()
                if cached < args.nodes or routes < args.nodes - 1:
                    waiting["why"] = "%s: %d Nodes cached, %d routes" % (a.name, cached, routes)
                    return False
            # and every watch open (a watch is counted in the agent's metrics when it ends)
            want = {(a.address, "pods") for a in agents} | {(a.address, "nodes") for a in node_agents}
            have = {(r["client"].split(":")[0], resource_of(r)) for r in fake.requests(verb="watch")}
            if want - have:
                waiting["why"] = "no watch yet from %s" % sorted(want - have)[:3]
                return False
            return True
        t0 = time.monotonic()
        wait_for("every agent synced (Node agents: %d Nodes cached, %d routes)" % (args.nodes, args.nodes - 1),
                 synced, args.sync_timeout, agents, waiting)
        res["startup_seconds"] = round(time.monotonic() - t0, 1)
        res["routes_per_node_agent"] = min(a.routes() for a in node_agents) if node_agents else 0
        log("%d agents synced in %.0fs (%d routes in each Node agent's namespace)"
            % (n_agents, res["startup_seconds"], res["routes_per_node_agent"]))

        # Kubelets post their Node's status; pods change now and then.
        hb_lock = threading.Lock()

        def touch_node(j):
            i = j % args.nodes
            with hb_lock:
                n = nodes[i]
                t = rfc3339(time.time())
                for c in n["status"]["conditions"]:
                    c["lastHeartbeatTime"] = t
                n["metadata"]["managedFields"][2]["time"] = t
                body = {"name": n["metadata"]["name"], "node": n}
            fake.ctl("POST", "/_fake/nodes/set", body)

        def touch_pod(j):
            p = pods[random.Random(j).randrange(len(pods))]
            p = json.loads(json.dumps(p))
            p["metadata"].setdefault("annotations", {})["pinion.test/touched"] = str(j)
            fake.ctl("POST", "/_fake/pods/update", {"pod": p})
        node_rate = args.nodes / args.status_period
        pod_rate = len(pods) / args.pod_period
        gens = [Generator(node_rate, touch_node)] + ([Generator(pod_rate, touch_pod)] if pods else [])
        for g in gens:
            g.start()
        log("status generator: %.2f Node events/s (each Node every %.0fs), %.3f pod events/s; warm-up %.0fs, "
            "then %.0fs measured" % (node_rate, args.status_period, pod_rate, args.warmup, args.duration))
        time.sleep(args.warmup)
        before = snapshot(agents)
        t_before = time.time()
        time.sleep(args.duration)
        after = snapshot(agents)
        t_after = time.time()
        for g in gens:
            g.stop()
        res["generated_node_events"] = gens[0].done
        res["generator_errors"] = sum(g.errors for g in gens)
        reqs = [r for r in fake.requests(since=t_before) if r["time"] <= t_after]
        res["steady"] = steady_figures(args, agents, before, after, reqs, node_event_bytes, pod_event_bytes)
        res["outage"] = outage(args, fake, agents, node_event_bytes, pod_event_bytes)
        res["ok"] = res["outage"]["recovered"] and all(a.alive() for a in agents)
        return res
    finally:
        for a in agents:
            a.stop()
        fake.stop()


def steady_figures(args, agents, before, after, reqs, node_bytes, pod_bytes):
    out = {}
    for group in ("nodes", "none"):
        members = [a for a in agents if a.routing == group]
        if not members:
            continue
        rows = []
        for a in members:
            b, e = before[a.name], after[a.name]
            minutes = (e["t"] - b["t"]) / 60

            def delta(name, **lab):
                return metric_sum(e["m"], name, **lab) - metric_sum(b["m"], name, **lab)
            # objects (ADDED, MODIFIED, DELETED), not bookmarks
            node_ev = delta("pinion_apiserver_watch_events_total", resource="nodes") - \
                delta("pinion_apiserver_watch_events_total", resource="nodes", type=BOOKMARK)
            pod_ev = delta("pinion_apiserver_watch_events_total", resource="pods") - \
                delta("pinion_apiserver_watch_events_total", resource="pods", type=BOOKMARK)
            mine = [r for r in reqs if r["client"].split(":")[0] == a.address]
            rows.append({
                "node_events_min": node_ev / minutes, "pod_events_min": pod_ev / minutes,
                "kib_min": (node_ev * node_bytes + pod_ev * pod_bytes) / 1024 / minutes,
                "requests_min": len(mine) / minutes,
                "agent_requests_min": delta("pinion_apiserver_requests_total") / minutes,
                "unchanged_dropped": delta("pinion_apiserver_node_events_unchanged_total"),
                "node_events": node_ev,
                "cpu_ticks_s": e["cpu"][0] - b["cpu"][0], "cpu_sched_s": e["cpu"][1] - b["cpu"][1],
                "minutes": minutes,
            })
        out[group] = {k: statistics.mean(r[k] for r in rows) for k in rows[0]}
        out[group]["agents"] = len(rows)
        out[group]["node_events_min_min"] = min(r["node_events_min"] for r in rows)
    if "nodes" in out and "none" in out and out["nodes"]["node_events"] > 0:
        n, p = out["nodes"], out["none"]
        out["cpu_ms_per_1000_node_events"] = 1e6 * (n["cpu_sched_s"] - p["cpu_sched_s"]) / n["node_events"]
        out["cpu_ms_per_1000_node_events_ticks"] = 1e6 * (n["cpu_ticks_s"] - p["cpu_ticks_s"]) / n["node_events"]
    return out


def make_pod_free():
    sys.path.insert(0, os.path.dirname(FAKE))
    from kube_apiserver import make_pod  # noqa: E402
    return make_pod("unscheduled-%d" % time.time_ns(), node=None)


def outage(args, fake, agents, node_bytes, pod_bytes):
    """A restart: every watch cut, refused for --outage, history compacted at recovery. The
    attempts while down are refused connections, counted by the agents (requests with code
    "error"); after the recovery every request reaches the test apiserver's log."""
    before = snapshot(agents)
    log("apiserver restart: down for %.0fs, then every resume gets 410" % args.outage)
    fake.ctl("POST", "/_fake/outage", {"mode": "refuse"})
    time.sleep(args.outage)
    # One change (a pod on no node) and the history compacted to it: every resourceVersion an
    # agent holds is older, so every resume gets 410 (a restart with an empty watch cache).
    fake.ctl("POST", "/_fake/pods/add", {"pod": make_pod_free()})
    fake.ctl("POST", "/_fake/compact", {})
    t_up = time.time()
    fake.ctl("POST", "/_fake/recover", {})
    t_recover = time.monotonic()

    def wanted(a):
        return ["pods"] + (["nodes"] if a.routing == "nodes" else [])

    def synced_at(a, log_since):
        """When the agent watched each resource again after a list of it (both after the
        recovery), or None."""
        mine = [r for r in log_since if r["client"].split(":")[0] == a.address]
        at = t_up
        for res in wanted(a):
            lists = [r["time"] for r in mine if resource_of(r) == res and r["verb"] == "list"]
            watches = [r["time"] for r in mine if resource_of(r) == res and r["verb"] == "watch" and
                       lists and r["time"] > min(lists)]
            if not watches:
                return None
            at = max(at, min(watches))
        return at

    def synced_again(a, log_since):
        return synced_at(a, log_since) is not None
    state = {"log": [], "why": ""}

    def all_synced():
        state["log"] = fake.requests(since=t_up)
        late = [a.name for a in agents if not synced_again(a, state["log"])]
        state["why"] = "%d not yet: %s; %d requests since the recovery" % (len(late), late[:3], len(state["log"]))
        return not late
    recovered = True
    try:
        wait_for("every agent relisted and watching after the restart", all_synced, args.recovery_timeout, agents,
                 state)
    except RuntimeError as err:
        log(str(err))
        recovered = False
    seconds = time.monotonic() - t_recover
    after = snapshot(agents)
    reqs = state["log"]
    out = {"recovered": recovered, "seconds": round(seconds, 1)}
    for group in ("nodes", "none"):
        members = [a for a in agents if a.routing == group]
        if not members:
            continue
        g = {"refused_while_down": statistics.mean(
            metric_sum(after[a.name]["m"], "pinion_apiserver_requests_total", code="error") -
            metric_sum(before[a.name]["m"], "pinion_apiserver_requests_total", code="error") for a in members)}
        for res in ("pods", "nodes"):
            for verb in ("list", "watch"):
                g["%s_%s" % (res, verb)] = statistics.mean(
                    sum(1 for r in reqs if r["client"].split(":")[0] == a.address and resource_of(r) == res and
                        r["verb"] == verb) for a in members)
        g["requests"] = sum(v for k, v in g.items() if k != "refused_while_down")
        times = [synced_at(a, reqs) for a in members]
        g["synced_max_s"] = max(t - t_up for t in times) if all(times) else None
        g["list_kib"] = statistics.mean(
            ((metric_sum(after[a.name]["m"], "pinion_apiserver_relists_total", resource="nodes") -
              metric_sum(before[a.name]["m"], "pinion_apiserver_relists_total", resource="nodes")) * args.nodes * node_bytes +
             (metric_sum(after[a.name]["m"], "pinion_apiserver_relists_total", resource="pods") -
              metric_sum(before[a.name]["m"], "pinion_apiserver_relists_total", resource="pods")) * args.pods_per_node * pod_bytes)
            / 1024 for a in members)
        out[group] = g
    return out


# ---------------------------------------------------------------------------------------------

def report(args, res, bj):
    st, ou = res["steady"], res["outage"]
    n, p = st.get("nodes"), st.get("none")
    print("\n## The Node watch with real agents: %d Node agents (routing = nodes) beside %d peers (routing = none)\n"
          % (args.agents, args.peers))
    print("%d Nodes of %d bytes each on the wire (%d images, managedFields), every Node's status posted every "
          "%.0f s (%.2f events/s); %d pods per node, each changed every %.0f s; %.0f s measured after %.0f s "
          "warm-up.\n" % (args.nodes, res["node_event_bytes"], args.images, args.status_period,
                           args.nodes / args.status_period, args.pods_per_node, args.pod_period, args.duration,
                           args.warmup))
    print("| per agent | routing = nodes | routing = none | ratio |\n|---|---:|---:|---:|")
    # (requests in steady state: the watches' renewals, one per watch per 5-10 min with
    # watch-timeout-min=5m, none of which falls in a few minutes after the start; see the
    # simulation's figures)
    rows = [("Node events/min", "node_events_min", "", 1), ("pod events/min", "pod_events_min", "", 1),
            ("KiB/min received (events)", "kib_min", "KiB", 0),
            ("CPU s (schedstat)", "cpu_sched_s", "s", 3), ("CPU s (utime+stime)", "cpu_ticks_s", "s", 2)]
    for label, key, unit, prec in rows:
        a, b = n[key], p[key] if p else None
        ratio = "%.1f×" % (a / b) if b else "—"
        print("| %s | %.*f | %s | %s |" % (label, prec, a, "%.*f" % (prec, b) if b is not None else "—", ratio))
        bj.row(label, round(a, 3), None if b is None else round(b, 3), "routing = none", unit)
    if "cpu_ms_per_1000_node_events" in st:
        print("\nCPU per 1,000 Node events (Node agents minus peers): %.1f ms (schedstat), %.0f ms (utime+stime, "
              "10 ms ticks); events dropped as unchanged: %.0f of %.0f per agent."
              % (st["cpu_ms_per_1000_node_events"], st["cpu_ms_per_1000_node_events_ticks"], n["unchanged_dropped"],
                 n["node_events"]))
        bj.row("agent CPU per 1,000 Node events", round(st["cpu_ms_per_1000_node_events"], 2), None, None, "ms")
    print("\nApiserver restart (%.0f s down, history compacted): every agent relisted and watching again %.0f s "
          "after the recovery%s.\n" % (args.outage, ou["seconds"], "" if ou["recovered"] else " (NOT ALL: timed out)"))
    print("| per agent | attempts while down | after: pod lists | pod watches | Node lists (pages) | Node watches "
          "| requests after | KiB listed | last agent synced |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for group, label in (("nodes", "routing = nodes"), ("none", "routing = none")):
        g = ou.get(group)
        if g:
            print("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %s |"
                  % (label, g["refused_while_down"], g["pods_list"], g["pods_watch"], g["nodes_list"],
                     g["nodes_watch"], g["requests"], g["list_kib"],
                     "%.1f s" % g["synced_max_s"] if g["synced_max_s"] is not None else "never"))
    if ou.get("nodes") and ou.get("none"):
        # the goal: the apiserver's cost per agent within 2x of the pod watch alone's
        for figure, key, unit in (("requests per agent after a restart", "requests", ""),
                                  ("KiB listed per agent after a restart", "list_kib", "KiB")):
            a, b = ou["nodes"][key], ou["none"][key]
            bj.row(figure, round(a, 2), round(b, 2), "routing = none", unit, goal="ratio <= 2",
                   met=b > 0 and a / b <= 2)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=20, help="agents with routing = nodes (default 20)")
    ap.add_argument("--peers", type=int, default=5, help="agents with routing = none (default 5)")
    ap.add_argument("--nodes", type=int, default=2500, help="Node objects (default 2500)")
    ap.add_argument("--images", type=int, default=10,
                    help="container images in each Node's status (default 10: ~7 KB a Node; a kubelet reports up to 50)")
    ap.add_argument("--pods-per-node", type=int, default=30)
    ap.add_argument("--status-period", type=float, default=300, help="seconds between a Node's status posts")
    ap.add_argument("--pod-period", type=float, default=1800, help="seconds between a pod's changes")
    ap.add_argument("--warmup", type=float, default=20)
    ap.add_argument("--duration", type=float, default=180, help="seconds measured (default 180)")
    ap.add_argument("--outage", type=float, default=20, help="seconds the apiserver is down (default 20)")
    ap.add_argument("--recovery-timeout", type=float, default=300)
    ap.add_argument("--sync-timeout", type=float, default=600)
    ap.add_argument("--start-interval", type=float, default=0.2)
    ap.add_argument("--qps", default="5")
    ap.add_argument("--burst", default="10")
    ap.add_argument("--backoff-initial", default="800ms")
    ap.add_argument("--backoff-max", default="30s")
    ap.add_argument("--watch-timeout-min", default="5m")
    ap.add_argument("--builddir", default=os.path.abspath(os.environ.get("PINION_BUILDDIR") or
                                                            os.path.join(SRCDIR, "build")))
    ap.add_argument("--json")
    ap.add_argument("--in-hub", help=argparse.SUPPRESS)  # internal: the re-executed script
    args = ap.parse_args(argv)
    if args.agents < 1 or args.peers < 0 or args.nodes < args.agents + args.peers:
        ap.error("needs --agents >= 1, --peers >= 0 and --nodes >= agents + peers")
    return args


def without_json(argv):
    """argv less --json F / --json=F (the outer process writes it)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--json":
            skip = True
        elif not a.startswith("--json="):
            out.append(a)
    return out


def main(argv):
    args = parse_args(argv)
    if args.in_hub:
        state = json.loads(args.in_hub)
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))  # the finally blocks stop the agents
        res = hub_main(args, state["root"], state["netns"])
        with open(os.path.join(state["root"], "result.json"), "w") as f:
            json.dump(res, f)
        return 0
    if os.geteuid() != 0 or not shutil.which("ip"):
        log("needs root and ip(8): network namespaces")
        return 77
    bj = BenchJson("node-watch", "Node watch (routing = nodes) at %d Nodes: %d real agents beside %d watching "
                   "their pods alone" % (args.nodes, args.agents, args.peers))
    root = tempfile.mkdtemp(prefix="node-watch-fanout.")
    net = Netns("%d" % os.getpid())
    child = None

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    ok = False
    try:
        net.create_hub()
        names = [net.add_agent(k, node_address(k)) for k in range(args.agents + args.peers)]
        child = subprocess.Popen(["ip", "netns", "exec", net.hub, sys.executable, os.path.abspath(__file__)] +
                                 without_json(argv) +
                                 ["--builddir", args.builddir, "--in-hub", json.dumps({"root": root, "netns": names})],
                                 stdin=subprocess.DEVNULL, env=clean_env())
        rc = child.wait()
        child = None
        if rc != 0:
            log("the measurement failed (exit %d); logs in %s" % (rc, root))
            bj.write(args.json, ok=False)
            return 1
        with open(os.path.join(root, "result.json")) as f:
            res = json.load(f)
        report(args, res, bj)
        ok = res["ok"]
        bj.note("Each agent in its own network namespace; plain HTTP to the test apiserver (no TLS: the CPU "
                "figures leave out decryption). Node objects of %d bytes on the wire (%d images, managedFields, "
                "five conditions), rewritten with new heartbeat times only." % (res["node_event_bytes"], args.images))
        bj.write(args.json, ok=ok, extra={"result": res})
        shutil.rmtree(root, ignore_errors=True)
        return 0 if ok else 1
    except KeyboardInterrupt:
        return 1
    finally:
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
        net.remove()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
