# SPDX-License-Identifier: MIT
"""The agent's open-file limit and the connection caps sized to it: at start piniond raises its
soft RLIMIT_NOFILE to the hard one, and scales the local API's and the gRPC servers' caps down
when the limit cannot carry the defaults, keeping a reserve for its own descriptors. Pods that
stay within their own caps then never take the last descriptor: root's /v1/health is answered
and the agent does not spin. The agent runs under prlimit(1) with the limit each test names."""

import json
import os
import re
import resource
import subprocess
import sys
import time

import pytest

from identity_testlib import PodCgroup, new_uid
from pinion_testlib import T, unix_request, wait_until
from test_identity import start_local


def under_limit(a, soft, hard):
    """Makes a start piniond under prlimit --nofile=SOFT:HARD (prlimit execs it: same PID)."""
    plain = a.command
    a.command = lambda *args: ["prlimit", "--nofile=%d:%d" % (soft, hard), "--"] + plain(*args)
    return a


def open_files_limits(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no open-files line in /proc/%d/limits" % pid)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pod_cgroup(uid):
    try:
        return PodCgroup(uid, hierarchy="pids")
    except (OSError, RuntimeError) as e:
        pytest.skip("cannot create test cgroups: %s" % e)


# The second: this test's own hard limit (the unit's 65536 where the test runner allows it).
@pytest.mark.parametrize("soft,hard", [(1024, 4096), (1024, None)])
def test_soft_limit_is_raised_to_the_hard_limit_and_caps_fit_it(agent_factory, soft, hard):
    if hard is None:
        hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536)
        if hard < 8192:
            pytest.skip("this test's hard open-file limit (%d) is below what the defaults need" % hard)
    a = under_limit(agent_factory(start=False), soft, hard)
    a.start()
    assert open_files_limits(a.pid) == (hard, hard)
    conns = a.status()["connections"]
    assert conns["open_files"] == hard, conns
    line = a.wait_log(r"Open files: %d.*" % hard).group(0)
    if hard != 4096:
        # Room for every default cap: kept as they were.
        assert (conns["api"], conns["workload"], conns["csi"], conns["scaled"]) == (1000, 1000, 16, False), conns
        assert "(soft limit raised from %d)" % soft in line and "scaled" not in line, line
    else:
        # 4,096 descriptors carry about 88% of the defaults beside the reserve; each cap shrinks
        # by the same factor, and what they hold (two descriptors per connection) stays below
        # what is left once the reserve is taken.
        assert "(soft limit raised from %d)" % soft in line and "scaled down" in line, line
        assert conns["scaled"] is True and 800 <= conns["api"] < 1000 and conns["workload"] == conns["api"], conns
        assert 2 * (conns["api"] + conns["workload"] + 2 * conns["csi"]) <= hard - conns["reserved_fds"], conns
        assert conns["reserved_fds"] >= 192, conns


# One pod's process: opens up to N_API connections to the local API (a request head it never
# finishes) and N_WORKLOAD to the Workload API (the HTTP/2 preface and nothing more), without
# blocking on a full backlog; prints how many it got, then holds them until stdin closes.
HOLD = r"""
import errno, json, socket, sys
api, workload, n_api, n_workload = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
held, got = [], {"api": 0, "workload": 0}
for path, n, first, key in ((api, n_api, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n", "api"),
                            (workload, n_workload, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00", "workload")):
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        try:
            s.connect(path)
            s.send(first)
            got[key] += 1
        except OSError:
            s.close()
            continue
        held.append(s)
print(json.dumps(got), flush=True)
sys.stdin.read()
"""

N_PODS = 12
POD_UID_BASE = 40410
# Each pod's own caps: 32 local API connections, 64 on a gRPC server.
API_PER_POD, WORKLOAD_PER_POD = 32, 64


def health_answered(sock, timeout):
    t0 = time.monotonic()
    try:
        r = unix_request(sock, "GET", "/v1/health", timeout=timeout)
    except OSError:
        return None
    return time.monotonic() - t0 if r.status in (200, 503) and "version" in r.body else None


def test_pods_within_their_caps_leave_root_answered_at_a_low_limit(agent_factory):
    a = start_local(agent_factory, agent={"socket-mode": "0666"}, start=False)
    under_limit(a, 256, 256).start()
    workload = os.path.join(a.runtime_dir, "workload.sock")
    wait_until(lambda: os.path.exists(workload), desc="workload socket")
    conns = a.status()["connections"]
    assert conns["open_files"] == 256 and conns["scaled"] is True, conns
    assert conns["api"] < 100 and conns["workload"] < 100, conns
    idle = sorted(health_answered(a.socket, T(5)) for _ in range(20))
    assert all(x is not None for x in idle), idle
    cgroups, procs = [], []
    try:
        for i in range(N_PODS):
            cg = pod_cgroup(new_uid())
            cgroups.append(cg)
            procs.append(subprocess.Popen([sys.executable, "-c", HOLD, a.socket, workload, str(API_PER_POD),
                                           str(WORKLOAD_PER_POD)], preexec_fn=cg.preexec(POD_UID_BASE + i),
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        got = [json.loads(p.stdout.readline()) for p in procs]
        # The pods tried for more than the agent has descriptors.
        assert sum(g["api"] + g["workload"] for g in got) > 256, got
        cpu0, log0, t0 = cpu_seconds(a.pid), os.path.getsize(a.log_file), time.monotonic()
        lat = []
        while time.monotonic() - t0 < 4:
            lat.append(health_answered(a.socket, T(2)))
            time.sleep(0.1)
        cpu, log_bytes, wall = cpu_seconds(a.pid) - cpu0, os.path.getsize(a.log_file) - log0, time.monotonic() - t0
        unanswered = sum(x is None for x in lat)
        answered = sorted(x for x in lat if x is not None)
        assert unanswered == 0, (unanswered, len(lat), a.log_tail())
        p99 = answered[int(len(answered) * 0.99) - 1]
        base = idle[int(len(idle) * 0.99) - 1]
        print("health p99: idle %.1f ms, pods holding connections %.1f ms; agent cpu %.2f s in %.1f s"
              % (base * 1000, p99 * 1000, cpu, wall))
        assert p99 < max(T(0.150), 3 * base), (p99, base)
        # No spinning on a listener it cannot accept from, no log flood.
        assert cpu < 0.25 * wall * float(os.environ.get("PINION_TIMEOUT_SCALE", "1")), (cpu, wall)
        assert log_bytes < 1 << 20, log_bytes
        assert len(os.listdir("/proc/%d/fd" % a.pid)) < 256
    finally:
        for p in procs:
            p.stdin.close()
            p.wait()
        for cg in cgroups:
            cg.close()
    # Refused at the caps, counted with the existing reasons.
    m = a.metrics()
    assert sum(v for (_, _, v) in m.find("pinion_api_connections_rejected_total")) > 0
    a.check_alive()
    assert re.search(r"Open files: 256; connections at once: local API \d+, Workload API \d+", a.log_text())
