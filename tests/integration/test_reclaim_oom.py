# SPDX-License-Identifier: MIT
"""reclaim is never the cause of an OOM kill, on real v1 memory cgroups (v2 in the VM guest:
tests/vm/guest/test_reclaim_oom_v2.py).

On v1 the throttle is a hard limit (memory.limit_in_bytes lowered). The burst: right after dd
(bs=1M, no fsync: its cache dirty) filled the cgroup's page cache, one mmap + memset takes the
cgroup's anonymous memory to the original limit minus min-file at once — faster than any
agent reacts. With the throttle engaged it must pass without an OOM kill; the same burst
against a plain hard limit at the throttle's old level (halfway between high and the limit,
set by hand, no agent) is OOM-killed: that is the hazard the throttle's level avoids (it is
never below the limit - min-file + headroom, see plan_throttle_level()). The agent is frozen
(SIGSTOP) for the burst: what is tested is the level in force, not how fast the agent
releases it."""

import os
import signal
import subprocess

from pinion_testlib import diag, wait_until
from reclaim_testlib import MiB, burster_argv, dd_argv, memcg_factory, stream_dir  # noqa: F401

LIMIT = 64 * MiB
HIGH = 70           # percent: the old level (halfway to the limit) is then far below limit - min-file
TARGET = 50
MIN_FILE = 4 * MiB
DIRTY = 12 * MiB    # fits under high after the agent's reclaim: no episode writes it back
HEADROOM = max(LIMIT // 64, MiB)
PAGE = os.sysconf("SC_PAGE_SIZE")


def pages(v):
    return v - v % PAGE


def high_bytes(limit=LIMIT, high=HIGH):
    return limit // 100 * high + limit % 100 * high // 100


# The throttle's old level: just under halfway between high and the limit.
OLD_LEVEL = pages(high_bytes() + (LIMIT - high_bytes()) // 2 - 1)
# Now never below what anonymous and kernel memory may need: the limit - min-file + headroom.
NEW_LEVEL = pages(max(high_bytes() + (LIMIT - high_bytes()) // 2 - 1, LIMIT - MIN_FILE + HEADROOM))


def section(cgroup):
    return {"reclaim.oom": {"cgroup": cgroup, "high": "%d%%" % HIGH, "target": "%d%%" % TARGET,
                            "min-file": "%dM" % (MIN_FILE // MiB), "interval": "1h"}}


def oom_kills(g):
    return int(dict(line.split() for line in g.read("memory.oom_control").splitlines())["oom_kill"])


def target(a):
    return a.get_json("/v1/reclaim")["targets"][0]


def run_dd(g, path, size):
    p = g.run(dd_argv(path, size), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err


def burst_after_dd(g, directory, agent=None):
    """dd of twice the limit fills the page cache (the file stays until the end: deleting it
    would drop its cache), a second dd of DIRTY leaves that much of it dirty, then the burst
    takes the cgroup's anonymous memory to LIMIT - MIN_FILE. The agent is frozen (SIGSTOP) from the end of
    the first dd until the burster is done: the burst comes faster than the agent reacts,
    however fast that is. Returns (burster's exit status, its output, burst bytes, the cgroup's
    stat just before the burst, the limit in force then)."""
    b = g.run(burster_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert b.stdout.readline().strip() == "ready"
    fill = os.path.join(directory, "fill")
    run_dd(g, fill, 2 * LIMIT)
    # Its cache clean, so that what reclaim meets next is clean pages: reclaim that meets dirty
    # ones wakes the flusher, which would write the second dd's pages back too.
    fd = os.open(fill, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    if agent:
        # Its episode done (usage under high again), then frozen.
        wait_until(lambda: target(agent)["state"] != "reclaiming" and g.value("memory.usage_in_bytes") < high_bytes(),
                   desc="the episode after dd done")
        agent.send_signal(signal.SIGSTOP)
    try:
        run_dd(g, os.path.join(directory, "dirty"), DIRTY)
        before = g.stat()
        before["kmem"] = g.value("memory.kmem.usage_in_bytes")
        in_force = g.limit()
        size = pages(LIMIT - MIN_FILE - before["total_rss"])
        b.stdin.write("%d\n" % size)
        b.stdin.flush()
        out, _ = b.communicate(timeout=300)
    finally:
        if agent:
            agent.send_signal(signal.SIGCONT)
    return b.returncode, out, size, before, in_force


def test_a_burst_to_the_limit_minus_min_file_is_never_oom_killed_under_the_throttle(agent_factory, memcg_factory,
                                                                                    stream_dir):
    g = memcg_factory("oomon", LIMIT)
    a = agent_factory(config=section(g.name))
    t = wait_until(lambda: (lambda t: t if t["state"] == "ok" and t["throttle"] else None)(target(a)),
                   desc="throttle engaged")
    assert t["throttle"] == NEW_LEVEL == g.limit() and t["limit"] == LIMIT, (t, NEW_LEVEL)
    assert OLD_LEVEL < LIMIT - MIN_FILE < NEW_LEVEL
    g.reset_peak()

    rc, out, size, before, in_force = burst_after_dd(g, stream_dir, agent=a)
    peak = g.peak()

    t = target(a)
    diag("v1 burst %.1f MiB (anon %.1f -> %.1f of limit %d - min-file %d), dirty %.1f + writeback %.1f MiB of "
         "cache %.1f MiB, kmem %.1f MiB before it; limit in force %.1f MiB (old level %.1f); failcnt %d, oom_kill %d, peak %.1f, "
         "lowered-limit hits %d, state %s (%s)" % (
             size / MiB, before["total_rss"] / MiB, (before["total_rss"] + size) / MiB, LIMIT // MiB,
             MIN_FILE // MiB, before["total_dirty"] / MiB, before["total_writeback"] / MiB,
             before["total_cache"] / MiB, before["kmem"] / MiB, in_force / MiB, OLD_LEVEL / MiB, g.failcnt(), oom_kills(g),
             peak / MiB, t["lowered_limit_hits"], t["state"], t.get("reason")))
    # The burst met the throttle, not a released one: the agent was frozen, usage never went
    # past the throttle.
    assert in_force == NEW_LEVEL and peak <= NEW_LEVEL, (in_force, peak)
    assert before["total_cache"] > 2 * MIN_FILE and before["total_dirty"] + before["total_writeback"] >= DIRTY // 2, before
    assert oom_kills(g) == 0
    assert rc == 0 and out.strip() == "done", (rc, out)


def test_the_same_burst_against_a_hard_limit_at_the_old_level_is_oom_killed(memcg_factory, stream_dir):
    """The control: no agent, the limit set by hand to where the throttle used to be."""
    g = memcg_factory("oomoff", LIMIT)
    g.write("memory.limit_in_bytes", OLD_LEVEL)

    rc, out, size, before, in_force = burst_after_dd(g, stream_dir)

    diag("v1 control: burst %.1f MiB (anon %.1f -> %.1f, kmem %.1f, dirty %.1f), hard limit %.1f MiB (the old level): exit %s, oom_kill %d" % (
        size / MiB, before["total_rss"] / MiB, (before["total_rss"] + size) / MiB, before["kmem"] / MiB, before["total_dirty"] / MiB, in_force / MiB, rc,
        oom_kills(g)))
    assert in_force == OLD_LEVEL
    assert before["total_cache"] > 2 * MIN_FILE and before["total_dirty"] + before["total_writeback"] >= DIRTY // 2, before
    assert oom_kills(g) >= 1
    assert rc == -9, (rc, out)

