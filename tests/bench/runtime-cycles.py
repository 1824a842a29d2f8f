#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make bench-runtime: a pod's network life as real container runtimes drive it, pinion-cni
(through a real piniond, with the shipped conflist: pinion-cni + portmap) beside the reference
ptp + host-local (+ portmap), in one run, interleaved cycle by cycle so both see the same load:

  podman   `podman run -d` + `podman rm -f -t 0` of a busybox container (podman 4.3, CNI
           backend, runc), the network chosen with --network: "pinion" or "reference"
  cri      RunPodSandbox + StopPodSandbox + RemovePodSandbox over containerd 1.6's CRI socket,
           as the kubelet calls them; the reference list is a second runtime handler of the same
           containerd (its own cni_conf_dir)

Both runtimes run privately (tests/integration/runtime_testlib.py: own dirs and sockets, local
images). Prints the median and p99 of a cycle for each and the ratio pinion / reference (below 1
is faster); --json writes them in the common schema (benchjson.py). Everything it creates is
removed at the end.

  --podman-cycles N   measured podman cycles per network (default 30), after 2 warm-up each
  --cri-cycles N      measured CRI cycles per network (default 60), after 3 warm-up each
  --parts LIST        podman,cri (default both)"""

import argparse
import ipaddress
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from pinion_testlib import Agent  # noqa: E402
from podnet_testlib import free_pod_cidr  # noqa: E402
from runtime_testlib import (RUNTIME_BINARIES, Containerd, Podman, allocated, busybox_image,  # noqa: E402
                             pause_image, podnet_agent_config)
from benchjson import BenchJson  # noqa: E402

NETWORKS = ("pinion", "reference")
PEER = "ptp + host-local"


def percentile(values, p):
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def missing(runtime):
    return [b for b in RUNTIME_BINARIES[runtime] if not shutil.which(b, path="/usr/sbin:/usr/bin:/sbin:/bin")]


def in_cidr(ip, cidr):
    return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)


def podman_part(agent, cycles, cidrs):
    pm = Podman(agent.socket, record=False, reference_cidr=cidrs["reference"])
    try:
        pm.load(busybox_image(pm.dir))
        n = [0]

        def cycle(net, check=False):
            n[0] += 1
            name = "bench-%s-%d" % (net, n[0])
            t0 = time.perf_counter()
            pm.run_container(name, "--network", net)
            if check:  # outside the timed part: the network is the one asked for
                dt = time.perf_counter() - t0
                ip = pm("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                        name).stdout.strip()
                if not in_cidr(ip, cidrs[net]):
                    raise SystemExit("podman on %s got %s, not in %s" % (net, ip, cidrs[net]))
                t0 = time.perf_counter() - dt
            pm("rm", "-f", "-t", "0", name)
            return time.perf_counter() - t0

        for _ in range(2):
            for net in NETWORKS:
                cycle(net, check=True)
        times = {net: [] for net in NETWORKS}
        for _ in range(cycles):
            for net in NETWORKS:
                times[net].append(cycle(net))
        if allocated(agent) != 0:
            raise SystemExit("podman cycles left %d pinion addresses allocated" % allocated(agent))
        return times
    finally:
        pm.cleanup()


def cri_part(agent, cycles, cidrs):
    ctrd = Containerd(agent.socket, record=False, reference_cidr=cidrs["reference"])
    try:
        ctrd.start()
        ctrd.import_image(pause_image(ctrd.dir))
        handler = {"pinion": "", "reference": "reference"}
        n = [0]

        def cycle(net, check=False):
            n[0] += 1
            t0 = time.perf_counter()
            sid = ctrd.run_sandbox("bench-%d" % n[0], uid="uid-bench-%d" % n[0], handler=handler[net])
            if check:
                dt = time.perf_counter() - t0
                ip = ctrd.cri.status(sid).status.network.ip
                if not in_cidr(ip, cidrs[net]):
                    raise SystemExit("CRI handler %r got %s, not in %s" % (handler[net], ip, cidrs[net]))
                t0 = time.perf_counter() - dt
            ctrd.cri.stop(sid)
            ctrd.cri.remove(sid)
            return time.perf_counter() - t0

        for _ in range(3):
            for net in NETWORKS:
                cycle(net, check=True)
        times = {net: [] for net in NETWORKS}
        for _ in range(cycles):
            for net in NETWORKS:
                times[net].append(cycle(net))
        if allocated(agent) != 0:
            raise SystemExit("CRI cycles left %d pinion addresses allocated" % allocated(agent))
        return times
    finally:
        ctrd.cleanup()


def report(bj, label, figure, times, cycles):
    pin, ref = times["pinion"], times["reference"]
    rows = [(name, percentile(t, 50) * 1000, percentile(t, 99) * 1000) for name, t in
            (("pinion-cni", pin), (PEER, ref))]
    print("%s: %d cycles per network, interleaved" % (label, cycles))
    print("%-18s %12s %12s" % ("network", "median (ms)", "p99 (ms)"))
    for name, med, p99 in rows:
        print("%-18s %12.1f %12.1f" % (name, med, p99))
    print("ratio pinion-cni/%s: median %.2f, p99 %.2f" % (PEER, rows[0][1] / rows[1][1], rows[0][2] / rows[1][2]))
    bj.row(figure + ", median", round(rows[0][1], 1), round(rows[1][1], 1), PEER, "ms")
    bj.row(figure + ", p99", round(rows[0][2], 1), round(rows[1][2], 1), PEER, "ms")
    bj.series(figure, "cycle time (ms)", "cycles",
              [("pinion-cni", [round(v * 1000, 2) for v in pin], []),
               (PEER, [round(v * 1000, 2) for v in ref], [])], kind="hist")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--podman-cycles", type=int, default=30)
    ap.add_argument("--cri-cycles", type=int, default=60)
    ap.add_argument("--parts", default="podman,cri")
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    opts = ap.parse_args()
    parts = [p for p in opts.parts.split(",") if p]
    for p in parts:
        if p not in ("podman", "cri"):
            ap.error("unknown part %r" % p)
        runtime = "podman" if p == "podman" else "containerd"
        if missing(runtime):
            raise SystemExit("%s is not installed (missing %s; scripts/deps installs it)"
                             % (runtime, ", ".join(missing(runtime))))
    bj = BenchJson("runtime", "Container runtimes: pinion-cni against the reference ptp + host-local, "
                              "driven by podman and by containerd's CRI")
    cidrs = {"pinion": free_pod_cidr(), "reference": None}
    cidrs["reference"] = free_pod_cidr()
    while cidrs["reference"] == cidrs["pinion"]:
        cidrs["reference"] = free_pod_cidr()
    agent = Agent(config=dict(podnet_agent_config(cidrs["pinion"]), agent={"log-level": "info"}))
    try:
        agent.start()
        if "podman" in parts:
            times = podman_part(agent, opts.podman_cycles, cidrs)
            report(bj, "podman run -d + rm -f", "podman run+rm cycle", times, opts.podman_cycles)
        if "cri" in parts:
            times = cri_part(agent, opts.cri_cycles, cidrs)
            report(bj, "CRI RunPodSandbox + StopPodSandbox + RemovePodSandbox (containerd)",
                   "CRI RunPodSandbox+Stop+Remove cycle", times, opts.cri_cycles)
        bj.note("podman 4.3 (CNI backend, runc) and containerd 1.6 (CRI plugin, runc), each private to the "
                "benchmark; pinion-cni with the shipped conflist (pinion-cni + portmap) against the reference "
                "ptp + host-local + portmap, alternating cycle by cycle (podman: %d measured cycles per network "
                "after 2 warm-up; CRI: %d after 3). The cycle includes the runtime's own work (image, runc, "
                "shim), which dominates: the ratio says how much the network plugin adds or saves in a "
                "real pod start and stop." % (opts.podman_cycles, opts.cri_cycles))
        bj.write(opts.json)
        return 0
    finally:
        agent.close()


if __name__ == "__main__":
    sys.exit(main())
