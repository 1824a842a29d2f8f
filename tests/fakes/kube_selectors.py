# SPDX-License-Identifier: MIT
"""Field and label selectors as the real apiserver parses and applies them."""

import re

from kube_common import ApiError

# ---------------------------------------------------------------------------------------------
# Selectors


def _split_unescaped(s, sep):
    parts, cur, i = [], [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur.append(s[i:i + 2])
            i += 2
            continue
        if c == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(s):
    return re.sub(r"\\(.)", r"\1", s)


def _field_value(obj, path):
    cur = obj
    for p in path:
        cur = cur.get(p) if isinstance(cur, dict) else None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if cur is None:
        return "false" if path[-1] in ("hostNetwork", "unschedulable") else ""
    return str(cur)


def parse_field_selector(text, resource):
    """-> list of (path, op, value); raises ApiError 400 like the real server."""
    terms = []
    if not text:
        return terms
    for part in _split_unescaped(text, ","):
        if part == "":
            continue
        for op in ("!=", "==", "="):
            idx = -1
            i = 0
            while i < len(part):  # the first unescaped occurrence of op
                if part[i] == "\\":
                    i += 2
                    continue
                if part.startswith(op, i):
                    idx = i
                    break
                i += 1
            if idx >= 0:
                break
        else:
            raise ApiError(400, "BadRequest", "invalid selector: '%s'; can't understand '%s'"
                           % (text, part))
        label, value = part[:idx], _unescape(part[idx + len(op):])
        if label not in resource.fields:
            raise ApiError(400, "BadRequest", "field label not supported: %s" % label)
        terms.append((resource.fields[label], "!=" if op == "!=" else "=", value))
    return terms


_LABEL_TERM = re.compile(
    r"^\s*(?:(?P<notexists>!\s*(?P<nkey>[A-Za-z0-9./_-]+))"
    r"|(?P<key>[A-Za-z0-9./_-]+)\s*(?:(?P<op>==|!=|=)\s*(?P<value>[A-Za-z0-9._-]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?)\s*$")


def parse_label_selector(text):
    """-> list of (key, op, values) with op in = != in notin exists !exists."""
    terms = []
    if not text or not text.strip():
        return terms
    parts, depth, cur = [], 0, []
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    for part in parts:
        m = _LABEL_TERM.match(part)
        if not m:
            raise ApiError(400, "BadRequest", "unable to parse requirement: found '%s', "
                           "expected: identifier" % part.strip())
        if m.group("notexists"):
            terms.append((m.group("nkey"), "!exists", None))
        elif m.group("op"):
            op = "!=" if m.group("op") == "!=" else "="
            terms.append((m.group("key"), op, [m.group("value")]))
        elif m.group("setop"):
            vals = [v.strip() for v in m.group("values").split(",") if v.strip()]
            terms.append((m.group("key"), m.group("setop"), vals))
        else:
            terms.append((m.group("key"), "exists", None))
    return terms


def _labels_match(terms, obj):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, vals in terms:
        has = key in labels
        if op == "exists" and not has:
            return False
        if op == "!exists" and has:
            return False
        if op in ("=", "in") and (not has or labels[key] not in vals):
            return False
        if op in ("!=", "notin") and has and labels[key] in vals:
            return False
    return True


class _Matcher:
    """Namespace + name (from the path) + field selector + label selector."""

    def __init__(self, resource, namespace=None, name=None, field_selector="",
                 label_selector=""):
        self.namespace, self.name = namespace, name
        self.fields = parse_field_selector(field_selector, resource)
        self.labels = parse_label_selector(label_selector)
        self.empty = not self.fields and not self.labels

    def __call__(self, obj):
        md = obj.get("metadata") or {}
        if self.namespace is not None and md.get("namespace") != self.namespace:
            return False
        if self.name is not None and md.get("name") != self.name:
            return False
        for path, op, value in self.fields:
            v = _field_value(obj, path)
            if (v == value) != (op == "="):
                return False
        return _labels_match(self.labels, obj)
