# SPDX-License-Identifier: MIT
"""pinionctl against a real piniond: human tables, --json, exit codes (0 ok, 1 failure reported
by the agent, 2 usage, 3 agent unreachable)."""

import json
import os

from pinion_testlib import MODULES, make_pod, run_pinionctl


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
