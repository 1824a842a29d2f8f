# SPDX-License-Identifier: MIT
"""Guest-side helpers for the VM suite. These tests run as root inside the guest booted by
tests/vm/run: systemd is PID 1, cgroup v2 is mounted at /sys/fs/cgroup, and pinion is installed
under /usr and /etc as `make install` put it. Every test leaves the node as it found it:
piniond stopped, drop-ins and transient units removed (the `node` fixture does this)."""

import json
import os
import shutil
import socket
import subprocess
import time

import pytest

CONF_D = "/etc/pinion/conf.d"
SOCKET = "/run/pinion/pinion.sock"
OUT = os.environ.get("PINION_VM_OUT", "/tmp")


def run(*argv, check=True, timeout=120, **kw):
    """Runs argv, returns the CompletedProcess (text); raises with its output on failure."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


def systemctl(*args, check=True):
    return run("systemctl", *args, check=check)


def unit_property(unit, prop):
    return run("systemctl", "show", "-P", prop, unit).stdout.strip()


def main_pid(unit="piniond.service"):
    return int(unit_property(unit, "MainPID") or 0)


def wait_for(what, cond, timeout=60.0, interval=0.1):
    """Polls cond() until it returns a true value, which it returns; fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def journal_cursor():
    p = run("journalctl", "-n", "0", "--show-cursor", "-q", check=False)
    for line in p.stdout.splitlines():
        if line.startswith("-- cursor: "):
            return line[len("-- cursor: "):]
    return None


def journal(*args, cursor=None):
    """Journal entries as dicts (journalctl -o json), after cursor when given."""
    argv = ["journalctl", "-o", "json", "--no-pager", *args]
    if cursor:
        argv += ["--after-cursor", cursor]
    run("journalctl", "--sync", check=False)
    p = run(*argv, check=False)
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def api(path, method="GET", sock=SOCKET, timeout=10):
    """One request to the local API over the Unix socket: (status, body text)."""
    p = run("curl", "-sS", "--max-time", str(timeout), "--unix-socket", sock, "-X", method,
            "-o", "-", "-w", "\n%{http_code}", f"http://localhost{path}", check=False, timeout=timeout + 5)
    body, _, code = p.stdout.rpartition("\n")
    return int(code or 0), body


def write_dropin(name, text):
    os.makedirs(CONF_D, exist_ok=True)
    path = os.path.join(CONF_D, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class Node:
    """What a test changes on the node, undone at the end: drop-ins, unit drop-ins, transient
    units, and the agent's state."""

    def __init__(self):
        self.dropins = []
        self.unit_dropins = []
        self.units = []

    def conf(self, name, text):
        self.dropins.append(write_dropin(name, text))

    def unit_dropin(self, unit, name, text):
        d = f"/etc/systemd/system/{unit}.d"
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        self.unit_dropins.append(path)
        systemctl("daemon-reload")

    def transient(self, unit):
        """Registers a transient unit (systemd-run) to stop at the end."""
        self.units.append(unit)
        return unit

    def cleanup(self):
        systemctl("stop", "piniond.service", "piniond.socket", check=False)
        systemctl("reset-failed", "piniond.service", "piniond.socket", check=False)
        for u in reversed(self.units):
            systemctl("stop", u, check=False)
            systemctl("reset-failed", u, check=False)
        for p in self.dropins + self.unit_dropins:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        for p in self.unit_dropins:
            d = os.path.dirname(p)
            if os.path.isdir(d) and not os.listdir(d):
                os.rmdir(d)
        if self.unit_dropins:
            systemctl("daemon-reload")
        shutil.rmtree("/var/lib/pinion", ignore_errors=True)


@pytest.fixture
def node():
    n = Node()
    try:
        yield n
    finally:
        n.cleanup()


def start_agent(timeout=90):
    """systemctl start piniond: returns once systemd has it active (Type=notify: READY=1)."""
    systemctl("start", "piniond.service")
    assert unit_property("piniond.service", "ActiveState") == "active"
    return main_pid()


def pytest_terminal_summary(terminalreporter):
    s = terminalreporter.stats
    count = lambda k: len([r for r in s.get(k, []) if getattr(r, "when", "call") in ("call", "setup")])  # noqa: E731
    terminalreporter.write_line(
        f"PINION-VM-RESULT passed={count('passed')} failed={count('failed') + count('error')} skipped={count('skipped')}")


def unix_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
