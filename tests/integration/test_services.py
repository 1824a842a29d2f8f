# SPDX-License-Identifier: MIT
"""systemd services get identities: [service.NAME] maps a unit to a SPIFFE ID, and a process in
that unit's cgroup (<service root>/<unit>, as systemd makes it below /system.slice) gets the
unit's certificate and key from GET /v1/identity, whatever its uid, and nothing privileged. The
files written for it (tls-dir) are its user's. Other units, a unit's name outside the service
roots, and a unit whose section is removed get nothing.

systemd is not PID 1 where these run, so the tests make the cgroups themselves below a test root
([agent] service-cgroup-roots); tests/vm/guest/test_services.py does it with real units."""

import os
import pwd
import stat
import subprocess

import pytest

from identity_testlib import cert_sans, key_matches, openssl_verify, request_from
from pinion_testlib import POD_CGROUP_TOP, SERVICE_CGROUP_ROOT, acl_entries, run_piniond, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (service_cgroups, file owners)")

TD = "example.org"
NOBODY = pwd.getpwnam("nobody")
STRANGER = 40999  # a uid with no business reading the service's key


def services_config(tmp_dir, with_db=True):
    s = {"service.web": {"unit": "web.service", "spiffe-id": "spiffe://%s/vm/web" % TD, "user": "nobody",
                         "tls-dir": os.path.join(tmp_dir, "tls", "web"), "dns-names": "web.example.org web"}}
    if with_db:
        s["service.db"] = {}  # unit db.service, the default SPIFFE ID, root's files nowhere
    return s


def start_agent(agent_factory, tmp_dir):
    a = agent_factory(start=False)
    a.agent_keys.update({"socket-mode": "0666", "service-cgroup-roots": SERVICE_CGROUP_ROOT})
    a.sections["identity"] = {"signer": "local", "trust-domain": TD, "ca-dir": os.path.join(a.dir, "ca")}
    a.sections.update(services_config(tmp_dir))
    a.write_config()
    a.start()
    return a


def service_state(a, unit):
    for w in a.get_json("/v1/identity")["workloads"]:
        if w.get("service") == unit:
            return w
    return None


def wait_issued(a, unit):
    return wait_until(lambda: (lambda w: w if w and w["state"] == "issued" else None)(service_state(a, unit)),
                      timeout=15, desc="certificate for %s" % unit)


def read_as(uid, path):
    return subprocess.run(["cat", path], capture_output=True, text=True,
                          preexec_fn=lambda: (os.setgid(uid), os.setuid(uid)), timeout=10)


def test_a_service_gets_its_own_identity_and_nothing_else(agent_factory, tmp_dir, service_cgroups):
    a = start_agent(agent_factory, tmp_dir)
    wait_issued(a, "web.service")
    wait_issued(a, "db.service")
    web = service_cgroups("web.service")

    # Its process, as its user and as root: the mapped ID, with its DNS names, and its key.
    for uid in (NOBODY.pw_uid, None):
        status, body = request_from(web, a.socket, "/v1/identity", uid=uid)
        assert status == 200, body
        assert body["id"] == "spiffe://%s/vm/web" % TD
        assert cert_sans(body["certificate"]) == ["DNS:web", "DNS:web.example.org", "URI:" + body["id"]]
        assert key_matches(body["certificate"], body["private_key"])
        openssl_verify(body["certificate"], body["bundle"])
    # Root in the service is the service, not the host: nothing privileged, no pod's identity.
    for path in ("/v1/pods", "/v1/status", "/metrics", "/v1/identity?pod=default/x", "/v1/configs"):
        status, got = request_from(web, a.socket, path)
        assert status == 403, (path, got)

    # The default SPIFFE ID, from the unit name; the v2 line's spelling counts as well.
    db = service_cgroups("db.service", hierarchy="unified") if os.path.isdir("/sys/fs/cgroup/unified") else service_cgroups("db.service")
    status, got = request_from(db, a.socket, "/v1/identity", uid=NOBODY.pw_uid)
    assert status == 200 and got["id"] == "spiffe://%s/service/db" % TD, got
    assert got["private_key"] != body["private_key"]

    # Another unit, and the unit's name outside the service roots (a user's delegated subtree).
    status, got = request_from(service_cgroups("other.service"), a.socket, "/v1/identity", uid=NOBODY.pw_uid)
    assert status == 403 and "private_key" not in str(got), got
    user_slice = "/%s/user.slice/user-%d.slice/user@%d.service" % (POD_CGROUP_TOP, NOBODY.pw_uid, NOBODY.pw_uid)
    status, got = request_from(service_cgroups("web.service", root=user_slice), a.socket, "/v1/identity", uid=NOBODY.pw_uid)
    assert status == 403 and "private_key" not in str(got), got
    # Root in a unit that has no section stays the host: the overview, never a key.
    r = request_from(service_cgroups("cron.service"), a.socket, "/v1/identity")
    assert r[0] == 200 and "PRIVATE KEY" not in str(r[1]) and "private_key" not in r[1], r

    # The files and the directory: root's, the user let in by an ACL entry (the key 0640: the
    # user reads it, the file's group gets nothing).
    tls = os.path.join(tmp_dir, "tls", "web")
    st = os.stat(tls)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o750), st
    assert acl_entries(tls) == {"user_obj": 7, ("user", NOBODY.pw_uid): 5, "group_obj": 0, "mask": 5, "other": 0}
    for name, mode in (("key.pem", 0o640), ("cert.pem", 0o644), ("bundle.pem", 0o644)):
        path = os.path.join(tls, name)
        st = os.stat(path)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, mode), (name, st)
        assert acl_entries(path) == {"user_obj": 6, ("user", NOBODY.pw_uid): 4, "group_obj": 0, "mask": 4,
                                     "other": mode & 7}, name
    for d, dirs, files in os.walk(tls):
        for f in files:
            assert os.stat(os.path.join(d, f)).st_uid == 0, os.path.join(d, f)
    p = read_as(NOBODY.pw_uid, os.path.join(tls, "key.pem"))
    assert p.returncode == 0 and key_matches(open(os.path.join(tls, "cert.pem")).read(), p.stdout), p
    p = read_as(STRANGER, os.path.join(tls, "key.pem"))
    assert p.returncode != 0 and "PRIVATE KEY" not in p.stdout, p

    # A section removed on reload: its unit is nobody again, and what the agent wrote for it goes
    # (only that: the operator named the directory).
    own = os.path.join(tls, "operator-notes.txt")
    with open(own, "w") as f:
        f.write("mine\n")
    del a.sections["service.web"]
    a.write_config()
    a.sighup()
    wait_until(lambda: service_state(a, "web.service") is None, timeout=10, desc="web's identity dropped")
    assert sorted(os.listdir(tls)) == ["operator-notes.txt"]
    os.unlink(own)
    del a.sections["service.db"]
    a.write_config()
    a.sighup()
    wait_until(lambda: service_state(a, "db.service") is None, timeout=10, desc="db's identity dropped")
    status, got = request_from(db, a.socket, "/v1/identity", uid=NOBODY.pw_uid)
    assert status == 403, got
    # No service key in the log.
    log = a.log_text()
    assert "PRIVATE KEY" not in log
    for line in body["private_key"].splitlines():
        if line and not line.startswith("-----"):
            assert line not in log


@pytest.mark.parametrize("section,reason", [
    ({"unit": "web.socket"}, "systemd service unit name"),
    ({"unit": "../x.service"}, "systemd service unit name"),
    ({"user": "no-such-user-pinion"}, "no such user"),
    ({"spiffe-id": "spiffe://example.org"}, "spiffe://TRUST-DOMAIN/PATH"),
    ({"spiffe-id": "spiffe://example.org/a/../b"}, "spiffe://TRUST-DOMAIN/PATH"),
    ({"dns-names": "Web_1"}, "dns-names"),
    ({"tls-dir": "relative/dir"}, "tls-dir"),
    ({"colour": "blue"}, "colour"),
])
def test_bad_service_sections_are_refused(agent_factory, section, reason):
    a = agent_factory(start=False)
    a.sections["service.web"] = section
    a.write_config()
    p = run_piniond("--check-config", "--config", a.config_file)
    assert p.rc == 78 and reason in p.stderr and "service.web" in p.stderr, p


def test_a_tls_dir_in_the_sockets_directory_is_refused(agent_factory):
    """Keys never go below the directory pods may mount."""
    a = agent_factory(start=False)
    a.sections["service.web"] = {"tls-dir": os.path.join(os.path.dirname(a.socket), "web")}
    a.write_config()
    p = run_piniond("--check-config", "--config", a.config_file)
    assert p.rc == 78 and "keys never go there" in p.stderr and "service.web" in p.stderr, p


def test_one_unit_two_sections_is_refused(agent_factory):
    a = agent_factory(start=False)
    a.sections["service.a"] = {"unit": "web.service"}
    a.sections["service.web"] = {}
    a.write_config()
    p = run_piniond("--check-config", "--config", a.config_file)
    assert p.rc == 78 and "web.service" in p.stderr, p
