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
OUTAGE = "10s"
SIM_RUNS = 10
WIDEN_SD = 2.5
WIDEN_REL = 0.02

pytestmark = [pytest.mark.skipif(VALGRIND, reason="timing against a model: not under valgrind"),
              pytest.mark.skipif(sanitized_build(), reason=NOT_UNDER_SANITIZERS)]


def run_fleet(tmp_dir, mode):
    require_binary(os.path.join(BUILDDIR, "piniond"))
    require_binary(os.path.join(BUILDDIR, "tests", "sim", "fleet-sim"))
    out = os.path.join(tmp_dir, "fleet-%s.json" % mode)
    cmd = [sys.executable, SCRIPT, "--agents", str(AGENTS), "--outage", OUTAGE,
           "--outage-mode", mode, "--backoff-initial", "200ms", "--backoff-max", "2s",
           "--steady", "1", "--time-limit", "30s", "--runs", str(SIM_RUNS),
           "--builddir", BUILDDIR, "--md", os.path.join(tmp_dir, "fleet-%s.md" % mode),
           "--json", out]
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


@pytest.mark.parametrize("mode", ["refuse", "5xx"])
def test_real_fleet_matches_the_simulation(tmp_dir, mode):
    res, p = run_fleet(tmp_dir, mode)
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
