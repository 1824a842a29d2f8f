# SPDX-License-Identifier: MIT
"""podnet's leak-proof side, against real network namespaces: reconciliation releases the
allocation of an attachment whose namespace and host veth are gone (the DEL never came: the
agent was down during `podman rm`, and podman neither retries nor sends GC), and never one of a
live attachment; attachments whose runtime names no pod (podman sends only K8S_POD_NAME, others
nothing) are tracked and released like any other; DEL answers only once the pod's interface is
gone from its namespace, so the reference ptp plugin can wire the same namespace right after.
Everything a test creates (namespaces, processes, the ptp state) is removed at teardown."""

import json
import os
import re
import subprocess

import pytest

from pinion_testlib import wait_until
from test_podnet import run_concurrently
from podnet_testlib import (PINION_CNI, cni, exec_plugin, host_links, k8s_args, netns, ping, pinion_conf,  # noqa: F401
                            podnet_agent, podnet_status, ptp_conf)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def allocated(a):
    return {x["containerID"]: x for x in podnet_status(a)["details"]["pool"]["allocations"]}


def reconcile_status(a):
    return podnet_status(a)["details"]["reconcile"]


def wait_veth_gone(result):
    """The kernel tears a deleted namespace down in a worker, its veth with it: until then the
    host end exists and a pass keeps the allocation (the next pass would release it)."""
    host_if = result.json["interfaces"][0]["name"]
    wait_until(lambda: host_if not in host_links(), timeout=10, desc="%s gone with its namespace" % host_if)


def wait_runs(a, n, timeout=15):
    """Waits for n more reconciliation passes than have run now."""
    start = reconcile_status(a)["runs"]
    wait_until(lambda: reconcile_status(a)["runs"] >= start + n, timeout=timeout, desc="%d reconcile passes" % n)


def del_command(a, cid, ns):
    env = {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": cid, "CNI_NETNS": ns.path, "CNI_IFNAME": "eth0",
           "CNI_PATH": "/usr/lib/cni"}
    return [PINION_CNI], env, json.dumps(pinion_conf(a)).encode()


def test_del_answers_once_the_pod_interface_is_gone_so_ptp_can_wire_the_namespace(podnet_agent, netns, tmp_dir):
    """DEL, then at once the reference ptp's ADD into the same namespace with the same interface
    name, 20 times: ptp refuses ("container veth name provided (eth0) already exists") whenever
    pinion's pod end is still there, so DEL must not answer before it is gone. Other pods are
    deleted just before, as on a busy node: their veth deletions are queued ahead of it."""
    a = podnet_agent(quarantine="0s")
    n = netns()
    others = [netns() for _ in range(4)]
    ptp = ptp_conf(os.path.join(tmp_dir, "ptp"))
    for i in range(20):
        for j, o in enumerate(others):
            assert cni(a, "ADD", "other%d-%d" % (i, j), o).rc == 0
        r = cni(a, "ADD", "reuse%d" % i, n)
        assert r.rc == 0, r
        dels = run_concurrently([del_command(a, "other%d-%d" % (i, j), o) for j, o in enumerate(others)])
        assert all(x.rc == 0 for x in dels), dels
        d = cni(a, "DEL", "reuse%d" % i, n)
        assert d.rc == 0 and d.stdout.strip() == "", d
        ref = exec_plugin("ptp", "ADD", ptp, container_id="ref%d" % i, netns=n)
        assert ref.rc == 0, (i, ref)
        assert exec_plugin("ptp", "DEL", ptp, container_id="ref%d" % i, netns=n).rc == 0
    m = a.metrics()
    assert m.value("pinion_podnet_operations_total", verb="DEL", result="ok") == 100
    wait_until(lambda: podnet_status(a)["details"]["pool"]["interfacesBeingDeleted"] == 0, timeout=10)


def test_a_repeated_del_also_waits_and_a_del_of_nothing_answers(podnet_agent, netns):
    """Two DELs of one attachment at once: both answer 0 and neither before the pod end is gone;
    a DEL of an attachment that has nothing answers at once."""
    a = podnet_agent()
    n = netns()
    others = [netns() for _ in range(4)]
    for j, o in enumerate(others):
        assert cni(a, "ADD", "other%d" % j, o).rc == 0
    assert cni(a, "ADD", "twice", n).rc == 0
    results = run_concurrently([del_command(a, "other%d" % j, o) for j, o in enumerate(others)] +
                               [del_command(a, "twice", n)] * 2)
    assert all(r.rc == 0 for r in results), results
    assert "eth0" not in n.run("ip", "-o", "link").stdout
    assert cni(a, "DEL", "never-added", n).rc == 0
    assert a.metrics().value("pinion_podnet_operations_total", verb="DEL", result="ok") == 7


def test_dels_waiting_when_the_agent_stops_are_answered_once_their_interfaces_are_gone(podnet_agent, netns):
    """30 DELs at once: each waits for its own veth, deleted one after the other. The agent is
    stopped while most still wait: it deletes what they wait for before it goes, so every DEL
    answers 0 and no pod end is left in its namespace."""
    a = podnet_agent()
    nss = [netns() for _ in range(30)]
    for i, ns in enumerate(nss):
        assert cni(a, "ADD", "stop%d" % i, ns).rc == 0
    mark = a.log_mark()
    procs = []
    for i, ns in enumerate(nss):
        argv, env, data = del_command(a, "stop%d" % i, ns)
        p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write(data)
        p.stdin.close()
        procs.append(p)
    try:
        wait_until(lambda: len(re.findall(r"\): DEL\b", a.log_text(since_start=False)[mark:])) == 30, timeout=30,
                   desc="every DEL received")
        a.stop()
        results = [(p.wait(timeout=60), p.stdout.read(), p.stderr.read()) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(rc == 0 for rc, _, _ in results), results
    assert all("eth0" not in ns.run("ip", "-o", "link").stdout for ns in nss)


def test_reconcile_at_start_releases_what_the_agent_missed_while_down(podnet_agent, netns):
    """The podman case: the agent is down during `podman rm`, the DEL fails, podman deletes the
    namespace and never retries. The next start releases the allocation (netns-gone), logged
    with the pod and the reason, counted, and in /v1/status; the live pod beside it keeps its
    address."""
    a = podnet_agent(network={"gc-grace": "0s"})
    live, gone = netns(), netns()
    r_live = cni(a, "ADD", "live", live, args=k8s_args("default", "web", "uid-web"))
    r_gone = cni(a, "ADD", "gone", gone, args=k8s_args("default", "db", "uid-db"))
    assert r_live.rc == 0 and r_gone.rc == 0, (r_live, r_gone)
    assert allocated(a)["gone"]["netnsInode"] == os.stat(gone.path).st_ino
    a.kill9()
    d = cni(a, "DEL", "gone", gone)
    assert d.rc != 0, d  # the agent is down: the runtime sees a failure and gives up
    gone.delete()
    wait_veth_gone(r_gone)
    a.start()
    a.wait_log(r"Releasing %s \(gone/eth0, pin[0-9a-f]{8} in %s\): its network namespace and its host interface "
               r"are gone" % (re.escape(r_gone.ip()), re.escape(gone.path)))
    assert set(allocated(a)) == {"live"}
    assert allocated(a)["live"]["ip"] == r_live.ip()
    st = reconcile_status(a)
    assert st["runs"] >= 1 and st["released"] == {"gc": 0, "netns-gone": 1, "netns-replaced": 0}, st
    assert st["intervalSeconds"] == 60
    m = a.metrics()
    assert m.value("pinion_podnet_reconciled_total", reason="netns-gone") == 1
    assert ping(r_live.ip())
    assert cni(a, "DEL", "live", live).rc == 0


def test_live_attachments_keep_their_addresses_across_reconcile_passes(podnet_agent, netns):
    """Every pass keeps: a pod in a bind-mounted namespace; a pod whose namespace path was
    removed while a process still holds the namespace (its veth lives). Once that process
    exits, the namespace dies with the veth and the next pass releases it. A path recycled for
    a new namespace, and a path whose bind mount went (the file stays), do not keep theirs."""
    a = podnet_agent(network={"gc-grace": "0s", "reconcile-interval": "1s"})
    kept, held, recycled, unmounted = netns(), netns(), netns(), netns()
    ips = {}
    for cid, ns in (("kept", kept), ("held", held), ("recycled", recycled), ("unmounted", unmounted)):
        r = cni(a, "ADD", cid, ns)
        assert r.rc == 0, r
        ips[cid] = r.ip()
    holder = subprocess.Popen(["ip", "netns", "exec", held.name, "sleep", "300"])
    try:
        wait_until(lambda: "eth0" in subprocess.run(["nsenter", "-t", str(holder.pid), "-n", "ip", "-o", "link"],
                                                     capture_output=True, text=True).stdout, timeout=10)
        held.delete()
        assert not os.path.exists(held.path)
        recycled.delete()
        subprocess.run(["ip", "netns", "add", recycled.name], check=True)
        subprocess.run(["umount", unmounted.path], check=True)
        assert os.path.exists(unmounted.path)
        wait_until(lambda: set(allocated(a)) == {"kept", "held"}, timeout=15, desc="two allocations released")
        wait_runs(a, 2)
        assert set(allocated(a)) == {"kept", "held"}, allocated(a)
        assert ping(ips["kept"]) and ping(ips["held"])
        st = reconcile_status(a)["released"]
        assert st["netns-replaced"] == 2 and st["netns-gone"] == 0, st
    finally:
        holder.kill()
        holder.wait()
    wait_until(lambda: "held" not in allocated(a), timeout=15, desc="the held namespace's allocation released")
    assert set(allocated(a)) == {"kept"}
    assert reconcile_status(a)["released"]["netns-gone"] == 1
    assert allocated(a)["kept"]["ip"] == ips["kept"] and ping(ips["kept"])
    assert cni(a, "DEL", "kept", kept).rc == 0


def test_adds_racing_reconcile_passes_keep_their_addresses(podnet_agent, netns):
    """ADDs and DELs back to back while passes run every second with no grace: no live
    attachment ever loses its allocation (requests and passes take turns on the loop)."""
    a = podnet_agent(network={"gc-grace": "0s", "reconcile-interval": "1s"}, quarantine="0s")
    nss = [netns() for _ in range(8)]
    start_runs = reconcile_status(a)["runs"]
    rounds = 0
    while reconcile_status(a)["runs"] < start_runs + 3 or rounds < 2:
        rounds += 1
        for i, ns in enumerate(nss):
            assert cni(a, "ADD", "race%d" % i, ns).rc == 0
        assert set(allocated(a)) == {"race%d" % i for i in range(len(nss))}
        for i, ns in enumerate(nss[::2]):
            assert cni(a, "DEL", "race%d" % (2 * i), ns).rc == 0
    wait_runs(a, 2)
    live = allocated(a)
    assert set(live) == {"race%d" % i for i in range(1, len(nss), 2)}, live
    assert all(ping(x["ip"]) for x in live.values())
    assert sum(reconcile_status(a)["released"].values()) == 0


def test_reconcile_spares_attachments_younger_than_gc_grace(podnet_agent, netns):
    """An allocation younger than gc-grace is not reconciliation's, even with its namespace and
    veth gone (a namespace being set up must not be reaped); a reload with a shorter grace and
    another interval runs a pass at once, which releases it."""
    a = podnet_agent(network={"gc-grace": "1h", "reconcile-interval": "1s"})
    n = netns()
    r = cni(a, "ADD", "young", n)
    assert r.rc == 0, r
    n.delete()
    wait_veth_gone(r)
    wait_runs(a, 2)
    assert set(allocated(a)) == {"young"}
    mark = a.log_mark()
    a.write_config(sections={"network": {"pod-cidr": a.pod_cidr, "gc-grace": "0s", "reconcile-interval": "1h"}})
    a.sighup()
    a.wait_log(r"Configuration reloaded", since=mark)
    wait_until(lambda: not allocated(a), timeout=10, desc="the allocation released")
    st = reconcile_status(a)
    assert st["intervalSeconds"] == 3600 and st["released"]["netns-gone"] == 1, st


@pytest.mark.parametrize("args", [None, "IgnoreUnknown=1;K8S_POD_NAME=podman-web"], ids=["no-args", "pod-name-only"])
def test_attachments_without_namespace_or_uid_are_tracked_and_released(podnet_agent, netns, args):
    """A runtime that names no pod (none) or only K8S_POD_NAME (podman): the attachment is
    wired and allocated like any other; DEL, GC and reconciliation release it; the pod store
    gains no pod and no IP from it."""
    a = podnet_agent(network={"gc-grace": "0s"}, quarantine="0s")
    pods_before = a.pods()["pods"]
    by_del, by_gc, by_reconcile, kept = netns(), netns(), netns(), netns()
    added = {}
    for cid, ns in (("del", by_del), ("gc", by_gc), ("rec", by_reconcile), ("kept", kept)):
        r = added[cid] = cni(a, "ADD", cid, ns, args=args)
        assert r.rc == 0, r
        assert ping(r.ip())
    rec = allocated(a)
    assert all("namespace" not in x and "uid" not in x for x in rec.values()), rec
    if args:
        assert all(x["name"] == "podman-web" for x in rec.values()), rec
    assert a.pods()["pods"] == pods_before
    assert cni(a, "DEL", "del", by_del).rc == 0
    gc = cni(a, "GC", conf=pinion_conf(a, **{"cni.dev/valid-attachments": [
        {"containerID": "rec", "ifname": "eth0"}, {"containerID": "kept", "ifname": "eth0"}]}))
    assert gc.rc == 0, gc
    assert set(allocated(a)) == {"rec", "kept"}
    by_reconcile.delete()
    wait_veth_gone(added["rec"])
    a.stop()  # no DEL came for it: the next start's pass finds it gone
    a.start()
    wait_until(lambda: set(allocated(a)) == {"kept"}, timeout=10)
    m = a.metrics()
    assert m.value("pinion_podnet_reconciled_total", reason="netns-gone") == 1
    assert a.pods()["pods"] == pods_before
    a.wait_log(r"Releasing [0-9.]+ \(rec/eth0, .*\): its network namespace and its host interface are gone")


def test_reconcile_interval_is_checked(podnet_agent):
    a = podnet_agent()
    for bad in ("500ms", "48h", "soon"):
        a.write_config(sections={"network": {"pod-cidr": a.pod_cidr, "reconcile-interval": bad}})
        rc, out, err = a.check_config()
        assert rc == 78 and "reconcile-interval" in err, (bad, rc, out, err)
    a.write_config(sections={"network": {"pod-cidr": a.pod_cidr, "reconcile-interval": "0"}})
    rc, out, err = a.check_config()
    assert rc == 0, (rc, out, err)
