#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""reclaim-bench: what the reclaim module buys a workload in a real v1 memory cgroup, measured
against the same workload without the agent, in the same run.

    tests/bench/reclaim-bench.py [--limit 64M] [--high 80%] [--target 60%] [--reps 20]
                                 [--stream-factor 4] [--md FILE]
    make bench-reclaim             # in the build directory; BENCH_RECLAIM_FLAGS='--reps 5'

Three measurements, each in two identical cgroups, one watched by a real piniond and one not
(/sys/fs/cgroup/memory/pinion-bench-<pid>-*, removed at the end, also on Ctrl-C); the reps
alternate between the two (and which goes first) so both see the same background load:

  1. Reaction: a writer streams files (1 MiB writes, fdatasync each MiB: clean cache) through
     page cache at several times the limit while a sampler in this process reads
     memory.usage_in_bytes every ~0.5 ms. Every excursion at or above high, from the first sample
     at/above it to the first sample below, is one reaction time (p50/p99; what an observer
     sees, including the sampling period). The agent's own figures (from its threshold wake-up
     to the end of the episode, its debug log) are printed beside them. The peak
     (memory.max_usage_in_bytes) and failcnt against the original limit, and the agent's count
     of failcnt increments during its own steps (lowered_limit_hits), are reported: the goal is
     that the original limit is never reached.
  2. Throughput: the writer's MiB/s streaming stream-factor x limit, median of the reps.
  3. Anonymous burst: a helper in the cgroup maps and touches 15% of the limit of anonymous
     memory on command and reports how long that took. Measured with the cache empty (after
     memory.force_empty) and with the cache full (right after streaming 2x the limit). Without
     the agent a full cgroup sits at its limit and every page of the burst waits in direct
     reclaim; with it there is room between high and the limit. Once more after a writer that
     never calls fdatasync (its cache partly dirty: reclaim has to wait for writeback).

Prints a table with ratios (with agent / without; full / empty). Exit 0 on success, 2 on bad
usage, 1 if the environment lacks a v1 memory hierarchy.
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("PINION_SRCDIR") or os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRCDIR, "tests", "integration"))

import pinion_testlib  # noqa: E402
from reclaim_testlib import MiB, MemCgroup, disk_tmpdir, v1_available, writer_argv  # noqa: E402
from benchjson import BenchJson  # noqa: E402

# Maps and touches (memset, at C speed: the page faults and their memcg charges are what is
# timed, not the interpreter) `size` bytes of anonymous memory per line on stdin.
BURST_HELPER = r"""
import ctypes, mmap, sys, time
size = int(sys.argv[1])
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    t0 = time.perf_counter()
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf = ctypes.c_char.from_buffer(m)
    ctypes.memset(ctypes.addressof(buf), 1, size)
    dt = time.perf_counter() - t0
    del buf
    m.close()
    sys.stdout.write("%.9f\n" % dt); sys.stdout.flush()
"""


def parse_size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError("a size like 64M")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    k = (len(v) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class Sampler(threading.Thread):
    """Reads memory.usage_in_bytes every ~0.5 ms; collects excursions at/above high."""

    def __init__(self, cg, high):
        super().__init__(daemon=True)
        self.path = os.path.join(cg.dir, "memory.usage_in_bytes")
        self.high = high
        self.stop_flag = False
        self.excursions = []
        self.samples = 0

    def run(self):
        fd = os.open(self.path, os.O_RDONLY)
        above_since = None
        try:
            while not self.stop_flag:
                v = int(os.pread(fd, 64, 0))
                t = time.monotonic()
                self.samples += 1
                if v >= self.high and above_since is None:
                    above_since = t
                elif v < self.high and above_since is not None:
                    self.excursions.append(t - above_since)
                    above_since = None
                time.sleep(0.0005)
        finally:
            os.close(fd)


class Bench:
    def __init__(self, args):
        self.args = args
        self.cgroups = []
        self.agents = []
        self.dir = tempfile.mkdtemp(prefix="pinion-reclaim-bench-", dir=disk_tmpdir())
        self.high = args.limit * args.high // 100
        self.n = 0

    def cgroup(self):
        self.n += 1
        g = MemCgroup("/pinion-bench-%d-%d" % (os.getpid(), self.n)).create(self.args.limit)
        self.cgroups.append(g)
        return g

    def agent(self, g):
        a = pinion_testlib.Agent(config={
            "agent": {"log-level": "debug"},
            "reclaim.bench": {"cgroup": g.name, "high": "%d%%" % self.args.high,
                              "target": "%d%%" % self.args.target, "min-file": "4M", "interval": "10s"}})
        self.agents.append(a)
        a.start()
        pinion_testlib.wait_until(lambda: a.get_json("/v1/reclaim")["targets"][0]["state"] == "ok")
        return a

    def stream(self, g, total, tag, sync=True):
        d = os.path.join(self.dir, tag)
        argv = writer_argv(d, total) if sync else writer_argv(d, total, sync_every=1 << 62)
        p = g.run(argv, stdout=subprocess.PIPE, text=True)
        out, _ = p.communicate(timeout=600)
        subprocess.run(["rm", "-rf", d])
        return json.loads(out)

    def cleanup(self):
        for a in self.agents:
            try:
                a.close()
            except Exception as e:  # noqa: BLE001 - report and go on cleaning
                print("# cleanup: %s" % e, file=sys.stderr)
        for g in self.cgroups:
            g.remove()
        subprocess.run(["rm", "-rf", self.dir])

    # --- 1 + 2 ---

    def reaction_and_throughput(self):
        """Two cgroups, one watched by an agent; the reps alternate between them (and which
        goes first), so both see the same background load."""
        off, on = self.cgroup(), self.cgroup()
        a = self.agent(on)
        res = {}
        samplers = {}
        for name, g in (("off", off), ("on", on)):
            g.reset_peak()
            samplers[name] = Sampler(g, self.high)
            samplers[name].start()
            res[name] = {"rates": []}
        for i in range(self.args.reps):
            order = (("off", off), ("on", on)) if i % 2 == 0 else (("on", on), ("off", off))
            for name, g in order:
                r = self.stream(g, self.args.stream_factor * self.args.limit, "%s%d" % (name, i))
                res[name]["rates"].append(r["mib_per_s"])
        for name, g in (("off", off), ("on", on)):
            samplers[name].stop_flag = True
            samplers[name].join()
            res[name].update({"excursions": samplers[name].excursions, "peak": g.peak(),
                              "failcnt": g.failcnt(), "limit_after": g.limit()})
        res["on"]["target"] = a.get_json("/v1/reclaim")["targets"][0]
        res["on"]["agent_ms"] = [float(x) for x in re.findall(
            r"episode done after \d+ steps, \d+ bytes in ([0-9.]+) ms", a.log_text())]
        a.stop()
        off.remove()
        on.remove()
        return res["off"], res["on"]

    # --- 3 ---

    def burst(self):
        """Per rep and per cgroup (alternating): the burst with the cache empty, after a synced
        stream of 2x the limit, and after a stream that never syncs."""
        size = self.args.limit * 15 // 100
        off, on = self.cgroup(), self.cgroup()
        a = self.agent(on)
        helpers = {}
        res = {}
        for name, g in (("off", off), ("on", on)):
            h = g.run([sys.executable, "-c", BURST_HELPER, str(size)], stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, text=True)
            assert h.stdout.readline().strip() == "ready"
            helpers[name] = h
            res[name] = {"empty": [], "full": [], "dirty": []}

        def one(name):
            h = helpers[name]
            h.stdin.write("go\n")
            h.stdin.flush()
            return float(h.stdout.readline())
        for i in range(self.args.reps):
            order = (("off", off), ("on", on)) if i % 2 == 0 else (("on", on), ("off", off))
            for name, g in order:
                g.write("memory.force_empty", "0")
                res[name]["empty"].append(one(name))
                self.stream(g, 2 * self.args.limit, "b%s%d" % (name, i))
                res[name]["full"].append(one(name))
                g.write("memory.force_empty", "0")
                self.stream(g, 2 * self.args.limit, "d%s%d" % (name, i), sync=False)
                res[name]["dirty"].append(one(name))
        for h in helpers.values():
            h.stdin.close()
            h.wait(10)
        a.stop()
        off.remove()
        on.remove()
        return res["off"], res["on"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=parse_size, default=64 * MiB)
    ap.add_argument("--high", type=int, default=80)
    ap.add_argument("--target", type=int, default=60)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--stream-factor", type=int, default=4)
    ap.add_argument("--md", help="also write the table here")
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    args = ap.parse_args()
    bj = BenchJson("reclaim", "Page cache reclaim in a v1 memory cgroup, with and without the agent")
    if not 0 < args.target < args.high <= 100 or args.reps < 1:
        ap.error("need 0 < target < high <= 100 and reps >= 1")
    if os.geteuid() != 0 or not v1_available():
        print("reclaim-bench: needs root and a cgroup v1 memory hierarchy", file=sys.stderr)
        return 1
    b = Bench(args)

    def on_signal(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    try:
        off, on = b.reaction_and_throughput()
        boff, bon = b.burst()
    finally:
        b.cleanup()

    L, H = args.limit, b.high
    ms = lambda v: "%.2f ms" % (v * 1000)  # noqa: E731
    rows = []
    rows.append(("setup", "limit %d MiB, high %d%% (%d MiB), target %d%%, stream %dx limit, %d reps" % (
        L // MiB, args.high, H // MiB, args.target, args.stream_factor, args.reps), "", ""))
    rows.append(("peak usage (max_usage_in_bytes)", "%.1f MiB" % (off["peak"] / MiB), "%.1f MiB" % (on["peak"] / MiB),
                 "%.2f" % (on["peak"] / off["peak"])))
    rows.append(("original limit reached", "yes" if off["peak"] >= L - MiB else "no",
                 "yes" if on["peak"] >= L else "no", ""))
    rows.append(("failcnt", str(off["failcnt"]), "%d (all %d during the agent's own steps)" % (
        on["failcnt"], on["target"]["lowered_limit_hits"]), ""))
    rows.append(("excursions above high (sampled)", str(len(off["excursions"])), str(len(on["excursions"])), ""))
    rows.append(("time above high p50 (sampler: >= high until < high)", "never back" if not off["excursions"] else ms(pct(off["excursions"], 50)),
                 ms(pct(on["excursions"], 50)), ""))
    rows.append(("time above high p99 (sampler)", "never back" if not off["excursions"] else ms(pct(off["excursions"], 99)),
                 ms(pct(on["excursions"], 99)), ""))
    if on.get("agent_ms"):
        rows.append(("reaction p50 / p99 (agent: wake-up to episode done)", "",
                     "%.2f / %.2f ms (%d episodes)" % (pct(on["agent_ms"], 50), pct(on["agent_ms"], 99), len(on["agent_ms"])), ""))
    rows.append(("max step (one write blocked the loop)", "", ms(on["target"]["max_step_seconds"]), ""))
    mo, mn = statistics.median(off["rates"]), statistics.median(on["rates"])
    rows.append(("writer throughput (median)", "%.0f MiB/s" % mo, "%.0f MiB/s" % mn, "%.2f" % (mn / mo)))
    eo, fo = statistics.median(boff["empty"]), statistics.median(boff["full"])
    en, fn = statistics.median(bon["empty"]), statistics.median(bon["full"])
    rows.append(("anon burst 15%% (%d MiB), cache empty, median" % (L * 15 // 100 // MiB), ms(eo), ms(en), "%.2f" % (en / eo)))
    rows.append(("anon burst, cache full, median", ms(fo), ms(fn), "%.2f" % (fn / fo)))
    rows.append(("anon burst, cache full, p90", ms(pct(boff["full"], 90)), ms(pct(bon["full"], 90)),
                 "%.2f" % (pct(bon["full"], 90) / pct(boff["full"], 90))))
    do, dn = statistics.median(boff["dirty"]), statistics.median(bon["dirty"])
    rows.append(("anon burst, cache full of a writer that never syncs, median", ms(do), ms(dn), "%.2f" % (dn / do)))
    rows.append(("full / empty (1.0 = no stall)", "%.2f" % (fo / eo), "%.2f" % (fn / en), ""))

    lines = ["| measure | without agent | with agent | ratio (with / without) |", "|---|---|---|---|"]
    lines += ["| %s | %s | %s | %s |" % r for r in rows]
    goals = [
        ("original limit never reached (stream %dx the limit)" % args.stream_factor, on["peak"] < L),
        ("reaction p99 < 100 ms (sampler)", on["excursions"] and pct(on["excursions"], 99) < 0.1),
        ("anon burst with the cache full no slower than with it empty (median, 10% noise)", fn <= en * 1.10),
    ]
    lines.append("")
    lines += ["- goal: %s: %s" % (g, "met" if ok else "NOT met") for g, ok in goals]
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    write_json(bj, args, off, on, boff, bon, goals)
    return 0


def write_json(bj, args, off, on, boff, bon, goals):
    """The figures in the common schema: pinion is the cgroup with the agent, the peer the same
    workload in the same run without it."""
    if not args.json:
        return
    MiBf = lambda v: round(v / MiB, 2)  # noqa: E731
    msf = lambda v: round(v * 1000, 3)  # noqa: E731
    peer = "same cgroup, no agent"
    bj.row("peak usage (max_usage_in_bytes), limit %d MiB" % (args.limit // MiB), MiBf(on["peak"]), MiBf(off["peak"]),
           peer, "MiB", goal="original limit never reached", met=on["peak"] < args.limit)
    bj.row("failcnt", on["failcnt"], off["failcnt"], peer, "")
    if on["excursions"]:
        p99 = pct(on["excursions"], 99)
        bj.row("time above high, p50 (sampler)", msf(pct(on["excursions"], 50)),
               None if not off["excursions"] else msf(pct(off["excursions"], 50)), peer, "ms")
        bj.row("time above high, p99 (sampler)", msf(p99),
               None if not off["excursions"] else msf(pct(off["excursions"], 99)), peer, "ms",
               goal="< 100 ms", met=p99 < 0.1)
    if on.get("agent_ms"):
        bj.row("reaction p99, agent's own (wake-up → episode done, %d episodes)" % len(on["agent_ms"]),
               round(pct(on["agent_ms"], 99), 3), unit="ms")
    bj.row("writer throughput (median)", round(statistics.median(on["rates"]), 1),
           round(statistics.median(off["rates"]), 1), peer, "MiB/s")
    bj.row("anon burst 15%, cache full (median)", msf(statistics.median(bon["full"])),
           msf(statistics.median(boff["full"])), peer, "ms")
    en, fn = statistics.median(bon["empty"]), statistics.median(bon["full"])
    bj.row("anon burst with the agent: cache full / cache empty (median)", None, None, "", "",
           goal="<= 1.10", met=fn <= en * 1.10, ratio=fn / en)
    if not off["excursions"]:
        bj.note("Without the agent the usage never came back below high until the files were deleted "
                "(no excursion to time).")
    bj.note("%d reps alternating between the two cgroups; goals: %s." % (
        args.reps, "; ".join("%s: %s" % (g, "met" if ok else "NOT met") for g, ok in goals)))
    bj.series("writer throughput per rep", "rep", "MiB/s",
              [("with agent", range(1, len(on["rates"]) + 1), on["rates"]),
               ("without agent", range(1, len(off["rates"]) + 1), off["rates"])])
    bj.write(args.json)


if __name__ == "__main__":
    sys.exit(main())
