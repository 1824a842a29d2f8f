# SPDX-License-Identifier: MIT
"""The runtime benchmark (tests/bench/runtime-cycles.py) through `make bench`, tiny: real podman
and containerd private to the run, pinion-cni and the reference ptp + host-local alternating, every
figure beside its reference peer with the ratio, and its section in the report. No assertion on
speed: that is the benchmark's job."""

import json
import os
import subprocess

import pytest

from pinion_testlib import BUILDDIR, NOT_UNDER_SANITIZERS, diag, sanitized_build
from runtime_testlib import require_runtime

pytestmark = pytest.mark.skipif(sanitized_build(), reason=NOT_UNDER_SANITIZERS)


def test_make_bench_quick_runtime(tmp_dir):
    require_runtime("containerd")
    require_runtime("podman")
    if not os.path.exists(os.path.join(BUILDDIR, "Makefile")):
        pytest.skip("no Makefile in %s" % BUILDDIR)
    out = os.path.join(tmp_dir, "bench")
    p = subprocess.run(["make", "-s", "bench", "BENCH_QUICK=1", "BENCH_ONLY=runtime", "BENCH_OUT=" + out],
                       cwd=BUILDDIR, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    diag(p.stdout[-3000:])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    with open(os.path.join(out, "runtime.json")) as f:
        doc = json.load(f)
    assert doc["name"] == "runtime" and doc["ok"] is True, doc
    figures = [r["figure"] for r in doc["rows"]]
    assert figures == ["podman run+rm cycle, median", "podman run+rm cycle, p99",
                       "CRI RunPodSandbox+Stop+Remove cycle, median", "CRI RunPodSandbox+Stop+Remove cycle, p99"]
    for r in doc["rows"]:
        assert r["peer_name"] == "ptp + host-local" and r["unit"] == "ms", r
        assert r["pinion"] > 0 and r["peer"] > 0 and abs(r["ratio"] - r["pinion"] / r["peer"]) < 0.01 * r["ratio"], r
        assert r["goal"] is None and r["met"] is None, r  # the issue sets no goal: the ratio is reported
    assert [len(line["x"]) for s in doc["series"] for line in s["lines"]] == [2, 2, 3, 3]
    with open(os.path.join(out, "REPORT.md")) as f:
        md = f.read()
    assert "## Container runtimes: pinion-cni against the reference ptp + host-local" in md, md
