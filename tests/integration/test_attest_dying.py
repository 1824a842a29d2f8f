# SPDX-License-Identifier: MIT
"""A dying process is nobody (docs/api.md, Authorization and "Who connected").

On cgroup v1 the kernel shows an exiting task, and an unreaped zombie, in every hierarchy's root
in /proc/PID/cgroup, while /proc/PID/stat keeps its start time: read then, root in a pod would be
"in no pod", hence the host. The attacks, from real processes in a fake pod's real cgroup:

- root in pod-a forks a child that connects (SO_PEERCRED and the pidfd name the child), asks
  /v1/health once so the agent has accepted and placed the connection, and exits unreaped (the
  parent never waits): the parent, holding the same socket, then sends what only the host may
  ask. Every request is an outsider's: 403, and nothing changes. Likewise on the Workload API.
- root in pod-a has 100 children with throwaway uids connect and exit before the agent accepts:
  all of them share one small count of unattested peers (not one count per uid), and another
  pod and the host's root are still answered."""

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from pinion_testlib import T, clean_env, request_child, unix_request, wait_until
import podnet_testlib as pt
from attest_testlib import THROWAWAY, ZOMBIE_GRPC, ZOMBIE_HTTP
from test_authz import (  # noqa: F401 (fixtures)
    config_idle, drained, fetches, kz, member_status, netns, nginx, pod_b_state, test_ca, world, zk)
from test_identity import TD, identity_pod, start_local, wait_workload
import zkreg_testlib as zt

pytestmark = pytest.mark.skipif(not os.path.isdir("/sys/fs/cgroup/pids"), reason="no cgroup v1 pids hierarchy")


def run_as_root_in(cg, script, *args, timeout=60):
    def enter():
        with open(os.path.join(cg.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    p = subprocess.run([sys.executable, "-c", script] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=T(timeout) + 10, env=clean_env(), cwd="/", preexec_fn=enter)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


needs_zookeeper = pytest.mark.skipif(not zt.zookeeper_available(),
                                     reason="ZooKeeper (Debian zookeeper) is not installed")


@needs_zookeeper
def test_root_in_a_pod_exiting_unreaped_is_an_outsider(world):  # noqa: F811
    """Every request root in pod-a sends on the connection of its zombie child is an outsider's:
    no status, no pod list, no other pod's identity, no refresh, no drain, no CNI ADD for pod-b."""
    w = world
    sock = w.agent.socket
    before = pod_b_state(w)
    fetched = fetches(w, "a")
    cid = "zombie%d" % os.getpid()
    add_b = {"command": "ADD", "containerID": cid, "netns": w.netns.path, "ifname": "eth0",
             "args": pt.k8s_args("default", "pod-b", w.uid_b),
             "config": {"cniVersion": "1.1.0", "name": "pinion", "type": "pinion-cni"}}
    requests = [("GET", "/v1/status", None), ("GET", "/v1/pods", None),
                ("GET", "/v1/identity?pod=default/pod-b", None), ("POST", "/v1/configs/a/refresh", None),
                ("POST", "/v1/registrations/drain", None), ("POST", "/v1/cni", add_b)]
    try:
        answers = run_as_root_in(w.cg_a, ZOMBIE_HTTP, sock, json.dumps(requests), T(20))
        assert len(answers) == len(requests)
        for (method, url, _), got in zip(requests, answers):
            assert got["state"] == "Z", (method, url, got)
            assert got["status"] == 403, "%s %s from a zombie: %d %s" % (method, url, got["status"], got["body"][:300])
        identity = answers[2]
        assert "cannot attest the caller" in json.loads(identity["body"])["error"], identity
        # Nothing changed: not drained, no CNI allocation, pod-b as it was, a not refreshed (a
        # root refresh of b as a barrier: a queued refresh of a would have run by then too).
        b0 = fetches(w, "b")
        assert w.agent.request("POST", "/v1/configs/b/refresh").status == 202
        wait_until(lambda: config_idle(w, "b", b0), 20, desc="b refreshed")
        assert fetches(w, "a") == fetched, "a zombie's refresh fetched"
        assert drained(w) is False and member_status(w, "a") == ["ALIVE"] and member_status(w, "b") == ["ALIVE"]
        assert [x for x in pt.podnet_status(w.agent)["details"]["pool"]["allocations"]
                if x["containerID"] == cid] == []
        assert pod_b_state(w) == before
    finally:
        # Had it been let through: undo it (the host's root may).
        if drained(w):
            assert w.agent.request("POST", "/v1/registrations/undrain").status == 200
        unix_request(sock, "POST", "/v1/cni", body=dict(add_b, command="DEL"))
    # The same process, alive, is pod-a's root: its own identity still.
    status, body, raw = w.principals["root in pod"].request(sock, "GET", "/v1/identity")
    assert status == 200 and body["id"] == "spiffe://authz.test/ns/default/sa/sa-a", raw[:300]


@needs_zookeeper
def test_workload_api_call_from_a_zombie_is_an_outsiders(world):  # noqa: F811
    """On the Workload API the zombie's call is refused as a peer that cannot be attested, not
    as the host."""
    w = world
    sock = os.path.join(w.agent.runtime_dir, "workload.sock")
    assert os.path.exists(sock)
    got = run_as_root_in(w.cg_a, ZOMBIE_GRPC, sock, T(10))
    assert got["state"] == "Z" and got["bytes"] > 0, got
    line = wait_until(lambda: re.search(r"Workload API: \S+ refused for pid %d: (.*)" % got["child"],
                                        w.agent.log_text()), 10, desc="the refusal logged")
    assert line.group(1).startswith("cannot attest the caller"), line.group(0)


# ---- throwaway uids: one shared count of unattested peers ----

N_THROWAWAY = 100
UNATTESTED_CAP = 8


def hold_throwaway_connections(a, cg, path, first_uid):
    """Starts THROWAWAY against path while the agent is stopped (so every child has exited before
    the agent accepts); returns the process and a count() of (closed, open)."""
    def enter():
        with open(os.path.join(cg.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    a.send_signal(signal.SIGSTOP)
    try:
        p = subprocess.Popen([sys.executable, "-c", THROWAWAY, path, str(N_THROWAWAY), str(first_uid)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=clean_env(), cwd="/",
                             preexec_fn=enter)
        ready, _, _ = select.select([p.stdout], [], [], T(30))
        assert ready and p.stdout.readline().strip() == "connected"
    finally:
        a.send_signal(signal.SIGCONT)

    def count():
        p.stdin.write("count\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())
    return p, count


def rejected(a, family, reason):
    return sum(v for _, _, v in a.metrics().find(family, reason=reason))


@pytest.mark.parametrize("surface", ["api", "workload"])
def test_throwaway_uids_share_one_unattested_count(agent_factory, pod_cgroups, surface):
    """100 children of root in pod-a, each with its own uid, connect and exit before the agent
    accepts: together they hold at most the shared cap of unattested peers, not one count per
    uid; pod-b still gets its identity and the host's root its health."""
    a = start_local(agent_factory, agent={"socket-mode": "0666"})
    uid_a, uid_b = str(uuid.uuid4()), str(uuid.uuid4())
    a.write_pod("pod-a", identity_pod("pod-a", uid_a))
    a.write_pod("pod-b", identity_pod("pod-b", uid_b, sa="b"))
    wait_workload(a, "pod-b")
    cg_a, cg_b = pod_cgroups(uid_a), pod_cgroups(uid_b)
    path = a.socket if surface == "api" else os.path.join(a.runtime_dir, "workload.sock")
    wait_until(lambda: os.path.exists(path), desc=path)
    p, count = hold_throwaway_connections(a, cg_a, path, 41000 if surface == "api" else 41200)
    try:
        wait_until(lambda: count()["closed"] >= N_THROWAWAY - UNATTESTED_CAP, 10,
                   desc="the agent closing the connections over the unattested cap")
        time.sleep(T(0.5))
        held = count()
        assert held["open"] <= UNATTESTED_CAP, held
        if surface == "api":
            assert rejected(a, "pinion_api_connections_rejected_total", "unattested") >= N_THROWAWAY - UNATTESTED_CAP
        else:
            assert rejected(a, "pinion_grpc_rejected_total", "unattested") >= N_THROWAWAY - UNATTESTED_CAP
        # While they are held: another pod and the host's root are answered.
        out = request_child(a.socket, "GET", "/v1/identity", None, 10, preexec_fn=cg_b.preexec(65534))
        assert out.get("status") == 200 and json.loads(out["body"])["id"] == "spiffe://%s/ns/default/sa/b" % TD, out
        assert unix_request(a.socket, "GET", "/v1/health").status == 200
    finally:
        p.stdin.close()
        p.wait(T(10))


def agent_pidfds(a):
    """How many pidfds the agent holds."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % a.pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (a.pid, fd)) == "anon_inode:[pidfd]"
        except FileNotFoundError:
            pass
    return n


def test_the_peers_pidfd_lives_as_long_as_its_connection(agent_factory):
    """Each connection of a live peer holds the peer's pidfd, and closing the connections closes
    them all: no fd is left behind."""
    a = agent_factory()
    assert unix_request(a.socket, "GET", "/v1/health").status == 200
    wait_until(lambda: agent_pidfds(a) == 0, 10, desc="no connection left")
    socks = []
    try:
        for _ in range(20):
            s = socket.socket(socket.AF_UNIX)
            s.connect(a.socket)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
            socks.append(s)
        for s in socks:
            s.settimeout(T(10))
            assert s.recv(4096).startswith(b"HTTP/1.1 200"), "no answer"
        assert agent_pidfds(a) == len(socks)
    finally:
        for s in socks:
            s.close()
    wait_until(lambda: agent_pidfds(a) == 0, 10, desc="every pidfd closed with its connection")
