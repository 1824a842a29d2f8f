#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make bench-podnet: ADD+DEL cycles of pinion-cni (through a real piniond) against the reference
ptp and bridge plugins with host-local IPAM, on this machine, in one run, interleaved cycle by
cycle so that every plugin sees the same load. Each cycle gets a fresh network namespace, as a
pod sandbox does (created and removed outside the timed part). Prints the median and p99 of a cycle for each and
the ratios (pinion / reference; below 1 is faster). Everything it creates (namespaces, the bridge,
the agent, temp dirs) is removed at the end.

Then the IPAM's scaling: the same pinion-cni cycle against two more agents, one holding 10
allocations and one holding 4,000 (pre-filled through the state file, all in one /20), interleaved
the same way; the ratio of the two shows whether a change costs O(1) in the allocations held.

  --cycles N   measured cycles per plugin (default 100), after 3 warm-up cycles each
  --held N     allocations held by the large agent (default 4000; 0 skips the comparison)"""

import argparse
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from pinion_testlib import Agent  # noqa: E402
from podnet_testlib import PINION_CNI, Netns, exec_plugin, free_pod_cidr  # noqa: E402
from benchjson import BenchJson  # noqa: E402


def percentile(values, p):
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def prefill(state_dir, cidr, n, netns_path):
    """A state file holding n allocations (the first n addresses of cidr), as if n pods were wired."""
    net = ipaddress.ip_network(cidr)
    allocs = []
    for i in range(n):
        allocs.append({"ip": str(net[1 + i]), "containerID": "held%d" % i, "ifname": "eth0", "netns": netns_path,
                       "hostIfname": "pinh%07x" % i, "network": "bench-held", "since": time.time()})
    d = os.path.join(state_dir, "podnet")
    os.makedirs(d, mode=0o700, exist_ok=True)
    with open(os.path.join(d, "allocations.json"), "w") as f:
        json.dump({"version": 1, "cidr": cidr, "cursor": str(net[n]), "allocations": allocs, "quarantine": [],
                   "deleting": []}, f)


def podnet_allocated(agent):
    for m in agent.status()["modules"]:
        if m["name"] == "podnet":
            return m["details"]["pool"]["allocated"]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--held", type=int, default=4000)
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    opts = ap.parse_args()
    bj = BenchJson("podnet", "Pod network: pinion-cni ADD+DEL cycles against the reference plugins")

    tmp = tempfile.mkdtemp(prefix="pinion-bench-podnet-")
    tag = "%d" % (os.getpid() % 100000)
    bridge = "pnbr%s" % tag
    agent = None
    held_agents = []
    nss = []
    try:
        agent = Agent(config={"network": {"pod-cidr": free_pod_cidr(), "address-quarantine": "0s"},
                              "agent": {"log-level": "info"}})
        agent.start()
        plugins = {
            "pinion-cni": (PINION_CNI, {"cniVersion": "1.1.0", "name": "bench-pinion", "type": "pinion-cni",
                                        "socket": agent.socket}),
            "ptp": ("ptp", {"cniVersion": "1.0.0", "name": "bench-ptp", "type": "ptp",
                            "ipam": {"type": "host-local", "subnet": free_pod_cidr(),
                                     "dataDir": os.path.join(tmp, "ptp")}}),
            "bridge": ("bridge", {"cniVersion": "1.0.0", "name": "bench-bridge", "type": "bridge", "bridge": bridge,
                                  "isGateway": True,
                                  "ipam": {"type": "host-local", "subnet": free_pod_cidr(),
                                           "dataDir": os.path.join(tmp, "bridge")}}),
        }
        holder = None
        if opts.held > 0:
            # The held allocations name a live namespace, so that nothing takes them for leaks.
            holder = Netns("pinion-podnet-%d-bench-holder" % os.getpid())
            nss.append(holder)
            for n in (10, opts.held):
                cidr = free_pod_cidr(prefix=20)
                ha = Agent(config={"network": {"pod-cidr": cidr, "address-quarantine": "0s"},
                                   "agent": {"log-level": "info"}})
                prefill(ha.state_dir, cidr, n, holder.path)
                ha.start()
                held_agents.append(ha)
                got = podnet_allocated(ha)
                if got != n:
                    raise SystemExit("the agent pre-filled with %d allocations holds %d" % (n, got))
                plugins["held-%d" % n] = (PINION_CNI, {"cniVersion": "1.1.0", "name": "bench-pinion", "type": "pinion-cni",
                                                       "socket": ha.socket})
        times = {name: [] for name in plugins}

        def cycle(name, i):
            """A pod's life as a runtime sees it: a fresh namespace (made and removed outside the
            timed part, the same for every plugin), ADD, DEL."""
            plugin, conf = plugins[name]
            cid = "bench%d" % i
            ns = Netns("pinion-podnet-%d-bench-%s-%d" % (os.getpid(), name, i))
            nss.append(ns)
            try:
                t0 = time.perf_counter()
                r = exec_plugin(plugin, "ADD", conf, container_id=cid, netns=ns)
                if r.rc != 0:
                    raise SystemExit("%s ADD failed: %s" % (name, r))
                d = exec_plugin(plugin, "DEL", conf, container_id=cid, netns=ns)
                if d.rc != 0:
                    raise SystemExit("%s DEL failed: %s" % (name, d))
                return time.perf_counter() - t0
            finally:
                ns.delete()
                nss.remove(ns)

        for i in range(3):
            for name in plugins:
                cycle(name, i)
        for i in range(opts.cycles):
            for name in plugins:
                times[name].append(cycle(name, 1000 + i))

        rows = []
        for name in [n for n in plugins if not n.startswith("held-")]:
            t = times[name]
            rows.append((name, percentile(t, 50) * 1000, percentile(t, 99) * 1000))
        print("podnet benchmark: ADD+DEL cycles, %d per plugin, interleaved, same machine and run" % opts.cycles)
        print("%-12s %12s %12s" % ("plugin", "median (ms)", "p99 (ms)"))
        for name, med, p99 in rows:
            print("%-12s %12.2f %12.2f" % (name, med, p99))
        pin = rows[0]
        for name, med, p99 in rows[1:]:
            print("ratio pinion-cni/%s: median %.2f, p99 %.2f" % (name, pin[1] / med, pin[2] / p99))
        for name, med, p99 in rows[1:]:
            # The goal: pinion's cycle at most a tenth of the reference ptp plugin's.
            goal = "ratio <= 0.1" if name == "ptp" else None
            bj.row("ADD+DEL cycle, median", round(pin[1], 2), round(med, 2), "%s + host-local" % name, "ms",
                   goal=goal, met=None if goal is None else pin[1] / med <= 0.1)
            bj.row("ADD+DEL cycle, p99", round(pin[2], 2), round(p99, 2), "%s + host-local" % name, "ms")
        if opts.held > 0:
            small, large = "held-10", "held-%d" % opts.held
            ms, ls = (percentile(times[small], 50) * 1000, percentile(times[large], 50) * 1000)
            mp, lp = (percentile(times[small], 99) * 1000, percentile(times[large], 99) * 1000)
            print("IPAM scaling: pinion-cni ADD+DEL cycle with 10 and with %d allocations held" % opts.held)
            print("%-12s %12.2f %12.2f" % (small, ms, mp))
            print("%-12s %12.2f %12.2f" % (large, ls, lp))
            print("ratio held-%d/held-10: median %.2f, p99 %.2f" % (opts.held, ls / ms, lp / mp))
            # O(1) in the pool: the cycle with thousands held within 1.2x of the one with 10.
            bj.row("ADD+DEL cycle, median, %d allocations held" % opts.held, round(ls, 2), round(ms, 2),
                   "pinion-cni with 10 held", "ms", goal="ratio <= 1.2", met=ls / ms <= 1.2)
            bj.row("ADD+DEL cycle, p99, %d allocations held" % opts.held, round(lp, 2), round(mp, 2),
                   "pinion-cni with 10 held", "ms")
        bj.note("%d measured cycles per plugin after 3 warm-up cycles each, interleaved cycle by cycle; "
                "a fresh network namespace per cycle, made outside the timed part." % opts.cycles)
        bj.series("ADD+DEL cycle times", "cycle time (ms)", "cycles",
                  [(name, [round(v * 1000, 3) for v in times[name]], []) for name in plugins], kind="hist")
        bj.write(opts.json)
        return 0
    finally:
        for ns in nss:
            ns.delete()
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        if agent:
            agent.close()
        for ha in held_agents:
            ha.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
