# SPDX-License-Identifier: MIT
"""configsync's test servers: a test CA and server certificate (openssl), real nginx over HTTPS
on a free loopback port with its own prefix/config/pid/log, bundles written into its root
(manifest + files + optional Ed25519 signature), and a small misbehaving HTTPS server (Python)
for what nginx cannot do (stop mid-body, answer slowly)."""

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time

import pytest

from pinion_testlib import free_port, new_container_id, pod_cgroup_path, remove_cgroup_tree, wait_until

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"




def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, **kw)


class TestCA:
    """A CA and one server certificate for 127.0.0.1/localhost, made by openssl."""

    def __init__(self, d):
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.ca_key = os.path.join(d, "ca.key")
        self.ca_cert = os.path.join(d, "ca.pem")
        self.key = os.path.join(d, "server.key")
        self.cert = os.path.join(d, "server.pem")
        csr = os.path.join(d, "server.csr")
        ext = os.path.join(d, "ext.cnf")
        run(OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", self.ca_key, "-out", self.ca_cert, "-days", "2", "-subj", "/CN=configsync test CA")
        run(OPENSSL, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", self.key, "-out", csr, "-subj", "/CN=127.0.0.1")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n")
        run(OPENSSL, "x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key,
            "-CAcreateserial", "-out", self.cert, "-days", "2", "-extfile", ext)


class Nginx:
    """nginx serving root over HTTPS on 127.0.0.1:port; access log lines are "STATUS URI"."""

    def __init__(self, d, ca, extra_locations=""):
        self.dir = d
        self.root = os.path.join(d, "www")
        self.prefix = os.path.join(d, "nginx")
        os.makedirs(self.root, exist_ok=True)
        for sub in ("logs", "tmp"):
            os.makedirs(os.path.join(self.prefix, sub), exist_ok=True)
        self.port = free_port()
        self.access_log = os.path.join(self.prefix, "logs", "access.log")
        self.pid_file = os.path.join(self.prefix, "nginx.pid")
        self.conf = os.path.join(self.prefix, "nginx.conf")
        tmp = os.path.join(self.prefix, "tmp")
        user = "user root;" if os.geteuid() == 0 else ""
        with open(self.conf, "w") as f:
            f.write("""%(user)s
daemon off;
worker_processes 1;
pid %(pid)s;
error_log %(prefix)s/logs/error.log warn;
events { worker_connections 1024; }
http {
    types { application/json json; }
    default_type application/octet-stream;
    client_body_temp_path %(tmp)s/body;
    proxy_temp_path %(tmp)s/proxy;
    fastcgi_temp_path %(tmp)s/fastcgi;
    uwsgi_temp_path %(tmp)s/uwsgi;
    scgi_temp_path %(tmp)s/scgi;
    log_format st '$status $request_uri $body_bytes_sent';
    access_log %(log)s st;
    sendfile on;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:%(port)d ssl;
        ssl_certificate %(cert)s;
        ssl_certificate_key %(key)s;
        root %(root)s;
        location = /error500/manifest.json { return 500; }
        location = /app/redirect-to-https.json { return 302 https://127.0.0.1:%(port)d/app/manifest.json; }
        location = /app/redirect-to-http.json { return 302 http://127.0.0.1:%(port)d/app/manifest.json; }
%(extra)s
    }
}
""" % dict(user=user, pid=self.pid_file, prefix=self.prefix, tmp=tmp, log=self.access_log,
           port=self.port, cert=ca.cert, key=ca.key, root=self.root, extra=extra_locations))
        self._spawn()

    def _spawn(self):
        with open(os.path.join(self.prefix, "logs", "stderr"), "wb") as err:
            self.proc = subprocess.Popen([NGINX, "-p", self.prefix, "-c", self.conf],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True)
        wait_until(self._listening, 10, desc="nginx listening on %d" % self.port)

    def restart(self):
        """Stops nginx and starts it again on the same port (clients see refused connections
        meanwhile)."""
        self.stop()
        self._spawn()

    def _listening(self):
        if self.proc.poll() is not None:
            raise AssertionError("nginx exited: %s" % open(os.path.join(self.prefix, "logs", "stderr")).read())
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def url(self, path):
        return "https://127.0.0.1:%d/%s" % (self.port, path.lstrip("/"))

    def log_lines(self):
        try:
            with open(self.access_log) as f:
                return [l.split() for l in f if l.strip()]
        except FileNotFoundError:
            return []

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def ed25519_keypair(d, name="signing"):
    """(private key PEM path, public key PEM path)."""
    key = os.path.join(d, name + ".key")
    pub = os.path.join(d, name + ".pub")
    run(OPENSSL, "genpkey", "-algorithm", "ed25519", "-out", key)
    run(OPENSSL, "pkey", "-in", key, "-pubout", "-out", pub)
    return key, pub


def sign(key, data):
    """base64 of the raw Ed25519 signature over data (openssl pkeyutl -rawin)."""
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        sig = run(OPENSSL, "pkeyutl", "-sign", "-inkey", key, "-rawin", "-in", f.name).stdout
    return base64.b64encode(sig).decode() + "\n"


def write_bundle(root, name, files, version, sign_key=None, lie=None, raw_entries=None, serial=None):
    """Writes root/name/manifest.json and its files ({path: bytes or (bytes, mode)}).
    lie: {path: {"size": n} or {"sha256": hex}} to declare something else than served.
    raw_entries: extra manifest entries as given. serial: the manifest's "serial", if not None.
    Returns the manifest bytes."""
    base = os.path.join(root, name)
    os.makedirs(base, exist_ok=True)
    entries = []
    for i, (path, content) in enumerate(sorted(files.items())):
        mode = "0644"
        if isinstance(content, tuple):
            content, mode = content
        served = "v-%s/f%d" % (re.sub(r"[^A-Za-z0-9._-]", "_", version), i)
        full = os.path.join(base, served)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(content)
        e = {"path": path, "url": served, "size": len(content),
             "sha256": hashlib.sha256(content).hexdigest(), "mode": mode}
        e.update((lie or {}).get(path, {}))
        entries.append(e)
    entries += raw_entries or []
    top = {"version": version, "files": entries}
    if serial is not None:
        top["serial"] = serial
    data = json.dumps(top, indent=1).encode()
    tmp = os.path.join(base, ".manifest.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    if sign_key:
        with open(os.path.join(base, "manifest.json.sig.tmp"), "w") as f:
            f.write(sign(sign_key, data))
        os.rename(os.path.join(base, "manifest.json.sig.tmp"), os.path.join(base, "manifest.json.sig"))
    replace_advancing_mtime(tmp, os.path.join(base, "manifest.json"))
    return data


def replace_advancing_mtime(src, dst):
    """Renames src over dst with an mtime at least one second past the replaced dst's. nginx's
    ETag is the mtime in whole seconds and the size: two manifests of the same size written
    within a second would share one, and the agent would rightly take the 304 for "unchanged"."""
    try:
        previous = os.stat(dst).st_mtime_ns
    except FileNotFoundError:
        previous = 0
    st = os.stat(src)
    os.utime(src, ns=(st.st_atime_ns, max(st.st_mtime_ns, previous + 1_000_000_000)))
    os.rename(src, dst)


def read_tree(dest):
    """{relative path: bytes} of every file reachable through dest's top-level links."""
    out = {}
    for top in sorted(os.listdir(dest)):
        if top.startswith(".."):
            continue
        p = os.path.join(dest, top)
        if os.path.isdir(p):
            for dirpath, _, names in os.walk(p, followlinks=True):
                for n in names:
                    fp = os.path.join(dirpath, n)
                    with open(fp, "rb") as f:
                        out[os.path.relpath(fp, dest)] = f.read()
        else:
            with open(p, "rb") as f:
                out[top] = f.read()
    return out


def versions_in(dest):
    return sorted(n for n in os.listdir(dest) if re.match(r"^\.\.\d{4}_", n))


class MisbehavingServer:
    """HTTPS on loopback: GET /manifest.json serves `manifest`; GET /file serves `body` but
    behaves per mode: "cut" (sends half, then closes), "slow" (one byte per `delay` seconds)."""

    def __init__(self, ca, manifest=b"", body=b"", mode="cut", delay=1.0):
        self.manifest, self.body, self.mode, self.delay = manifest, body, mode, delay
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(ca.cert, ca.key)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        self.requests = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self, path):
        return "https://127.0.0.1:%d/%s" % (self.port, path.lstrip("/"))

    def _serve(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(c,), daemon=True).start()

    def _handle(self, c):
        try:
            s = self.ctx.wrap_socket(c, server_side=True)
            req = b""
            while b"\r\n\r\n" not in req:
                chunk = s.recv(4096)
                if not chunk:
                    return
                req += chunk
            path = req.split(b" ")[1].decode()
            self.requests.append(path)
            if path.endswith("manifest.json"):
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(self.manifest)
                          + self.manifest)
            else:
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(self.body))
                if self.mode == "cut":
                    s.sendall(self.body[: len(self.body) // 2])
                else:
                    for i in range(len(self.body)):
                        if self.stopping:
                            break
                        s.sendall(self.body[i:i + 1])
                        time.sleep(self.delay)
            s.close()
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()

    def stop(self):
        self.stopping = True
        self.sock.close()


class Tmpfs:
    """A small tmpfs mounted at path (root only); always unmounted by close()."""

    def __init__(self, path, size="1m"):
        self.path = path
        os.makedirs(path, exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "tmpfs", path)
        self.mounted = True

    def close(self):
        if self.mounted:
            subprocess.run(["umount", "-l", self.path], capture_output=True)
            self.mounted = False


@pytest.fixture(scope="module")
def test_ca():
    d = tempfile.mkdtemp(prefix="configsync-ca-")
    try:
        yield TestCA(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def nginx(test_ca):
    d = tempfile.mkdtemp(prefix="configsync-nginx-")
    os.chmod(d, 0o755)
    n = Nginx(d, test_ca)
    try:
        yield n
    finally:
        n.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def dest():
    """A dest path in a fresh directory (removed afterwards) that other users may traverse."""
    # A parent other users can traverse (pytest's tmp_path is 0700): only dest's own modes decide.
    d = tempfile.mkdtemp(prefix="configsync-modes-")
    os.chmod(d, 0o755)
    try:
        yield os.path.join(d, "dest")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def config_section(url, dest, ca, **kw):
    s = {"url": url, "dest": dest, "ca-file": ca.ca_cert, "interval": "1h", "backoff-initial": "300ms",
         "backoff-max": "1s", "timeout": "5s"}
    s.update({k: str(v) for k, v in kw.items()})
    return s


def get_config(agent, name):
    return agent.get_json("/v1/configs/%s" % name)


_IN_POD_CHILD = r"""
import json, os, socket, sys
procs, uid, sock, url = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with open(procs, "w") as f:
    f.write(str(os.getpid()))
os.setgroups([]); os.setgid(uid); os.setuid(uid)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
s.sendall(("GET %s HTTP/1.1\r\nHost: pinion\r\nConnection: close\r\n\r\n" % url).encode())
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
status = int(head.split()[1])
if b"chunked" in head.lower():
    out, rest = b"", body
    while rest:
        n, _, rest = rest.partition(b"\r\n")
        n = int(n, 16)
        if n == 0:
            break
        out += rest[:n]; rest = rest[n + 2:]
    body = out
print(json.dumps({"status": status, "body": json.loads(body)}))
"""


class PodCgroup:
    """A container's cgroup (v1 pids hierarchy, or v2) where the kubelet would put it below the
    test agents' pod roots (pinion_testlib.pod_cgroup_path()), into which a request process moves
    itself before it drops to an unprivileged uid. Removed by close()."""

    def __init__(self, pod_uid):
        self.base = "/sys/fs/cgroup/pids" if os.path.isdir("/sys/fs/cgroup/pids") else "/sys/fs/cgroup"
        self.rel = pod_cgroup_path(pod_uid, new_container_id())
        self.path = os.path.join(self.base, self.rel.lstrip("/"))
        os.makedirs(self.path)

    def request(self, sock, url, uid=65534):
        import sys
        p = subprocess.run([sys.executable, "-c", _IN_POD_CHILD, os.path.join(self.path, "cgroup.procs"),
                            str(uid), sock, url], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        return out["status"], out["body"]

    def close(self):
        remove_cgroup_tree(self.base, self.rel)
