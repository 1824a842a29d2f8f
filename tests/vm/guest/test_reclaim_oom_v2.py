# SPDX-License-Identifier: MIT
"""reclaim is never the cause of an OOM kill, on cgroup v2 (v1: tests/integration/test_reclaim_oom.py),
and its throttle never makes the agent reclaim inside its own write.

The burst: right after dd (bs=1M, no fsync) filled a MemoryMax=64M service's page cache and a
second dd of 12M left what v2's per-cgroup dirty limits keep dirty (a few MiB), one mmap +
memset takes the cgroup's anonymous memory to the limit minus min-file (60M: above high,
57.6M) while the agent is frozen (SIGSTOP): faster than any agent reacts. v2's throttle is memory.high, which only throttles (the kernel reclaims and
delays the task), never OOM-kills: zero OOM kills, the burster exits 0. The control: the same
burst against memory.max set by hand to the throttle's level (no agent) is OOM-killed."""

import os
import re
import signal
import subprocess
import sys
import time

from conftest import memory_events, reclaim_target, journal, journal_cursor, main_pid, run, start_agent, wait_for

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
from reclaim_testlib import MiB, MemCgroup, burster_argv, dd_argv  # noqa: E402

LIMIT = 64 * MiB
HIGH = LIMIT * 90 // 100
HIGH_PAGES = HIGH - HIGH % 4096       # memory.high as the kernel keeps it
MIN_FILE = 4 * MiB
DIRTY = 12 * MiB
ROOT = "/sys/fs/cgroup"
STREAM_DIR = "/var/tmp"               # ext4 on the root disk: page cache, not shmem


def section(name, cgroup, **kw):
    keys = {"cgroup": cgroup, "high": "90%", "target": "70%", "min-file": "%dM" % (MIN_FILE // MiB),
            "interval": "1h"}
    keys.update(kw)
    return "[reclaim.%s]\n%s\n" % (name, "\n".join("%s=%s" % kv for kv in keys.items()))


def service(node, name, limit):
    """A transient service (sleep) with MemoryMax=limit; an OOM kill in it does not stop it
    (OOMPolicy=continue), so its memory.events can be read after."""
    unit = node.transient(name + ".service")
    run("systemd-run", "--unit=" + name, "-p", "MemoryMax=%d" % limit, "-p", "OOMPolicy=continue",
        "sleep", "infinity")
    return MemCgroup("/system.slice/" + unit, version=2, root=ROOT)



def run_dd(g, path, size):
    p = g.run(dd_argv(path, size), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err


def burst_after_dd(node, g, agent_target=None):
    """As in test_reclaim_oom.py: fill, freeze the agent (if any), 12M dirty, the burst to
    LIMIT - MIN_FILE of anonymous memory. Returns (exit status, output, burst bytes, memory.stat
    before it, memory.high and memory.max then)."""
    files = [os.path.join(STREAM_DIR, "pinion-oom-%s-%d" % (tag, time.monotonic_ns())) for tag in ("fill", "dirty")]
    node.on_cleanup(lambda: [os.unlink(f) for f in files if os.path.exists(f)])
    b = g.run(burster_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert b.stdout.readline().strip() == "ready"
    run_dd(g, files[0], 2 * LIMIT)
    pid = 0
    if agent_target:
        wait_for("the episode after dd done", lambda: reclaim_target(agent_target)["state"] != "reclaiming" and
                 g.value("memory.current") < HIGH)
        pid = main_pid()
        os.kill(pid, signal.SIGSTOP)
    try:
        # Room for the dirty dd under memory.high (the agent may have stopped just under it):
        # reclaimed here by hand, or the throttle would make dd write its own pages back.
        room = HIGH_PAGES - DIRTY - 2 * MiB
        if g.value("memory.current") > room:
            try:
                g.write("memory.reclaim", g.value("memory.current") - room)
            except OSError:
                pass  # EAGAIN: less than asked; the assertion on dirty says if it matters
        run_dd(g, files[1], DIRTY)
        before = g.stat()
        caps = (g.read("memory.high").strip(), g.read("memory.max").strip())
        size = LIMIT - MIN_FILE - before["anon"]
        size -= size % 4096
        b.stdin.write("%d\n" % size)
        b.stdin.flush()
        out, _ = b.communicate(timeout=600)
    finally:
        if pid:
            os.kill(pid, signal.SIGCONT)
    return b.returncode, out, size, before, caps


def test_a_burst_to_the_limit_minus_min_file_is_never_oom_killed_under_the_throttle(node):
    g = service(node, "pinion-test-oomon", LIMIT)
    node.conf("50-reclaim.conf", section("oom", g.name))
    start_agent()
    wait_for("throttle", lambda: reclaim_target("oom")["throttle"] == HIGH_PAGES)

    rc, out, size, before, caps = burst_after_dd(node, g, agent_target="oom")

    ev = memory_events(g)
    print("# v2 burst %.1f MiB (anon %.1f -> %.1f of limit 64 - min-file 4), dirty %.1f + writeback %.1f of file "
          "%.1f MiB before it; memory.high %s, memory.max %s; memory.events %s; peak %.1f; exit %s" % (
              size / MiB, before["anon"] / MiB, (before["anon"] + size) / MiB, before["file_dirty"] / MiB,
              before["file_writeback"] / MiB, before["file"] / MiB, caps[0], caps[1], ev, g.peak() / MiB, rc))
    assert caps == (str(HIGH_PAGES), str(LIMIT)), caps
    # v2 writes a cgroup's dirty pages back once they pass its own share of the dirty limits
    # (balance_dirty_pages per memcg): a 64M cgroup keeps a few MiB of the 12 dirty.
    assert before["file_dirty"] + before["file_writeback"] > 0, before
    assert ev["oom_kill"] == 0 and ev["oom"] == 0, ev
    assert rc == 0 and out.strip() == "done", (rc, out)


def test_the_same_burst_against_memory_max_at_the_throttle_level_is_oom_killed(node):
    g = service(node, "pinion-test-oomoff", HIGH_PAGES)

    rc, out, size, before, caps = burst_after_dd(node, g)

    ev = memory_events(g)
    print("# v2 control: burst %.1f MiB (anon %.1f -> %.1f), dirty %.1f MiB, memory.max %s (the throttle's level); "
          "memory.events %s; exit %s" % (size / MiB, before["anon"] / MiB, (before["anon"] + size) / MiB,
                                          before["file_dirty"] / MiB, caps[1], ev, rc))
    assert caps[1] == str(HIGH_PAGES)
    assert ev["oom_kill"] >= 1, ev
    assert rc == -9, (rc, out)


def test_a_throttle_engaged_above_high_is_written_above_usage_then_lowered(node):
    """The agent starts while usage is past high already: memory.high written below usage would
    make the agent reclaim the difference inside its write (its event loop stalled for as long
    as dirty cache takes). It writes usage + headroom first, and lowers it to high as its steps
    bring usage down."""
    g = service(node, "pinion-test-late", LIMIT)
    path = os.path.join(STREAM_DIR, "pinion-late-%d" % time.monotonic_ns())
    node.on_cleanup(lambda: os.path.exists(path) and os.unlink(path))
    run_dd(g, path, 2 * LIMIT)
    usage = g.value("memory.current")
    assert usage > HIGH, usage
    node.conf("50-reclaim.conf", section("late", g.name))
    node.conf("60-debug.conf", "[agent]\nlog-level=debug\n")
    cursor = journal_cursor()
    start_agent()
    wait_for("throttle at high", lambda: reclaim_target("late")["throttle"] == HIGH_PAGES)
    written = [int(m.group(1)) for m in (re.search(r"throttle: memory.high of \S+ at (\d+)", e.get("MESSAGE", ""))
                                         for e in journal("-u", "piniond.service", cursor=cursor)) if m]
    print("# usage %.1f MiB at start (high %.1f): memory.high written %s" % (
        usage / MiB, HIGH / MiB, ["%.1f" % (w / MiB) for w in written]))
    assert written and written[0] > HIGH_PAGES and written[0] >= usage - 2 * MiB, (written, usage)
    assert written[-1] == HIGH_PAGES and written == sorted(written, reverse=True), written
