# SPDX-License-Identifier: MIT
"""systemd services get identities on a real node: a transient unit (systemd-run: systemd puts
it in /system.slice/<unit> on cgroup v2) with a [service.NAME] section asks for its identity over
the agent's socket and gets the mapped SPIFFE ID, as its user and as root; a unit without a
section, as the same user, gets nothing; the files written for it are its user's."""

import json
import os
import pwd
import stat
import sys

from conftest import api_json, node, run, start_agent, systemctl, wait_for  # noqa: F401

sys.path.insert(0, os.path.join(os.environ.get("PINION_SRCDIR", "/root/pinion"), "tests", "integration"))
import identity_testlib as it  # noqa: E402
from pinion_testlib import acl_entries  # noqa: E402

TD = "example.org"
WEB = "pinion-test-web.service"
OTHER = "pinion-test-other.service"
TLS_DIR = "/var/lib/pinion/services/web"
SOCKET = "/run/pinion/sockets/pinion.sock"


def ask_as_unit(unit, user=None):
    """Runs curl as unit (a transient service, waited for, its output piped back): (status, body)."""
    cmd = ["systemd-run", "--unit", unit, "--wait", "--pipe", "--quiet", "--service-type=exec"]
    if user:
        cmd += ["-p", "User=" + user]
    cmd += ["--", "/usr/bin/curl", "-sS", "--unix-socket", SOCKET, "-w", "\n%{http_code}", "http://localhost/v1/identity"]
    p = run(*cmd, check=False)
    systemctl("reset-failed", unit, check=False)
    body, _, code = p.stdout.rpartition("\n")
    assert code.strip().isdigit(), (p.returncode, p.stdout, p.stderr)
    try:
        return int(code), json.loads(body)
    except ValueError:
        return int(code), body


def test_a_unit_gets_its_mapped_identity_and_files_for_its_user(node):
    nobody = pwd.getpwnam("nobody")
    node.conf("60-services.conf", f"""[agent]
socket-mode=0666

[identity]
signer=local
trust-domain={TD}
ca-dir=/var/lib/pinion/ca

[service.web]
unit={WEB}
spiffe-id=spiffe://{TD}/vm/web
user=nobody
tls-dir={TLS_DIR}
dns-names=web.example.org
""")
    start_agent()
    wait_for("the service's certificate", lambda: any(
        w.get("service") == WEB and w["state"] == "issued" for w in api_json("/v1/identity")["workloads"]), timeout=60)

    # Where systemd puts the unit: the cgroup the agent attests.
    p = run("systemd-run", "--unit", WEB, "--wait", "--pipe", "--quiet", "--", "/bin/cat", "/proc/self/cgroup")
    systemctl("reset-failed", WEB, check=False)
    assert p.stdout.strip() == "0::/system.slice/" + WEB, p.stdout

    for user in ("nobody", None):
        status, got = ask_as_unit(WEB, user)
        assert status == 200, (user, got)
        assert got["id"] == f"spiffe://{TD}/vm/web"
        assert it.cert_sans(got["certificate"]) == ["DNS:web.example.org", "URI:" + got["id"]]
        assert it.key_matches(got["certificate"], got["private_key"])
        it.openssl_verify(got["certificate"], got["bundle"])
    status, got = ask_as_unit(OTHER, "nobody")
    assert status == 403 and "private_key" not in str(got), got

    # Root's files, the unit's user let in by ACL entries: handed over inside the shipped unit,
    # which grants neither CAP_CHOWN nor CAP_FOWNER.
    st = os.stat(TLS_DIR)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o750), st
    assert acl_entries(TLS_DIR)[("user", nobody.pw_uid)] == 5
    for name, mode in (("key.pem", 0o640), ("cert.pem", 0o644), ("bundle.pem", 0o644)):
        path = os.path.join(TLS_DIR, name)
        st = os.stat(path)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, mode), (name, st)
        assert acl_entries(path) == {"user_obj": 6, ("user", nobody.pw_uid): 4, "group_obj": 0, "mask": 4,
                                     "other": mode & 7}, name
    # Anyone else, even in nobody's group, reads no key.
    p = run("setpriv", "--reuid=40999", f"--regid={nobody.pw_gid}", "--clear-groups", "cat",
            os.path.join(TLS_DIR, "key.pem"), check=False)
    assert p.returncode != 0 and "PRIVATE KEY" not in p.stdout, p
    # The unit's user reads its key; the key matches the certificate next to it.
    p = run("setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", "cat",
            os.path.join(TLS_DIR, "key.pem"))
    with open(os.path.join(TLS_DIR, "cert.pem")) as f:
        assert it.key_matches(f.read(), p.stdout)
