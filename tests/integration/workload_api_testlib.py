"""Helpers for the Workload API tests: the spec's messages generated for Python from
proto/workload.proto with protoc, the two client stacks (python3-grpcio: workload_api_client.py;
@grpc/grpc-js: workload_api_client.js) run as processes of a pod, and raw HTTP/2 frames for
hostile input."""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

from pinion_testlib import SRCDIR

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "workload_api_client.py")
PYTHON = "/usr/bin/python3"  # Debian's, with python3-grpcio and python3-protobuf
NODE_CLIENT = os.path.join(HERE, "workload_api_client.js")
NODE = os.environ.get("PINION_NODE", "node")  # Debian's nodejs; another build to try it against


def generate_messages():
    """A directory holding workload_pb2.py made by protoc from our .proto (removed by the caller)."""
    d = tempfile.mkdtemp(prefix="workload-pb-")
    os.chmod(d, 0o755)  # the client may run as another user
    try:
        subprocess.run(["protoc", "-I", os.path.join(SRCDIR, "proto"), "--python_out", d, "workload.proto"],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        shutil.rmtree(d, ignore_errors=True)
        raise
    for name in os.listdir(d):
        os.chmod(os.path.join(d, name), 0o644)
    return d


class PythonClient:
    """workload_api_client.py on Debian's python3-grpcio, with the messages in pb_dir."""

    def __init__(self, pb_dir):
        self.pb_dir = pb_dir

    def cmd(self, op, *args):
        return [PYTHON, CLIENT, op] + [str(a) for a in args]

    def env(self, socket_path):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = self.pb_dir + os.pathsep + HERE
        env["SPIFFE_ENDPOINT_SOCKET"] = "unix://" + socket_path
        return env


class NodeClient:
    """workload_api_client.js on @grpc/grpc-js, its packages found through NODE_PATH in the
    cache scripts/npm-deps fills, proto/workload.proto loaded at run time."""

    def __init__(self, node_modules):
        self.node_modules = node_modules

    def cmd(self, op, *args):
        return [NODE, NODE_CLIENT, op, "--proto", os.path.join(SRCDIR, "proto", "workload.proto")] + \
            [str(a) for a in args]

    def env(self, socket_path):
        env = {k: v for k, v in os.environ.items() if not k.startswith("NODE")}
        env["NODE_PATH"] = self.node_modules
        env["SPIFFE_ENDPOINT_SOCKET"] = "unix://" + socket_path
        return env


def npm_packages():
    """The node_modules directory of the pinned npm packages (tests/integration/grpcjs), installed
    into the cache by scripts/npm-deps if not there yet. Raises with npm's words if it cannot be
    had (no registry and no cache): the test fails, it is never skipped."""
    p = subprocess.run([os.path.join(SRCDIR, "scripts", "npm-deps")], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("scripts/npm-deps failed (run scripts/deps; is the npm registry reachable?):\n" +
                           p.stderr[-3000:])
    return p.stdout.strip().splitlines()[-1]


def preexec(cg=None, uid=None):
    pre_cg = cg.preexec(uid) if cg else None

    def fn():
        if pre_cg:
            pre_cg()
        elif uid is not None:
            os.setgid(uid)
            os.setuid(uid)
    return fn


def call(client, socket_path, op, *args, cg=None, uid=None, timeout=60):
    """Runs the client once; returns its JSON lines."""
    p = subprocess.run(client.cmd(op, *args), env=client.env(socket_path), preexec_fn=preexec(cg, uid),
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def spawn(client, socket_path, op, *args, cg=None, uid=None):
    return subprocess.Popen(client.cmd(op, *args), env=client.env(socket_path), preexec_fn=preexec(cg, uid),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def der_certs(blob):
    """Splits concatenated DER certificates (SEQUENCE with a long-form length)."""
    certs, i = [], 0
    while i < len(blob):
        assert blob[i] == 0x30, "not a DER SEQUENCE at %d" % i
        first = blob[i + 1]
        if first < 0x80:
            hdr, n = 2, first
        else:
            k = first & 0x7F
            hdr, n = 2 + k, int.from_bytes(blob[i + 2:i + 2 + k], "big")
        certs.append(blob[i:i + hdr + n])
        i += hdr + n
    return certs


# ---- raw HTTP/2 (RFC 9113) for input no client library sends ----

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    """A header field as a literal without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    def s(b):
        assert len(b) < 127
        return bytes([len(b)]) + b
    return b"\x00" + s(name.encode()) + s(value.encode())


def grpc_headers(path, extra=()):
    fields = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "localhost"),
              ("content-type", "application/grpc"), ("te", "trailers"), ("workload.spiffe.io", "true")]
    return b"".join(hpack_literal(n, v) for n, v in fields + list(extra))


def parse_frames(data):
    """The whole HTTP/2 frames at the start of data: [(type, flags, stream, payload)]."""
    frames, i = [], 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i:i + 3], "big")
        if i + 9 + n > len(data):
            break
        frames.append((data[i + 3], data[i + 4], int.from_bytes(data[i + 5:i + 9], "big") & 0x7FFFFFFF,
                       data[i + 9:i + 9 + n]))
        i += 9 + n
    return frames


def read_frames(sock, timeout=5, until=None):
    """Frames the server sends until it closes, goes quiet for timeout, or (with until) the
    frames so far satisfy until(frames): [(type, flags, stream, payload)]."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if until and until(parse_frames(data)):
                break
    except (socket.timeout, ConnectionResetError):
        pass
    return parse_frames(data)


def raw_exchange(socket_path, payload, timeout=3):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(socket_path)
        s.sendall(payload)
        return read_frames(s, timeout)
    finally:
        s.close()


def h2_first_message(socket_path, method, request=b"", timeout=30):
    """One gRPC call in HTTP/2 frames written by hand (no client library to load or warm):
    connect, send request as the only message, answer the server's SETTINGS, and return the
    first response message once it is whole."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    try:
        s.connect(socket_path)
        s.sendall(PREFACE + frame(4, 0, 0, b"") + frame(1, 4, 1, grpc_headers(method)) +
                  frame(0, 1, 1, b"\x00" + len(request).to_bytes(4, "big") + request))
        buf, msg = b"", b""
        while True:
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n = int.from_bytes(buf[:3], "big")
                ftype, flags, payload = buf[3], buf[4], buf[9:9 + n]
                buf = buf[9 + n:]
                if ftype == 4 and not flags & 1:
                    s.sendall(frame(4, 1, 0, b""))  # SETTINGS ACK, as a client owes
                elif ftype == 0:
                    msg += payload
                    if len(msg) >= 5 and len(msg) >= 5 + int.from_bytes(msg[1:5], "big"):
                        return msg[5:]
                elif ftype in (3, 7):
                    raise AssertionError("stream reset or GOAWAY: %r" % payload)
            b = s.recv(65536)
            assert b, "connection closed before the first message"
            buf += b
    finally:
        s.close()
