#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""selfmem-bench: the agent's memory under its own cgroup limit, with --pods pods (identity,
five config bundles, a ZooKeeper registration and a pod network each) and a burst of every pod
changing at once, against the limits the unit and the DaemonSet ship.

    tests/bench/selfmem-bench.py [--pods 250] [--limits 64,32,16] [--json F]
    make bench-selfmem     # in the build directory

One agent per limit, each in a fresh v1 memory cgroup (tests/integration/selfmem_testlib.py
says what the burst is). Per limit: the cgroup's peak usage (memory.max_usage_in_bytes), the
most in use at once (usage minus the page cache the kernel can drop: what the agent's memory
guard counts), its kernel memory, heap (rss), page cache, memory.failcnt, OOM kills, the CNI
ADDs done and refused, and whether everything else was done. The kernel memory the pods'
interfaces cost is the kmem with every pod attached minus the kmem before, per pod.

The peer of the peak is the recommended limit: the unit's MemoryMax= (and MemoryHigh=) and the
DaemonSet's limits.memory, read from units/ in this tree; the ratio is the burst's memory in use
at the first limit (default 64 MiB, no pressure) over each. Goal (the reliability issue): at 32
MiB no OOM kill and everything done; at 16 MiB alive, with work refused with a clear error.
"""

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from benchjson import BenchJson  # noqa: E402
import selfmem_testlib as sm  # noqa: E402
from pinion_testlib import require_binary, PINIOND  # noqa: E402

MiB = sm.MiB


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=250)
    ap.add_argument("--limits", default="64,32,16", help="MiB, the first one the unpressed reference")
    ap.add_argument("--json")
    args = ap.parse_args()
    require_binary(PINIOND)
    why = sm.available()
    if why:
        print("selfmem-bench: skipped: %s" % why)
        return 0
    limits = [int(x) for x in args.limits.split(",")]
    bj = BenchJson("selfmem", "The agent under its own memory limit: %d pods, every pod changing at once" % args.pods)
    work = tempfile.mkdtemp(prefix="selfmem-bench-")
    os.chmod(work, 0o755)
    world = sm.World(work, pods=args.pods)
    runs = []
    try:
        world.start()
        for limit in limits:
            r = sm.run_burst(world, limit * MiB)
            runs.append(r)
            print("selfmem-bench: %s" % r.summary())
    finally:
        world.close()
        shutil.rmtree(work, ignore_errors=True)

    print("")
    print("| limit | peak | in use | kmem | heap (rss) | page cache | failcnt | OOM kills | CNI ADD ok / refused | rest done |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in runs:
        p = r.parts
        print("| %d MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %d | %d | %d / %d | %s |" % (
            r.limit // MiB, r.peak / MiB, p.get("in_use", 0) / MiB, p.get("kmem", 0) / MiB,
            p.get("total_rss", 0) / MiB, p.get("total_cache", 0) / MiB, r.failcnt, r.oom_kills, r.cni_ok,
            r.cni_refused, "yes" if r.converged else "NO"))
    ref = runs[0]
    per_pod = (ref.kmem_attached - ref.kmem_settled) / max(ref.cni_ok, 1)
    print("")
    print("kernel memory of the pods' interfaces: %.0f KiB a pod (%.1f MiB for %d)" % (
        per_pod / 1024, (ref.kmem_attached - ref.kmem_settled) / MiB, ref.cni_ok))
    in_use = ref.parts.get("in_use", 0)
    for where, limit in sm.shipped_limits().items():
        print("%s: %d MiB; the burst's peak %.1f MiB, in use %.1f MiB (%.0f%% of it; refusals from 90%%)" % (
            where, limit // MiB, ref.peak / MiB, in_use / MiB, 100.0 * in_use / limit))
        bj.row("memory in use at the burst's peak vs %s" % where, round(in_use / MiB, 1), limit // MiB, where,
               "MiB", goal="< 90% (the watermark)", met=in_use < 0.9 * limit)
    ok = True
    for r in runs:
        bj.row("peak usage at a %d MiB limit" % (r.limit // MiB), round(r.peak / MiB, 1), r.limit // MiB,
               "the limit", "MiB")
        if r.limit == 32 * MiB:
            met = r.oom_kills == 0 and r.alive and r.converged and r.cni_refused == 0
            bj.row("32 MiB: OOM kills, work not done", r.oom_kills + r.cni_refused + (not r.converged), None, None,
                   "", goal="0", met=met)
            ok = ok and met
        if r.limit == 16 * MiB:
            met = r.oom_kills == 0 and r.alive and r.converged and r.cni_refused > 0
            bj.row("16 MiB: CNI ADDs refused with the memory reason", r.cni_refused, args.pods, "pods", "",
                   goal="alive, refusals with a reason", met=met)
            ok = ok and met
    bj.note("Kernel memory of a pod's interfaces: %.0f KiB (veth pair, sysctl tables, per-CPU counters, "
            "charged to the agent that made them). Refusal reasons at the smallest limit: %s"
            % (per_pod / 1024, "; ".join(sorted(runs[-1].cni_errors))[:400] or "none"))
    bj.write(args.json, ok=ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
