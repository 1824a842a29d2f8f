# SPDX-License-Identifier: MIT
"""The ZooKeeper fleet simulation (tests/sim/zk-fleet-sim, zkreg's real write pacing) has the
structure the pacing promises, on a small fleet: per-request pacing sends ceil(pods / 250)
transactions per agent, offers the server no more than that at once, and is never later than
per-operation pacing; per-operation pacing sends a transaction per create beyond the burst; a
run is a pure function of its options."""

import os
import subprocess

import pytest

from pinion_testlib import BUILDDIR, NOT_UNDER_SANITIZERS, T, require_binary, sanitized_build

pytestmark = pytest.mark.skipif(sanitized_build(), reason=NOT_UNDER_SANITIZERS)

SIM = os.path.join(BUILDDIR, "tests", "sim", "zk-fleet-sim")


def run(*args):
    require_binary(SIM)
    p = subprocess.run([SIM, *args], capture_output=True, text=True, timeout=T(60), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    rows = {}
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in ("request", "operation"):
            rows[cells[0]] = {"txns": int(cells[1]), "peak_txn": float(cells[2]), "back": float(cells[4].split()[0]),
                              "silent": int(cells[6])}
    return rows, p.stdout


def test_per_request_pacing_is_one_multi_per_250_pods():
    rows, _ = run("--agents", "200", "--pods", "600")
    assert rows["request"]["txns"] == 200 * 3
    # at once: every agent's three multis (inside its burst), nothing more
    assert rows["request"]["peak_txn"] <= 200 * 3
    # per operation: a burst of 50 creates in one multi, then one create per token
    assert rows["operation"]["txns"] == 200 * (1 + 550)
    assert rows["request"]["back"] <= rows["operation"]["back"]


def test_request_size_and_rate_bound_the_offer():
    rows, _ = run("--agents", "100", "--pods", "250", "--max-ops", "50", "--write-qps", "2")
    # 5 requests of 50 each; a burst of 10 covers them
    assert rows["request"]["txns"] == 100 * 5
    rows, _ = run("--agents", "100", "--pods", "250", "--max-ops", "1", "--write-qps", "10")
    assert rows["request"]["txns"] == 100 * 250
    # the rate bounds each agent after its burst of 10: 100 agents x (10 + 10/s) in a second
    assert rows["request"]["peak_txn"] <= 100 * 20


def test_runs_are_deterministic():
    assert run("--agents", "300", "--seed", "7")[1] == run("--agents", "300", "--seed", "7")[1]
