# SPDX-License-Identifier: MIT
"""Helpers for the podnet tests: real network namespaces, pinion-cni and the reference CNI
plugins run as a container runtime runs them (exec with CNI_* in the environment and the network
config on stdin), and an ICMP echo that needs no `ping` binary.

Everything a test creates is named pinion-podnet-<pid>-... and removed at teardown, also when the
test fails. Tests talk only to addresses inside namespaces they created."""

import ipaddress
import json
import os
import random
import socket
import struct
import subprocess
import sys
import time

import pytest

from pinion_testlib import BUILDDIR, diag

PINION_CNI = os.path.join(BUILDDIR, "pinion-cni")
CNI_PATH = "/usr/lib/cni"
PREFIX = "pinion-podnet-%d" % os.getpid()
PYTHON = "/usr/bin/python3"


def free_pod_cidr(prefix=24):
    """A 10.x.y.0/<prefix> that no route on this host overlaps (random, so parallel runs differ)."""
    routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True,
                            text=True).stdout
    used = []
    for line in routes.splitlines():
        tok = line.split()
        for t in tok[:2]:
            try:
                used.append(ipaddress.ip_network(t, strict=False))
            except ValueError:
                pass
    for _ in range(200):
        net = ipaddress.ip_network("10.%d.%d.0/%d" % (random.randint(160, 250), random.randint(0, 255), prefix),
                                   strict=False)
        if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
            return str(net)
    raise RuntimeError("no free 10.x pod CIDR")


class Netns:
    """ip netns add/del; the path a runtime passes as CNI_NETNS."""

    def __init__(self, name):
        self.name = name
        self.path = "/var/run/netns/" + name
        subprocess.run(["ip", "netns", "add", name], check=True)

    def run(self, *cmd, check=True, **kw):
        return subprocess.run(["ip", "netns", "exec", self.name, *cmd], check=check, capture_output=True,
                              text=True, **kw)

    def delete(self):
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


class NetnsFactory:
    def __init__(self):
        self.made = []
        self.n = 0

    def __call__(self):
        self.n += 1
        ns = Netns("%s-%d" % (PREFIX, self.n))
        self.made.append(ns)
        return ns

    def cleanup(self):
        for ns in self.made:
            ns.delete()


@pytest.fixture
def netns():
    """netns() -> a fresh namespace; all are deleted at teardown."""
    f = NetnsFactory()
    try:
        yield f
    finally:
        f.cleanup()


@pytest.fixture
def podnet_agent(agent_factory):
    """podnet_agent(cidr=None, quarantine="30s", agent=None, network=None, **kw) -> a started
    agent with a pod CIDR no route here overlaps ([network] keys in network=)."""
    def make(cidr=None, quarantine="30s", agent=None, network=None, **kw):
        cidr = cidr or free_pod_cidr()
        a = agent_factory(config={"network": dict({"pod-cidr": cidr, "address-quarantine": quarantine}, **(network or {})),
                                  "agent": dict(agent or {})}, **kw)
        a.pod_cidr = cidr
        return a
    return make


def host_links(prefix="pin"):
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(prefix):
            names.append(name)
    return names


def delete_links(names):
    for n in names:
        subprocess.run(["ip", "link", "del", n], capture_output=True)


class CniResult:
    def __init__(self, rc, stdout, stderr):
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        try:
            self.json = json.loads(stdout) if stdout.strip() else None
        except ValueError:
            self.json = None

    @property
    def code(self):
        return self.json.get("code") if self.json else None

    def ip(self):
        return self.json["ips"][0]["address"].split("/")[0]

    def __repr__(self):
        return "CniResult(rc=%r, stdout=%r, stderr=%r)" % (self.rc, self.stdout, self.stderr)


def exec_plugin(plugin, command, conf, container_id=None, netns=None, ifname="eth0", args=None, env=None,
                stdin=None, timeout=60):
    """Runs a CNI plugin as the runtime does. conf: dict (or str/bytes for raw stdin)."""
    e = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command, "CNI_PATH": CNI_PATH}
    if container_id is not None:
        e["CNI_CONTAINERID"] = container_id
    if netns is not None:
        e["CNI_NETNS"] = netns if isinstance(netns, str) else netns.path
    if ifname is not None and container_id is not None:
        e["CNI_IFNAME"] = ifname
    if args is not None:
        e["CNI_ARGS"] = args
    e.update(env or {})
    for k in [k for k, v in e.items() if v is None]:
        del e[k]
    data = stdin if stdin is not None else conf
    if isinstance(data, dict):
        data = json.dumps(data)
    if isinstance(data, str):
        data = data.encode()
    p = subprocess.run([plugin if "/" in plugin else os.path.join(CNI_PATH, plugin)], input=data, env=e,
                       capture_output=True, timeout=timeout)
    return CniResult(p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))


def pinion_conf(agent, version="1.1.0", **extra):
    c = {"cniVersion": version, "name": "pinion", "type": "pinion-cni", "socket": agent.socket}
    c.update(extra)
    return c


def ptp_conf(data_dir, subnet=None, version="1.0.0"):
    """The reference ptp plugin with host-local IPAM (state under data_dir)."""
    return {"cniVersion": version, "name": "ref-ptp", "type": "ptp",
            "ipam": {"type": "host-local", "subnet": subnet or free_pod_cidr(), "dataDir": data_dir}}


def k8s_args(ns, name, uid):
    return "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s" % (ns, name, uid)


def cni(agent, command, container_id=None, netns=None, ifname="eth0", conf=None, **kw):
    return exec_plugin(PINION_CNI, command, conf or pinion_conf(agent), container_id=container_id, netns=netns,
                       ifname=ifname, **kw)


# An ICMP echo from inside a namespace (or the host): raw socket, no ping binary needed.
_ICMP = r'''
import os, socket, struct, sys, time
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
dst = sys.argv[1]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.settimeout(0.5)
ident = os.getpid() & 0xffff
end = time.time() + float(sys.argv[2])
seq = 0
while time.time() < end:
    seq += 1
    body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"pinion"
    s.sendto(struct.pack("!BBHHH", 8, 0, csum(body), ident, seq) + b"pinion", (dst, 0))
    try:
        while True:
            data, addr = s.recvfrom(2048)
            ihl = (data[0] & 0xf) * 4
            t, c, _, i, q = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if t == 0 and i == ident and addr[0] == dst:
                sys.exit(0)
    except socket.timeout:
        pass
    except OSError:
        time.sleep(0.2)
sys.exit(1)
'''


def _echo(script, dst, netns, timeout):
    cmd = [PYTHON, "-c", script, dst, str(timeout)]
    if netns is not None:
        cmd = ["ip", "netns", "exec", netns.name] + cmd
    return subprocess.run(cmd, capture_output=True, timeout=timeout + 10).returncode == 0


def ping(dst, netns=None, timeout=3):
    """True if dst answers an ICMP echo (sent from netns, or from the host)."""
    return _echo(_ICMP, dst, netns, timeout)


def podnet_status(agent):
    for m in agent.status()["modules"]:
        if m["name"] == "podnet":
            return m
    raise KeyError("podnet")


def podnet_state_on_disk(state_dir):
    """The pool's state as a restart loads it: podnet/allocations.json (the snapshot) with
    podnet/allocations.journal replayed on top ("<crc32 hex> <JSON record>" lines; records whose
    seq the snapshot holds are skipped; a torn last line is dropped, a damaged earlier one raises).
    Returns {"allocations": [...], "quarantine": [...], "deleting": [...]} as in the snapshot."""
    import zlib
    d = os.path.join(state_dir, "podnet")
    try:
        with open(os.path.join(d, "allocations.json")) as f:
            snap = json.load(f)
    except FileNotFoundError:
        snap = {}
    seq = snap.get("journalSeq", 0)
    allocs = {(a["containerID"], a["ifname"]): a for a in snap.get("allocations", [])}
    quarantine = list(snap.get("quarantine", []))
    deleting = list(snap.get("deleting", []))
    try:
        with open(os.path.join(d, "allocations.journal"), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        data = b""
    lines = data.split(b"\n")
    for i, line in enumerate(lines[:-1]):  # (the piece after the last newline is torn)
        last = i == len(lines) - 2 and lines[-1] == b""
        crc, _, text = line.partition(b" ")
        if len(crc) != 8 or int(crc, 16) != zlib.crc32(text):
            if last:
                break
            raise ValueError("journal line %d is damaged" % (i + 1))
        r = json.loads(text)
        if r["seq"] <= seq:
            continue
        assert r["seq"] == seq + 1, (r, seq)
        seq = r["seq"]
        if r["op"] in ("allocate", "update"):
            a = r["allocation"]
            allocs[(a["containerID"], a["ifname"])] = a
        elif r["op"] == "release":
            a = allocs.pop((r["containerID"], r["ifname"]))
            if r.get("quarantine"):
                quarantine.append({"ip": a["ip"], "releasedAt": r["releasedAt"]})
            if r.get("deleting"):
                deleting.append(r["deleting"])
        elif r["op"] == "linkDeleted":
            deleting.remove(r["hostIfname"])
    return {"allocations": list(allocs.values()), "quarantine": quarantine, "deleting": deleting}


def remove_podnet_state(state_dir):
    """Deletes the pool's state (snapshot and journal), as an operator starting afresh would."""
    for name in ("allocations.json", "allocations.journal"):
        try:
            os.unlink(os.path.join(state_dir, "podnet", name))
        except FileNotFoundError:
            pass


def free_pod_cidr6():
    """A random fdXX:...::/64 (a ULA no route on this host overlaps)."""
    routes = subprocess.run(["ip", "-6", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    for _ in range(200):
        net = ipaddress.ip_network("fd%02x:%x:%x::/64" % (random.randint(0x10, 0xff), random.randint(1, 0xffff),
                                                          random.randint(1, 0xffff)))
        if str(net.network_address).split("::")[0] not in routes:
            return str(net)
    raise RuntimeError("no free IPv6 pod CIDR")


# An ICMPv6 echo: raw socket (the kernel fills in the checksum), no ping binary needed.
_ICMP6 = r'''
import os, socket, struct, sys, time
dst = sys.argv[1]
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6); s.settimeout(0.5)
ident = os.getpid() & 0xffff
end = time.time() + float(sys.argv[2])
seq = 0
addr = socket.getaddrinfo(dst, None, socket.AF_INET6, socket.SOCK_DGRAM)[0][4]
while time.time() < end:
    seq += 1
    s.sendto(struct.pack("!BBHHH", 128, 0, 0, ident, seq) + b"pinion", addr)
    try:
        while True:
            data, frm = s.recvfrom(2048)
            t, c, _, i, q = struct.unpack("!BBHHH", data[:8])
            if t == 129 and i == ident:
                sys.exit(0)
    except socket.timeout:
        pass
    except OSError:
        time.sleep(0.2)
sys.exit(1)
'''


def ping6(dst, netns=None, timeout=3):
    """True if dst (an IPv6 address, "fe80::1%eth0" for a link-local one) answers an ICMPv6 echo."""
    return _echo(_ICMP6, dst, netns, timeout)
