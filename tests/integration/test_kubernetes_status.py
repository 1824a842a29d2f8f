# SPDX-License-Identifier: MIT
"""What the node tells Kubernetes about a pod, against the test apiserver: the pinion.io/ready
condition on pods whose readiness gates name it (False naming the missing job, True once every
job is in place, one write per change, none after a restart, conflicts decided again on the
newer pod, a refusal making the module degraded), Events posted with client-go's dedup (a
repeat is a series, a pod's start is one Event), writes held through an outage and coalesced to
the latest state, and `kubectl describe pod` showing both."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from pinion_testlib import SRCDIR, diag, log_lines, new_container_id, wait_until
from configsync_testlib import config_section, nginx, test_ca, write_bundle  # noqa: F401 (fixtures)
from podnet_testlib import cni, free_pod_cidr, k8s_args, netns  # noqa: F401 (fixtures)
import zkreg_testlib as zt
from zkreg_testlib import base, zk, zk_config  # noqa: F401 (fixtures)

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver, make_pod  # noqa: E402

NODE = "test-node"
TOKEN = "s3cret-token-S"
GATE = "pinion.io/ready"
FILES = {"app.yaml": b"version: 1\n"}


@pytest.fixture
def fake():
    f = FakeApiserver(tls=True, token=TOKEN).start()
    yield f
    f.stop()


def gated_pod(name, configs=None, gate=True, **kw):
    pod = make_pod(name, node=NODE, **kw)
    if gate:
        pod["spec"]["readinessGates"] = [{"conditionType": GATE}]
    if configs:
        pod["metadata"].setdefault("annotations", {})["pinion.io/configs"] = configs
    return pod


def start_agent(agent_factory, fake, tmp_dir, nginx=None, test_ca=None, dest=None, **keys):
    token_file = os.path.join(tmp_dir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    section = {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
               "backoff-initial": "100ms", "backoff-max": "1s", "watch-timeout-min": "30s",
               "condition-grace": "300ms", "event-batch": "500ms"}
    section.update(keys)
    config = {"apiserver": section}
    if nginx:
        config["config.app"] = config_section(nginx.url("app/manifest.json"), dest or os.path.join(tmp_dir, "app"),
                                              test_ca, interval="1s")
    return agent_factory(config=config)


def condition(fake, name, namespace="default"):
    pod = fake.get_pod(namespace, name)
    for c in (pod or {}).get("status", {}).get("conditions", []):
        if c["type"] == GATE:
            return c
    return None


def wait_condition(fake, name, status, reason=None, timeout=15):
    def probe():
        c = condition(fake, name)
        return c if c and c["status"] == status and (reason is None or c.get("reason") == reason) else None
    return wait_until(probe, timeout, desc="%s %s=%s%s" % (name, GATE, status, " (%s)" % reason if reason else ""))


def status_writes(fake, name, since=None):
    return [r for r in fake.requests(verb="patch", since=since)
            if r["path"].startswith("/api/v1/namespaces/default/pods/%s/status" % name)]


def pod_events(fake, name):
    return [e for e in fake.events(namespace="default") if e["regarding"]["name"] == name]


def apiserver_details(agent):
    return [m for m in agent.status()["modules"] if m["name"] == "apiserver"][0]


def test_condition_names_the_missing_config_then_turns_true(agent_factory, fake, nginx, test_ca, tmp_dir):
    fake.add_pod(gated_pod("web", configs="app"))
    fake.add_pod(gated_pod("plain", gate=False, configs="app"))
    a = start_agent(agent_factory, fake, tmp_dir, nginx, test_ca)

    c = wait_condition(fake, "web", "False", "ConfigPending")
    assert "config app is not present yet" in c["message"], c
    assert c.get("lastTransitionTime"), c
    write_bundle(nginx.root, "app", FILES, "v1")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    c = wait_condition(fake, "web", "True", "JobsReady")
    assert len(status_writes(fake, "web")) == 2, status_writes(fake, "web")
    # A pod without the gate is never written to.
    assert status_writes(fake, "plain") == [] and condition(fake, "plain") is None
    # The agent's view of the pod shows the gate and the condition the apiserver holds.
    wait_until(lambda: a.get_json("/v1/pods/default/web")["conditions"].get(GATE) is True, 10,
               desc="the agent's view of the condition")
    assert a.get_json("/v1/pods/default/web")["readinessGates"] == [GATE]
    d = apiserver_details(a)["details"]["readyCondition"]
    assert d["pods"] == 1 and d["true"] == 1 and d["writes"] == 2 and d["lastError"] is None, d
    m = a.metrics()
    assert m.value("pinion_apiserver_condition_writes_total", status="True", result="ok") == 1
    assert m.value("pinion_apiserver_condition_writes_total", status="False", result="ok") == 1
    assert m.value("pinion_apiserver_requests_total", resource="pods/status", verb="patch", code="200") == 2


def test_jobs_in_place_within_the_grace_cost_one_write(agent_factory, fake, nginx, test_ca, tmp_dir):
    write_bundle(nginx.root, "app", FILES, "v1")
    fake.add_pod(gated_pod("web", configs="app"))
    a = start_agent(agent_factory, fake, tmp_dir, nginx, test_ca, **{"condition-grace": "5s"})
    wait_condition(fake, "web", "True")
    assert [json.loads(w["body"])["status"]["conditions"][0]["status"] for w in status_writes(fake, "web")] == ["True"]

    # A restarted agent finds the condition right and writes nothing.
    a.stop()
    since = fake.requests()[-1]
    a.start()
    wait_until(lambda: apiserver_details(a)["state"] == "running", 10, desc="the module running again")
    wait_until(lambda: a.get_json("/v1/pods/default/web")["conditions"].get(GATE) is True, 10, desc="the pod seen")
    assert status_writes(fake, "web", since=since) == []


def test_a_conflict_is_decided_again_on_the_newer_pod(agent_factory, fake, nginx, test_ca, tmp_dir):
    write_bundle(nginx.root, "app", FILES, "v1")
    fault = fake.inject("409", count=1, verbs=["patch"])
    fake.add_pod(gated_pod("web", configs="app"))
    a = start_agent(agent_factory, fake, tmp_dir, nginx, test_ca)
    wait_condition(fake, "web", "True")
    assert fault.hits == 1
    writes = status_writes(fake, "web")
    assert [w["status"] for w in writes] == [409, 200], writes
    assert apiserver_details(a)["details"]["readyCondition"]["conflicts"] == 1


def test_resource_version_precondition_refuses_a_stale_decision(agent_factory, fake, nginx, test_ca, tmp_dir):
    """The patch names the resourceVersion it was decided on: the emulator refuses it (409) when
    the pod moved on, and the agent's next patch names the newer one."""
    write_bundle(nginx.root, "app", FILES, "v1")
    fake.add_pod(gated_pod("web", configs="app"))
    start_agent(agent_factory, fake, tmp_dir, nginx, test_ca)
    wait_condition(fake, "web", "True")
    body = json.loads(status_writes(fake, "web")[-1]["body"])
    pod = fake.get_pod("default", "web")
    assert body["metadata"]["uid"] == pod["metadata"]["uid"]
    assert int(body["metadata"]["resourceVersion"]) < int(pod["metadata"]["resourceVersion"])


def test_refused_writes_make_the_module_degraded_until_they_pass(agent_factory, fake, nginx, test_ca, tmp_dir):
    write_bundle(nginx.root, "app", FILES, "v1")
    fake.inject("403", count=None, verbs=["patch"], path="/api/v1/namespaces/default/pods/")
    fake.add_pod(gated_pod("web", configs="app"))
    a = start_agent(agent_factory, fake, tmp_dir, nginx, test_ca)
    wait_until(lambda: "pods/status" in (apiserver_details(a).get("reason") or ""), 15, desc="degraded by the 403")
    assert apiserver_details(a)["state"] == "degraded"
    # One warning (the module's state), however many retries; the pod is named at info.
    warnings = [line for line in log_lines(a.log_text()) if "HTTP 403" in line and line.startswith("warning")]
    assert len(warnings) == 1, warnings
    assert any("default/web" in line for line in log_lines(a.log_text()) if "HTTP 403" in line)
    fake.clear_faults()
    wait_condition(fake, "web", "True", timeout=15)  # tried again after 2 × backoff-max
    wait_until(lambda: apiserver_details(a)["state"] == "running", 10, desc="running again")


def test_outage_writes_the_latest_state_once_with_jitter(agent_factory, fake, nginx, test_ca, tmp_dir):
    fake.add_pod(gated_pod("web", configs="app"))
    a = start_agent(agent_factory, fake, tmp_dir, nginx, test_ca, **{"condition-grace": "200ms"})
    wait_condition(fake, "web", "False", "ConfigPending")
    fake.outage("refuse")
    write_bundle(nginx.root, "app", FILES, "v1")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_until(lambda: a.get_json("/v1/configs/app")["present"], 15, desc="the config present")
    wait_until(lambda: apiserver_details(a)["details"]["writesQueued"] >= 1, 10, desc="a queued write")
    wait_until(lambda: apiserver_details(a)["state"] == "degraded", 10, desc="degraded in the outage")
    since = fake.requests()[-1]
    fake.recover()
    wait_condition(fake, "web", "True")
    writes = [w for w in status_writes(fake, "web", since=since) if w["status"] == 200]
    assert len(writes) == 1, writes
    wait_until(lambda: apiserver_details(a)["details"]["writesQueued"] == 0, 10, desc="the queue drained")


def test_events_say_what_the_node_did_and_repeats_are_a_series(agent_factory, fake, nginx, test_ca, tmp_dir):
    fake.add_pod(gated_pod("web", configs="app"))
    a = start_agent(agent_factory, fake, tmp_dir, nginx, test_ca)
    # The config keeps failing (404) while the pod waits: one Event counted as a series.
    events = wait_until(lambda: (lambda e: e if e and (e[0].get("series") or {}).get("count", 1) >= 2 else None)(
        [e for e in pod_events(fake, "web") if e["reason"] == "ConfigFailed"]), 20, desc="a ConfigFailed series")
    assert len(events) == 1, events
    e = events[0]
    assert e["type"] == "Warning" and e["reportingController"] == "pinion.io/agent", e
    assert e["reportingInstance"] == NODE and e["action"] == "Sync" and "app" in e["note"], e
    assert e["regarding"]["uid"] == fake.get_pod("default", "web")["metadata"]["uid"]
    write_bundle(nginx.root, "app", FILES, "v7")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    synced = wait_until(lambda: [e for e in pod_events(fake, "web") if "ConfigSynced" in (e["reason"] + e["note"])],
                        15, desc="the sync's event")
    assert "v7" in synced[0]["note"], synced
    m = a.metrics()
    assert m.value("pinion_apiserver_events_total", type="Warning", result="created") == 1
    assert m.value("pinion_apiserver_events_total", type="Warning", result="series") >= 1


def test_kubectl_describe_shows_the_condition_and_the_events(agent_factory, fake, nginx, test_ca, tmp_dir):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl (Debian's kubernetes-client) is not installed")
    fake.add_pod(gated_pod("web", configs="app"))
    a = start_agent(agent_factory, fake, tmp_dir, nginx, test_ca)
    wait_condition(fake, "web", "False", "ConfigPending")
    # The first failed fetch may come before the watch has the pod: wait for one it was told of.
    wait_until(lambda: any(e["reason"] == "ConfigFailed" for e in pod_events(fake, "web")), 15,
               desc="a ConfigFailed event")
    write_bundle(nginx.root, "app", FILES, "v1")
    assert a.request("POST", "/v1/configs/app/refresh").status == 202
    wait_condition(fake, "web", "True")
    wait_until(lambda: any(e["type"] == "Normal" for e in pod_events(fake, "web")), 15, desc="a Normal event")
    kubeconfig = os.path.join(tmp_dir, "kubeconfig")
    with open(kubeconfig, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "fake",
                   "clusters": [{"name": "fake", "cluster": {"server": fake.url,
                                                             "certificate-authority": fake.ca_file}}],
                   "users": [{"name": "test", "user": {"token": TOKEN}}],
                   "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "test"}}]}, f)
    out = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "--cache-dir", os.path.join(tmp_dir, "kube-cache"),
                          "describe", "pod", "web", "-n", "default"], capture_output=True, text=True, timeout=30)
    diag("kubectl describe pod web:\n" + out.stdout + out.stderr)
    assert out.returncode == 0, out.stderr
    assert "Readiness Gates" in out.stdout and GATE in out.stdout
    assert "ConfigFailed" in out.stdout and "pinion.io/agent" in out.stdout


def test_network_attachment_is_a_job_of_the_condition(agent_factory, fake, netns, tmp_dir):
    fake.add_pod(gated_pod("web"))
    fake.add_pod(_host_network(gated_pod("host")))
    token_file = os.path.join(tmp_dir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    a = agent_factory(config={
        "apiserver": {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
                      "backoff-initial": "100ms", "backoff-max": "1s", "condition-grace": "300ms",
                      "event-batch": "300ms"},
        "network": {"pod-cidr": free_pod_cidr()}})
    c = wait_condition(fake, "web", "False", "NetworkPending")
    assert "network" in c["message"], c
    # A hostNetwork pod has no attachment to wait for.
    wait_condition(fake, "host", "True")
    uid = fake.get_pod("default", "web")["metadata"]["uid"]
    r = cni(a, "ADD", container_id=new_container_id(), netns=netns(), args=k8s_args("default", "web", uid))
    assert r.rc == 0, r
    wait_condition(fake, "web", "True")
    wired = wait_until(lambda: [e for e in pod_events(fake, "web") if e["reason"] == "NetworkWired"], 15,
                       desc="the NetworkWired event")
    assert r.ip().split("/")[0] in wired[0]["note"], wired
    assert wired[0]["type"] == "Normal" and wired[0]["action"] == "Wire"


def _host_network(pod):
    pod["spec"]["hostNetwork"] = True
    return pod


UNITS = os.path.join(SRCDIR, "units", "kubernetes")
AGENT_USER = "system:serviceaccount:pinion-system:pinion"
NODE_CLAIM = "authentication.kubernetes.io/node-name"


@pytest.mark.parametrize("claim", [NODE, "another-node"])
def test_the_shipped_rbac_and_admission_policy(agent_factory, nginx, test_ca, tmp_dir, claim):
    """The agent's own writes pass units/kubernetes/rbac.yaml and admission-policy.yaml
    (enforced by the emulator, the policy's CEL evaluated for real) when its token names its
    node; a token bound to another node gets 403 for every write and the module says so."""
    agent_token = "agent-token-" + claim
    f = FakeApiserver(tls=True, token=TOKEN, rbac=os.path.join(UNITS, "rbac.yaml"),
                      admission_policy=os.path.join(UNITS, "admission-policy.yaml")).start()
    try:
        f.add_user(agent_token, AGENT_USER, groups=["system:serviceaccounts", "system:authenticated",
                                                    "system:serviceaccounts:pinion-system"],
                   extra={NODE_CLAIM: [claim]})
        write_bundle(nginx.root, "app", FILES, "v1")
        f.add_pod(gated_pod("web", configs="app"))
        token_file = os.path.join(tmp_dir, "agent-token")
        with open(token_file, "w") as t:
            t.write(agent_token + "\n")
        a = start_agent(agent_factory, f, tmp_dir, nginx, test_ca, **{"token-file": token_file})
        if claim == NODE:
            wait_condition(f, "web", "True")
            wait_until(lambda: pod_events(f, "web"), 15, desc="the pod's event")
            assert f.count(verb="patch", status=403) == 0 and f.count(verb="create", status=403) == 0
        else:
            wait_until(lambda: f.count(verb="patch", status=403) >= 1 and f.count(verb="create", status=403) >= 1,
                       15, desc="both writes refused")
            wait_until(lambda: apiserver_details(a)["state"] == "degraded", 10, desc="degraded")
            assert "denied" in apiserver_details(a)["reason"], apiserver_details(a)
            assert condition(f, "web") is None and pod_events(f, "web") == []
    finally:
        f.stop()


def test_the_node_event_budget_drops_beyond_its_burst(agent_factory, fake, nginx, test_ca, tmp_dir):
    for i in range(5):
        fake.add_pod(gated_pod("web-%d" % i, configs="app"))
    a = start_agent(agent_factory, fake, tmp_dir, nginx, test_ca, **{"event-qps": "0.01", "event-burst": "2"})
    wait_until(lambda: (a.metrics().value("pinion_apiserver_events_total", type="Warning",
                                          result="dropped-rate") or 0) >= 3,
               15, desc="events over the node's budget dropped")
    wait_until(lambda: len(fake.events(namespace="default")) >= 2, 10, desc="the budget's two events")
    m = a.metrics()
    assert m.value("pinion_apiserver_events_total", type="Warning", result="created") == 2
    assert len(fake.events(namespace="default")) == 2, fake.events(namespace="default")


def test_a_pod_start_costs_two_writes(agent_factory, fake, nginx, test_ca, tmp_dir):
    """Identity issued and config synced at a pod's start: one Provisioned Event naming both,
    and one condition write, True."""
    write_bundle(nginx.root, "app", FILES, "v1")
    pod = gated_pod("web", configs="app")
    pod["metadata"]["annotations"]["pinion.io/identity"] = "true"
    fake.add_pod(pod)
    a = agent_factory(start=False)
    token_file = os.path.join(tmp_dir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    a.sections.update({
        "apiserver": {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
                      "condition-grace": "5s", "event-batch": "2s"},
        "identity": {"signer": "local", "trust-domain": "example.org", "ca-dir": os.path.join(a.dir, "ca"),
                     "pod-tls-dir": os.path.join(a.dir, "pods-tls")},
        "config.app": config_section(nginx.url("app/manifest.json"), os.path.join(tmp_dir, "app"), test_ca)})
    a.write_config()
    a.start()
    wait_condition(fake, "web", "True")
    events = wait_until(lambda: pod_events(fake, "web"), 15, desc="the start's event")
    e = events[0]
    assert e["reason"] == "Provisioned" and e["action"] == "Provision", e
    assert "IdentityIssued: " in e["note"] and "spiffe://example.org/ns/default/sa/default" in e["note"], e
    assert "ConfigSynced: " in e["note"] and "v1" in e["note"], e
    uid = fake.get_pod("default", "web")["metadata"]["uid"]
    writes = [r for r in fake.requests(verb=["patch", "create"]) if uid in r.get("body", "")]
    assert len(writes) == 2, [(w["verb"], w["path"]) for w in writes]
    assert len(pod_events(fake, "web")) == 1


@pytest.mark.skipif(not zt.zookeeper_available(), reason="zookeeper not installed")
def test_registration_events(agent_factory, fake, zk, base, tmp_dir):
    pod = make_pod("web", node=NODE, ready=True, ip="10.1.2.3")
    pod["metadata"]["annotations"] = {"pinion.io/serverset": base + "/web", "pinion.io/port": "8080",
                                      "pinion.io/health": "none"}
    fake.add_pod(pod)
    token_file = os.path.join(tmp_dir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    config = {"apiserver": {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
                            "event-batch": "300ms"}}
    config.update(zk_config(zk))
    agent_factory(config=config)
    reg = wait_until(lambda: [e for e in pod_events(fake, "web") if e["reason"] == "Registered"], 15,
                     desc="the Registered event")
    assert base + "/web" in reg[0]["note"] and "10.1.2.3:8080" in reg[0]["note"], reg
    fake.patch_pod("default", "web", lambda p: p["status"].update(
        conditions=[{"type": "Ready", "status": "False"}]))
    gone = wait_until(lambda: [e for e in pod_events(fake, "web") if e["reason"] == "Deregistered"], 15,
                      desc="the Deregistered event")
    assert "not Ready" in gone[0]["note"] or "not ready" in gone[0]["note"], gone


def test_turning_the_condition_off_during_a_write_and_on_again(agent_factory, fake, nginx, test_ca, tmp_dir):
    """A reload that switches pod-condition off while its write is on the wire: the answer,
    when it comes, goes nowhere (and nothing crashes); switched on again, the write is made."""
    write_bundle(nginx.root, "app", FILES, "v1")
    fault = fake.inject("delay", count=1, verbs=["patch"], delay=2)
    fake.add_pod(gated_pod("web", configs="app"))
    a = start_agent(agent_factory, fake, tmp_dir, nginx, test_ca)
    wait_until(lambda: fault.hits == 1, 10, desc="the write on the wire")
    a.write_config(sections={"apiserver": {"pod-condition": "no"}})
    a.sighup()
    wait_until(lambda: "readyCondition" not in apiserver_details(a)["details"], 10, desc="the condition off")
    wait_until(lambda: fake.count(verb="patch", status=200) == 1, 10, desc="the delayed write answered")
    a.check_alive()
    fake.patch_pod("default", "web", lambda p: p["status"].update(conditions=[{"type": "Ready", "status": "False"}]))
    a.write_config(sections={"apiserver": {"pod-condition": "yes"}})
    a.sighup()
    wait_until(lambda: apiserver_details(a)["details"].get("readyCondition", {}).get("pods") == 1, 10,
               desc="the condition on again")
    wait_condition(fake, "web", "True")
