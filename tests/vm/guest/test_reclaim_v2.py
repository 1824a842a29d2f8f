# SPDX-License-Identifier: MIT
"""reclaim on cgroup v2, on a systemd node: targets on a service's cgroup, a scope's and a pod
slice's as the kubelet's systemd driver makes it, each with MemoryMax=64M, and a page-cache stream of 4x the limit written by dd at full speed
(1 MiB writes, no fsync) and read back.

The agent runs as the installed piniond.service (its sandbox and capability set as shipped).
It lowers memory.high to high while the floor (anon + min-file + headroom) is below high — the
kernel then reclaims in the writer's own context before it returns to user space — and
reclaims toward target on PSI and memory.events wake-ups (the safety-net timer is an hour away
here). memory.peak (Linux 5.19+) is the measure; it cannot be reset on 6.1, so every test makes
its own units."""

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import api, memory_events, reclaim_target, journal, journal_cursor, main_pid, run, start_agent, systemctl, unit_property, wait_for

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
from reclaim_testlib import MiB, MemCgroup, anon_argv, dd_argv  # noqa: E402

LIMIT = 64 * MiB
HIGH = LIMIT * 90 // 100
HIGH_PAGES = HIGH - HIGH % 4096       # memory.high as the kernel keeps it
ROOT = "/sys/fs/cgroup"
STREAM_DIR = "/var/tmp"               # ext4 on the root disk: page cache, not shmem


def section(name, cgroup, **kw):
    keys = {"cgroup": cgroup, "high": "90%", "target": "70%", "min-file": "16M", "interval": "1h"}
    keys.update(kw)
    return "[reclaim.%s]\n%s\n" % (name, "\n".join("%s=%s" % kv for kv in keys.items()))


def service(node, name, *props):
    """A transient service (sleep) with MemoryMax=64M: its cgroup, as a MemCgroup."""
    unit = node.transient(name + ".service")
    run("systemd-run", "--unit=" + name, "-p", "MemoryMax=%d" % LIMIT, *props, "sleep", "infinity")
    return MemCgroup("/system.slice/" + unit, version=2, root=ROOT)


def scope(node, name):
    """A transient scope (systemd-run --scope around a sleep) with MemoryMax=64M."""
    unit = node.transient(name + ".scope")
    subprocess.Popen(["systemd-run", "--scope", "--unit=" + name, "-p", "MemoryMax=%d" % LIMIT,
                      "sleep", "infinity"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    g = MemCgroup("/system.slice/" + unit, version=2, root=ROOT)
    wait_for("the scope's cgroup", lambda: os.path.exists(os.path.join(g.dir, "memory.max")))
    return g


def pod_slice(node, uid):
    """A pod's slice as the kubelet's systemd driver makes it: a transient slice (D-Bus
    StartTransientUnit) below kubepods-burstable.slice with MemoryMax=64M, which systemd nests by
    the dash rule, and a scope in it for the pod's processes. (the slice, the scope) as MemCgroups."""
    unit = node.transient("kubepods-burstable-pod%s.slice" % uid)
    run("busctl", "call", "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
        "StartTransientUnit", "ssa(sv)a(sa(sv))", unit, "fail", "1", "MemoryMax", "t", str(LIMIT), "0")
    g = MemCgroup("/kubepods.slice/kubepods-burstable.slice/" + unit, version=2, root=ROOT)
    wait_for("the slice's cgroup", lambda: os.path.exists(os.path.join(g.dir, "memory.max")))
    scope_unit = node.transient("pinion-test-pod%s.scope" % uid)
    subprocess.Popen(["systemd-run", "--scope", "--unit=" + scope_unit, "--slice=" + unit, "sleep", "infinity"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = MemCgroup("%s/%s" % (g.name, scope_unit), version=2, root=ROOT)
    wait_for("the pod's scope", lambda: os.path.exists(os.path.join(procs.dir, "cgroup.procs")))
    return g, procs



def stream(g, total):
    """dd at full speed into a new file, then the file read back, both inside g (a leaf)."""
    path = os.path.join(STREAM_DIR, "pinion-dd-%d" % time.monotonic_ns())
    try:
        p = g.run(dd_argv(path, total), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        p = g.run(["cat", path], stdout=subprocess.DEVNULL)
        assert p.wait(300) == 0
        return err.strip().splitlines()[-1]
    finally:
        if os.path.exists(path):
            os.unlink(path)


def memory_high(unit):
    """What systemd says is in force: MemoryHigh= of the unit, in bytes (or "infinity")."""
    return unit_property(unit, "MemoryHigh")


def warnings_since(cursor):
    return [e.get("MESSAGE") for e in journal("-u", "piniond.service", "-p", "warning", cursor=cursor)]


def test_without_agent_dd_reaches_the_limit(node):
    g = service(node, "pinion-test-noagent")
    stream(g, 4 * LIMIT)
    assert g.peak() >= LIMIT - MiB, g.peak()
    assert memory_events(g)["max"] > 0, memory_events(g)


@pytest.mark.parametrize("kind", ["service", "scope", "pod-slice"])
def test_agent_keeps_a_dd_stream_at_or_under_95_percent(node, kind):
    """A service's cgroup, a scope's, and a pod's slice of the kubelet's systemd driver (the
    stream runs in a scope inside it): each is its unit's, and the throttle is the unit's
    MemoryHigh=."""
    if kind == "pod-slice":
        g, procs = pod_slice(node, "4f7c")
        unit = node.units[-2]
    else:
        g = service(node, "pinion-test-w", "-p", "MemoryHigh=62M") if kind == "service" else scope(node, "pinion-test-s")
        procs, unit = g, node.units[-1]
    original_high = g.read("memory.high").strip()
    original_property = memory_high(unit)
    node.conf("50-reclaim.conf", section("w", g.name))
    cursor = journal_cursor()
    start_agent()
    t = wait_for("target ok", lambda: (lambda t: t if t["state"] == "ok" and t["throttle"] else None)(reclaim_target("w")))
    assert t["cgroup_version"] == 2 and t["limit"] == LIMIT and t["throttle"] == HIGH_PAGES, t
    # The unit's own cgroup: the throttle is its MemoryHigh=, set through systemd.
    assert (t["owner"], t["unit"]) == ("systemd", unit), t
    wait_for("the throttle in force", lambda: int(g.read("memory.high")) == HIGH_PAGES)
    assert memory_high(unit) == str(HIGH_PAGES)

    summary = stream(procs, 4 * LIMIT)

    peak, ev = g.peak(), memory_events(g)
    t = reclaim_target("w")
    print("# %s: dd %s; peak %.1f of 64 MiB (%.1f%%), memory.events %s, reclaims %d, wake-ups %s" % (
        kind, summary, peak / MiB, 100.0 * peak / LIMIT, ev, t["reclaims"], t["wakeups"]))
    assert peak <= LIMIT * 95 // 100, "peak %.1f%% of the limit" % (100.0 * peak / LIMIT)
    assert ev["max"] == 0 and ev["oom_kill"] == 0, ev
    # Woken by the kernel's notifications and the looks that follow a writer's pace after each
    # episode, never by the timer (an hour away).
    assert t["reclaims"] >= 1 and t["wakeups"]["timer"] == 0, t
    assert t["wakeups"]["psi"] + t["wakeups"]["memory-events"] >= 1, t
    assert t["wakeups"]["psi"] + t["wakeups"]["memory-events"] + t["wakeups"]["settle"] >= t["reclaims"], t
    _, metrics = api("/metrics")
    assert 'pinion_reclaim_wakeups_total{target="w",source="memory-events"}' in metrics
    assert not warnings_since(cursor), warnings_since(cursor)

    systemctl("stop", "piniond.service")
    assert g.read("memory.high").strip() == original_high and memory_high(unit) == original_property
    assert not os.listdir("/var/lib/pinion/reclaim")


def test_the_psi_trigger_is_armed_without_a_warning(node):
    """The unit withholds CAP_SYS_RESOURCE, so the kernel takes only PSI windows of whole 2 s:
    the default is one; a shorter one from the config is rounded up, said once at info (Debian's
    6.1 refused 'some 50000 1000000' with EINVAL, warned at every check)."""
    g = service(node, "pinion-test-psi")
    node.conf("50-reclaim.conf", section("psi", g.name))
    cursor = journal_cursor()
    start_agent()
    wait_for("target ok", lambda: reclaim_target("psi")["state"] == "ok")
    assert not warnings_since(cursor), warnings_since(cursor)
    msgs = [e.get("MESSAGE", "") for e in journal("-u", "piniond.service", cursor=cursor)]
    assert not [m for m in msgs if "PSI trigger" in m], msgs

    node.conf("50-reclaim.conf", section("psi", g.name, psi="some 50000 1000000"))
    systemctl("restart", "piniond.service")
    wait_for("target ok", lambda: reclaim_target("psi")["state"] == "ok")
    msgs = [e.get("MESSAGE", "") for e in journal("-u", "piniond.service", cursor=cursor)]
    assert [m for m in msgs if "refused the PSI trigger 'some 50000 1000000'" in m and
            "using 'some 100000 2000000'" in m], msgs
    assert not warnings_since(cursor), warnings_since(cursor)


def test_memory_high_comes_back_after_kill9_and_restart(node):
    """The service's cgroup is its unit's: the throttle and every restore go through systemd
    (MemoryHigh=, a runtime property), so `systemctl show` agrees with memory.high throughout."""
    g = service(node, "pinion-test-kill", "-p", "MemoryHigh=62M")
    unit = node.units[-1]
    node.conf("50-reclaim.conf", section("kill", g.name))
    start_agent()
    wait_for("throttle", lambda: reclaim_target("kill")["throttle"] == HIGH_PAGES)
    t = reclaim_target("kill")
    assert (t["owner"], t["unit"], t["owner_error"]) == ("systemd", unit, None), t
    # systemd's own socket, no D-Bus daemon needed.
    assert not [e for e in journal("-u", "piniond.service") if "private socket" in e.get("MESSAGE", "")]
    wait_for("systemd says the throttle", lambda: memory_high(unit) == str(HIGH_PAGES))
    assert int(g.read("memory.high")) == HIGH_PAGES
    record = "/var/lib/pinion/reclaim/kill.json"
    assert json.load(open(record)) == {"version": 1, "cgroup": g.name, "high": 62 * MiB}

    # kill -9: the lowered memory.high stays (nothing could put it back), the record too.
    pid = main_pid()
    cursor = journal_cursor()
    systemctl("kill", "-s", "KILL", "--kill-who=main", "piniond.service")
    wait_for("piniond gone", lambda: not os.path.exists("/proc/%d" % pid) or main_pid() != pid)
    assert int(g.read("memory.high")) == HIGH_PAGES and memory_high(unit) == str(HIGH_PAGES)
    # systemd restarts it (Restart=on-failure): the start puts the original back first, then
    # the target lowers it again.
    wait_for("restarted", lambda: main_pid() not in (0, pid), timeout=30)
    wait_for("restore logged", lambda: [e for e in journal("-u", "piniond.service", cursor=cursor)
                                        if "Restored memory.high of %s to %d (was %d" % (g.name, 62 * MiB, HIGH_PAGES)
                                        in e.get("MESSAGE", "") and "through systemd" in e.get("MESSAGE", "")])
    wait_for("throttle again", lambda: reclaim_target("kill")["throttle"] == HIGH_PAGES)
    wait_for("systemd says the throttle again", lambda: memory_high(unit) == str(HIGH_PAGES))

    # Killed again, and restarted without the section: memory.high is the original for good.
    os.unlink("/etc/pinion/conf.d/50-reclaim.conf")
    pid = main_pid()
    systemctl("kill", "-s", "KILL", "--kill-who=main", "piniond.service")
    wait_for("restarted", lambda: main_pid() not in (0, pid), timeout=30)
    wait_for("memory.high restored", lambda: g.read("memory.high").strip() == str(62 * MiB))
    assert memory_high(unit) == str(62 * MiB)
    # The record goes right after the write that restored the value (it must outlive the write:
    # a kill between the two restores again at the next start).
    wait_for("record removed", lambda: not os.path.exists(record))
    assert unit_property("piniond.service", "ActiveState") == "active"


def test_daemon_reload_keeps_the_throttle_and_set_property_is_the_new_original(node):
    """The throttle is a runtime MemoryHigh= of the unit: a daemon-reload (which writes every
    unit's memory.high again) keeps it, and systemctl show says it. An operator's set-property
    still wins: it wakes the agent (inotify on memory.high), which takes it as the original and
    lowers memory.high again, through systemd. Stopping the agent puts the original back, and
    systemctl show agrees."""
    g = service(node, "pinion-test-sd", "-p", "MemoryHigh=62M")
    unit = node.units[-1]
    node.conf("50-reclaim.conf", section("sd", g.name))
    cursor = journal_cursor()
    start_agent()
    wait_for("throttle", lambda: reclaim_target("sd")["throttle"] == HIGH_PAGES)
    wait_for("systemd says the throttle", lambda: memory_high(unit) == str(HIGH_PAGES))
    systemctl("daemon-reload")
    assert memory_high(unit) == str(HIGH_PAGES) and int(g.read("memory.high")) == HIGH_PAGES
    assert reclaim_target("sd")["throttle"] == HIGH_PAGES
    systemctl("set-property", "--runtime", unit, "MemoryHigh=63M")
    wait_for("the new original recorded", lambda: json.load(open("/var/lib/pinion/reclaim/sd.json")) ==
             {"version": 1, "cgroup": g.name, "high": 63 * MiB})
    wait_for("the throttle again", lambda: int(g.read("memory.high")) == HIGH_PAGES)
    wait_for("systemd says the throttle again", lambda: memory_high(unit) == str(HIGH_PAGES))
    msgs = [e.get("MESSAGE", "") for e in journal("-u", "piniond.service", cursor=cursor)]
    assert not [m for m in msgs if "set by someone else" in m and "%d" % (62 * MiB) in m], msgs
    t = reclaim_target("sd")
    assert t["wakeups"]["cap"] >= 1 and t["wakeups"]["timer"] == 0 and t["owner"] == "systemd", t
    _, metrics = api("/metrics")
    assert 'pinion_reclaim_systemd_call_failures_total{target="sd"} 0' in metrics
    assert not warnings_since(cursor), warnings_since(cursor)
    systemctl("stop", "piniond.service")
    assert int(g.read("memory.high")) == 63 * MiB and memory_high(unit) == str(63 * MiB)
    systemctl("daemon-reload")
    assert int(g.read("memory.high")) == 63 * MiB and memory_high(unit) == str(63 * MiB)


def test_a_cgroup_no_unit_owns_is_written_directly(node):
    """A plain directory below system.slice is no unit's: its memory.high is the agent's to
    write, and it is written directly (systemd is not asked to set anything)."""
    g = MemCgroup("/system.slice/pinion-test-plain", version=2, root=ROOT)
    try:
        g.create(LIMIT)
        node.conf("50-reclaim.conf", section("plain", g.name))
        start_agent()
        t = wait_for("throttle", lambda: (lambda t: t if t["throttle"] == HIGH_PAGES else None)(reclaim_target("plain")))
        assert (t["owner"], t["unit"]) == ("cgroupfs", None), t
        assert int(g.read("memory.high")) == HIGH_PAGES
        systemctl("stop", "piniond.service")
        assert g.read("memory.high").strip() == "max"
    finally:
        systemctl("stop", "piniond.service", check=False)
        g.remove()


def test_anonymous_memory_gets_the_original_memory_high_back(node):
    """When anonymous memory makes high unreachable, the throttle goes: an allocation past
    memory.high would otherwise be throttled with nothing left to reclaim."""
    g = service(node, "pinion-test-anon")
    node.conf("50-reclaim.conf", section("anon", g.name))
    start_agent()
    wait_for("throttle", lambda: reclaim_target("anon")["throttle"] == HIGH_PAGES)
    # 52 MiB and the interpreter: over high (57.6 MiB) with nothing to reclaim.
    holder = g.run(anon_argv(52 * MiB), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        t = wait_for("unreachable", lambda: (lambda t: t if t["state"] == "unreachable" else None)(reclaim_target("anon")))
        assert t["throttle"] is None, t
        # Given back through systemd (the throttle ends at once, memory.high once systemd writes it).
        wait_for("the original memory.high", lambda: g.read("memory.high").strip() == "max")
        assert memory_high(node.units[-1]) == "infinity"
        assert "leave no room to reach" in t["reason"], t
        assert holder.poll() is None and memory_events(g)["oom_kill"] == 0
    finally:
        holder.kill()
        holder.wait()


def test_a_refusal_by_systemd_is_reported_and_changes_nothing(node):
    """systemd refuses to set properties of a unit masked while it runs (UnitMasked): the
    agent says so (a warning with the D-Bus error, the failure counter, owner_error), memory.high
    keeps the original, and once the unit is unmasked the retry after the backoff lowers it
    through systemd after all."""
    unit = "pinion-test-masked.service"
    path = "/run/systemd/system/" + unit
    with open(path, "w") as f:
        f.write("[Service]\nExecStart=/bin/sleep infinity\nMemoryMax=%d\nMemoryHigh=%d\n" % (LIMIT, 62 * MiB))

    def undo():
        systemctl("unmask", unit, check=False)
        systemctl("stop", unit, check=False)
        os.unlink(path)
        systemctl("daemon-reload", check=False)
    node.on_cleanup(undo)
    systemctl("daemon-reload")
    systemctl("start", unit)
    systemctl("mask", unit)
    systemctl("daemon-reload")
    assert (unit_property(unit, "LoadState"), unit_property(unit, "ActiveState")) == ("masked", "active")
    g = MemCgroup("/system.slice/" + unit, version=2, root=ROOT)
    assert g.value("memory.max") == LIMIT and g.value("memory.high") == 62 * MiB

    node.conf("50-reclaim.conf", section("masked", g.name))
    cursor = journal_cursor()
    start_agent()
    t = wait_for("the refusal", lambda: (lambda t: t if t["owner_error"] else None)(reclaim_target("masked")), timeout=90)
    assert (t["owner"], t["unit"]) == ("systemd", unit), t
    assert "UnitMasked" in t["owner_error"], t
    refused = [m for m in warnings_since(cursor) if "systemd refused MemoryHigh=" in m]
    assert refused and unit in refused[0] and "org.freedesktop.systemd1.UnitMasked" in refused[0], warnings_since(cursor)
    _, metrics = api("/metrics")
    failures = [l for l in metrics.splitlines() if l.startswith('pinion_reclaim_systemd_call_failures_total{target="masked"}')]
    assert failures and float(failures[0].split()[-1]) >= 1, failures
    # Nothing of ours is in force: systemd wrote nothing, and the agent did not write behind it.
    assert g.value("memory.high") == 62 * MiB

    systemctl("unmask", unit)
    systemctl("daemon-reload")
    wait_for("the throttle through systemd after the unmask", lambda: memory_high(unit) == str(HIGH_PAGES), timeout=180)
    assert g.value("memory.high") == HIGH_PAGES
    wait_for("owner_error cleared", lambda: reclaim_target("masked")["owner_error"] is None)
    systemctl("stop", "piniond.service")
    assert g.value("memory.high") == 62 * MiB and memory_high(unit) == str(62 * MiB)
