"""Fixtures for the identity tests: a real `cfssl serve` CA, pod cgroups to place processes in,
and helpers that check certificates with the openssl command line (an independent reader)."""

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from pinion_testlib import (SERVICE_CGROUP_ROOT, free_port, new_container_id, pod_cgroup_path, remove_cgroup_tree,
                            wait_until)

CFSSL = shutil.which("cfssl") or "/usr/bin/cfssl"
AUTH_KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"




def run(*cmd, input=None, check=True):
    p = subprocess.run(list(cmd), input=input, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d): %s%s" % (cmd, p.returncode, p.stdout, p.stderr))
    return p


class CfsslServer:
    """`cfssl serve` on a free loopback port with its own EC root, the authsign key in a file,
    and the two profiles pinion asks for: pinion-node (client certificate) and
    pinion-intermediate (a pathlen-0 CA for the node's workload certificates)."""

    def __init__(self, expiry="1h"):
        self.dir = tempfile.mkdtemp(prefix="identity-cfssl-")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.ca_key = os.path.join(self.dir, "ca-key.pem")
        self.ca_file = os.path.join(self.dir, "ca.pem")
        self.key_file = os.path.join(self.dir, "auth.key")
        self.log_file = os.path.join(self.dir, "cfssl.log")
        run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", self.ca_key)
        run("openssl", "req", "-x509", "-new", "-key", self.ca_key, "-subj", "/O=test/CN=identity test cfssl root",
            "-days", "2", "-out", self.ca_file)
        with open(self.key_file, "w") as f:
            f.write(AUTH_KEY + "\n")
        os.chmod(self.key_file, 0o600)
        self.write_config(expiry)
        self.proc = None

    def write_config(self, expiry):
        cfg = {
            "signing": {
                "default": {"expiry": expiry, "usages": ["digital signature"], "auth_key": "pinion"},
                "profiles": {
                    "pinion-node": {"expiry": expiry, "usages": ["digital signature", "client auth"],
                                    "auth_key": "pinion"},
                    "pinion-intermediate": {"expiry": expiry, "usages": ["cert sign", "crl sign"],
                                            "auth_key": "pinion",
                                            "ca_constraint": {"is_ca": True, "max_path_len": 0,
                                                              "max_path_len_zero": True}},
                },
            },
            "auth_keys": {"pinion": {"type": "standard", "key": AUTH_KEY}},
        }
        with open(os.path.join(self.dir, "config.json"), "w") as f:
            json.dump(cfg, f)

    def start(self):
        log = open(self.log_file, "a")
        self.proc = subprocess.Popen(
            [CFSSL, "serve", "-address", "127.0.0.1", "-port", str(self.port), "-ca", self.ca_file,
             "-ca-key", self.ca_key, "-config", os.path.join(self.dir, "config.json")],
            stdout=log, stderr=log)
        log.close()

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("cfssl serve exited: %s" % open(self.log_file).read()[-2000:])
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return True
            except OSError:
                return False
        wait_until(up, timeout=15, desc="cfssl serve listening")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def config(self):
        return {"signer": "cfssl", "trust-domain": "example.org", "cfssl-url": self.url,
                "cfssl-auth-key-file": self.key_file, "cfssl-ca-file": self.ca_file}


def other_root(path):
    """A self-signed EC root that is not the server's (a wrong pin), written to path."""
    key = path + ".key"
    run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    run("openssl", "req", "-x509", "-new", "-key", key, "-subj", "/O=test/CN=identity test impostor root",
        "-days", "2", "-out", path)
    os.unlink(key)
    return path


@contextlib.contextmanager
def cfssl_server(expiry="1h"):
    srv = CfsslServer(expiry)
    try:
        srv.start()
        yield srv
    finally:
        srv.close()


# ---------------------------------------------------------------------------------------------
# certificates, read with the openssl command line

def write_temp(text, suffix=".pem"):
    fd, path = tempfile.mkstemp(prefix="identity-", suffix=suffix)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def split_pem(text):
    out, cur = [], []
    for line in text.splitlines():
        cur.append(line)
        if line.startswith("-----END"):
            out.append("\n".join(cur) + "\n")
            cur = []
    return out


def openssl_verify(chain_pem, bundle_pem, purpose=None):
    """`openssl verify` of the leaf with the rest of the chain as untrusted intermediates."""
    certs = split_pem(chain_pem)
    assert certs, "no certificate in %r" % chain_pem[:100]
    leaf = write_temp(certs[0])
    inter = write_temp("".join(certs[1:])) if len(certs) > 1 else None
    ca = write_temp(bundle_pem)
    try:
        cmd = ["openssl", "verify", "-CAfile", ca]
        if inter:
            cmd += ["-untrusted", inter]
        if purpose:
            cmd += ["-purpose", purpose]
        p = run(*(cmd + [leaf]), check=False)
        assert p.returncode == 0 and ": OK" in p.stdout, (p.stdout, p.stderr)
    finally:
        for f in (leaf, inter, ca):
            if f:
                os.unlink(f)


def cert_text(pem):
    path = write_temp(split_pem(pem)[0])
    try:
        return run("openssl", "x509", "-in", path, "-noout", "-text", "-nameopt", "RFC2253").stdout
    finally:
        os.unlink(path)


def cert_field(pem, *args):
    path = write_temp(split_pem(pem)[0])
    try:
        return run("openssl", "x509", "-in", path, "-noout", *args).stdout.strip()
    finally:
        os.unlink(path)


def cert_dates(pem):
    """(notBefore, notAfter) as Unix seconds, read by openssl."""
    out = cert_field(pem, "-startdate", "-enddate", "-dateopt", "iso_8601")
    vals = {}
    for line in out.splitlines():
        k, v = line.split("=", 1)
        vals[k] = time.mktime(time.strptime(v.strip(), "%Y-%m-%d %H:%M:%SZ")) - time.timezone
    return vals["notBefore"], vals["notAfter"]


def cert_sans(pem):
    out = cert_field(pem, "-ext", "subjectAltName")
    lines = [l.strip() for l in out.splitlines()[1:]]
    return sorted(x.strip() for l in lines for x in l.split(",") if x.strip())


def key_matches(cert_pem, key_pem):
    c = write_temp(split_pem(cert_pem)[0])
    k = write_temp(key_pem)
    try:
        a = run("openssl", "x509", "-in", c, "-noout", "-pubkey").stdout
        b = run("openssl", "pkey", "-in", k, "-pubout").stdout
        return a == b
    finally:
        os.unlink(c)
        os.unlink(k)


# ---------------------------------------------------------------------------------------------
# pods' cgroups: processes placed where the kubelet would put a pod's containers

class PodCgroup:
    """A container's cgroup of a pod in one hierarchy, where the kubelet would put it below the
    test agents' pod roots (pinion_testlib.pod_cgroup_path()): the cgroupfs spelling
    (.../kubepods/besteffort/pod<uid>/<64 hex>) or the systemd one
    (.../kubepods-besteffort-pod<uid_with_underscores>.slice/cri-containerd-<64 hex>.scope).
    container_id: the container's ID (a new one by default; None: the pod's own cgroup).
    Removed on close."""

    def __init__(self, uid, hierarchy="pids", systemd=False, container_id="new", qos="besteffort"):
        self.uid = uid
        self.base = os.path.join("/sys/fs/cgroup", hierarchy)
        if not os.path.isdir(self.base):
            raise RuntimeError("no cgroup hierarchy at %s" % self.base)
        self.container_id = new_container_id() if container_id == "new" else container_id
        self.rel = pod_cgroup_path(uid, self.container_id, systemd=systemd, qos=qos)
        self.path = os.path.join(self.base, self.rel.lstrip("/"))
        os.makedirs(self.path)

    def close(self):
        remove_cgroup_tree(self.base, self.rel)

    def preexec(self, uid=None):
        path = self.path

        def fn():
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            if uid is not None:
                os.setgid(uid)
                os.setuid(uid)
        return fn


class ServiceCgroup(PodCgroup):
    """A systemd unit's cgroup, <root>/<unit>, in one hierarchy (by default below the test
    agents' service root, pinion_testlib.SERVICE_CGROUP_ROOT). Removed on close."""

    def __init__(self, unit, hierarchy="pids", root=SERVICE_CGROUP_ROOT):
        self.unit = unit
        self.base = os.path.join("/sys/fs/cgroup", hierarchy)
        if not os.path.isdir(self.base):
            raise RuntimeError("no cgroup hierarchy at %s" % self.base)
        self.rel = "%s/%s" % (root, unit)
        self.path = os.path.join(self.base, self.rel.lstrip("/"))
        os.makedirs(self.path)


# The client a pod's process runs: one GET on the agent's socket, the answer as JSON on stdout.
CLIENT = r"""
import json, socket, sys, os
path, url = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.connect(path)
mode = sys.argv[3] if len(sys.argv) > 3 else ""
if mode == "handoff":
    # The connected process exits; its child (same pod) speaks on the inherited socket. The
    # PID the agent got from SO_PEERCRED at accept is then gone.
    import time
    parent = os.getpid()
    if os.fork():
        os._exit(0)
    # Wait until the test has reaped the parent: its /proc entry is gone, the PID free.
    deadline = time.time() + 10
    while os.path.exists("/proc/%d" % parent) and time.time() < deadline:
        time.sleep(0.01)
s.sendall(("GET %s HTTP/1.1\r\nHost: pinion\r\nConnection: close\r\n\r\n" % url).encode())
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
status = int(head.split(b" ")[1])
if b"chunked" in head.lower():
    out, rest = b"", body
    while rest:
        n, _, rest = rest.partition(b"\r\n")
        n = int(n, 16)
        if n == 0:
            break
        out += rest[:n]
        rest = rest[n + 2:]
    body = out
print(json.dumps({"status": status, "body": body.decode()}))
sys.stdout.flush()
"""


def request_from(cg, socket_path, url, uid=None, mode=""):
    """Runs the client inside cgroup cg (None: where the test is) as uid; returns (status, body)."""
    cmd = [sys.executable, "-c", CLIENT, socket_path, url] + ([mode] if mode else [])
    if cg:
        pre = cg.preexec(uid)
    elif uid is not None:
        def pre():
            os.setgid(uid)
            os.setuid(uid)
    else:
        pre = None
    if mode == "handoff":
        # The parent exits at once and we reap it; its child prints into a file.
        with tempfile.NamedTemporaryFile("w+", prefix="identity-handoff-") as f:
            p = subprocess.Popen(cmd, preexec_fn=pre, stdout=f, stderr=subprocess.DEVNULL)
            p.wait(10)
            wait_until(lambda: open(f.name).read().endswith("\n"), timeout=20, desc="handoff client answered")
            text = open(f.name).read()
    else:
        p = subprocess.run(cmd, preexec_fn=pre, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        text = p.stdout
    out = json.loads(text.strip().splitlines()[-1])
    try:
        body = json.loads(out["body"])
    except ValueError:
        body = out["body"]
    return out["status"], body


def new_uid():
    return str(uuid.uuid4())
