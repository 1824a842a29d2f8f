# SPDX-License-Identifier: MIT
"""The whole daemon's lifecycle (DESIGN.md "Lifecycle"): sd_notify READY/STATUS/WATCHDOG/
STOPPING, signals, reload with good and broken configs, socket activation, module states, the
command line, and the resident memory after start."""

import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from pinion_testlib import (PINIOND, VALGRIND, T, assert_dependency_order, diag, line_of, make_pod, run_piniond,
                            unix_request, wait_until)


def test_ready_after_socket_listens(agent_factory):
    a = agent_factory(wait=False)
    a.wait_ready()
    # The harness connected to the socket in the very thread that received READY=1.
    assert a.ready_probe == "connected", a.ready_probe
    # And right after READY=1 the API must accept connections: no retry, no sleep.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(a.socket)
    finally:
        s.close()
    r = a.request("GET", "/v1/health")
    assert r.status == 200, r
    assert a.status()["ready"] is True


def test_ready_sent_once_and_status_sent(agent):
    # STATUS= may come before or after READY; give it a moment.
    wait_until(lambda: agent.notifications("STATUS"), 5, desc="a STATUS= notification")
    statuses = agent.notifications("STATUS")
    assert all(m.value.strip() for m in statuses), statuses
    time.sleep(0.3)
    assert len(agent.notifications("READY")) == 1, agent.notifications()


def test_status_follows_many_pod_files_without_a_message_each(agent):
    """300 pod files at once: STATUS= ends up with the count, in a few messages, not 300."""
    import json
    import tempfile
    stage = tempfile.mkdtemp(dir=agent.dir)
    for i in range(300):
        with open(os.path.join(stage, "s%d.json" % i), "w") as f:
            json.dump(make_pod("s%d" % i, namespace="status", uid="00000000-0000-4000-8000-%012d" % i), f)
    before = len(agent.notifications("STATUS"))
    for name in os.listdir(stage):
        os.rename(os.path.join(stage, name), os.path.join(agent.pods_dir, name))
    def last_status():
        msgs = agent.notifications("STATUS")
        return msgs[-1].value if msgs else ""
    wait_until(lambda: last_status().endswith("; 300 pods"), T(10), desc="STATUS= with 300 pods")
    sent = len(agent.notifications("STATUS")) - before
    # One message at most every 100 ms while the files come in (one per file before).
    assert 1 <= sent <= 30, [m.value for m in agent.notifications("STATUS")[before:]]


def test_health_ok(agent):
    r = agent.request("GET", "/v1/health")
    assert r.status == 200, r
    assert r.body["status"] == "ok", r.body
    assert r.body["node"] == "test-node"
    assert r.body["failing"] == []


def test_watchdog_pings_at_half_interval(agent_factory):
    # No WATCHDOG_PID: per sd_watchdog_enabled(), the setting then applies to us.
    a = agent_factory(env={"WATCHDOG_USEC": "2000000"})
    wait_until(lambda: len(a.notifications("WATCHDOG")) >= 5, 10, desc="5 WATCHDOG=1 messages")
    pings = [m for m in a.notifications("WATCHDOG")]
    assert all(m.value == "1" for m in pings), pings
    times = [m.time for m in pings]
    gaps = [b - a_ for a_, b in zip(times, times[1:])]
    avg = sum(gaps) / len(gaps)
    diag("watchdog gaps: %s" % ", ".join("%.3f" % g for g in gaps))
    # DESIGN: "WATCHDOG=1 from a timer at half of WATCHDOG_USEC": 1 s here, give or take
    # scheduling slack; later than that eats into the margin before systemd kills us.
    assert 0.75 <= avg <= 1.25, "average gap %.3fs, expected about 1s: %s" % (avg, gaps)
    assert max(gaps) < 2.0, "a gap reached the 2s watchdog deadline: %s" % gaps


def test_no_watchdog_without_env(agent):
    time.sleep(2.5)
    assert agent.notifications("WATCHDOG") == []


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_stop_signal(agent, sig):
    assert os.path.exists(agent.socket)
    t0 = time.monotonic()
    rc = agent.stop(getattr(signal, sig))
    elapsed = time.monotonic() - t0
    agent.assert_exit(rc, 0)
    assert elapsed < T(agent.stop_timeout_seconds()), "took %.1fs" % elapsed
    msgs = agent.notifications()
    keys = [m.key for m in msgs]
    assert "STOPPING" in keys, [m.raw for m in msgs]
    stopping = keys.index("STOPPING")
    assert msgs[stopping].value == "1"
    assert keys.index("READY") < stopping
    assert not os.path.exists(agent.socket), "the socket file was left behind"


def test_stop_answers_the_requests_it_accepted(agent):
    """A client that connected before SIGTERM gets its answer: the agent stops accepting, then
    finishes what it had accepted before it exits (under systemd, what connects after that
    waits in the socket unit's backlog for the next piniond)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(T(10))
    s.connect(agent.socket)
    s.sendall(b"GET /v1/status HTTP/1.1\r\nHost: pinion\r\n")
    # The agent has it once the request line is in (an answer on another connection after it
    # proves its loop went round).
    assert unix_request(agent.socket, "GET", "/v1/health").status == 200
    agent.expected_exit = True
    agent.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    s.sendall(b"Connection: close\r\n\r\n")
    answer = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        answer += chunk
    s.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer
    agent.assert_exit(agent.wait_exit(), 0)


def _reload_counts(a):
    c = a.status()["config"]
    return c["reloads"], c["reload_failures"], c["last_reload_error"]


def test_sighup_reload_applies(agent):
    assert _reload_counts(agent) == (0, 0, None)
    agent.write_config(agent={"log-level": "info"})
    agent.sighup()
    wait_until(lambda: _reload_counts(agent)[0] == 1, 10, desc="config.reloads == 1")
    reloads, failures, err = _reload_counts(agent)
    assert failures == 0 and err is None, (failures, err)
    assert agent.running()
    assert agent.health()["status"] == "ok"


def test_sighup_broken_config_keeps_old_then_fix_applies(agent):
    good = agent.config_text()
    # The broken file also renames the node: that must NOT take effect.
    bad = agent.config_text(agent={"node-name": "renamed", "stop-timeout": "soon"})
    bad_line = line_of(bad, "stop-timeout=soon")
    agent.write_config(bad)
    mark = agent.log_mark()
    agent.sighup()
    where = "%s:%d" % (agent.config_file, bad_line)
    agent.wait_log(re.escape(where + ":"), since=mark)
    wait_until(lambda: _reload_counts(agent)[1] == 1, 10, desc="config.reload_failures == 1")
    reloads_before, failures, err = _reload_counts(agent)
    assert err is not None and where in err, err
    # Still serving, with the old config.
    assert agent.running()
    assert agent.health()["status"] == "ok"
    assert agent.status()["node"] == "test-node"

    # Fix it (another log level, so it is a change) and reload again: applied.
    agent.write_config(good.replace("log-level=debug", "log-level=info"))
    agent.sighup()
    wait_until(lambda: _reload_counts(agent)[0] > reloads_before, 10, desc="a successful reload")
    reloads, failures, _ = _reload_counts(agent)
    assert failures == 1, failures
    assert agent.status()["node"] == "test-node"
    assert agent.running()
    # The metric agrees with /v1/status.
    m = agent.metrics()
    samples = m.find("pinion_config_reloads_total")
    failed = sum(v for (_, l, v) in samples if "fail" in l.get("result", ""))
    total = sum(v for (_, _, v) in samples)
    assert failed == 1 and total == reloads + failures, samples


def test_sighup_inline_comment_keeps_old_config(agent):
    """A comment after a value is refused on reload as at start: the running value stays."""
    bad = agent.config_text(extra="[reclaim.web]\ncgroup=/system.slice/web.service   # the web unit")
    bad_line = line_of(bad, "cgroup=")
    agent.write_config(bad)
    mark = agent.log_mark()
    agent.sighup()
    where = "%s:%d: " % (agent.config_file, bad_line)
    agent.wait_log(re.escape(where) + ".*an inline comment is not allowed", since=mark)
    wait_until(lambda: _reload_counts(agent)[1] == 1, 10, desc="config.reload_failures == 1")
    assert agent.running()
    assert all(m["name"] != "reclaim" or m["state"] == "disabled" for m in agent.status()["modules"]), \
        agent.status()["modules"]


def test_restart_after_kill9(agent):
    agent.write_pod("web", make_pod("web-1"))
    agent.wait_pod("default", "web-1")
    rc = agent.kill9()
    assert rc == -signal.SIGKILL
    # The stale socket file of a killed daemon must not keep the next one from starting.
    agent.start()
    assert agent.health()["status"] == "ok"
    agent.wait_pod("default", "web-1")


def test_socket_activation(agent_factory):
    if not shutil.which("systemd-socket-activate"):
        pytest.skip("systemd-socket-activate not installed (Debian package systemd)")
    a = agent_factory(socket_activate=True)
    # systemd-socket-activate binds now and execs piniond on the first connection; that
    # connection waits in the backlog and is answered by the daemon.
    wait_until(lambda: os.path.exists(a.socket), 5, desc="the activation socket")
    ino = os.stat(a.socket).st_ino
    r = unix_request(a.socket, "GET", "/v1/health", timeout=T(15))
    assert r.status == 200, r
    a.wait_ready()
    assert a.health()["status"] == "ok"
    # The daemon served on the socket it was passed rather than binding its own.
    assert os.stat(a.socket).st_ino == ino, "piniond replaced the passed socket with its own"
    rc = a.sigterm()
    a.assert_exit(rc, 0)


def test_modules_disabled_in_dependency_order(agent):
    st = agent.status()
    assert_dependency_order([m["name"] for m in st["modules"]])
    for m in st["modules"]:
        assert m["state"] == "disabled", m
        assert isinstance(m["reason"], str) and m["reason"].strip(), m
        assert m["synced"] is True, m
    assert st["ready"] is True


def test_version():
    rc, out, err = run_piniond("--version")
    assert rc == 0, err
    assert re.match(r"^piniond \S+", out), out


def test_help():
    rc, out, err = run_piniond("--help")
    assert rc == 0, err
    assert "--config" in out and "--check-config" in out, out


@pytest.mark.parametrize("args", [["--no-such-option"], ["-Z"], ["extra-argument"]])
def test_usage_error_exits_2(args):
    rc, out, err = run_piniond(*args)
    assert rc == 2, (rc, out, err)
    assert err.strip(), "no message on stderr"


def rss_file_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    raise AssertionError("no RssFile for pid %d" % pid)


def private_libraries(dest):
    """Copies of every library piniond loads, in dest: an agent started with LD_LIBRARY_PATH=dest
    is the only process mapping them, whatever else runs on the machine (the kernel keeps a
    page another process maps; other tests' agents would keep the shared libraries' pages)."""
    os.makedirs(dest)
    out = subprocess.run(["ldd", PINIOND], capture_output=True, text=True, check=True).stdout
    for m in re.finditer(r"^\s*(\S+) => (/\S+)", out, re.M):
        shutil.copy(m.group(2), os.path.join(dest, m.group(1)))
    return dest


@pytest.mark.skipif(VALGRIND, reason="the process is valgrind's, its pages are not the daemon's")
def test_startup_pages_released_once_ready(agent_factory, tmp_path):
    # The same agent twice, one after the other, each the only process mapping its libraries:
    # by default (release-startup-pages=no) its start-up pages stay resident, with the release
    # they go back at READY.
    env = {"LD_LIBRARY_PATH": private_libraries(str(tmp_path / "lib"))}
    kept = agent_factory(env=env)
    time.sleep(0.5)
    kept_kib = rss_file_kib(kept.proc.pid)
    assert kept.metrics().value("pinion_startup_pages_released_bytes_total") == 0
    assert "start-up file pages" not in kept.log_text()
    kept.stop()

    a = agent_factory(config={"agent": {"release-startup-pages": "yes"}}, env=env)
    passes = []
    for when in ("at READY", "once settled"):
        m = a.wait_log(r"Released (\d+) KiB of start-up file pages %s \((\d+) mappings," % when)
        passes.append((int(m.group(1)), int(m.group(2))))
    time.sleep(0.5)
    released_rss_kib = rss_file_kib(a.proc.pid)
    diag("RssFile without the release %d KiB, with it %d KiB (released %s KiB, mappings)"
         % (kept_kib, released_rss_kib, passes))
    assert passes[0][1] > 10 and passes[0][0] > 0 and passes[1][1] > 10
    # The log rounds each pass down to whole KiB.
    total = a.metrics().value("pinion_startup_pages_released_bytes_total") / 1024
    assert passes[0][0] + passes[1][0] <= total < passes[0][0] + passes[1][0] + 2
    assert released_rss_kib < 0.8 * kept_kib, (released_rss_kib, kept_kib)
    # The daemon still works after giving its pages back: they come back when touched.
    assert a.health()
    a.write_pod("after-release", make_pod("after-release"))
    a.wait_pod("default", "after-release")
