# SPDX-License-Identifier: MIT
"""The fleet simulation (tests/sim/fleet-sim) has the structure its model promises.

These check model behaviour on a small fleet, not the numbers of the default run (those are in
`make sim`'s table): the legacy policy hammers a down apiserver and knocks it over again on
recovery, pinion's backoff does neither and every agent syncs again, resuming from the last
resourceVersion makes a recovery cheap when the watch cache survives, and a run is a pure
function of its options."""

import csv
import io
import json
import math
import os
import subprocess

import pytest

from pinion_testlib import BUILDDIR, NOT_UNDER_SANITIZERS, SRCDIR, T, require_binary, sanitized_build

pytestmark = pytest.mark.skipif(sanitized_build(), reason=NOT_UNDER_SANITIZERS)

FLEET_SIM = os.path.join(BUILDDIR, "tests", "sim", "fleet-sim")

# 200 agents; the capacity is 3 cost units per agent per second (the default model has 1.2), so
# that the fleet's relist (200 × 31 units) fits in about 10 s of capacity.
SMALL = ["--agents", "200", "--capacity", "600", "--runs", "1", "--time-limit", "5m"]


def run_sim(*args, tmp_path=None):
    """Runs fleet-sim; returns (summary rows by policy, CSV rows, stdout)."""
    require_binary(FLEET_SIM)
    summary = os.path.join(str(tmp_path), "summary.csv")
    series = os.path.join(str(tmp_path), "series.csv")
    p = subprocess.run([FLEET_SIM, *args, "--summary-csv", summary, "--csv", series],
                       capture_output=True, text=True, timeout=T(120), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, "fleet-sim %s: rc=%d\n%s" % (" ".join(args), p.returncode, p.stderr)
    with open(summary, newline="") as f:
        rows = {}
        for row in csv.DictReader(f):
            # an empty field: not measured (the figures of the Node watch in a run without it)
            rows[row["policy"]] = {k: (v if k == "policy" else float(v) if v != "" else None)
                                   for k, v in row.items()}
    with open(series, newline="") as f:
        samples = list(csv.DictReader(f))
    return rows, samples, p.stdout


@pytest.fixture(scope="module")
def default_outage(tmp_path_factory):
    """All three policies through the default 60 s outage (the apiserver restarts with an empty
    watch cache)."""
    return run_sim(*SMALL, tmp_path=tmp_path_factory.mktemp("sim"))


def test_legacy_sends_far_more_requests_during_the_outage(default_outage):
    rows, _, _ = default_outage
    legacy, client_go, pinion = rows["legacy"], rows["client-go"], rows["pinion"]
    # 1 s fixed retries: about one request per agent per second of outage.
    assert legacy["requests_outage"] >= 200 * 50
    assert pinion["requests_outage"] * 5 <= legacy["requests_outage"], rows
    assert client_go["requests_outage"] * 5 <= legacy["requests_outage"], rows


def test_pinion_stays_under_capacity_where_legacy_falls_over(default_outage):
    rows, _, _ = default_outage
    legacy, pinion = rows["legacy"], rows["pinion"]
    assert legacy["peak_cost"] > legacy["capacity"], legacy
    assert legacy["falls"] >= 1, legacy
    assert legacy["unsynced"] > 0, "legacy recovered although it keeps knocking the apiserver over"
    assert pinion["peak_cost"] <= pinion["capacity"], pinion
    assert pinion["falls"] == 0, pinion


@pytest.mark.parametrize("outage", ["10s", "60s", "3m"])
def test_pinion_syncs_every_agent(outage, tmp_path):
    rows, _, _ = run_sim(*SMALL, "--policy", "pinion", "--outage", outage, tmp_path=tmp_path)
    pinion = rows["pinion"]
    assert pinion["unsynced"] == 0, pinion
    assert math.isfinite(pinion["sync_max"]), pinion
    # Nobody waits longer than two capped backoff steps (30 s × (1 + jitter 1.0)): the first
    # attempt after the recovery, and the pause between its 410 and the relist.
    assert pinion["sync_max"] <= 2 * 60 + 5, pinion


def test_resume_makes_recovery_cheap_when_the_cache_survives(tmp_path):
    """A short outage that keeps the watch cache (another apiserver, a network blip): pinion's
    agents resume from their resourceVersion, the relisting policies pay a full list each."""
    rows, _, _ = run_sim(*SMALL, "--outage", "10s", "--gone-after-restart", "0", tmp_path=tmp_path)
    pinion, client_go = rows["pinion"], rows["client-go"]
    assert pinion["falls"] == 0 and pinion["unsynced"] == 0, pinion
    assert pinion["peak_cost"] * 5 <= client_go["peak_cost"], rows
    # After the recovery: one resume per agent, no lists.
    assert pinion["requests_total"] - pinion["requests_outage"] <= 200 * 1.1, pinion


def test_series_agrees_with_summary(default_outage):
    rows, samples, _ = default_outage
    for policy in ("legacy", "client-go", "pinion"):
        mine = [s for s in samples if s["policy"] == policy]
        assert mine, policy
        outage = [s for s in mine if 0 <= float(s["t"]) < 60]
        assert len(outage) == 60, policy
        # A down apiserver costs nothing, and every request sent then is counted.
        assert all(s["server_up"] == "0" and float(s["offered_cost"]) == 0 for s in outage), policy
        assert sum(int(s["requests"]) for s in outage) == rows[policy]["requests_outage"], policy
        after = [float(s["offered_cost"]) for s in mine if float(s["t"]) >= 60]
        assert max(after) == pytest.approx(rows[policy]["peak_cost"]), policy


def test_runs_are_deterministic(tmp_path):
    runs = {}
    for name, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        (tmp_path / name).mkdir()
        runs[name] = run_sim(*SMALL, "--seed", seed, tmp_path=tmp_path / name)
    a, b, c = runs["a"], runs["b"], runs["c"]
    assert a == b
    # Another seed draws other jitter: pinion's retries land elsewhere.
    assert a[1] != c[1]


def test_report_names_every_parameter(default_outage):
    _, _, out = default_outage
    assert "Reproduce with `fleet-sim --agents 200 " in out
    for key in ("capacity", "grace", "backoff-initial", "backoff-max", "backoff-jitter", "backoff-reset",
                "qps", "burst", "gone-after-restart", "seed"):
        assert "| %s |" % key in out, key
    table = [line for line in io.StringIO(out) if line.startswith("| legacy ") or
             line.startswith("| client-go ") or line.startswith("| pinion ")]
    # the outage table and the fan-out table
    assert len(table) == 6, out
    assert "| policy | steady: requests/min |" in out


@pytest.mark.parametrize("args", [["--capacity", "-1"], ["--policy", "nope"], ["--outage", "soon"],
                                  ["--backoff-max", "100ms"], ["extra"]])
def test_bad_options_are_refused(args):
    require_binary(FLEET_SIM)
    p = subprocess.run([FLEET_SIM, *args], capture_output=True, text=True, timeout=T(30),
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 2, (args, p.returncode, p.stdout[-500:])
    assert "fleet-sim" in p.stderr


# ---- the Node watch of routing = nodes (--node-watch 1) ----
# 200 agents, 200 Nodes: a Node list is one page of 200 objects (cost 201), the fleet's Node
# relist 40,200 units, 67 s of this capacity.
NODES = [*SMALL, "--policy", "pinion", "--node-watch", "1"]
FRESH = ["--node-fresh-watch", "1", "--node-relist-after", "2m", "--node-relist-spread", "10m",
         "--time-limit", "30m"]


@pytest.fixture(scope="module")
def node_runs(tmp_path_factory):
    """pinion with the pod watch alone, with the Node watch, and with the Node watch whose 410
    takes a fresh resourceVersion and defers the full relist."""
    out = {}
    for name, extra in (("pods", ["--node-watch", "0"]), ("nodes", []), ("fresh", FRESH)):
        rows, _, stdout = run_sim(*NODES, *extra, tmp_path=tmp_path_factory.mktemp("sim-" + name))
        out[name] = (rows["pinion"], stdout)
    return out


def test_node_watch_steady_state_fan_out(node_runs):
    pods, nodes = node_runs["pods"][0], node_runs["nodes"][0]
    # Each Node posts its status every 5 minutes: 200 Nodes → 40 events per agent per minute,
    # each of node-object-bytes; the pod watch alone receives none of them.
    assert nodes["steady_node_events_per_agent_min"] == pytest.approx(40, rel=0.01), nodes
    assert pods["steady_node_events_per_agent_min"] == 0, pods
    assert nodes["steady_kib_per_agent_min"] == pytest.approx(
        pods["steady_kib_per_agent_min"] + 40 * 7000 / 1024, rel=0.01), (pods, nodes)
    # One more watch to renew: about twice the requests, far from the bytes' ratio.
    ratio = nodes["steady_requests_per_agent_min"] / pods["steady_requests_per_agent_min"]
    assert 1.3 <= ratio <= 3, (pods, nodes)
    # Without the Node watch there is no route change to hear.
    assert pods["changes_late_share_steady"] is None and pods["changes_late_share_after"] is None


def test_route_change_reaches_every_watching_agent_at_once(node_runs):
    for name in ("nodes", "fresh"):
        row = node_runs[name][0]
        assert row["changes_late_share_steady"] == 0, (name, row)


def test_node_relist_storm_overloads_where_the_fresh_watch_does_not(node_runs):
    pods, nodes, fresh = node_runs["pods"][0], node_runs["nodes"][0], node_runs["fresh"][0]
    assert pods["falls"] == 0 and pods["peak_cost"] <= pods["capacity"], pods
    # Every agent relists 200 Nodes within its backoff step: the apiserver falls over.
    assert nodes["falls"] >= 1 and nodes["peak_cost"] > 2 * nodes["capacity"], nodes
    # A limit=1 list and a watch at once, the full relist spread over 10 minutes: it stays up,
    # every agent syncs as fast as with pods alone, and almost every route change after the
    # recovery is heard within 5 s (the late ones: agents still in backoff, and the changes
    # between the restart and an agent's fresh resourceVersion, heard at its relist).
    assert fresh["falls"] == 0 and fresh["unsynced"] == 0, fresh
    assert fresh["sync_max"] <= pods["sync_max"] + 5, (pods, fresh)
    assert fresh["changes_late_share_after"] < 0.05, fresh
    assert nodes["changes_late_share_after"] > 4 * fresh["changes_late_share_after"], (nodes, fresh)


def test_node_watch_report(node_runs):
    out = node_runs["nodes"][1]
    assert "With the Node watch: a Node list (200 Nodes, 1 page)" in out, out
    for key in ("node-watch", "nodes", "node-status-period", "node-object-bytes", "node-fresh-watch",
                "node-relist-spread", "event-cost"):
        assert "| %s |" % key in out, key


def test_node_watch_real_agents_smoke(tmp_path):
    """tests/bench/node-watch-fanout.py, smoke-sized (the real run is `make bench-node-watch`):
    two agents with routing = nodes, each in its own network namespace, beside one with
    routing = none. The Node agents receive every status post and drop each one unheard; the
    peer receives none; after a restart only the Node agents list Nodes."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    require_binary(os.path.join(BUILDDIR, "piniond"))
    out = tmp_path / "node-watch.json"
    p = subprocess.run(["python3", os.path.join(SRCDIR, "tests", "bench", "node-watch-fanout.py"),
                        "--builddir", BUILDDIR, "--agents", "2", "--peers", "1", "--nodes", "60",
                        "--status-period", "6", "--warmup", "2", "--duration", "12", "--outage", "2",
                        "--json", str(out)],
                       capture_output=True, text=True, timeout=T(300), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, "rc=%d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    res = json.loads(out.read_text())["result"]
    nodes, peer = res["steady"]["nodes"], res["steady"]["none"]
    # 60 Nodes every 6 s: 600 events a minute to each Node watcher (the generator's and the
    # snapshots' timing give a few percent either way)
    assert nodes["node_events_min"] == pytest.approx(600, rel=0.15), nodes
    assert nodes["unchanged_dropped"] == nodes["node_events"] > 0, nodes
    assert peer["node_events"] == 0, peer
    assert res["routes_per_node_agent"] == 59, res
    outage = res["outage"]
    assert outage["recovered"], outage
    assert outage["nodes"]["nodes_list"] >= 1 and outage["none"]["nodes_list"] == 0, outage


# ---- the agents' status writes (naive-writes, pinion-writes) ----
# pinion's reflector in both; a pod start per node per minute goes on through the outage.
WRITES = [*SMALL, "--policy", "naive-writes,pinion-writes"]


@pytest.fixture(scope="module")
def writes_5m(tmp_path_factory):
    """Both write policies through a 5 minute outage: each agent queues about 14 writes."""
    return run_sim(*WRITES, "--outage", "5m", tmp_path=tmp_path_factory.mktemp("sim-writes"))


def test_writes_per_pod_start_in_steady_state(default_outage):
    rows, _, _ = default_outage
    for policy in ("naive-writes", "pinion-writes"):
        row = rows[policy]
        assert row["starts_steady"] >= 30, row
        # a condition PATCH and an event POST per start, a False PATCH first for 10% of them
        assert 2.0 <= row["writes_per_start_steady"] <= 2.2, row
        # and the rotations' events: 30 pods, one each 40 minutes
        assert row["writes_per_agent_min_steady"] == pytest.approx(1 * 2.1 + 30 / 40, rel=0.2), row
    for policy in ("legacy", "client-go", "pinion"):
        assert rows[policy]["writes_outage"] is None, rows[policy]


def test_pinion_writes_no_stampede_at_recovery(writes_5m):
    rows, samples, _ = writes_5m
    naive, pinion = rows["naive-writes"], rows["pinion-writes"]
    # naive: every write retried each second on its own, all of them in the recovery's first second
    assert naive["writes_outage"] >= 200 * 5 * 100, naive
    assert pinion["writes_outage"] * 50 <= naive["writes_outage"], rows
    assert naive["write_peak_cost"] > naive["capacity"], naive
    assert naive["peak_cost"] >= 4 * pinion["peak_cost"], rows
    # pinion: the backoff, a pause in [0, the backoff step] and the token bucket spread the drain
    assert pinion["falls"] == 0 and pinion["peak_cost"] <= pinion["capacity"], pinion
    assert pinion["write_peak_cost"] * 10 <= naive["write_peak_cost"], rows
    # every queue drains: at most a capped backoff step (30 s × 2) and the pause (30 s) after the recovery
    assert pinion["write_backlog_clear"] <= 60 + 30 + 5 and pinion["write_backlogged_end"] == 0, pinion
    assert pinion["writes_dropped"] == 0 and pinion["conditions_dropped"] == 0, pinion
    # the series carries the writes: those sent during the outage, none of them costing anything
    mine = [s for s in samples if s["policy"] == "pinion-writes"]
    outage = [s for s in mine if 0 <= float(s["t"]) < 300]
    assert sum(int(s["writes"]) for s in outage) == pinion["writes_outage"]
    assert all(float(s["offered_cost"]) == 0 for s in outage)


def test_conditions_coalesce_and_the_queue_is_bounded(tmp_path):
    """Every start slow (a False PATCH, then True): naive sends both, pinion's queue keeps one
    condition per pod; a queue of 24 through a 10 minute outage drops events, never a condition."""
    rows, _, _ = run_sim(*WRITES, "--outage", "10m", "--slow-share", "1", "--write-queue", "24",
                         "--time-limit", "10m", tmp_path=tmp_path)
    naive, pinion = rows["naive-writes"], rows["pinion-writes"]
    assert 2.9 <= naive["writes_per_start_steady"] <= 3.0, naive
    # about 10 starts per agent during the outage, each one False decision replaced by its True
    assert pinion["writes_coalesced"] >= 200 * 10 * 0.7, pinion
    assert pinion["write_queue_max"] == 24, pinion
    assert pinion["writes_dropped"] > 0 and pinion["conditions_dropped"] == 0, pinion
    # naive keeps every write: conditions, start events and rotations, 3.75 a minute per agent
    assert naive["write_queue_max"] >= 30, naive
    assert pinion["write_backlogged_end"] == 0, pinion


def test_writes_are_deterministic(tmp_path):
    runs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        runs.append(run_sim(*WRITES, "--seed", "3", tmp_path=tmp_path / name))
    assert runs[0] == runs[1]


def test_writes_report(default_outage):
    _, _, out = default_outage
    assert "| policy | writes per pod start (steady) |" in out, out
    rows = [line for line in io.StringIO(out) if line.startswith("| naive-writes ") or
            line.startswith("| pinion-writes ")]
    # the outage table, the writes table and the fan-out table
    assert len(rows) == 6, out
    for key in ("pod-start-rate", "slow-share", "condition-grace", "slow-jobs-time", "event-batch",
                "rotation-period", "write-queue", "write-cost"):
        assert "| %s |" % key in out, key
