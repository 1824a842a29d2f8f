# SPDX-License-Identifier: MIT
"""pinionctl against a real piniond: human tables, --json, exit codes (0 ok, 1 failure reported
by the agent, 2 usage, 3 agent unreachable)."""

import json
import os
import re
import subprocess
import time

import pytest

from pinion_testlib import BUILDDIR, MODULES, SRCDIR, clean_env, make_pod, run_pinionctl, wait_until
from configsync_testlib import config_section, test_ca  # noqa: F401 (test_ca: a fixture)
import reclaim_testlib
import zkreg_testlib
from zkreg_testlib import web_pod, zk_config


def _shape(v):
    """The JSON shape of a value: dict keys (recursively), list element shapes, value types."""
    if isinstance(v, dict):
        return {k: _shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_shape(v[0])] if v else []
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if v is None:
        return "null"
    return type(v).__name__


def test_health(agent):
    rc, out, err = agent.ctl("health")
    assert rc == 0, (rc, out, err)
    assert "ok" in out.lower(), out


def test_status_table_lists_modules(agent):
    rc, out, err = agent.ctl("status")
    assert rc == 0, (rc, out, err)
    for mod in MODULES:
        assert mod in out, (mod, out)
    assert "disabled" in out, out
    assert "test-node" in out, out
    # A table for people, not JSON.
    assert not out.lstrip().startswith("{"), out


def test_pods_table(agent):
    agent.write_pod("web", make_pod("web-1", namespace="shop"))
    agent.wait_pod("shop", "web-1")
    rc, out, err = agent.ctl("pods")
    assert rc == 0, (rc, out, err)
    assert "web-1" in out and "shop" in out, out


def test_json_status_matches_api(agent):
    rc, out, err = agent.ctl("--json", "status")
    assert rc == 0, (rc, out, err)
    got = json.loads(out)
    api = agent.status()
    assert _shape(got) == _shape(api), (got, api)
    assert [m["name"] for m in got["modules"]] == [m["name"] for m in api["modules"]]
    assert got["node"] == api["node"]


def test_json_pods_matches_api(agent):
    agent.write_pod("web", make_pod("web-1"))
    agent.wait_pod("default", "web-1")
    rc, out, err = agent.ctl("--json", "pods")
    assert rc == 0, (rc, out, err)
    got = json.loads(out)
    api = agent.pods()
    assert got["pods"] == api["pods"]


def test_metrics(agent):
    rc, out, err = agent.ctl("metrics")
    assert rc == 0, (rc, out, err)
    assert "pinion_build_info" in out, out[:2000]
    assert "# TYPE" in out


def test_unknown_command_exits_2(agent):
    rc, out, err = agent.ctl("frobnicate")
    assert rc == 2, (rc, out, err)
    assert "frobnicate" in err, err


def test_no_command_exits_2(agent):
    rc, out, err = agent.ctl()
    assert rc == 2, (rc, out, err)


def test_help_exits_0():
    rc, out, err = run_pinionctl("--help")
    assert rc == 0, (rc, out, err)
    assert "health" in out and "status" in out, out


def test_missing_socket_exits_3(tmp_dir):
    sock = os.path.join(tmp_dir, "nothing-here.sock")
    rc, out, err = run_pinionctl("--socket", sock, "health")
    assert rc == 3, (rc, out, err)
    assert sock in err, err


def test_stopped_agent_exits_3(agent):
    rc = agent.sigterm()
    agent.assert_exit(rc, 0)
    rc, out, err = agent.ctl("status")
    assert rc == 3, (rc, out, err)
    assert agent.socket in err, err


def test_module_not_running_exits_4(agent):
    # The identity module is disabled: the agent says so (503 naming the module), which is
    # exit 4 with its message on stderr (test_module_down.py has every command).
    rc, out, err = agent.ctl("identity")
    assert rc == 4, (rc, out, err)
    assert err.startswith("pinionctl: identity is disabled: "), err


# A "label: value" line whose value touches its label ("session id:0x1"), and a count whose noun
# does not agree with it ("1 errors").
GLUED_LABEL = re.compile(r"^ *[a-z][a-z]*(?: [a-z]+){0,2}:[^\s/]", re.M)
BAD_PLURAL = re.compile(r"(?<![\d.])1 (errors|reloads|routes|peers|conflicts|registrations)\b")


def assert_readable(cmd, out):
    assert not GLUED_LABEL.search(out), (cmd, GLUED_LABEL.search(out).group(0), out)
    assert not BAD_PLURAL.search(out), (cmd, BAD_PLURAL.search(out).group(0), out)


def test_text_output_labels_and_counts(agent_factory):
    if not zkreg_testlib.zookeeper_available():
        pytest.skip("zookeeper not installed")
    zk = zkreg_testlib.ZkStandalone().start()
    try:
        a = agent_factory(config=zk_config(zk))
        a.write_pod("web", web_pod("web-1", "/pinion-test/cli"))
        a.write_pod("broken", "{ not json")
        wait_until(lambda: a.status()["pods"]["errors"], 10, desc="the broken pod file reported")
        wait_until(lambda: any(r["state"] == "registered" for r in a.get_json("/v1/registrations")["registrations"]),
                   15, desc="web-1 registered")
        for cmd in (["status"], ["pods"], ["pods", "web-1"], ["registrations"], ["reclaim"], ["configs"],
                    ["identity"], ["health"]):
            r = a.ctl(*cmd)
            assert r.rc in (0, 1, 4), (cmd, r)
            assert_readable(cmd, r.stdout)
        # The session id, spaced from its label.
        r = a.ctl("registrations")
        assert re.search(r"^session id: +0x[0-9a-f]+$", r.stdout, re.M), r.stdout
        # --json is the whole document here too.
        wait_until(lambda: json.loads(a.ctl("--json", "registrations").stdout) == a.get_json("/v1/registrations"),
                   5, desc="pinionctl --json registrations == GET /v1/registrations")
        r = a.ctl("drain")
        assert r.rc == 0 and r.stdout.startswith("1 registration marked STOPPING;"), r
        r = a.ctl("--json", "undrain")
        assert r.rc == 0 and isinstance(json.loads(r.stdout), dict), r
    finally:
        zk.close()


def test_status_names_the_pod_files_in_error(agent):
    agent.write_pod("web", make_pod("web-1"))
    bad = agent.write_pod("broken", "{ not json")
    wait_until(lambda: agent.status()["pods"]["errors"], 10, desc="the broken pod file reported")
    errors = agent.status()["pods"]["errors"]
    assert len(errors) == 1 and errors[0].startswith(bad + ": "), errors
    rc, out, err = agent.ctl("status")
    assert rc == 0, (rc, out, err)
    assert re.search(r"^pods: +1 \(pods-dir %s, 1 error\)$" % re.escape(agent.pods_dir), out, re.M), out
    # Which file, and why: the agent's own words, one line each.
    assert re.search(r"^  error: +%s$" % re.escape(errors[0]), out, re.M), out


@pytest.fixture
def reclaim_agent(agent_factory):
    """An agent with one reclaim target: a memory cgroup of its own (v1 here)."""
    if not reclaim_testlib.v1_available():
        pytest.skip("no cgroup v1 memory hierarchy")
    g = reclaim_testlib.MemCgroup("/pinion-test-cli-%d" % os.getpid()).create(limit=256 << 20)
    try:
        yield agent_factory(config={"reclaim.cli": {"cgroup": g.name, "interval": "1h"}})
    finally:
        os.rmdir(g.dir)


def test_reclaim_says_which_cgroup_version(reclaim_agent):
    api = reclaim_agent.get_json("/v1/reclaim")
    rc, out, err = reclaim_agent.ctl("reclaim")
    assert rc == 0, (rc, out, err)
    want = "-" if api.get("cgroup_version") is None else "v%d" % api["cgroup_version"]
    assert re.search(r"^cgroup: +%s$" % re.escape(want), out, re.M), (api, out)
    assert want == "v1", api


def test_json_prints_the_whole_api_body(reclaim_agent):
    """--json is the agent's document, every field of it, for each command that reads one (configs
    with its module switched off: test_module_down.py)."""
    agent = reclaim_agent
    agent.write_pod("web", make_pod("web-1"))
    agent.wait_pod("default", "web-1")
    volatile = {"uptime_seconds"}

    def same(got, api):
        if isinstance(got, dict):
            got = {k: v for k, v in got.items() if k not in volatile}
            api = {k: v for k, v in api.items() if k not in volatile}
        return got == api

    for cmd, path in ((["health"], "/v1/health"), (["status"], "/v1/status"), (["pods"], "/v1/pods"),
                      (["pods", "web-1"], "/v1/pods/default/web-1"), (["reclaim"], "/v1/reclaim")):
        def matches():
            r = agent.ctl("--json", *cmd)
            assert r.rc == 0, (cmd, r)
            return same(json.loads(r.stdout), agent.get_json(path))
        # Fields that change between the two reads (counters, generations) settle on a retry.
        wait_until(matches, 5, desc="pinionctl --json %s == GET %s" % (" ".join(cmd), path))


# ---- bash completion (shell-completion/bash/pinionctl), driven as bash drives it ----

COMPLETION = os.path.join(SRCDIR, "shell-completion", "bash", "pinionctl")


def complete(*words, env=None):
    """What the completion offers for the command line words (the last one being completed),
    with pinionctl found on PATH as an installed one would be."""
    script = (
        'source "$1"; shift\n'
        'complete -p pinionctl >&2\n'
        'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}\n'
        '_pinionctl pinionctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n')
    e = clean_env(env)
    e["PATH"] = BUILDDIR + os.pathsep + e.get("PATH", "/usr/bin:/bin")
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash", COMPLETION] + list(words),
                       capture_output=True, text=True, env=e, timeout=10, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p
    assert p.stderr.strip() == "complete -F _pinionctl pinionctl", p.stderr
    return sorted(w for w in p.stdout.split("\n") if w)


def test_bash_completion_of_commands_and_options():
    rc, _, err = run_pinionctl()
    table = sorted(re.search(r"^Commands:(.*)$", err, re.M).group(1).split())
    assert complete("pinionctl", "") == table
    assert complete("pinionctl", "wa") == ["wait-config"]
    assert complete("pinionctl", "--so") == ["--socket"]
    assert complete("pinionctl", "pods", "--j") == ["--json"]  # options may follow the command
    assert "--timeout" in complete("pinionctl", "-")
    assert complete("pinionctl", "status", "") == []  # status takes no argument


def test_bash_completion_of_pod_and_config_names(agent_factory, test_ca, tmp_path):
    a = agent_factory(config={"config.app": config_section("https://127.0.0.1:1/app/manifest.json",
                                                           str(tmp_path / "app"), test_ca),
                              "config.db": config_section("https://127.0.0.1:1/db/manifest.json",
                                                          str(tmp_path / "db"), test_ca)})
    a.write_pod("web", make_pod("web-1", namespace="shop"))
    a.write_pod("api", make_pod("api-1"))
    a.wait_pod("shop", "web-1")
    a.wait_pod("default", "api-1")
    # The agent named on the line, in every spelling, or by $PINION_SOCKET.
    assert complete("pinionctl", "--socket", a.socket, "pods", "") == ["default/api-1", "shop/web-1"]
    assert complete("pinionctl", "-s", a.socket, "pods", "sh") == ["shop/web-1"]
    assert complete("pinionctl", "--socket", "=", a.socket, "pods", "") == ["default/api-1", "shop/web-1"]
    assert complete("pinionctl", "pods", "d", env={"PINION_SOCKET": a.socket}) == ["default/api-1"]
    assert complete("pinionctl", "-s", a.socket, "wait-config", "") == ["app", "db"]
    assert complete("pinionctl", "-s", a.socket, "wait-config", "--timeout", "5s", "d") == ["db"]
    # One argument each: nothing after it.
    assert complete("pinionctl", "-s", a.socket, "pods", "shop/web-1", "") == []


def test_bash_completion_without_an_agent_is_quick_and_silent(tmp_dir):
    gone = os.path.join(tmp_dir, "nothing-here.sock")
    t0 = time.monotonic()
    assert complete("pinionctl", "--socket", gone, "pods", "") == []
    assert time.monotonic() - t0 < 2
    rc, out, err = run_pinionctl("--socket", gone, "__complete", "pods")
    assert rc == 3 and out == "" and err == "", (rc, out, err)


def _ctl_as_nobody(sock, *args):
    def drop():
        os.setgid(65534)
        os.setuid(65534)
    p = subprocess.run([os.path.join(BUILDDIR, "pinionctl"), "--socket", sock] + list(args), capture_output=True,
                       text=True, preexec_fn=drop, timeout=10, env=clean_env(), stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def test_other_users_and_the_socket_mode(agent_factory):
    # pinionctl(1): with the default socket-mode (0660, no socket-group) only root connects...
    a = agent_factory()
    rc, out, err = _ctl_as_nobody(a.socket, "health")
    assert rc == 3 and "Permission denied" in err, (rc, out, err)
    a.stop()
    # ...and where everyone may connect, another user outside pods gets health, not the rest.
    b = agent_factory(config={"agent": {"socket-mode": "0666"}})
    rc, out, err = _ctl_as_nobody(b.socket, "health")
    assert rc == 0 and out == "ok\n", (rc, out, err)
    rc, out, err = _ctl_as_nobody(b.socket, "status")
    assert rc == 1 and "403" in err, (rc, out, err)
