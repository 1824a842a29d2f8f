# SPDX-License-Identifier: MIT
"""Configuration errors, at start and with --check-config: exit 78 (EX_CONFIG) and a
"FILE:LINE: reason" message naming the right file (main file or drop-in) and line. Drop-ins
in conf.d/ beside the config file override the main file, in lexical order."""

import os
import re

import pytest

from pinion_testlib import EXIT_CONFIG, Agent, line_of, run_piniond

# (id, [agent] overrides, text appended to the main file, drop-ins, the offending text, the
# file it is in: "main" or a drop-in's name). The line is where the offending text is.
CASES = [
    ("unknown-section", {}, "[bogus]\nkey=1", None, "[bogus]", "main"),
    ("unknown-empty-section", {}, "[agnet]", None, "[agnet]", "main"),
    ("unknown-key", {"colour": "blue"}, "", None, "colour=blue", "main"),
    ("unknown-key-in-module-section", {}, "[zookeeper]\nsevers=127.0.0.1:2181", None,
     "severs=", "main"),
    ("bad-duration", {"stop-timeout": "soon"}, "", None, "stop-timeout=soon", "main"),
    ("bad-size", {}, "[reclaim.x]\nmin-file=lots", None, "min-file=lots", "main"),
    ("bad-percent", {}, "[reclaim.x]\nhigh=120%", None, "high=120%", "main"),
    ("bad-integer", {}, "[apiserver]\nqps=fast", None, "qps=fast", "main"),
    ("bad-integer-burst", {}, "[apiserver]\nburst=ten", None, "burst=ten", "main"),
    ("relative-path", {"state-dir": "var/lib"}, "", None, "state-dir=var/lib", "main"),
    ("bad-octal-mode", {"socket-mode": "999"}, "", None, "socket-mode=999", "main"),
    ("bad-log-level", {"log-level": "loud"}, "", None, "log-level=loud", "main"),
    ("syntax-no-equals", {}, "this line has no equals sign", None, "this line has no", "main"),
    ("syntax-unterminated-section", {}, "[apiserver\nqps=5", None, "[apiserver", "main"),
    ("dropin-bad-value", {}, "",
     {"50-bad.conf": "# a drop-in\n[agent]\nlog-level=info\nstop-timeout=soon\n"},
     "stop-timeout=soon", "50-bad.conf"),
    ("dropin-unknown-section", {}, "",
     {"10-ok.conf": "[agent]\nlog-level=info\n", "20-bad.conf": "\n\n[nope]\nx=1\n"},
     "[nope]", "20-bad.conf"),
    ("dropin-syntax", {}, "", {"30-syntax.conf": "[agent]\nnot a key value line\n"},
     "not a key value", "30-syntax.conf"),
]

# A bool key exists only where the config has one; looked up in conf/pinion.conf at run time.
BOOL_VALUES = ("yes", "no", "true", "false")


def _bool_key():
    """A (section, key) whose documented default is a boolean, from conf/pinion.conf."""
    from pinion_testlib import SRCDIR
    path = os.path.join(SRCDIR, "conf", "pinion.conf")
    try:
        text = open(path).read()
    except OSError:
        return None
    section = None
    for line in text.splitlines():
        m = re.match(r"^\s*\[([a-z]+)\]\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^\s*[#;]?\s*([a-z][a-z0-9-]*)\s*=\s*(\S+)\s*$", line)
        if m and section and m.group(2).lower() in BOOL_VALUES:
            return section, m.group(1)
    return None


def _setup(case):
    cid, overrides, extra, dropins, needle, where = case
    a = Agent(config={"agent": overrides}, extra=extra, dropins=dropins)
    if where == "main":
        path, text = a.config_file, a.config_text()
    else:
        path, text = os.path.join(a.dropin_dir, where), dropins[where]
    return a, path, line_of(text, needle)


@pytest.fixture
def case_agent(request):
    made = []

    def make(case):
        a, path, line = _setup(case)
        made.append(a)
        return a, path, line
    yield make
    problems = [p for p in (a.close() for a in made) if p]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def _assert_prefix(text, path, line, at_line_start):
    prefix = "%s:%d: " % (path, line)
    rx = (r"^" if at_line_start else r"(^|\s)") + re.escape(prefix) + r"\S"
    assert re.search(rx, text, re.M), "expected %r%s in:\n%s" % (
        prefix, " at a line start" if at_line_start else "", text[-3000:])


def _assert_nothing_started(a):
    assert not os.path.exists(a.socket), "a socket was created despite the bad config"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_config_check(case_agent, case):
    a, path, line = case_agent(case)
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG, (rc, out, err)
    _assert_prefix(err, path, line, at_line_start=True)
    _assert_nothing_started(a)
    assert not os.path.exists(a.runtime_dir) and not os.path.exists(a.state_dir)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_config_start(case_agent, case):
    a, path, line = case_agent(case)
    a.start(wait=False)
    rc = a.wait_exit(15)
    a.expected_exit = True
    assert rc == EXIT_CONFIG, "exit %d\n%s" % (rc, a.log_text())
    _assert_prefix(a.log_text(), path, line, at_line_start=False)
    _assert_nothing_started(a)
    assert not [m for m in a.notifications() if m.key == "READY"], a.notifications()


def test_bad_bool(case_agent):
    found = _bool_key()
    if not found:
        pytest.skip("conf/pinion.conf documents no boolean key yet")
    section, key = found
    if section == "agent":
        case = ("bad-bool", {key: "maybe"}, "", None, "%s=maybe" % key, "main")
    else:
        case = ("bad-bool", {}, "[%s]\n%s=maybe" % (section, key), None, "%s=maybe" % key, "main")
    a, path, line = case_agent(case)
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG, (rc, out, err)
    _assert_prefix(err, path, line, at_line_start=True)


def test_check_config_and_start_say_the_same(case_agent):
    case = [c for c in CASES if c[0] == "bad-duration"][0]
    a, path, line = case_agent(case)
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG
    msg = [l for l in err.splitlines() if l.startswith("%s:%d: " % (path, line))][0]
    a.start(wait=False)
    rc = a.wait_exit(15)
    a.expected_exit = True
    assert rc == EXIT_CONFIG
    assert msg in a.log_text(), "check-config said %r; the daemon logged:\n%s" % (msg, a.log_text())


def test_check_config_good(case_agent):
    a, _, _ = case_agent(("good", {}, "[apiserver]\nqps=7\nburst=20\n\n[reclaim.web]\n"
                          "cgroup=/system.slice/web.service\nhigh=85%\ntarget=70%\nmin-file=128M", None, "qps=7", "main"))
    rc, out, err = a.check_config()
    assert rc == 0, (rc, out, err)
    # Validation only: nothing created.
    for p in (a.socket, a.runtime_dir, a.state_dir):
        assert not os.path.exists(p), "--check-config created %s" % p


@pytest.mark.parametrize("mode", ["check", "start"])
def test_missing_config_file(tmp_dir, mode):
    path = os.path.join(tmp_dir, "does-not-exist.conf")
    args = ["--config", path] + (["--check-config"] if mode == "check" else [])
    rc, out, err = run_piniond(*args, timeout=15)
    assert rc == EXIT_CONFIG, (rc, out, err)
    assert path in err, err


def test_empty_config_is_valid(tmp_dir):
    path = os.path.join(tmp_dir, "empty.conf")
    open(path, "w").close()
    rc, out, err = run_piniond("--config", path, "--check-config")
    assert rc == 0, (rc, out, err)


def test_dropin_overrides_main_file(agent_factory):
    a = agent_factory(dropins={"10-node.conf": "[agent]\nnode-name=from-dropin\n"})
    assert a.status()["node"] == "from-dropin"
    assert a.health()["node"] == "from-dropin"


def test_dropins_apply_in_lexical_order(agent_factory):
    a = agent_factory(start=False)
    # Created out of order, so directory order is not lexical order.
    a.write_dropin("20-b.conf", "[agent]\nnode-name=node-b\n")
    a.write_dropin("10-a.conf", "[agent]\nnode-name=node-a\n")
    a.write_dropin("15-x.conf", "[agent]\nnode-name=node-x\n")
    # Not *.conf: ignored, even though they are not valid config.
    a.write_dropin("30-c.conf.disabled", "[agent]\nnode-name=node-c\nthis is not ini\n")
    a.write_dropin("README", "drop *.conf files here\n")
    a.start()
    assert a.status()["node"] == "node-b"
