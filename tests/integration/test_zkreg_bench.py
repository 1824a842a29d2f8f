# SPDX-License-Identifier: MIT
"""A short smoke run of the zkreg benchmark (tests/bench/zkreg-bench.py; `make bench-zkreg` runs
the full 5,000 endpoints): it completes, registers every endpoint once, and prints its table."""

import os
import subprocess
import sys

import pytest

from pinion_testlib import SRCDIR, BUILDDIR, T, diag
import zkreg_testlib as zt

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


def test_bench_smoke(tmp_path):
    md = tmp_path / "bench.md"
    env = dict(os.environ, PINION_BUILDDIR=BUILDDIR, PINION_SRCDIR=SRCDIR)
    p = subprocess.run([sys.executable, os.path.join(SRCDIR, "tests", "bench", "zkreg-bench.py"),
                        "--endpoints", "300", "--samples", "10", "--podsdir-samples", "3", "--md", str(md)],
                       capture_output=True, text=True, timeout=T(180), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    table = md.read_text()
    assert "| duplicates | 0 |" in table, table
    assert "| endpoints | 300 |" in table
    for line in p.stdout.strip().splitlines()[-13:]:
        diag(line)
