# SPDX-License-Identifier: MIT
"""scripts/demo, quick-start command 1, on the binaries of this build (DEMO_BUILDDIR: no
scripts/deps, no build) with a short DEMO_SECONDS: every step's heading and output on stdout in
order, on-change output only in the agent's log, the sample web pod registered once its health
check against the demo's own HTTP server passes, a closing summary with each module's figures,
the pinionctl commands it suggests working against the demo's agent while it waits, and a last
line saying no step failed; nothing left behind (20 to 35 seconds). And the build's progress
lines (scripts/lib.sh, a few seconds)."""

import json
import os
import re
import shlex
import subprocess
import threading
import time

import pytest

from pinion_testlib import BUILDDIR, SRCDIR, T, clean_env

DEMO = os.path.join(SRCDIR, "scripts", "demo")
ZOOKEEPER = os.path.exists("/usr/share/java/zookeeper.jar")
CGROUP_V1_MEMORY = os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")


def run_demo(on_line):
    """Runs the demo; on_line(line) sees each stdout line as it comes. -> (rc, stdout lines, stderr)."""
    env = clean_env({"DEMO_BUILDDIR": BUILDDIR, "DEMO_SECONDS": str(int(T(10)))})
    p = subprocess.Popen([DEMO], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, text=True)
    err = []
    t = threading.Thread(target=lambda: err.append(p.stderr.read()))
    t.start()
    lines = []
    try:
        for line in p.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            on_line(line)
        rc = p.wait(timeout=T(180))
    finally:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=30)
        t.join()
    return rc, lines, err[0] if err else ""


def sections(lines):
    """{heading: [lines under it]}, headings without their "==> "."""
    out, current = {}, None
    for line in lines:
        if line.startswith("==> "):
            current = line[4:]
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="the demo runs as root (netns, cgroups, sockets)")
def test_demo_tells_its_story_and_ends_with_a_summary():
    tried = {}

    def try_commands(line):
        # When the demo says it waits, run what it suggested against its agent.
        if not line.startswith("==> piniond keeps running for"):
            return
        block = sections(seen)["try these while piniond runs (from another shell, as root)"]
        export = [x.strip() for x in block if x.strip().startswith("export ")][0]
        env = clean_env({})
        for kv in shlex.split(export[len("export "):]):
            k, v = kv.split("=", 1)
            env[k] = v.replace("$PATH", env.get("PATH", ""))
        for cmd in (x.strip() for x in block if x.strip().startswith(("pinionctl", "curl"))):
            t0 = time.monotonic()
            r = subprocess.run(cmd, shell=True, env=env, capture_output=True, text=True, timeout=T(20))
            tried[cmd] = (r.returncode, r.stdout, r.stderr, time.monotonic() - t0)

    seen = []
    rc, lines, err = run_demo(lambda line: (seen.append(line), try_commands(line)))
    text = "\n".join(lines)
    assert rc == 0, (rc, text[-4000:], err[-2000:])
    s = sections(lines)
    headings = list(s)

    # The last word: every step worked.
    m = re.match(r"demo over: (\d+) steps, none failed; piniond and the demo's servers stop, (/tmp/pinion-demo\.\w+) is removed$",
                 headings[-1])
    assert m, headings[-3:]
    assert int(m.group(1)) == len(headings) - 1, headings  # every heading before this one
    assert not os.path.exists(m.group(2))
    assert "this step failed" not in text and "gave up after" not in text, text
    # Only the build's choice goes to stderr: the story is on stdout, in order.
    assert err.strip().startswith("==> using the binaries in %s (DEMO_BUILDDIR)" % os.path.realpath(BUILDDIR)), err
    assert "error" not in err, err

    # The on-change command's output is in the agent's log, not under whatever heading was up.
    for h, body in s.items():
        for line in body:
            if "on-change ran: config app" in line:
                # (a log line may start with a timestamp)
                assert re.search(r"info: \[configsync\] config app: on-change stdout: on-change ran: "
                                 r"config app is at version v[12]$", line), (h, line)
    log = s[[h for h in headings if h.startswith("the agent's log so far")][0]]
    assert sum("on-change stdout: on-change ran" in x for x in log) == 2, log
    swap = s["a new version on the server, then POST /v1/configs/app/refresh: swapped in atomically"]
    assert [x.split("on-change ran: ")[1] for x in swap if "on-change stdout: on-change ran" in x] == [
        "config app is at version v1", "config app is at version v2"], swap
    assert sum(x.endswith("config app: on-change: /bin/sh succeeded") for x in swap) == 2, swap

    if ZOOKEEPER:
        # The sample web pod's check fails (404: no /healthz yet), is said to be expected, then
        # passes against the demo's HTTP server and the pod is registered.
        zk = s["zkreg: pinionctl registrations (ready pods with pinion.io/serverset, in ZooKeeper)"]
        assert any(re.match(r"default/web +unready +127\.0\.0\.1:\d+ .*HTTP status 404", x) for x in zk), zk
        assert any(x.startswith("  expected: default/web is held back until its health check passes") for x in zk), zk
        healthy = s["the HTTP server gets /healthz: the web pod's health check passes and it is registered"]
        assert any(re.match(r"default/web +registered +127\.0\.0\.1:\d+ +/discovery/web/prod/member_", x)
                   for x in healthy), healthy
    assert "192.0.2.10" not in text

    # Kubernetes status: the condition the agent set on checkout-1 and the one Event of its start.
    k8s = s["Kubernetes status: checkout-1 asks for the condition pinion.io/ready (a readiness gate)"]
    cond = json.loads([x.strip() for x in k8s if x.strip().startswith("{")][0])
    assert cond["type"] == "pinion.io/ready" and cond["status"] == "True" and cond["reason"] == "JobsReady", k8s
    event = [x for x in k8s if "pinion.io/agent" in x]
    assert len(event) == 1 and re.match(r"  Normal +Provisioned +pinion\.io/agent ", event[0]), k8s
    assert "IdentityIssued: " in event[0] and "ConfigSynced: Config app version v1" in event[0], k8s

    # The closing summary: a line per module, with what it did.
    summary = {x.split()[0]: x.split(None, 1)[1] for x in s["summary: what each module did"] if x.strip()}
    assert re.match(r"6 on node demo-node \(4 from apiserver, 2 from pods-dir\)$", summary["pods"]), summary
    assert re.match(r"4 pods of this node listed \d+ time\(s\) from https://127\.0\.0\.1:\d+, then \d+ watch event\(s\); "
                    r"pinion\.io/ready written 1 time\(s\), [1-9]\d* Event\(s\) posted",
                    summary["apiserver"]), summary
    assert summary["identity"].endswith("(trust domain demo.example): 1 node, 2 workload"), summary
    assert summary["configsync"] == ("config app synced: 2 version(s) published, now v2; "
                                     "on-change ran 2 time(s), 2 succeeded"), summary
    assert summary["podnet"].startswith("2 pod(s) wired by pinion-cni ADD, 4 DEL(s) answered"), summary
    assert summary["csi"] == "1 volume(s) published into a pod, 1 unpublished, 0 refused", summary
    assert re.match(r"/metrics served on 127\.0\.0\.1:\d+", summary["metrics"]), summary
    if ZOOKEEPER:
        assert summary["zkreg"].startswith("3 member(s) registered in ZooKeeper now, 4 created in all"), summary
    if CGROUP_V1_MEMORY:
        m = re.match(r"(\d+) reclaim episode\(s\) in demo-web, ([\d.]+) MiB reclaimed$", summary["reclaim"])
        assert m and int(m.group(1)) > 0 and float(m.group(2)) > 0, summary

    # The suggested commands work against the demo's agent while it waits.
    assert "pinionctl status" in tried and "pinionctl configs" in tried, tried
    assert ("pinionctl registrations" in tried) == ZOOKEEPER and ("pinionctl reclaim" in tried) == CGROUP_V1_MEMORY
    for cmd, (code, out, cerr, took) in tried.items():
        assert code == 0 and out.strip(), (cmd, code, out[-500:], cerr[-500:])
    assert "demo-node" in tried["pinionctl status"][1]
    wait = [h for h in headings if h.startswith("piniond keeps running for")][0]
    assert re.match(r"piniond keeps running for \d+s \(DEMO_SECONDS=\d+\) so the commands above can be tried; "
                    r"then the demo stops$", wait), wait


def test_build_says_it_is_still_at_it():
    """scripts/lib.sh's build (the demo's and the test command's): configure and make each say
    every BUILD_PROGRESS_SECONDS that they are still going, with make's steps so far, and how
    long they took; a make that fails still fails the pipeline (its status, not the counter's)."""
    script = """. "$1/scripts/lib.sh"
        { echo "  CC a.o"; sleep 2.5; echo "  CC b.o"; } | BUILD_PROGRESS_SECONDS=1 progress make
        sleep 1.2 | BUILD_PROGRESS_SECONDS=1 progress configure
        make() { echo "  CC c.o"; return 2; }
        (build "$2" >/dev/null 2>&1) && echo "build passed" || echo "build failed: $?"
        """
    d = os.path.join(os.environ.get("TMPDIR", "/tmp"), "pinion-progress-%d" % os.getpid())
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "Makefile"), "w").close()
    open(os.path.join(d, "config.status"), "w").close()
    try:
        r = subprocess.run(["bash", "-c", script, "bash", SRCDIR, d], capture_output=True, text=True, timeout=60)
    finally:
        for f in ("Makefile", "config.status"):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)
    lines = r.stderr.splitlines()
    assert re.match(r"==>   \.\.\. make: [12]s, 1 steps so far$", lines[0]), lines
    assert any(re.match(r"==>   \.\.\. make: 2s, 1 steps so far$", x) for x in lines), lines
    done = [x for x in lines if "make: done" in x]
    assert len(done) == 1 and re.match(r"==>   make: done in [2-4]s, 2 steps$", done[0]), lines
    # configure prints no steps: none are counted
    assert "==>   ... configure: 1s" in lines and ("==>   configure: done in 1s" in lines or
                                                 "==>   configure: done in 2s" in lines), lines
    assert r.stdout.strip() == "build failed: 1", (r.stdout, lines)
