# SPDX-License-Identifier: MIT
"""Least privilege at run time: piniond keeps only the Linux capabilities its enabled modules
need ([agent] drop-capabilities, default yes) — in its permitted, effective, inheritable, ambient
and bounding sets — so neither it nor the commands it runs (configsync's on-change) can use
the others. Read back from /proc/PID/status of the real daemon and of an on-change command."""

import os
import re
import stat

from pinion_testlib import wait_until
from configsync_testlib import config_section, get_config, nginx, test_ca, write_bundle  # noqa: F401

CAP = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_FOWNER": 3, "CAP_KILL": 5, "CAP_SETUID": 7,
       "CAP_SETPCAP": 8, "CAP_NET_ADMIN": 12, "CAP_SYS_MODULE": 16, "CAP_SYS_PTRACE": 19,
       "CAP_SYS_ADMIN": 21}
CORE = set()                    # the API socket's group is an ACL entry: nothing needed
RECLAIM = {"CAP_DAC_OVERRIDE"}  # cgroups delegated to users; any pod may opt in: always kept
PODNET = {"CAP_NET_ADMIN", "CAP_SYS_ADMIN"}
# on-change commands signalling other uids; dests in directories of other owners
CONFIGSYNC = {"CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL"}


def caps_of(status_text):
    """{"CapEff": set of bit numbers, ...} from a /proc/PID/status text."""
    sets = {}
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        value = int(re.search(r"^%s:\s*([0-9a-f]+)$" % key, status_text, re.M).group(1), 16)
        sets[key] = {bit for bit in range(64) if value >> bit & 1}
    return sets


def proc_caps(pid):
    with open("/proc/%d/status" % pid) as f:
        return caps_of(f.read())


def bits(names):
    return {CAP[n] for n in names}


def our_permitted():
    return proc_caps(os.getpid())["CapPrm"]


def assert_kept_exactly(a, names):
    want = bits(names) & our_permitted()
    c = proc_caps(a.pid)
    assert c["CapPrm"] == want and c["CapEff"] == want, (c, names)
    assert c["CapInh"] == set() and c["CapAmb"] == set(), c
    # The test runs as root with CAP_SETPCAP: the bounding set goes down as well.
    assert c["CapBnd"] == want, c
    a.wait_log(r"Capabilities: keeping %s; dropped .* \(bounding set too\)" % " ".join(
        sorted(names, key=lambda n: CAP[n])))


def test_no_module_enabled_keeps_only_the_core_and_reclaim(agent_factory):
    a = agent_factory()
    assert_kept_exactly(a, CORE | RECLAIM)
    assert a.health()["status"] == "ok"


def test_podnet_adds_net_admin_and_sys_admin(agent_factory):
    a = agent_factory(config={"network": {"pod-cidr": "10.231.0.0/24"}})
    assert_kept_exactly(a, CORE | RECLAIM | PODNET)


def test_drop_capabilities_no_keeps_what_piniond_was_given(agent_factory):
    a = agent_factory(config={"agent": {"drop-capabilities": "no"}})
    c = proc_caps(a.pid)
    assert c["CapPrm"] == our_permitted() and CAP["CAP_SYS_MODULE"] in c["CapEff"], c
    a.wait_log(r"Keeping every capability piniond was started with")


def test_reload_that_needs_a_dropped_capability_says_restart(agent_factory):
    a = agent_factory()
    mark = a.log_mark()
    a.write_config(sections={"network": {"pod-cidr": "10.231.1.0/24"}})
    a.sighup()
    a.wait_log(r"\[podnet\].*the new settings need CAP_NET_ADMIN CAP_SYS_ADMIN, which piniond dropped at start"
               r".*restart piniond", since=mark)
    # Still the same set: a reload never widens what the process holds.
    assert_kept_exactly(a, CORE | RECLAIM)


def test_on_change_command_cannot_regain_dropped_capabilities(agent_factory, nginx, test_ca, tmp_path):
    """Root's exec would get every capability of the bounding set back: the bounding set is
    lowered, so a command configsync runs holds at most what configsync and the rest kept."""
    out = str(tmp_path / "child-status")
    script = str(tmp_path / "hook.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\ncat /proc/self/status > %s.tmp && mv %s.tmp %s\n" % (out, out, out))
    os.chmod(script, stat.S_IRWXU)
    dest = str(tmp_path / "dest")
    write_bundle(nginx.root, "app", {"a.txt": b"a\n"}, "v1")
    a = agent_factory(config={"config.app": config_section(nginx.url("app/manifest.json"), dest, test_ca,
                                                           **{"on-change": script})})
    wait_until(lambda: get_config(a, "app")["version"] == "v1", 15, desc="bundle v1")
    wait_until(lambda: os.path.exists(out), 15, desc="on-change ran")
    with open(out) as f:
        child = caps_of(f.read())
    kept = bits(CORE | RECLAIM | CONFIGSYNC) & our_permitted()
    assert_kept_exactly(a, CORE | RECLAIM | CONFIGSYNC)
    assert child["CapBnd"] == kept, child
    assert child["CapPrm"] <= kept and child["CapEff"] <= kept, child
    for name in ("CAP_SYS_ADMIN", "CAP_SYS_MODULE", "CAP_SETUID", "CAP_SYS_PTRACE"):
        assert CAP[name] not in child["CapEff"] | child["CapBnd"], (name, child)
