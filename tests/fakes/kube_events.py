# SPDX-License-Identifier: MIT
"""Events: written through events.k8s.io/v1 (create, patch), read through it and through
core/v1 (what `kubectl describe` lists), one store for both, converted as the real server
converts (note<->message, regarding<->involvedObject, reportingController<->reportingComponent,
deprecated* <-> the old fields). Validation follows the real server's ValidateEventCreate and
ValidateEventUpdate for requests of events.k8s.io/v1."""

import re
import uuid

from kube_common import (_json_copy, _now_rfc3339, _typed, ApiError, GROUP_RESOURCES, RESOURCES,
                         _Resource, bad_request, conflict, invalid, not_found)
from kube_patch import apply_patch

GROUP = "events.k8s.io"
_REF = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

# The field selectors the real server takes (pkg/registry/core/event ToSelectableFields, and
# events.k8s.io/v1's label conversion of regarding.* and reportingController).
CORE_EVENT_FIELDS = dict({"involvedObject.%s" % f: ("involvedObject", f) for f in _REF}, **{
    "reason": ("reason",), "reportingComponent": ("reportingComponent",),
    "source": ("source", "component"), "type": ("type",),
    "metadata.name": ("metadata", "name"), "metadata.namespace": ("metadata", "namespace")})
V1_EVENT_FIELDS = dict({"regarding.%s" % f: ("regarding", f) for f in _REF}, **{
    "reason": ("reason",), "reportingController": ("reportingController",),
    "type": ("type",), "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace")})

# The order the real server serializes a core/v1 Event's fields in.
_CORE_ORDER = ("kind", "apiVersion", "metadata", "involvedObject", "reason", "message", "source",
               "firstTimestamp", "lastTimestamp", "count", "type", "eventTime", "series",
               "action", "related", "reportingComponent", "reportingInstance")


def to_core_event(ev):
    """An events.k8s.io/v1 Event as core/v1 serves it (Go's zero values included)."""
    out = {"kind": "Event", "apiVersion": "v1", "metadata": ev.get("metadata") or {},
           "involvedObject": ev.get("regarding") or {}, "reason": ev.get("reason"),
           "message": ev.get("note"), "source": ev.get("deprecatedSource") or {},
           "firstTimestamp": ev.get("deprecatedFirstTimestamp"),
           "lastTimestamp": ev.get("deprecatedLastTimestamp"),
           "count": ev.get("deprecatedCount"), "type": ev.get("type"),
           "eventTime": ev.get("eventTime"), "series": ev.get("series"),
           "action": ev.get("action"), "related": ev.get("related"),
           "reportingComponent": ev.get("reportingController") or "",
           "reportingInstance": ev.get("reportingInstance") or ""}
    omit_empty = ("reason", "message", "count", "type", "series", "action", "related")
    return {k: out[k] for k in _CORE_ORDER if not (k in omit_empty and out[k] in (None, "", 0))}


EVENTS_V1 = _Resource("events", "Event", True, V1_EVENT_FIELDS, group=GROUP, store="events",
                      verbs=("create", "get", "list", "watch", "patch"), short_names=["ev"])
EVENTS_CORE = _Resource("events", "Event", True, CORE_EVENT_FIELDS, store="events",
                        view=to_core_event, verbs=("get", "list", "watch"), short_names=["ev"])
RESOURCES["events"] = EVENTS_CORE
GROUP_RESOURCES[(GROUP, "v1")] = {"events": EVENTS_V1}

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(r"^%s(\.%s)*$" % (_DNS1123_LABEL, _DNS1123_LABEL))
_QNAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _required(field):
    return (field, "FieldValueRequired", "Required value")


def _bad_value(field, value, detail):
    return (field, "FieldValueInvalid", 'Invalid value: "%s": %s' % (value, detail))


def _qualified_name_errors(value, field):
    if not value:
        return []
    prefix, _, name = value.rpartition("/")
    errs = []
    if "/" in value and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        errs.append(_bad_value(field, value, "prefix part a lowercase RFC 1123 subdomain must "
                               "consist of lower case alphanumeric characters, '-' or '.', and "
                               "must start and end with an alphanumeric character"))
    if not name or len(name) > 63 or not _QNAME.match(name):
        errs.append(_bad_value(field, value, "name part must consist of alphanumeric characters, "
                               "'-', '_' or '.', and must start and end with an alphanumeric "
                               "character"))
    return errs


def _series_errors(ev):
    series = ev.get("series")
    if series is None:
        return []
    errs = []
    if not isinstance(series.get("count"), int) or series["count"] < 2:
        errs.append(_bad_value("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        errs.append(_required("series.lastObservedTime"))
    return errs


def _common_errors(ev, namespace):
    """legacyValidateEvent for an event with eventTime (the new API)."""
    errs = []
    regarding = ev.get("regarding") or {}
    if not regarding.get("namespace") and namespace not in ("default", "kube-system"):
        errs.append(_bad_value("involvedObject.namespace", "", "does not match event.namespace"))
    if not ev.get("reportingController"):
        errs.append(_required("reportingController"))
    errs += _qualified_name_errors(ev.get("reportingController") or "", "reportingController")
    for field in ("reportingInstance", "action", "reason"):
        value = ev.get(field) or ""
        if not value:
            errs.append(_required(field))
        if len(value) > 128:
            errs.append(_bad_value(field, "", "can have at most 128 characters"))
    if len((ev.get("note") or "").encode()) > 1024:
        errs.append(_bad_value("message", "", "can have at most 1024 characters"))
    return errs


def validate_create(ev, namespace):
    md = ev.get("metadata") or {}
    errs = []
    if not ev.get("eventTime"):  # an old-style event: only the namespace rule (and ours below)
        errs.append(_required("eventTime"))
    else:
        errs += _common_errors(ev, namespace)
    name = md.get("name") or ""
    if not name:
        errs.append(("metadata.name", "FieldValueRequired",
                     "Required value: name or generateName is required"))
    elif len(name) > 253 or not _SUBDOMAIN.match(name):
        errs.append(_bad_value("metadata.name", name, "a lowercase RFC 1123 subdomain must "
                               "consist of lower case alphanumeric characters, '-' or '.', and "
                               "must start and end with an alphanumeric character"))
    errs += _series_errors(ev)
    if ev.get("type") not in ("Normal", "Warning"):
        errs.append(_bad_value("type", "", "has invalid value: %s" % (ev.get("type") or "")))
    for field, old in (("deprecatedFirstTimestamp", "firstTimestamp"),
                       ("deprecatedLastTimestamp", "lastTimestamp"),
                       ("deprecatedCount", "count")):
        if ev.get(field):
            errs.append(_bad_value(old, "", "needs to be unset"))
    src = ev.get("deprecatedSource") or {}
    if src.get("component") or src.get("host"):
        errs.append(_bad_value("source", "", "needs to be unset"))
    return errs


# Fields an events.k8s.io/v1 update may not change, with the name the real server reports.
_IMMUTABLE = (("regarding", "involvedObject"), ("reason", "reason"), ("note", "message"),
              ("deprecatedSource", "source"), ("deprecatedFirstTimestamp", "firstTimestamp"),
              ("deprecatedLastTimestamp", "lastTimestamp"), ("deprecatedCount", "count"),
              ("type", "type"), ("eventTime", "eventTime"), ("action", "action"),
              ("related", "related"), ("reportingController", "reportingController"),
              ("reportingInstance", "reportingInstance"))


def validate_update(new, old, namespace):
    errs = _common_errors(new, namespace) if new.get("eventTime") else []
    if new.get("series") != old.get("series"):
        errs += _series_errors(new)
    for field, reported in _IMMUTABLE:
        if (new.get(field) or None) != (old.get(field) or None):
            value = new.get(field)
            errs.append((reported, "FieldValueInvalid", "Invalid value: %s: field is immutable"
                         % ('"%s"' % value if isinstance(value, str) else _go_value(value))))
    nmd, omd = new.get("metadata") or {}, old.get("metadata") or {}
    for f in ("name", "namespace", "uid", "creationTimestamp"):
        if nmd.get(f) != omd.get(f):
            errs.append(("metadata.%s" % f, "FieldValueInvalid",
                         'Invalid value: "%s": field is immutable' % (nmd.get(f) or "")))
    return errs


def _go_value(v):
    if isinstance(v, dict):
        return "{%s}" % " ".join("%s:%s" % (k, _go_value(x)) for k, x in v.items())
    return "" if v is None else str(v)


class _EventsMixin:
    """events.k8s.io/v1 writes and the test-side helpers, mixed into FakeApiserver."""

    def _events_decode(self, body):
        import json
        try:
            obj = json.loads(body or b"null")
        except ValueError as err:
            raise bad_request("the body of the request was in an unknown format: %s" % err)
        if not isinstance(obj, dict):
            raise bad_request("the body of the request was in an unknown format")
        return obj

    def _event_create(self, h, ns, body):
        """POST /apis/events.k8s.io/v1/namespaces/NS/events -> 201 with the stored Event."""
        ev = self._events_decode(body)
        if ev.get("apiVersion") not in (None, EVENTS_V1.api_version) or \
                ev.get("kind") not in (None, "Event"):
            raise bad_request("the API version in the data (%s) does not match the expected API "
                              "version (%s)" % (ev.get("apiVersion"), EVENTS_V1.api_version))
        ev = _typed(ev, "Event", EVENTS_V1.api_version)
        md = ev.setdefault("metadata", {})
        if md.get("namespace") and md["namespace"] != ns:
            raise bad_request("the namespace of the provided object does not match the "
                              "namespace sent on the request")
        md["namespace"] = ns
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + uuid.uuid4().hex[:5]
        errs = validate_create(ev, ns)
        if errs:
            raise invalid(EVENTS_V1, md.get("name") or "", errs)
        self._admit(h, EVENTS_V1, "CREATE", ns, md["name"], ev, None)
        for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
            md.pop(k, None)
        with self._lock:
            if "%s/%s" % (ns, md["name"]) in self._objects["events"]:
                raise ApiError(409, "AlreadyExists", 'events.events.k8s.io "%s" already exists'
                               % md["name"], details={"name": md["name"], "group": GROUP,
                                                      "kind": "events"})
            return self._put("events", ev, create=True, kind=("Event", EVENTS_V1.api_version))

    def _event_patch(self, h, ns, name, body):
        """PATCH /apis/events.k8s.io/v1/namespaces/NS/events/NAME -> 200 with the Event."""
        with self._lock:
            old = self._objects["events"].get("%s/%s" % (ns, name))
            old = _json_copy(old) if old is not None else None
        if old is None:
            raise not_found(EVENTS_V1, name)
        new = apply_patch(h.headers.get("Content-Type"), old, body)
        new = _typed(new, "Event", EVENTS_V1.api_version)
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(EVENTS_V1, name, "the object has been modified; please apply your "
                           "changes to the latest version and try again")
        errs = validate_update(new, old, ns)
        if errs:
            raise invalid(EVENTS_V1, name, errs)
        self._admit(h, EVENTS_V1, "UPDATE", ns, name, new, old)
        with self._lock:
            cur = self._objects["events"].get("%s/%s" % (ns, name))
            if cur is None:
                raise not_found(EVENTS_V1, name)
            if cur["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise conflict(EVENTS_V1, name, "the object has been modified; please apply "
                               "your changes to the latest version and try again")
            return self._put("events", new, create=False, kind=("Event", EVENTS_V1.api_version))

    # --- test-side helpers ---

    def events(self, namespace=None, regarding_uid=None, regarding_name=None, reason=None):
        """The stored events (events.k8s.io/v1 dicts, oldest first), filtered."""
        with self._lock:
            objs = [_json_copy(o) for o in self._objects["events"].values()]
        out = []
        for ev in objs:
            md, reg = ev.get("metadata") or {}, ev.get("regarding") or {}
            if namespace is not None and md.get("namespace") != namespace:
                continue
            if regarding_uid is not None and reg.get("uid") != regarding_uid:
                continue
            if regarding_name is not None and reg.get("name") != regarding_name:
                continue
            if reason is not None and ev.get("reason") != reason:
                continue
            out.append(ev)
        out.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
        return out

    def add_event(self, event):
        """Stores an events.k8s.io/v1 Event as given (no validation, no admission)."""
        ev = _typed(_json_copy(event), "Event", EVENTS_V1.api_version)
        ev.setdefault("metadata", {}).setdefault("namespace", "default")
        ev.setdefault("eventTime", _now_rfc3339())
        return self._put("events", ev, create=True, kind=("Event", EVENTS_V1.api_version))

    def delete_events(self, namespace=None):
        """Removes every event (of the namespace); returns how many."""
        with self._lock:
            keys = [k for k, o in self._objects["events"].items()
                    if namespace is None or o["metadata"].get("namespace") == namespace]
        for k in keys:
            self._delete("events", k)
        return len(keys)
