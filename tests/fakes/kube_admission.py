# SPDX-License-Identifier: MIT
"""Who is asking, and may they: users by token, RBAC for them (from an rbac.yaml), and
ValidatingAdmissionPolicies (from a policy file) evaluated with real CEL (@bufbuild/cel, run by
cel-eval.js in a long-running node process), refusing like the real server:
  RBAC:  403 'pods "web-1" is forbidden: User "U" cannot patch resource "pods/status" in API
         group "" in the namespace "default"'
  VAP:   403 (the validation's reason) "ValidatingAdmissionPolicy 'P' with binding 'B' denied
         request: MESSAGE"
Only users given in `users` are subject to RBAC (the test's own token is a cluster admin)."""

import json
import os
import subprocess
import threading

from kube_common import ApiError

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.dirname(os.path.dirname(HERE))
REASON_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422,
                "RequestEntityTooLarge": 413}


def load_yaml_documents(path):
    import yaml  # python3-yaml (a dependency of python3-kubernetes)
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def request_attributes(method, path, params):
    """The authorizer's attributes of an API request: dict(verb, group, version, resource,
    subresource, namespace, name) for a resource request, None for a non-resource path."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    watch = rest[:1] == ["watch"]
    if watch:
        rest = rest[1:]
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    elif len(rest) in (1, 2) and rest[0] == "namespaces":
        return {"verb": _verb(method, params, watch, len(rest) == 2), "group": "",
                "version": "v1", "resource": "namespaces", "subresource": "",
                "namespace": rest[1] if len(rest) == 2 else "", "name": rest[1] if len(rest) == 2 else ""}
    if not rest:
        return None
    name = rest[1] if len(rest) >= 2 else ""
    return {"verb": _verb(method, params, watch, bool(name)), "group": group, "version": version,
            "resource": rest[0], "subresource": rest[2] if len(rest) >= 3 else "",
            "namespace": ns or "", "name": name}


def _verb(method, params, watch, named):
    if method in ("GET", "HEAD"):
        if watch or params.get("watch") in ("1", "t", "T", "true", "True", "TRUE"):
            return "watch"
        return "get" if named else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection"}.get(method, method.lower())


class Rbac:
    """The ClusterRoles bound by ClusterRoleBindings (and Roles by RoleBindings) of a manifest."""

    def __init__(self, docs):
        roles = {}
        self.bindings = []  # (subject usernames and groups, rules, namespace or None)
        for d in docs:
            if d.get("kind") in ("ClusterRole", "Role"):
                md = d.get("metadata") or {}
                roles[(d["kind"], md.get("namespace"), md["name"])] = d.get("rules") or []
        for d in docs:
            if d.get("kind") not in ("ClusterRoleBinding", "RoleBinding"):
                continue
            ref = d["roleRef"]
            ns = (d.get("metadata") or {}).get("namespace") if d["kind"] == "RoleBinding" else None
            rules = roles.get((ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"]), [])
            subjects = set()
            for s in d.get("subjects") or []:
                if s["kind"] == "ServiceAccount":
                    subjects.add("system:serviceaccount:%s:%s" % (s["namespace"], s["name"]))
                else:
                    subjects.add(s["name"])
            self.bindings.append((subjects, rules, ns))

    def subjects(self):
        return set().union(*(b[0] for b in self.bindings)) if self.bindings else set()

    def allows(self, user, attrs):
        names = {user.get("username")} | set(user.get("groups") or [])
        for subjects, rules, ns in self.bindings:
            if not names & subjects or (ns is not None and ns != attrs["namespace"]):
                continue
            for r in rules:
                if self._rule_allows(r, attrs):
                    return True
        return False

    @staticmethod
    def _rule_allows(rule, a):
        res = a["resource"] + ("/" + a["subresource"] if a["subresource"] else "")
        return ((a["group"] in rule.get("apiGroups", []) or "*" in rule.get("apiGroups", []))
                and (res in rule.get("resources", []) or "*" in rule.get("resources", []))
                and (a["verb"] in rule.get("verbs", []) or "*" in rule.get("verbs", []))
                and (not rule.get("resourceNames") or a["name"] in rule["resourceNames"]))


def forbidden(user, a):
    res = a["resource"] + ("/" + a["subresource"] if a["subresource"] else "")
    qualified = "%s.%s" % (a["resource"], a["group"]) if a["group"] else a["resource"]
    where = ('in the namespace "%s"' % a["namespace"]) if a["namespace"] else "at the cluster scope"
    why = 'User "%s" cannot %s resource "%s" in API group "%s" %s' % (
        user.get("username"), a["verb"], res, a["group"], where)
    head = '%s "%s"' % (qualified, a["name"]) if a["name"] else qualified
    return ApiError(403, "Forbidden", "%s is forbidden: %s" % (head, why),
                    details={"name": a["name"] or None, "group": a["group"] or None,
                             "kind": a["resource"]})


class CelEvaluator:
    """cel-eval.js on @bufbuild/cel (scripts/npm-deps cel), one JSON line per evaluation."""

    def __init__(self, node_modules=None):
        if node_modules is None:
            p = subprocess.run([os.path.join(SRCDIR, "scripts", "npm-deps"), "cel"],
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                raise RuntimeError("scripts/npm-deps cel failed:\n" + p.stderr[-3000:])
            node_modules = p.stdout.strip().splitlines()[-1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("NODE")}
        env["NODE_PATH"] = node_modules
        self._proc = subprocess.Popen(["node", os.path.join(HERE, "cel-eval.js")], env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._lock = threading.Lock()
        self._seq = 0

    def evaluate(self, variables, bindings, exprs):
        """Evaluates variables [(name, expr)] in order (bound as `variables`), then exprs with
        `bindings`; -> [{"value": v} | {"error": "..."}] per expr."""
        with self._lock:
            self._seq += 1
            req = {"id": self._seq, "variables": [{"name": n, "expression": e} for n, e in variables],
                   "bindings": bindings, "exprs": exprs}
            self._proc.stdin.write(json.dumps(req) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("cel-eval.js exited")
        return json.loads(line)["results"]

    def close(self):
        try:
            self._proc.stdin.close()
            self._proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()


class Policies:
    """ValidatingAdmissionPolicies with their bindings (validationActions Deny)."""

    def __init__(self, docs, evaluator):
        self.cel = evaluator
        self.policies = {d["metadata"]["name"]: d for d in docs
                         if d.get("kind") == "ValidatingAdmissionPolicy"}
        self.bindings = [d for d in docs if d.get("kind") == "ValidatingAdmissionPolicyBinding"]

    @staticmethod
    def _rule_matches(rule, req):
        r = req["resource"]
        res = r["resource"] + ("/" + req["subResource"] if req["subResource"] else "")
        return ((r["group"] in rule.get("apiGroups", []) or "*" in rule.get("apiGroups", []))
                and (r["version"] in rule.get("apiVersions", ["*"])
                     or "*" in rule.get("apiVersions", ["*"]))
                and (res in rule.get("resources", []) or "*" in rule.get("resources", []))
                and (req["operation"] in rule.get("operations", [])
                     or "*" in rule.get("operations", [])))

    def admit(self, req, obj, old):
        """Raises ApiError when a bound policy denies the request (AdmissionRequest req)."""
        bindings = {"request": req, "object": obj, "oldObject": old, "params": None,
                    "namespaceObject": None}
        for b in self.bindings:
            pol = self.policies.get(b["spec"]["policyName"])
            if pol is None:
                continue
            spec = pol["spec"]
            rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
            if not any(self._rule_matches(r, req) for r in rules):
                continue
            self._check(pol["metadata"]["name"], b["metadata"]["name"], spec, bindings)

    def _check(self, pname, bname, spec, bindings):
        fail = spec.get("failurePolicy", "Fail") == "Fail"
        variables = [(v["name"], v["expression"]) for v in spec.get("variables") or []]
        conds = spec.get("matchConditions") or []
        vals = spec.get("validations") or []
        exprs = [c["expression"] for c in conds] + [v["expression"] for v in vals] + \
            [v.get("messageExpression") or "''" for v in vals]
        results = self.cel.evaluate(variables, bindings, exprs)
        head = "ValidatingAdmissionPolicy '%s' with binding '%s' denied request: " % (pname, bname)
        for c, r in zip(conds, results):
            if "error" in r:
                if fail:
                    raise ApiError(403, "Forbidden", "%sexpression '%s' resulted in error: %s"
                                   % (head, c["name"], r["error"]))
                return
            if r["value"] is not True:
                return  # a match condition is false: the policy does not apply
        n = len(conds)
        for i, v in enumerate(vals):
            r, m = results[n + i], results[n + len(vals) + i]
            if "error" in r:
                if fail:
                    raise ApiError(403, "Forbidden", "%sexpression '%s' resulted in error: %s"
                                   % (head, v["expression"], r["error"]))
                continue
            if r["value"] is True:
                continue
            msg = m.get("value") if isinstance(m.get("value"), str) and m.get("value") else None
            msg = msg or v.get("message") or "failed expression: %s" % v["expression"]
            reason = v.get("reason") or "Invalid"
            raise ApiError(REASON_CODES.get(reason, 422), reason, head + msg)


class _AdmissionMixin:
    """Users, RBAC and admission policies, mixed into FakeApiserver."""

    def _setup_admission(self, users, rbac, admission_policy, cel_node_modules):
        self.users = dict(users or {})
        docs = load_yaml_documents(rbac) if isinstance(rbac, str) else rbac
        self._rbac = Rbac(docs) if docs else None
        self._policies = None
        if admission_policy:
            docs = (load_yaml_documents(admission_policy) if isinstance(admission_policy, str)
                    else admission_policy)
            self._policies = Policies(docs, CelEvaluator(cel_node_modules))

    def _close_admission(self):
        if getattr(self, "_policies", None) is not None:
            self._policies.cel.close()
            self._policies = None

    def add_user(self, token, username, groups=None, extra=None, uid=None):
        """A bearer token that authenticates as this user (subject to RBAC and policies)."""
        self.users[token] = {"username": username, "uid": uid or "",
                             "groups": list(groups or ["system:authenticated"]),
                             "extra": dict(extra or {})}

    def _user_of(self, h):
        auth = h.headers.get("Authorization", "")
        if auth[:7].lower() == "bearer ":
            user = self.users.get(auth[7:].strip())
            if user is not None:
                return user
        return None

    def _authorize(self, h, path, params):
        """RBAC for a configured user: raises ApiError 403 when no rule allows the request."""
        user = h.user
        if user is None or self._rbac is None:
            return
        attrs = request_attributes(h.command, path, params)
        if attrs is None:
            return  # discovery, /version, /healthz: open to every authenticated user
        if not self._rbac.allows(user, attrs):
            raise forbidden(user, attrs)

    def _admit(self, h, res, operation, ns, name, obj, old, sub=""):
        """Runs the admission policies on a write (obj after the write, old before)."""
        if self._policies is None:
            return
        user = h.user or {"username": "system:admin", "groups": ["system:masters",
                                                                 "system:authenticated"]}
        req = {"kind": {"group": res.group, "version": res.version, "kind": res.kind},
               "resource": {"group": res.group, "version": res.version, "resource": res.name},
               "subResource": sub or "", "name": name, "namespace": ns, "operation": operation,
               "userInfo": {"username": user.get("username", ""), "uid": user.get("uid", ""),
                            "groups": list(user.get("groups") or []),
                            "extra": dict(user.get("extra") or {})},
               "dryRun": False}
        self._policies.admit(req, obj, old)
