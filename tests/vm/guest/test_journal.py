# SPDX-License-Identifier: MIT
"""What piniond leaves in the real journal: structured fields an operator filters by
(journalctl MODULE=...), lines that name their module, and on a healthy node under the shipped
unit, not a single warning from a start, a reload and a stop."""

import os

from conftest import (UNIT, api_json, cni, journal, journal_cursor, journal_messages, module_status, node,
                      start_agent, systemctl, unit_property, wait_for, wait_for_journal)  # noqa: F401

POD_UID = "3f1c8a52-0000-4000-8000-0000000000a1"


def test_module_field_filters_one_modules_lines(node):
    node.healthy()
    pid = start_agent()
    entries = journal(f"_PID={pid}", "MODULE=reclaim")
    assert entries, "no entry with MODULE=reclaim"
    assert all(e["MODULE"] == "reclaim" for e in entries)
    messages = [e["MESSAGE"] for e in entries]
    assert any("starting → running" in m for m in messages), messages
    # Read without the fields (journalctl -u piniond), each line still says whose it is.
    assert all(m.startswith("[reclaim] ") for m in messages), messages
    others = journal(f"_PID={pid}", "MODULE=identity")
    assert others and all(e["MESSAGE"].startswith("[identity] ") for e in others), others


def test_healthy_start_reload_and_stop_log_no_warning(node):
    node.healthy()
    netns = node.netns("pinion-test-pod")
    cursor = journal_cursor()
    start_agent()
    # Real work for each module: an attachment, a bundle, a node certificate, a reclaim target.
    rc, out, err = cni("ADD", netns, "c0ffee01", POD_UID)
    assert rc == 0, (out, err)
    wait_for("the bundle published", lambda: os.path.islink("/var/lib/pinion/configs/app/..data"))
    for name in ("identity", "podnet", "reclaim", "configsync"):
        assert module_status(name)["state"] == "running", module_status(name)
    systemctl("reload", UNIT)
    wait_for("the reload counted", lambda: api_json("/v1/status")["config"]["reloads"] == 1)
    rc, out, err = cni("DEL", netns, "c0ffee01", POD_UID)
    assert rc == 0, (out, err)
    systemctl("stop", UNIT)
    assert unit_property(UNIT, "Result") == "success"
    # journalctl -u piniond -p warning: the agent's lines and systemd's about the unit.
    warnings = journal_messages("-u", UNIT, cursor=cursor, priority="warning")
    assert not warnings, "\n".join(warnings)
    # The run did log, at info: the check above would pass on an empty journal too.
    assert any(m.startswith("Ready: ") for m in journal_messages("-u", UNIT, cursor=cursor))
