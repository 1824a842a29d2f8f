# SPDX-License-Identifier: MIT
"""Real ZooKeeper servers for the zkreg tests (Debian `zookeeper`, run with java directly).

  ZkServer(dir, client_port, ...)   one server: standalone, or a member of an ensemble
  ZkEnsemble(n)                     n servers on loopback with their own quorum/election ports
  free_port()                       a free loopback TCP port
  kazoo_client(hosts)               a started kazoo client (the independent reader)
  CutProxy(hostport)                a loopback TCP proxy to a server whose connections can be cut
  txn_log(data_dir)                 every transaction a server committed, read from its log
  write_transactions(...)           a session's transactions that created or deleted under a path

Every server runs from a generated zoo.cfg in a temp dir (dataDir there too), with the admin
server off (no port 8080 clash) and the "srvr"/"stat" four-letter words allowed (to find the
leader). Processes get PR_SET_PDEATHSIG through setpriv so a killed test runner leaves none.
"""

import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import pytest

from pinion_testlib import T, free_port, make_pod, wait_until  # noqa: F401 (free_port: also used by the zkreg tests)

JAVA = shutil.which("java") or "/usr/bin/java"
ZK_JAR = "/usr/share/java/zookeeper.jar"
# zookeeper.jar's manifest lists its runtime dependencies; a logging binding is not among them,
# so slf4j stays quiet unless we add one (we do: log4j 1.2 to the server's log file).
ZK_CLASSPATH = ":".join([ZK_JAR, "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"])
_SETPRIV = shutil.which("setpriv")
PDEATHSIG = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []


def zookeeper_available():
    return os.path.exists(ZK_JAR) and os.path.exists(JAVA)




def four_letter(port, word, timeout=2):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word.encode())
        out = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


class ZkServer:
    def __init__(self, root, client_port, myid=None, peers=None, tick_ms=200,
                 min_session_ms=None, max_session_ms=60000):
        self.root = root
        self.client_port = client_port
        self.myid = myid
        self.data_dir = os.path.join(root, "data")
        os.makedirs(self.data_dir, exist_ok=True)
        self.proc = None
        self.log_path = os.path.join(root, "zookeeper.log")
        lines = [
            f"tickTime={tick_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={client_port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,stat,ruok,mntr,cons",
            "maxClientCnxns=0",
            f"maxSessionTimeout={max_session_ms}",
            "initLimit=50",
            "syncLimit=25",
            "autopurge.purgeInterval=0",
            "jute.maxbuffer=4194304",
        ]
        if min_session_ms:
            lines.append(f"minSessionTimeout={min_session_ms}")
        if peers:
            for sid, (qport, eport) in peers.items():
                lines.append(f"server.{sid}=127.0.0.1:{qport}:{eport}")
            with open(os.path.join(self.data_dir, "myid"), "w") as f:
                f.write(f"{myid}\n")
        self.cfg = os.path.join(root, "zoo.cfg")
        with open(self.cfg, "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(root, "log4j.properties"), "w") as f:
            f.write("log4j.rootLogger=INFO, FILE\n"
                    "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
                    f"log4j.appender.FILE.File={self.log_path}\n"
                    "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
                    "log4j.appender.FILE.layout.ConversionPattern=%d %p [%t] %c{1}: %m%n\n")

    @property
    def hostport(self):
        return f"127.0.0.1:{self.client_port}"

    def start(self):
        assert self.proc is None
        cmd = PDEATHSIG + [JAVA, "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                           "-Xshare:auto",
                           f"-Dlog4j.configuration=file:{self.root}/log4j.properties",
                           "-Dzookeeper.jmx.log4j.disable=true",
                           "-cp", ZK_CLASSPATH, "org.apache.zookeeper.server.quorum.QuorumPeerMain", self.cfg]
        self.out = open(os.path.join(self.root, "stdout.log"), "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    def serving(self):
        try:
            return "Mode:" in four_letter(self.client_port, "srvr")
        except OSError:
            return False

    def mode(self):
        try:
            for line in four_letter(self.client_port, "srvr").splitlines():
                if line.startswith("Mode:"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return None

    def wait_serving(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited {self.proc.returncode}: {self.log_tail()}")
            if self.serving():
                return
            time.sleep(0.1)
        raise TimeoutError(f"zookeeper on {self.hostport} not serving: {self.log_tail()}")

    def log_tail(self, n=30):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.out.close()

    def kill(self):
        self.stop(signal.SIGKILL)


class ZkStandalone:
    """One standalone server in its own temp dir."""

    def __init__(self, tmp_root=None, **kw):
        self.dir = tempfile.mkdtemp(prefix="zkreg-zk-", dir=tmp_root)
        self.server = ZkServer(self.dir, free_port(), **kw)

    @property
    def hosts(self):
        return self.server.hostport

    def start(self, timeout=60):
        self.server.start()
        self.server.wait_serving(timeout)
        return self

    def restart(self, timeout=60):
        self.server.stop()
        self.server.start()
        self.server.wait_serving(timeout)

    def close(self):
        try:
            self.server.stop()
        finally:
            if os.environ.get("PINION_KEEP_TMP") != "1":
                shutil.rmtree(self.dir, ignore_errors=True)


class ZkEnsemble:
    """n servers on loopback, each with its client, quorum and election port.

    Ports are picked free and then released before java binds them, so a test running at the
    same time may take one in between; start() checks every server's log for a bind failure
    (a server without its election port could not take part in the next election) and starts
    over on fresh ports."""

    def __init__(self, n=3, **kw):
        self.n, self.kw = n, kw
        self.dir = tempfile.mkdtemp(prefix="zkreg-ens-")
        self.servers = {}
        self.attempt = 0

    def _make(self):
        self.attempt += 1
        peers = {i: (free_port(), free_port()) for i in range(1, self.n + 1)}
        self.servers = {}
        for i in peers:
            root = os.path.join(self.dir, f"try{self.attempt}", f"zk{i}")
            os.makedirs(root)
            self.servers[i] = ZkServer(root, free_port(), myid=i, peers=peers, **self.kw)

    @property
    def hosts(self):
        return ",".join(s.hostport for s in self.servers.values())

    def _bind_failed(self):
        for s in self.servers.values():
            text = s.log_tail(400)
            if "BindException" in text or "Address already in use" in text:
                return True
        return False

    def start(self, timeout=90, attempts=3):
        for _ in range(attempts):
            self._make()
            for s in self.servers.values():
                s.start()
            try:
                for s in self.servers.values():
                    s.wait_serving(timeout)
                deadline = time.time() + timeout
                while self.leader() is None and time.time() < deadline:
                    time.sleep(0.1)
                if self.leader() is not None and not self._bind_failed():
                    return self
            except (RuntimeError, TimeoutError):
                pass
            for s in self.servers.values():
                s.stop()
        raise RuntimeError("could not start a ZooKeeper ensemble: " +
                           " | ".join(s.log_tail(5) for s in self.servers.values()))

    def leader(self):
        for i, s in self.servers.items():
            if s.proc is not None and s.mode() == "leader":
                return i
        return None

    def close(self):
        try:
            for s in self.servers.values():
                s.stop()
        finally:
            if os.environ.get("PINION_KEEP_TMP") != "1":
                shutil.rmtree(self.dir, ignore_errors=True)


class CutProxy:
    """A TCP proxy on loopback to target ("host:port"): cut() closes every connection through it
    and refuses new ones (a client's connection lost, its session alive on the server) until
    resume(). close() ends it."""

    def __init__(self, target):
        import threading
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.hostport = "127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.lock = threading.Lock()
        self.socks = []
        self.cutting = False
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import threading
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                if self.cutting or self.closed:
                    c.close()
                    continue
                try:
                    u = socket.create_connection(self.target, timeout=5)
                except OSError:
                    c.close()
                    continue
                self.socks += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            self.cutting = True
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def resume(self):
        with self.lock:
            self.cutting = False

    def close(self):
        self.closed = True
        self.cut()
        self.lsock.close()


def kazoo_client(hosts, timeout=10):
    from kazoo.client import KazooClient
    c = KazooClient(hosts=hosts, timeout=timeout)
    c.start(timeout=30)
    return c


def members(kz, path):
    """{child: parsed JSON} of the member_ nodes under path (empty if the path is missing)."""
    import json
    from kazoo.exceptions import NoNodeError
    out = {}
    try:
        children = kz.get_children(path)
    except NoNodeError:
        return out
    for c in children:
        if not c.startswith("member_"):
            continue
        try:
            data, _ = kz.get(f"{path}/{c}")
        except NoNodeError:
            continue
        out[c] = json.loads(data)
    return out


def member_raw(kz, path):
    """[(child, raw bytes, stat)] of the member_ nodes under path."""
    from kazoo.exceptions import NoNodeError
    out = []
    try:
        children = sorted(kz.get_children(path))
    except NoNodeError:
        return out
    for c in children:
        if c.startswith("member_"):
            try:
                data, stat = kz.get(f"{path}/{c}")
            except NoNodeError:
                continue
            out.append((c, data, stat))
    return out


def endpoints(kz, path):
    """Sorted list of "host:port" of the members under path (duplicates kept)."""
    return sorted(f'{m["serviceEndpoint"]["host"]}:{m["serviceEndpoint"]["port"]}'
                  for m in members(kz, path).values())


class Prometheus:
    """Debian's prometheus with a serverset_sd_configs job, on a loopback port."""

    def __init__(self, zk_hosts, paths, binary="/usr/bin/prometheus"):
        self.dir = tempfile.mkdtemp(prefix="zkreg-prom-")
        self.port = free_port()
        servers = ", ".join(f"'{h}'" for h in zk_hosts.split(","))
        plist = ", ".join(f"'{p}'" for p in paths)
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1h\n  evaluation_interval: 1h\n"
                    "scrape_configs:\n"
                    "  - job_name: serverset\n"
                    "    serverset_sd_configs:\n"
                    f"      - servers: [{servers}]\n"
                    f"        paths: [{plist}]\n"
                    "        timeout: 10s\n")
        self.log = open(os.path.join(self.dir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            PDEATHSIG + [binary, f"--config.file={self.dir}/prometheus.yml",
                         f"--storage.tsdb.path={self.dir}/data",
                         f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def targets(self):
        """The discovered targets' __address__ (active targets, sorted), or None if not up."""
        import json
        import urllib.request
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/targets?state=active",
                                        timeout=2) as r:
                doc = json.load(r)
        except OSError:
            return None
        return sorted(t["discoveredLabels"]["__address__"] for t in doc["data"]["activeTargets"])

    def active(self):
        import json
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/targets?state=active", timeout=2) as r:
            return json.load(r)["data"]["activeTargets"]

    def close(self):
        try:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.log.close()
        finally:
            if os.environ.get("PINION_KEEP_TMP") != "1":
                shutil.rmtree(self.dir, ignore_errors=True)


# ---- the server's own record of what it did: its transaction log ----

# Transaction types in the server's log (ZooDefs.OpCode): the creates (create, create2,
# createContainer, createTTL), delete, setData, multi, and the error a failed multi carries.
TXN_CREATES = (1, 15, 19, 21)
TXN_DELETE = 2
TXN_SET = 5
TXN_MULTI = 14
TXN_ERROR = -1


def txn_log(data_dir):
    """Every transaction in the server's logs (dataDir/version-2/log.*), in order, as
    (session id, time ms by the server's clock, [(type, body)]): a multi is one transaction
    with its parts. The server appends each before it answers, so a write seen by any client
    is in here."""
    d = os.path.join(data_dir, "version-2")
    names = sorted((f for f in os.listdir(d) if f.startswith("log.")), key=lambda f: int(f[4:], 16))
    out = []
    for name in names:
        with open(os.path.join(d, name), "rb") as f:
            buf = f.read()
        pos = 16  # the file header: magic, version, dbid
        while pos + 12 <= len(buf):
            _crc, length = struct.unpack_from(">qi", buf, pos)
            if length <= 0 or pos + 12 + length > len(buf):
                break  # the preallocated (zeroed) rest of the file
            txn = buf[pos + 12:pos + 12 + length]
            pos += 12 + length + 1  # and the end-of-record byte
            client, _cxid, _zxid, when, typ = struct.unpack_from(">qiqqi", txn, 0)
            body = txn[32:]
            if typ != TXN_MULTI:
                out.append((client, when, [(typ, body)]))
                continue
            (count,), p, parts = struct.unpack_from(">i", body, 0), 4, []
            for _ in range(count):
                sub, blen = struct.unpack_from(">ii", body, p)
                parts.append((sub, body[p + 8:p + 8 + blen]))
                p += 8 + blen
            out.append((client, when, parts))
    return out


def write_transactions(data_dir, parent, session=None, kind="create"):
    """The committed transactions (of session, if given) that created (kind "create") or
    deleted ("delete") nodes directly under parent: a list of (time ms, how many), in order."""
    prefix = parent.rstrip("/").encode() + b"/"
    out = []
    for client, when, parts in txn_log(data_dir):
        if (session is not None and client != session) or any(t == TXN_ERROR for t, _ in parts):
            continue  # another session's, or a failed multi (nothing happened)
        k = 0
        for typ, body in parts:
            if (typ == TXN_DELETE) if kind == "delete" else (typ in TXN_CREATES):
                (plen,) = struct.unpack_from(">i", body, 0)
                path = body[4:4 + plen]
                k += path.startswith(prefix) and b"/" not in path[len(prefix):]
        if k:
            out.append((when, k))
    return out


# ---- what the zkreg test files share: config, pods, and waiting for registrations/members ----

def zk_config(zk, **kw):
    """A [zookeeper] section for servers zk, quick to react (kw: more keys, _ for -)."""
    z = {"servers": zk.hosts, "session-timeout": "4s", "write-qps": "1000", "drain-delay": "1s",
         "flap-damping": "0"}
    z.update({k.replace("_", "-"): v for k, v in kw.items()})
    return {"zookeeper": z}


def web_pod(name, path, ip="10.1.2.3", namespace="default", ports=None, port=None, shard=None, ready=None,
            extra=None):
    """A pod registered at path (pinion.io/serverset), with port/shard annotations if given."""
    ann = {"pinion.io/serverset": path}
    if port is not None:
        ann["pinion.io/port"] = str(port)
    if shard is not None:
        ann["pinion.io/shard"] = str(shard)
    ann.update(extra or {})
    return make_pod(name, namespace=namespace, annotations=ann,
                    ports=ports if ports is not None else [("http", 8080)], ip=ip,
                    conditions=None if ready is None else {"Ready": ready})


def registrations(a):
    return {r["pod"]: r for r in a.get_json("/v1/registrations")["registrations"]}


def wait_reg(a, pod, pred, timeout=10):
    """Waits until the registration of pod (ns/name) satisfies pred; returns it."""
    def probe():
        r = registrations(a).get(pod)
        return r if r and pred(r) else None
    return wait_until(probe, timeout=T(timeout), desc=f"registration of {pod}")


def wait_endpoints(kz, path, want, timeout=10):
    want = sorted(want)
    got = []

    def probe():
        got[:] = endpoints(kz, path)
        return got == want
    try:
        wait_until(probe, timeout=T(timeout), desc=f"members of {path} == {want}")
    except Exception:
        raise AssertionError(f"members of {path}: {got}, wanted {want}")


# ---- pytest fixtures: one standalone server per test file, and a kazoo client on it ----

@pytest.fixture
def base(request):
    """A unique ServerSet path per test."""
    return "/pinion-test/" + request.node.name.replace("[", "_").replace("]", "")


@pytest.fixture(scope="module")
def zk():
    s = ZkStandalone()
    try:
        s.start()
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def kz(zk):
    c = kazoo_client(zk.hosts)
    yield c
    c.stop()
    c.close()
