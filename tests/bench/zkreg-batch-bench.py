#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""zkreg-batch-bench: zkreg's bulk writes at the DEFAULT settings (write-qps 50,
max-ops-per-write 250), end to end, against kazoo's async client doing the same writes in the
same run against the same real ZooKeeper server; --runs times over (default 5), judged on the
worst run. Then the server's own transaction rate, for the fleet simulation.

    tests/bench/zkreg-batch-bench.py [--pods 250] [--bulk 5000] [--runs 5] [--md FILE] [--json FILE]
    make bench-zkreg-batch         # in the build directory; BENCH_ZKREG_BATCH_FLAGS='--runs 3'

Each run
  expiry   a client with --pods members (250) of its own session is stopped (SIGSTOP) until the
           server has expired its session (every member gone), then resumed (SIGCONT): the
           time from the resume to the server's ctime of the last member created again. That
           is noticing the closed connection, being told the session expired, a new session,
           and the creates. pinion: a piniond with --pods pod files in its pods-dir. kazoo: a
           KazooClient in a process of its own whose state listener, on CONNECTED after LOST,
           submits create_async() of every member at once and awaits them (the async client
           at its best: pipelined on one session). Both with session-timeout 4s.
  bulk     --bulk members (5,000) from pod files: pinion, a new piniond started with --bulk pod
           files already in its pods-dir (process start → the last member's ctime: reading the
           files, the session, the writes); kazoo, the same job from the same kind of files in
           this running interpreter (reading and parsing every file, a new KazooClient's
           session, create_async() of every member, all awaited → the last member's ctime;
           neither the interpreter's start nor kazoo's import is counted).
  Times are by the server's clock (each member's ctime, ms) against this host's wall clock at
  the start of the phase: the server runs on this host. The ratio is kazoo's time / pinion's.
  The server's transaction log counts each side's transactions (a multi is one).

The server's rate (once, after the runs)
  A piniond with 20,000 pods and write-qps 1e6 writes them as 80 multis of 250 creates, all in
  flight at once; another with 5,000 pods and max-ops-per-write=1, as 5,000 lone creates. The
  server's transaction log gives its rate for each: (transactions - 1) / (last - first), by its
  own clock. One standalone server with its log in memory: an ensemble's is lower (a quorum
  round trip, the disk), which tests/sim/zk-fleet-sim.c takes as its --server-rate.

Exit status 0 when every run completed (whatever the numbers), 1 otherwise.
"""

import argparse
import json
import math
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("PINION_SRCDIR") or os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRCDIR, "tests", "integration"))

import pinion_testlib as t  # noqa: E402
import zkreg_testlib as zt  # noqa: E402
from benchjson import BenchJson  # noqa: E402

SESSION_TIMEOUT = "4s"
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else None


def ip_of(i, net=10):
    return f"{net}.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def member_json(ip, port=8080):
    return ('{"serviceEndpoint":{"host":"%s","port":%d},"additionalEndpoints":{},"status":"ALIVE"}'
            % (ip, port)).encode()


def ctimes(kz, path):
    """The ctime (ms, the server's clock) of every child of path."""
    children = kz.get_children(path)
    results = [kz.exists_async(f"{path}/{c}") for c in children]
    return [r.get(timeout=60).ctime for r in results]


def wait_count(kz, path, done, timeout, period=0.002):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = kz.exists(path)
        if st and done(st.numChildren):
            return True
        time.sleep(period)
    return False


def now_ms():
    return time.time() * 1000.0


# ---- kazoo ----

def kazoo_expiry_main(hosts, path, n, conn):
    """A kazoo client that keeps n members: after its session was lost, its listener submits
    every create at once on the new session."""
    from kazoo.client import KazooClient, KazooState
    datas = [member_json(ip_of(i, 11)) for i in range(n)]
    kz = KazooClient(hosts=hosts, timeout=float(SESSION_TIMEOUT[:-1]))
    lost = threading.Event()
    redo = threading.Event()

    def create_all():
        results = [kz.create_async(path + "/member_", d, ephemeral=True, sequence=True) for d in datas]
        for r in results:
            r.get(timeout=120)

    def listener(state):
        if state == KazooState.LOST:
            lost.set()
        elif state == KazooState.CONNECTED and lost.is_set():
            redo.set()  # not from the connection thread: it must go on reading answers

    kz.add_listener(listener)
    kz.start(timeout=30)
    kz.ensure_path(path)
    create_all()
    conn.send("ready")
    if redo.wait(300):
        create_all()
        conn.send("done")
    else:
        conn.send("never reconnected")
    conn.recv()
    kz.stop()
    kz.close()


def stop_until_expired(kz, path, pid, who):
    """Stops pid (SIGSTOP) until the server has expired its session (every member under path
    gone), resumes it and returns the resume's time (ms): where the expiry phase starts."""
    os.kill(pid, signal.SIGSTOP)
    try:
        if not wait_count(kz, path, lambda c: c == 0, 60):
            raise RuntimeError("%s's session never expired" % who)
    finally:
        t0 = now_ms()
        os.kill(pid, signal.SIGCONT)
    return t0


def run_kazoo_expiry(zk, kz, n, path):
    ctx = multiprocessing.get_context("fork")
    conn, child = ctx.Pipe()
    p = ctx.Process(target=kazoo_expiry_main, args=(zk.hosts, path, n, child), daemon=True)
    p.start()
    try:
        if not conn.poll(60) or conn.recv() != "ready":
            raise RuntimeError("the kazoo client did not register")
        t0 = stop_until_expired(kz, path, p.pid, "the kazoo client")
        if not conn.poll(120) or conn.recv() != "done":
            raise RuntimeError("the kazoo client did not register again")
        c = ctimes(kz, path)
        assert len(c) == n, (len(c), n)
        conn.send("stop")
        return (max(c) - t0) / 1000.0
    finally:
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join()


def kazoo_pods_dir(n, path):
    """The same pod files pinion reads, for kazoo to read too."""
    d = tempfile.mkdtemp(prefix="zkreg-batch-kazoo-pods-", dir=SHM)
    for i in range(n):
        name = f"p{i:05d}"
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(t.make_pod(name, ip=ip_of(i, 11), annotations={"pinion.io/serverset": path}), f, indent=1)
    return d


def member_of(pod_file):
    """(serverset path, ServerSet data) of a pod file, as pinion builds them."""
    with open(pod_file) as f:
        pod = json.load(f)
    port = pod["spec"]["containers"][0]["ports"][0]["containerPort"]
    return pod["metadata"]["annotations"]["pinion.io/serverset"], member_json(pod["status"]["podIP"], port)


def run_kazoo_bulk(zk, n, path):
    """kazoo does pinion's job from the same input: the pod files read and parsed, a session,
    create_async() of every member at once, all awaited. Not counted: the interpreter's start
    and kazoo's import (pinion's process start is)."""
    from kazoo.client import KazooClient
    pods_dir = kazoo_pods_dir(n, path)
    setup = zt.kazoo_client(zk.hosts, timeout=30)
    setup.ensure_path(path)
    try:
        t0 = now_ms()
        members = [member_of(os.path.join(pods_dir, f)) for f in sorted(os.listdir(pods_dir))]
        kz = KazooClient(hosts=zk.hosts, timeout=16.0)
        kz.start(timeout=30)
        try:
            results = [kz.create_async(p + "/member_", d, ephemeral=True, sequence=True) for p, d in members]
            for r in results:
                r.get(timeout=120)
            c = ctimes(setup, path)
            assert len(c) == n, (len(c), n)
            return (max(c) - t0) / 1000.0, kz.client_id[0]
        finally:
            kz.stop()
            kz.close()
    finally:
        setup.stop()
        setup.close()
        shutil.rmtree(pods_dir, ignore_errors=True)


# ---- pinion ----

def new_agent(zk, n, path, net=10, **zkkw):
    pods_dir = tempfile.mkdtemp(prefix="zkreg-batch-pods-", dir=SHM)
    z = {"servers": zk.hosts}
    z.update({k.replace("_", "-"): v for k, v in zkkw.items()})
    a = t.Agent(config={"agent": {"log-level": "info", "pods-dir": pods_dir}, "zookeeper": z})
    a.pods_dir = pods_dir
    for i in range(n):
        name = f"p{i:05d}"
        a.write_pod(name, t.make_pod(name, ip=ip_of(i, net), annotations={"pinion.io/serverset": path}))
    return a


def close_agent(a):
    try:
        if a.running():
            a.assert_exit(a.sigterm(timeout=60), 0)
    finally:
        a.close()
        shutil.rmtree(a.pods_dir, ignore_errors=True)


def session_of(a):
    return int(a.get_json("/v1/registrations")["session_id"], 16)


def run_pinion_expiry(zk, kz, n, path):
    kz.ensure_path(path)
    a = new_agent(zk, n, path, session_timeout=SESSION_TIMEOUT)
    try:
        a.start(timeout=60)
        if not wait_count(kz, path, lambda c: c == n, 60):
            raise RuntimeError("pinion did not register")
        t0 = stop_until_expired(kz, path, a.pid, "pinion")
        if not wait_count(kz, path, lambda c: c == n, 120):
            raise RuntimeError("pinion did not register again")
        c = ctimes(kz, path)
        assert len(c) == n, (len(c), n)
        txns = len(zt.write_transactions(zk.server.data_dir, path, session=session_of(a)))
        return (max(c) - t0) / 1000.0, txns
    finally:
        close_agent(a)


def run_pinion_bulk(zk, kz, n, path, **zkkw):
    kz.ensure_path(path)
    a = new_agent(zk, n, path, **zkkw)
    try:
        t0 = now_ms()
        a.start(timeout=60)
        if not wait_count(kz, path, lambda c: c == n, 300):
            raise RuntimeError("pinion did not register everything")
        c = ctimes(kz, path)
        created = zt.write_transactions(zk.server.data_dir, path, session=session_of(a))
        return (max(c) - t0) / 1000.0, created
    finally:
        close_agent(a)


def server_rate(created):
    """Transactions a second by the server's clock, from the first to the last of them."""
    if len(created) < 2:
        return float("nan")
    span = (created[-1][0] - created[0][0]) / 1000.0
    return (len(created) - 1) / max(span, 1e-3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=250)
    ap.add_argument("--bulk", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rate-pods", type=int, default=20000)
    ap.add_argument("--md", help="also write the table here")
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    args = ap.parse_args()
    bj = BenchJson("zkreg-batch", "ZooKeeper bulk writes at the default pacing: pinion against kazoo's async client")
    if not zt.zookeeper_available():
        print("zkreg-batch-bench: zookeeper is not installed", file=sys.stderr)
        return 1

    # The server's transaction log in memory: its fsyncs on this shared disk would measure the
    # disk's other users, not the two clients.
    zk = zt.ZkStandalone(tmp_root=SHM, max_session_ms=60000).start()
    kz = None
    runs = []
    try:
        kz = zt.kazoo_client(zk.hosts, timeout=30)
        # Warm the server's JIT first (not counted), as zkreg-bench.py does.
        run_kazoo_bulk(zk, 2000, "/bench/warmup")
        for r in range(args.runs):
            base = f"/bench/run{r + 1}"
            ke = run_kazoo_expiry(zk, kz, args.pods, base + "/expiry-kazoo")
            pe, pe_txns = run_pinion_expiry(zk, kz, args.pods, base + "/expiry-pinion")
            kb, kb_sid = run_kazoo_bulk(zk, args.bulk, base + "/bulk-kazoo")
            pb, pb_created = run_pinion_bulk(zk, kz, args.bulk, base + "/bulk-pinion")
            kb_txns = len(zt.write_transactions(zk.server.data_dir, base + "/bulk-kazoo", session=kb_sid))
            x = {"expiry": (pe, ke, pe_txns), "bulk": (pb, kb, len(pb_created), kb_txns),
                 "multi_rate": server_rate(pb_created)}
            runs.append(x)
            print(f"run {r + 1}: expiry {args.pods}: pinion {pe:.3f} s ({pe_txns} txns), kazoo {ke:.3f} s: "
                  f"{ke / pe:.2f}x; bulk {args.bulk}: pinion {pb:.3f} s ({len(pb_created)} txns), kazoo {kb:.3f} s "
                  f"({kb_txns} txns): {kb / pb:.2f}x", flush=True)

        # The server's own rate: multis of 250 all in flight, and lone creates all in flight.
        _, multis = run_pinion_bulk(zk, kz, args.rate_pods, "/bench/rate-multi", net=12, write_qps="1000000")
        _, singles = run_pinion_bulk(zk, kz, args.bulk, "/bench/rate-single", net=13, write_qps="1000000",
                                     max_ops_per_write="1")
    finally:
        if kz:
            kz.stop()
            kz.close()
        zk.close()

    multi_rate, single_rate = server_rate(multis), server_rate(singles)
    multi_ops = sum(k for _, k in multis) / max(len(multis), 1)

    def ratio(x, phase):
        return x[phase][1] / max(x[phase][0], 1e-3)

    worst = {ph: min(runs, key=lambda x: ratio(x, ph)) for ph in ("expiry", "bulk")}
    slowest_expiry = max(x["expiry"][0] for x in runs)
    rows = [("runs", f"{len(runs)}", "default write-qps 50, max-ops-per-write 250")]
    for i, x in enumerate(runs):
        rows.append((f"run {i + 1}: {args.pods} members after an expiry, pinion / kazoo",
                     f"{x['expiry'][0]:.3f} / {x['expiry'][1]:.3f} s", f"{ratio(x, 'expiry'):.2f}x"))
    rows.append((f"expiry: worst ratio of {len(runs)} runs", f"{ratio(worst['expiry'], 'expiry'):.2f}x",
                 "goal ≥ 2.5x"))
    rows.append((f"expiry: slowest pinion run, resume → all {args.pods} back", f"{slowest_expiry:.3f} s",
                 "goal ≤ 1 s"))
    rows.append(("expiry: pinion's transactions (most of any run)", f"{max(x['expiry'][2] for x in runs)}",
                 f"ceil({args.pods}/250) = {math.ceil(args.pods / 250)}"))
    for i, x in enumerate(runs):
        rows.append((f"run {i + 1}: {args.bulk} pods at start, pinion / kazoo",
                     f"{x['bulk'][0]:.3f} / {x['bulk'][1]:.3f} s", f"{ratio(x, 'bulk'):.2f}x"))
    rows.append((f"bulk: worst ratio of {len(runs)} runs", f"{ratio(worst['bulk'], 'bulk'):.2f}x", "goal ≥ 2.5x"))
    rows.append(("bulk: transactions, pinion / kazoo (last run)",
                 f"{runs[-1]['bulk'][2]} / {runs[-1]['bulk'][3]}", "a multi is one"))
    rows.append((f"server: multis of {multi_ops:.0f} creates, all in flight", f"{multi_rate:,.0f} txn/s",
                 f"{multi_rate * multi_ops:,.0f} creates/s; {len(multis)} multis"))
    rows.append(("server: lone creates, all in flight", f"{single_rate:,.0f} txn/s", f"{len(singles)} creates"))

    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print()
    for a, b, c in rows:
        print(f"{a:<{w0}}  {b:>{w1}}  {c}")
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(["| measure | value | note |", "|---|---|---|"] +
                              [f"| {a} | {b} | {c} |" for a, b, c in rows]) + "\n")

    for ph, what in (("expiry", f"{args.pods} members back after a session expiry (resume → last ctime)"),
                     ("bulk", f"{args.bulk} pods at start (start → last ctime)")):
        w = worst[ph]
        bj.row(f"{what}, worst of {len(runs)} runs", round(w[ph][0], 4), round(w[ph][1], 4),
               "kazoo async client", "s", goal="kazoo's time / pinion's >= 2.5 in every run",
               met=ratio(w, ph) >= 2.5, ratio=ratio(w, ph))
        for i, x in enumerate(runs):
            bj.row(f"run {i + 1}: {ph}", round(x[ph][0], 4), round(x[ph][1], 4), "kazoo async client", "s",
                   ratio=ratio(x, ph))
    bj.row(f"slowest re-registration of {args.pods} after an expiry", round(slowest_expiry, 3), unit="s",
           goal="<= 1 s", met=slowest_expiry <= 1.0)
    bj.row(f"server transactions/s, multis of {multi_ops:.0f} creates", round(multi_rate), unit="/s")
    bj.row("server transactions/s, lone creates", round(single_rate), unit="/s")
    bj.note("One real ZooKeeper server on loopback, its log in memory; pinion at its default write pacing "
            "(write-qps 50 requests/s, max-ops-per-write 250). Times by the server's clock (the last member's "
            "ctime) from the phase's start on this host's wall clock; the ratio is kazoo's time / pinion's. "
            "The goal is judged on the worst run.")
    bj.series("kazoo's time / pinion's, per run", "run", "ratio",
              [(ph, list(range(1, len(runs) + 1)), [round(ratio(x, ph), 3) for x in runs])
               for ph in ("expiry", "bulk")])
    bj.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
