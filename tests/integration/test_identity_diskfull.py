# SPDX-License-Identifier: MIT
"""Certificates on a full disk (pod-tls-dir, the CA and the state dir on a small tmpfs filled to
the last block): a renewal that cannot be written leaves the previous certificate in place,
whole, and no staging leftover; a new pod gets no half-written directory; the warning names the
directory, pinion_identity_failures_total{reason="enospc"} counts it; once space is freed the
files are written again within one retry interval, with nothing to restart."""

import os

import pytest

from diskfull_testlib import small_fs  # noqa: F401
from identity_testlib import cert_sans, key_matches, new_uid
from pinion_testlib import make_pod, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def identity_pod(name, uid, ip):
    return make_pod(name, namespace="ns", uid=uid, service_account="sa", ip=ip,
                    annotations={"pinion.io/identity": "true"})


def read(path):
    with open(path, "rb") as f:
        return f.read()


def gate_open(a):
    return {w["name"]: w["gateOpen"] for w in a.get_json("/v1/identity")["workloads"] if w["state"] == "issued"}


def entries(d):
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_full_disk_keeps_the_previous_certificate_and_heals(small_fs, agent_factory, tmp_path):
    fs = small_fs(str(tmp_path / "small"), size="4m")
    tls = os.path.join(fs.path, "pods-tls")
    a = agent_factory(start=False)
    a.agent_keys["state-dir"] = os.path.join(fs.path, "state")
    a.sections["identity"] = {"signer": "local", "trust-domain": "example.org",
                              "ca-dir": os.path.join(fs.path, "ca"), "pod-tls-dir": tls}
    a.write_config()
    a.start()
    uid = new_uid()
    a.write_pod("p1", identity_pod("p1", uid, "10.9.0.1"))
    cert = os.path.join(tls, uid, "cert.pem")
    wait_until(lambda: os.path.exists(cert), 15, desc="p1's certificate")
    old = read(cert), read(os.path.join(tls, uid, "key.pem"))
    before = entries(os.path.join(tls, uid))
    fs.fill()

    # A new certificate for p1 (its IP changed), and a new pod: neither can be written.
    mark = a.log_mark()
    a.write_pod("p1", identity_pod("p1", uid, "10.9.0.2"))
    uid2 = new_uid()
    a.write_pod("p2", identity_pod("p2", uid2, "10.9.0.3"))
    a.wait_log("no space left for its files under %s" % tls, since=mark)
    wait_until(lambda: a.metrics().value("pinion_identity_failures_total", kind="workload", reason="enospc") or None,
               15, desc="enospc counted")
    assert (read(cert), read(os.path.join(tls, uid, "key.pem"))) == old
    assert "IP Address:10.9.0.1" in cert_sans(old[0].decode())
    assert entries(os.path.join(tls, uid)) == before  # no version directory left behind
    assert not os.path.exists(os.path.join(tls, uid2))
    assert not [e for e in entries(tls) if e.startswith("..")], entries(tls)
    w1 = a.get_json("/v1/identity?pod=ns/p1")
    assert w1["state"] == "issued" and tls in w1["lastError"] and "No space left" in w1["lastError"], w1
    # p1's previous files serve: its gate stays open; p2 has no files: its gate stays closed.
    gates = wait_until(lambda: (lambda g: g if g.get("p2") is False else None)(gate_open(a)), 15,
                       desc="p2 issued, gate closed")
    assert gates["p1"] is True, gates

    # Space back: both are written by the next retry, nothing restarted.
    fs.free()
    wait_until(lambda: read(cert) != old[0], 15, desc="p1's renewal written")
    c, k = read(cert), read(os.path.join(tls, uid, "key.pem"))
    assert key_matches(c.decode(), k.decode())
    assert "IP Address:10.9.0.2" in cert_sans(c.decode())
    wait_until(lambda: os.path.exists(os.path.join(tls, uid2, "cert.pem")), 15, desc="p2's certificate")
    a.wait_log("its files are written again", since=mark)
    wait_until(lambda: gate_open(a) == {"p1": True, "p2": True}, 15, desc="both gates open")
    assert a.get_json("/v1/identity?pod=ns/p1")["lastError"] is None


def test_full_disk_keeps_the_node_certificate_and_heals(small_fs, agent_factory, tmp_path):
    """The node's credentials (state-dir/identity/node): a renewal that cannot be written keeps
    the current pair in place and is retried with the credential's backoff."""
    fs = small_fs(str(tmp_path / "small"), size="4m")
    a = agent_factory(start=False)
    a.agent_keys["state-dir"] = os.path.join(fs.path, "state")
    a.sections["identity"] = {"signer": "local", "trust-domain": "example.org",
                              "ca-dir": os.path.join(fs.path, "ca"), "pod-tls-dir": os.path.join(fs.path, "pods-tls"),
                              "node-cert-lifetime": "20s"}
    a.write_config()
    a.start()
    node = os.path.join(fs.path, "state", "identity", "node")
    wait_until(lambda: a.get_json("/v1/identity")["node"].get("state") == "valid", 15, desc="node certificate")
    serial = a.get_json("/v1/identity")["node"]["serial"]
    old = read(os.path.join(node, "cert.pem")), read(os.path.join(node, "key.pem"))
    fs.fill()
    mark = a.log_mark()
    a.wait_log("renewal not written: cannot write it under %s" % node, since=mark, timeout=30)
    assert (read(os.path.join(node, "cert.pem")), read(os.path.join(node, "key.pem"))) == old
    assert a.get_json("/v1/identity")["node"]["serial"] == serial
    assert not [e for e in entries(node) if e.startswith("..") and e not in ("..data",)
                and not os.path.exists(os.path.join(node, e, "cert.pem"))], entries(node)
    assert a.metrics().value("pinion_identity_failures_total", kind="node", reason="enospc") >= 1

    fs.free()
    wait_until(lambda: a.get_json("/v1/identity")["node"]["serial"] != serial, 30, desc="the renewal written")
    c, k = read(os.path.join(node, "cert.pem")), read(os.path.join(node, "key.pem"))
    assert c != old[0] and key_matches(c.decode(), k.decode())
