#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""zkreg-bench: register N endpoints (default 5,000) in one real ZooKeeper server with piniond
and, in the same run against the same server, with kazoo's async client; then measure the
time from a pod becoming ready to its znode being visible to another client.

    tests/bench/zkreg-bench.py [--endpoints 5000] [--samples 200] [--md FILE]
    make bench-zkreg               # in the build directory; BENCH_ZKREG_FLAGS='--endpoints 1000'

The runs
  kazoo    KazooClient.create_async() of N EPHEMERAL_SEQUENTIAL "member_" nodes with the same
           ServerSet JSON pinion writes (one per endpoint), all submitted at once, then every
           result awaited: the async client at its best (pipelined on one session).
  pinion   one piniond with N static pods (--bulk-source pods-dir, the default: N Pod files in
           its pods-dir, each Ready with pinion.io/serverset, read at start before the modules
           run) or N pods of this node in the test apiserver (--bulk-source apiserver: the agent
           lists them in pages of 500 from the Python emulator, which then paces the run).
           [zookeeper] write-qps is raised to 1e6 for the run (the default 50/s is a safety
           limit, not a speed).
  Throughput is measured the same way for both, by the server: the ctime of the first and the
  last member created (ZooKeeper's own clock, ms) — so neither side's start-up counts. The
  pinion run's end-to-end time (process start → all N visible to kazoo, polled every 10 ms) is reported beside it.

Ready-to-visible latency
  --samples pods exist from the start with Ready=False. One at a time, the test apiserver flips
  one to Ready=True (t0: just before the change is published on its watch); a kazoo
  ChildrenWatch on the path (a second client) notes when the new member appears (t1). The
  latency is t1 - t0: the apiserver watch event, the agent's pod store, the registration, the
  create, and the watch notification back to kazoo with its get_children. The same through
  pods-dir (a static pod file rewritten with Ready=True) is reported too: pods-dir coalesces
  bursts of file events for 100 ms before it rescans (agent/podsdir.c), which bounds it below.

Exit status 0 when every run completed (whatever the numbers), 1 otherwise.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("PINION_SRCDIR") or os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRCDIR, "tests", "integration"))
sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))

import pinion_testlib as t  # noqa: E402
import zkreg_testlib as zt  # noqa: E402
from kube_apiserver import FakeApiserver, make_pod  # noqa: E402
from benchjson import BenchJson  # noqa: E402

NODE = "bench-node"
TOKEN = "bench-token"


def member_json(ip, port=8080):
    return json.dumps({"serviceEndpoint": {"host": ip, "port": port}, "additionalEndpoints": {},
                       "status": "ALIVE"}, separators=(",", ":")).encode()


def ip_of(i, net=10):
    return f"{net}.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def ctime_span(kz, path):
    stats = []
    for c in kz.get_children(path):
        _, s = kz.get(f"{path}/{c}")
        stats.append(s.ctime)
    return (max(stats) - min(stats)) / 1000.0, len(stats)


def percentile(v, p):
    v = sorted(v)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    f = int(k)
    c = min(f + 1, len(v) - 1)
    return v[f] + (v[c] - v[f]) * (k - f)


def run_kazoo(kz, n):
    from kazoo.protocol.states import ZnodeStat  # noqa: F401
    path = "/bench/kazoo"
    kz.ensure_path(path)
    datas = [member_json(ip_of(i, 11)) for i in range(n)]
    t0 = time.monotonic()
    results = [kz.create_async(path + "/member_", d, ephemeral=True, sequence=True) for d in datas]
    for r in results:
        r.get(timeout=120)
    wall = time.monotonic() - t0
    span, count = ctime_span(kz, path)
    assert count == n, (count, n)
    return wall, span


def wait_children(kz, path, n, timeout, period=0.01):
    """Polls the path's child count (one stat read) until it reaches n; the monotonic time it
    was first seen there, or None. Used for the bulk run instead of a ChildrenWatch: a watch
    re-reads the whole child list after every create (thousands of lists of up to n names),
    which loads the server and this process while pinion creates, and the kazoo run has no
    such observer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stat = kz.exists(path)
        if stat and stat.numChildren >= n:
            return time.monotonic()
        time.sleep(period)
    return None


class Watcher:
    """A ChildrenWatch on path that records when each new child shows up (for the latency
    samples: one new child at a time)."""

    def __init__(self, kz, path):
        self.seen = {}
        self.cond = threading.Condition()
        kz.ensure_path(path)
        kz.ChildrenWatch(path, self._on)

    def _on(self, children):
        now = time.monotonic()
        with self.cond:
            for c in children:
                self.seen.setdefault(c, now)
            self.count = len(children)
            self.cond.notify_all()

    def wait_count(self, n, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while getattr(self, "count", 0) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)
            return max(self.seen.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--endpoints", type=int, default=5000)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--podsdir-samples", type=int, default=50)
    ap.add_argument("--bulk-source", choices=["pods-dir", "apiserver"], default="pods-dir")
    ap.add_argument("--md", help="also write the table here")
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    args = ap.parse_args()
    bj = BenchJson("zkreg", "ZooKeeper registration: pinion against kazoo's async client")
    n, m = args.endpoints, args.samples

    if not zt.zookeeper_available():
        print("zkreg-bench: zookeeper is not installed", file=sys.stderr)
        return 1
    zk = zt.ZkStandalone(max_session_ms=60000).start()
    fake = FakeApiserver(token=TOKEN).start()
    tmp = tempfile.mkdtemp(prefix="zkreg-bench-")
    kz = kz2 = agent = None
    try:
        kz = zt.kazoo_client(zk.hosts, timeout=30)
        kz2 = zt.kazoo_client(zk.hosts, timeout=30)

        # --- kazoo async ---
        kwall, kspan = run_kazoo(kz2, n)
        kz2.stop()
        kz2.close()
        kz2 = None
        print(f"kazoo:  {n} creates, submit→all acked {kwall:.3f}s, server ctime span {kspan:.3f}s", flush=True)

        # --- pinion: N ready pods + M latency pods (not ready yet) from the test apiserver ---
        if args.bulk_source == "apiserver":
            for i in range(n):
                fake.add_pod(make_pod(f"bench-{i:05d}", node=NODE, ip=ip_of(i),
                                      annotations={"pinion.io/serverset": "/bench/pinion"}))
        for i in range(m):
            fake.add_pod(make_pod(f"lat-{i:04d}", node=NODE, ip=ip_of(i, 12), ready=False,
                                  annotations={"pinion.io/serverset": "/bench/lat"}))
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        kz.ensure_path("/bench/pinion")
        wl = Watcher(kz, "/bench/lat")
        wp = Watcher(kz, "/bench/podsdir")
        agent = t.Agent(config={
            "agent": {"log-level": "info"},
            "apiserver": {"url": fake.url, "token-file": token_file},
            "zookeeper": {"servers": zk.hosts, "write-qps": "1000000", "session-timeout": "30s"},
        }, node_name=NODE)
        if args.bulk_source == "pods-dir":
            for i in range(n):
                name = f"bench-{i:05d}"
                agent.write_pod(name, t.make_pod(name, ip=ip_of(i),
                                                 annotations={"pinion.io/serverset": "/bench/pinion"}))
        t0 = time.monotonic()
        agent.start(timeout=60)
        last = wait_children(kz, "/bench/pinion", n, 300)
        if last is None:
            raise RuntimeError(f"pinion registered only {kz.exists('/bench/pinion').numChildren} of {n}")
        e2e = last - t0
        pspan, count = ctime_span(kz, "/bench/pinion")
        assert count == n, (count, n)
        print(f"pinion: {n} creates, server ctime span {pspan:.3f}s, process start→all visible {e2e:.3f}s",
              flush=True)

        # --- ready → visible, through the apiserver watch ---
        lat = []
        for i in range(m):
            before = len(wl.seen)
            pod = make_pod(f"lat-{i:04d}", node=NODE, ip=ip_of(i, 12), ready=True,
                           annotations={"pinion.io/serverset": "/bench/lat"})
            ts = time.monotonic()
            fake.update_pod(pod)
            if wl.wait_count(before + 1, 10) is None:
                raise RuntimeError(f"latency pod {i} never appeared")
            with wl.cond:
                newest = max(wl.seen.values())
            lat.append(newest - ts)
            time.sleep(0.01)

        # --- ready → visible, through pods-dir (static pods) ---
        plat = []
        for i in range(args.podsdir_samples):
            name = f"static-{i:04d}"
            agent.write_pod(name, t.make_pod(name, ip=ip_of(i, 13), conditions={"Ready": False},
                                             annotations={"pinion.io/serverset": "/bench/podsdir"}))
        time.sleep(0.5)
        for i in range(args.podsdir_samples):
            name = f"static-{i:04d}"
            before = len(wp.seen)
            ts = time.monotonic()
            agent.write_pod(name, t.make_pod(name, ip=ip_of(i, 13), conditions={"Ready": True},
                                             annotations={"pinion.io/serverset": "/bench/podsdir"}))
            if wp.wait_count(before + 1, 10) is None:
                raise RuntimeError(f"pods-dir pod {i} never appeared")
            with wp.cond:
                plat.append(max(wp.seen.values()) - ts)
            time.sleep(0.02)

        metrics = agent.metrics()
        dup = len(kz.get_children("/bench/pinion")) - n
        rc = agent.sigterm(timeout=60)
        agent.assert_exit(rc, 0)
    finally:
        if agent:
            agent.close()
        for c in (kz, kz2):
            if c:
                c.stop()
                c.close()
        fake.stop()
        zk.close()
        shutil.rmtree(tmp, ignore_errors=True)

    krate, prate = n / max(kspan, 1e-3), n / max(pspan, 1e-3)
    rows = [
        ("endpoints", f"{n}", f"pinion's pods from {args.bulk_source}"),
        ("kazoo async: creates/s (server ctime span)", f"{krate:,.0f}", f"{kspan:.3f} s"),
        ("kazoo async: submit → all acked", f"{kwall:.3f} s", f"{n / kwall:,.0f}/s"),
        ("pinion: creates/s (server ctime span)", f"{prate:,.0f}", f"{pspan:.3f} s"),
        ("pinion: process start → all visible", f"{e2e:.3f} s", f"{n / e2e:,.0f}/s end to end"),
        ("ratio pinion / kazoo (throughput)", f"{prate / krate:.2f}x", "goal ≥ 2x"),
        ("duplicates", f"{dup}", ""),
        (f"ready→visible via apiserver watch, p50 ({m} samples)", f"{statistics.median(lat) * 1000:.1f} ms", ""),
        ("ready→visible via apiserver watch, p99", f"{percentile(lat, 99) * 1000:.1f} ms", "goal < 50 ms"),
        ("ready→visible via apiserver watch, max", f"{max(lat) * 1000:.1f} ms", ""),
        (f"ready→visible via pods-dir, p50 ({len(plat)} samples)", f"{statistics.median(plat) * 1000:.1f} ms",
         "includes the 100 ms pods-dir debounce"),
        ("ready→visible via pods-dir, p99", f"{percentile(plat, 99) * 1000:.1f} ms", ""),
        ("ZooKeeper creates by the agent (ok)",
         f"{metrics.value('pinion_zookeeper_operations_total', op='create', result='ok'):.0f}", ""),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = ["| measure | value | note |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]
    print()
    for a, b, c in rows:
        print(f"{a:<{w0}}  {b:>{w1}}  {c}")
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(lines) + "\n")
    p99 = percentile(lat, 99) * 1000
    bj.row("%d endpoints, creates/s (server ctime span)" % n, round(prate), round(krate), "kazoo async client", "/s",
           goal="ratio >= 2", met=prate / krate >= 2)
    bj.row("process start → all %d visible" % n, round(e2e, 3), round(kwall, 3), "kazoo: submit → all acked", "s")
    bj.row("duplicate members", dup, unit="", goal="0", met=dup == 0)
    bj.row("ready → visible via apiserver watch, p50 (%d samples)" % m, round(statistics.median(lat) * 1000, 2),
           unit="ms")
    bj.row("ready → visible via apiserver watch, p99", round(p99, 2), unit="ms", goal="< 50 ms", met=p99 < 50)
    bj.row("ready → visible via pods-dir, p50 (%d samples)" % len(plat), round(statistics.median(plat) * 1000, 1),
           unit="ms")
    bj.note("One real ZooKeeper on loopback; pinion's pods come from the %s. Throughput is measured by the "
            "server (ctime of the first and last member) for both clients. The pods-dir latency includes "
            "the core's 100 ms debounce and a rescan of the whole directory." % args.bulk_source)
    bj.series("ready → visible via the apiserver watch", "latency (ms)", "samples",
              [("pinion", [round(v * 1000, 3) for v in lat], [])], kind="hist")
    bj.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
