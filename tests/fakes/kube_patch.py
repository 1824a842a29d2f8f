# SPDX-License-Identifier: MIT
"""The three PATCH formats the apiserver takes for JSON: RFC 7386 merge patch, RFC 6902 JSON
patch, and Kubernetes' strategic merge patch (lists with a patchMergeKey merge by that key;
`$patch: delete|replace` and `$setElementOrder/` directives; other lists are replaced)."""

import copy
import json

from kube_common import ApiError

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

# The patchMergeKey of the list fields the emulated objects have, by path from the object root
# (the Go structs' patchStrategy:"merge" tags). Lists not named here are replaced whole.
MERGE_KEYS = {
    ("status", "conditions"): "type",
    ("status", "podIPs"): "ip",
    ("status", "hostIPs"): "ip",
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "readinessGates"): None,  # no merge key: replaced
    ("metadata", "ownerReferences"): "uid",
    ("metadata", "finalizers"): "",     # a merged list of scalars
}


def _bad(msg):
    return ApiError(400, "BadRequest", msg)


def apply_patch(ctype, obj, body):
    """The object after the patch body (bytes) of content type ctype; raises ApiError like the
    real server (415 for a type it does not take, 400/422 for a bad patch)."""
    ctype = (ctype or "").split(";")[0].strip().lower()
    try:
        patch = json.loads(body or b"null")
    except ValueError as err:
        raise _bad("error decoding patch: %s" % err)
    if ctype == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise _bad("error decoding patch: json: cannot unmarshal into Go value of type "
                       "map[string]interface {}")
        return merge_patch(copy.deepcopy(obj), patch)
    if ctype == STRATEGIC:
        if not isinstance(patch, dict):
            raise _bad("error decoding patch: json: cannot unmarshal into Go value of type "
                       "map[string]interface {}")
        return strategic_merge(copy.deepcopy(obj), patch, ())
    if ctype == JSON_PATCH:
        if not isinstance(patch, list):
            raise _bad("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        return json_patch(copy.deepcopy(obj), patch)
    raise ApiError(415, "UnsupportedMediaType", 'the body of the request was in an unknown '
                   'format - accepted media types include: application/json-patch+json, '
                   'application/merge-patch+json, application/apply-patch+yaml, '
                   'application/strategic-merge-patch+json')


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge_patch(target.get(k), v)
    return target


def strategic_merge(target, patch, path):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    orders = {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/"):
            orders[k[len("$setElementOrder/"):]] = v
            continue
        if k.startswith("$") or k.startswith("$deleteFromPrimitiveList/"):
            continue
        sub = path + (k,)
        if v is None:
            target.pop(k, None)
        elif isinstance(v, list) and sub in MERGE_KEYS and MERGE_KEYS[sub] is not None:
            target[k] = _merge_list(target.get(k) or [], v, MERGE_KEYS[sub], sub)
        elif isinstance(v, dict):
            merged = strategic_merge(target.get(k), v, sub)
            if merged is None:
                target.pop(k, None)
            else:
                target[k] = merged
        else:
            target[k] = copy.deepcopy(v)
    for k, order in orders.items():
        key = MERGE_KEYS.get(path + (k,))
        if key and isinstance(target.get(k), list) and isinstance(order, list):
            rank = {o.get(key): i for i, o in enumerate(order) if isinstance(o, dict)}
            target[k].sort(key=lambda e: rank.get(e.get(key) if isinstance(e, dict) else None,
                                                  len(rank)))
    return target


def _merge_list(current, patch, key, path):
    if key == "":  # scalars: union, in order
        out = list(current)
        out.extend(v for v in patch if v not in out)
        return out
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return [copy.deepcopy(e) for e in patch if not (isinstance(e, dict) and "$patch" in e)]
    out = [copy.deepcopy(e) for e in current]
    for e in patch:
        if not isinstance(e, dict) or key not in e:
            raise _bad("map: %s does not contain declared merge key: %s"
                       % (json.dumps(e), key))
        idx = next((i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == e[key]),
                   None)
        if e.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append({k: v for k, v in copy.deepcopy(e).items() if v is not None})
        else:
            out[idx] = strategic_merge(out[idx], e, path)
    return out


def _pointer(doc, ptr):
    if ptr == "":
        return None, None
    if not ptr.startswith("/"):
        raise _bad("the server rejected our request due to an error in our request")
    parts = [p.replace("~1", "/").replace("~0", "~") for p in ptr[1:].split("/")]
    parent = doc
    for p in parts[:-1]:
        if isinstance(parent, list):
            parent = parent[int(p)]
        else:
            parent = parent[p]
    return parent, parts[-1]


def json_patch(doc, ops):
    for op in ops:
        try:
            kind, path = op["op"], op["path"]
            parent, last = _pointer(doc, path)
            if kind in ("add", "replace"):
                value = copy.deepcopy(op["value"])
                if isinstance(parent, list):
                    i = len(parent) if last == "-" else int(last)
                    if kind == "add":
                        parent.insert(i, value)
                    else:
                        parent[i] = value
                else:
                    if kind == "replace" and last not in parent:
                        raise KeyError(last)
                    parent[last] = value
            elif kind == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif kind == "test":
                cur = parent[int(last) if isinstance(parent, list) else last]
                if cur != op["value"]:
                    raise ApiError(422, "Invalid", "the server rejected our request due to an "
                                   "error in our request")
            else:
                raise _bad("Unexpected kind: %s" % kind)
        except (KeyError, IndexError, ValueError, TypeError):
            raise ApiError(422, "Invalid", "the server rejected our request due to an error "
                           "in our request")
    return doc
