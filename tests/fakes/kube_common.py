# SPDX-License-Identifier: MIT
"""Constants that mirror the real apiserver's messages, the resources it serves, and small helpers
shared by the parts of the test apiserver (see kube_apiserver.py)."""

import json
import time


# ---------------------------------------------------------------------------------------------
# Constants that mirror the real apiserver's messages

CONTINUE_EXPIRED = ("The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.")
CONTINUE_INCONSISTENT = ("The provided continue parameter is too old to display a consistent "
                         "list result. You can start a new list without the continue parameter, "
                         "or use the continue token in this response to retrieve the remainder "
                         "of the results. Continuing with the provided token results in an "
                         "inconsistent list - objects that were created, modified, or deleted "
                         "between the time the first chunk was returned and now may show up in "
                         "the list.")
LIST_EXPIRED = "The resourceVersion for the provided list is too old."
FRESHNESS_WAIT = 3.0  # the watch cache waits this long for a resourceVersion from the future

REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
           504: "Timeout"}
DEFAULT_MESSAGES = {429: "Too many requests, please try again later.",
                    500: "Internal error occurred: injected by the fake apiserver",
                    503: "The server is currently unable to handle the request",
                    504: "The server was unable to return a response in the time allotted, but "
                         "may still be processing the request"}

POD_FIELDS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.restartPolicy": ("spec", "restartPolicy"),
    "spec.schedulerName": ("spec", "schedulerName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "spec.hostNetwork": ("spec", "hostNetwork"),
    "status.phase": ("status", "phase"),
    "status.podIP": ("status", "podIP"),
    "status.nominatedNodeName": ("status", "nominatedNodeName"),
}
NODE_FIELDS = {
    "metadata.name": ("metadata", "name"),
    "spec.unschedulable": ("spec", "unschedulable"),
}


class _Resource:
    """One served resource. Several resources may share a store (core/v1 and events.k8s.io/v1
    events are one set of objects): `view` turns a stored object into this resource's form."""

    def __init__(self, name, kind, namespaced, fields, group="", version="v1", store=None,
                 view=None, verbs=("get", "list", "watch"), short_names=None):
        self.name, self.kind, self.namespaced, self.fields = name, kind, namespaced, fields
        self.list_kind = kind + "List"
        self.group, self.version = group, version
        self.api_version = "%s/%s" % (group, version) if group else version
        self.store = store or name
        self.view = view
        self.verbs = list(verbs)
        self.short_names = short_names or []

    def show(self, obj):
        return self.view(obj) if self.view is not None else obj

    def qualified(self):
        """pods, events.events.k8s.io: how the real server names the resource in messages."""
        return "%s.%s" % (self.name, self.group) if self.group else self.name


RESOURCES = {
    "pods": _Resource("pods", "Pod", True, POD_FIELDS, short_names=["po"],
                      verbs=("get", "list", "watch", "patch")),
    "nodes": _Resource("nodes", "Node", False, NODE_FIELDS, short_names=["no"]),
}
# Resources of named API groups: {(group, version): {name: _Resource}} (kube_events adds events).
GROUP_RESOURCES = {}


def all_resources():
    out = list(RESOURCES.values())
    for table in GROUP_RESOURCES.values():
        out.extend(table.values())
    return out

FAULT_KINDS = ("close", "drop", "malformed", "truncate", "delay")
VERBS = ("list", "watch", "get", "create", "update", "patch", "delete")

# ---------------------------------------------------------------------------------------------
# Small helpers


def _now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _dumps(obj):
    """JSON the way Go's encoding/json writes it: compact, UTF-8, with <, >, & and U+2028/9
    escaped (they only ever occur inside strings)."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    s = (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
         .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return s.encode("utf-8")


def _json_copy(obj):
    return json.loads(json.dumps(obj))


def _typed(obj, kind, api_version="v1"):
    """The object with kind and apiVersion first, as the real server orders them."""
    out = {"kind": kind, "apiVersion": api_version}
    for k, v in obj.items():
        if k not in ("kind", "apiVersion"):
            out[k] = v
    return out


def _untyped(obj):
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _parse_bool(value, name):
    """Go's strconv.ParseBool, which the apiserver uses for query parameters (the Python
    client sends watch=True)."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False", ""):
        return False
    raise ApiError(400, "BadRequest", 'invalid value for %s: strconv.ParseBool: parsing %s: '
                   'invalid syntax' % (name, json.dumps(value)))


def _parse_int(value, name):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApiError(400, "BadRequest", 'invalid value for %s: strconv.ParseInt: parsing %s: '
                       'invalid syntax' % (name, json.dumps(value)))


def status_object(code, reason, message, details=None, meta=None):
    """A metav1.Status for a failure, with the real server's field order."""
    st = {"kind": "Status", "apiVersion": "v1", "metadata": dict(meta or {}),
          "status": "Failure", "message": message, "reason": reason}
    if details is not None:
        st["details"] = details
    st["code"] = code
    return st


def conflict(res, name, why):
    """errors.NewConflict: 409 "Operation cannot be fulfilled on RES \"NAME\": WHY"."""
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                    % (res.qualified(), name, why),
                    details={"name": name, "group": res.group or None, "kind": res.name})


def not_found(res, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (res.qualified(), name),
                    details={"name": name, "group": res.group or None, "kind": res.name})


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def invalid(res, name, errors):
    """errors.NewInvalid with field errors [(field, reason, message_after_field)], e.g.
    ("eventTime", "FieldValueRequired", "Required value")."""
    parts = ["%s: %s" % (f, m) for f, _, m in errors]
    text = parts[0] if len(parts) == 1 else "[%s]" % ", ".join(parts)
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s'
                    % ("%s.%s" % (res.kind, res.group) if res.group else res.kind, name, text),
                    details={"name": name, "group": res.group or None, "kind": res.kind,
                             "causes": [{"reason": r, "message": m, "field": f}
                                        for f, r, m in errors]})


class ApiError(Exception):
    """An error answered as a Status object."""

    def __init__(self, code, reason, message, details=None, headers=None, meta=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.headers, self.meta = details, dict(headers or {}), meta

    def status(self):
        details = self.details
        if isinstance(details, dict):  # Go omits empty fields (group "" of the core group)
            details = {k: v for k, v in details.items() if v is not None}
        return status_object(self.code, self.reason, self.message, details, self.meta)


def _too_large_rv(n, cur):
    return ApiError(504, "Timeout", "Too large resource version: %d, current: %d" % (n, cur),
                    details={"causes": [{"reason": "ResourceVersionTooLarge",
                                         "message": "Too large resource version"}],
                             "retryAfterSeconds": 1},
                    headers={"Retry-After": "1"})
