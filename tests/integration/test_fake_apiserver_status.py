# SPDX-License-Identifier: MIT
"""The test apiserver's writes (pods/status PATCH, events.k8s.io/v1 events, their core/v1 view)
checked against code we did not write: the official Python client (python3-kubernetes) and the
real kubectl (Debian kubernetes-client) describing a pod; and the least-privilege manifests
(units/kubernetes/rbac.yaml, admission-policy.yaml) enforced by the emulator, the policy's CEL
evaluated by @bufbuild/cel."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from pinion_testlib import SRCDIR

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver, make_pod  # noqa: E402

import kubernetes  # noqa: E402  (python3-kubernetes: scripts/deps installs it)
from kubernetes.client.rest import ApiException  # noqa: E402

TOKEN = "admin-token"
AGENT = "system:serviceaccount:pinion-system:pinion"
NODE_CLAIM = "authentication.kubernetes.io/node-name"
KUBECTL = "/usr/bin/kubectl"
UNITS = os.path.join(SRCDIR, "units", "kubernetes")


@pytest.fixture
def fake():
    f = FakeApiserver(tls=True, token=TOKEN).start()
    yield f
    f.stop()


def client(fake, token=TOKEN):
    cfg = kubernetes.client.Configuration()
    cfg.host = fake.url
    cfg.ssl_ca_cert = fake.ca_file
    cfg.retries = 0
    cfg.api_key = {"authorization": "Bearer " + token}
    api = kubernetes.client.ApiClient(cfg)
    return kubernetes.client.CoreV1Api(api), kubernetes.client.EventsV1Api(api), api


def gate_pod(name, node):
    pod = make_pod(name, node=node)
    pod["spec"]["readinessGates"] = [{"conditionType": "pinion.io/ready"}]
    return pod


def ready_patch(uid=None, rv=None, status="False", reason="ConfigPending",
                message="configs: app v3 downloading"):
    md = {}
    if uid:
        md["uid"] = uid
    if rv:
        md["resourceVersion"] = rv
    return {"metadata": md, "status": {"conditions": [{
        "type": "pinion.io/ready", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": "2026-12-02T18:00:00Z", "lastProbeTime": None}]}}


def event_body(pod, name, node="n1", reason="IdentityIssued", note="identity issued", **kw):
    md = pod["metadata"]
    ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
          "metadata": {"name": name, "namespace": md["namespace"]},
          "eventTime": "2026-12-02T18:00:00.123456Z", "reportingController": "pinion.io/agent",
          "reportingInstance": node, "action": "Issue", "reason": reason,
          "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": md["namespace"],
                        "name": md["name"], "uid": md["uid"]},
          "note": note, "type": "Normal"}
    ev.update(kw)
    return ev


def test_status_patch_merges_conditions_by_type(fake):
    core, _, api = client(fake)
    pod = fake.add_pod(gate_pod("web-1", "n1"))
    rv0 = int(pod["metadata"]["resourceVersion"])
    out = core.patch_namespaced_pod_status("web-1", "default", ready_patch(uid=pod["metadata"]["uid"]))
    types = {c.type: c.status for c in out.status.conditions}
    assert types == {"Ready": "True", "pinion.io/ready": "False"}
    assert int(out.metadata.resource_version) > rv0
    assert fake.requests(verb="patch")[-1]["path"].endswith("/pods/web-1/status")
    assert fake.requests(verb="patch")[-1]["status"] == 200
    assert fake.pod_condition("default", "web-1")["reason"] == "ConfigPending"
    # True replaces the condition of the same type; the kubelet's Ready is kept
    core.patch_namespaced_pod_status("web-1", "default", ready_patch(status="True", reason="Ready",
                                                                     message=""))
    conds = fake.pod("default", "web-1")["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in conds] == [("Ready", "True"), ("pinion.io/ready", "True")]
    # a $patch: delete directive removes one condition
    core.patch_namespaced_pod_status("web-1", "default", {"status": {"conditions": [
        {"type": "pinion.io/ready", "$patch": "delete"}]}})
    assert fake.pod_condition("default", "web-1") is None
    # merge patch replaces the list whole; JSON patch works on paths
    core.api_client.call_api(
        "/api/v1/namespaces/{namespace}/pods/{name}/status", "PATCH",
        path_params={"namespace": "default", "name": "web-1"},
        header_params={"Content-Type": "application/merge-patch+json"},
        body={"status": {"conditions": [{"type": "pinion.io/ready", "status": "Unknown"}]}},
        response_type="V1Pod", auth_settings=["BearerToken"])
    assert [c["type"] for c in fake.pod("default", "web-1")["status"]["conditions"]] == ["pinion.io/ready"]
    core.patch_namespaced_pod_status("web-1", "default", [
        {"op": "replace", "path": "/status/conditions/0/status", "value": "True"}])
    assert fake.pod_condition("default", "web-1")["status"] == "True"
    assert fake.count(verb="patch") == 5
    api.close()


def test_status_patch_preconditions_and_errors(fake):
    core, _, api = client(fake)
    pod = fake.add_pod(gate_pod("web-1", "n1"))
    uid, rv = pod["metadata"]["uid"], pod["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_pod_status("web-1", "default", ready_patch(uid="not-" + uid))
    body = json.loads(e.value.body)
    assert e.value.status == 409 and body["reason"] == "Conflict"
    assert "Precondition failed: UID in precondition: not-%s, UID in object meta: %s" % (uid, uid) \
        in body["message"]
    core.patch_namespaced_pod_status("web-1", "default", ready_patch(uid=uid, rv=rv))
    with pytest.raises(ApiException) as e:  # the same resourceVersion again: stale now
        core.patch_namespaced_pod_status("web-1", "default", ready_patch(uid=uid, rv=rv, status="True"))
    assert e.value.status == 409
    assert json.loads(e.value.body)["message"] == (
        'Operation cannot be fulfilled on pods "web-1": the object has been modified; please '
        "apply your changes to the latest version and try again")
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_pod_status("gone", "default", ready_patch())
    assert e.value.status == 404
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_pod_status("web-1", "default", ready_patch(status="Maybe"))
    assert e.value.status == 422 and json.loads(e.value.body)["reason"] == "Invalid"
    # a status write changes nothing but status
    before = fake.pod("default", "web-1")
    core.patch_namespaced_pod_status("web-1", "default", {
        "metadata": {"labels": {"x": "y"}}, "spec": {"nodeName": "n2"},
        "status": {"phase": "Running"}})
    after = fake.pod("default", "web-1")
    assert after["spec"] == before["spec"] and "labels" not in after["metadata"]
    assert fake.count(verb="patch", status=409) == 2
    api.close()


def test_status_patch_is_watched_faulted_and_logged(fake):
    core, _, api = client(fake)
    pod = fake.add_pod(gate_pod("web-1", "n1"))
    w = kubernetes.watch.Watch()
    stream = w.stream(core.list_namespaced_pod, "default", resource_version=pod["metadata"]["resourceVersion"],
                      timeout_seconds=5)
    fake.inject("503", count=1, verbs=["patch"])
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_pod_status("web-1", "default", ready_patch())
    assert e.value.status == 503
    core.patch_namespaced_pod_status("web-1", "default", ready_patch())
    ev = next(stream)
    assert ev["type"] == "MODIFIED"
    assert [c.type for c in ev["object"].status.conditions] == ["Ready", "pinion.io/ready"]
    w.stop()
    assert [r["status"] for r in fake.requests(verb="patch")] == [503, 200]
    api.close()


def test_events_create_patch_list_and_core_view(fake):
    core, events, api = client(fake)
    pod = fake.add_pod(gate_pod("web-1", "n1"))
    other = fake.add_pod(gate_pod("db-1", "n1"))
    created = events.create_namespaced_event("default", event_body(pod, "web-1.188d2c3b4a5e6f70"))
    assert created.reporting_controller == "pinion.io/agent" and created.metadata.resource_version
    events.create_namespaced_event("default", event_body(other, "db-1.1", reason="ConfigSynced",
                                                         type="Warning"))
    with pytest.raises(ApiException) as e:
        events.create_namespaced_event("default", event_body(pod, "web-1.188d2c3b4a5e6f70"))
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "AlreadyExists"
    # a repeat is counted in series (the note stays: the real server refuses to change it)
    out = events.patch_namespaced_event("web-1.188d2c3b4a5e6f70", "default", {
        "series": {"count": 3, "lastObservedTime": "2026-12-02T18:00:05.000000Z"}})
    assert out.series.count == 3
    with pytest.raises(ApiException) as e:
        events.patch_namespaced_event("web-1.188d2c3b4a5e6f70", "default", {"note": "other"})
    assert e.value.status == 422 and "field is immutable" in json.loads(e.value.body)["message"]
    with pytest.raises(ApiException) as e:
        events.patch_namespaced_event("web-1.188d2c3b4a5e6f70", "default",
                                      {"series": {"count": 1, "lastObservedTime": None}})
    causes = {c["field"] for c in json.loads(e.value.body)["details"]["causes"]}
    assert e.value.status == 422 and causes == {"series.count", "series.lastObservedTime"}

    sel = "regarding.name=web-1,regarding.uid=%s" % pod["metadata"]["uid"]
    got = events.list_namespaced_event("default", field_selector=sel).items
    assert [x.metadata.name for x in got] == ["web-1.188d2c3b4a5e6f70"]
    assert [x.metadata.name for x in events.list_namespaced_event(
        "default", field_selector="type=Warning,reportingController=pinion.io/agent").items] == ["db-1.1"]
    assert len(events.list_event_for_all_namespaces(field_selector="reason=IdentityIssued").items) == 1
    one = events.read_namespaced_event("db-1.1", "default")
    assert one.regarding.name == "db-1"

    # core/v1, as kubectl describe asks
    sel = "involvedObject.name=web-1,involvedObject.namespace=default,involvedObject.uid=%s" \
        % pod["metadata"]["uid"]
    legacy = core.list_namespaced_event("default", field_selector=sel).items
    assert len(legacy) == 1
    ev = legacy[0]
    assert (ev.message, ev.reason, ev.type, ev.reporting_component, ev.reporting_instance,
            ev.action) == ("identity issued", "IdentityIssued", "Normal", "pinion.io/agent", "n1",
                           "Issue")
    assert ev.involved_object.uid == pod["metadata"]["uid"] and ev.series.count == 3
    assert ev.count is None and ev.first_timestamp is None
    assert len(core.list_event_for_all_namespaces().items) == 2
    assert [e["metadata"]["name"] for e in fake.events(regarding_uid=pod["metadata"]["uid"])] == \
        ["web-1.188d2c3b4a5e6f70"]
    assert fake.count(verb="create") == 3 and fake.count(verb="patch") == 3
    api.close()


@pytest.mark.parametrize("change, field", [
    ({"eventTime": None}, "eventTime"),
    ({"reportingController": ""}, "reportingController"),
    ({"reportingInstance": "x" * 129}, "reportingInstance"),
    ({"action": None}, "action"),
    ({"reason": "r" * 129}, "reason"),
    ({"note": "n" * 1025}, "message"),
    ({"type": "Loud"}, "type"),
    ({"series": {"count": 1, "lastObservedTime": "2026-12-02T18:00:00.000000Z"}}, "series.count"),
])
def test_event_validation(fake, change, field):
    _, events, api = client(fake)
    pod = fake.add_pod(gate_pod("web-1", "n1"))
    body = event_body(pod, "web-1.1")
    body.update(change)
    with pytest.raises(ApiException) as e:
        events.create_namespaced_event("default", body)
    st = json.loads(e.value.body)
    assert e.value.status == 422 and st["reason"] == "Invalid"
    assert field in [c["field"] for c in st["details"]["causes"]], st
    body = event_body(pod, "web-1.2")
    body["metadata"]["namespace"] = "other"
    with pytest.raises(ApiException) as e:
        events.create_namespaced_event("default", body)
    assert e.value.status == 400
    assert fake.events() == []
    api.close()


def kubeconfig(fake, path, token=TOKEN):
    """The recipe for a real kubectl against the emulator: server URL, its CA, a bearer token."""
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
                "    server: %s\n    certificate-authority: %s\nusers:\n- name: test\n  user:\n"
                "    token: %s\ncontexts:\n- name: fake\n  context: {cluster: fake, user: test}\n"
                "current-context: fake\n" % (fake.url, fake.ca_file, token))
    return path


@pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl is missing (Debian kubernetes-client)")
def test_kubectl_describe_shows_condition_and_events(fake):
    core, events, api = client(fake)
    pod = fake.add_pod(gate_pod("web-1", "n1"))
    core.patch_namespaced_pod_status("web-1", "default", ready_patch(uid=pod["metadata"]["uid"]))
    events.create_namespaced_event("default", event_body(pod, "web-1.1", note="identity issued: spiffe://x/web"))
    events.create_namespaced_event("default", event_body(pod, "web-1.2", reason="ConfigFailed", type="Warning",
                                                         action="Sync", note="configs: app v3: 404"))
    events.patch_namespaced_event("web-1.2", "default", {"series": {
        "count": 4, "lastObservedTime": "2026-12-02T18:00:09.000000Z"}})
    tmp = tempfile.mkdtemp(prefix="pinion-kubectl-")
    try:
        kc = kubeconfig(fake, os.path.join(tmp, "kubeconfig"))
        run = [KUBECTL, "--kubeconfig", kc, "--cache-dir", os.path.join(tmp, "cache")]
        r = subprocess.run(run + ["describe", "pod", "web-1", "-n", "default"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        out = r.stdout
        gates = out.split("Readiness Gates:")[1].split("Conditions:")[0]
        assert "pinion.io/ready" in gates and "False" in gates, out
        conds = out.split("Conditions:")[1].split("Volumes:")[0]
        assert "pinion.io/ready" in conds and "Ready" in conds, out
        evs = [line.split() for line in out.split("Events:")[1].splitlines()[3:] if line.strip()]
        assert ["Normal", "IdentityIssued"] == evs[0][:2] and "pinion.io/agent" in evs[0], out
        assert "identity issued: spiffe://x/web" in out
        assert ["Warning", "ConfigFailed"] == evs[1][:2] and "(x4 over" in out, out
        r = subprocess.run(run + ["get", "pod", "web-1", "-n", "default", "-o", "json"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert {"type": "pinion.io/ready", "status": "False", "reason": "ConfigPending"}.items() <= \
            [c for c in got["status"]["conditions"] if c["type"] == "pinion.io/ready"][0].items()
        assert got["spec"]["readinessGates"] == [{"conditionType": "pinion.io/ready"}]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    api.close()


# ---------------------------------------------------------------------------------------------
# Least privilege: rbac.yaml and admission-policy.yaml, enforced by the emulator


@pytest.fixture
def guarded():
    """The emulator with the shipped RBAC and admission policy; tokens: agent-n1 (the agent on
    n1, with the node claim), agent-noclaim (the agent's account without it)."""
    f = FakeApiserver(tls=True, token=TOKEN, rbac=os.path.join(UNITS, "rbac.yaml"),
                      admission_policy=os.path.join(UNITS, "admission-policy.yaml")).start()
    groups = ["system:serviceaccounts", "system:serviceaccounts:pinion-system", "system:authenticated"]
    f.add_user("agent-n1", AGENT, groups=groups, extra={NODE_CLAIM: ["n1"]})
    f.add_user("agent-noclaim", AGENT, groups=groups)
    yield f
    f.stop()


def denied(call, *args):
    with pytest.raises(ApiException) as e:
        call(*args)
    st = json.loads(e.value.body)
    assert e.value.status == 403 and st["reason"] == "Forbidden", st
    return st["message"]


def test_policy_lets_the_agent_write_for_its_own_node(guarded):
    mine = guarded.add_pod(gate_pod("web-1", "n1"))
    core, events, api = client(guarded, token="agent-n1")
    core.patch_namespaced_pod_status("web-1", "default", ready_patch(uid=mine["metadata"]["uid"]))
    events.create_namespaced_event("default", event_body(mine, "web-1.1"))
    events.patch_namespaced_event("web-1.1", "default", {"series": {
        "count": 2, "lastObservedTime": "2026-12-02T18:00:01.000000Z"}})
    assert core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").items
    assert guarded.count(verb="patch", status=200) == 2 and guarded.count(verb="create", status=201) == 1
    api.close()


def test_policy_refuses_other_nodes_conditions_and_instances(guarded):
    mine = guarded.add_pod(gate_pod("web-1", "n1"))
    theirs = guarded.add_pod(gate_pod("web-2", "n2"))
    core, events, api = client(guarded, token="agent-n1")
    head = "ValidatingAdmissionPolicy 'pinion-node-scope' with binding 'pinion-node-scope' denied request: "
    msg = denied(core.patch_namespaced_pod_status, "web-2", "default", ready_patch())
    assert msg.startswith(head) and "own node's pods" in msg, msg
    msg = denied(core.patch_namespaced_pod_status, "web-1", "default", {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}})
    assert msg == head + "pinion may change the pinion.io/ready condition only"
    msg = denied(events.create_namespaced_event, "default", event_body(mine, "web-1.1", node="n2"))
    assert msg.startswith(head) and "reportingInstance n1" in msg
    denied(events.create_namespaced_event, "default",
           event_body(theirs, "web-2.1", reportingController="someone/else"))
    # RBAC: no pod spec writes, no core events, no deletes
    msg = denied(core.patch_namespaced_pod, "web-1", "default", {"metadata": {"labels": {"a": "b"}}})
    assert msg == ('pods "web-1" is forbidden: User "%s" cannot patch resource "pods" in API '
                   'group "" in the namespace "default"' % AGENT)
    denied(core.create_namespaced_event, "default", {"metadata": {"name": "x"}})
    denied(core.delete_namespaced_pod, "web-1", "default")
    assert guarded.pod_condition("default", "web-2") is None
    assert [c["type"] for c in guarded.pod("default", "web-1")["status"]["conditions"]] == ["Ready"]
    assert guarded.events() == []
    # the test's own (admin) token is not confined
    admin, _, api2 = client(guarded)
    admin.patch_namespaced_pod_status("web-2", "default", ready_patch())
    api.close()
    api2.close()


def test_policy_refuses_a_token_without_the_node_claim(guarded):
    mine = guarded.add_pod(gate_pod("web-1", "n1"))
    core, events, api = client(guarded, token="agent-noclaim")
    msg = denied(core.patch_namespaced_pod_status, "web-1", "default", ready_patch())
    assert "no authentication.kubernetes.io/node-name claim" in msg
    denied(events.create_namespaced_event, "default", event_body(mine, "web-1.1"))
    api.close()


def test_example_workload_carries_the_gate():
    import yaml
    with open(os.path.join(UNITS, "example-workload.yaml")) as f:
        pod = yaml.safe_load(f)
    assert pod["spec"]["readinessGates"] == [{"conditionType": "pinion.io/ready"}]
    with open(os.path.join(UNITS, "rbac.yaml")) as f:
        role = [d for d in yaml.safe_load_all(f) if d and d["kind"] == "ClusterRole"][0]
    writes = sorted((g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
                    for r in rule["resources"] for v in rule["verbs"]
                    if v in ("create", "update", "patch", "delete", "deletecollection"))
    assert writes == [("", "pods/status", "patch"),
                      ("certificates.k8s.io", "certificatesigningrequests", "create"),
                      ("events.k8s.io", "events", "create"), ("events.k8s.io", "events", "patch")]
