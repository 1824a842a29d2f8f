# SPDX-License-Identifier: MIT
"""pytest glue for the integration tests.

With PINION_TAP=1 (set by run-pytest, i.e. under `make check`) every test case becomes one TAP
line for automake's tap-driver:

    ok 1 - tests/integration/test_daemon.py::test_health
    not ok 2 - tests/integration/test_daemon.py::test_sigterm
    ok 3 - tests/integration/test_daemon.py::test_socket_activation # SKIP reason
    # RSS_KIB=1234                       (diagnostics written by tests through pinion_testlib.diag)
    1..3

A failure in setup or teardown makes the case "not ok"; a file that fails to import is one
"not ok" line of its own. The TAP lines go to the file descriptor named by PINION_TAP_FD (fd 3
from run-pytest, whose stdout it is; pytest's own output goes to stderr there), else to the
terminal pytest writes to.

The fixtures every test file uses (agent, agent_factory, ...) live in pinion_testlib and are
re-exported here so pytest finds them.
"""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pinion_testlib  # noqa: E402
from pinion_testlib import agent, agent_factory, binaries, tmp_dir  # noqa: E402,F401
import pytest  # noqa: E402
from identity_testlib import PodCgroup, ServiceCgroup  # noqa: E402


def _cgroup_maker(cls):
    """A maker of test cgroups of cls, each removed at the end; the test is skipped where this
    host cannot make them."""
    made = []

    def make(key, **kw):
        try:
            cg = cls(key, **kw)
        except (OSError, RuntimeError) as e:
            pytest.skip("cannot create test cgroups: %s" % e)
        made.append(cg)
        return cg
    return made, make


@pytest.fixture
def pod_cgroups():
    """pod_cgroups(pod_uid, **PodCgroup options): a kubelet-layout cgroup of that pod."""
    made, make = _cgroup_maker(PodCgroup)
    yield make
    for cg in made:
        cg.close()


@pytest.fixture
def service_cgroups():
    """service_cgroups(unit, **ServiceCgroup options): the cgroup of a systemd unit."""
    made, make = _cgroup_maker(ServiceCgroup)
    yield make
    for cg in made:
        cg.close()

_TAP = os.environ.get("PINION_TAP") == "1"


class TapReporter:
    def __init__(self, config):
        self.config = config
        self.n = 0
        self.out = None
        self.pending = {}  # nodeid -> (status, directive)
        fd = os.environ.get("PINION_TAP_FD")
        if fd:
            try:
                self.out = os.fdopen(os.dup(int(fd)), "w", buffering=1)
            except (OSError, ValueError):
                self.out = None
        if self.out is None:
            # Capturing is suspended while plugins are configured, so fd 1 is the real stdout.
            self.out = os.fdopen(os.dup(1), "w", buffering=1)

    def write(self, line):
        # One write per line, flushed, so the lines never interleave with anything else.
        self.out.write(line + "\n")
        self.out.flush()

    def diag(self, text):
        for line in str(text).splitlines() or [""]:
            self.write("# " + line)

    def result(self, ok, nodeid, directive=None):
        self.n += 1
        # A test id never contains a newline; a "#" would start a TAP directive, so escape it.
        desc = nodeid.replace("\n", " ").replace("#", "\\#")
        line = "%s %d - %s" % ("ok" if ok else "not ok", self.n, desc)
        if directive:
            line += " # " + directive.replace("\n", " ")
        self.write(line)

    # --- pytest hooks ---

    def pytest_collectreport(self, report):
        if report.failed:
            self.result(False, "collect " + (report.nodeid or "session"))
            for line in str(report.longrepr).splitlines()[-15:]:
                self.diag(line)

    def pytest_runtest_logreport(self, report):
        state = self.pending.setdefault(report.nodeid, {"ok": True, "skip": None, "todo": None,
                                                        "failure": None})
        if report.when in ("setup", "call"):
            if hasattr(report, "wasxfail"):
                # Expected failure (xfail): TAP's TODO.
                state["todo"] = "TODO %s" % (report.wasxfail or "expected failure")
                state["ok"] = not report.skipped  # xpass is "ok # TODO", xfail is "not ok # TODO"
            elif report.skipped:
                reason = "skipped"
                if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
                    reason = report.longrepr[2]
                    if reason.startswith("Skipped: "):
                        reason = reason[len("Skipped: "):]
                state["skip"] = "SKIP " + reason
            elif report.failed:
                state["ok"] = False
                state["failure"] = state["failure"] or report.longrepr
        elif report.when == "teardown":
            if report.failed:
                state["ok"] = False
                state["skip"] = None
                state["failure"] = state["failure"] or report.longrepr
            del self.pending[report.nodeid]
            directive = state["todo"] or (state["skip"] if state["ok"] else None)
            self.result(state["ok"], report.nodeid, directive)
            if not state["ok"] and not state["todo"]:
                self._diag_failure(state["failure"])

    def _diag_failure(self, longrepr):
        # A short hint in the TAP stream itself; the full traceback is in the log (stderr).
        text = str(longrepr) if longrepr else ""
        lines = [l for l in text.splitlines() if l.startswith("E ")][:6]
        for line in lines:
            self.diag("  " + line)

    def pytest_sessionfinish(self, session, exitstatus):
        for nodeid in list(self.pending):
            st = self.pending.pop(nodeid)
            self.result(st["ok"], nodeid, st["skip"] if st["ok"] else None)
        if self.n == 0:
            self.result(False, "no tests were collected")
        self.write("1..%d" % self.n)


def _sigterm(signum, frame):
    # Python's default is to die at once; turn it into an interrupt so pytest still runs the
    # finalizers that stop the daemons and remove their temp dirs.
    raise KeyboardInterrupt("SIGTERM")


def pytest_configure(config):
    signal.signal(signal.SIGTERM, _sigterm)
    if _TAP and not hasattr(config, "_pinion_tap"):
        reporter = TapReporter(config)
        config._pinion_tap = reporter
        config.pluginmanager.register(reporter, "pinion-tap")
        pinion_testlib.set_diag_writer(reporter.diag)


def pytest_terminal_summary(terminalreporter):
    # Without TAP, diagnostics (RSS and the like) are shown at the end of the run.
    lines = pinion_testlib.collected_diagnostics()
    if lines and not _TAP:
        terminalreporter.section("pinion diagnostics")
        for line in lines:
            terminalreporter.write_line(line)
