# SPDX-License-Identifier: MIT
"""The real-process fleet check at CI scale (tests/bench/fleet-real.py, `make bench-fleet` runs
it with 100 agents): 20 real piniond against the test apiserver through a 10 s outage, with
backoff-initial=200ms and backoff-max=2s so that every agent retries about five times, then a
recovery whose compacted history makes every resume relist. The number of requests the fleet
sends during the outage must agree with tests/sim/fleet-sim run with the same settings
(--down-mode refused: both outages fail every attempt at once), and every agent must be synced
again, having relisted exactly once.

The tolerance. The simulation is run with 10 seeds; the measured count is one more draw from
(if the model is right) the same distribution, which only the backoff's jitter spreads (about
105 requests, standard deviation about 2). The seeds' [min, max] alone would reject a correct
agent about one run in five (an eleventh draw lies outside the range of ten with probability
2/11), so the range is widened by 2.5 standard deviations of the seeds on each side: the bounds
then sit about 4 standard deviations from the mean (false failures well under 1 in 1000; 200
seeds of the simulation all fall inside). On top, 2% of the mean for the real clock, which the
model does not have: every attempt comes a millisecond or so late (event loop, connect()), and
switching the outage on and off takes a few milliseconds, which at the end of the outage's rate
(~10 attempts/s) is worth a fraction of one attempt. The bound still catches a wrong backoff:
no jitter sends 140, a factor of 1.5 about 135, no cap about 93, backoff-initial off by 2x 87 or
124 (the simulation with those settings).

Both outage modes run: "refuse" (the port refuses connections; the agents count their own
attempts, logs and metrics must agree) and "5xx" (503 to everything; the test apiserver counts).

The status writes (--status-writes) ride along in the refuse run only: every pod carries the
pinion.io/ready readiness gate and declares a config every agent syncs from one nginx, one more
pod starts on every running agent, and the config's version changes during the outage. A pod
start costs at most 2 writes, the writes the outage holds back are tried once per backoff step
(not once per write or per second), they all go through after the recovery, and every pod gets
its Event for the new version exactly once. The reads' figures above must not move: the writes
share the token bucket but stay far below it. (event-batch 1s and a 2s config interval keep the
run short; the 5xx run has plain pods.)
"""

import json
import os
import statistics
import subprocess
import sys

import pytest

from pinion_testlib import BUILDDIR, NOT_UNDER_SANITIZERS, SRCDIR, VALGRIND, diag, require_binary, sanitized_build

SCRIPT = os.path.join(SRCDIR, "tests", "bench", "fleet-real.py")
AGENTS = 20
PODS_PER_NODE = 3  # fleet-real.py's default
OUTAGE = "10s"
SIM_RUNS = 10
WIDEN_SD = 2.5
WIDEN_REL = 0.02

pytestmark = [pytest.mark.skipif(VALGRIND, reason="timing against a model: not under valgrind"),
              pytest.mark.skipif(sanitized_build(), reason=NOT_UNDER_SANITIZERS)]


def run_fleet(tmp_dir, mode, status_writes):
    require_binary(os.path.join(BUILDDIR, "piniond"))
    require_binary(os.path.join(BUILDDIR, "tests", "sim", "fleet-sim"))
    out = os.path.join(tmp_dir, "fleet-%s.json" % mode)
    cmd = [sys.executable, SCRIPT, "--agents", str(AGENTS), "--outage", OUTAGE,
           "--outage-mode", mode, "--backoff-initial", "200ms", "--backoff-max", "2s",
           "--steady", "1", "--time-limit", "30s", "--runs", str(SIM_RUNS),
           "--builddir", BUILDDIR, "--md", os.path.join(tmp_dir, "fleet-%s.md" % mode),
           "--json", out]
    cmd += ["--status-writes", "--event-batch", "1s", "--config-interval", "2s"] if status_writes \
        else ["--no-status-writes"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, PINION_SRCDIR=SRCDIR, PINION_BUILDDIR=BUILDDIR))
    # Exit 1 may just be a disagreement, judged below with the tolerance stated here.
    assert os.path.exists(out), "fleet-real.py exited %d without results:\n%s\n%s" % (
        p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    with open(out) as f:
        return json.load(f), p


def tolerance(values):
    mean = statistics.mean(values)
    widen = WIDEN_SD * statistics.stdev(values) + WIDEN_REL * mean
    return min(values) - widen, max(values) + widen


@pytest.mark.parametrize("mode,status_writes", [("refuse", True), ("5xx", False)])
def test_real_fleet_matches_the_simulation(tmp_dir, mode, status_writes):
    res, p = run_fleet(tmp_dir, mode, status_writes)
    real, sims = res["real"], res["sim"]
    for line in p.stdout.splitlines():
        if line.startswith("| "):
            diag(line)

    # Every agent lived, came back, and relisted exactly once (every resume got one 410).
    assert real["alive_at_end"] == AGENTS, p.stderr[-3000:]
    assert real["synced"] == AGENTS, "only %d/%d agents synced again" % (real["synced"], AGENTS)
    assert real["gone_after_recovery"] == AGENTS, real
    assert real["lists_after_recovery"] == AGENTS, real
    # Each agent read its Node (podnet's pod CIDR) once at start, not again after the outage:
    # the recovery's requests are the reflectors' alone, the ones the simulation models.
    assert real["node_gets_after_recovery"] == 0, real

    # The outage's request count, against the simulation.
    counts = [s["requests_outage"] for s in sims]
    assert len(counts) == SIM_RUNS and all(s["unsynced"] == 0 and s["falls"] == 0 for s in sims)
    lo, hi = tolerance(counts)
    measured = real["requests_outage"]
    diag("%s outage: %d requests measured; simulation %d..%d over %d seeds (mean %.1f, sd %.2f), "
         "tolerance %.1f..%.1f" % (mode, measured, min(counts), max(counts), SIM_RUNS,
                                   statistics.mean(counts), statistics.stdev(counts), lo, hi))
    assert lo <= measured <= hi, "%d requests during the outage, the simulation allows %.1f..%.1f " \
        "(seeds: %s)" % (measured, lo, hi, counts)
    # Two independent counts of the same attempts agree: the agents' logs and their
    # pinion_apiserver_requests_total (refuse), or the test apiserver's log and the agents'
    # counters (5xx).
    assert real["requests_outage_metrics"] == measured, real
    if status_writes:
        check_status_writes(real["status"], p)


def check_status_writes(sw, p):
    for line in p.stdout.split("## Status writes", 1)[-1].splitlines():
        if line.startswith("| ") and "---" not in line:
            diag(line)
    pods = AGENTS * (PODS_PER_NODE + 1)
    assert len(sw["pods"]) == pods, sw
    # A pod start, whether the agent starts with it or it comes to a running agent: the condition
    # written once (True: the config is there within the grace), and at most one Event.
    for what in ("initial", "added"):
        w = sw[what + "_writes"]
        assert w["status_true"] == sw[what + "_pods"] and w["status_false"] == 0 and w["failed"] == 0, (what, w)
        assert sw[what + "_per_pod"] <= 2, (what, w)
    # The agents' pod events: configsync announces a version to the pods that declare it when it
    # takes the version, so the pods an agent started with get a ConfigSynced Event (when the
    # pod list came before the first sync, as it does on loopback), a pod whose config was
    # already there none. Never more than one at a start, never a series.
    assert sw["events_expected"], "no Event at a pod's start: does this build announce pod events?"
    assert sw["initial_writes"]["event-create"] <= sw["initial_pods"], sw["initial_writes"]
    assert sw["added_writes"]["event-create"] == 0, sw["added_writes"]
    assert sw["initial_writes"]["event-patch"] == sw["added_writes"]["event-patch"] == 0, sw
    # The outage: every agent had its Events for v2 waiting; attempts came once per backoff step
    # per agent (10 s at 200 ms doubling to 2 s: about 8), not once per write.
    assert 0 < sw["outage_attempts"] <= 12 * AGENTS, sw
    assert sw["outage_attempts_pods_status"] == 0, sw  # the condition never changed
    # After the recovery: exactly one Event per pod, nothing else, nothing lost, nothing doubled.
    assert sw["recovery_writes"]["event-create"] == pods and sw["recovery_writes"]["total"] == pods, sw
    assert sw["pods_with_v2_event"] == pods and sw["pods_with_duplicate_v2_event"] == 0, sw
    assert sw["events_dropped"] == 0 and sw["agents_drained"] == AGENTS, sw
