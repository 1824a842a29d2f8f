#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""zkreg-bench: register N endpoints (default 5,000) in one real ZooKeeper server with piniond
and, in the same run against the same server, with kazoo's async client, then remove them again;
--runs times over (default 5); then measure the time from a pod becoming ready to its znode
being visible to another client.

    tests/bench/zkreg-bench.py [--endpoints 5000] [--runs 5] [--samples 200] [--md FILE]
    make bench-zkreg               # in the build directory; BENCH_ZKREG_FLAGS='--endpoints 1000'

Each run
  kazoo    KazooClient.create_async() of N EPHEMERAL_SEQUENTIAL "member_" nodes with the same
           ServerSet JSON pinion writes (one per endpoint), all submitted at once, then every
           result awaited: the async client at its best (pipelined on one session). Then
           delete_async() of all N, the same way.
  pinion   a new piniond with N static pods (--bulk-source pods-dir, the default: N Pod files in
           its pods-dir, each Ready with pinion.io/serverset, read at start before the modules
           run) or N pods of this node in the test apiserver (--bulk-source apiserver: the agent
           lists them in pages of 500 from the Python emulator, which then paces the run; its
           delete events, one per pod, pace the deletes too).
           Once all N members are there and watched (the agent's child watch on the path armed
           and its list showing every member: the steady state of pods registered a while ago),
           every pod goes away at once (the pods-dir is renamed away: a missing pods-dir has no
           pods; with --bulk-source apiserver, the pods are deleted) and the agent deletes the
           members. [zookeeper] write-qps is raised to 1e6 for the run (the default 50/s is a
           safety limit, not a speed).
  Throughput is measured the same way for both sides, by the server's clock, from the server's
  transaction log (version-2/log.*: every committed transaction with the time the server took
  it in; a multi request is one transaction for all its creates or deletes): from the first
  transaction of the phase to a fence, a node created as soon as the phase is seen complete by
  an observer: a third client, in a process of its own, that polls the path's child count (one
  stat read every millisecond) and creates the fence when the count reaches N (or 0). Both
  sides are observed the same way, so neither side's start-up counts, the last request's
  processing does, and the observer's delay is the same for both. The pinion run's end-to-end
  times (process start → all N visible, pods-dir gone → all N gone) and kazoo's (submit →
  all acked) are reported beside it. The figure each goal is judged on is
  the worst run's ratio.

Ready-to-visible latency (once, in the last run)
  --samples pods exist from the start with Ready=False. One at a time, the test apiserver flips
  one to Ready=True (t0: just before the change is published on its watch); a kazoo
  ChildrenWatch on the path (a second client) notes when the new member appears (t1). The
  latency is t1 - t0: the apiserver watch event, the agent's pod store, the registration, the
  create, and the watch notification back to kazoo with its get_children. The same through
  pods-dir (a static pod file rewritten with Ready=True) is reported too: that is the core's
  directory source (agent/pods/podsdir.c) more than zkreg.

Exit status 0 when every run completed (whatever the numbers), 1 otherwise.
"""

import argparse
import json
import multiprocessing
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


def server_phase(data_dir, parent, kind, fence_ctime):
    """The server's view of one phase: (seconds from its first transaction to the fence, nodes
    created or deleted under parent, transactions it took)."""
    txns = zt.write_transactions(data_dir, parent, kind=kind)
    if not txns:
        raise RuntimeError(f"no {kind} under {parent} in the server's transaction log")
    first = min(when for when, _ in txns)
    return (fence_ctime - first) / 1000.0, sum(k for _, k in txns), len(txns)


def fence(kz, name):
    """A node created now: its ctime is the server's clock at this point of the run."""
    path = kz.create(f"/bench/fence/{name}", b"", makepath=True)
    return kz.exists(path).ctime


def percentile(v, p):
    v = sorted(v)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    f = int(k)
    c = min(f + 1, len(v) - 1)
    return v[f] + (v[c] - v[f]) * (k - f)


def run_kazoo(kz, zk, n, path, tag):
    """kazoo's async client creates n members, then deletes them: {phase: (seconds by the
    server, client wall seconds, transactions)}."""
    kz.ensure_path(path)
    datas = [member_json(ip_of(i, 11)) for i in range(n)]
    obs = Observer(zk.hosts, path, n, f"{tag}-kazoo-created")
    t0 = time.monotonic()
    results = [kz.create_async(path + "/member_", d, ephemeral=True, sequence=True) for d in datas]
    for r in results:
        r.get(timeout=120)
    cwall = time.monotonic() - t0
    cseen = obs.result()
    children = kz.get_children(path)
    assert cseen and len(children) == n, (len(children), n)
    obs = Observer(zk.hosts, path, 0, f"{tag}-kazoo-deleted")
    t0 = time.monotonic()
    results = [kz.delete_async(f"{path}/{c}") for c in children]
    for r in results:
        r.get(timeout=120)
    dwall = time.monotonic() - t0
    dseen = obs.result()
    assert dseen, "kazoo's deletes never seen"
    cspan, cn, ctx = server_phase(zk.server.data_dir, path, "create", cseen[1])
    dspan, dn, dtx = server_phase(zk.server.data_dir, path, "delete", dseen[1])
    assert cn == n and dn == n, (cn, dn, n)
    return {"create": (cspan, cwall, ctx), "delete": (dspan, dwall, dtx)}


def wait_children(kz, path, done, timeout, period=0.001):
    """Polls the path's child count (one stat read) until done(count); the monotonic time it
    was first seen so, or None. Not a ChildrenWatch: a watch re-reads the whole child list
    after every change (thousands of lists of up to n names), which loads the server and this
    process while pinion writes, and the kazoo run has no such observer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stat = kz.exists(path)
        if stat and done(stat.numChildren):
            return time.monotonic()
        time.sleep(period)
    return None


def observer_main(hosts, path, done_count, name, conn):
    kz = zt.kazoo_client(hosts, timeout=30)
    try:
        conn.send("ready")
        seen = wait_children(kz, path, (lambda c: c >= done_count) if done_count else (lambda c: c == 0), 300)
        conn.send(None if seen is None else (seen, fence(kz, name)))
    finally:
        kz.stop()
        kz.close()


class Observer:
    """A second client, in a process of its own (no interpreter lock shared with the kazoo
    run), that polls path's child count until it reaches done_count (0: until it is empty),
    then creates a fence node. result(): (monotonic time it saw the count, the fence's ctime),
    or None if it never did. The same for both sides: each phase's end is the same kind of
    observation."""

    def __init__(self, hosts, path, done_count, name):
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=observer_main, args=(hosts, path, done_count, name, child), daemon=True)
        self.proc.start()
        if not self.conn.poll(60) or self.conn.recv() != "ready":
            self.close()
            raise RuntimeError("the observer did not connect")

    def result(self, timeout=310):
        try:
            return self.conn.recv() if self.conn.poll(timeout) else None
        finally:
            self.close()

    def close(self):
        if self.proc.is_alive():
            self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


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


def bulk_pod(i, path):
    return f"bench-{i:05d}", ip_of(i), {"pinion.io/serverset": path}


def run_pinion(args, zk, kz, fake, token_file, path, tag, last):
    """One piniond registers the bulk pods, then they all go away: {phase: (seconds by the
    server, end to end seconds, transactions)}, the agent's create count, the duplicates;
    with last, the agent is handed back running (for the latency samples), else stopped."""
    n = args.endpoints
    kz.ensure_path(path)
    if args.bulk_source == "apiserver":
        for i in range(n):
            name, ip, ann = bulk_pod(i, path)
            fake.add_pod(make_pod(name, node=NODE, ip=ip, annotations=ann))
    # The pod files live in memory: this host's disk is shared, and 5,000 unlinks on it can take
    # seconds; the pods would then go away at the disk's pace, not all at once.
    pods_dir = tempfile.mkdtemp(prefix="zkreg-bench-pods-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    agent = t.Agent(config={
        "agent": {"log-level": "info", "pods-dir": pods_dir},
        "apiserver": {"url": fake.url, "token-file": token_file},
        "zookeeper": {"servers": zk.hosts, "write-qps": "1000000", "session-timeout": "30s"},
    }, node_name=NODE)
    agent.pods_dir = pods_dir
    agent.bench_pods_dir = pods_dir
    try:
        if args.bulk_source == "pods-dir":
            for i in range(n):
                name, ip, ann = bulk_pod(i, path)
                agent.write_pod(name, t.make_pod(name, ip=ip, annotations=ann))
        obs = Observer(zk.hosts, path, n, f"{tag}-pinion-created")
        t0 = time.monotonic()
        agent.start(timeout=60)
        seen = obs.result()
        if seen is None:
            raise RuntimeError(f"pinion registered only {kz.exists(path).numChildren} of {n}")
        ce2e, cfence = seen[0] - t0, seen[1]
        dup = len(kz.get_children(path)) - n
        creates = agent.metrics().value("pinion_zookeeper_operations_total", op="create", result="ok")
        # Steady state before the deletes, as for pods registered a while ago: every member is
        # watched (the child watch on the path is armed, its list showed every member).
        t.wait_until(lambda: (agent.metrics().value("pinion_zookeeper_watched_members")
                              or 0) >= n, 60, desc="every member watched")

        obs = Observer(zk.hosts, path, 0, f"{tag}-pinion-deleted")
        t0 = time.monotonic()
        if args.bulk_source == "pods-dir":
            # All at once: the directory renamed away is one change of the pod source (a missing
            # pods-dir has no pods); unlinking 5,000 files one by one would pace the deletes.
            os.rename(pods_dir, pods_dir + ".gone")
        else:
            for i in range(n):
                fake.delete_pod("default", bulk_pod(i, path)[0])
        gone = obs.result()
        if gone is None:
            raise RuntimeError(f"pinion left {kz.exists(path).numChildren} of {n} members")
        de2e, dfence = gone[0] - t0, gone[1]
        if args.bulk_source == "pods-dir":
            os.mkdir(pods_dir)  # for the latency samples' pod files
            shutil.rmtree(pods_dir + ".gone", ignore_errors=True)
        cspan, cn, ctx = server_phase(zk.server.data_dir, path, "create", cfence)
        dspan, dn, dtx = server_phase(zk.server.data_dir, path, "delete", dfence)
        if not last:
            agent.assert_exit(agent.sigterm(timeout=60), 0)
            agent.close()
            agent = None
        return {"create": (cspan, ce2e, ctx), "delete": (dspan, de2e, dtx)}, creates, dup, agent
    except BaseException:
        agent.close()
        shutil.rmtree(pods_dir, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(pods_dir + ".gone", ignore_errors=True)
        if agent is None:
            shutil.rmtree(pods_dir, ignore_errors=True)


def latency_samples(args, kz, fake, agent, wl, wp):
    lat = []
    for i in range(args.samples):
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
    return lat, plat


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--endpoints", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
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
    # The server's transaction log in memory too: its fsyncs on this shared disk would measure
    # the other users of the disk, not the two clients (the same server serves both sides).
    zk = zt.ZkStandalone(tmp_root="/dev/shm" if os.path.isdir("/dev/shm") else None, max_session_ms=60000).start()
    fake = FakeApiserver(token=TOKEN).start()
    tmp = tempfile.mkdtemp(prefix="zkreg-bench-")
    kz = kz2 = agent = None
    runs = []
    try:
        kz = zt.kazoo_client(zk.hosts, timeout=30)
        kz2 = zt.kazoo_client(zk.hosts, timeout=30)
        for i in range(m):
            fake.add_pod(make_pod(f"lat-{i:04d}", node=NODE, ip=ip_of(i, 12), ready=False,
                                  annotations={"pinion.io/serverset": "/bench/lat"}))
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        wl = Watcher(kz, "/bench/lat")
        wp = Watcher(kz, "/bench/podsdir")
        # The server's first thousands of creates and deletes run before its JIT compiled them:
        # a warm-up, not counted, so that the first run's kazoo is not measured on a cold server.
        run_kazoo(kz2, zk, min(n, 2000), "/bench/warmup", "warmup")

        for r in range(args.runs):
            last = r == args.runs - 1
            k = run_kazoo(kz2, zk, n, f"/bench/run{r + 1}/kazoo", f"run{r + 1}")
            p, creates, dup, agent = run_pinion(args, zk, kz, fake, token_file, f"/bench/run{r + 1}/pinion",
                                                f"run{r + 1}", last)
            runs.append({"kazoo": k, "pinion": p, "creates": creates, "dup": dup})
            print(f"run {r + 1}: creates/s pinion {n / p['create'][0]:,.0f} ({p['create'][2]} txns) vs kazoo "
                  f"{n / k['create'][0]:,.0f} ({k['create'][2]}): {k['create'][0] / p['create'][0]:.2f}x; "
                  f"deletes/s pinion {n / p['delete'][0]:,.0f} ({p['delete'][2]} txns) vs kazoo "
                  f"{n / k['delete'][0]:,.0f}: {k['delete'][0] / p['delete'][0]:.2f}x; duplicates {dup}",
                  flush=True)

        lat, plat = latency_samples(args, kz, fake, agent, wl, wp)
        metrics = agent.metrics()
        agent.assert_exit(agent.sigterm(timeout=60), 0)
    finally:
        if agent:
            agent.close()
            shutil.rmtree(agent.bench_pods_dir, ignore_errors=True)
        for c in (kz, kz2):
            if c:
                c.stop()
                c.close()
        fake.stop()
        zk.close()
        shutil.rmtree(tmp, ignore_errors=True)

    def rate(run, side, phase):
        return n / max(run[side][phase][0], 1e-3)

    def ratio(run, phase):
        return rate(run, "pinion", phase) / rate(run, "kazoo", phase)

    worst = {ph: min(runs, key=lambda x: ratio(x, ph)) for ph in ("create", "delete")}
    dup = max(x["dup"] for x in runs)
    last = runs[-1]
    p99 = percentile(lat, 99) * 1000
    rows = [("endpoints", f"{n}", f"pinion's pods from {args.bulk_source}"), ("runs", f"{len(runs)}", "")]
    for ph, verb in (("create", "creates"), ("delete", "deletes")):
        for i, x in enumerate(runs):
            rows.append((f"run {i + 1}: {verb}/s pinion / kazoo (server)",
                         f"{rate(x, 'pinion', ph):,.0f} / {rate(x, 'kazoo', ph):,.0f}", f"{ratio(x, ph):.2f}x"))
        w = worst[ph]
        rows.append((f"{verb}: worst ratio of {len(runs)} runs", f"{ratio(w, ph):.2f}x", "goal ≥ 2.5x"))
        rows.append((f"{verb}: server transactions, last run, pinion / kazoo",
                     f"{last['pinion'][ph][2]} / {last['kazoo'][ph][2]}", "a multi is one"))
    rows += [
        ("pinion: process start → all visible (last run)", f"{last['pinion']['create'][1]:.3f} s", ""),
        ("pinion: pods gone → all members gone (last run)", f"{last['pinion']['delete'][1]:.3f} s", ""),
        ("kazoo: submit → all acked, creates / deletes (last run)",
         f"{last['kazoo']['create'][1]:.3f} / {last['kazoo']['delete'][1]:.3f} s", ""),
        ("duplicates", f"{dup}", ""),
        (f"ready→visible via apiserver watch, p50 ({m} samples)", f"{statistics.median(lat) * 1000:.1f} ms", ""),
        ("ready→visible via apiserver watch, p99", f"{p99:.1f} ms", "goal < 10 ms"),
        ("ready→visible via apiserver watch, max", f"{max(lat) * 1000:.1f} ms", ""),
        (f"ready→visible via pods-dir, p50 ({len(plat)} samples)", f"{statistics.median(plat) * 1000:.1f} ms",
         "the core's directory source"),
        ("ready→visible via pods-dir, p99", f"{percentile(plat, 99) * 1000:.1f} ms", ""),
        ("ZooKeeper creates by the agent (ok, last run)", f"{last['creates']:.0f}", ""),
        ("ZooKeeper multi requests by the agent (ok, last run)",
         f"{metrics.value('pinion_zookeeper_operations_total', op='multi', result='ok'):.0f}", ""),
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

    for ph, verb in (("create", "creates"), ("delete", "deletes")):
        w = worst[ph]
        bj.row("%d endpoints, %s/s by the server, worst of %d runs" % (n, verb, len(runs)),
               round(rate(w, "pinion", ph)), round(rate(w, "kazoo", ph)), "kazoo async client", "/s",
               goal="ratio >= 2.5 in every run", met=ratio(w, ph) >= 2.5)
        for i, x in enumerate(runs):
            bj.row("run %d: %s/s" % (i + 1, verb), round(rate(x, "pinion", ph)), round(rate(x, "kazoo", ph)),
                   "kazoo async client", "/s")
    bj.row("process start → all %d visible (last run)" % n, round(last["pinion"]["create"][1], 3),
           round(last["kazoo"]["create"][1], 3), "kazoo: submit → all acked", "s")
    bj.row("pods gone → all %d members gone (last run)" % n, round(last["pinion"]["delete"][1], 3),
           round(last["kazoo"]["delete"][1], 3), "kazoo: submit → all acked", "s")
    bj.row("duplicate members", dup, unit="", goal="0", met=dup == 0)
    bj.row("ready → visible via apiserver watch, p50 (%d samples)" % m, round(statistics.median(lat) * 1000, 2),
           unit="ms")
    bj.row("ready → visible via apiserver watch, p99", round(p99, 2), unit="ms", goal="< 10 ms", met=p99 < 10)
    bj.row("ready → visible via pods-dir, p50 (%d samples)" % len(plat), round(statistics.median(plat) * 1000, 1),
           unit="ms")
    bj.note("One real ZooKeeper on loopback; pinion's pods come from the %s; %d runs, each kazoo then a new "
            "piniond creating and then deleting %d members. Throughput is measured by the server for both "
            "clients: from the first transaction of the phase in its transaction log to a fence node created "
            "once the phase is complete (by an observer client in a process of its own, polling the child count "
            "every millisecond, for both sides alike). pinion sends its writes as ZooKeeper multi "
            "requests (one transaction each, up to 250 members); kazoo sends one request per member. "
            "The goal is judged on the worst run." % (args.bulk_source, len(runs), n))
    bj.series("ratio pinion / kazoo, per run", "run", "ratio",
              [("creates", list(range(1, len(runs) + 1)), [round(ratio(x, "create"), 3) for x in runs]),
               ("deletes", list(range(1, len(runs) + 1)), [round(ratio(x, "delete"), 3) for x in runs])])
    bj.series("ready → visible via the apiserver watch", "latency (ms)", "samples",
              [("pinion", [round(v * 1000, 3) for v in lat], [])], kind="hist")
    bj.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
