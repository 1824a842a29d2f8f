# SPDX-License-Identifier: MIT
"""A module that is not running says so: every route it owns answers 503
{"error": "<module> is <state>: <reason>", "code": 503, "module", "state", "reason"} (docs/api.md,
"Errors"), whether the module never registered the route (zkreg, identity, podnet) or keeps it
registered while disabled (configsync, reclaim); pinionctl prints the error and exits 4. A
caller the route would refuse gets the refusal it gets from a running module (403), never the
module's state. A module that runs, degraded too, answers for itself."""

import json
import os
import re

import pytest

import podnet_testlib as pt
from identity_testlib import new_uid
from pinion_testlib import SRCDIR, make_pod, request_child, wait_until
from podnet_testlib import netns  # noqa: F401 (fixture)

EXIT_MODULE_DOWN = 4

# (module, method, pattern, request path, who the route is for) for every route a module owns.
ROUTES = [
    ("identity", "GET", "/v1/identity", "/v1/identity", "workload"),
    ("identity", "GET", "/v1/identity/bundle", "/v1/identity/bundle", "public"),
    ("identity", "POST", "/v1/identity/jwt", "/v1/identity/jwt", "workload"),
    ("identity", "GET", "/v1/identity/jwt-bundle", "/v1/identity/jwt-bundle", "public"),
    ("identity", "POST", "/v1/identity/jwt/validate", "/v1/identity/jwt/validate", "public"),
    ("configsync", "GET", "/v1/configs", "/v1/configs", "own"),
    ("configsync", "GET", "/v1/configs/{}", "/v1/configs/app", "own"),
    ("configsync", "POST", "/v1/configs/{}/refresh", "/v1/configs/app/refresh", "privileged"),
    ("zkreg", "GET", "/v1/registrations", "/v1/registrations", "own"),
    ("zkreg", "POST", "/v1/registrations/drain", "/v1/registrations/drain", "privileged"),
    ("zkreg", "POST", "/v1/registrations/undrain", "/v1/registrations/undrain", "privileged"),
    ("podnet", "POST", "/v1/cni", "/v1/cni", "host"),
    ("reclaim", "GET", "/v1/reclaim", "/v1/reclaim", "privileged"),
]

# pinionctl's commands for a module's routes.
COMMANDS = [
    ("identity", ["identity"]),
    ("configsync", ["configs"]),
    ("configsync", ["wait-config", "app", "--timeout", "1s"]),
    ("zkreg", ["registrations"]),
    ("zkreg", ["drain"]),
    ("zkreg", ["undrain"]),
    ("reclaim", ["reclaim"]),
]


SERVED_ROW = re.compile(r'\{\s*"([A-Z]+)"\s*,\s*"(/[^"]*)"\s*,\s*(\w+)\s*,\s*(?:\.privileged\s*=\s*)?(true|false)\s*\}')
DECLARED_ROW = re.compile(r'\{\s*"([A-Z]+)"\s*,\s*"(/[^"]*)"\s*,\s*MODULE_ROUTE_(\w+)\s*\}')


def test_every_route_a_module_serves_is_declared_for_the_core():
    """The routes each module registers (its api_route tables) are the ones its struct module
    declares (so the core can answer them while it does not run), with the same privilege; and
    the ones this file checks."""
    served, declared = {}, {}
    for dirpath, _, files in os.walk(os.path.join(SRCDIR, "modules")):
        for name in files:
            if name.endswith(".c"):
                with open(os.path.join(dirpath, name)) as f:
                    text = f.read()
                for m, p, _handler, privileged in SERVED_ROW.findall(text):
                    served[(m, p)] = privileged == "true"
                for m, p, audience in DECLARED_ROW.findall(text):
                    declared[(m, p)] = audience.lower()
    assert len(served) >= 13, served
    assert served.keys() == declared.keys(), (served.keys() ^ declared.keys())
    for route, privileged in served.items():
        assert privileged == (declared[route] in ("host", "privileged")), (route, privileged, declared[route])
    assert {(m, p): a for _, m, p, _, a in ROUTES} == declared


def module_of(a, name):
    return [m for m in a.status()["modules"] if m["name"] == name][0]


def expected_body(a, name):
    m = module_of(a, name)
    assert m["state"] in ("disabled", "failed", "stopped"), m
    error = "%s is %s" % (name, m["state"]) + (": %s" % m["reason"] if m["reason"] else "")
    return {"error": error, "code": 503, "module": name, "state": m["state"], "reason": m["reason"]}


def assert_module_down(a, name, r):
    assert r.status == 503, (r.status, r.raw)
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    assert r.body == expected_body(a, name), r.raw


@pytest.mark.parametrize("module,method,pattern,path,_audience", ROUTES, ids=["%s %s" % (r[1], r[2]) for r in ROUTES])
def test_every_route_of_a_disabled_module_answers_503_with_its_reason(agent, module, method, pattern, path, _audience):
    # The default test config configures no module: each is disabled with a reason.
    assert module_of(agent, module)["state"] == "disabled"
    assert_module_down(agent, module, agent.request(method, path, body={} if method == "POST" else None))


def test_the_reason_is_the_modules_own(agent):
    r = agent.get("/v1/registrations")
    assert r.body["error"] == "zkreg is disabled: no [zookeeper] servers configured", r.raw
    assert r.body["reason"] == "no [zookeeper] servers configured"


def test_a_wrong_method_on_a_disabled_modules_route_is_405_not_404(agent):
    r = agent.request("GET", "/v1/registrations/drain")
    assert r.status == 405 and r.headers.get("allow") == "POST", (r.status, r.headers)
    assert agent.get("/v1/registrations/nope").status == 404


@pytest.mark.parametrize("module,args", COMMANDS, ids=[" ".join(c[1][:1]) + ("" if len(c[1]) == 1 else " NAME")
                                                      for c in COMMANDS])
def test_pinionctl_says_which_module_is_down_and_exits_4(agent, module, args):
    body = expected_body(agent, module)
    rc, out, err = agent.ctl(*args)
    assert rc == EXIT_MODULE_DOWN, (rc, out, err)
    assert err == "pinionctl: %s\n" % body["error"], err
    assert out == ""
    rc, out, err = agent.ctl("--json", *args)
    assert rc == EXIT_MODULE_DOWN, (rc, out, err)
    assert json.loads(out) == body, out
    assert err == "pinionctl: %s\n" % body["error"], err


def test_core_routes_and_health_are_unaffected(agent):
    assert agent.get("/v1/status").status == 200
    assert agent.get("/v1/pods").status == 200
    rc, out, err = agent.ctl("health")
    assert rc == 0, (rc, out, err)


def request_as(a, cg, uid, method, path):
    out = request_child(a.socket, method, path, "{}" if method == "POST" else None, 10,
                        preexec_fn=cg.preexec(uid) if cg else (lambda: (os.setgid(uid), os.setuid(uid))))
    assert "oserror" not in out, out
    try:
        body = json.loads(out["body"])
    except ValueError:
        body = out["body"]
    return out["status"], body


@pytest.mark.parametrize("caller", ["pod", "root in pod", "unknown pod", "outsider"])
def test_a_caller_the_route_refuses_learns_nothing_of_the_module(agent_factory, pod_cgroups, caller):
    # socket-mode 0666: anyone may connect; the route decides, as it does for a running module.
    a = agent_factory(config={"agent": {"socket-mode": "0666"}})
    uid = new_uid()
    a.write_pod("web", make_pod("web", uid=uid))
    wait_until(lambda: a.get_json("/v1/pods")["count"] == 1, 10, desc="the pod in the store")
    cg = {"pod": pod_cgroups(uid), "root in pod": pod_cgroups(uid), "unknown pod": pod_cgroups(new_uid()),
          "outsider": None}[caller]
    as_uid = 0 if caller == "root in pod" else 65534
    # Who may use each kind of route (docs/api.md, "Authorization"); the others get its 403.
    allowed = {"pod": {"own", "workload", "public"}, "root in pod": {"own", "workload", "public"},
               "unknown pod": {"public"}, "outsider": {"public"}}[caller]
    for module, method, _pattern, path, audience in ROUTES:
        status, body = request_as(a, cg, as_uid, method, path)
        if audience in allowed:
            assert status == 503 and body == expected_body(a, module), (caller, path, status, body)
        else:
            assert status == 403, (caller, path, status, body)
            text = json.dumps(body)
            assert "disabled" not in text and "reason" not in text and module_of(a, module)["reason"] not in text, \
                (caller, path, body)


def test_a_running_or_degraded_module_answers_for_itself_and_a_reload_switches(agent_factory):
    # configsync with a config whose server is down: degraded, its routes its own.
    a = agent_factory(config={"config.app": {"url": "https://127.0.0.1:1/app/manifest.json",
                                             "dest": "/nonexistent-pinion-dest/app", "interval": "1h",
                                             "backoff-initial": "1s", "timeout": "2s"}})
    wait_until(lambda: module_of(a, "configsync")["state"] == "degraded", 10, desc="configsync degraded")
    r = a.get("/v1/configs")
    assert r.status == 200 and [c["name"] for c in r.body["configs"]] == ["app"], r.raw
    assert a.get("/v1/configs/app").status == 200
    rc, out, err = a.ctl("configs")
    assert rc == 0 and "app" in out, (rc, out, err)
    # Other modules stay down.
    assert_module_down(a, "zkreg", a.get("/v1/registrations"))
    # Without its section it is disabled again: the routes it keeps registered answer 503.
    del a.sections["config.app"]
    a.write_config()
    a.sighup()
    wait_until(lambda: module_of(a, "configsync")["state"] == "disabled", 10, desc="configsync disabled")
    assert_module_down(a, "configsync", a.get("/v1/configs"))
    assert_module_down(a, "configsync", a.get("/v1/configs/app"))
    rc, out, err = a.ctl("configs")
    assert rc == EXIT_MODULE_DOWN and err == "pinionctl: configsync is disabled: %s\n" % \
        module_of(a, "configsync")["reason"], (rc, out, err)


def test_pinion_cni_against_a_disabled_podnet_says_why(agent, netns):
    # No network now: STATUS 50 (not available), ADD 11 (try again later), the agent's words.
    error = expected_body(agent, "podnet")["error"]
    st = pt.cni(agent, "STATUS")
    assert st.code == 50 and st.json["msg"] == error, st
    add = pt.cni(agent, "ADD", "c1", netns())
    assert add.code == 11 and add.json["msg"] == error, add


def test_a_failed_module_says_why(agent_factory):
    # identity with a CA key that does not match (and no certificate): it fails at start.
    a = agent_factory(start=False)
    ca = os.path.join(a.dir, "ca")
    os.makedirs(ca)
    with open(os.path.join(ca, "ca.key"), "w") as f:
        f.write("garbage")
    a.sections["identity"] = {"signer": "local", "trust-domain": "example.org", "ca-dir": ca}
    a.write_config()
    a.start()
    body = expected_body(a, "identity")
    assert body["state"] == "failed" and "not a matching key and certificate" in body["reason"], body
    for method, path in (("GET", "/v1/identity"), ("GET", "/v1/identity/bundle"), ("POST", "/v1/identity/jwt")):
        assert_module_down(a, "identity", a.request(method, path, body={} if method == "POST" else None))
    rc, out, err = a.ctl("identity")
    assert rc == EXIT_MODULE_DOWN and err == "pinionctl: %s\n" % body["error"], (rc, out, err)
