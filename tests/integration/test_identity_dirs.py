"""pod-tls-dir under many new pods at once: a pod's directory is built whole under a staging
name (..new-<uid>) and renamed into place, so it exists whole or not at all, whenever the agent
is killed; what a kill leaves staged is swept at the next start."""

import json
import os
import random
import stat
import tempfile
import time

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from identity_testlib import new_uid
from pinion_testlib import T, make_pod, wait_until

STAGED = "..new-"


def start_local(agent_factory):
    a = agent_factory(start=False)
    a.sections["identity"] = {"signer": "local", "trust-domain": "example.org",
                              "ca-dir": os.path.join(a.dir, "ca"), "pod-tls-dir": os.path.join(a.dir, "pods-tls")}
    a.write_config()
    a.start()
    return a


def identity_pod(i, uid):
    return make_pod("p%d" % i, namespace="batch", uid=uid, service_account="sa", ip="10.9.%d.%d" % (i >> 8, i & 255),
                    annotations={"pinion.io/identity": "true"})


def add_pods_at_once(a, uids):
    """All the pod files appear in pods-dir within a few milliseconds (renames from a stage)."""
    stage = tempfile.mkdtemp(dir=a.dir)
    for i, uid in enumerate(uids):
        with open(os.path.join(stage, "p%d.json" % i), "w") as f:
            json.dump(identity_pod(i, uid), f)
    for name in os.listdir(stage):
        os.rename(os.path.join(stage, name), os.path.join(a.pods_dir, name))
    os.rmdir(stage)


def key_matches(cert_pem, key_pem):
    """In process: 120 directories a round would be 240 openssl processes."""
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    cert = x509.load_pem_x509_certificate(cert_pem).public_key().public_bytes(enc, pub)
    return cert == serialization.load_pem_private_key(key_pem, None).public_key().public_bytes(enc, pub)


def issued(a):
    st = a.get_json("/v1/status")
    return [m for m in st["modules"] if m["name"] == "identity"][0]["details"].get("workloadsIssued", 0)


def check_dirs(tls, uids):
    """Every entry of pod-tls-dir is a whole pod directory (its key 0600 and root's, the key
    that goes with its certificate) or a staging leftover; pod-tls-dir itself may not be there
    yet. Returns (whole, staged)."""
    whole, staged = 0, 0
    if not os.path.isdir(tls):
        return whole, staged  # killed before it made pod-tls-dir (seen under ASan): nothing half-made
    for name in os.listdir(tls):
        if name.startswith(STAGED):
            staged += 1
            continue
        assert name in uids, "unexpected entry %s in pod-tls-dir" % name
        d = os.path.join(tls, name)
        files = sorted(os.listdir(d))
        assert [f for f in files if not f.startswith("..")] == ["bundle.pem", "cert.pem", "key.pem"], (name, files)
        st = os.stat(os.path.join(d, "key.pem"))
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0 and st.st_gid == 0, (name, oct(st.st_mode))
        with open(os.path.join(d, "cert.pem"), "rb") as c, open(os.path.join(d, "key.pem"), "rb") as k:
            assert key_matches(c.read(), k.read()), "%s: key and certificate do not match" % name
        whole += 1
    return whole, staged


def test_new_pod_dirs_exist_whole_or_not_at_all_through_kills(agent_factory):
    """120 new pods at once, the agent killed at random instants while it issues (the first
    round: new directories; the later ones: the directories of the run before, replaced)."""
    a = start_local(agent_factory)
    tls = a.sections["identity"]["pod-tls-dir"]
    wait_until(lambda: a.get_json("/v1/identity")["node"].get("state") == "valid", T(15), desc="node certificate")
    uids = [new_uid() for _ in range(120)]
    add_pods_at_once(a, uids)
    for _ in range(4):
        # Issuing 120 takes some tens of milliseconds: the kill lands before, inside or after.
        time.sleep(random.uniform(0, 0.08))
        a.kill9()
        check_dirs(tls, uids)
        a.start()
    wait_until(lambda: issued(a) == len(uids), T(30), desc="every pod's certificate")
    # The sweep once the pod store is complete removes what the kills left staged.
    wait_until(lambda: not any(n.startswith(STAGED) for n in os.listdir(tls)), T(15), desc="staging leftovers swept")
    assert check_dirs(tls, uids) == (len(uids), 0)


def test_staging_leftovers_are_swept_at_start(agent_factory, tmp_path):
    a = agent_factory(start=False)
    tls = os.path.join(a.dir, "pods-tls")
    a.sections["identity"] = {"signer": "local", "trust-domain": "example.org",
                              "ca-dir": os.path.join(a.dir, "ca"), "pod-tls-dir": tls}
    a.write_config()
    live = new_uid()
    leftover = os.path.join(tls, STAGED + new_uid())
    os.makedirs(os.path.join(leftover, "..2026_01_01_00_00_00.000000000"))
    with open(os.path.join(leftover, "..2026_01_01_00_00_00.000000000", "key.pem"), "w") as f:
        f.write("half-written\n")
    # A symlink with the prefix is never followed nor removed.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("x")
    os.symlink(str(outside), os.path.join(tls, STAGED + "link"))
    a.write_pod("live", identity_pod(0, live))
    a.start()
    a.wait_log(r"removed 1 leftover pod directories from ", timeout=T(10))
    assert not os.path.exists(leftover)
    assert (outside / "precious").read_text() == "x" and os.path.islink(os.path.join(tls, STAGED + "link"))
    wait_until(lambda: os.path.exists(os.path.join(tls, live, "cert.pem")), T(15), desc="the live pod's files")


def test_pods_removed_and_added_again_while_issuing(agent_factory):
    """100 new pods, half of them removed at once and a few of those back (same UID) while
    their certificates are being made: pod-tls-dir ends with exactly the pods there are, each
    whole, and nothing staged left over."""
    a = start_local(agent_factory)
    tls = a.sections["identity"]["pod-tls-dir"]
    wait_until(lambda: a.get_json("/v1/identity")["node"].get("state") == "valid", T(15), desc="node certificate")
    uids = [new_uid() for _ in range(100)]
    add_pods_at_once(a, uids)
    for i in range(50):
        os.unlink(os.path.join(a.pods_dir, "p%d.json" % i))
    for i in range(10):
        a.write_pod("again%d" % i, identity_pod(i, uids[i]))
    present = set(uids[:10] + uids[50:])
    wait_until(lambda: issued(a) == len(present) and set(os.listdir(tls)) == present, T(30),
               desc="exactly the present pods' directories")
    assert check_dirs(tls, present) == (len(present), 0)
    assert len(a.get_json("/v1/identity")["workloads"]) == len(present)


def test_pod_tls_dir_made_anew_while_running(agent_factory):
    """pod-tls-dir removed (a tmpfs remounted, an operator's rm -rf) and made again: new pods'
    directories go to the directory that is there now."""
    import shutil
    a = start_local(agent_factory)
    tls = a.sections["identity"]["pod-tls-dir"]
    wait_until(lambda: a.get_json("/v1/identity")["node"].get("state") == "valid", T(15), desc="node certificate")
    first = [new_uid() for _ in range(5)]
    add_pods_at_once(a, first)
    wait_until(lambda: issued(a) == 5, T(15), desc="the first pods' certificates")
    shutil.rmtree(tls)
    os.makedirs(tls)
    later = [new_uid() for _ in range(20)]
    stage = tempfile.mkdtemp(dir=a.dir)
    for i, uid in enumerate(later):
        with open(os.path.join(stage, "q%d.json" % i), "w") as f:
            json.dump(identity_pod(100 + i, uid), f)
    for name in os.listdir(stage):
        os.rename(os.path.join(stage, name), os.path.join(a.pods_dir, name))
    wait_until(lambda: set(later) <= set(os.listdir(tls)), T(15), desc="the later pods' directories")
    assert check_dirs(tls, set(later)) == (len(later), 0)
