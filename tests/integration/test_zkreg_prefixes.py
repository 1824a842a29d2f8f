# SPDX-License-Identifier: MIT
"""[zookeeper] allowed-prefixes against a real ZooKeeper read back with kazoo: a pod registers
only at or below a prefix (${namespace} is its own namespace), zkreg creates only the nodes
below the prefix, the depth cap, and a reload that changes or breaks the list."""

import pytest

import zkreg_testlib as zt
from zkreg_testlib import base, kz, zk  # noqa: F401 (fixtures)
from zkreg_testlib import registrations, wait_endpoints, wait_reg, web_pod, zk_config

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")


def test_allowed_prefixes_namespace_template_and_depth_cap(agent_factory, zk, kz, base):
    """allowed-prefixes: a pod registers only at or below one of them (${namespace} is its own
    namespace), segment-wise; zkreg creates only the nodes below the prefix; a path deeper than
    16 segments is refused whatever the list says. A refused path: unready with a clear error."""
    kz.ensure_path(base + "/ns/team-a")
    kz.ensure_path(base + "/shared")
    a = agent_factory(config=zk_config(zk, allowed_prefixes=f"{base}/ns/${{namespace}}, {base}/shared"))
    a.write_pod("a-web", web_pod("web", base + "/ns/team-a/web", ip="10.0.4.1", namespace="team-a"))
    a.write_pod("b-web", web_pod("web", base + "/ns/team-a/web", ip="10.0.4.2", namespace="team-b"))
    a.write_pod("a-deep", web_pod("deep", base + "/shared/x/y", ip="10.0.4.3", namespace="team-a"))
    a.write_pod("a-near", web_pod("near", base + "/ns/team-ab", ip="10.0.4.4", namespace="team-ab"))
    a.write_pod("c-web", web_pod("web", base + "/ns/team-c/web", ip="10.0.4.5", namespace="team-c"))
    deep = base + "".join(f"/d{i}" for i in range(17 - base.count("/")))
    assert deep.count("/") == 17
    a.write_pod("a-toodeep", web_pod("toodeep", deep, ip="10.0.4.6", namespace="team-a"))

    wait_endpoints(kz, base + "/ns/team-a/web", ["10.0.4.1:8080"])
    wait_endpoints(kz, base + "/shared/x/y", ["10.0.4.3:8080"])  # parents below the prefix made
    r = wait_reg(a, "team-b/web", lambda r: r["state"] == "unready" and r["last_error"])
    assert "outside [zookeeper] allowed-prefixes" in r["last_error"] and "team-b" in r["last_error"], r
    # /ns/team-ab is not below /ns/team-a (whole segments); its own ${namespace} prefix does not exist
    r = wait_reg(a, "team-ab/near", lambda r: r["last_error"] and "must exist" in r["last_error"], timeout=15)
    assert kz.exists(base + "/ns/team-ab") is None, "zkreg created the allowed prefix itself"
    r = wait_reg(a, "team-c/web", lambda r: r["last_error"] and "must exist" in r["last_error"], timeout=15)
    assert r["state"] != "registered", r
    assert kz.exists(base + "/ns/team-c") is None, "zkreg created nodes at or above the allowed prefix"
    r = wait_reg(a, "team-a/toodeep", lambda r: r["state"] == "unready" and r["last_error"])
    assert "more than 16" in r["last_error"], r
    assert kz.exists(deep) is None

    # the operator makes team-c's prefix: it registers (after its backoff)
    kz.ensure_path(base + "/ns/team-c")
    wait_endpoints(kz, base + "/ns/team-c/web", ["10.0.4.5:8080"], timeout=20)


def test_allowed_prefixes_reload_and_bad_value(agent_factory, zk, kz, base):
    a = agent_factory(config=zk_config(zk))
    a.write_pod("p", web_pod("p", base + "/open/p", ip="10.0.5.1"))
    wait_endpoints(kz, base + "/open/p", ["10.0.5.1:8080"])
    # a reload that leaves the path outside every prefix deregisters it
    kz.ensure_path(base + "/only")
    a.write_config(sections=zk_config(zk, allowed_prefixes=base + "/only"))
    mark = a.log_mark()
    a.sighup()
    a.wait_log(r"Configuration reloaded", since=mark)
    wait_endpoints(kz, base + "/open/p", [])
    r = wait_reg(a, "default/p", lambda r: r["state"] == "unready")
    assert "allowed-prefixes" in r["last_error"], r
    # a bad prefix: the reload is refused, the old config keeps running
    a.write_config(sections=zk_config(zk, allowed_prefixes="relative/path"))
    mark = a.log_mark()
    a.sighup()
    a.wait_log(r"allowed-prefixes must be absolute", since=mark)
    assert registrations(a)["default/p"]["state"] == "unready"
