# SPDX-License-Identifier: MIT
"""FACT_ZOOKEEPER (agent/facts.h): zkreg's node watches, on the real session code, against a
real ZooKeeper, checked with kazoo. Driven through tests/zkreg/zk-watch-probe (the watch and
session files of modules/zkreg linked into a small loop program)."""

import os
import queue
import subprocess
import threading
import time

import pytest

from pinion_testlib import BUILDDIR, T
import zkreg_testlib as zt
from zkreg_testlib import kz, zk  # noqa: F401 (fixtures)

PROBE = os.path.join(BUILDDIR, "tests", "zkreg", "zk-watch-probe")

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


class Probe:
    def __init__(self, hosts, paths, env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen([PROBE, hosts] + list(paths), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, text=True)
        self.lines = queue.Queue()
        self.all = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.split())

    def expect(self, pred, timeout=10, desc=""):
        deadline = time.time() + T(timeout)
        while time.time() < deadline:
            try:
                w = self.lines.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            self.all.append(w)
            if pred(w):
                return w
        raise AssertionError(f"probe: no line matching {desc}; saw {self.all[-20:]}")

    def watch_line(self, path, timeout=10):
        return self.expect(lambda w: w[0] == "watch" and w[1] == path, timeout, f"watch {path}")

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        err = self.proc.stderr.read()
        assert rc == 0, f"probe exited {rc}: {err}"


def test_watch_reports_mzxid_and_every_change(zk, kz):
    kz.ensure_path("/fact/a")
    kz.set("/fact/a", b"v1")
    p = Probe(zk.hosts, ["/fact/a", "/fact/missing"])
    try:
        got = {}
        # -ENOTCONN (-107) may come first while the session is being established
        for _ in range(2):
            w = p.expect(lambda w: w[0] == "watch" and int(w[3]) != -107, desc="first reports")
            got[w[1]] = (int(w[2]), int(w[3]))
        assert got["/fact/a"] == (kz.exists("/fact/a").mzxid, 0)
        assert got["/fact/missing"][1] == -2  # -ENOENT
        for v in (b"v2", b"v3"):
            kz.set("/fact/a", v)
            w = p.watch_line("/fact/a")
            assert (int(w[2]), int(w[3])) == (kz.exists("/fact/a").mzxid, 0)
        kz.create("/fact/missing", b"x")
        w = p.watch_line("/fact/missing")
        assert (int(w[2]), int(w[3])) == (kz.exists("/fact/missing").mzxid, 0)
        kz.delete("/fact/missing")
        w = p.watch_line("/fact/missing")
        assert int(w[3]) == -2
        # unwatch: no more reports for it, others continue
        p.send("unwatch /fact/a")
        p.expect(lambda w: w[0] == "unwatched", desc="unwatched")
        kz.set("/fact/a", b"v4")
        kz.create("/fact/missing", b"y")
        w = p.expect(lambda w: w[0] == "watch", desc="next report")
        assert w[1] == "/fact/missing", f"a report for an unwatched node: {w}"
    finally:
        p.close()


def test_unpublish_ends_every_watch(zk, kz):
    """When zkreg unpublishes the fact, a watcher frees its state without unwatching (agent/
    facts.h): no watch may call it afterwards, neither on a change (armed watcher) nor when the
    session closes (-ENOTCONN), also for a read still in flight. The probe frees the watcher's
    state at "unpublish": a late call fails here and is a use-after-free in the ASan build."""
    for n in ("u1", "u2", "u3"):
        kz.ensure_path("/fact/" + n)
    p = Probe(zk.hosts, ["/fact/u1", "/fact/u2"])
    try:
        for _ in range(2):
            p.expect(lambda w: w[0] == "watch" and int(w[3]) == 0, desc="first reports")
        # a third watch whose read may still be in flight at unpublish
        p.send("watch /fact/u3")
        p.send("unpublish")
        p.expect(lambda w: w[0] == "unpublished", desc="unpublished")
        mark = len(p.all)
        kz.set("/fact/u1", b"changed")
        kz.delete("/fact/u2")
        kz.set("/fact/u3", b"changed")
        p.send("close")
        p.expect(lambda w: w[0] == "session" and w[1] == "closed", desc="session closed")
        time.sleep(T(0.5))
        while not p.lines.empty():
            p.all.append(p.lines.get())
        late = [w for w in p.all[mark:] if w[0] == "watch"]
        assert late == [], f"watcher called after the fact was unpublished: {late}"
    finally:
        p.close()


def test_watch_rearmed_after_server_restart_and_reports_missed_change(zk, kz):
    kz.ensure_path("/fact/b")
    p = Probe(zk.hosts, ["/fact/b"])
    try:
        p.expect(lambda w: w[0] == "watch" and int(w[3]) == 0, desc="first report")
        zk.server.stop()
        w = p.expect(lambda w: w[0] == "session" and w[1] == "suspended", desc="suspended")
        zk.server.start()
        zk.server.wait_serving()
        kz.retry(kz.set, "/fact/b", b"while-away")
        # after the reconnect the probe reports the node's new mzxid
        want = kz.retry(kz.exists, "/fact/b").mzxid
        w = p.expect(lambda w: w[0] == "watch" and w[1] == "/fact/b" and int(w[2]) == want, timeout=30,
                     desc="mzxid after reconnect")
        kz.set("/fact/b", b"after")
        w = p.watch_line("/fact/b")
        assert int(w[2]) == kz.exists("/fact/b").mzxid
    finally:
        p.close()


def test_watch_survives_session_expiry(zk, kz):
    """Expire the probe's session (SIGSTOP it past the timeout); the new session re-reads."""
    kz.ensure_path("/fact/c")
    p = Probe(zk.hosts, ["/fact/c"])
    try:
        p.expect(lambda w: w[0] == "watch" and int(w[3]) == 0, desc="first report")
        os.kill(p.proc.pid, 19)  # SIGSTOP
        try:
            time.sleep(6)  # session timeout 4s
            kz.set("/fact/c", b"changed-while-expired")
        finally:
            os.kill(p.proc.pid, 18)  # SIGCONT
        mark = len(p.all)
        p.expect(lambda w: w[0] == "session" and w[1] == "expired", timeout=20, desc="expired")
        p.expect(lambda w: w[0] == "session" and w[1] == "connected", timeout=20, desc="new session")
        assert ["watch", "/fact/c", "0", "-107"] in p.all[mark:], "no -ENOTCONN while the session was gone"
        want = kz.exists("/fact/c").mzxid
        p.expect(lambda w: w[0] == "watch" and w[1] == "/fact/c" and int(w[2]) == want, desc="re-read")
        kz.set("/fact/c", b"again")
        w = p.watch_line("/fact/c")
        assert int(w[2]) == kz.exists("/fact/c").mzxid
    finally:
        p.close()


def test_watch_without_server_reports_enotconn():
    port = zt.free_port()
    p = Probe(f"127.0.0.1:{port}", ["/x"])
    try:
        w = p.watch_line("/x")
        assert int(w[3]) == -107  # -ENOTCONN
    finally:
        p.close()
