# SPDX-License-Identifier: MIT
"""Guest-side helpers for the VM suite. These tests run as root inside the guest booted by
tests/vm/run: systemd is PID 1, cgroup v2 is mounted at /sys/fs/cgroup, and pinion is installed
under /usr and /etc as `make install` put it. Every test leaves the node as it found it:
piniond stopped, drop-ins and transient units removed (the `node` fixture does this)."""

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time

import pytest

CONF_D = "/etc/pinion/conf.d"
SOCKET = "/run/pinion/sockets/pinion.sock"
LEGACY_SOCKET = "/run/pinion/pinion.sock"
STATE_DIR = "/var/lib/pinion"
RUNTIME_DIR = "/run/pinion"
CNI_PLUGIN = "/usr/lib/cni/pinion-cni"
OUT = os.environ.get("PINION_VM_OUT", "/tmp")
UNIT = "piniond.service"
# package/ installs the .debs of `tests/vm/run --debs` in a guest where nothing else installed
# pinion: collected in such a run only, never beside the tests of a `make install`.
collect_ignore = [] if os.environ.get("PINION_VM_DEBS") else ["package"]


def run(*argv, check=True, timeout=120, **kw):
    """Runs argv, returns the CompletedProcess (text); raises with its output on failure."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


def systemctl(*args, check=True):
    return run("systemctl", *args, check=check)


def unit_property(unit, prop):
    return run("systemctl", "show", "-P", prop, unit).stdout.strip()


def main_pid(unit="piniond.service"):
    return int(unit_property(unit, "MainPID") or 0)


def wait_for(what, cond, timeout=60.0, interval=0.1):
    """Polls cond() until it returns a true value, which it returns; fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def journal_cursor():
    p = run("journalctl", "-n", "0", "--show-cursor", "-q", check=False)
    for line in p.stdout.splitlines():
        if line.startswith("-- cursor: "):
            return line[len("-- cursor: "):]
    return None


def journal(*args, cursor=None):
    """Journal entries as dicts (journalctl -o json), after cursor when given."""
    argv = ["journalctl", "-o", "json", "--no-pager", *args]
    if cursor:
        # Not --after-cursor: with matches, systemd 252 skips the first matching entry when
        # the cursor's own entry does not match. --cursor starts at the cursor's entry.
        argv += ["--cursor", cursor]
    run("journalctl", "--sync", check=False)
    p = run(*argv, check=False)
    entries = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return [e for e in entries if e.get("__CURSOR") != cursor]


def journal_messages(*args, cursor=None, priority=None):
    """MESSAGE of the entries journalctl ARGS (matches, -u UNIT) selects after cursor, up to
    priority (a name or number, as -p takes it)."""
    if priority is not None:
        args = ("-p", str(priority)) + args
    return [e.get("MESSAGE", "") for e in journal(*args, cursor=cursor)]


def wait_for_journal(what, *matches, cursor=None, pattern=".", timeout=30.0):
    """Waits for an entry matching the fields whose MESSAGE matches the regex; returns it."""
    rx = re.compile(pattern)
    return wait_for(what, lambda: next((e for e in journal(*matches, cursor=cursor)
                                         if rx.search(e.get("MESSAGE", ""))), None), timeout=timeout,
                    interval=0.3)


def api_json(path, **kw):
    code, body = api(path, **kw)
    assert code == 200, (path, code, body)
    return json.loads(body)


def module_status(name):
    return next(m for m in api_json("/v1/status")["modules"] if m["name"] == name)


# Capability numbers (linux/capability.h) of the names this suite asks about.
CAPS = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3, "CAP_KILL": 5,
        "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13,
        "CAP_SYS_MODULE": 16, "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_SYS_RESOURCE": 24}


def proc_caps(pid):
    """{"CapEff": {"CAP_CHOWN", ...}, ...} from /proc/PID/status (unnamed bits as "cap_N")."""
    names = {v: k for k, v in CAPS.items()}
    with open(f"/proc/{pid}/status") as f:
        text = f.read()
    out = {}
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        value = int(re.search(r"^%s:\s*([0-9a-f]+)$" % key, text, re.M).group(1), 16)
        out[key] = {names.get(b, f"cap_{b}") for b in range(64) if value >> b & 1}
    return out


def unit_capability_bounding_set(unit=UNIT):
    """The unit's CapabilityBoundingSet= as loaded, as a set of names."""
    return set(unit_property(unit, "CapabilityBoundingSet").upper().split())


def unit_cgroup_pids(unit=UNIT):
    path = "/sys/fs/cgroup" + unit_property(unit, "ControlGroup") + "/cgroup.procs"
    try:
        with open(path) as f:
            return {int(x) for x in f.read().split()}
    except FileNotFoundError:
        return set()


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def concurrent_requests(path, n_threads, until, timeout=60):
    """Requests path from n_threads threads, each one after the other, until until() is true.
    Returns the outcomes: an HTTP status, or the error text of a request that got no answer."""
    outcomes, lock = [], threading.Lock()

    def client():
        while True:
            stop = until()
            code, body = api(path, timeout=timeout)
            with lock:
                outcomes.append(code if code else f"no answer: {body!r}")
            if stop:
                return

    threads = [threading.Thread(target=client, daemon=True) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 30)
    return outcomes


def api(path, method="GET", sock=SOCKET, timeout=10):
    """One request to the local API over the Unix socket: (status, body text)."""
    p = run("curl", "-sS", "--max-time", str(timeout), "--unix-socket", sock, "-X", method,
            "-o", "-", "-w", "\n%{http_code}", f"http://localhost{path}", check=False, timeout=timeout + 5)
    body, _, code = p.stdout.rpartition("\n")
    if not int(code or 0):
        return 0, f"curl exited {p.returncode}: {p.stderr.strip()}"
    return int(code), body



def reclaim_target(name):
    """The reclaim target called name, as /v1/reclaim shows it."""
    code, body = api("/v1/reclaim")
    assert code == 200, body
    for t in json.loads(body)["targets"]:
        if t["name"] == name:
            return t
    raise AssertionError("no target %s in %s" % (name, body))


def memory_events(g):
    """A v2 cgroup's memory.events as a dict of counts."""
    return {k: int(v) for k, v in (line.split() for line in g.read("memory.events").splitlines())}

def write_dropin(name, text):
    os.makedirs(CONF_D, exist_ok=True)
    path = os.path.join(CONF_D, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class Node:
    """What a test changes on the node, undone at the end: drop-ins, unit drop-ins, transient
    units, and the agent's state."""

    def __init__(self):
        self.dropins = []
        self.unit_dropins = []
        self.units = []
        self.undo = []

    def conf(self, name, text):
        self.dropins.append(write_dropin(name, text))

    def unit_dropin(self, unit, name, text):
        d = f"/etc/systemd/system/{unit}.d"
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        self.unit_dropins.append(path)
        systemctl("daemon-reload")

    def transient(self, unit):
        """Registers a transient unit (systemd-run) to stop at the end."""
        self.units.append(unit)
        return unit

    def service(self, unit, *argv, props=()):
        """A transient service (systemd-run) running argv, stopped at the end."""
        cmd = ["systemd-run", "--unit", unit, "--service-type=exec", "--quiet"]
        for p in props:
            cmd += ["-p", p]
        run(*cmd, "--", *argv)
        return self.transient(unit)

    def on_cleanup(self, fn):
        """fn() runs at the end (before the drop-ins go), last registered first."""
        self.undo.append(fn)

    def netns(self, name):
        """ip netns add NAME, deleted at the end (with the pod end of its veth)."""
        run("ip", "netns", "add", name)
        self.on_cleanup(lambda: run("ip", "netns", "del", name, check=False))
        return f"/run/netns/{name}"

    def http_server(self, unit, root, port, bind="127.0.0.1"):
        """Python's http.server on root, as a transient service; returns its base URL."""
        self.service(unit, "/usr/bin/python3", "-m", "http.server", "--bind", bind, str(port),
                     "--directory", root)
        wait_for(f"{unit} listening", lambda: _connects(bind if bind != "0.0.0.0" else "127.0.0.1", port))
        return f"http://{bind}:{port}"

    def healthy(self, port=8099, extra="", fill_mb=0):
        """A node where every module that works offline does real work: identity with the local
        signer, podnet with a pod CIDR, a reclaim target on a memory-limited service (which
        first writes fill_mb of page cache), and a config bundle served over HTTP on loopback.
        Writes conf.d/50-healthy.conf, with extra appended."""
        root = "/srv/pinion-test"
        self.on_cleanup(lambda: shutil.rmtree(root, ignore_errors=True))
        write_bundle(root, "app", {"app.conf": b"greeting=hello\n", "sub/data.txt": (b"data\n", "0640")}, "v1")
        url = self.http_server("pinion-test-http.service", root, port)
        fill = "/var/tmp/pinion-test-fill"
        self.on_cleanup(lambda: os.path.exists(fill) and os.unlink(fill))
        self.service("pinion-test-target.service", "/bin/sh", "-c",
                     f"head -c {fill_mb}M /dev/zero > {fill} && exec sleep infinity", props=["MemoryMax=64M"])
        self.conf("50-healthy.conf", f"""[identity]
signer=local
trust-domain=example.org
ca-dir={STATE_DIR}/ca

[network]
pod-cidr=10.244.0.0/24

[reclaim.target]
cgroup=/system.slice/pinion-test-target.service

[config.app]
url={url}/app/manifest.json
dest={STATE_DIR}/configs/app
{extra}""")
        forward = open("/proc/sys/net/ipv4/ip_forward").read()
        self.on_cleanup(lambda: open("/proc/sys/net/ipv4/ip_forward", "w").write(forward))
        return url

    def cleanup(self):
        systemctl("stop", "piniond.service", "piniond.socket", check=False)
        systemctl("reset-failed", "piniond.service", "piniond.socket", check=False)
        for u in reversed(self.units):
            systemctl("stop", u, check=False)
            systemctl("reset-failed", u, check=False)
        for fn in reversed(self.undo):
            fn()
        for p in self.dropins + self.unit_dropins:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        for p in self.unit_dropins:
            d = os.path.dirname(p)
            if os.path.isdir(d) and not os.listdir(d):
                os.rmdir(d)
        if self.unit_dropins:
            systemctl("daemon-reload")
        shutil.rmtree(STATE_DIR, ignore_errors=True)
        # RuntimeDirectoryPreserve=yes keeps it across stops (the socket unit owns it).
        shutil.rmtree(RUNTIME_DIR, ignore_errors=True)


@pytest.fixture
def node():
    n = Node()
    try:
        yield n
    finally:
        n.cleanup()


def start_agent(timeout=90):
    """systemctl start piniond: returns once systemd has it active (Type=notify: READY=1)."""
    systemctl("start", "piniond.service")
    assert unit_property("piniond.service", "ActiveState") == "active"
    return main_pid()


def pytest_terminal_summary(terminalreporter):
    s = terminalreporter.stats
    count = lambda k: len([r for r in s.get(k, []) if getattr(r, "when", "call") in ("call", "setup")])  # noqa: E731
    terminalreporter.write_line(
        f"PINION-VM-RESULT passed={count('passed')} failed={count('failed') + count('error')} skipped={count('skipped')}")


def _connects(host, port):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def write_bundle(root, name, files, version):
    """root/name/manifest.json (DESIGN.md "Config bundles") and its files, {path: bytes or
    (bytes, mode)}; returns the manifest's URL path below root."""
    base = os.path.join(root, name)
    entries = []
    for i, (path, content) in enumerate(sorted(files.items())):
        content, mode = content if isinstance(content, tuple) else (content, "0644")
        served = f"{version}/f{i}"
        os.makedirs(os.path.join(base, version), exist_ok=True)
        with open(os.path.join(base, served), "wb") as f:
            f.write(content)
        entries.append({"path": path, "url": served, "size": len(content),
                        "sha256": hashlib.sha256(content).hexdigest(), "mode": mode})
    with open(os.path.join(base, "manifest.json.tmp"), "w") as f:
        json.dump({"version": version, "files": entries}, f)
    os.rename(os.path.join(base, "manifest.json.tmp"), os.path.join(base, "manifest.json"))
    return f"/{name}/manifest.json"


def cni(command, netns, container_id, pod_uid, ifname="eth0"):
    """pinion-cni as a runtime runs it; returns (exit status, parsed stdout or None, stderr)."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command, "CNI_CONTAINERID": container_id,
           "CNI_NETNS": netns, "CNI_IFNAME": ifname, "CNI_PATH": os.path.dirname(CNI_PLUGIN),
           "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID={pod_uid}"}
    conf = json.dumps({"cniVersion": "1.1.0", "name": "pinion", "type": "pinion-cni", "socket": SOCKET})
    p = subprocess.run([CNI_PLUGIN], input=conf, env=env, capture_output=True, text=True, timeout=60)
    try:
        out = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        out = None
    return p.returncode, out, p.stderr


def unix_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
