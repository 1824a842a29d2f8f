# SPDX-License-Identifier: MIT
"""The modules together, as DESIGN.md defines readiness for registration: a pod is registered in
ZooKeeper only once it is Ready AND the configs it declares are present AND (with
pinion.io/identity) its certificate is issued AND its health check passes. One agent with a
real ZooKeeper, a real nginx serving the config bundle over HTTPS, and the local CA; the pod is
a static pod whose health check is a TCP listener this test opens and closes."""

import os
import shutil
import socket
import tempfile

import pytest

from pinion_testlib import make_pod, wait_until
import configsync_testlib as cs
import zkreg_testlib as zt
from zkreg_testlib import kz, zk  # noqa: F401 (fixtures)
from configsync_testlib import nginx, test_ca  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(not zt.zookeeper_available(), reason="ZooKeeper (Debian zookeeper) is not installed")

SERVERSET = "/e2e/web/prod"


class Listener:
    """A TCP port on 127.0.0.1 the pod's health check connects to."""

    def __init__(self, port=0):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.sock.listen(64)

    def close(self):
        self.sock.close()


def registration(agent, name):
    for r in agent.get_json("/v1/registrations")["registrations"]:
        if r["pod"] == "default/" + name:
            return r
    return None


def test_a_pod_is_registered_only_when_configs_identity_and_health_allow(agent_factory, zk, kz,
                                                                       nginx, test_ca, tmp_dir):
    ca_dir = tempfile.mkdtemp(prefix="e2e-ca-")
    listener = Listener()
    try:
        dest = os.path.join(tmp_dir, "configs", "app")
        a = agent_factory(config={
            "zookeeper": {"servers": zk.hosts, "session-timeout": "4s"},
            "config.app": cs.config_section(nginx.url("app/manifest.json"), dest, test_ca),
            "identity": {"signer": "local", "trust-domain": "e2e.test", "ca-dir": ca_dir},
        })
        # The pod's endpoint is the listener; its configs are not on the server yet.
        a.write_pod("web", make_pod("web", ip="127.0.0.1", ports=[("http", listener.port)], annotations={
            "pinion.io/serverset": SERVERSET, "pinion.io/port": "http", "pinion.io/health": "tcp",
            "pinion.io/configs": "app", "pinion.io/identity": "true"}))

        # Held by the configs gate: nothing in ZooKeeper, and the registration says why.
        wait_until(lambda: (registration(a, "web") or {}).get("state") == "unready", 15, desc="web unready")
        wait_until(lambda: "configs" in (registration(a, "web")["last_error"] or ""), 15,
                   desc="held by the configs gate")
        assert zt.endpoints(kz, SERVERSET) == []

        # The bundle appears: the config lands, the certificate is issued, the health check
        # passes: exactly one member with the pod's endpoint.
        cs.write_bundle(nginx.root, "app", {"app.yaml": b"greeting: hi\n"}, "v1")
        assert a.request("POST", "/v1/configs/app/refresh").status in (200, 202)
        wait_until(lambda: zt.endpoints(kz, SERVERSET) == ["127.0.0.1:%d" % listener.port], 20,
                   desc="web registered")
        with open(os.path.join(dest, "app.yaml"), "rb") as f:
            assert f.read() == b"greeting: hi\n"
        ident = a.get_json("/v1/identity?pod=default/web")
        assert "spiffe://e2e.test/ns/default/sa/default" in str(ident)
        (member,) = zt.members(kz, SERVERSET).values()
        assert member["status"] == "ALIVE"

        # The health check fails (the listener goes away): the member goes; it comes back when
        # the port answers again.
        listener.close()
        wait_until(lambda: zt.endpoints(kz, SERVERSET) == [], 30, desc="unhealthy web deregistered")
        assert "health" in (registration(a, "web")["last_error"] or "").lower() or \
            registration(a, "web")["state"] != "registered"
        listener = Listener(port=member["serviceEndpoint"]["port"])
        wait_until(lambda: zt.endpoints(kz, SERVERSET) == ["127.0.0.1:%d" % listener.port], 30,
                   desc="healthy web registered again")

        # The pod goes: so does its member, its certificate and nothing else.
        os.unlink(a.pod_path("web"))
        wait_until(lambda: zt.endpoints(kz, SERVERSET) == [], 15, desc="removed pod deregistered")
        assert a.get_json("/v1/health")["status"] == "ok"
    finally:
        listener.close()
        shutil.rmtree(ca_dir, ignore_errors=True)
