# SPDX-License-Identifier: MIT
"""Writes to pods' status subresource: GET and PATCH /api/v1/namespaces/NS/pods/NAME/status,
as the real server does them (strategic merge on status.conditions by type; metadata.uid and
metadata.resourceVersion of the patch are preconditions; only status changes)."""

import copy
import json
import re

from kube_common import (_json_copy, ApiError, RESOURCES, bad_request, conflict, invalid,
                         not_found)
from kube_patch import apply_patch

POD_SYSTEM_CONDITIONS = ("PodScheduled", "Ready", "Initialized", "ContainersReady",
                         "PodReadyToStartContainers", "DisruptionTarget")
_QNAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MODIFIED = ("the object has been modified; please apply your changes to the latest version "
            "and try again")


def _condition_errors(status):
    """validatePodConditions (a non-system condition type must be a qualified name), and the
    status value (stricter than the real server, which takes any string there)."""
    errs = []
    for i, c in enumerate((status or {}).get("conditions") or []):
        if not isinstance(c, dict):
            continue
        ctype = c.get("type") or ""
        if ctype not in POD_SYSTEM_CONDITIONS:
            prefix, slash, name = ctype.rpartition("/")
            if not name or len(name) > 63 or not _QNAME_PART.match(name) or \
                    (slash and (not prefix or not _SUBDOMAIN.match(prefix))):
                errs.append(("status.conditions[%d].Type" % i, "FieldValueInvalid",
                             'Invalid value: "%s": name part must consist of alphanumeric '
                             "characters, '-', '_' or '.', and must start and end with an "
                             "alphanumeric character" % ctype))
        if c.get("status") not in ("True", "False", "Unknown"):
            errs.append(("status.conditions[%d].status" % i, "FieldValueNotSupported",
                         'Unsupported value: "%s": supported values: "False", "True", "Unknown"'
                         % (c.get("status") or "")))
    return errs


class _PodStatusMixin:
    """The pods/status subresource, mixed into FakeApiserver."""

    def _pod_status_patch(self, h, ns, name, body):
        pods = RESOURCES["pods"]
        key = "%s/%s" % (ns, name)
        with self._lock:
            old = self._objects["pods"].get(key)
            old = _json_copy(old) if old is not None else None
        if old is None:
            raise not_found(pods, name)
        try:
            patch = json.loads(body or b"null")
        except ValueError as err:
            raise bad_request("error decoding patch: %s" % err)
        patched = apply_patch(h.headers.get("Content-Type"), old, body)
        md = patched.get("metadata") or {}
        want_uid = (patch.get("metadata") or {}).get("uid") if isinstance(patch, dict) else None
        want_uid = want_uid or (md.get("uid") if md.get("uid") != old["metadata"]["uid"] else None)
        if want_uid and want_uid != old["metadata"]["uid"]:
            raise conflict(pods, name, "StorageError: invalid object, Code: 4, Key: "
                           "/registry/pods/%s/%s, ResourceVersion: 0, AdditionalErrorMsg: "
                           "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                           % (ns, name, want_uid, old["metadata"]["uid"]))
        rv = md.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(pods, name, MODIFIED)
        # The status strategy keeps spec and metadata of the stored pod: only status is written.
        new = copy.deepcopy(old)
        new["status"] = patched.get("status") or {}
        errs = _condition_errors(new["status"])
        if errs:
            raise invalid(pods, name, errs)
        self._admit(h, pods, "UPDATE", ns, name, new, old, sub="status")
        with self._lock:
            cur = self._objects["pods"].get(key)
            if cur is None:
                raise not_found(pods, name)
            if cur["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]:
                if rv:
                    raise conflict(pods, name, MODIFIED)
                # no precondition: the real server retries against the newer object
                return self._pod_status_patch(h, ns, name, body)
            if new == cur:
                return _json_copy(cur)  # a no-op write: no new resourceVersion, no event
            return self._put("pods", new, create=False)

    def _serve_pod_status(self, h, verb, ns, name, body):
        if verb == "get":
            return 200, self._get(RESOURCES["pods"], ns, name)
        if verb == "patch":
            return 200, self._pod_status_patch(h, ns, name, body)
        raise ApiError(405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource",
                       details={})

    def pod(self, namespace, name):
        """The stored pod (a copy) or None; the same as get_pod()."""
        return self.get_pod(namespace, name)

    def pod_condition(self, namespace, name, ctype="pinion.io/ready"):
        """The pod's status condition of that type (a dict), or None."""
        pod = self.get_pod(namespace, name) or {}
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == ctype:
                return c
        return None
