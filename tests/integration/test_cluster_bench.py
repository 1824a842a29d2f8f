# SPDX-License-Identifier: MIT
"""The convergence benchmark (tests/bench/cluster-converge.py, `make bench-cluster` runs it with 50
joins per mode) at CI scale: two joins per mode behind one observer, 20 Node events for the CPU
figure. Every join ends with the new pod answering, in both routing modes; the ratio line and the
JSON are there; nothing the script made is left behind."""

import json
import os
import subprocess
import sys

import pytest

from pinion_testlib import BUILDDIR, NOT_UNDER_SANITIZERS, SRCDIR, VALGRIND, require_binary, sanitized_build

SCRIPT = os.path.join(SRCDIR, "tests", "bench", "cluster-converge.py")

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
              pytest.mark.skipif(VALGRIND, reason="timings: not under valgrind"),
              pytest.mark.skipif(sanitized_build(), reason=NOT_UNDER_SANITIZERS),
              pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v bird"], capture_output=True).returncode != 0,
                                 reason="bird2 is not installed (scripts/deps)")]


def netns_names():
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


READER_SLACK = 0.05


def test_two_joins_per_mode_converge_and_leave_nothing(tmp_dir):
    require_binary(os.path.join(BUILDDIR, "piniond"))
    require_binary(os.path.join(BUILDDIR, "pinion-cni"))
    out, md = os.path.join(tmp_dir, "cluster.json"), os.path.join(tmp_dir, "cluster.md")
    p = subprocess.Popen([sys.executable, SCRIPT, "--nodes", "2", "--observers", "1", "--events", "20",
                          "--route-rate", "50", "--json", out, "--md", md],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                         env=dict(os.environ, PINION_SRCDIR=SRCDIR, PINION_BUILDDIR=BUILDDIR))
    try:
        stdout, stderr = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.terminate()  # the script cleans up on SIGTERM
        stdout, stderr = p.communicate(timeout=60)
        raise AssertionError("cluster-converge.py took over 120 s:\n%s\n%s" % (stdout[-3000:], stderr[-3000:]))
    assert p.returncode == 0, "rc=%d\n%s\n%s" % (p.returncode, stdout[-3000:], stderr[-3000:])
    assert "ratio bgp/nodes pingable p50:" in stdout, stdout
    doc = json.load(open(out))
    assert doc["ok"] is True and doc["name"] == "cluster", doc
    for mode in ("nodes", "bgp"):
        s = doc["summary"][mode]
        assert s["joins"] == 2 and s["ok"] == 2, s
        # The order of things: the pod answers once the agent is ready and the peers route to it.
        # The route's time is when this process read `ip monitor`'s line, the echo's when it
        # read the reply: two readers a few milliseconds apart under load, so the order holds
        # within READER_SLACK (measured: a route read 0.8 ms after the echo it carried).
        assert s["agent_ready"]["max"] <= s["pingable"]["max"], s
        assert s["route_at_peers"]["max"] <= s["pingable"]["max"] + READER_SLACK, s
    assert doc["mesh_missing"] == {"nodes": 0, "bgp": 0}, doc["mesh_missing"]
    cpu = doc["cpu"]
    assert cpu["route"]["node_events"] >= 20 and cpu["route"]["route_replaces"] >= 1, cpu
    assert cpu["heartbeat"]["unchanged"] == 20 and cpu["heartbeat"]["route_replaces"] == 0, cpu
    assert "| pingable" in open(md).read()
    # The script names its namespaces pinion-cl-<its pid>-... (other tests may run beside it).
    leftover = {n for n in netns_names() if n.startswith("pinion-cl-%d-" % p.pid)}
    assert not leftover, leftover
