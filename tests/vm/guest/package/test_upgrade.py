# SPDX-License-Identifier: MIT
"""Upgrading a running node: the previous release's packages ($PINION_VM_DEBS/previous/, built
from the commit before state versions by tests/vm/upgrade-debs) installed and running with pods
attached, then this tree's packages installed over them with `dpkg -i`, as an operator upgrades.
No address, certificate, registration or config may be lost, and the pods' traffic may not stop
for longer than the agent's restart: a probe in one pod's network namespace connects to a server
in another pod every 20 ms throughout, and the longest gap is reported beside the restart's
length (both measured in this run)."""

import glob
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import STATE_DIR, api, api_json, cni, module_status, run, systemctl, unit_property, wait_for

DEBS = os.environ.get("PINION_VM_DEBS", "")
PREVIOUS = os.path.join(DEBS, "previous")
PACKAGES = ("pinion", "pinion-cni")
PODS_DIR = "/etc/pinion/pods.d"
SERVERSET = "/discovery/upgrade/web"
PROBE_PORT = 8080

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))


def _debs(d):
    return sorted(x for x in glob.glob(os.path.join(d, "*.deb")) if "-dbgsym_" not in x)


def _zookeeper():
    """A real ZooKeeper on loopback if the image has one (zkreg_testlib's), else None."""
    try:
        import zkreg_testlib as zt
    except ImportError:
        return None
    if not zt.zookeeper_available():
        return None
    return zt.ZkStandalone().start(timeout=240)  # java under TCG


class Probe:
    """Connects from a pod's namespace to host:port every interval; keeps the time of each
    success, so the longest gap between two is the longest outage the pod saw."""

    def __init__(self, netns, host, port, interval=0.02):
        # A helper inside the namespace (setns needs a process of its own): prints one line per
        # successful connect, with its CLOCK_MONOTONIC time.
        code = ("import socket,sys,time\n"
                "while True:\n"
                "    t=time.monotonic()\n"
                "    try:\n"
                f"        s=socket.create_connection(({host!r},{port}),timeout=0.5); s.close(); print(t,flush=True)\n"
                "    except OSError: pass\n"
                f"    time.sleep({interval})\n")
        self.proc = subprocess.Popen(["ip", "netns", "exec", netns, "python3", "-c", code],
                                     stdout=subprocess.PIPE, text=True)
        self.times = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.times.append(float(line))

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.thread.join(5)

    def longest_gap(self, since, until):
        t = [x for x in self.times if since <= x <= until]
        if len(t) < 2:
            return None
        return max(b - a for a, b in zip(t, t[1:]))


def _installed(pkg):
    p = run("dpkg-query", "-W", "-f=${db:Status-Abbrev}", pkg, check=False)
    return p.returncode == 0 and p.stdout.startswith("i")


def _pod(name, ip):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "annotations": {"pinion.io/serverset": SERVERSET, "pinion.io/port": "http"}},
            "spec": {"containers": [{"name": "main", "image": "x", "ports": [{"name": "http", "containerPort": PROBE_PORT}]}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}


def _held():
    from podnet_testlib import podnet_state_on_disk
    return {a["containerID"]: a["ip"] for a in podnet_state_on_disk(STATE_DIR)["allocations"]}


def _snapshot(kz):
    st = api_json("/v1/status")
    mods = {m["name"]: m for m in st["modules"]}
    node = mods["identity"]["details"]["node"]
    with open(os.path.join(STATE_DIR, "identity", "node", "cert.pem")) as f:
        cert = f.read()
    regs = sorted((r["pod"], r["state"]) for r in api_json("/v1/registrations")["registrations"]) if kz else []
    members = sorted(json.loads(kz.get(f"{SERVERSET}/{c}")[0])["serviceEndpoint"]["host"]
                     for c in kz.get_children(SERVERSET)) if kz else []
    return {"serial": node["serial"], "cert": cert, "config": api_json("/v1/configs/app").get("version"),
            "registrations": regs, "members": members}


@pytest.mark.skipif(not _debs(PREVIOUS), reason="no previous release's packages in $PINION_VM_DEBS/previous")
def test_upgrade_over_the_previous_release_with_pods_attached(node):
    assert not _installed("pinion"), "pinion is already installed in the guest"
    zk = _zookeeper()
    kz = None
    probe = None
    namespaces = []
    try:
        run("dpkg", "-i", *_debs(PREVIOUS), timeout=300)
        extra = f"\n[zookeeper]\nservers={zk.hosts}\nsession-timeout=4s\n" if zk else ""
        node.healthy(extra=extra)
        os.makedirs(PODS_DIR, exist_ok=True)
        systemctl("restart", "piniond.service")
        wait_for("the previous release answering", lambda: api("/v1/health")[0] == 200, timeout=120)
        if zk:
            from kazoo.client import KazooClient
            kz = KazooClient(hosts=zk.hosts)
            kz.start(timeout=30)

        # Two pods wired by the previous release's plugin; one serves, the other probes it.
        ips = {}
        for name in ("web-0", "web-1"):
            path = node.netns(f"upg-{name}")
            namespaces.append(f"upg-{name}")
            rc, out, err = cni("ADD", path, f"{name}-container".ljust(64, "0"), f"uid-{name}")
            assert rc == 0, (out, err)
            ips[name] = out["ips"][0]["address"].split("/")[0]
            with open(os.path.join(PODS_DIR, name + ".json"), "w") as f:
                json.dump(_pod(name, ips[name]), f)
            node.on_cleanup(lambda n=name: os.path.exists(os.path.join(PODS_DIR, n + ".json")) and
                            os.unlink(os.path.join(PODS_DIR, n + ".json")))
        server = subprocess.Popen(["ip", "netns", "exec", "upg-web-1", "python3", "-m", "http.server", "--bind",
                                   ips["web-1"], str(PROBE_PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        node.on_cleanup(lambda: (server.kill(), server.wait()))
        probe = Probe("upg-web-0", ips["web-1"], PROBE_PORT)
        wait_for("the probe getting through", lambda: len(probe.times) > 5, timeout=60)
        wait_for("the bundle published", lambda: api_json("/v1/configs/app").get("version") == "v1", timeout=60)
        wait_for("the node certificate", lambda: module_status("identity")["details"]["node"].get("serial"), timeout=60)
        if kz:
            wait_for("both pods registered", lambda: kz.exists(SERVERSET) and len(kz.get_children(SERVERSET)) == 2,
                     timeout=60)
        before = _snapshot(kz)
        held_before = _held()
        assert sorted(held_before.values()) == sorted(ips.values()), held_before
        old_pid = unit_property("piniond.service", "MainPID")

        # The upgrade: this tree's packages over the running previous release.
        t0 = time.monotonic()
        p = run("dpkg", "-i", *_debs(DEBS), timeout=600)
        wait_for("the new agent answering", lambda: api("/v1/health")[0] == 200, timeout=120)
        t1 = time.monotonic()
        assert unit_property("piniond.service", "MainPID") != old_pid, p.stdout
        # The pods' traffic a while after, so a late drop would show.
        wait_for("probes after the upgrade", lambda: probe.times and probe.times[-1] > t1 + 2, timeout=60)
        gap = probe.longest_gap(t0 - 1, time.monotonic())
        if kz:
            wait_for("both pods registered again",
                     lambda: len(kz.get_children(SERVERSET)) == 2 and
                     all(r[1] == "registered" for r in _snapshot(kz)["registrations"]), timeout=60)
        after = _snapshot(kz)
        print(f"\nupgrade: dpkg -i to healthy {t1 - t0:.2f} s; longest gap between the pod's probes "
              f"{gap:.3f} s (probe every 20 ms); zookeeper {'yes' if zk else 'not in this image'}")

        # Nothing lost: the same certificate (not even reissued), config version, members.
        assert after["serial"] == before["serial"] and after["cert"] == before["cert"]
        assert after["config"] == before["config"] == "v1"
        assert after["members"] == before["members"]
        assert after["registrations"] == before["registrations"]
        # Every address still held by its container, as the state a restart loads says.
        assert _held() == held_before
        # No connectivity gap longer than the restart.
        assert gap is not None and gap <= t1 - t0, (gap, t1 - t0)
        # Written by the new release, the session file carries its version.
        if zk:
            with open(os.path.join(STATE_DIR, "zkreg", "session")) as f:
                assert f.read().startswith("v2 ")
        warnings = run("journalctl", "-q", "-o", "cat", "-u", "piniond.service", "-p", "warning",
                       f"_PID={unit_property('piniond.service', 'MainPID')}").stdout
        assert not warnings.strip(), warnings
    finally:
        if probe:
            probe.stop()
        for name in namespaces:
            cni("DEL", f"/run/netns/{name}", f"{name[4:]}-container".ljust(64, "0"), f"uid-{name[4:]}")
        if kz:
            kz.stop()
        if zk:
            zk.close()
        for pkg in PACKAGES:
            if _installed(pkg):
                run("dpkg", "--purge", pkg, check=False, timeout=300)
