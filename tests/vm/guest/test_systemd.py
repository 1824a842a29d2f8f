# SPDX-License-Identifier: MIT
"""piniond's life under the real systemd: readiness through Type=notify and its STATUS= text,
reload by SIGHUP (a good drop-in applied, a broken one refused while the same process runs on),
the watchdog restarting a daemon whose loop stopped, socket activation and a restart that
keeps the socket and every request queued on it, and Restart=on-failure after kill -9 with the
state on disk intact and nothing left behind."""

import os
import signal
import stat
import subprocess
import threading
import time

from conftest import (LEGACY_SOCKET, STATE_DIR, SOCKET, UNIT, api, api_json, concurrent_requests, journal, journal_cursor,
                      main_pid, module_status, node, sha256_of, start_agent, systemctl, unit_cgroup_pids,
                      unit_property, wait_for, wait_for_journal)  # noqa: F401


def test_start_is_ready_through_notify_and_status_shows_its_text(node):
    assert unit_property(UNIT, "Type") == "notify"
    pid = start_agent()
    # Type=notify: `systemctl start` returned only after READY=1, which the agent sends once the
    # API listens and every module finished its first sync.
    status = api_json("/v1/status")
    assert status["ready"] is True, status
    assert all(m["synced"] for m in status["modules"]), status["modules"]
    assert unit_property(UNIT, "SubState") == "running"
    text = unit_property(UNIT, "StatusText")
    assert text.startswith("ready; modules: ") and text.endswith(" pods"), text
    out = systemctl("status", "--no-pager", UNIT).stdout
    assert f'Status: "{text}"' in out, out
    assert f"Main PID: {pid} (piniond)" in out, out


def test_reload_applies_a_good_dropin(node):
    pid = start_agent()
    cursor = journal_cursor()
    node.conf("60-debug.conf", "[agent]\nlog-level=debug\n")
    systemctl("reload", UNIT)
    # ExecReload= only sends SIGHUP (systemd 252 has no Type=notify-reload): the reload is
    # done when the agent counts it.
    wait_for("the reload counted", lambda: api_json("/v1/status")["config"]["reloads"] == 1)
    # The new log level is in force: the pods-dir rescan that ends a reload logs at debug.
    wait_for_journal("a debug entry after the reload", f"_PID={pid}", "PRIORITY=7", cursor=cursor,
                     pattern=r"^Scanned ")
    assert main_pid() == pid and unit_property(UNIT, "ActiveState") == "active"


def test_reload_with_a_broken_dropin_keeps_the_same_process(node):
    pid = start_agent()
    cursor = journal_cursor()
    node.conf("60-broken.conf", "[agent]\n\nlog-level=chatty\n")
    systemctl("reload", UNIT)
    wait_for("the refused reload counted", lambda: api_json("/v1/status")["config"]["reload_failures"] == 1)
    entry = wait_for_journal("the refusal with FILE:LINE", f"_PID={pid}", cursor=cursor,
                             pattern=r"/etc/pinion/conf\.d/60-broken\.conf:3: ")
    assert entry["PRIORITY"] == "3", entry
    assert "log-level" in entry["MESSAGE"], entry
    status = api_json("/v1/status")
    assert status["config"]["reloads"] == 0 and status["ready"] is True, status
    assert main_pid() == pid and unit_property(UNIT, "ActiveState") == "active"
    # The running config stayed: still info, so the rescan's debug line is not logged.
    time.sleep(1)
    assert not journal(f"_PID={pid}", "PRIORITY=7", cursor=cursor)


def test_watchdog_restarts_a_stopped_daemon(node):
    node.unit_dropin(UNIT, "50-watchdog.conf", "[Service]\nWatchdogSec=3s\nRestartSec=500ms\n")
    pid = start_agent()
    cursor = journal_cursor()
    os.kill(pid, signal.SIGSTOP)
    new = wait_for("a new main PID", lambda: (p := main_pid()) not in (0, pid) and
                   unit_property(UNIT, "ActiveState") == "active" and p, timeout=45)
    assert new != pid
    wait_for_journal("systemd's watchdog timeout", "_PID=1", f"UNIT={UNIT}", cursor=cursor,
                     pattern=r"Watchdog timeout")
    assert int(unit_property(UNIT, "NRestarts")) >= 1
    assert not os.path.exists(f"/proc/{pid}")
    assert api("/v1/health")[0] == 200


def test_socket_activation_starts_the_daemon_on_first_request(node):
    systemctl("start", "piniond.socket")
    assert unit_property(UNIT, "ActiveState") == "inactive"
    assert os.path.exists(SOCKET)
    code, body = api("/v1/health", timeout=60)
    assert code == 200, body
    assert unit_property(UNIT, "ActiveState") == "active"
    assert main_pid() > 0
    assert api_json("/v1/status")["ready"] is True


def test_socket_unit_makes_the_sockets_dir_and_the_old_path(node):
    """piniond.socket binds in the sockets-only directory, root:root 0755, and links the path
    clients of old use; pinionctl's default finds it, and both answer."""
    systemctl("start", "piniond.socket")
    st = os.lstat(os.path.dirname(SOCKET))
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o755 and st.st_uid == 0
    assert stat.S_ISSOCK(os.lstat(SOCKET).st_mode)
    assert os.path.islink(LEGACY_SOCKET) and os.path.realpath(LEGACY_SOCKET) == SOCKET
    assert api("/v1/health", timeout=60)[0] == 200
    assert api("/v1/health", sock=LEGACY_SOCKET)[0] == 200
    p = subprocess.run(["/usr/bin/pinionctl", "health"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p


def test_restart_keeps_the_socket_and_answers_every_queued_request(node):
    pid = start_agent()
    inode = os.stat(SOCKET).st_ino
    restarted = threading.Event()

    def restart():
        # Three restarts against clients that never pause: a request lost in the moment the
        # old process exits shows up within a few.
        for _ in range(3):
            time.sleep(0.5)
            systemctl("restart", UNIT)
        time.sleep(0.5)  # the clients go on a little against the last process
        restarted.set()

    t = threading.Thread(target=restart)
    t.start()
    # /v1/status answers 200 also while the agent stops (/v1/health then says 503).
    outcomes = concurrent_requests("/v1/status", 8, restarted.is_set)
    t.join()
    assert main_pid() not in (0, pid)
    assert os.stat(SOCKET).st_ino == inode
    unanswered = [o for o in outcomes if not isinstance(o, int)]
    assert not unanswered, f"{len(unanswered)} of {len(outcomes)} requests got no answer: {unanswered[:3]}"
    assert all(o == 200 for o in outcomes), sorted(set(outcomes))
    assert len(outcomes) >= 20, len(outcomes)


def walk(top):
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            yield os.path.join(dirpath, n)


def test_kill_9_restarts_with_state_intact_and_nothing_left_behind(node):
    node.healthy()
    pid = start_agent()
    cert = f"{STATE_DIR}/identity/node/cert.pem"
    before = {p: sha256_of(p) for p in (cert, f"{STATE_DIR}/ca/ca.crt", f"{STATE_DIR}/ca/ca.key")}
    bundle = os.readlink(f"{STATE_DIR}/configs/app/..data")
    inode = os.stat(SOCKET).st_ino
    cursor = journal_cursor()
    os.kill(pid, signal.SIGKILL)
    new = wait_for("a new main PID", lambda: (p := main_pid()) not in (0, pid) and
                   unit_property(UNIT, "ActiveState") == "active" and p, timeout=45)
    wait_for_journal("systemd saw the kill", "_PID=1", f"UNIT={UNIT}", cursor=cursor,
                     pattern=r"status=9/KILL")
    # The same node identity and CA (the certificate is still valid: not reissued), the same
    # published bundle version, the same socket.
    assert {p: sha256_of(p) for p in before} == before
    assert os.readlink(f"{STATE_DIR}/configs/app/..data") == bundle
    assert os.stat(SOCKET).st_ino == inode
    assert module_status("identity")["state"] == "running"
    assert module_status("configsync")["state"] == "running"
    # Nothing leaked: no temp file of an interrupted write, only the new process in the cgroup.
    leftovers = [p for p in walk(STATE_DIR) if os.path.basename(p).startswith((".#", "..data_tmp"))]
    assert not leftovers, leftovers
    assert unit_cgroup_pids() == {new}
