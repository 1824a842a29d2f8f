#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""reclaim-bench: what the reclaim module buys a workload in a real memory cgroup — v1 on the
build host, v2 on the VM suite's guest — measured against the same workload without the agent,
in the same run.

    tests/bench/reclaim-bench.py [--limit 64M] [--high 90] [--target 70] [--min-file 16M]
                                 [--reps 10] [--stream-factor 4] [--md FILE] [--json FILE]
    make bench-reclaim             # in the build directory; BENCH_RECLAIM_FLAGS='--reps 5'
    tests/vm/run --out DIR --exec 'PINION_BUILDDIR=... python3 .../reclaim-bench.py --json ...'
                                   # v2: make bench runs it so (tests/bench/run-all.sh)

The version is the one of the memory hierarchy found (v1 at /sys/fs/cgroup/memory, else v2 at
/sys/fs/cgroup). Three measurements, each in two identical cgroups, one watched by a real
piniond and one not (pinion-bench-<pid>-* directly under the hierarchy's root, removed at the
end, also on Ctrl-C); the reps alternate between the two (and which goes first) so both see the
same background load:

  1. Reaction: `dd if=/dev/zero bs=1M` (no fsync: as fast as a writer gets, its cache dirty)
     streams several times the limit into a file while a sampler in this process reads the
     usage (v1 memory.usage_in_bytes, v2 memory.current) every ~0.5 ms. Every excursion at or
     above high, from the first sample at/above it to the first sample below, is one reaction
     time (p50/p99; what an observer sees, including the sampling period). The agent's own
     figures (from its wake-up to the end of the episode, its debug log) are printed beside
     them. The peak (v1 memory.max_usage_in_bytes, v2 memory.peak, over every rep) is the
     measure: the goal is at or under 95% of the limit. Beside it v1's failcnt (and the
     agent's count of failures against the limits it lowered) or v2's memory.events max and
     high counts.
  2. Throughput: dd's MiB/s, median of the reps.
  3. Anonymous burst: a helper in the cgroup maps and touches 15% of the limit of anonymous
     memory on command and reports how long that took, with the cache empty (v1
     memory.force_empty, v2 memory.reclaim) and right after dd streamed 2x the limit. Without
     the agent a full cgroup sits at its limit and every page of the burst waits in direct
     reclaim; with it there is room between the throttle and the limit.

Prints a table with ratios (with agent / without; full / empty). Exit 0 on success, 2 on bad
usage, 1 without root or a memory hierarchy.
"""

import argparse
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
from reclaim_testlib import MiB, MemCgroup, dd_argv, disk_tmpdir, v1_available  # noqa: E402
from benchjson import BenchJson  # noqa: E402

V2_ROOT = "/sys/fs/cgroup"

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


def v2_available():
    try:
        return "memory" in open(os.path.join(V2_ROOT, "cgroup.controllers")).read().split()
    except OSError:
        return False


def usage_file(g):
    return os.path.join(g.dir, "memory.usage_in_bytes" if g.version == 1 else "memory.current")


def events(g):
    """v2 memory.events as a dict ({} on v1)."""
    if g.version == 1:
        return {}
    return {k: int(v) for k, v in (line.split() for line in g.read("memory.events").splitlines())}


def empty_cache(g):
    if g.version == 1:
        g.write("memory.force_empty", "0")
        return
    try:
        g.write("memory.reclaim", str(g.limit()))
    except OSError:
        pass  # EAGAIN: it took what it could


class Sampler(threading.Thread):
    """Reads the usage every ~0.5 ms; collects excursions at/above high."""

    def __init__(self, cg, high):
        super().__init__(daemon=True)
        self.path = usage_file(cg)
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
    def __init__(self, args, version):
        self.args = args
        self.version = version
        self.cgroups = []
        self.agents = []
        self.dir = tempfile.mkdtemp(prefix="pinion-reclaim-bench-", dir=disk_tmpdir())
        self.high = args.limit * args.high // 100
        self.n = 0

    def cgroup(self):
        self.n += 1
        name = "/pinion-bench-%d-%d" % (os.getpid(), self.n)
        g = MemCgroup(name) if self.version == 1 else MemCgroup(name, version=2, root=V2_ROOT)
        self.cgroups.append(g)
        return g.create(self.args.limit)

    def agent(self, g):
        a = pinion_testlib.Agent(config={
            "agent": {"log-level": "debug"},
            "reclaim.bench": {"cgroup": g.name, "high": "%d%%" % self.args.high,
                              "target": "%d%%" % self.args.target, "min-file": self.args.min_file,
                              "interval": "1h"}})
        self.agents.append(a)
        a.start()
        pinion_testlib.wait_until(lambda: a.get_json("/v1/reclaim")["targets"][0]["state"] == "ok")
        return a

    def dd(self, g, total, tag):
        """dd bs=1M of total bytes into a new file in g; the file goes afterwards. MiB/s."""
        path = os.path.join(self.dir, tag)
        p = g.run(dd_argv(path, total), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise RuntimeError("dd failed: %s" % err)
        os.unlink(path)
        # "268435456 bytes (268 MB, 256 MiB) copied, 0.23 s, 1.2 GB/s"
        m = re.search(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s,", err, re.M)
        return int(m.group(1)) / MiB / float(m.group(2))

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
                res[name]["rates"].append(self.dd(g, self.args.stream_factor * self.args.limit, "%s%d" % (name, i)))
        for name, g in (("off", off), ("on", on)):
            samplers[name].stop_flag = True
            samplers[name].join()
            res[name].update({"excursions": samplers[name].excursions, "peak": g.peak(),
                              "failcnt": g.failcnt(), "events": events(g)})
        res["on"]["target"] = a.get_json("/v1/reclaim")["targets"][0]
        res["on"]["agent_ms"] = [float(x) for x in re.findall(
            r"episode done after \d+ steps, \d+ bytes in ([0-9.]+) ms", a.log_text())]
        a.stop()
        res["off"]["cap_after"] = off.limit() if self.version == 1 else off.read("memory.high").strip()
        res["on"]["cap_after"] = on.limit() if self.version == 1 else on.read("memory.high").strip()
        off.remove()
        on.remove()
        return res["off"], res["on"]

    # --- 3 ---

    def burst(self):
        """Per rep and per cgroup (alternating): the burst with the cache empty, and right after
        dd streamed 2x the limit."""
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
            res[name] = {"empty": [], "full": []}

        def one(name):
            h = helpers[name]
            h.stdin.write("go\n")
            h.stdin.flush()
            return float(h.stdout.readline())
        for i in range(self.args.reps):
            order = (("off", off), ("on", on)) if i % 2 == 0 else (("on", on), ("off", off))
            for name, g in order:
                empty_cache(g)
                res[name]["empty"].append(one(name))
                # The file stays until the burst is measured: deleting it would drop its cache.
                path = os.path.join(self.dir, "b%s%d" % (name, i))
                p = g.run(dd_argv(path, 2 * self.args.limit), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if p.wait(900) != 0:
                    raise RuntimeError("dd failed")
                res[name]["full"].append(one(name))
                os.unlink(path)
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
    ap.add_argument("--high", type=int, default=90)
    ap.add_argument("--target", type=int, default=70)
    ap.add_argument("--min-file", default="16M")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--stream-factor", type=int, default=4)
    ap.add_argument("--md", help="also write the table here")
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    args = ap.parse_args()
    if not 0 < args.target < args.high <= 100 or args.reps < 1:
        ap.error("need 0 < target < high <= 100 and reps >= 1")
    if os.geteuid() != 0 or not (v1_available() or v2_available()):
        print("reclaim-bench: needs root and a memory cgroup hierarchy (v1 or v2)", file=sys.stderr)
        return 1
    version = 1 if v1_available() else 2
    if version == 1:
        bj = BenchJson("reclaim", "Page cache reclaim in a v1 memory cgroup, dd at full speed, with and without the agent")
    else:
        bj = BenchJson("reclaim-v2", "Page cache reclaim in a v2 memory cgroup (the VM guest: Debian 12, kernel %s, "
                       "QEMU TCG), dd at full speed, with and without the agent" % os.uname().release)
    b = Bench(args, version)

    def on_signal(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    try:
        off, on = b.reaction_and_throughput()
        boff, bon = b.burst()
    finally:
        b.cleanup()

    L, H = args.limit, b.high
    goal_peak = L * 95 // 100
    peak_file = "memory.max_usage_in_bytes" if version == 1 else "memory.peak"
    ms = lambda v: "%.2f ms" % (v * 1000)  # noqa: E731
    rows = []
    rows.append(("setup", "cgroup v%d, limit %d MiB, high %d%% (%d MiB), target %d%%, min-file %s, dd bs=1M of %dx "
                 "the limit, %d reps" % (version, L // MiB, args.high, H // MiB, args.target, args.min_file,
                                         args.stream_factor, args.reps), "", ""))
    rows.append(("peak usage (%s)" % peak_file, "%.1f MiB (%.1f%%)" % (off["peak"] / MiB, 100.0 * off["peak"] / L),
                 "%.1f MiB (%.1f%%)" % (on["peak"] / MiB, 100.0 * on["peak"] / L), "%.2f" % (on["peak"] / off["peak"])))
    rows.append(("original limit reached", "yes" if off["peak"] >= L - MiB else "no",
                 "yes" if on["peak"] >= L - MiB else "no", ""))
    if version == 1:
        rows.append(("failcnt", str(off["failcnt"]), "%d (all %d against limits the agent lowered)" % (
            on["failcnt"], on["target"]["lowered_limit_hits"]), ""))
    else:
        rows.append(("memory.events max", str(off["events"]["max"]), str(on["events"]["max"]), ""))
        rows.append(("memory.events high", str(off["events"]["high"]), str(on["events"]["high"]), ""))
    rows.append(("agent wake-ups by source", "", ", ".join("%s %d" % kv for kv in on["target"]["wakeups"].items() if kv[1]), ""))
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
    rows.append(("writer throughput (dd, median)", "%.0f MiB/s" % mo, "%.0f MiB/s" % mn, "%.2f" % (mn / mo)))
    eo, fo = statistics.median(boff["empty"]), statistics.median(boff["full"])
    en, fn = statistics.median(bon["empty"]), statistics.median(bon["full"])
    rows.append(("anon burst 15%% (%d MiB), cache empty, median" % (L * 15 // 100 // MiB), ms(eo), ms(en), "%.2f" % (en / eo)))
    rows.append(("anon burst, cache full (right after dd), median", ms(fo), ms(fn), "%.2f" % (fn / fo)))
    rows.append(("anon burst, cache full, p90", ms(pct(boff["full"], 90)), ms(pct(bon["full"], 90)),
                 "%.2f" % (pct(bon["full"], 90) / pct(boff["full"], 90))))
    rows.append(("full / empty (1.0 = no stall)", "%.2f" % (fo / eo), "%.2f" % (fn / en), ""))

    lines = ["| measure | without agent | with agent | ratio (with / without) |", "|---|---|---|---|"]
    lines += ["| %s | %s | %s | %s |" % r for r in rows]
    goals = [
        ("peak at or under 95%% of the limit (dd of %dx the limit)" % args.stream_factor, on["peak"] <= goal_peak),
        ("original limit never reached", on["peak"] < L - MiB),
        ("reaction p99 < 100 ms (sampler)", bool(on["excursions"]) and pct(on["excursions"], 99) < 0.1),
        ("anon burst with the cache full no slower than with it empty (median, 10% noise)", fn <= en * 1.10),
    ]
    lines.append("")
    lines += ["- goal: %s: %s" % (g, "met" if ok else "NOT met") for g, ok in goals]
    lines.append("- the cap after the agent stopped: %s (without agent: %s)" % (on["cap_after"], off["cap_after"]))
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    write_json(bj, args, version, off, on, boff, bon, goals)
    return 0


def write_json(bj, args, version, off, on, boff, bon, goals):
    """The figures in the common schema: pinion is the cgroup with the agent, the peer the same
    workload in the same run without it."""
    if not args.json:
        return
    MiBf = lambda v: round(v / MiB, 2)  # noqa: E731
    msf = lambda v: round(v * 1000, 3)  # noqa: E731
    peer = "same cgroup, no agent"
    L = args.limit
    bj.row("peak usage (%s), limit %d MiB" % ("max_usage_in_bytes" if version == 1 else "memory.peak", L // MiB),
           MiBf(on["peak"]), MiBf(off["peak"]), peer, "MiB", goal="<= 95%% of the limit (%.1f MiB)" % (L * 0.95 / MiB),
           met=on["peak"] <= L * 95 // 100)
    bj.row("peak, percent of the limit", round(100.0 * on["peak"] / L, 1), round(100.0 * off["peak"] / L, 1), peer, "%")
    if version == 1:
        bj.row("failcnt", on["failcnt"], off["failcnt"], peer, "")
    else:
        bj.row("memory.events max", on["events"]["max"], off["events"]["max"], peer, "")
        bj.row("memory.events high", on["events"]["high"], off["events"]["high"], peer, "")
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
    bj.row("writer throughput (dd, median)", round(statistics.median(on["rates"]), 1),
           round(statistics.median(off["rates"]), 1), peer, "MiB/s")
    bj.row("anon burst 15%, cache full (median)", msf(statistics.median(bon["full"])),
           msf(statistics.median(boff["full"])), peer, "ms")
    en, fn = statistics.median(bon["empty"]), statistics.median(bon["full"])
    bj.row("anon burst with the agent: cache full / cache empty (median)", None, None, "", "",
           goal="<= 1.10", met=fn <= en * 1.10, ratio=fn / en)
    if not off["excursions"]:
        bj.note("Without the agent the usage never came back below high until the files were deleted "
                "(no excursion to time).")
    bj.note("Wake-ups of the agent by source: %s." % ", ".join(
        "%s %d" % kv for kv in on["target"]["wakeups"].items() if kv[1]))
    bj.note("Settings: high %d%%, target %d%%, min-file %s; dd bs=1M of %dx the limit, %d reps alternating between "
            "the two cgroups; goals: %s." % (
                args.high, args.target, args.min_file, args.stream_factor, args.reps,
                "; ".join("%s: %s" % (g, "met" if ok else "NOT met") for g, ok in goals)))
    bj.series("writer throughput per rep", "rep", "MiB/s",
              [("with agent", range(1, len(on["rates"]) + 1), on["rates"]),
               ("without agent", range(1, len(off["rates"]) + 1), off["rates"])])
    bj.write(args.json)


if __name__ == "__main__":
    sys.exit(main())
