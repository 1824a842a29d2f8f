#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""reclaim-bench: what the reclaim module buys a workload in a real memory cgroup — v1 on the
build host, v2 on the VM suite's guest — measured against the same workload without the agent,
in the same run.

    tests/bench/reclaim-bench.py [--limit 64M] [--high 90] [--target 70] [--min-file 16M]
                                 [--reps 10] [--stream-factor 4] [--burst 25] [--step 32M]
                                 [--md FILE] [--json FILE]
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
  2. Throughput and what the stream costs: dd's MiB/s (median of the reps); the cgroup's
     memory.pressure "some" during each dd — the growth of its `total` (µs) over dd's wall time,
     honest for streams shorter than avg10's 10 s window, and avg10 read at the end of the dd
     beside it. v2: the cgroup's own file; v1: per-cgroup PSI lives in the hybrid layout's
     cgroup2 mount (/sys/fs/cgroup/unified, no memory controller needed), so every workload
     process joins a twin pinion-bench-<pid>-* there too. Meanwhile a separate process (not a
     thread here: the interpreter lock would be timed too) GETs the agent's /v1/status every
     ~2 ms; its answers are filed under the dd they overlapped: while dd streams into the watched
     cgroup (episodes run) against while it streams into the other one (the same agent idle: the
     machine's own noise). The slowest is the figure (goal < 10 ms).
  3. Anonymous burst: a helper in the cgroup maps and touches --burst percent (25) of the limit
     of anonymous memory on command and reports how long that took, with the cache empty (v1
     memory.force_empty, v2 memory.reclaim) and the moment a co-located dd that streamed 2x the
     limit exits (its cache full, partly dirty; the usage then is printed too). Goal with the
     agent: full <= 1.1x empty.

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
from agentsocket import unix_get  # noqa: E402

V2_ROOT = "/sys/fs/cgroup"
# v1 hosts with the hybrid layout: per-cgroup PSI (memory.pressure) in any cgroup2 directory,
# even without the memory controller there.
UNIFIED = "/sys/fs/cgroup/unified"

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


def psi_dir(g):
    """Where the cgroup's memory.pressure is: v2 the cgroup itself, v1 a matching directory in
    the hybrid cgroup2 mount (the workload joins both), None without one."""
    if g.version == 2:
        return g.dir
    if os.path.exists(os.path.join(UNIFIED, "cgroup.procs")) and os.path.exists(os.path.join(UNIFIED, "memory.pressure")):
        return UNIFIED + g.name
    return None


def read_psi(d):
    """memory.pressure "some" as (avg10 in %, total in µs); None without PSI."""
    if d is None:
        return None
    try:
        with open(os.path.join(d, "memory.pressure")) as f:
            line = f.readline().split()
    except OSError:
        return None
    kv = dict(x.split("=") for x in line[1:])
    return float(kv["avg10"]), int(kv["total"])


def run_in(g, argv, **kw):
    """argv inside g (and on v1 in its cgroup2 twin, for PSI): it joins before exec."""
    dirs = [g.dir] + ([g.psi] if g.version == 1 and g.psi else [])

    def join():
        for d in dirs:
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    p = subprocess.Popen(argv, preexec_fn=join, **kw)
    g.procs.append(p)
    return p


# GET /v1/status on the agent's socket every ~2 ms until stdin closes; prints one line per
# answer: "<CLOCK_MONOTONIC seconds at the start> <latency seconds> <HTTP status>". A process of
# its own: in this one the sampler thread's hold on the interpreter would be timed too.
STATUS_POLLER = r"""
import sys, time
import threading
sys.path.insert(0, sys.argv[2])
from agentsocket import unix_get
done = []
threading.Thread(target=lambda: (sys.stdin.read(), done.append(1)), daemon=True).start()
out = []
while not done:
    t0 = time.monotonic()
    try:
        st, _ = unix_get(sys.argv[1], "/v1/status")
    except OSError:
        st = 0
    out.append("%.6f %.6f %d" % (t0, time.monotonic() - t0, st))
    time.sleep(0.002)
sys.stdout.write("\n".join(out) + "\n")
"""


class StatusPoller:
    """The poller process; finish() files each answer under the dd stream it overlapped
    (one that began and ended inside the stream's [start, end])."""

    def __init__(self, socket_path):
        self.p = subprocess.Popen([sys.executable, "-c", STATUS_POLLER, socket_path, HERE],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.windows = {"on": [], "off": []}

    def window(self, name, t0, t1):
        self.windows[name].append((t0, t1))

    def finish(self):
        out, _ = self.p.communicate("", timeout=60)
        answers = [(float(a), float(b), int(c)) for a, b, c in (line.split() for line in out.splitlines() if line)]
        lat = {"on": [], "off": []}
        errors = sum(1 for _, _, st in answers if st != 200)
        for name, ws in self.windows.items():
            for t0, t1 in ws:
                lat[name] += [d for s, d, st in answers if st == 200 and s >= t0 and s + d <= t1]
        return lat, errors


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
        g.create(self.args.limit)
        g.psi = psi_dir(g)
        if g.version == 1 and g.psi:
            os.makedirs(g.psi, exist_ok=True)
        return g

    def remove(self, g):
        g.remove()
        if g.version == 1 and g.psi:
            try:
                os.rmdir(g.psi)
            except FileNotFoundError:
                pass

    def agent(self, g):
        a = pinion_testlib.Agent(config={
            "agent": {"log-level": "debug"},
            "reclaim.bench": {"cgroup": g.name, "high": "%d%%" % self.args.high,
                              "target": "%d%%" % self.args.target, "min-file": self.args.min_file,
                              "interval": "1h", **({"step": self.args.step} if self.args.step else {})}})
        self.agents.append(a)
        a.start()
        pinion_testlib.wait_until(lambda: a.get_json("/v1/reclaim")["targets"][0]["state"] == "ok")
        return a

    def dd(self, g, total, tag):
        """dd bs=1M of total bytes into a new file in g; the file goes afterwards. MiB/s."""
        path = os.path.join(self.dir, tag)
        p = run_in(g, dd_argv(path, total), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
            self.remove(g)
        subprocess.run(["rm", "-rf", self.dir])

    # --- 1 + 2 ---

    def reaction_and_throughput(self):
        """Two cgroups, one watched by an agent; the reps alternate between them (and which
        goes first), so both see the same background load. Per dd: its MiB/s, the cgroup's
        memory.pressure some (total's growth over dd's wall time; avg10 at its end), and the
        agent's /v1/status answers meanwhile."""
        off, on = self.cgroup(), self.cgroup()
        a = self.agent(on)
        poller = StatusPoller(a.socket)
        res = {}
        samplers = {}
        for name, g in (("off", off), ("on", on)):
            g.reset_peak()
            samplers[name] = Sampler(g, self.high)
            samplers[name].start()
            res[name] = {"rates": [], "stall_us": 0, "wall": 0.0, "avg10": [], "psi": g.psi is not None}
        for i in range(self.args.reps):
            order = (("off", off), ("on", on)) if i % 2 == 0 else (("on", on), ("off", off))
            for name, g in order:
                p0, t0 = read_psi(g.psi), time.monotonic()
                res[name]["rates"].append(self.dd(g, self.args.stream_factor * self.args.limit, "%s%d" % (name, i)))
                p1, t1 = read_psi(g.psi), time.monotonic()
                poller.window(name, t0, t1)
                res[name]["wall"] += t1 - t0
                if p0 and p1:
                    res[name]["stall_us"] += p1[1] - p0[1]
                    res[name]["avg10"].append(p1[0])
        lat, status_errors = poller.finish()
        for name, g in (("off", off), ("on", on)):
            samplers[name].stop_flag = True
            samplers[name].join()
            res[name].update({"excursions": samplers[name].excursions, "peak": g.peak(),
                              "failcnt": g.failcnt(), "events": events(g), "status": lat[name]})
        res["on"]["status_errors"] = status_errors
        res["on"]["target"] = a.get_json("/v1/reclaim")["targets"][0]
        res["on"]["agent_ms"] = [float(x) for x in re.findall(
            r"episode done after \d+ steps, \d+ bytes in ([0-9.]+) ms", a.log_text())]
        a.stop()
        res["off"]["cap_after"] = off.limit() if self.version == 1 else off.read("memory.high").strip()
        res["on"]["cap_after"] = on.limit() if self.version == 1 else on.read("memory.high").strip()
        self.remove(off)
        self.remove(on)
        return res["off"], res["on"]

    # --- 3 ---

    def burst(self):
        """Per rep and per cgroup (alternating): the burst with the cache empty, and right after
        a co-located dd streamed 2x the limit (the burst is asked for the moment dd exits)."""
        size = self.args.limit * self.args.burst // 100
        off, on = self.cgroup(), self.cgroup()
        a = self.agent(on)
        helpers = {}
        res = {}
        for name, g in (("off", off), ("on", on)):
            h = run_in(g, [sys.executable, "-c", BURST_HELPER, str(size)], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, text=True)
            assert h.stdout.readline().strip() == "ready"
            helpers[name] = h
            res[name] = {"empty": [], "full": [], "usage_before": []}

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
                p = run_in(g, dd_argv(path, 2 * self.args.limit), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if p.wait(900) != 0:
                    raise RuntimeError("dd failed")
                res[name]["usage_before"].append(int(open(usage_file(g)).read()))
                res[name]["full"].append(one(name))
                os.unlink(path)
        for h in helpers.values():
            h.stdin.close()
            h.wait(10)
        a.stop()
        self.remove(off)
        self.remove(on)
        return res["off"], res["on"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=parse_size, default=64 * MiB)
    ap.add_argument("--high", type=int, default=90)
    ap.add_argument("--target", type=int, default=70)
    ap.add_argument("--min-file", default="16M")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--stream-factor", type=int, default=4)
    ap.add_argument("--step", help="the agent's step= (default: the agent's default)")
    ap.add_argument("--burst", type=int, default=25, help="the anonymous burst, percent of the limit")
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
    rows.append(("longest reclaim write (on the step thread)", "", ms(on["target"]["max_step_seconds"]), ""))
    mo, mn = statistics.median(off["rates"]), statistics.median(on["rates"])
    rows.append(("writer throughput (dd, median)", "%.0f MiB/s" % mo, "%.0f MiB/s" % mn, "%.2f" % (mn / mo)))
    po, pn = psi_share(off), psi_share(on)
    if pn is not None:
        rows.append(("memory.pressure some during dd (total's growth / dd's wall time)", "%.2f%%" % po, "%.2f%%" % pn,
                     "%.2f" % (pn / po) if po else ""))
        rows.append(("memory.pressure some avg10 at the end of a dd, max", "%.2f%%" % max(off["avg10"]),
                     "%.2f%%" % max(on["avg10"]), ""))
    so, sn = status_max(off), status_max(on)
    rows.append(("slowest /v1/status while dd streams (agent in episodes: with; idle: without)",
                 "%.2f ms (%d answers)" % (so * 1000, len(off["status"])), "%.2f ms (%d answers)" % (sn * 1000, len(on["status"])), ""))
    rows.append(("/v1/status p99 while dd streams", ms(pct(off["status"], 99)), ms(pct(on["status"], 99)), ""))
    eo, fo = statistics.median(boff["empty"]), statistics.median(boff["full"])
    en, fn = statistics.median(bon["empty"]), statistics.median(bon["full"])
    bl = "anon burst %d%% (%d MiB)" % (args.burst, L * args.burst // 100 // MiB)
    rows.append(("%s, cache empty, median" % bl, ms(eo), ms(en), "%.2f" % (en / eo)))
    rows.append(("%s, cache full (the moment dd exits), median" % bl, ms(fo), ms(fn), "%.2f" % (fn / fo)))
    rows.append(("usage when the burst starts, cache full, median", "%.1f MiB" % (statistics.median(boff["usage_before"]) / MiB),
                 "%.1f MiB" % (statistics.median(bon["usage_before"]) / MiB), ""))
    rows.append(("anon burst, cache full, p90", ms(pct(boff["full"], 90)), ms(pct(bon["full"], 90)),
                 "%.2f" % (pct(bon["full"], 90) / pct(boff["full"], 90))))
    rows.append(("full / empty (1.0 = no stall)", "%.2f" % (fo / eo), "%.2f" % (fn / en), ""))

    lines = ["| measure | without agent | with agent | ratio (with / without) |", "|---|---|---|---|"]
    lines += ["| %s | %s | %s | %s |" % r for r in rows]
    goals = [
        ("peak at or under 95%% of the limit (dd of %dx the limit)" % args.stream_factor, on["peak"] <= goal_peak),
        ("original limit never reached", on["peak"] < L - MiB),
        ("reaction p99 < 100 ms (sampler)", bool(on["excursions"]) and pct(on["excursions"], 99) < 0.1),
        ("anon burst with the cache full <= 1.1x of it with the cache empty (median)", fn <= en * 1.10),
        ("dd throughput >= 0.9x of no agent (median)", mn >= 0.9 * mo),
        ("slowest /v1/status while episodes run < 10 ms", bool(on["status"]) and sn < 0.010),
    ]
    if pn is not None:
        goals.append(("memory.pressure some during dd < 1% and below no agent", pn < 1.0 and pn <= po))
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


def psi_share(r):
    """memory.pressure some during the dd streams, percent of their wall time (None: no PSI)."""
    if not r["psi"] or not r["wall"]:
        return None
    return 100.0 * r["stall_us"] / 1e6 / r["wall"]


def status_max(r):
    return max(r["status"]) if r["status"] else float("nan")


def ms_or_none(v):
    """ms for the JSON; None for a figure there was nothing to measure for (NaN is no JSON)."""
    return None if v != v else round(v * 1000, 3)


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
    mo, mn = statistics.median(off["rates"]), statistics.median(on["rates"])
    bj.row("writer throughput (dd, median), with / without", round(mn, 1), round(mo, 1), peer, "MiB/s",
           goal=">= 0.9", met=mn >= 0.9 * mo)
    po, pn = psi_share(off), psi_share(on)
    if pn is not None:
        bj.row("memory.pressure some during dd (total µs growth / wall time)", round(pn, 3), round(po, 3), peer, "%",
               goal="< 1% and below no agent", met=pn < 1.0 and pn <= po)
        bj.row("memory.pressure some avg10 at the end of a dd (max)", max(on["avg10"]), max(off["avg10"]), peer, "%")
    sn = status_max(on)
    bj.row("slowest /v1/status while dd streams (episodes run) vs while it streams elsewhere",
           ms_or_none(sn), ms_or_none(status_max(off)), "same agent, idle target", "ms", goal="< 10 ms",
           met=bool(on["status"]) and sn < 0.010)
    bj.row("/v1/status p99 while dd streams (episodes run) vs while it streams elsewhere",
           ms_or_none(pct(on["status"], 99)), ms_or_none(pct(off["status"], 99)), "same agent, idle target", "ms")
    bj.row("longest reclaim write (on the step thread, not the loop)", msf(on["target"]["max_step_seconds"]), unit="ms")
    bl = "anon burst %d%%" % args.burst
    bj.row("%s, cache empty (median)" % bl, msf(statistics.median(bon["empty"])),
           msf(statistics.median(boff["empty"])), peer, "ms")
    bj.row("%s, cache full (median)" % bl, msf(statistics.median(bon["full"])),
           msf(statistics.median(boff["full"])), peer, "ms")
    en, fn = statistics.median(bon["empty"]), statistics.median(bon["full"])
    eo, fo = statistics.median(boff["empty"]), statistics.median(boff["full"])
    bj.row("%s: cache full / cache empty (median)" % bl, round(fn / en, 3), round(fo / eo, 3), peer, "",
           goal="<= 1.10", met=fn <= en * 1.10)
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
