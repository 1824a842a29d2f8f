# SPDX-License-Identifier: MIT
"""What real runtimes send pinion-cni beyond the basics: a requested MAC address (podman
--mac-address: CNI_ARGS MAC= and the "mac" capability's runtimeConfig), and every cniVersion a
runtime may ask in (libcni <= 1.1 of podman 4 and containerd 1.6/1.7 stops at 1.0.0; older ones
at 0.4.0), each answered in that version's result format, which the reference portmap plugin
(Debian's containernetworking-plugins) then parses as its prevResult. And how the plugin reads
the agent's answer (HTTP/1.1 on the socket: up to Content-Length, not to the close)."""

import json
import os
import socket
import subprocess
import threading

import pytest

from pinion_testlib import wait_until
from podnet_testlib import PINION_CNI, PYTHON, cni, exec_plugin, free_pod_cidr, k8s_args, netns, pinion_conf, podnet_status

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


PROBE = """
import socket, sys
for name in sys.stdin:
    try:
        socket.if_nametoindex(name.strip())
        print("there", flush=True)
    except OSError:
        print("gone", flush=True)
"""


@pytest.fixture
def agent(agent_factory):
    a = agent_factory(config={"network": {"pod-cidr": free_pod_cidr(), "address-quarantine": "0s"}})
    return a


def pod_mac(ns):
    return ns.run("cat", "/sys/class/net/eth0/address").stdout.strip()


def nothing_allocated(a, ns):
    assert podnet_status(a)["details"]["pool"]["allocated"] == 0
    assert "eth0" not in ns.run("ip", "-o", "link").stdout


def test_mac_from_cni_args_is_the_pod_interfaces_and_check_verifies_it(agent, netns):
    n = netns()
    mac = "0a:58:0a:f4:01:07"
    args = k8s_args("default", "web", "uid-web") + ";MAC=0A:58:0A:F4:01:07"
    r = cni(agent, "ADD", "m1", n, args=args)
    assert r.rc == 0, r
    assert pod_mac(n) == mac
    pod_if = r.json["interfaces"][r.json["ips"][0]["interface"]]
    assert pod_if["name"] == "eth0" and pod_if["mac"] == mac, r.json
    conf = pinion_conf(agent, prevResult=r.json)
    ok = cni(agent, "CHECK", "m1", n, conf=conf, args=args)
    assert ok.rc == 0, ok

    # Someone changes the address behind the runtime's back: drift, whether CHECK names the MAC
    # again (CNI_ARGS) or only prevResult lists it.
    n.run("ip", "link", "set", "eth0", "address", "0a:58:0a:f4:01:08")
    for check_args in (args, None):
        bad = cni(agent, "CHECK", "m1", n, conf=conf, args=check_args)
        assert bad.rc != 0 and bad.code == 101, bad
        assert mac in bad.json["details"] and "0a:58:0a:f4:01:08" in bad.json["details"], bad
    assert cni(agent, "DEL", "m1", n).rc == 0


def test_mac_capability_runtime_config_wins_over_cni_args(agent, netns):
    n = netns()
    conf = pinion_conf(agent, runtimeConfig={"mac": "02:00:00:00:be:ef"})
    r = cni(agent, "ADD", "m2", n, conf=conf, args="IgnoreUnknown=1;MAC=02:00:00:00:00:01")
    assert r.rc == 0, r
    assert pod_mac(n) == "02:00:00:00:be:ef"
    assert r.json["interfaces"][1]["mac"] == "02:00:00:00:be:ef", r.json
    check = cni(agent, "CHECK", "m2", n, conf=dict(conf, prevResult=r.json))
    assert check.rc == 0, check
    assert cni(agent, "DEL", "m2", n).rc == 0


@pytest.mark.parametrize("mac", ["01:00:5e:00:00:01", "ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00", "0a:58:0a:f4:01",
                                 "0a:58:0a:f4:01:07:09", "0a-58:0a:f4:01:07", "zz:58:0a:f4:01:07", ""])
def test_bad_mac_is_refused_before_anything_is_allocated(agent, netns, mac):
    n = netns()
    r = cni(agent, "ADD", "bad", n, args="MAC=" + mac) if mac else None
    if r is not None:
        assert r.rc != 0 and r.code == 4, r
        assert "MAC" in r.json["details"], r
        nothing_allocated(agent, n)
        # The runtime's DEL after the failed ADD, with the same arguments, succeeds.
        d = cni(agent, "DEL", "bad", n, args="MAC=" + mac)
        assert d.rc == 0, d
    r = cni(agent, "ADD", "bad", n, conf=pinion_conf(agent, runtimeConfig={"mac": mac}))
    assert r.rc != 0 and r.code == 7, r
    assert "runtimeConfig.mac" in r.json["details"], r
    nothing_allocated(agent, n)


def test_runtime_config_mac_must_be_a_string(agent, netns):
    n = netns()
    for rc in ({"mac": 42}, "mac"):
        r = cni(agent, "ADD", "bad", n, conf=pinion_conf(agent, runtimeConfig=rc))
        assert r.rc != 0 and r.code == 7, r
    nothing_allocated(agent, n)


@pytest.mark.parametrize("version", ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"])
def test_add_result_in_the_asked_version_parses_for_the_reference_plugins(agent, netns, version):
    n = netns()
    cid = "v" + version.replace(".", "")
    r = cni(agent, "ADD", cid, n, conf=pinion_conf(agent, version=version))
    assert r.rc == 0, r
    res = r.json
    assert res["cniVersion"] == version
    assert [i["name"] for i in res["interfaces"]][1] == "eth0"
    (ip,) = res["ips"]
    # 0.3.0 to 0.4.0 name the IP version in each ips entry; 1.0.0 dropped the field.
    if version < "1.0.0":
        assert ip["version"] == "4", res
    else:
        assert "version" not in ip, res
    assert res["interfaces"][ip["interface"]]["sandbox"] == n.path
    # The reference portmap (its libcni parses prevResult by the config's cniVersion, and
    # converts it) takes it and passes it on unchanged in substance.
    if version != "1.1.0":  # Debian's portmap 1.1.1 speaks up to 1.0.0
        conf = {"cniVersion": version, "name": "pinion", "type": "portmap", "capabilities": {"portMappings": True},
                "prevResult": res}
        p = exec_plugin("portmap", "ADD", conf, container_id=cid, netns=n)
        assert p.rc == 0, p
        assert p.json["cniVersion"] == version and p.json["ips"][0]["address"] == ip["address"], p
        assert exec_plugin("portmap", "DEL", conf, container_id=cid, netns=n).rc == 0
    # Errors come in the asked version too.
    e = cni(agent, "CHECK" if version >= "0.4.0" else "ADD", "unknown", n if version >= "0.4.0" else "/nonexistent",
            conf=pinion_conf(agent, version=version, prevResult=res))
    assert e.rc != 0 and e.json["cniVersion"] == version, e
    assert cni(agent, "DEL", cid, n, conf=pinion_conf(agent, version=version)).rc == 0


def test_every_1_1_verb_is_served_to_a_runtime_asking_in_1_1_and_refused_below(agent, netns):
    assert cni(agent, "STATUS", conf=pinion_conf(agent, version="1.1.0")).rc == 0
    gc = cni(agent, "GC", conf=pinion_conf(agent, version="1.1.0", **{"cni.dev/valid-attachments": []}))
    assert gc.rc == 0, gc
    for verb in ("STATUS", "GC"):
        r = cni(agent, verb, conf=pinion_conf(agent, version="1.0.0"))
        assert r.rc != 0 and r.code == 1 and r.json["cniVersion"] == "1.0.0", r
    v = exec_plugin(PINION_CNI, "VERSION", {"cniVersion": "1.0.0"})
    assert v.rc == 0 and v.json["supportedVersions"] == ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"], v


def test_del_frees_the_interface_name_at_once_for_the_next_plugin(agent, netns, tmp_dir):
    """A runtime that re-wires a sandbox right after DEL (another network, a retried ADD) finds
    CNI_IFNAME free in the namespace: the reference ptp's ADD there must not fail with
    "container veth name provided (eth0) already exists"."""
    n = netns()
    ptp = {"cniVersion": "1.0.0", "name": "compat-ptp", "type": "ptp",
           "ipam": {"type": "host-local", "subnet": free_pod_cidr(), "dataDir": os.path.join(tmp_dir, "ptp")}}
    # Asks the namespace, the moment DEL has returned, whether eth0 is there (a process started
    # beforehand: spawning one after DEL would give a deletion still running the time to end).
    probe = subprocess.Popen(["ip", "netns", "exec", n.name, PYTHON, "-c", PROBE], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        # A backlog of deletions (a node draining its pods): the next DEL's veth waits its turn.
        others = [netns() for _ in range(20)]
        for j, o in enumerate(others):
            assert cni(agent, "ADD", "drain%d" % j, o).rc == 0
        for j, o in enumerate(others):
            assert cni(agent, "DEL", "drain%d" % j, o).rc == 0
        for i in range(3):
            cid = "reuse%d" % i
            r = cni(agent, "ADD", cid, n)
            assert r.rc == 0, r
            assert cni(agent, "DEL", cid, n).rc == 0
            probe.stdin.write("eth0\n")
            probe.stdin.flush()
            assert probe.stdout.readline().strip() == "gone", "eth0 is still in the namespace after DEL (%d)" % i
            p = exec_plugin("ptp", "ADD", ptp, container_id=cid, netns=n)
            assert p.rc == 0, p
            assert exec_plugin("ptp", "DEL", ptp, container_id=cid, netns=n).rc == 0
    finally:
        probe.kill()
        probe.wait()
    # And the detached pod ends go with their veths.
    wait_until(lambda: n.run("ip", "-o", "link").stdout.count("\n") == 1, timeout=10)
    wait_until(lambda: podnet_status(agent)["details"]["pool"]["interfacesBeingDeleted"] == 0, timeout=10)


def test_veth_ends_have_one_queue_each_way(agent, netns):
    """A veth gets a queue per possible CPU unless told otherwise (their sysfs objects made and
    removed for nothing, and a grace period to drop to the one queue it uses): pinion asks for one."""
    n = netns()
    r = cni(agent, "ADD", "q1", n)
    assert r.rc == 0, r
    host = r.json["interfaces"][0]["name"]
    out = subprocess.run(["ip", "-d", "link", "show", "dev", host], capture_output=True, text=True).stdout
    assert "numtxqueues 1 numrxqueues 1" in out, out
    out = n.run("ip", "-d", "link", "show", "dev", "eth0").stdout
    assert "numtxqueues 1 numrxqueues 1" in out, out
    assert cni(agent, "DEL", "q1", n).rc == 0


def test_plugin_is_done_once_the_answer_is_in_not_when_the_agent_closes(tmp_path, netns):
    """The agent answers and then tidies up before it closes the connection; the plugin returns
    once the answer's Content-Length bytes are in, not at the close. Here a stand-in for the
    agent answers and keeps the connection open for a minute."""
    path = str(tmp_path / "agent.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    srv.settimeout(0.2)
    release = threading.Event()
    bodies = {"ADD": json.dumps({"result": {"cniVersion": "1.1.0", "interfaces": []}}).encode(), "DEL": b"{}"}

    def answer(c):
        data = b""
        while b"\r\n\r\n" not in data:
            data += c.recv(4096)
        head, body = data.split(b"\r\n\r\n", 1)
        length = int([h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")][0])
        while len(body) < length:
            body += c.recv(4096)
        out = bodies[json.loads(body)["command"]]
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(out), out))
        release.wait(60)  # the connection stays open
        c.close()

    def serve():
        while not release.is_set():
            try:
                c, _ = srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            c.settimeout(None)
            threading.Thread(target=answer, args=(c,), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        conf = {"cniVersion": "1.1.0", "name": "pinion", "type": "pinion-cni", "socket": path}
        ns = netns()
        r = exec_plugin(PINION_CNI, "ADD", conf, container_id="early", netns=ns, timeout=15)
        assert r.rc == 0 and json.loads(r.stdout)["cniVersion"] == "1.1.0", r
        r = exec_plugin(PINION_CNI, "DEL", conf, container_id="early", netns=ns, timeout=15)
        assert r.rc == 0 and r.stdout.strip() == "", r
    finally:
        release.set()
        srv.close()
        t.join(5)
