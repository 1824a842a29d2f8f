# SPDX-License-Identifier: MIT
"""pinionctl against a real piniond: human tables, --json, exit codes (0 ok, 1 failure reported
by the agent, 2 usage, 3 agent unreachable)."""

import json
import os
import re

import pytest

from pinion_testlib import MODULES, make_pod, run_pinionctl, wait_until
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


def test_route_not_available_exits_1(agent):
    # /v1/identity does not exist yet (or the identity module is disabled): the agent reports
    # a failure, which is exit 1, with its message on stderr.
    rc, out, err = agent.ctl("identity")
    assert rc == 1, (rc, out, err)
    assert err.strip(), "no message on stderr"


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
            assert r.rc in (0, 1), (cmd, r)
            assert_readable(cmd, r.stdout)
        # The session id, spaced from its label.
        r = a.ctl("registrations")
        assert re.search(r"^session id: +0x[0-9a-f]+$", r.stdout, re.M), r.stdout
        r = a.ctl("drain")
        assert r.rc == 0 and r.stdout.startswith("1 registration marked STOPPING;"), r
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


def test_reclaim_says_which_cgroup_version(agent):
    api = agent.get_json("/v1/reclaim")
    rc, out, err = agent.ctl("reclaim")
    assert rc == 0, (rc, out, err)
    want = "-" if api.get("cgroup_version") is None else "v%d" % api["cgroup_version"]
    assert re.search(r"^cgroup: +%s$" % re.escape(want), out, re.M), (api, out)


def test_json_prints_the_whole_api_body(agent):
    """--json is the agent's document, every field of it, for each command that reads one."""
    agent.write_pod("web", make_pod("web-1"))
    agent.wait_pod("default", "web-1")
    volatile = {"uptime_seconds"}

    def same(got, api):
        if isinstance(got, dict):
            got = {k: v for k, v in got.items() if k not in volatile}
            api = {k: v for k, v in api.items() if k not in volatile}
        return got == api

    for cmd, path in ((["health"], "/v1/health"), (["status"], "/v1/status"), (["pods"], "/v1/pods"),
                      (["pods", "web-1"], "/v1/pods/default/web-1"), (["configs"], "/v1/configs"),
                      (["reclaim"], "/v1/reclaim")):
        def matches():
            r = agent.ctl("--json", *cmd)
            assert r.rc == 0, (cmd, r)
            return same(json.loads(r.stdout), agent.get_json(path))
        # Fields that change between the two reads (counters, generations) settle on a retry.
        wait_until(matches, 5, desc="pinionctl --json %s == GET %s" % (" ".join(cmd), path))
