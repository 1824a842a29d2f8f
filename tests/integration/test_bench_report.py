# SPDX-License-Identifier: MIT
"""The benchmark report (`make bench`, tests/bench/report.py): results in the common JSON schema
(tests/bench/benchjson.py) become one REPORT.md, each figure beside its peer with the ratio, the
goal and whether it was met, the machine and load, a failed benchmark listed as failed, and a
real PNG plot per benchmark. Then `make bench BENCH_QUICK=1` end to end on two benchmarks
(the soak and identity, a few seconds each): real runs, real JSON, one report."""

import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

from pinion_testlib import BUILDDIR, NOT_UNDER_SANITIZERS, SRCDIR, diag, sanitized_build

REPORT = os.path.join(SRCDIR, "tests", "bench", "report.py")
sys.path.insert(0, os.path.join(SRCDIR, "tests", "bench"))

from benchjson import BenchJson  # noqa: E402

pytestmark = pytest.mark.skipif(sanitized_build(), reason=NOT_UNDER_SANITIZERS)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    """(width, height) from a PNG's IHDR; fails the test if the file is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_MAGIC, "%s is not a PNG: %r" % (path, head[:8])
    assert head[12:16] == b"IHDR", path
    return struct.unpack(">II", head[16:24])


def write_fixtures(d):
    """Two benchmarks' results as the benchmarks write them, through BenchJson itself."""
    zk = BenchJson("zkreg", "ZooKeeper registration, fixture")
    zk.row("creates/s", 15528, 3349, "kazoo async client", "/s", goal="ratio >= 2", met=True)
    zk.row("p99 latency", 61.5, unit="ms", goal="< 50 ms", met=False)
    zk.row("paired ratio", None, None, "curl", ratio=1.23456)
    zk.series("latency", "ms", "samples", [("pinion", [1, 2, 2, 3, 9], [])], kind="hist")
    zk.write(os.path.join(d, "zkreg.json"))
    soak = BenchJson("soak", "Soak, fixture")
    soak.row("VmRSS at the end", 15128, 15124, "same agent at the end of warm-up", "KiB",
             goal="no growth after warm-up (<= 1.05)", met=True)
    soak.series("VmRSS", "seconds", "KiB", [("VmRSS", [0, 0.5, 1.0], [15000, 15124, 15128])],
                marks=[(0.5, "end of warm-up")])
    soak.series("fds", "seconds", "descriptors", [("fds", [0, 0.5, 1.0], [13, 13, 12])], kind="step")
    soak.write(os.path.join(d, "soak.json"), ok=True, extra={
        "events": 100000, "events_per_second": 1990, "rss_kib": {"warm": 15124, "end": 15128,
                                                                 "max_after_warm": 15130},
        "fds": {"warm": 13, "end": 12}, "rss_end_over_warm": 1.0, "leak_checker": None,
        "exit_problem": None})
    with open(os.path.join(d, "status.txt"), "w") as f:
        f.write("zkreg 0 61.2\nsoak 0 120.5\nreclaim 1 3.0\n")


def run_report(d, *extra):
    p = subprocess.run([sys.executable, REPORT, "--snapshot", os.path.join(d, "machine.json")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, REPORT, "--machine", os.path.join(d, "machine.json"),
                        "--status", os.path.join(d, "status.txt"), "--out", os.path.join(d, "out"),
                        os.path.join(d, "zkreg.json"), os.path.join(d, "soak.json"),
                        os.path.join(d, "reclaim.json")] + list(extra),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(os.path.join(d, "out", "REPORT.md")) as f:
        return f.read()


def test_report_from_fixtures(tmp_dir):
    write_fixtures(tmp_dir)
    md = run_report(tmp_dir)
    diag(md)
    lines = md.splitlines()
    # Each figure beside its peer, with the ratio (pinion / peer), the goal and the verdict.
    assert "| figure | pinion | peer | peer value | ratio (pinion / peer) | goal | met |" in lines
    assert "| creates/s | 15,528 /s | kazoo async client | 3,349 /s | 4.64 | ratio >= 2 | **met** |" in lines
    assert "| p99 latency | 61.50 ms |  |  |  | < 50 ms | **NOT met** |" in lines
    assert "| paired ratio |  | curl |  | 1.23 |  |  |" in lines
    assert "| VmRSS at the end | 15,128 KiB | same agent at the end of warm-up | 15,124 KiB | 1 | " \
        "no growth after warm-up (<= 1.05) | **met** |" in lines
    # The summary: every benchmark with its result and goals; the one that wrote nothing is failed.
    assert any(ln.startswith("| [zkreg](#") and "| ok | 61 s | 1 of 2 |" in ln for ln in lines), md
    assert any(ln.startswith("| [soak](#") and "| ok | 120 s | 1 of 1 |" in ln for ln in lines), md
    assert "| reclaim | **failed** (exit 1, no results) | 3 s | |" in lines
    # The machine and its load.
    with open("/proc/loadavg") as f:
        assert f.read()
    assert "- machine: %d cores" % os.cpu_count() in md
    assert "load average at the start (1 / 5 / 15 min): " in md and "- date: " in md
    assert "leak check: not in this run" in md  # the soak summary, no leak checker in the fixture
    # The plots: real PNGs, referenced from the report, one per benchmark with series.
    for name, panels in (("zkreg", 1), ("soak", 2)):
        png = os.path.join(tmp_dir, "out", "bench-%s.png" % name)
        w, h = png_size(png)
        assert w >= 400 and h >= 200 * panels, (name, w, h)
        assert "![%s](bench-%s.png)" % (name, name) in lines
    assert not os.path.exists(os.path.join(tmp_dir, "out", "bench-reclaim.png"))


def test_report_rejects_a_file_that_is_not_a_result(tmp_dir):
    write_fixtures(tmp_dir)
    bad = os.path.join(tmp_dir, "bad.json")
    with open(bad, "w") as f:
        json.dump({"rows": []}, f)
    p = subprocess.run([sys.executable, REPORT, "--out", os.path.join(tmp_dir, "out"), bad],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "not a benchmark result" in p.stderr, p.stderr


def test_make_bench_quick_end_to_end(tmp_dir):
    """make bench in its tiny mode, on the soak and identity benchmarks: real runs, each writes
    the common schema, one report with both and their plots, nothing copied into the source
    tree."""
    if not os.path.exists(os.path.join(BUILDDIR, "Makefile")):
        pytest.skip("no Makefile in %s" % BUILDDIR)
    out = os.path.join(tmp_dir, "bench")
    src_report = os.path.join(SRCDIR, "tests", "bench", "REPORT.md")
    before = os.stat(src_report).st_mtime if os.path.exists(src_report) else None
    p = subprocess.run(["make", "-s", "bench", "BENCH_QUICK=1", "BENCH_ONLY=soak identity",
                        "BENCH_OUT=" + out], cwd=BUILDDIR, capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    diag(p.stdout[-3000:])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for name in ("soak", "identity"):
        with open(os.path.join(out, name + ".json")) as f:
            doc = json.load(f)
        assert doc["name"] == name and doc["ok"] is True, doc
        assert doc["rows"] and doc["series"], doc
        for row in doc["rows"]:
            assert set(row) == {"figure", "pinion", "peer", "peer_name", "ratio", "unit", "goal", "met"}, row
        png_size(os.path.join(out, "bench-%s.png" % name))
    with open(os.path.join(out, "status.txt")) as f:
        status = [ln.split()[:2] for ln in f]
    assert status == [["soak", "0"], ["identity", "0"]], status
    with open(os.path.join(out, "REPORT.md")) as f:
        md = f.read()
    assert "## Soak: 600 pod changes" in md and "## Identity: node bootstrap" in md, md
    assert "| node certificate, local CA (exec → cert.pem) |" in md
    assert "openssl req -x509 -CA" in md
    after = os.stat(src_report).st_mtime if os.path.exists(src_report) else None
    assert after == before, "the quick run must not replace the committed report"


def test_make_bench_quick_workload_api(tmp_dir):
    """The Workload API benchmark through make bench, tiny: real agents, a python3-grpcio client
    in a pod's cgroup, the HTTP routes beside it, the streams really open when the memory is read
    (the agent's descriptors), every figure beside its HTTP peer with the ratio."""
    if not os.path.exists(os.path.join(BUILDDIR, "Makefile")):
        pytest.skip("no Makefile in %s" % BUILDDIR)
    if not os.path.isdir("/sys/fs/cgroup/pids") or not shutil.which("protoc"):
        pytest.skip("needs the pids cgroup hierarchy and protoc")
    out = os.path.join(tmp_dir, "bench")
    p = subprocess.run(["make", "-s", "bench", "BENCH_QUICK=1", "BENCH_ONLY=workload-api", "BENCH_OUT=" + out],
                       cwd=BUILDDIR, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    diag(p.stdout[-3000:])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    with open(os.path.join(out, "workload-api.json")) as f:
        doc = json.load(f)
    assert doc["name"] == "workload-api" and doc["ok"] is True, doc
    rows = {r["figure"]: r for r in doc["rows"]}
    lat = [r for r in doc["rows"] if r["unit"] == "ms"]
    assert len(lat) == 6, rows.keys()  # X509 by grpcio and by hand-written frames, JWT: p50 and p99 each
    for r in lat:
        assert r["pinion"] > 0 and r["peer"] > 0, r
        assert r["peer_name"].startswith(("GET /v1/identity", "POST /v1/identity/jwt")), r
        assert abs(r["ratio"] - r["pinion"] / r["peer"]) < 0.01 * r["ratio"], r
    assert len(doc["latency_seconds"]["grpc"]) == len(doc["latency_seconds"]["http"]) == 5
    mem = [r for f, r in rows.items() if f.startswith("agent memory per open stream")]
    assert {r["figure"].split(": ")[1] for r in mem} >= {"FetchX509SVID streams, one connection",
                                                         "FetchX509SVID streams, a connection each"}, mem
    # Each level was measured with its streams open: one connection more per stream (one in
    # all for the multiplexed streams).
    for kind, levels in doc["memory"].items():
        assert [m["streams"] for m in levels] == [0, 4, 10], (kind, levels)
        base = levels[0]["fds"]
        for m in levels[1:]:
            assert m["fds"] >= base + (1 if kind == "grpc-mux" else m["streams"]), (kind, m)
            assert m["smaps_kib"]["Rss"] > 0 and "Pss_Anon" in m["smaps_kib"], m
    png_size(os.path.join(out, "bench-workload-api.png"))
    with open(os.path.join(out, "REPORT.md")) as f:
        md = f.read()
    assert "## Workload API: gRPC against the HTTP/JSON API" in md and "![workload-api](bench-workload-api.png)" in md
