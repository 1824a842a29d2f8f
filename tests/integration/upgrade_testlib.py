"""What the state fixtures of tests/fixtures/ share with the tests that read them: where a
fixture lives while an agent runs on it (absolute paths are part of state files: a bundle's
dest, the CA directory), the configuration both releases run with, and the bundle served.

A fixture directory holds:
  state/     the agent's state-dir as the release that made it left it after a kill -9 with
             pods attached (podnet allocations and journal, zkreg session, identity node
             credential, configsync bundle state, reclaim records)
  configs/   the published config bundle (dest), which the bundle state describes
  ca/        the local signer's CA: a throwaway test CA made for the fixture, of no value
  pods.d/    the static pods (registered in ZooKeeper, with the addresses podnet gave them)
  bundle/    what the HTTP server served (manifest.json and its file)
  fixture.json  what the making release had: addresses, the node certificate's serial, the
             bundle's version, the pods' registrations
"""

import hashlib
import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(SRCDIR, "tests", "fixtures")
# Where a fixture is while an agent runs on it (its files name these paths).
BASE = "/tmp/pinion-state-fixture"
POD_CIDR = "10.251.77.0/24"
HTTP_PORT = 18471
SERVERSET = "/discovery/upgrade/web"
PODS = ("web-0", "web-1", "web-2")


def bundle_url():
    return "http://127.0.0.1:%d/app/manifest.json" % HTTP_PORT


def write_bundle(root, version="v1"):
    base = os.path.join(root, "app")
    os.makedirs(base, exist_ok=True)
    content = ("greeting=hello from %s\n" % version).encode()
    with open(os.path.join(base, "app.conf"), "wb") as f:
        f.write(content)
    manifest = {"version": version, "files": [{"path": "app.conf", "url": "app.conf", "size": len(content),
                                                "sha256": hashlib.sha256(content).hexdigest(), "mode": "0644"}]}
    with open(os.path.join(base, "manifest.json"), "w") as f:
        json.dump(manifest, f)


def agent_config(zk_hosts):
    """The configuration both releases run with (pinion_testlib.Agent's config=)."""
    return {
        "agent": {"state-dir": os.path.join(BASE, "state"), "pods-dir": os.path.join(BASE, "pods.d")},
        "identity": {"signer": "local", "trust-domain": "example.org", "ca-dir": os.path.join(BASE, "ca"),
                     # a fixture lasts: its node certificate must stay valid for years
                     "node-cert-lifetime": "43800h"},
        "network": {"pod-cidr": POD_CIDR, "gc-grace": "1h", "address-quarantine": "30s"},
        "zookeeper": {"servers": zk_hosts, "session-timeout": "4s", "write-qps": "1000", "flap-damping": "0"},
        "config.app": {"url": bundle_url(), "dest": os.path.join(BASE, "configs", "app"), "interval": "1h"},
    }


def install(name):
    """Copies tests/fixtures/<name> to BASE (which must not exist)."""
    if os.path.lexists(BASE):
        raise AssertionError("%s exists (another run, or a leftover)" % BASE)
    shutil.copytree(os.path.join(FIXTURES, name), BASE, symlinks=True)
    # git keeps no modes but the executable bit: the state as the agent made it.
    for d, dirs, files in os.walk(os.path.join(BASE, "state")):
        os.chmod(d, 0o700)
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                os.chmod(p, 0o600)
    with open(os.path.join(BASE, "fixture.json")) as f:
        return json.load(f)


def remove():
    shutil.rmtree(BASE, ignore_errors=True)
