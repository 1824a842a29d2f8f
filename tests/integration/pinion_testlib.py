# SPDX-License-Identifier: MIT
"""The integration-test harness: start the REAL piniond and pinionctl and talk to them.

Every module's integration tests reuse this. The pieces:

  Agent            one piniond in a fresh temp dir: its config (+ conf.d/ drop-ins), pods-dir,
                   state/runtime dirs and API socket all live there. Started with NOTIFY_SOCKET
                   pointing at a datagram socket the harness owns (every sd_notify message is
                   captured, in order, with a timestamp) and stderr captured to a file.
  agent_factory    pytest fixture: make(**kw) -> Agent (started and READY unless start=False /
                   wait=False); every agent is stopped and its dir removed at teardown, and a
                   daemon that exits non-zero (a crash, an ASan/valgrind leak report) fails the test.
  agent            pytest fixture: one default agent, READY.
  make_pod()       a Kubernetes v1 Pod object as a dict, for Agent.write_pod().
  pod_cgroup_path() where the kubelet would put a pod's container, below the test's own pod
                   roots (POD_CGROUP_ROOTS, every Agent's [agent] pod-cgroup-roots).
  parse_metrics()  Prometheus text -> Metrics (samples with labels, TYPE/HELP).
  wait_until()     poll a function until it returns something truthy.
  diag()           a "# " diagnostic line in the TAP stream (or the terminal summary).

Agent at a glance (see each method's docstring):
  a = agent_factory(config={"agent": {"log-level": "info"}, "zookeeper": {"servers": ...}},
                    extra="[config.app]\nurl=...", dropins={"50-x.conf": "..."},
                    env={"WATCHDOG_USEC": "2000000"}, start=True, wait=True,
                    socket_activate=False)
  a.config_text(agent=..., sections=...) / a.write_config(text) / a.write_dropin(name, text)
  a.cgroup = "/sys/fs/cgroup/<h>/<path>" before a.start(): piniond starts in that cgroup
  a.start() a.wait_ready() a.wait_notify(key, value) a.notifications(key) a.ready_probe
  a.sighup() a.sigterm() a.sigint() a.kill9() -> exit code; a.assert_exit(rc, 0)
  a.request(method, path, body=None, as_uid=None) -> (status, headers, body)
  a.get_json(path) a.status() a.health() a.metrics() a.ctl(*args) a.check_config()
  a.write_pod(name, make_pod(...)) a.remove_pod(name) a.wait_pod(ns, name, pred) a.wait_pod_gone
  a.log_text() a.log_mark() a.wait_log(regex, since=mark) a.log_tail() a.rss_kib()
A request as another uid needs a socket that uid can open: config socket-mode=0666.

Environment: PINION_BUILDDIR (where piniond and pinionctl were built), PINION_SRCDIR,
PINION_VALGRIND=1 (piniond under valgrind, timeouts x10), PINION_TIMEOUT_SCALE (a factor for
every timeout), PINION_KEEP_TMP=1 (keep the agents' temp dirs for a post-mortem).
ASAN_OPTIONS / UBSAN_OPTIONS / LSAN_OPTIONS are passed through to the daemon.
"""

import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

# ---------------------------------------------------------------------------------------------
# Where things are

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("PINION_SRCDIR") or os.path.join(HERE, "..", ".."))
BUILDDIR = os.path.abspath(os.environ.get("PINION_BUILDDIR") or SRCDIR)
PINIOND = os.path.join(BUILDDIR, "piniond")
PINIONCTL = os.path.join(BUILDDIR, "pinionctl")

VALGRIND = os.environ.get("PINION_VALGRIND") == "1"
VALGRIND_CMD = ["valgrind", "--leak-check=full", "--error-exitcode=99",
                "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite"]
TIMEOUT_SCALE = float(os.environ.get("PINION_TIMEOUT_SCALE") or (10 if VALGRIND else 1))
KEEP_TMP = os.environ.get("PINION_KEEP_TMP") == "1"
# If the test runner itself is killed (no finalizers run), its daemons die with it: setpriv
# (util-linux) sets PR_SET_PDEATHSIG and execs, so the pid stays the daemon's.
_SETPRIV = shutil.which("setpriv")
PDEATHSIG_CMD = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []

MODULES = ["apiserver", "identity", "configsync", "zkreg", "podnet", "reclaim", "csi"]
# The dependencies between modules that the design implies (a module starts after those it
# needs): identity's kubernetes signer and podnet's pod-cidr from the Node need the apiserver;
# configsync's zk-version-node trigger needs zkreg's ZooKeeper session. Keep in step with the
# .deps of each struct module.
MODULE_DEPS = {"identity": ["apiserver"], "podnet": ["apiserver"], "configsync": ["zkreg"]}


def assert_dependency_order(names):
    """names (as /v1/status lists them) are every module once, each after its dependencies."""
    assert sorted(names) == sorted(MODULES), "modules %s, expected %s" % (names, MODULES)
    for mod, deps in MODULE_DEPS.items():
        for dep in deps:
            assert names.index(dep) < names.index(mod), \
                "%s is listed before %s, which it depends on: %s" % (mod, dep, names)
EXIT_CONFIG = 78

# Variables that would make the daemon think it runs under systemd or in a cluster.
_SCRUB_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
              "LISTEN_FDNAMES", "JOURNAL_STREAM", "INVOCATION_ID", "NODE_NAME",
              "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "MANAGERPID")


def T(seconds):
    """A timeout scaled for slow runs (valgrind)."""
    return seconds * TIMEOUT_SCALE


def build_variable(var, builddir=BUILDDIR):
    """A directory variable as configure set it in the build's Makefile ("cnibindir = /opt/cni/bin")."""
    with open(os.path.join(builddir, "Makefile")) as f:
        m = re.search(r"^%s = (.*)$" % re.escape(var), f.read(), re.M)
    assert m, "no %s in %s/Makefile" % (var, builddir)
    return m.group(1).strip()


def build_directory(var, builddir=BUILDDIR):
    """A directory variable with the ${prefix}-style references in it resolved, as make does."""
    value = build_variable(var, builddir)
    for _ in range(5):
        value = re.sub(r"\$\{(\w+)\}", lambda m: build_variable(m.group(1), builddir), value)
    assert "$" not in value, value
    return value


def clean_env(extra=None):
    """The environment for a child: ours without systemd/Kubernetes hints, plus extra
    (a value of None removes the variable). ASAN_/UBSAN_/LSAN_OPTIONS pass through."""
    env = dict(os.environ)
    for k in _SCRUB_ENV:
        env.pop(k, None)
    env.setdefault("LC_ALL", "C.UTF-8")
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def sanitized_build():
    """True when piniond was built with AddressSanitizer (its runtime is linked in): its
    quarantine and shadow memory keep freed memory resident, so RSS and a memory cgroup's usage
    say nothing about what the agent holds, and it runs two to three times slower."""
    try:
        with open(PINIOND, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


# Why a test module skips the sanitizer build's suite (pytest.mark.skipif(sanitized_build(),
# reason=NOT_UNDER_SANITIZERS)): benchmark smoke runs, simulations and timings checked against a
# model measure nothing under AddressSanitizer (two to three times slower, freed memory kept) and
# run no agent code the functional tests do not; the normal build's suite runs them.
NOT_UNDER_SANITIZERS = "a benchmark, simulation or timing check: run in the normal build's suite"


def require_binary(path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise AssertionError("%s is not built (PINION_BUILDDIR=%s): run make first" % (path, BUILDDIR))
    return path


# ---------------------------------------------------------------------------------------------
# Diagnostics into the TAP stream

_diag_writer = None
_diagnostics = []


def set_diag_writer(fn):
    global _diag_writer
    _diag_writer = fn


def diag(text):
    """Print a diagnostic: a "# text" line in the TAP stream under make check, else a line in
    pytest's terminal summary."""
    _diagnostics.append(str(text))
    if _diag_writer:
        _diag_writer(text)


def collected_diagnostics():
    return list(_diagnostics)


# ---------------------------------------------------------------------------------------------
# Polling

def free_port(host="127.0.0.1"):
    """A TCP port free on host right now (the caller binds it soon after)."""
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_until(fn, timeout=10, interval=0.05, desc=None):
    """Calls fn() until it returns something truthy and returns that. Exceptions of type
    AssertionError/OSError/HTTPException count as "not yet". On timeout, raises AssertionError
    naming desc and the last value or exception. The timeout is scaled (T())."""
    deadline = time.monotonic() + T(timeout)
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
            last = v
        except (AssertionError, OSError, http.client.HTTPException) as e:
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s; last: %r"
                                 % (T(timeout), desc or getattr(fn, "__name__", "condition"), last))
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------
# sd_notify capture

class Notification:
    __slots__ = ("time", "key", "value", "raw")

    def __init__(self, t, key, value, raw):
        self.time, self.key, self.value, self.raw = t, key, value, raw

    def __repr__(self):
        return "<%s=%s @%.3f>" % (self.key, self.value, self.time)


class NotifyListener:
    """An AF_UNIX SOCK_DGRAM socket standing in for systemd's NOTIFY_SOCKET. A thread receives
    every datagram; each "KEY=VALUE" line becomes a Notification (monotonic time stamps)."""

    def __init__(self, path, on_message=None):
        self.path = path
        self.on_message = on_message  # called in the receiving thread for each Notification
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.1)
        self.messages = []
        self.datagrams = []
        self.cond = threading.Condition()
        self._stop = False
        self.thread = threading.Thread(target=self._run, name="notify:" + path, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            t = time.monotonic()
            text = data.decode("utf-8", "replace")
            new = []
            for line in text.split("\n"):
                if line:
                    key, _, value = line.partition("=")
                    new.append(Notification(t, key, value, line))
            if self.on_message:
                for m in new:
                    try:
                        self.on_message(m)
                    except Exception as e:  # never let a probe kill the capture
                        sys.stderr.write("notify hook: %r\n" % e)
            with self.cond:
                self.datagrams.append((t, text))
                self.messages.extend(new)
                self.cond.notify_all()

    def close(self):
        self._stop = True
        self.thread.join(2)
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def snapshot(self, start=0):
        with self.cond:
            return list(self.messages[start:])

    def count(self):
        with self.cond:
            return len(self.messages)

    def wait_for(self, key, value=None, start=0, timeout=10, alive=None):
        """Waits for a message KEY (and VALUE, a string or compiled regex) at index >= start;
        returns (index, Notification). alive() is called while waiting and may raise."""
        deadline = time.monotonic() + timeout
        while True:
            with self.cond:
                for i in range(start, len(self.messages)):
                    m = self.messages[i]
                    if m.key != key:
                        continue
                    if value is None or (value == m.value if isinstance(value, str)
                                         else value.search(m.value)):
                        return i, m
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no %s%s notification within %.1fs; got: %s" % (
                        key, "" if value is None else "=" + str(value), timeout,
                        [m.raw for m in self.messages[start:]][-20:]))
                self.cond.wait(min(left, 0.1))
            if alive:
                alive()


# ---------------------------------------------------------------------------------------------
# HTTP over the Unix socket

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("pinion", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s

    def send(self, data):
        # A server may answer (e.g. 405, 413) from the headers alone and close before reading
        # the body; on a Unix socket its answer is still readable, so do as curl does: stop
        # sending and read the response.
        try:
            super().send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class Response(tuple):
    """(status, headers, body): unpacks as a 3-tuple. headers is a dict with lower-case names;
    body is parsed JSON when the content type says JSON, else text. .raw is the text."""

    def __new__(cls, status, headers, body, raw):
        self = super().__new__(cls, (status, headers, body))
        self.raw = raw
        return self

    status = property(lambda self: self[0])
    headers = property(lambda self: self[1])
    body = property(lambda self: self[2])

    def __repr__(self):
        return "Response(%d, %r)" % (self[0], self.raw[:500])


def _make_response(status, headers, raw, what):
    ctype = headers.get("content-type", "")
    body = raw
    if "json" in ctype:
        try:
            body = json.loads(raw) if raw.strip() else None
        except ValueError as e:
            raise AssertionError("%s: content-type %s but the body is not JSON (%s): %r"
                                 % (what, ctype, e, raw[:500]))
    return Response(status, headers, body, raw)


def unix_request(path, method, url, body=None, headers=None, timeout=10):
    """One HTTP/1.1 request over the Unix socket at path. body: dict/list (sent as JSON), str or
    bytes. Returns Response."""
    hdrs = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        hdrs.setdefault("Content-Type", "application/json")
    if isinstance(body, str):
        body = body.encode()
    conn = UnixHTTPConnection(path, timeout=T(timeout))
    try:
        conn.request(method, url, body=body, headers=hdrs)
        r = conn.getresponse()
        raw = r.read().decode("utf-8", "replace")
        rh = {k.lower(): v for k, v in r.getheaders()}
        return _make_response(r.status, rh, raw, "%s %s" % (method, url))
    finally:
        conn.close()


# The child that makes a request as another user: SO_PEERCRED records the credentials at
# connect() time, so the whole request must come from a process that already is that user.
_AS_UID_CHILD = r"""
import http.client, json, socket, sys
path, method, url, body, timeout = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
class C(http.client.HTTPConnection):
    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(path)
        self.sock = s
    def send(self, data):
        try:
            super().send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
try:
    c = C("pinion", timeout=timeout)
    hdrs = {"Content-Type": "application/json"} if body else {}
    c.request(method, url, body=body.encode() if body else None, headers=hdrs)
    r = c.getresponse()
    # A watch streams forever: its first line is enough.
    text = r.readline() if "ndjson" in (r.getheader("Content-Type") or "") else r.read()
    out = {"status": r.status, "headers": {k.lower(): v for k, v in r.getheaders()},
           "body": text.decode("utf-8", "replace")}
except OSError as e:
    out = {"oserror": e.errno, "message": str(e)}
sys.stdout.write(json.dumps(out))
"""


def request_child(path, method, url, body=None, timeout=10, **credentials):
    """One request from a child process made with credentials (subprocess.run's user=, group=,
    extra_groups=, preexec_fn=): {"status", "headers", "body"} or {"oserror", "message"}."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    p = subprocess.run([sys.executable, "-c", _AS_UID_CHILD, path, method, url, body or "",
                        str(T(timeout))],
                       capture_output=True, text=True, timeout=T(timeout) + 10, env=clean_env(), cwd="/",
                       **credentials)
    if p.returncode != 0:
        raise AssertionError("request child (%r) failed to run: rc=%d %s" % (credentials, p.returncode, p.stderr))
    return json.loads(p.stdout)


def unix_request_as(uid, path, method, url, body=None, gid=None, timeout=10):
    gid = uid if gid is None else gid
    out = request_child(path, method, url, body, timeout, user=uid, group=gid, extra_groups=[])
    if "oserror" in out:
        raise OSError(out["oserror"], "as uid %d: %s (is the socket reachable for that user? "
                      "set socket-mode=0666 and check the directory modes)" % (uid, out["message"]))
    return _make_response(out["status"], out["headers"], out["body"], "%s %s as uid %d" % (method, url, uid))


# ---------------------------------------------------------------------------------------------
# Prometheus text

_SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$')
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _unescape_label(v):
    return v.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


class Metrics:
    """Parsed exposition: .samples is a list of (name, labels dict, value); .types and .helps
    map a metric family to its TYPE / HELP."""

    def __init__(self, text):
        self.text = text
        self.samples = []
        self.types = {}
        self.helps = {}
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 3 and parts[1] == "TYPE":
                    self.types[parts[2]] = parts[3].strip() if len(parts) > 3 else ""
                elif len(parts) >= 3 and parts[1] == "HELP":
                    self.helps[parts[2]] = parts[3] if len(parts) > 3 else ""
                continue
            m = _SAMPLE_RE.match(line)
            if not m:
                raise AssertionError("metrics line %d is not a sample: %r" % (n, line))
            labels = {}
            if m.group(2):
                rest = m.group(2)
                pos = 0
                while pos < len(rest):
                    lm = _LABEL_RE.match(rest, pos)
                    if not lm:
                        raise AssertionError("metrics line %d: bad labels %r" % (n, line))
                    labels[lm.group(1)] = _unescape_label(lm.group(2))
                    pos = lm.end()
            self.samples.append((m.group(1), labels, float(m.group(3))))

    def find(self, name, **labels):
        """Samples named name whose labels include the given ones."""
        return [(n, l, v) for (n, l, v) in self.samples
                if n == name and all(l.get(k) == str(v2) for k, v2 in labels.items())]

    def value(self, name, **labels):
        """The single matching sample's value, or None if there is none."""
        found = self.find(name, **labels)
        if len(found) > 1:
            raise AssertionError("%d samples match %s%r" % (len(found), name, labels))
        return found[0][2] if found else None

    def names(self):
        return {n for (n, _, _) in self.samples}


def parse_metrics(text):
    return Metrics(text)


# ---------------------------------------------------------------------------------------------
# Pods

def make_pod(name, namespace="default", annotations=None, labels=None, ports=None, uid=None,
             ip="10.1.2.3", phase="Running", conditions=None, node=None, host_network=False,
             service_account="default", containers=None, resource_version=None):
    """A Kubernetes v1 Pod object. ports: list of (name, port) or (name, port, protocol) for the
    first container (default [("http", 8080)]). conditions: {"Ready": True, ...} or None (a
    static pod without conditions counts as Ready)."""
    if ports is None:
        ports = [("http", 8080)]
    cports = []
    for p in ports:
        pname, pnum = p[0], p[1]
        proto = p[2] if len(p) > 2 else "TCP"
        cp = {"containerPort": pnum, "protocol": proto}
        if pname:
            cp["name"] = pname
        cports.append(cp)
    meta = {"name": name, "namespace": namespace, "annotations": dict(annotations or {}),
            "labels": dict(labels or {})}
    if uid:
        meta["uid"] = uid
    if resource_version:
        meta["resourceVersion"] = str(resource_version)
    spec = {
        "serviceAccountName": service_account,
        "hostNetwork": host_network,
        "containers": containers or [{"name": "main", "image": "example/app:1", "ports": cports}],
    }
    if node:
        spec["nodeName"] = node
    status = {"phase": phase}
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    if conditions is not None:
        status["conditions"] = [{"type": k, "status": "True" if v else "False"}
                                for k, v in conditions.items()]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


# ---------------------------------------------------------------------------------------------
# Pods' cgroups

# The pod roots every test agent attests pods below ([agent] pod-cgroup-roots): the kubelet's
# names, below a directory of this test process, so that tests never touch (or collide with) a
# real kubelet's /kubepods and parallel runs never share one.
POD_CGROUP_TOP = "pinion-test-%d" % os.getpid()
POD_CGROUP_ROOTS = ["/%s/kubepods" % POD_CGROUP_TOP, "/%s/kubepods.slice" % POD_CGROUP_TOP]
# Where tests put systemd services' cgroups ([agent] service-cgroup-roots), as systemd would
# below /system.slice.
SERVICE_CGROUP_ROOT = "/%s/system.slice" % POD_CGROUP_TOP


def new_container_id():
    """A container ID as the runtimes make them: 64 hex digits."""
    import secrets
    return secrets.token_hex(32)


def pod_cgroup_path(uid, container_id=None, systemd=False, qos="besteffort"):
    """The cgroup path (from a hierarchy's root) of container_id of pod uid (None: the pod's own
    cgroup), below POD_CGROUP_ROOTS in the kubelet's layout for the cgroupfs or systemd driver;
    qos "guaranteed" puts the pod directly below the root."""
    if systemd:
        root = POD_CGROUP_ROOTS[1]
        escaped = uid.replace("-", "_")
        if qos == "guaranteed":
            path = "%s/kubepods-pod%s.slice" % (root, escaped)
        else:
            path = "%s/kubepods-%s.slice/kubepods-%s-pod%s.slice" % (root, qos, qos, escaped)
        return path + ("/cri-containerd-%s.scope" % container_id if container_id else "")
    root = POD_CGROUP_ROOTS[0]
    path = "%s/pod%s" % (root, uid) if qos == "guaranteed" else "%s/%s/pod%s" % (root, qos, uid)
    return path + ("/" + container_id if container_id else "")


def remove_cgroup_tree(base, path):
    """Removes the cgroup base+path and its descendants (moving what runs there to base's root
    first), then each parent up to base that is left empty."""
    top = os.path.join(base, path.lstrip("/"))
    for dirpath, dirs, files in os.walk(top, topdown=False):
        try:
            with open(os.path.join(dirpath, "cgroup.procs")) as f:
                pids = [line.strip() for line in f if line.strip()]
            for pid in pids:
                try:
                    with open(os.path.join(base, "cgroup.procs"), "w") as f:
                        f.write(pid)
                except OSError:
                    pass
        except OSError:
            pass
        for _ in range(50):  # a process moved out may still be leaving
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
    parent = os.path.dirname(top)
    while parent.startswith(base + "/"):
        try:
            os.rmdir(parent)
        except OSError:
            break
        parent = os.path.dirname(parent)


# ---------------------------------------------------------------------------------------------
# The agent

_live_agents = set()


@atexit.register
def _kill_leftovers():
    for a in list(_live_agents):
        try:
            a.proc.kill()
        except Exception:
            pass


def render_ini(sections):
    """{"agent": {"k": "v"}, "reclaim.x": {...}} -> INI text (a value of None drops the key)."""
    out = []
    for section, keys in sections.items():
        if out:
            out.append("")
        out.append("[%s]" % section)
        for k, v in keys.items():
            if v is not None:
                out.append("%s=%s" % (k, v))
    return "\n".join(out) + "\n"


# The stamp text log lines begin with when stderr is not the journal: ISO 8601, milliseconds,
# an offset ("2026-12-02T14:20:01.123Z info: ...").
LOG_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(?:Z|[+-]\d\d:\d\d)"


def log_lines(text):
    """The lines of a text-format log without their time stamps: "info: ...", "warning: ..."."""
    return [re.sub(r"^%s " % LOG_TIME, "", line, count=1) for line in text.splitlines()]


def warnings_in(text):
    """Log lines at warning level or worse (text format: "<level>: message")."""
    return [l for l in log_lines(text) if re.match(r"^(warning|error|crit|alert|emerg):", l)]


def line_of(text, needle, occurrence=1):
    """1-based number of the line containing needle (the n-th occurrence)."""
    seen = 0
    for n, line in enumerate(text.splitlines(), 1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return n
    raise AssertionError("%r not in config text:\n%s" % (needle, text))


class AgentExited(AssertionError):
    pass


class Agent:
    """One piniond in its own temp dir.

    config:   {"agent": {...overrides, None removes a default key}, "section": {...}} or None
    extra:    raw INI text appended to the main file
    dropins:  {"50-x.conf": "text"} written to <dir>/conf.d/
    env:      extra environment for the daemon (None removes a variable)
    netns:    run the daemon in this network namespace (`ip netns exec NAME`); None: the test's
    """

    def __init__(self, config=None, extra="", dropins=None, env=None, node_name="test-node", netns=None):
        self.dir = tempfile.mkdtemp(prefix="pinion-it-")
        # Other users (as_uid requests) must be able to reach the socket below it.
        os.chmod(self.dir, 0o755)
        self.config_file = os.path.join(self.dir, "pinion.conf")
        self.dropin_dir = os.path.join(self.dir, "conf.d")
        self.state_dir = os.path.join(self.dir, "state")
        self.runtime_dir = os.path.join(self.dir, "run")
        self.socket = os.path.join(self.runtime_dir, "pinion.sock")
        self.pods_dir = os.path.join(self.dir, "pods.d")
        self.log_file = os.path.join(self.dir, "piniond.log")
        self.stdout_file = os.path.join(self.dir, "piniond.stdout")
        self.notify_path = os.path.join(self.dir, "notify.sock")
        self.env = dict(env or {})
        self.netns = netns
        # Run before piniond on its command line (e.g. setpriv with a lowered bounding set).
        self.command_prefix = []
        self.agent_keys = {
            "node-name": node_name,
            "state-dir": self.state_dir,
            "runtime-dir": self.runtime_dir,
            "socket": self.socket,
            "pods-dir": self.pods_dir,
            "log-level": "debug",
            "log-format": "text",
            "stop-timeout": "5s",
            "pod-cgroup-roots": " ".join(POD_CGROUP_ROOTS),
        }
        self.sections = {}
        self.extra = extra or ""
        for section, keys in (config or {}).items():
            if section == "agent":
                self.agent_keys.update(keys)
            else:
                self.sections.setdefault(section, {}).update(keys)
        os.makedirs(self.pods_dir)
        os.makedirs(self.dropin_dir)
        self.write_config()
        for name, text in (dropins or {}).items():
            self.write_dropin(name, text)
        self.notify = None
        self.ready_probe = None  # what connecting to the socket did when READY=1 arrived
        self.proc = None
        self.log_offset = 0
        self.notify_start = 0
        self.expected_exit = False  # set when the test itself stops/kills the daemon
        self.closed = False
        self.cgroup = None  # a cgroup directory (with cgroup.procs) piniond starts in

    # --- config ---

    def config_text(self, agent=None, sections=None, extra=None):
        keys = dict(self.agent_keys)
        keys.update(agent or {})
        all_sections = {"agent": keys}
        for s, kv in self.sections.items():
            all_sections[s] = dict(kv)
        for s, kv in (sections or {}).items():
            all_sections.setdefault(s, {}).update(kv)
        text = render_ini(all_sections)
        extra = self.extra if extra is None else extra
        if extra:
            text += "\n" + extra.rstrip("\n") + "\n"
        return text

    def write_config(self, text=None, **kw):
        """Rewrites the main config file atomically (text, or the rendered default with kw as
        for config_text()). Returns the text written."""
        if text is None:
            text = self.config_text(**kw)
        atomic_write(self.config_file, text)
        return text

    def write_dropin(self, name, text):
        path = os.path.join(self.dropin_dir, name)
        atomic_write(path, text)
        return path

    # --- process ---

    def _env(self, extra=None):
        env = clean_env(self.env)
        env["NOTIFY_SOCKET"] = self.notify_path
        for k, v in (extra or {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        return env

    def command(self, *args):
        cmd = [require_binary(PINIOND), "--config", self.config_file] + list(args)
        if VALGRIND:
            cmd = VALGRIND_CMD + cmd
        cmd = self.command_prefix + cmd
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd  # ip execs the command: same pid
        return cmd

    def start(self, wait=True, timeout=10, args=(), env=None, socket_activate=False):
        """Starts piniond (optionally under systemd-socket-activate listening on self.socket;
        the daemon is then exec'd on the first connection, so wait is ignored)."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        if self.notify is None:
            self.notify = NotifyListener(self.notify_path, self._on_notify)
        self.ready_probe = None
        self.notify_start = self.notify.count()
        self.log_offset = os.path.getsize(self.log_file) if os.path.exists(self.log_file) else 0
        self.expected_exit = False
        penv = self._env(env)
        cmd = self.command(*args)
        if socket_activate:
            os.makedirs(self.runtime_dir, exist_ok=True)
            sa = [shutil.which("systemd-socket-activate") or "/usr/bin/systemd-socket-activate",
                  "-l", self.socket]
            # systemd-socket-activate hands the child only PATH, HOME, TERM and what -E names.
            for k, v in penv.items():
                if k not in ("PATH", "HOME", "TERM") and not k.startswith("LISTEN_"):
                    sa += ["-E", "%s=%s" % (k, v)]
            cmd = sa + cmd
            wait = False
        if PDEATHSIG_CMD:
            cmd = PDEATHSIG_CMD + cmd
        preexec = None
        if self.cgroup:
            procs = os.path.join(self.cgroup, "cgroup.procs")

            def preexec():
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))
        with open(self.log_file, "ab") as log, open(self.stdout_file, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=log,
                                         env=penv, cwd=self.dir, start_new_session=True,
                                         preexec_fn=preexec)
        _live_agents.add(self)
        if wait:
            self.wait_ready(timeout)
        return self

    def _on_notify(self, m):
        # The moment READY=1 arrives, before anything else happens: is the API listening?
        if m.key == "READY" and m.value == "1" and self.ready_probe is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.socket)
                self.ready_probe = "connected"
            except OSError as e:
                self.ready_probe = "connect failed: %s" % e
            finally:
                s.close()

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self):
        if self.proc is not None and self.proc.poll() is not None:
            raise AgentExited("piniond exited with %d%s\n--- log tail ---\n%s" % (
                self.proc.returncode, exit_meaning(self.proc.returncode), self.log_tail()))

    def wait_ready(self, timeout=10):
        """Waits for READY=1 from this start. Returns the Notification."""
        _, m = self.notify.wait_for("READY", "1", start=self.notify_start, timeout=T(timeout),
                                    alive=self.check_alive)
        return m

    def wait_notify(self, key, value=None, timeout=10, start=None):
        """Waits for a notification KEY[=VALUE] (VALUE a string or compiled regex) from this
        start (or from index start). Returns (index, Notification)."""
        return self.notify.wait_for(key, value, start=self.notify_start if start is None else start,
                                    timeout=T(timeout))

    def notifications(self, key=None):
        """This start's notifications (optionally only KEY)."""
        msgs = self.notify.snapshot(self.notify_start) if self.notify else []
        return [m for m in msgs if key is None or m.key == key]

    def send_signal(self, sig):
        self.check_alive()
        os.kill(self.proc.pid, sig)

    def sighup(self):
        self.send_signal(signal.SIGHUP)

    def wait_exit(self, timeout=None):
        """Waits for the daemon to exit; returns its exit code (negative: killed by a signal).
        On timeout, kills it and fails."""
        if timeout is None:
            timeout = self.stop_timeout_seconds() + 5
        try:
            return self.proc.wait(T(timeout))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("piniond did not exit within %.1fs; killed\n--- log tail ---\n%s"
                                 % (T(timeout), self.log_tail()))

    def stop(self, sig=signal.SIGTERM, timeout=None):
        """Sends sig and waits for the exit; returns the exit code."""
        self.expected_exit = True
        self.send_signal(sig)
        rc = self.wait_exit(timeout)
        _live_agents.discard(self)
        return rc

    def sigterm(self, timeout=None):
        return self.stop(signal.SIGTERM, timeout)

    def sigint(self, timeout=None):
        return self.stop(signal.SIGINT, timeout)

    def kill9(self):
        self.expected_exit = True
        if self.running():
            self.proc.kill()
        rc = self.proc.wait(T(10))
        _live_agents.discard(self)
        return rc

    def assert_exit(self, rc, expected=0):
        assert rc == expected, "piniond exited with %d%s, expected %d\n--- log tail ---\n%s" % (
            rc, exit_meaning(rc), expected, self.log_tail())

    def stop_timeout_seconds(self):
        v = str(self.agent_keys.get("stop-timeout") or "10s")
        m = re.match(r"^(\d+)(ms|s|m|h)?$", v)
        if not m:
            return 10
        n = int(m.group(1))
        return n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]

    def rss_kib(self):
        """VmRSS of the running daemon in KiB."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS for pid %d" % self.proc.pid)

    def close(self):
        """Stops the daemon if it still runs (SIGTERM, then SIGKILL) and removes the temp dir.
        Returns a problem description or None: an unexpected exit (crash, leak report), or a
        non-zero exit at this final stop."""
        if self.closed:
            return None
        self.closed = True
        problem = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.kill(self.proc.pid, signal.SIGTERM)
                    rc = self.proc.wait(T(self.stop_timeout_seconds() + 5))
                    if rc != 0:
                        problem = "piniond exited with %d%s on SIGTERM at teardown" % (
                            rc, exit_meaning(rc))
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                    problem = "piniond did not exit on SIGTERM at teardown; killed"
            elif not self.expected_exit and self.proc.returncode != 0:
                problem = "piniond exited on its own with %d%s during the test" % (
                    self.proc.returncode, exit_meaning(self.proc.returncode))
            _live_agents.discard(self)
        if problem:
            problem += "\n--- log tail (%s) ---\n%s" % (self.log_file, self.log_tail(60))
        if self.notify:
            self.notify.close()
        if KEEP_TMP:
            sys.stderr.write("pinion: kept %s\n" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        return problem

    # --- logs ---

    def log_text(self, since_start=True):
        try:
            with open(self.log_file, "rb") as f:
                if since_start:
                    f.seek(self.log_offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text(since_start=False).splitlines()[-n:])

    def log_mark(self):
        """An offset to pass as since= to wait_log, to look only at what comes after now."""
        return os.path.getsize(self.log_file) if os.path.exists(self.log_file) else 0

    def wait_log(self, pattern, timeout=10, since=None):
        """Waits until the log (from since, default this start) matches the regex; returns the
        match."""
        rx = re.compile(pattern, re.M) if isinstance(pattern, str) else pattern
        start = self.log_offset if since is None else since

        def probe():
            with open(self.log_file, "rb") as f:
                f.seek(start)
                return rx.search(f.read().decode("utf-8", "replace"))
        try:
            return wait_until(probe, timeout, interval=0.05, desc="log /%s/" % rx.pattern)
        except AssertionError as e:
            raise AssertionError("%s\n--- log tail ---\n%s" % (e, self.log_tail()))

    # --- talking to it ---

    def request(self, method, path, body=None, as_uid=None, headers=None, timeout=10):
        """HTTP over the API socket -> Response (status, headers, body). as_uid makes the request
        from a child process running as that uid (and gid), for peer-credential tests."""
        if as_uid is not None:
            return unix_request_as(as_uid, self.socket, method, path, body=body, timeout=timeout)
        return unix_request(self.socket, method, path, body=body, headers=headers, timeout=timeout)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def get_json(self, path, expect=200):
        r = self.request("GET", path)
        assert r.status == expect, "GET %s: %d %r" % (path, r.status, r.raw[:1000])
        assert isinstance(r.body, (dict, list)), "GET %s: not JSON: %r" % (path, r.raw[:500])
        return r.body

    def status(self):
        return self.get_json("/v1/status")

    def health(self):
        return self.get_json("/v1/health")

    def metrics(self):
        r = self.request("GET", "/metrics")
        assert r.status == 200, "GET /metrics: %d %r" % (r.status, r.raw[:500])
        return parse_metrics(r.raw)

    def ctl(self, *args, socket_path=None, timeout=10, env=None):
        """Runs pinionctl --socket SOCK ARGS... -> (rc, stdout, stderr)."""
        cmd = [require_binary(PINIONCTL), "--socket", socket_path or self.socket] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=T(timeout),
                           env=clean_env(env), stdin=subprocess.DEVNULL)
        return CtlResult(p.returncode, p.stdout, p.stderr)

    def check_config(self, *args, timeout=10):
        """piniond --config FILE --check-config -> (rc, stdout, stderr)."""
        return run_piniond("--config", self.config_file, "--check-config", *args, timeout=timeout)

    # --- pods ---

    def pod_path(self, name):
        return os.path.join(self.pods_dir, name if name.endswith(".json") else name + ".json")

    def write_pod(self, name, pod):
        """Writes a pod file (dict -> JSON; str/bytes as is) atomically into pods-dir as
        NAME.json. Returns the path."""
        if isinstance(pod, dict):
            pod = json.dumps(pod, indent=1)
        path = self.pod_path(name)
        atomic_write(path, pod)
        return path

    def remove_pod(self, name):
        os.unlink(self.pod_path(name))

    def pods(self):
        return self.get_json("/v1/pods")

    def wait_pod(self, namespace, name, pred=None, timeout=10):
        """Waits until /v1/pods lists namespace/name (and pred(pod) holds); returns the pod."""
        def probe():
            for p in self.pods()["pods"]:
                if p.get("namespace") == namespace and p.get("name") == name and (pred is None or pred(p)):
                    return p
            return None
        return wait_until(probe, timeout, desc="pod %s/%s in /v1/pods" % (namespace, name))

    def wait_pod_gone(self, namespace, name, timeout=10):
        return wait_until(lambda: all((p.get("namespace"), p.get("name")) != (namespace, name)
                                      for p in self.pods()["pods"]),
                          timeout, desc="pod %s/%s gone from /v1/pods" % (namespace, name))


class CtlResult(tuple):
    def __new__(cls, rc, stdout, stderr):
        return super().__new__(cls, (rc, stdout, stderr))

    rc = property(lambda self: self[0])
    stdout = property(lambda self: self[1])
    stderr = property(lambda self: self[2])


_ACL_TAGS = {0x01: "user_obj", 0x02: "user", 0x04: "group_obj", 0x08: "group", 0x10: "mask", 0x20: "other"}


def acl_entries(path):
    """A file's POSIX access ACL, from its system.posix_acl_access attribute: {"user_obj": 6,
    ("user", uid): 4, ("group", gid): 4, "mask": 4, ...} (rwx bits), or {} when it has only the
    mode. The reading getfacl does, without getfacl."""
    try:
        raw = os.getxattr(path, "system.posix_acl_access")
    except OSError as e:
        if e.errno in (61, 95):  # ENODATA: the mode alone; EOPNOTSUPP: no ACLs there
            return {}
        raise
    entries = {}
    for off in range(4, len(raw), 8):
        tag, perm, ident = int.from_bytes(raw[off:off + 2], "little"), int.from_bytes(raw[off + 2:off + 4], "little"), \
            int.from_bytes(raw[off + 4:off + 8], "little")
        name = _ACL_TAGS[tag]
        entries[(name, ident) if name in ("user", "group") else name] = perm
    return entries


# A Python program that connects to the Unix socket argv[1] and prints "ok" or why not (the
# error's text), for running as another user.
CONNECT_PROGRAM = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
    print("ok")
except OSError as e:
    print(e.strerror)
"""


def atomic_write(path, data):
    if isinstance(data, str):
        data = data.encode()
    d, base = os.path.split(path)
    tmp = os.path.join(d, ".%s.tmp%d" % (base, os.getpid()))
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def exit_meaning(rc):
    if rc is None:
        return ""
    if rc < 0:
        try:
            return " (killed by %s)" % signal.Signals(-rc).name
        except ValueError:
            return " (killed by signal %d)" % -rc
    return {78: " (EX_CONFIG)", 99: " (valgrind errors)", 1: " (failure; an ASan/LSan report?)"}.get(rc, "")


def run_piniond(*args, timeout=10, env=None):
    """Runs piniond ARGS... to completion (no notify socket) -> (rc, stdout, stderr)."""
    cmd = [require_binary(PINIOND)] + list(args)
    if VALGRIND:
        cmd = VALGRIND_CMD + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=T(timeout),
                       env=clean_env(env), stdin=subprocess.DEVNULL)
    return CtlResult(p.returncode, p.stdout, p.stderr)


def run_pinionctl(*args, timeout=10, env=None):
    cmd = [require_binary(PINIONCTL)] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=T(timeout),
                       env=clean_env(env), stdin=subprocess.DEVNULL)
    return CtlResult(p.returncode, p.stdout, p.stderr)


# ---------------------------------------------------------------------------------------------
# Fixtures (re-exported by conftest.py)

@pytest.fixture
def binaries():
    """(piniond, pinionctl) paths; fails if they are not built."""
    return require_binary(PINIOND), require_binary(PINIONCTL)


@pytest.fixture
def tmp_dir():
    """A temp dir removed at teardown (mode 0755)."""
    d = tempfile.mkdtemp(prefix="pinion-it-")
    os.chmod(d, 0o755)
    yield d
    if not KEEP_TMP:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def agent_factory():
    """make(config=None, extra="", dropins=None, env=None, node_name=..., start=True,
    wait=True, timeout=10, socket_activate=False, netns=None) -> Agent. Everything made is cleaned up;
    an agent that crashed or exits non-zero at teardown fails the test."""
    agents = []

    def make(config=None, extra="", dropins=None, env=None, node_name="test-node", start=True,
             wait=True, timeout=10, socket_activate=False, netns=None):
        a = Agent(config=config, extra=extra, dropins=dropins, env=env, node_name=node_name, netns=netns)
        agents.append(a)
        if start:
            a.start(wait=wait, timeout=timeout, socket_activate=socket_activate)
        return a

    yield make
    problems = []
    for a in agents:
        p = a.close()
        if p:
            problems.append(p)
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def agent(agent_factory):
    """One default agent, READY."""
    return agent_factory()
