#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""configsync benchmark against real nginx over HTTPS on loopback, with a peer in the same run:

1. download+verify: a bundle of --files files (--size bytes in all, default 1,000 files, 100 MB)
   fetched by piniond ([config.bench], parallel=--parallel) into a fresh dest, against
   `curl --parallel --parallel-max P` fetching the same URLs followed by `sha256sum -c` of them.
   Each side runs --rounds times, alternating; the medians and their ratio are printed.
2. the CPU cost of a 304 cycle: the agent's user+system time (from /proc/PID/stat) over --cycles
   forced refreshes answered 304, minus the same number of API requests that start no fetch
   (so the API's own cost is not counted as the sync's).

Goals: pinion within 10% of curl (ratio <= 1.10); a 304 cycle under 1 ms of CPU.
Usage: make bench-configsync  (BENCH_CONFIGSYNC_FLAGS='--files 100 --size 10M')."""

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from pinion_testlib import Agent, wait_until  # noqa: E402
from configsync_testlib import Nginx, TestCA, versions_in  # noqa: E402
from benchjson import BenchJson  # noqa: E402


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def clock_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def make_bundle(root, n_files, total):
    import json
    base = os.path.join(root, "bench")
    os.makedirs(os.path.join(base, "f"), exist_ok=True)
    per = total // n_files
    entries, sums = [], []
    block = os.urandom(1 << 20)
    for i in range(n_files):
        # Distinct contents (a counter in front of shared random bytes) without generating 100 MB
        # of randomness.
        data = (b"%08d" % i + block * (per // len(block) + 1))[:per]
        name = "f/%04d.bin" % i
        with open(os.path.join(base, name), "wb") as f:
            f.write(data)
        h = hashlib.sha256(data).hexdigest()
        entries.append({"path": "d%02d/%04d.bin" % (i % 20, i), "url": name, "size": len(data), "sha256": h})
        sums.append((h, name))
    with open(os.path.join(base, "manifest.json"), "w") as f:
        json.dump({"version": "bench-1", "files": entries}, f)
    return sums


def run_curl(nginx, ca, sums, parallel, out_dir):
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    cfg = os.path.join(out_dir, "..", "curl.cfg")
    with open(cfg, "w") as f:
        for h, name in sums:
            f.write('url = "%s"\noutput = "%s"\n' % (nginx.url("bench/" + name),
                                                     os.path.join(out_dir, os.path.basename(name))))
    check = os.path.join(out_dir, "..", "SHA256SUMS")
    with open(check, "w") as f:
        for h, name in sums:
            f.write("%s  %s\n" % (h, os.path.basename(name)))
    t0 = time.monotonic()
    subprocess.run(["curl", "-sS", "--no-progress-meter", "--fail", "--parallel", "--parallel-max", str(parallel),
                    "--cacert", ca.ca_cert, "-K", cfg], check=True)
    subprocess.run(["sha256sum", "--quiet", "-c", check], cwd=out_dir, check=True, stdout=subprocess.DEVNULL)
    # pinion fsyncs what it publishes; so does this side, to compare the same work.
    subprocess.run(["sync", "-f", out_dir], check=True)
    return time.monotonic() - t0


def run_pinion(agent, dest, round_no):
    # A fresh dest per round: drop the previous tree so nothing can be reused by hard link.
    n0 = agent.get_json("/v1/configs/bench")["changes"]
    agent.write_config(sections={"config.bench": {"dest": "%s-%d" % (dest, round_no)}})
    t0 = time.monotonic()
    agent.sighup()
    c = wait_until(lambda: (lambda c: c if c["changes"] > n0 or c.get("last_error") else None)(
        agent.get_json("/v1/configs/bench")), 600, interval=0.01, desc="bench version published")
    elapsed = time.monotonic() - t0
    if c.get("last_error"):
        raise SystemExit("pinion failed: %s" % c["last_error"])
    shutil.rmtree("%s-%d" % (dest, round_no), ignore_errors=True)
    return elapsed


def cpu_per_cycle(agent, cycles, refresh):
    hz = os.sysconf("SC_CLK_TCK")
    path = "/v1/configs/bench/refresh" if refresh else "/v1/configs/none/refresh"
    t0 = clock_ticks(agent.pid)
    for _ in range(cycles):
        n = agent.get_json("/v1/configs/bench")["fetches"]
        r = agent.request("POST", path)
        assert r.status == (202 if refresh else 404), r
        if refresh:
            while agent.get_json("/v1/configs/bench")["fetches"] == n:
                pass
        else:
            agent.get_json("/v1/configs/bench")
    return (clock_ticks(agent.pid) - t0) / hz / cycles


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--size", default="100M")
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    args = ap.parse_args()
    bj = BenchJson("configsync", "Config sync: a bundle from nginx over HTTPS against curl")
    total = parse_size(args.size)

    work = tempfile.mkdtemp(prefix="configsync-bench-")
    os.chmod(work, 0o755)
    nginx = agent = None
    try:
        ca = TestCA(os.path.join(work, "ca"))
        nginx = Nginx(os.path.join(work, "srv"), ca)
        sums = make_bundle(nginx.root, args.files, total)
        dest = os.path.join(work, "dest")
        agent = Agent(config={"agent": {"log-level": "info"}, "config.bench": {
            "url": nginx.url("bench/manifest.json"), "dest": dest + "-0", "ca-file": ca.ca_cert,
            "interval": "1h", "parallel": str(args.parallel), "timeout": "10m", "keep-versions": "0"}})
        agent.start()
        wait_until(lambda: agent.get_json("/v1/configs/bench")["present"], 600, desc="first sync")
        shutil.rmtree(dest + "-0", ignore_errors=True)

        curl_times, pinion_times = [], []
        for i in range(args.rounds):
            # Alternate who goes first, so neither always finds a colder or busier disk.
            if i % 2 == 0:
                curl_times.append(run_curl(nginx, ca, sums, args.parallel, os.path.join(work, "curl", "out")))
                pinion_times.append(run_pinion(agent, dest, i + 1))
            else:
                pinion_times.append(run_pinion(agent, dest, i + 1))
                curl_times.append(run_curl(nginx, ca, sums, args.parallel, os.path.join(work, "curl", "out")))
        c, p = statistics.median(curl_times), statistics.median(pinion_times)
        paired = statistics.median(pt / ct for pt, ct in zip(pinion_times, curl_times))
        mb = total / 1e6
        print("download+verify: %d files, %.1f MB, parallel %d, %d rounds (median)" % (
            args.files, mb, args.parallel, args.rounds))
        print("  curl --parallel + sha256sum + sync: %.3f s  (%.0f MB/s)  rounds %s" % (
            c, mb / c, " ".join("%.3f" % t for t in curl_times)))
        print("  piniond configsync:                 %.3f s  (%.0f MB/s)  rounds %s" % (
            p, mb / p, " ".join("%.3f" % t for t in pinion_times)))
        print("  ratio pinion/curl: median of rounds %.3f, median of per-round ratios %.3f, best vs best %.3f"
              % (p / c, paired, min(pinion_times) / min(curl_times)))
        print("  goal <= 1.10 (median of per-round ratios): %s" % ("met" if paired <= 1.10 else "NOT met"))
        for line in agent.log_text().splitlines():
            if "published in" in line:
                print("  agent: " + line.split("config bench: ", 1)[-1])

        # 304 cycles: the tree published by the last round is the one the ETag describes.
        agent.write_config(sections={"config.bench": {"dest": dest + "-304"}})
        n0 = agent.get_json("/v1/configs/bench")["changes"]
        agent.sighup()
        wait_until(lambda: agent.get_json("/v1/configs/bench")["changes"] > n0, 600, desc="304 tree")
        nm0 = agent.get_json("/v1/configs/bench")["not_modified"]
        with_fetch = cpu_per_cycle(agent, args.cycles, True)
        baseline = cpu_per_cycle(agent, args.cycles, False)
        nm = agent.get_json("/v1/configs/bench")["not_modified"] - nm0
        net = with_fetch - baseline
        print("304 cycle: %d forced refreshes, %d answered 304" % (args.cycles, nm))
        print("  agent CPU per refresh incl. API requests: %.3f ms; API requests alone: %.3f ms" % (
            with_fetch * 1e3, baseline * 1e3))
        print("  CPU per 304 cycle: %.3f ms  (goal < 1 ms: %s)" % (net * 1e3, "met" if net < 1e-3 else "NOT met"))
        if nm < args.cycles:
            raise SystemExit("only %d of %d refreshes were 304s" % (nm, args.cycles))
        assert len(versions_in(dest + "-304")) == 1
        bj.row("download+verify, %d files, %.0f MB (median of %d rounds)" % (args.files, mb, args.rounds),
               round(p, 3), round(c, 3), "curl --parallel %d + sha256sum -c + sync" % args.parallel, "s")
        bj.row("download+verify, median of per-round ratios", None, None, "curl", "", goal="ratio <= 1.10",
               met=paired <= 1.10, ratio=paired)
        bj.row("throughput (median)", round(mb / p, 1), round(mb / c, 1), "curl", "MB/s")
        bj.row("CPU per 304 cycle (%d forced refreshes)" % args.cycles, round(net * 1e3, 4), unit="ms",
               goal="< 1 ms", met=net < 1e-3)
        bj.series("download+verify per round", "round", "seconds",
                  [("piniond", range(1, args.rounds + 1), pinion_times),
                   ("curl + sha256sum", range(1, args.rounds + 1), curl_times)])
        bj.write(args.json)
    except BaseException:
        if agent:
            sys.stderr.write("--- agent log tail ---\n%s\n" % agent.log_tail(120))
        raise
    finally:
        if agent:
            agent.close()
        if nginx:
            nginx.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
