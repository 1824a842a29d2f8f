# SPDX-License-Identifier: MIT
"""The shipped unit's sandbox, as the real systemd applies it, and the modules still doing their
work inside it: systemd's own exposure score of the loaded unit, the capabilities the daemon
holds (what its enabled modules need) and what a command it runs can hold, the modes of what
pods read under UMask=0077, a cgroup tree read-only but where reclaim writes, and the IP
address allow list."""

import grp
import json
import os
import re
import stat
import sys

from conftest import (OUT, SOCKET, STATE_DIR, UNIT, api_json, journal, journal_cursor, main_pid, node, proc_caps,
                      run, start_agent, systemctl, unit_capability_bounding_set, unit_property, wait_for,
                      wait_for_journal, write_bundle)  # noqa: F401

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
from pinion_testlib import CONNECT_PROGRAM  # noqa: E402

# systemd-analyze security's score of the loaded unit (0 = locked down, 10 = exposed).
EXPOSURE_BOUND = 2.5

# What each part asks for; the agent keeps what the unit grants of it.
RECLAIM = {"CAP_DAC_OVERRIDE"}  # cgroups delegated to users (any pod may opt in)
PODNET = {"CAP_NET_ADMIN", "CAP_SYS_ADMIN"}
CONFIGSYNC = {"CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL"}  # dests of other owners; on-change
# Identity and the API socket hand files over with ACL entries: nothing.
GRANTED = {"CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_KILL"}


def test_exposure_score_of_the_loaded_unit(node):
    p = run("systemd-analyze", "security", "--no-pager", UNIT, check=False)
    with open(os.path.join(OUT, "systemd-analyze-security.txt"), "w") as f:
        f.write(p.stdout)
    m = re.search(r"Overall exposure level for piniond\.service: ([0-9.]+)", p.stdout)
    assert m, p.stdout + p.stderr
    assert float(m.group(1)) <= EXPOSURE_BOUND, p.stdout


def test_daemon_keeps_exactly_what_its_modules_need(node):
    node.healthy()
    cursor = journal_cursor()
    pid = start_agent()
    need = (RECLAIM | PODNET | CONFIGSYNC) & GRANTED
    c = proc_caps(pid)
    assert c["CapEff"] == need and c["CapPrm"] == need, c
    assert c["CapInh"] == set() and c["CapAmb"] == set(), c
    # Every module is enabled, so what they need is all the unit grants: the bounding set is it.
    assert c["CapBnd"] == need == unit_capability_bounding_set() == GRANTED, c
    messages = [e["MESSAGE"] for e in journal(f"_PID={pid}", cursor=cursor)]
    assert any(m.startswith("Capabilities: keeping ") for m in messages), messages
    assert not any("Failed to drop the capabilities" in m for m in messages), messages


def test_open_file_limit_carries_every_connection_cap(node):
    """LimitNOFILE=65536 reaches the daemon (raising its soft limit passes the system call
    filter: prlimit64, not setrlimit), and the servers keep their default caps under it."""
    node.healthy()
    cursor = journal_cursor()
    pid = start_agent()
    assert unit_property(UNIT, "LimitNOFILE") == "65536" and unit_property(UNIT, "LimitNOFILESoft") == "65536"
    with open(f"/proc/{pid}/limits") as f:
        line = next(x for x in f if x.startswith("Max open files"))
    assert line.split()[3:5] == ["65536", "65536"], line
    e = wait_for_journal("the connection caps", f"_PID={pid}", cursor=cursor, pattern=r"^Open files: ")
    assert e["MESSAGE"] == ("Open files: 65536; connections at once: local API 1000, Workload API 1000, "
                            "CSI 16 per server"), e["MESSAGE"]
    conns = api_json("/v1/status")["connections"]
    assert (conns["open_files"], conns["api"], conns["workload"], conns["scaled"]) == (65536, 1000, 1000, False), conns


def test_startup_pages_go_back_to_the_kernel_inside_the_sandbox(node):
    """madvise() passes the unit's system call filter, and paging out file pages is allowed to
    the daemon (as root it owns the library files) under ProtectSystem=strict (the release is
    off by default: asked for here)."""
    node.healthy()
    node.conf("60-release.conf", "[agent]\nrelease-startup-pages=yes\n")
    cursor = journal_cursor()
    pid = start_agent()
    e = wait_for_journal("the start-up page release", f"_PID={pid}", cursor=cursor,
                         pattern=r"^Released \d+ KiB of start-up file pages at READY")
    m = re.match(r"Released (\d+) KiB of start-up file pages at READY \((\d+) mappings,", e["MESSAGE"])
    assert m, e["MESSAGE"]
    released = (int(m.group(1)), int(m.group(2)))
    assert released[0] > 0 and released[1] > 10, released
    # Pages it touches again come back: it still answers.
    assert api_json("/v1/status")["ready"] is True


def test_commands_it_runs_cannot_regain_what_it_dropped(node):
    """With configsync alone, the daemon drops podnet's CAP_NET_ADMIN and CAP_SYS_ADMIN. It may
    not lower its bounding set (the unit withholds CAP_SETPCAP), so they stay there; but
    NoNewPrivileges= keeps an exec'd on-change command from getting them back as root would."""
    root = "/srv/pinion-test"
    node.on_cleanup(lambda: run("rm", "-rf", root))
    write_bundle(root, "app", {"a.txt": b"a\n"}, "v1")
    url = node.http_server("pinion-test-http.service", root, 8097)
    out = "/run/pinion/on-change-status"
    hook = "/usr/local/sbin/pinion-test-hook"
    with open(hook, "w") as f:
        f.write(f"#!/bin/sh\ncat /proc/self/status > {out}.tmp && mv {out}.tmp {out}\n")
    os.chmod(hook, 0o755)
    node.on_cleanup(lambda: os.unlink(hook))
    node.conf("50-configsync.conf", f"[config.app]\nurl={url}/app/manifest.json\ndest={STATE_DIR}/configs/app\n"
                                    f"on-change={hook}\n")
    pid = start_agent()
    assert unit_property(UNIT, "NoNewPrivileges") == "yes"
    c = proc_caps(pid)
    assert c["CapEff"] == c["CapPrm"] == (RECLAIM | CONFIGSYNC) & GRANTED, c
    assert PODNET <= c["CapBnd"], c
    wait_for("the on-change command ran", lambda: os.path.exists(out))
    with open(out) as f:
        child = f.read()
    child_caps = {k: int(re.search(r"^%s:\s*([0-9a-f]+)$" % k, child, re.M).group(1), 16)
                  for k in ("CapPrm", "CapEff", "CapAmb")}
    need_bits = 1 << 5  # KILL
    assert all(v & ~need_bits == 0 for v in child_caps.values()), child_caps
    # Not the service's UMask=0077: what the command renders for a workload stays readable.
    assert re.search(r"^Umask:\s*0022$", child, re.M), child


def as_user(*argv, groups=()):
    """argv run as uid 40999 (no name on the guest) with only the supplementary groups given."""
    who = ["setpriv", "--reuid=40999", "--regid=40999"]
    who += [f"--groups={','.join(str(g) for g in groups)}"] if groups else ["--clear-groups"]
    return run(*who, *argv, check=False)


def test_handover_takes_no_ownership_and_other_owners_take_a_dropin(node):
    """Inside the shipped unit, which grants neither CAP_CHOWN, CAP_FOWNER nor CAP_DAC_OVERRIDE:
    a bundle's group= and the socket's socket-group= let their members in (ACL entries on root's
    files), nobody else; a dest inside another user's directory fails with the kernel's refusal
    until the drop-in the unit's comments give grants CAP_DAC_OVERRIDE, which the agent then
    keeps."""
    nogroup = grp.getgrnam("nogroup").gr_gid
    root = "/srv/pinion-test"
    node.on_cleanup(lambda: run("rm", "-rf", root))
    write_bundle(root, "app", {"a.txt": (b"a\n", "0640")}, "v1")
    url = node.http_server("pinion-test-http.service", root, 8095)
    theirs = f"{STATE_DIR}/theirs"  # the state directory: writable in the unit's mount namespace
    os.makedirs(theirs, mode=0o755)
    os.chown(theirs, 65534, 65534)
    node.conf("50-handover.conf", f"""[agent]
socket-group=nogroup

[config.app]
url={url}/app/manifest.json
dest={STATE_DIR}/configs/app
group=nogroup

[config.theirs]
url={url}/app/manifest.json
dest={theirs}/app
""")
    start_agent()
    wait_for("the bundle published", lambda: os.path.islink(f"{STATE_DIR}/configs/app/..data"))
    a_txt = f"{STATE_DIR}/configs/app/a.txt"
    st = os.stat(os.path.realpath(a_txt))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o640), st
    p = as_user("cat", a_txt, groups=[nogroup])
    assert p.returncode == 0 and p.stdout == "a\n", p
    p = as_user("cat", a_txt)
    assert p.returncode != 0 and "Permission denied" in p.stderr, p
    # The socket: the group connects, anyone else is refused by the kernel.
    assert os.stat(SOCKET).st_uid == 0
    assert as_user("python3", "-c", CONNECT_PROGRAM, SOCKET, groups=[nogroup]).stdout.strip() == "ok"
    assert as_user("python3", "-c", CONNECT_PROGRAM, SOCKET).stdout.strip() == "Permission denied"

    error = wait_for("the refusal in another user's directory",
                     lambda: api_json("/v1/configs/theirs").get("last_error"))
    assert "Permission denied" in error, error
    assert not os.path.exists(f"{theirs}/app/..data")

    node.unit_dropin(UNIT, "50-other-owners.conf", "[Service]\nCapabilityBoundingSet=CAP_DAC_OVERRIDE CAP_FOWNER\n")
    systemctl("restart", UNIT)
    pid = main_pid()
    assert {"CAP_DAC_OVERRIDE", "CAP_FOWNER"} <= proc_caps(pid)["CapEff"]
    wait_for("the bundle in another user's directory", lambda: os.path.islink(f"{theirs}/app/..data"))


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_what_pods_read_keeps_its_modes_under_umask_0077(node):
    assert unit_property(UNIT, "UMask") == "0077"
    node.healthy(extra="world-readable=yes\n")  # ends [config.app]
    pod_uid = "3f1c8a52-0000-4000-8000-0000000000b2"
    pod_file = "/etc/pinion/pods.d/pinion-test-id.json"
    with open(pod_file, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "id", "namespace": "default", "uid": pod_uid,
                                "annotations": {"pinion.io/identity": "true"}},
                   "spec": {"serviceAccountName": "default", "containers": [{"name": "c", "image": "x"}]},
                   "status": {"phase": "Running", "podIP": "10.244.0.9"}}, f)
    node.on_cleanup(lambda: os.unlink(pod_file))
    start_agent()
    dest = f"{STATE_DIR}/configs/app"
    wait_for("the bundle published", lambda: os.path.islink(f"{dest}/..data"))
    version = os.path.join(dest, os.readlink(f"{dest}/..data"))
    # The bundle (world-readable=yes, no group=): the manifest's modes (0644, 0640) without the
    # group's bits, others' read kept although the service's umask would take it away.
    assert mode(dest) == 0o705 and mode(version) == 0o705 and mode(f"{version}/sub") == 0o705
    assert mode(f"{version}/app.conf") == 0o604 and mode(f"{version}/sub/data.txt") == 0o600
    # A pod's identity directory (the key stays 0600: DESIGN.md, root-only files).
    tls = f"/run/pinion/pods/{pod_uid}"
    wait_for("the pod's certificate", lambda: os.path.exists(f"{tls}/cert.pem"))
    tls_version = os.path.join(tls, os.readlink(f"{tls}/..data"))
    assert mode("/run/pinion/pods") == 0o755 and mode(tls) == 0o755 and mode(tls_version) == 0o755
    assert mode(f"{tls_version}/cert.pem") == 0o644 and mode(f"{tls_version}/key.pem") == 0o600


def mounts_of(pid):
    """{mount point: options} in pid's mount namespace (the last mount on a point wins)."""
    out = {}
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            fields = line.split()
            out[fields[4]] = set(fields[5].split(","))
    return out


def test_cgroup_tree_is_read_only_but_where_reclaim_writes(node):
    # Page cache that fills the target's 64M up to 60M: above high (90%), so reclaim acts.
    node.healthy(fill_mb=60, extra="\n[reclaim.target]\nmin-file=4M\ntarget=50%\n")
    pid = start_agent()

    def reclaimed():
        t = next(t for t in api_json("/v1/reclaim")["targets"] if t["name"] == "target")
        assert t["step_errors"] == 0, t
        return t if t["bytes_reclaimed"] > 0 else None

    wait_for("reclaim acting on the target", reclaimed, timeout=40)
    mounts = mounts_of(pid)
    assert "ro" in mounts["/sys/fs/cgroup"], mounts["/sys/fs/cgroup"]
    assert "rw" in mounts["/sys/fs/cgroup/system.slice"], mounts.get("/sys/fs/cgroup/system.slice")


def test_ip_allow_list_admits_private_addresses_and_blocks_others(node):
    run("ip", "link", "add", "pinion-test0", "type", "dummy")
    node.on_cleanup(lambda: run("ip", "link", "del", "pinion-test0", check=False))
    run("ip", "link", "set", "pinion-test0", "up")
    for a in ("10.123.0.1/32", "198.51.100.1/32"):
        run("ip", "addr", "add", a, "dev", "pinion-test0")
    root = "/srv/pinion-test"
    node.on_cleanup(lambda: run("rm", "-rf", root))
    write_bundle(root, "app", {"a.txt": b"a\n"}, "v1")
    node.http_server("pinion-test-http.service", root, 8096, bind="0.0.0.0")
    node.conf("50-configs.conf", f"""[config.private]
url=http://10.123.0.1:8096/app/manifest.json
dest={STATE_DIR}/configs/private

[config.public]
url=http://198.51.100.1:8096/app/manifest.json
dest={STATE_DIR}/configs/public
timeout=2s
""")
    start_agent()
    assert os.path.islink(f"{STATE_DIR}/configs/private/..data")
    # The filter drops the SYN: the connection times out.
    public = wait_for("the public bundle's error", lambda: api_json("/v1/configs/public").get("last_error"))
    assert re.search(r"[Tt]ime(d)? ?out", public), public
    assert not os.path.exists(f"{STATE_DIR}/configs/public/..data")
    # The server answers there to anyone outside the unit: the unit's filter is what blocked it.
    assert run("curl", "-sf", "-m", "10", "http://198.51.100.1:8096/app/manifest.json").stdout
