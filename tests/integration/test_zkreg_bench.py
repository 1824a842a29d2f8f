# SPDX-License-Identifier: MIT
"""A short smoke run of the zkreg benchmark (tests/bench/zkreg-bench.py; `make bench-zkreg` runs
the full 5,000 endpoints, 5 runs): two runs complete, register every endpoint once and remove
them again, and the table shows each run's ratios and the worst."""

import os
import subprocess
import sys

import pytest

from pinion_testlib import BUILDDIR, NOT_UNDER_SANITIZERS, SRCDIR, T, diag, sanitized_build
import zkreg_testlib as zt

pytestmark = [pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed"),
              pytest.mark.skipif(sanitized_build(), reason=NOT_UNDER_SANITIZERS)]


def test_bench_smoke(tmp_path):
    md = tmp_path / "bench.md"
    env = dict(os.environ, PINION_BUILDDIR=BUILDDIR, PINION_SRCDIR=SRCDIR)
    p = subprocess.run([sys.executable, os.path.join(SRCDIR, "tests", "bench", "zkreg-bench.py"),
                        "--endpoints", "300", "--runs", "2", "--samples", "10", "--podsdir-samples", "3",
                        "--md", str(md)],
                       capture_output=True, text=True, timeout=T(180), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    table = md.read_text()
    assert "| duplicates | 0 |" in table, table
    assert "| endpoints | 300 |" in table
    for verb in ("creates", "deletes"):
        assert f"| run 1: {verb}/s pinion / kazoo (server) |" in table, table
        assert f"| run 2: {verb}/s pinion / kazoo (server) |" in table, table
        assert f"| {verb}: worst ratio of 2 runs |" in table, table
    for line in p.stdout.strip().splitlines():
        diag(line)


def test_batch_bench_smoke(tmp_path):
    """tests/bench/zkreg-batch-bench.py, small: both phases complete on both sides, pinion's
    re-registration after the expiry is one transaction and its bulk start one per 250."""
    md = tmp_path / "batch.md"
    env = dict(os.environ, PINION_BUILDDIR=BUILDDIR, PINION_SRCDIR=SRCDIR)
    p = subprocess.run([sys.executable, os.path.join(SRCDIR, "tests", "bench", "zkreg-batch-bench.py"),
                        "--pods", "50", "--bulk", "600", "--rate-pods", "600", "--runs", "1", "--md", str(md)],
                       capture_output=True, text=True, timeout=T(300), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    table = md.read_text()
    assert "| run 1: 50 members after an expiry, pinion / kazoo |" in table, table
    assert "| run 1: 600 pods at start, pinion / kazoo |" in table, table
    assert "| expiry: pinion's transactions (most of any run) | 1 |" in table, table
    assert "| bulk: transactions, pinion / kazoo (last run) | 3 / 600 |" in table, table
    for line in p.stdout.strip().splitlines():
        diag(line)
