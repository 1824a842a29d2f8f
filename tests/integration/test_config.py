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
    # Comments are whole lines: one after a value would become part of it.
    ("inline-hash-comment", {}, "[reclaim.x]\ncgroup=/system.slice/x.service   # the unit", None,
     "cgroup=", "main"),
    ("inline-semicolon-comment", {}, "[reclaim.x]\nmin-file=64M ; the floor", None, "min-file=", "main"),
    ("dropin-inline-comment", {}, "", {"40-c.conf": "[agent]\nlog-level=info # quiet\n"}, "log-level=", "40-c.conf"),
    # Files the config names must be there when it is checked, not when first used.
    ("missing-ca-file", {}, "[apiserver]\nurl=https://127.0.0.1:1\nca-file=/nonexistent/ca.pem", None,
     "ca-file=", "main"),
    ("missing-token-file", {}, "[apiserver]\nurl=https://127.0.0.1:1\ntoken-file=/nonexistent/token", None,
     "token-file=", "main"),
    ("missing-configsync-ca-file", {}, "[config.app]\nurl=https://127.0.0.1:1/m.json\ndest=/tmp/x\n"
     "ca-file=/nonexistent/ca.pem", None, "ca-file=", "main"),
    ("missing-cfssl-ca-file", {}, "[identity]\nsigner=cfssl\ntrust-domain=example.org\n"
     "cfssl-url=https://127.0.0.1:1\ncfssl-ca-file=/nonexistent/ca.pem", None, "cfssl-ca-file=", "main"),
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


LOG_LEVELS = ["debug", "info", "notice", "warning", "warn", "error", "err", "crit", "alert", "emerg"]


def test_log_level_error_lists_exactly_the_accepted_levels(case_agent):
    """The message lists every level the parser takes and nothing else."""
    a, path, line = case_agent(("bad-log-level", {"log-level": "loud"}, "", None, "log-level=loud", "main"))
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG, (rc, out, err)
    m = re.search(r"expected one of: (.*)$", err, re.M)
    assert m, err
    listed = m.group(1).split(", ")
    assert listed == LOG_LEVELS, listed
    for level in listed:
        a.write_config(agent={"log-level": level})
        rc, out, err = a.check_config()
        assert rc == 0, (level, rc, out, err)


def _inline_comment_message(err):
    return "an inline comment is not allowed, put it on its own line" in err


def test_inline_comment_says_why(case_agent):
    a, path, line = case_agent(("c", {}, "[reclaim.x]\ncgroup=/system.slice/x.service   # the unit", None,
                                "cgroup=", "main"))
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG and _inline_comment_message(err), (rc, out, err)


def test_url_fragment_and_semicolon_inside_a_value_are_kept(case_agent):
    """Only a '#' or ';' after whitespace is a comment: inside a word it is the value's."""
    a, _, _ = case_agent(("ok", {}, "[config.app]\nurl=https://127.0.0.1:1/m.json?a=b;c#frag\ndest=/tmp/x",
                          None, "url=", "main"))
    rc, out, err = a.check_config()
    assert rc == 0, (rc, out, err)


@pytest.mark.parametrize("mode", ["check", "start"])
def test_group_writable_socket_dir_is_refused(case_agent, mode):
    """start refuses a socket directory others can write to; --check-config says so first."""
    a, path, _ = case_agent(("gw", {}, "", None, "socket=", "main"))
    os.makedirs(a.runtime_dir)
    os.chmod(a.runtime_dir, 0o775)
    line = line_of(a.config_text(), "socket=")
    if mode == "check":
        rc, out, err = a.check_config()
        assert rc == EXIT_CONFIG, (rc, out, err)
        assert err.startswith("%s:%d: socket %s: " % (path, line, a.socket)), err
        assert "writable by group or other (mode 0775)" in err, err
        assert out == "", out
    else:
        a.start(wait=False)
        rc = a.wait_exit(15)
        a.expected_exit = True
        assert rc == EXIT_CONFIG, a.log_text()
        assert "writable by group or other (mode 0775)" in a.log_text(), a.log_text()


@pytest.mark.parametrize("key", ["token-file", "ca-file"])
def test_missing_file_names_file_and_key(case_agent, key):
    a, path, line = case_agent(("m", {}, "[apiserver]\nurl=https://127.0.0.1:1\n%s=/nonexistent/f" % key, None,
                                "%s=" % key, "main"))
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG, (rc, out, err)
    assert err.strip() == "%s:%d: %s /nonexistent/f: No such file or directory" % (path, line, key), err


@pytest.mark.parametrize("content,reason", [("", "the file is empty"), ("\n  \n", "the file is empty"),
                                            ("a\nb\n", "more than one line")])
def test_bad_token_file_is_refused(case_agent, tmp_dir, content, reason):
    token = os.path.join(tmp_dir, "token")
    with open(token, "w") as f:
        f.write(content)
    a, path, line = case_agent(("t", {}, "[apiserver]\nurl=https://127.0.0.1:1\ntoken-file=%s" % token, None,
                                "token-file=", "main"))
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG, (rc, out, err)
    assert err.startswith("%s:%d: token-file %s: %s" % (path, line, token, reason)), err


def test_check_config_success_line(case_agent, tmp_dir):
    token = os.path.join(tmp_dir, "token")
    with open(token, "w") as f:
        f.write("abc\n")
    a, _, _ = case_agent(("ok", {}, "[apiserver]\nurl=https://127.0.0.1:1\ntoken-file=%s\n\n"
                          "[reclaim.web]\ncgroup=/system.slice/web.service" % token,
                          {"10-zk.conf": "[zookeeper]\nservers=127.0.0.1:2181\n", "20-x.conf": "# nothing\n"},
                          "", "main"))
    rc, out, err = a.check_config()
    assert rc == 0, (rc, out, err)
    assert out == "configuration OK (3 files, 4 modules enabled: apiserver, zkreg, podnet, reclaim)\n", out


def test_check_config_success_line_nothing_enabled(tmp_dir):
    path = os.path.join(tmp_dir, "empty.conf")
    open(path, "w").close()
    rc, out, err = run_piniond("--config", path, "--check-config")
    assert rc == 0, (rc, out, err)
    assert out == "configuration OK (1 file, 0 modules enabled)\n", out


IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def test_missing_token_at_run_time_names_the_file(agent_factory):
    """In a cluster the token file is the service account's, not a config key: when it is missing
    the request error says which file, not a bare errno."""
    if os.path.exists(IN_CLUSTER_TOKEN):
        pytest.skip("this machine has a service-account token")
    a = agent_factory(env={"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1"})
    a.wait_log(re.escape("Cannot build the pods list request: token file %s: No such file or directory"
                         % IN_CLUSTER_TOKEN), timeout=10)


@pytest.mark.parametrize("section,key,text", [
    ("identity", "workload-socket", "[identity]\nsigner=local\ntrust-domain=example.org\nca-dir={d}/ca\n"
                                    "workload-socket={d}/open/workload.sock"),
    ("csi", "socket", "[csi]\nenable=yes\nsocket={d}/open/csi.sock\nregistration-dir={d}/reg"),
    ("csi", "registration-dir", "[csi]\nenable=yes\nsocket={d}/csi/csi.sock\nregistration-dir={d}/open"),
])
def test_module_socket_dir_others_can_write_is_refused(case_agent, tmp_dir, section, key, text):
    """The sockets modules serve on are judged by the rule start applies to them."""
    text = text.format(d=tmp_dir)
    os.makedirs(os.path.join(tmp_dir, "open"))
    os.chmod(os.path.join(tmp_dir, "open"), 0o777)
    a, path, line = case_agent(("s", {}, text, None, "%s=%s/open" % (key, tmp_dir), "main"))
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG, (rc, out, err)
    assert err.startswith("%s:%d: %s %s/open/" % (path, line, key, tmp_dir)), err
    assert "writable by group or other (mode 0777)" in err, err


def test_configsync_dest_others_can_write_is_refused(case_agent, tmp_dir):
    dest = os.path.join(tmp_dir, "dest")
    os.makedirs(dest)
    os.chmod(dest, 0o775)
    a, path, line = case_agent(("d", {}, "[config.app]\nurl=https://127.0.0.1:1/m.json\ndest=%s" % dest, None,
                                "dest=", "main"))
    rc, out, err = a.check_config()
    assert rc == EXIT_CONFIG, (rc, out, err)
    assert err.startswith("%s:%d: dest %s: group- or world-writable" % (path, line, dest)), err
