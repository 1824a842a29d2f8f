# SPDX-License-Identifier: MIT
"""zkreg's write pacing counts ZooKeeper requests, not operations: at the default write-qps a
whole session's worth of members comes back after a session expiry in full multi requests, and
a pods-dir full of pods at start goes out as full multis of max-ops-per-write. Each is counted
in the server's own transaction log (one multi is one transaction there), and in the agent's
pinion_zookeeper_write_transactions_total: never by time."""

import math
import os
import signal

import pytest

from pinion_testlib import EXIT_CONFIG, T, log_lines, wait_until
import zkreg_testlib as zt
from zkreg_testlib import base, kz, zk  # noqa: F401 (fixtures)
from zkreg_testlib import registrations, wait_endpoints, web_pod, zk_config

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")

# What the agent has by default (conf/pinion.conf): the tests run at these settings.
DEFAULT_QPS = "50"
DEFAULT_CAP = 250


def ip_of(i, net=10):
    return f"{net}.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def write_pods(a, path, n, net=10):
    want = []
    for i in range(n):
        a.write_pod(f"p{i:05d}", web_pod(f"p{i:05d}", path, ip=ip_of(i, net)))
        want.append(f"{ip_of(i, net)}:8080")
    return want


def session_of(a):
    return int(a.get_json("/v1/registrations")["session_id"], 16)


def txns(a):
    return a.metrics().value("pinion_zookeeper_write_transactions_total") or 0


def problems(a):
    return [ln for ln in log_lines(a.log_text()) if ln.startswith(("warning:", "error:", "crit:"))]


def test_reregistration_after_session_expiry_is_full_multis(agent_factory, zk, kz, base):
    """250 registered pods, the session expired (the agent stopped past the session timeout):
    the new session creates all 250 again in ceil(250 / 250) = 1 transaction (plus one for
    slack), at the default write-qps. Paced per operation (50 a second, a burst of 50) it took
    1 multi of 50 and 200 lone creates."""
    n = 250
    path = base + "/svc"
    kz.ensure_path(path)
    a = agent_factory(config=zk_config(zk, write_qps=DEFAULT_QPS), start=False)
    want = write_pods(a, path, n)
    a.start()
    wait_endpoints(kz, path, want, timeout=60)
    old_sid = session_of(a)
    sent = txns(a)
    os.kill(a.pid, signal.SIGSTOP)
    try:
        wait_endpoints(kz, path, [], timeout=20)  # the server expired the session
    finally:
        os.kill(a.pid, signal.SIGCONT)
    a.wait_log(r"ZooKeeper session .* → expired", timeout=T(20))
    wait_endpoints(kz, path, want, timeout=60)
    wait_until(lambda: all(r["state"] == "registered" for r in registrations(a).values()), T(20),
               desc="every registration registered")
    sid = session_of(a)
    assert sid != old_sid
    created = zt.write_transactions(zk.server.data_dir, path, session=sid)
    assert sum(k for _, k in created) == n, created
    assert len(created) <= math.ceil(n / DEFAULT_CAP) + 1, f"{len(created)} transactions: {created[:10]}"
    assert txns(a) - sent <= math.ceil(n / DEFAULT_CAP) + 1, a.metrics().find("pinion_zookeeper_write_transactions_total")
    # The expiry is warned about (it is one); no write failed on the way back.
    assert not [ln for ln in problems(a) if "session" not in ln], problems(a)


def test_bulk_start_is_full_multis(agent_factory, zk, kz, base):
    """5,000 pods in pods-dir at start, default settings: 20 transactions of 250 creates each
    (the server's log), and as many write requests by the agent's count."""
    n = 5000
    path = base + "/svc"
    kz.ensure_path(path)
    a = agent_factory(config=zk_config(zk, write_qps=DEFAULT_QPS, session_timeout="30s"), start=False)
    want = write_pods(a, path, n)
    a.start(timeout=60)
    wait_until(lambda: (kz.exists(path).numChildren >= n) or None, T(120), desc=f"{n} members")
    wait_endpoints(kz, path, want, timeout=60)
    created = zt.write_transactions(zk.server.data_dir, path, session=session_of(a))
    assert sum(k for _, k in created) == n
    sizes = [k for _, k in created]
    assert sizes == [DEFAULT_CAP] * (n // DEFAULT_CAP), sizes[:30]
    assert txns(a) == n // DEFAULT_CAP, a.metrics().find("pinion_zookeeper_write_transactions_total")
    full = a.metrics().value("pinion_zookeeper_write_transaction_ops_bucket", le="250")
    below = a.metrics().value("pinion_zookeeper_write_transaction_ops_bucket", le="100")
    assert (full, below) == (n // DEFAULT_CAP, 0)


def test_max_ops_per_write_cuts_the_multis(agent_factory, zk, kz, base):
    """max-ops-per-write=100: 250 pods at start go out as 100 + 100 + 50, each request one
    write token; a reload to 250 makes the next burst one request."""
    n = 250
    path = base + "/svc"
    kz.ensure_path(path)
    a = agent_factory(config=zk_config(zk, write_qps=DEFAULT_QPS, max_ops_per_write="100"), start=False)
    want = write_pods(a, path, n)
    a.start()
    wait_endpoints(kz, path, want, timeout=60)
    sid = session_of(a)
    assert [k for _, k in zt.write_transactions(zk.server.data_dir, path, session=sid)] == [100, 100, 50]
    assert txns(a) == 3

    # Reload with the default: the pods going away at once are one delete request.
    a.write_config(sections=zk_config(zk, write_qps=DEFAULT_QPS, max_ops_per_write=str(DEFAULT_CAP)))
    mark = a.log_mark()
    a.sighup()
    a.wait_log(r"Configuration reloaded", since=mark)
    os.rename(a.pods_dir, a.pods_dir + ".old")
    os.mkdir(a.pods_dir)
    wait_endpoints(kz, path, [], timeout=30)
    deleted = zt.write_transactions(zk.server.data_dir, path, session=sid, kind="delete")
    assert [k for _, k in deleted] == [n]


@pytest.mark.parametrize("value", ["0", "1001", "many"])
def test_max_ops_per_write_out_of_range_is_refused(agent_factory, zk, value):
    a = agent_factory(config=zk_config(zk, max_ops_per_write=value), start=False)
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG, (rc, out, err)
    assert "max-ops-per-write" in err, err
