# SPDX-License-Identifier: MIT
"""The agent's memory guard under the shipped unit, on cgroup v2: it finds its own cgroup
(system.slice/piniond.service), takes the lower of MemoryHigh= and MemoryMax= as its limit,
and above [agent] memory-watermark a CNI ADD is refused with the reason while a DEL is not.
(The 250-pod burst under 32 and 16 MiB runs on the build host, v1:
tests/integration/test_self_memory_limit.py.)"""

import re

from conftest import (UNIT, api, cni, journal_cursor, node, start_agent, systemctl, unit_property,  # noqa: F401
                      wait_for_journal)

MiB = 1 << 20


def metric(text, name, **labels):
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    rx = re.compile(r"^%s%s ([0-9.e+-]+)$" % (re.escape(name), re.escape("{%s}" % want) if want else ""), re.M)
    m = rx.search(text)
    return float(m.group(1)) if m else None


def test_guard_takes_the_units_limit(node):
    node.healthy()
    cursor = journal_cursor()
    pid = start_agent()
    high, top = int(unit_property(UNIT, "MemoryHigh")), int(unit_property(UNIT, "MemoryMax"))
    assert (high, top) == (56 * MiB, 64 * MiB), (high, top)
    e = wait_for_journal("the memory guard's start line", f"_PID={pid}", cursor=cursor, pattern=r"^Memory: ")
    assert re.match(r"^Memory: limit 56\.0 MiB \(/sys/fs/cgroup/system\.slice/piniond\.service\), [0-9.]+ MiB "
                    r"in use; new work is refused above 90%$", e["MESSAGE"]), e["MESSAGE"]
    code, text = api("/metrics")
    assert code == 200
    assert metric(text, "pinion_memory_limit_bytes") == 56 * MiB, text
    in_use = metric(text, "pinion_memory_in_use_bytes")
    assert 0 < in_use < 0.9 * 56 * MiB, in_use


def test_add_refused_above_the_watermark_del_not(node):
    node.healthy(extra="\n[agent]\nmemory-watermark=1%\n")
    cursor = journal_cursor()
    pid = start_agent()
    ns = node.netns("pinion-test-selfmem")
    rc, out, err = cni("ADD", ns, "c" * 64, "uid-selfmem-1")
    assert rc != 0 and out and out["code"] == 11, (rc, out, err)
    assert out["msg"] == "agent at its memory limit", out
    assert re.match(r"^[0-9.]+ MiB in use of the limit 56\.0 MiB; new work is refused above 1% until it is "
                    r"below 0%; try again later$", out["details"]), out
    wait_for_journal("the warning", f"_PID={pid}", cursor=cursor, pattern=r"^Memory: .* refusing new work")
    rc, out, err = cni("DEL", ns, "c" * 64, "uid-selfmem-1")
    assert rc == 0, (rc, out, err)
    code, text = api("/metrics")
    assert metric(text, "pinion_memory_refused_total", work="cni-add") == 1, text
    systemctl("stop", "piniond.service")
