# SPDX-License-Identifier: MIT
"""podnet deletes only host interfaces it created (real network namespaces): a foreign
interface with the name ADD computes for the host end makes ADD fail with a CNI error naming it
and is left as it was; DEL, the reaper and a retried ADD after kill -9 clean only pinion's own."""

import json
import os
import subprocess

import pytest

from pinion_testlib import wait_until
from podnet_testlib import (cni, delete_links, host_links, netns, pinion_conf, podnet_status,  # noqa: F401
                            remove_podnet_state)

from test_podnet import fnv_host_ifname, podnet_agent  # noqa: F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

FOREIGN_ADDR = "192.0.2.77/32"


def ip(*args):
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


def link_details(name):
    """(kind, alias, index) of a host link, or None if there is none."""
    p = subprocess.run(["ip", "-d", "-j", "link", "show", "dev", name], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    li = json.loads(p.stdout)[0]
    return li.get("linkinfo", {}).get("info_kind"), li.get("ifalias", ""), li["ifindex"]


def make_foreign(name, kind, alias):
    if kind == "veth":
        ip("link", "add", name, "type", "veth", "peer", "name", "fx" + name[3:])
    else:
        ip("link", "add", name, "type", kind)
    if alias:
        ip("link", "set", "dev", name, "alias", alias)
    ip("addr", "add", FOREIGN_ADDR, "dev", name)


@pytest.fixture
def cleanup_links():
    made = []
    try:
        yield made
    finally:
        delete_links(made)


# A veth without the mark (what another tool makes), a veth marked by another tool, and a
# bridge that claims pinion's mark but is not a veth.
@pytest.mark.parametrize("kind,alias", [("veth", ""), ("veth", "other-tool:x"), ("bridge", "pinion:c-foreign")],
                         ids=["veth-unmarked", "veth-other-alias", "bridge-with-mark"])
def test_add_refuses_a_foreign_interface_with_the_host_name(podnet_agent, netns, cleanup_links, kind, alias):
    a = podnet_agent()
    n = netns()
    name = fnv_host_ifname("c-foreign", "eth0")
    cleanup_links.append(name)
    make_foreign(name, kind, alias)
    before = link_details(name)

    r = cni(a, "ADD", "c-foreign", n)
    assert r.rc != 0 and r.code == 103, r
    assert name in r.json["msg"] and "not created by pinion" in r.json["msg"], r.json
    # Untouched: the same interface (index), kind, alias and address.
    assert link_details(name) == before
    assert FOREIGN_ADDR in ip("-4", "addr", "show", "dev", name)
    # Nothing of the attempt stays: no address held, no pod end.
    assert podnet_status(a)["details"]["pool"]["allocated"] == 0
    assert "eth0" not in n.run("ip", "link").stdout
    a.wait_log("host interface %s exists and is not pinion's" % name)

    # Once it is gone, the same ADD works, and the host end carries pinion's mark.
    delete_links([name])
    r = cni(a, "ADD", "c-foreign", n)
    assert r.rc == 0, r
    assert link_details(name)[:2] == ("veth", "pinion:c-foreign")
    assert cni(a, "DEL", "c-foreign", n).rc == 0


def test_del_leaves_a_foreign_interface_that_took_the_name(podnet_agent, netns, cleanup_links):
    a = podnet_agent()
    n = netns()
    r = cni(a, "ADD", "c-del", n)
    assert r.rc == 0, r
    name = r.json["interfaces"][0]["name"]
    assert link_details(name)[:2] == ("veth", "pinion:c-del")
    # Ours goes behind the agent's back, something else takes its name.
    delete_links([name])
    cleanup_links.append(name)
    make_foreign(name, "bridge", "")
    before = link_details(name)

    check = cni(a, "CHECK", "c-del", n, conf=pinion_conf(a, prevResult=r.json))
    assert check.code == 101 and "host interface %s is not pinion's" % name in check.json["details"], check
    d = cni(a, "DEL", "c-del", n)
    assert d.rc == 0, d
    wait_until(lambda: podnet_status(a)["details"]["pool"]["interfacesBeingDeleted"] == 0, timeout=5)
    assert link_details(name) == before
    assert FOREIGN_ADDR in ip("-4", "addr", "show", "dev", name)
    a.wait_log("Host interface %s is not pinion's" % name)
    assert podnet_status(a)["details"]["pool"]["allocated"] == 0


def test_retried_add_after_kill9_cleans_its_own(podnet_agent, netns):
    a = podnet_agent()
    n1, n2 = netns(), netns()
    r = cni(a, "ADD", "c-retry", n1)
    assert r.rc == 0, r
    name = r.json["interfaces"][0]["name"]
    first = link_details(name)
    assert first[:2] == ("veth", "pinion:c-retry")

    # kill -9, and the allocation is lost too (a state file restored from before it): only the
    # mark says the leftover veth is pinion's. The runtime retries the ADD in a new sandbox.
    a.kill9()
    remove_podnet_state(a.state_dir)
    a.start()
    r = cni(a, "ADD", "c-retry", n2)
    assert r.rc == 0, r
    second = link_details(name)
    assert second[:2] == ("veth", "pinion:c-retry") and second[2] != first[2]

    # A veth from an older pinion (no mark), or one a crash left between creating and marking
    # it: the allocation recorded before it was made vouches for it.
    a.kill9()
    ip("link", "set", "dev", name, "alias", "")
    assert link_details(name)[1] == ""
    a.start()
    r = cni(a, "ADD", "c-retry", n2)
    assert r.rc == 0, r
    third = link_details(name)
    assert third[:2] == ("veth", "pinion:c-retry") and third[2] != second[2]
    assert cni(a, "DEL", "c-retry", n2).rc == 0
    wait_until(lambda: name not in host_links(), timeout=5)
