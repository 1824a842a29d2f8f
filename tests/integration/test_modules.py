# SPDX-License-Identifier: MIT
"""The six modules through the module contract: each parses and validates its own sections
(a setting it needs but lacks is a FILE:LINE error naming the section, exit 78), reports
`disabled` with the reason in /v1/status and /metrics, re-validates on SIGHUP, and keeps the
old config when the new one is refused."""

import atexit
import os
import shutil
import tempfile

import pytest

from pinion_testlib import line_of

# identity's local signer creates its CA in ca-dir: one per test process, removed at exit.
IDENTITY_CA_DIR = os.path.join(tempfile.gettempdir(), "pinion-it-ca-%d" % os.getpid())
atexit.register(shutil.rmtree, IDENTITY_CA_DIR, True)

# (id, config text appended to the main file, expected reason fragment, the line to blame)
INVALID = [
    ("identity-local-without-ca-dir", "[identity]\nsigner=local\ntrust-domain=example.org\n",
     "[identity] signer=local needs ca-dir", "[identity]"),
    ("identity-without-trust-domain", "[identity]\nsigner=cfssl\ncfssl-url=https://127.0.0.1:8888\n",
     "[identity] a signer needs trust-domain", "[identity]"),
    ("identity-unknown-signer", "[identity]\nsigner=vault\n",
     "invalid value 'vault' for 'signer' in [identity]: expected one of: local, kubernetes, cfssl, or empty", "signer=vault"),
    ("zookeeper-server-without-port", "[zookeeper]\nservers=127.0.0.1:2181,zk2\n",
     "[zookeeper] servers must be host:port entries", "[zookeeper]"),
    ("config-without-dest", "[config.app]\nurl=https://127.0.0.1/app/manifest.json\n",
     "[config.app] dest (where the files are published) is required", "[config.app]"),
    ("config-bad-name", "[config.a/b]\nurl=https://127.0.0.1/m.json\ndest=/tmp/x\n",
     "[config.a/b] the name after the dot may use only", "[config.a/b]"),
    ("reclaim-target-above-high", "[reclaim.api]\ncgroup=/kubepods/api\nhigh=70%\ntarget=80%\n",
     "[reclaim.api] target must be below high", "[reclaim.api]"),
    ("network-bad-cidr", "[network]\npod-cidr=10.1.2.0/33\n",
     "invalid value '10.1.2.0/33' for 'pod-cidr' in [network]", "pod-cidr="),
    ("network-bad-mtu", "[network]\npod-cidr=10.1.2.0/24\nmtu=100\n",
     "[network] mtu must be between 576 and 65535", "[network]"),
    ("apiserver-backoff-inverted", "[apiserver]\nbackoff-initial=1m\nbackoff-max=30s\n",
     "[apiserver] needs qps > 0, burst > 0 and 0 < backoff-initial <= backoff-max", "[apiserver]"),
]


@pytest.mark.parametrize("case", INVALID, ids=[c[0] for c in INVALID])
def test_module_validation_names_file_and_line(agent_factory, case):
    _, extra, reason, blame = case
    a = agent_factory(extra=extra, start=False)
    text = open(a.config_file).read()
    line = line_of(text, blame)
    rc, out, err = a.check_config()
    assert rc == 78, (rc, out, err)
    expected = "%s:%d: " % (a.config_file, line)
    assert err.startswith(expected), (expected, err)
    assert reason in err, (reason, err)


CONFIGURED = {
    "apiserver": "[apiserver]\nurl=https://127.0.0.1:6443\n",
    "identity": "[identity]\nsigner=local\ntrust-domain=example.org\nca-dir=%s\n" % IDENTITY_CA_DIR,
    "zkreg": "[zookeeper]\nservers=127.0.0.1:2181\n",
    "configsync": "[config.app]\nurl=https://127.0.0.1/m.json\ndest=/tmp/pinion-app\n",
    "podnet": "[network]\npod-cidr=10.1.2.0/24\n",
    "reclaim": "[reclaim.api]\ncgroup=/system.slice/api.service\n",
}


def modules_by_name(status):
    return {m["name"]: m for m in status["modules"]}


def test_unconfigured_modules_say_what_to_set(agent):
    mods = modules_by_name(agent.status())
    assert mods["apiserver"]["reason"] == "no [apiserver] url and not running in a cluster"
    assert mods["identity"]["reason"] == "no [identity] signer configured"
    assert mods["zkreg"]["reason"] == "no [zookeeper] servers configured"
    assert mods["configsync"]["reason"] == "no [config.NAME] sections configured"
    assert mods["podnet"]["reason"].startswith("no [network] pod-cidr")
    assert mods["reclaim"]["reason"] == "no [reclaim.NAME] sections configured"
    assert all(m["state"] == "disabled" and m["synced"] for m in mods.values())


def test_configured_modules_report_their_settings(agent_factory):
    a = agent_factory(extra="".join(CONFIGURED.values()))
    mods = modules_by_name(a.status())
    # The apiserver module runs: nothing listens on that port, so it backs off, degraded, and
    # the agent is still healthy and ready.
    assert mods["apiserver"]["state"] in ("starting", "degraded"), mods["apiserver"]
    assert mods["apiserver"]["details"]["url"] == "https://127.0.0.1:6443"
    assert mods["configsync"]["state"] in ("starting", "degraded"), mods["configsync"]
    # identity runs: its local CA signs the node certificate at once.
    assert mods["identity"]["details"]["trustDomain"] == "example.org"
    assert mods["identity"]["details"]["signer"] == "local"
    # zkreg runs too: no ZooKeeper there, so it keeps connecting, degraded or still starting.
    assert mods["zkreg"]["state"] in ("starting", "degraded"), mods["zkreg"]
    assert mods["zkreg"]["details"]["servers"] == ["127.0.0.1:2181"]
    assert mods["configsync"]["details"] == {"configs": ["app"]}
    # podnet runs (its pool is opened; no pod is wired by this test).
    assert mods["podnet"]["state"] == "running", mods["podnet"]
    assert mods["podnet"]["details"]["podCIDR"] == "10.1.2.0/24"
    assert mods["podnet"]["details"]["pool"]["allocated"] == 0
    # reclaim runs: the cgroup it names does not exist on this node, so it is degraded, saying which.
    assert mods["reclaim"]["state"] == "degraded" and mods["reclaim"]["reason"] == "api: missing", mods["reclaim"]
    assert mods["reclaim"]["details"]["targets"] == ["api"]
    assert a.health()["status"] == "ok"
    m = a.metrics()
    assert m.value("pinion_module_state", module="zkreg", state="running") == 0


def test_reload_applies_module_sections_and_refuses_bad_ones(agent):
    agent.write_config(extra=CONFIGURED["zkreg"])
    agent.sighup()
    agent.wait_log(r"Configuration reloaded")
    assert modules_by_name(agent.status())["zkreg"]["details"]["servers"] == ["127.0.0.1:2181"]

    mark = agent.log_mark()
    agent.write_config(extra="[zookeeper]\nservers=nohostport\n")
    agent.sighup()
    agent.wait_log(r"Reload refused", since=mark)
    status = agent.status()
    assert modules_by_name(status)["zkreg"]["details"]["servers"] == ["127.0.0.1:2181"]
    assert "[zookeeper] servers must be host:port entries" in status["config"]["last_reload_error"]
    assert status["config"]["reload_failures"] == 1
