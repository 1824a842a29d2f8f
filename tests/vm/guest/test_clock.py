# SPDX-License-Identifier: MIT
"""The wall clock steps under a working node: 2 days forward, then 1 hour back, while pods from
the apiserver hold identities (the local signer, certificates of an hour) and registrations in a
real ZooKeeper. systemd is PID 1 and the clock is the guest's own (systemd-timesyncd is masked),
so the steps are what NTP or a resumed VM would do to the agent.

  forward: every certificate is renewed at once, before its expiry can close a pod's gate: the
           members are never withdrawn (same znodes, same owner session) and no "expired without
           a renewal" warning is logged;
  back:    certificates issued before the step (notBefore now 58 minutes ahead: peers on the
           right time refuse them) are replaced at once by ones valid now;
  both:    the ZooKeeper session and the apiserver watch carry on (same session id, no relist:
           a pod added afterwards arrives by the watch).
The clock is put back where it would have been (CLOCK_BOOTTIME + the offset at the start)."""

import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone

import pytest

from conftest import api_json, journal_cursor, journal_messages, module_status, node, start_agent, wait_for  # noqa: F401

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "fakes"))
import zkreg_testlib as zt  # noqa: E402
from kube_apiserver import FakeApiserver, make_pod  # noqa: E402

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="ZooKeeper (libzookeeper-java) is not in the image")

NODE = "pinion-vm"
TOKEN = "clock-token"
SERVERSET = "/pinion-test/clock"
PODS = ("web-1", "web-2", "web-3")
DAY = 86400


def step_clock(seconds):
    time.clock_settime(time.CLOCK_REALTIME, time.clock_gettime(time.CLOCK_REALTIME) + seconds)


def parse_time(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def workloads():
    return {w["name"]: w for w in api_json("/v1/identity")["workloads"] if w.get("name") in PODS}


def pod(name, port):
    containers = [{"name": "main", "image": "example/app:1",
                   "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}]}]
    return make_pod(name, node=NODE, ip="127.0.0.1", containers=containers, annotations={
        "pinion.io/serverset": SERVERSET, "pinion.io/port": "http", "pinion.io/health": "tcp",
        "pinion.io/identity": "true"})


class Listener:
    """A pod's health port: accepts and closes every connection (the tcp check connects)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.close()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def member_znodes(kz):
    """{child: (czxid, ephemeralOwner)}: a member withdrawn and written again has a new czxid."""
    out = {}
    for c in kz.get_children(SERVERSET):
        if c.startswith("member_"):
            _, stat = kz.get(f"{SERVERSET}/{c}")
            out[c] = (stat.czxid, stat.ephemeralOwner)
    return out


def all_renewed(before, valid_at):
    """Every pod has a certificate other than its one in before, valid at valid_at for a peer
    (notBefore not after it), or None."""
    now = workloads()
    for name in PODS:
        w = now.get(name)
        if not w or w.get("state") != "issued" or w["serial"] == before[name]["serial"]:
            return None
        if parse_time(w["notBefore"]) > valid_at or parse_time(w["notAfter"]) <= valid_at:
            return None
    return now


@pytest.fixture
def world(node):
    """ZooKeeper, the test apiserver with three pods for this node, each pod's health port, and
    the clock as it was, put back at the end."""
    offset = time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_BOOTTIME)
    node.on_cleanup(lambda: time.clock_settime(time.CLOCK_REALTIME, time.clock_gettime(time.CLOCK_BOOTTIME) + offset))
    # Not under /tmp: the unit's PrivateTmp= hides it from the agent (the token and CA files).
    root = tempfile.mkdtemp(prefix="pinion-clock-", dir="/srv")
    node.on_cleanup(lambda: shutil.rmtree(root, ignore_errors=True))
    zk = zt.ZkServer(os.path.join(root, "zk"), zt.free_port())
    zk.start()
    node.on_cleanup(lambda: (zk.proc.kill(), zk.proc.wait()))
    zk.wait_serving(timeout=300)  # a JVM under TCG
    os.makedirs(os.path.join(root, "fake"))
    fake = FakeApiserver(tls=True, token=TOKEN, workdir=os.path.join(root, "fake")).start()
    node.on_cleanup(fake.stop)
    socks = [Listener() for _ in PODS]
    node.on_cleanup(lambda: [s.close() for s in socks])
    for name, s in zip(PODS, socks):
        fake.add_pod(pod(name, s.port))
    token_file = os.path.join(root, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    node.conf("60-clock.conf", f"""[agent]
node-name={NODE}

[apiserver]
url={fake.url}
token-file={token_file}
ca-file={fake.ca_file}

[identity]
signer=local
trust-domain=example.org
ca-dir=/var/lib/pinion/ca

[zookeeper]
servers={zk.hostport}
""")
    kz = zt.kazoo_client(zk.hostport)
    node.on_cleanup(lambda: (kz.stop(), kz.close()))
    return fake, kz


def test_clock_steps_forward_and_back(world):
    fake, kz = world
    start_agent()
    wait_for("three members", lambda: kz.exists(SERVERSET) and len(member_znodes(kz)) == len(PODS), timeout=120)
    wait_for("three certificates", lambda: all(w.get("state") == "issued" for w in workloads().values())
             and len(workloads()) == len(PODS), timeout=60)
    members = member_znodes(kz)
    (owner,) = {o for _, o in members.values()}
    session = api_json("/v1/registrations")["session_id"]
    assert int(session, 16) == owner, (session, owner)
    lists = fake.count(verb="list")
    certs = workloads()
    cursor = journal_cursor()

    # 2 days forward: every certificate (an hour's) is past its notAfter at once.
    step_clock(2 * DAY)
    certs = wait_for("certificates renewed after the step forward",
                     lambda: all_renewed(certs, time.time()), timeout=60)
    assert member_znodes(kz) == members, ("a member was withdrawn while its certificate was renewed:\n"
                                          + "\n".join(journal_messages("-u", "piniond", cursor=cursor)))
    msgs = journal_messages("-u", "piniond", cursor=cursor)
    assert not any("expired without a renewal" in m for m in msgs), "\n".join(msgs)

    # 1 hour back: the certificates just issued start 58 minutes from now.
    step_clock(-3600)
    certs = wait_for("certificates replaced after the step back (valid for peers now)",
                     lambda: all_renewed(certs, time.time()), timeout=60)
    assert member_znodes(kz) == members

    # The session is the same one, and the watch still delivers: a new pod arrives with no
    # relist.
    assert api_json("/v1/registrations")["session_id"] == session
    extra = Listener()
    try:
        fake.add_pod(pod("web-4", extra.port))
        wait_for("the pod added after the steps, by the watch",
                 lambda: any(p["name"] == "web-4" for p in api_json("/v1/pods")["pods"]), timeout=60)
        assert fake.count(verb="list") == lists, fake.requests(verb="list")
        assert module_status("apiserver")["details"]["lists"] == 1
        wait_for("four members", lambda: len(member_znodes(kz)) == len(PODS) + 1, timeout=60)
        assert {k: v for k, v in member_znodes(kz).items() if k in members} == members
    finally:
        extra.close()
    msgs = journal_messages("-u", "piniond", cursor=cursor)
    print("\n".join(msgs))
    # The steps as the agent measured them (against CLOCK_BOOTTIME: less the microseconds
    # between this test's read of the clock and its write).
    moved = [float(m.group(1)) for m in map(re.compile(r"the wall clock moved by ([-+][0-9.]+)s").search, msgs) if m]
    assert len(moved) == 2 and abs(moved[0] - 2 * DAY) < 5 and abs(moved[1] + 3600) < 5, moved
    assert journal_messages("-u", "piniond", cursor=cursor, priority="warning") == []
