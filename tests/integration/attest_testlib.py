# SPDX-License-Identifier: MIT
"""The attacks on attestation by dying processes (docs/api.md, "Who connected"), as scripts a
test runs with python3 -c in a pod's cgroup: shared by tests/integration/test_attest_dying.py
and the VM guest's tests/vm/guest/test_attest_dying.py."""

# Run as root in a pod's cgroup: per request, a child connects, is answered /v1/health alive, and
# exits unreaped; the parent then sends the request on the child's connection. stdout: one JSON
# object per request, with the child's state when the answer came ("Z").
ZOMBIE_HTTP = r"""
import http.client, json, os, socket, sys, time
path, requests, timeout = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])

class On(http.client.HTTPConnection):
    def __init__(self, sock):
        super().__init__("pinion", timeout=timeout)
        self.sock = sock
    def connect(self):
        pass
    def send(self, data):
        # A privileged route refused before its body is read closes the connection: the body
        # may then meet a closed socket, while the answer is already there to read.
        try:
            super().send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

def state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]

out, children = [], []
for method, url, body in requests:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    pid = os.fork()
    if pid == 0:
        try:
            s.connect(path)
            c = On(s)
            c.request("GET", "/v1/health")
            c.getresponse().read()
        finally:
            os._exit(0)
    children.append(pid)
    deadline = time.monotonic() + timeout
    while state(pid) != "Z":
        if time.monotonic() > deadline:
            raise SystemExit("child %d never became a zombie" % pid)
        time.sleep(0.01)
    c = On(s)
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, url, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = c.getresponse()
    out.append({"child": pid, "status": r.status, "body": r.read().decode("utf-8", "replace"),
                "state": state(pid)})
    s.close()
for pid in children:
    os.waitpid(pid, 0)
print(json.dumps(out))
"""

# The same on the Workload API, in raw HTTP/2: the child sends the preface and SETTINGS and
# waits for the server's SETTINGS (accepted and placed), exits unreaped; the parent then calls
# FetchX509SVID. stdout: {"child": PID, "state": "Z", "frames": N}.
ZOMBIE_GRPC = r"""
import json, os, socket, struct, sys, time
path, timeout = sys.argv[1], float(sys.argv[2])

def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload

def lit(name, value):
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()

def state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(timeout)
pid = os.fork()
if pid == 0:
    try:
        s.connect(path)
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
        head = b""
        while len(head) < 9:
            head += s.recv(9 - len(head))
        assert head[3] == 4, head  # the server's SETTINGS
    finally:
        os._exit(0)
deadline = time.monotonic() + timeout
while state(pid) != "Z":
    if time.monotonic() > deadline:
        raise SystemExit("child %d never became a zombie" % pid)
    time.sleep(0.01)
fields = [(":method", "POST"), (":scheme", "http"), (":path", "/SpiffeWorkloadAPI/FetchX509SVID"),
          (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
          ("workload.spiffe.io", "true")]
s.sendall(frame(4, 1, 0, b"") + frame(1, 4, 1, b"".join(lit(n, v) for n, v in fields)) +
          frame(0, 1, 1, b"\x00\x00\x00\x00\x00"))
data, end = b"", time.monotonic() + timeout
s.settimeout(0.5)
while time.monotonic() < end:
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        if data:
            break
        continue
    if not chunk:
        break
    data += chunk
print(json.dumps({"child": pid, "state": state(pid), "bytes": len(data)}))
os.waitpid(pid, 0)
"""


# Run as root in a pod's cgroup: N children, each with its own uid, connect to PATH and exit; the
# parent holds every connection, tells "connected" once all children are zombies, then answers
# each "count" line with how many connections the agent closed and how many it kept.
THROWAWAY = r"""
import json, os, socket, sys
path, n, first_uid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks, children = [], []
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(first_uid + i)
            os.setuid(first_uid + i)
            s.connect(path)
        finally:
            os._exit(0)
    socks.append(s)
    children.append(pid)
for pid in children:
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
print("connected", flush=True)
for line in sys.stdin:
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            while True:
                if not s.recv(65536):
                    closed += 1
                    break
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    print(json.dumps({"closed": closed, "open": n - closed}), flush=True)
for pid in children:
    os.waitpid(pid, 0)
"""
