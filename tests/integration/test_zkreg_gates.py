# SPDX-License-Identifier: MIT
"""zkreg's registrations and the pod gates (agent/pods/pod-gates.h) against a real ZooKeeper: a pod
held back by a gate (configs not there yet, no certificate yet) is not registered and says
which gate; when the gate's owner reports a change, the pod registers; a gate closing again
deregisters it. Driven through tests/zkreg/zk-registry-probe (registry.c with the core's real
pod store and gates; configsync and identity add their gates through the same API)."""

import json
import os
import queue
import subprocess
import threading
import time

import pytest

from pinion_testlib import BUILDDIR, T, wait_until
import zkreg_testlib as zt
from zkreg_testlib import kz, zk  # noqa: F401 (fixtures)

PROBE = os.path.join(BUILDDIR, "tests", "zkreg", "zk-registry-probe")
pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


class Probe:
    def __init__(self, hosts):
        self.proc = subprocess.Popen([PROBE, hosts], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.lines.get(timeout=T(10)) == "ready"

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def cmd(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out = self.lines.get(timeout=T(10))
        assert not out.startswith("error"), (line, out)
        return out

    def regs(self):
        return {r["pod"]: r for r in json.loads(self.cmd("dump"))}

    def close(self):
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=T(20))
        err = self.proc.stderr.read()
        assert rc == 0, f"probe exited {rc}: {err}"


def test_gates_hold_back_and_release_registration(zk, kz):
    path = "/gates/svc"
    p = Probe(zk.hosts)
    try:
        p.cmd("gate-add")
        p.cmd("close a")
        p.cmd(f"pod a 10.5.0.1 1 {path}")
        p.cmd(f"pod b 10.5.0.2 1 {path}")
        wait_until(lambda: zt.endpoints(kz, path) == ["10.5.0.2:8080"], timeout=T(10))
        a = p.regs()["default/a"]
        assert a["state"] == "unready" and a["last_error"] == "configs: config app not present yet", a
        # the gate's owner says the answer changed: a registers
        p.cmd("open a")
        wait_until(lambda: zt.endpoints(kz, path) == ["10.5.0.1:8080", "10.5.0.2:8080"], timeout=T(10))
        assert p.regs()["default/a"]["state"] == "registered"
        # closing it again deregisters; the other pod is untouched
        p.cmd("close a")
        wait_until(lambda: zt.endpoints(kz, path) == ["10.5.0.2:8080"], timeout=T(10))
        # a gate removed altogether no longer holds anything back
        p.cmd("gate-remove")
        wait_until(lambda: zt.endpoints(kz, path) == ["10.5.0.1:8080", "10.5.0.2:8080"], timeout=T(10))
        # not Ready wins over open gates; a removed pod goes
        p.cmd(f"pod b 10.5.0.2 0 {path}")
        p.cmd("rm a")
        wait_until(lambda: zt.endpoints(kz, path) == [], timeout=T(10))
        assert p.regs()["default/b"]["last_error"] == "the pod is not Ready"
        p.cmd(f"pod b 10.5.0.2 1 {path}")
        wait_until(lambda: zt.endpoints(kz, path) == ["10.5.0.2:8080"], timeout=T(10))
    finally:
        p.close()
    # the probe's shutdown deregistered and closed the session
    assert zt.endpoints(kz, path) == []
