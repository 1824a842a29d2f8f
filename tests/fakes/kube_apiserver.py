#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A Kubernetes API server emulator for pinion's tests (pods and nodes, core/v1, JSON only).

It follows the real kube-apiserver (with its watch cache in front of etcd) where a client can
tell the difference, and it lets a test break it on purpose. Python 3 standard library only
(plus the `openssl` command line tool for --tls). See tests/fakes/README.md.

    from kube_apiserver import FakeApiserver, make_pod
    with FakeApiserver(tls=True, token="T") as fake:      # start() / stop()
        fake.add_pod(make_pod("web-1", node="n1"))
        fake.set_node("n1", pod_cidr="10.244.1.0/24")
        ... fake.url, fake.ca_file, fake.control_url ...
        fake.inject("429", count=2, verbs=["list"], retry_after=3)
        fake.outage("refuse"); ...; fake.recover()
        fake.requests(verb="watch")

    python3 tests/fakes/kube_apiserver.py --port 0 --tls --token-file F --print-url
        first stdout line:  URL CAFILE      (CAFILE is "-" without --tls)
        second stdout line: CONTROL http://127.0.0.1:PORT   (the /_fake/ API, always plain HTTP)
        serves until SIGTERM/SIGINT.

What it emulates (the facts come from the Kubernetes API concepts documentation and the
apiserver's behaviour):

  GET /api/v1/pods, /api/v1/namespaces/NS/pods[/NAME], /api/v1/nodes[/NAME]
      (also the deprecated /api/v1/watch/... prefix). fieldSelector (pods: metadata.name,
      metadata.namespace, spec.nodeName, spec.restartPolicy, spec.schedulerName,
      spec.serviceAccountName, spec.hostNetwork, status.phase, status.podIP,
      status.nominatedNodeName; nodes: metadata.name, spec.unschedulable; anything else: 400
      "field label not supported: X"), labelSelector (=, ==, !=, in, notin, exists, !exists).
  list: resourceVersion "" (most recent), "0" (any), N (not older than N: the latest state;
      with resourceVersionMatch=Exact, or with limit and no resourceVersionMatch (the legacy
      rule), exactly the state at N, 410 Expired if N is compacted); N in the future waits up to
      3 s, then 504 "Too large resource version". limit + continue: consistent pages at the
      first page's resourceVersion; the continue token is opaque (base64 JSON, like the real
      one) and expires with 410 "The provided continue parameter is too old ..." after
      compaction (with a new token to continue inconsistently, like the real server).
      Items in a list carry no kind/apiVersion (the real server strips them); a single GET and
      watch events carry them.
  watch (watch=1|true|True|t...): 200 with Transfer-Encoding: chunked, one JSON event + "\n"
      per chunk (watch_chunk_size=N re-chunks the byte stream into N-byte chunks instead, so
      events span chunks and share them); resourceVersion ""/"0" first sends synthetic ADDED
      events for the current state; N replays the history after N, then streams live events.
      Selector transitions are translated like the watch cache does (an object that stops
      matching is DELETED, one that starts matching is ADDED). allowWatchBookmarks=true gives
      BOOKMARK events every bookmark_interval seconds (default 1 s) and one 2 s before the
      timeout; a compacted N gives one ERROR event (Status 410 Expired "too old resource
      version: N (C)") and the end of the stream; timeoutSeconds ends the stream cleanly.
  Resource versions are one global etcd-like counter (strings of integers, starting at
  initial_rv); a DELETED event's object carries the deletion's resourceVersion.
  Auth: a bearer token (a string, or a file re-read on every request) and, with TLS, client
  certificates signed by the fake's CA (client_cert()); otherwise 401 Status "Unauthorized".
  TLS: a throwaway CA and a server certificate for 127.0.0.1, ::1, localhost and
  kubernetes.default.svc, made with openssl at start; only HTTP/1.1 is offered by ALPN.
  Errors are Status objects: {"kind":"Status","apiVersion":"v1","metadata":{},
  "status":"Failure","message":...,"reason":...,"details":...,"code":N}.

Fault injection (inject(); the next `count` requests that match `verbs` and the `path` prefix,
or every one with count=None): "429" (Retry-After, default 1 s), "500", "503" (optional
Retry-After), any other HTTP code, "close" (read the request, close without answering),
"drop" (send headers and K=after_events events, or half a list body, then close), "malformed"
(a line of bad JSON after K events; a list gets a bad body), "truncate" (a chunk header
announcing more bytes than are sent, then close), "delay" (wait `delay` seconds before the
headers; `delay` also works with every other fault). outage("refuse") closes the listening
socket (connection refused) and recover() binds the same port again; outage("hang") accepts,
reads requests and never answers until recover(). Both drop the open connections unless
drop_existing=False.

Accounting: every API request is logged (time, mono, verb list|watch|get|..., method, path,
query, params, status, fault, events for watches, duration, user_agent); requests(), count(),
reset_counts(), GET /_fake/requests.
"""

import argparse
import base64
import bisect
import copy
import ipaddress
import json
import os
import random
import re
import shutil
import signal
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeApiserver", "ApiError", "make_pod", "huge_pod", "make_node", "status_object"]

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
    def __init__(self, name, kind, namespaced, fields):
        self.name, self.kind, self.namespaced, self.fields = name, kind, namespaced, fields
        self.list_kind = kind + "List"


RESOURCES = {
    "pods": _Resource("pods", "Pod", True, POD_FIELDS),
    "nodes": _Resource("nodes", "Node", False, NODE_FIELDS),
}

FAULT_KINDS = ("close", "drop", "malformed", "truncate", "delay")
VERBS = ("list", "watch", "get")

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


def _typed(obj, kind):
    """The object with kind and apiVersion first, as the real server orders them."""
    out = {"kind": kind, "apiVersion": "v1"}
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


class ApiError(Exception):
    """An error answered as a Status object."""

    def __init__(self, code, reason, message, details=None, headers=None, meta=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.headers, self.meta = details, dict(headers or {}), meta

    def status(self):
        return status_object(self.code, self.reason, self.message, self.details, self.meta)


def _too_large_rv(n, cur):
    return ApiError(504, "Timeout", "Too large resource version: %d, current: %d" % (n, cur),
                    details={"causes": [{"reason": "ResourceVersionTooLarge",
                                         "message": "Too large resource version"}],
                             "retryAfterSeconds": 1},
                    headers={"Retry-After": "1"})


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


# ---------------------------------------------------------------------------------------------
# Objects


def make_pod(name, node=None, namespace="default", phase="Running", ready=True, ip="10.1.2.3",
             labels=None, annotations=None, containers=None):
    """A v1 Pod as a dict (what add_pod() takes)."""
    md = {"name": name, "namespace": namespace}
    if labels:
        md["labels"] = dict(labels)
    if annotations:
        md["annotations"] = dict(annotations)
    spec = {"containers": containers or [{"name": "main", "image": "example/app:1",
                                          "ports": [{"name": "http", "containerPort": 8080,
                                                     "protocol": "TCP"}]}],
            "restartPolicy": "Always", "serviceAccountName": "default",
            "schedulerName": "default-scheduler"}
    if node:
        spec["nodeName"] = node
    status = {"phase": phase}
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": status}


def huge_pod(name, node=None, size=5 * 1024 * 1024, **kw):
    """A pod whose JSON is a little over `size` bytes (one big annotation)."""
    pod = make_pod(name, node=node, **kw)
    pod["metadata"].setdefault("annotations", {})["pinion.test/padding"] = "x" * size
    return pod


def make_node(name, pod_cidr=None, labels=None):
    md = {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {}))}
    spec = {}
    if pod_cidr:
        spec["podCIDR"] = pod_cidr
        spec["podCIDRs"] = [pod_cidr]
    return {"kind": "Node", "apiVersion": "v1", "metadata": md, "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "Hostname", "address": name}]}}


def _key(resource, obj):
    md = obj.get("metadata") or {}
    if resource.namespaced:
        return "%s/%s" % (md.get("namespace") or "default", md["name"])
    return md["name"]


class _Event:
    __slots__ = ("rv", "resource", "type", "key", "obj", "prev", "_json")

    def __init__(self, rv, resource, etype, key, obj, prev):
        self.rv, self.resource, self.type, self.key = rv, resource, etype, key
        self.obj, self.prev, self._json = obj, prev, None


def _event_line(etype, obj):
    return b'{"type":"' + etype.encode() + b'","object":' + _dumps(obj) + b"}\n"


# ---------------------------------------------------------------------------------------------
# Faults


class Fault:
    """One injected fault. count=None: every matching request until cleared."""

    def __init__(self, fid, kind, count=1, verbs=None, path=None, retry_after=None,
                 after_events=0, delay=0.0, message=None, line=None, rst=False):
        kind = str(kind)
        if not (kind in FAULT_KINDS or (kind.isdigit() and 100 <= int(kind) <= 599)):
            raise ValueError("unknown fault %r (an HTTP code or one of %s)"
                             % (kind, ", ".join(FAULT_KINDS)))
        if verbs is not None:
            if isinstance(verbs, str):
                verbs = [v for v in re.split(r"[,|\s]+", verbs) if v]
            for v in verbs:
                if v not in VERBS:
                    raise ValueError("unknown verb %r (one of %s)" % (v, ", ".join(VERBS)))
        self.id, self.kind, self.count = fid, kind, count
        self.verbs = set(verbs) if verbs else None
        self.path = path
        if retry_after is None and kind == "429":
            retry_after = 1
        self.retry_after = retry_after
        self.after_events = int(after_events or 0)
        self.delay = float(delay or 0)
        self.message = message
        self.line = line
        self.rst = bool(rst)
        self.hits = 0

    def matches(self, verb, path):
        if self.verbs is not None and verb not in self.verbs:
            return False
        return self.path is None or path.startswith(self.path)

    def to_json(self):
        return {"id": self.id, "fault": self.kind, "count": self.count,
                "verbs": sorted(self.verbs) if self.verbs else None, "path": self.path,
                "retry_after": self.retry_after, "after_events": self.after_events,
                "delay": self.delay, "hits": self.hits}


# ---------------------------------------------------------------------------------------------
# The HTTP side


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, addr, handler, fake, control):
        self.fake, self.control = fake, control
        self.ssl_context = None
        super().__init__(addr, handler, bind_and_activate=False)

    def server_bind(self):
        # HTTPServer.server_bind would call getfqdn(), which can wait on DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request, client_address):
        if self.ssl_context is not None:
            try:
                request.settimeout(10)
                request = self.ssl_context.wrap_socket(request, server_side=True)
            except (OSError, ValueError):
                with self.fake._lock:
                    self.fake._stats["tls_handshake_failures"] += 1
                try:
                    request.close()
                except OSError:
                    pass
                return
        self.RequestHandlerClass(request, client_address, self)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (OSError, ValueError)) and not self.fake.verbose:
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120
    disable_nagle_algorithm = True

    # --- plumbing ---

    def setup(self):
        super().setup()
        self.fake = self.server.fake
        self.killed = False
        self.entry = None
        self.fake_control = False
        self.watching = False
        self.end_watch = None
        self.fake._register(self)

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass
        self.fake._unregister(self)

    def log_message(self, fmt, *args):
        if self.fake.verbose:
            sys.stderr.write("fake-apiserver: %s - %s\n" % (self.address_string(), fmt % args))

    def send_response(self, code, message=None):
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())
        if self.entry is not None:
            self.entry["status"] = code

    def abort(self, rst=False):
        """Close the connection now, without a proper end of response."""
        self.close_connection = True
        conn = self.connection
        try:
            if rst:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                try:
                    self.rfile.close()
                except (OSError, ValueError):
                    pass
                conn.close()
            else:
                socket.socket.shutdown(conn, socket.SHUT_RDWR)
        except (OSError, ValueError):
            pass

    def _headers(self, code, ctype="application/json", length=None, extra=None, chunked=False):
        self.send_response(code)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", ctype)
        for k, v in (extra or {}).items():
            self.send_header(k, str(v))
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length or 0))
        self.end_headers()

    def send_body(self, code, body, ctype="application/json", extra=None, fault=None):
        if fault is not None and fault.kind in ("drop", "truncate"):
            self._headers(code, ctype, len(body), extra)
            self.wfile.write(body[:len(body) // 2])
            self.abort(fault.rst)
            return
        if fault is not None and fault.kind == "malformed":
            body = fault.line.encode() if fault.line else body[:len(body) // 2] + b"}}garbage{"
        self._headers(code, ctype, len(body), extra)
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, code, obj, extra=None, fault=None):
        self.send_body(code, _dumps(obj), extra=extra, fault=fault)

    def send_error_status(self, err, fault=None):
        self.send_json(err.code, err.status(), extra=err.headers, fault=fault)

    def write_chunks(self, data):
        size = self.fake.watch_chunk_size
        parts = [data] if not size else [data[i:i + size] for i in range(0, len(data), size)]
        self.wfile.write(b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in parts if p))

    # --- dispatch ---

    def do_GET(self):
        self._dispatch()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _dispatch(self):
        url = urlsplit(self.path)
        path, query = url.path, url.query
        params = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        length = self.headers.get("Content-Length")
        body = b""
        if length:
            try:
                body = self.rfile.read(int(length))
            except ValueError:
                self.send_error(400)
                return
        if path == "/_fake" or path.startswith("/_fake/"):
            self.fake_control = True  # not dropped by the outage it may be starting
            self.fake._control(self, self.command, path, params, body)
            self.fake_control = False
            return
        if self.server.control:
            self.send_body(404, b"404 page not found\n", ctype="text/plain; charset=utf-8")
            return
        self.request_body = body  # the CSR block reads POST bodies
        self.fake._serve_api(self, path, query, params)




# =============================================================================================
# certificates.k8s.io/v1 CertificateSigningRequests (for the identity module's kubernetes
# signer). Create (POST), get, list; the test approves or denies with approve_csr()/deny_csr(),
# and an approved request for a known signer gets its certificate issued by the fake's CA
# (tls=True), valid for spec.expirationSeconds (default 1h), as kube-controller-manager's
# signer does. Shapes are checked against the official client in test_fake_apiserver.py.
# =============================================================================================

CSR_PREFIX = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CSR_SIGNERS = ("kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kube-apiserver-client",
               "kubernetes.io/kubelet-serving")


class _CsrMixin:
    """The CSR store and its routes, mixed into FakeApiserver."""

    def _csr_store(self):
        with self._lock:
            if not hasattr(self, "_csrs"):
                self._csrs = {}
                self.csr_creates = 0
            return self._csrs

    def _serve_csr(self, h, path, params):
        """Handles every request under CSR_PREFIX; returns True if it did."""
        if not (path == CSR_PREFIX or path.startswith(CSR_PREFIX + "/")):
            return False
        store = self._csr_store()
        rest = path[len(CSR_PREFIX):].strip("/")
        try:
            if h.command == "POST" and not rest:
                h.send_json(201, self._csr_create(store, getattr(h, "request_body", b"")))
            elif h.command == "GET" and not rest:
                with self._lock:
                    items = [_json_copy(o) for _, o in sorted(store.items())]
                h.send_json(200, {"kind": "CertificateSigningRequestList",
                                  "apiVersion": "certificates.k8s.io/v1",
                                  "metadata": {"resourceVersion": str(self._rv)}, "items": items})
            elif h.command == "GET" and "/" not in rest:
                with self._lock:
                    obj = store.get(rest)
                    obj = _json_copy(obj) if obj else None
                if obj is None:
                    raise ApiError(404, "NotFound",
                                   'certificatesigningrequests.certificates.k8s.io "%s" not found' % rest,
                                   details={"name": rest, "group": "certificates.k8s.io",
                                            "kind": "certificatesigningrequests"})
                h.send_json(200, obj)
            else:
                raise ApiError(405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource", details={})
        except ApiError as err:
            h.send_error_status(err)
        return True

    def _csr_create(self, store, body):
        try:
            obj = json.loads(body or b"null")
        except ValueError as e:
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format: %s" % e)
        # kind and apiVersion may be left out (the URL says them), as the real apiserver allows.
        if not isinstance(obj, dict) or obj.setdefault("kind", "CertificateSigningRequest") != "CertificateSigningRequest" \
                or obj.setdefault("apiVersion", "certificates.k8s.io/v1") != "certificates.k8s.io/v1":
            raise ApiError(400, "BadRequest", "expected a certificates.k8s.io/v1 CertificateSigningRequest")
        meta = obj.setdefault("metadata", {})
        spec = obj.get("spec") or {}
        name = meta.get("name") or (meta.get("generateName", "") + uuid.uuid4().hex[:5]
                                    if meta.get("generateName") else None)
        problems = []
        if not name:
            problems.append("metadata.name: Required value: name or generateName is required")
        if spec.get("signerName") not in CSR_SIGNERS:
            problems.append("spec.signerName: Invalid value: %r" % spec.get("signerName"))
        try:
            csr_pem = base64.b64decode(spec.get("request", ""), validate=True)
            if b"BEGIN CERTIFICATE REQUEST" not in csr_pem:
                raise ValueError
        except ValueError:
            problems.append("spec.request: Invalid value: not a PEM CERTIFICATE REQUEST")
        if not isinstance(spec.get("usages"), list) or not spec["usages"]:
            problems.append("spec.usages: Required value")
        if problems:
            raise ApiError(422, "Invalid", 'CertificateSigningRequest.certificates.k8s.io "%s" is invalid: %s'
                           % (name, "; ".join(problems)),
                           details={"name": name, "group": "certificates.k8s.io",
                                    "kind": "CertificateSigningRequest"})
        with self._lock:
            if name in store:
                raise ApiError(409, "AlreadyExists",
                               'certificatesigningrequests.certificates.k8s.io "%s" already exists' % name,
                               details={"name": name, "group": "certificates.k8s.io",
                                        "kind": "certificatesigningrequests"})
            self._rv += 1
            meta.update({"name": name, "uid": str(uuid.uuid4()), "resourceVersion": str(self._rv),
                         "creationTimestamp": _now_rfc3339()})
            meta.pop("generateName", None)
            obj["status"] = {}
            obj["spec"].setdefault("username", "system:bootstrap:fake")
            store[name] = obj
            self.csr_creates += 1
            return _json_copy(obj)

    def csrs(self):
        """Every CSR object (copies), by name."""
        store = self._csr_store()
        with self._lock:
            return {k: _json_copy(v) for k, v in store.items()}

    def _csr_condition(self, name, ctype, reason, message):
        store = self._csr_store()
        with self._lock:
            obj = store[name]
            conds = obj["status"].setdefault("conditions", [])
            now = _now_rfc3339()
            conds.append({"type": ctype, "status": "True", "reason": reason, "message": message,
                          "lastUpdateTime": now, "lastTransitionTime": now})
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            return obj

    def deny_csr(self, name, message="denied by the test"):
        self._csr_condition(name, "Denied", "TestDenied", message)

    def approve_csr(self, name, issue=True):
        """Approves the CSR and (issue=True) puts the certificate signed by the fake's CA into
        status.certificate, as the signing controller does."""
        obj = self._csr_condition(name, "Approved", "TestApproved", "approved by the test")
        if issue:
            pem = self._csr_sign(base64.b64decode(obj["spec"]["request"]),
                                 int(obj["spec"].get("expirationSeconds") or 3600))
            with self._lock:
                obj["status"]["certificate"] = base64.b64encode(pem).decode()
                self._rv += 1
                obj["metadata"]["resourceVersion"] = str(self._rv)

    def _csr_sign(self, csr_pem, seconds):
        import datetime
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID
        if not self.ca_file:
            raise RuntimeError("issuing CSR certificates needs tls=True (the fake's CA signs them)")
        with open(self.ca_file, "rb") as f:
            ca = x509.load_pem_x509_certificate(f.read())
        with open(self.ca_key, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), None)
        csr = x509.load_pem_x509_csr(csr_pem)
        now = datetime.datetime.utcnow().replace(microsecond=0)
        cert = (x509.CertificateBuilder().subject_name(csr.subject).issuer_name(ca.subject)
                .public_key(csr.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(now + datetime.timedelta(seconds=seconds))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM)

# ============================ end of the CertificateSigningRequest block ======================

# ---------------------------------------------------------------------------------------------
# The emulator


class FakeApiserver(_CsrMixin):
    """The emulated apiserver. All methods are thread-safe.

    tls            serve HTTPS with a throwaway CA (ca_file) made by openssl at start
    token          the bearer token clients must send (None: no token auth)
    token_file     a file holding the token, re-read on every request (wins over token)
    client_certs   with TLS, also accept client certificates signed by the fake's CA
    port           0 for an ephemeral port; control_port the same for the /_fake/ listener
                   (None: ephemeral, False: none)
    bookmark_interval   seconds between BOOKMARK events (None: only the pre-timeout one)
    initial_rv     the first resourceVersion; everything older counts as compacted
    rv0_ignores_limit   resourceVersion=0 lists ignore limit (the watch cache's behaviour)
    watch_chunk_size    None: one chunk per event; N: the stream cut into N-byte chunks
    history_limit  keep at most this many events (older ones are compacted), None: all
    default_watch_timeout  seconds a watch without timeoutSeconds lasts
    """

    def __init__(self, tls=False, token=None, token_file=None, client_certs=True, host="127.0.0.1",
                 port=0, control_port=None, bookmark_interval=1.0, initial_rv=1000,
                 rv0_ignores_limit=False, watch_chunk_size=None, history_limit=None,
                 default_watch_timeout=1800, workdir=None, verbose=False):
        try:
            if not ipaddress.ip_address(host).is_loopback:
                raise ValueError
        except ValueError:
            raise ValueError("the fake apiserver listens on loopback addresses only, not %r"
                             % host)
        self.tls, self.host, self.verbose = tls, host, verbose
        self._token, self.token_file, self.client_certs = token, token_file, client_certs
        self._want_port, self._want_control_port = port, control_port
        self.bookmark_interval = bookmark_interval
        self.rv0_ignores_limit = rv0_ignores_limit
        self.watch_chunk_size = watch_chunk_size
        self.history_limit = history_limit
        self.default_watch_timeout = default_watch_timeout
        self._workdir_arg = workdir
        self.workdir = None
        self._own_workdir = False
        self.ca_file = self.ca_key = self.cert_file = self.key_file = None

        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._rv = int(initial_rv)
        self._compacted = int(initial_rv)
        self._objects = {name: {} for name in RESOURCES}
        self._history = []
        self._history_rvs = []
        self._faults = []
        self._fault_seq = 0
        self._log = []
        self._log_seq = 0
        self._stats = {"tls_handshake_failures": 0, "connections": 0}
        self._handlers = set()
        self._watches = 0
        self._outage = None
        self._outage_over = threading.Event()
        self._outage_over.set()
        self._stopping = False
        self._stop_event = threading.Event()
        self._httpd = None
        self._control_srv = None
        self._threads = []
        self.port = None
        self.control_port = None

    # --- lifecycle ---

    def start(self):
        if self._workdir_arg:
            self.workdir = self._workdir_arg
            os.makedirs(self.workdir, exist_ok=True)
        else:
            self.workdir = tempfile.mkdtemp(prefix="pinion-fake-apiserver-")
            self._own_workdir = True
        try:
            self._httpd = _Server((self.host, self._want_port), _Handler, self, control=False)
            if self.tls:
                self._make_certs()
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.load_cert_chain(self.cert_file, self.key_file)
                ctx.set_alpn_protocols(["http/1.1"])
                if self.client_certs:
                    ctx.verify_mode = ssl.CERT_OPTIONAL
                    ctx.load_verify_locations(self.ca_file)
                self._httpd.ssl_context = ctx
            self._httpd.server_bind()
            self._httpd.server_activate()
            self.port = self._httpd.server_address[1]
            self._serve(self._httpd)
            if self._want_control_port is not False:
                self._control_srv = _Server((self.host, self._want_control_port or 0),
                                            _Handler, self, control=True)
                self._control_srv.server_bind()
                self._control_srv.server_activate()
                self.control_port = self._control_srv.server_address[1]
                self._serve(self._control_srv)
        except BaseException:
            self.stop()
            raise
        return self

    def _serve(self, srv):
        t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                             name="fake-apiserver-accept", daemon=True)
        t.start()
        srv._accept_thread = t

    def stop(self):
        """Stops serving, ends every connection, joins the threads, removes the temp dir."""
        with self._lock:
            self._stopping = True
            self._cond.notify_all()
        self._stop_event.set()
        self._outage_over.set()
        for srv in (self._httpd, self._control_srv):
            if srv is None:
                continue
            t = getattr(srv, "_accept_thread", None)
            if t is not None and t.is_alive():
                srv.shutdown()
                t.join(5)
            try:
                srv.socket.close()
            except OSError:
                pass
        self._drop_connections(control=True)
        deadline = time.monotonic() + 5
        while True:
            with self._lock:
                threads = [h._thread for h in self._handlers]
            if not threads or time.monotonic() > deadline:
                break
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
        if self._own_workdir and self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self._httpd = self._control_srv = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self):
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d" % ("https" if self.tls else "http", host, self.port)

    @property
    def control_url(self):
        if self.control_port is None:
            return None
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "http://%s:%d" % (host, self.control_port)

    # --- certificates ---

    _OPENSSL_CNF = """
[req]
distinguished_name = dn
prompt = no
[dn]
CN = pinion fake kube-apiserver CA
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[v3_server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,IP:::1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid,issuer
[v3_client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid,issuer
"""

    def _openssl(self, *args):
        r = subprocess.run(["openssl"] + list(args), cwd=self.workdir, capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("openssl %s failed: %s" % (" ".join(args), r.stderr.strip()))

    def _issue(self, name, subj, ext):
        key, csr, crt = (os.path.join(self.workdir, name + s) for s in (".key", ".csr", ".crt"))
        self._openssl("req", "-new", "-config", self._cnf, "-newkey", "ec", "-pkeyopt",
                      "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
                      "-subj", subj)
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca_file, "-CAkey", self.ca_key,
                      "-set_serial", "0x%x" % random.getrandbits(63), "-days", "30",
                      "-extfile", self._cnf, "-extensions", ext, "-out", crt)
        os.unlink(csr)
        return crt, key

    def _make_certs(self):
        self._cnf = os.path.join(self.workdir, "openssl.cnf")
        with open(self._cnf, "w") as f:
            f.write(self._OPENSSL_CNF)
        self.ca_file = os.path.join(self.workdir, "ca.crt")
        self.ca_key = os.path.join(self.workdir, "ca.key")
        self._openssl("req", "-x509", "-config", self._cnf, "-extensions", "v3_ca", "-newkey",
                      "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                      self.ca_key, "-out", self.ca_file, "-days", "30")
        self.cert_file, self.key_file = self._issue("server", "/CN=kube-apiserver", "v3_server")

    def client_cert(self, cn="system:node:test-node", org="system:nodes"):
        """A client certificate (cert_path, key_path) signed by the fake's CA; with TLS and
        client_certs=True it authenticates like a valid token."""
        if not self.tls:
            raise RuntimeError("client certificates need tls=True")
        name = "client-%s" % uuid.uuid4().hex[:8]
        subj = "/O=%s/CN=%s" % (org, cn) if org else "/CN=%s" % cn
        return self._issue(name, subj, "v3_client")

    # --- auth ---

    @property
    def token(self):
        if self.token_file:
            try:
                with open(self.token_file) as f:
                    return f.read().strip()
            except OSError:
                return ""  # an unreadable token file accepts no token
        return self._token

    def set_token(self, token):
        """Changes the accepted token (when no token_file is used)."""
        self._token = token

    def _authenticated(self, handler):
        if isinstance(handler.connection, ssl.SSLSocket) and self.client_certs:
            try:
                if handler.connection.getpeercert():
                    return True
            except (OSError, ValueError):
                pass
        expected = self.token
        if expected is None:
            return True
        auth = handler.headers.get("Authorization", "")
        if auth[:7].lower() == "bearer ":
            got = auth[7:].strip()
            return bool(expected) and got == expected
        return False

    # --- state (Python API) ---

    @property
    def resource_version(self):
        """The current resourceVersion (an int)."""
        with self._lock:
            return self._rv

    @property
    def compacted_rv(self):
        with self._lock:
            return self._compacted

    def _record(self, resource, etype, key, obj, prev):
        ev = _Event(self._rv, resource, etype, key, obj, prev)
        self._history.append(ev)
        self._history_rvs.append(ev.rv)
        if self.history_limit and len(self._history) > self.history_limit:
            self._compact_locked(self._history[-self.history_limit - 1].rv)
        self._cond.notify_all()

    def _put(self, rname, obj, create=None):
        """create=True: must be new; False: must exist; None: either."""
        res = RESOURCES[rname]
        obj = _typed(_json_copy(obj), res.kind)
        md = obj.setdefault("metadata", {})
        if not md.get("name"):
            raise ValueError("the object needs metadata.name")
        if res.namespaced:
            md["namespace"] = md.get("namespace") or "default"
        key = _key(res, obj)
        with self._lock:
            old = self._objects[rname].get(key)
            if create is True and old is not None:
                raise ValueError('%s "%s" already exists' % (rname, md["name"]))
            if create is False and old is None:
                raise KeyError('%s "%s" not found' % (rname, md["name"]))
            self._rv += 1
            if old is not None:
                md.setdefault("uid", old["metadata"].get("uid"))
                md.setdefault("creationTimestamp", old["metadata"].get("creationTimestamp"))
            else:
                md.setdefault("uid", str(uuid.uuid4()))
                md.setdefault("creationTimestamp", _now_rfc3339())
            md["resourceVersion"] = str(self._rv)
            self._objects[rname][key] = obj
            self._record(rname, "ADDED" if old is None else "MODIFIED", key, obj, old)
            return _json_copy(obj)

    def _delete(self, rname, key):
        with self._lock:
            old = self._objects[rname].pop(key, None)
            if old is None:
                raise KeyError('%s "%s" not found' % (rname, key))
            self._rv += 1
            obj = copy.deepcopy(old)
            obj["metadata"]["resourceVersion"] = str(self._rv)
            self._record(rname, "DELETED", key, obj, old)
            return _json_copy(obj)

    def add_pod(self, pod):
        """Creates a pod (a dict; namespace defaults to "default"); fills uid,
        creationTimestamp and resourceVersion. Returns the stored object."""
        return self._put("pods", pod, create=True)

    def update_pod(self, pod):
        """Replaces an existing pod (uid and creationTimestamp are kept); a MODIFIED event."""
        return self._put("pods", pod, create=False)

    def patch_pod(self, namespace, name, fn):
        """Calls fn(pod) on a copy of the pod and stores the result (fn may return a new
        dict or mutate in place)."""
        pod = self.get_pod(namespace, name)
        if pod is None:
            raise KeyError('pods "%s" not found' % name)
        new = fn(pod)
        return self.update_pod(new if new is not None else pod)

    def delete_pod(self, namespace, name=None):
        """delete_pod(ns, name) or delete_pod(pod_dict): removes the pod now (grace period 0);
        a DELETED event whose object carries the deletion's resourceVersion."""
        if isinstance(namespace, dict):
            md = namespace.get("metadata") or {}
            namespace, name = md.get("namespace") or "default", md.get("name")
        return self._delete("pods", "%s/%s" % (namespace, name))

    def get_pod(self, namespace, name):
        with self._lock:
            obj = self._objects["pods"].get("%s/%s" % (namespace, name))
            return _json_copy(obj) if obj is not None else None

    def pods(self):
        with self._lock:
            return [_json_copy(self._objects["pods"][k]) for k in sorted(self._objects["pods"])]

    def set_node(self, name, pod_cidr=None, labels=None, node=None):
        """Creates or replaces the Node `name` (spec.podCIDR/podCIDRs from pod_cidr)."""
        obj = node if node is not None else make_node(name, pod_cidr, labels)
        obj = _json_copy(obj)
        obj.setdefault("metadata", {})["name"] = name
        return self._put("nodes", obj)

    def get_node(self, name):
        with self._lock:
            obj = self._objects["nodes"].get(name)
            return _json_copy(obj) if obj is not None else None

    def delete_node(self, name):
        return self._delete("nodes", name)

    def compact(self, rv=None):
        """Forgets the history up to rv (default: now): watches from an older resourceVersion
        get 410, and so do continue tokens and exact lists older than it."""
        with self._lock:
            rv = self._rv if rv is None else int(rv)
            if rv > self._rv:
                raise ValueError("cannot compact the future (%d > %d)" % (rv, self._rv))
            self._compact_locked(rv)
            return self._compacted

    def _compact_locked(self, rv):
        if rv <= self._compacted:
            return
        i = bisect.bisect_right(self._history_rvs, rv)
        del self._history[:i]
        del self._history_rvs[:i]
        self._compacted = rv
        self._cond.notify_all()

    def _state_at(self, rname, rv):
        """{key: obj} as it was at rv (rv >= the compaction point)."""
        state = dict(self._objects[rname])
        i = bisect.bisect_right(self._history_rvs, rv)
        for ev in reversed(self._history[i:]):
            if ev.resource != rname:
                continue
            if ev.type == "ADDED":
                state.pop(ev.key, None)
            else:
                state[ev.key] = ev.prev
        return state

    # --- faults, outages ---

    def inject(self, fault, count=1, verbs=None, path=None, **params):
        """Arms a fault for the next `count` API requests matching verbs (list|watch|get) and
        the path prefix (count=None: until clear_faults()). fault: an HTTP code ("429", "500",
        "503", ...) or close | drop | malformed | truncate | delay. params: retry_after (s),
        after_events (K, for drop/malformed/truncate in a watch), delay (s, before the
        headers), message, line (the malformed line), rst (drop with a TCP reset).
        Returns the Fault (its .hits counts the requests it hit)."""
        with self._lock:
            self._fault_seq += 1
            f = Fault(self._fault_seq, fault, count=count, verbs=verbs, path=path, **params)
            self._faults.append(f)
            return f

    def clear_faults(self):
        with self._lock:
            self._faults = []

    def faults(self):
        with self._lock:
            return [f.to_json() for f in self._faults]

    def _take_fault(self, verb, path):
        with self._lock:
            for f in self._faults:
                if f.matches(verb, path):
                    f.hits += 1
                    if f.count is not None:
                        f.count -= 1
                        if f.count <= 0:
                            self._faults.remove(f)
                    return f
        return None

    def outage(self, mode="refuse", drop_existing=True):
        """mode "refuse": the port refuses connections (the listening socket is closed);
        "hang": connections are accepted and requests read but never answered.
        None/"off": recover(). Open connections are dropped unless drop_existing=False."""
        if mode in (None, False, "off", "stop", "recover"):
            return self.recover()
        if mode not in ("refuse", "hang"):
            raise ValueError("outage mode %r: refuse, hang or off" % (mode,))
        if self._outage is not None:
            self.recover()
        with self._lock:
            self._outage = mode
            self._outage_over.clear()
            self._cond.notify_all()
        if mode == "refuse":
            self._httpd.shutdown()
            self._httpd._accept_thread.join(5)
            self._httpd.socket.close()
        if drop_existing:
            self._drop_connections()

    def recover(self):
        """Ends an outage; after "refuse" the same port is bound again."""
        with self._lock:
            mode, self._outage = self._outage, None
            self._cond.notify_all()
        if mode == "refuse":
            srv = self._httpd
            srv.socket = socket.socket(srv.address_family, srv.socket_type)
            for attempt in range(100):
                try:
                    srv.server_bind()
                    break
                except OSError:
                    if attempt == 99:
                        raise
                    time.sleep(0.05)
            srv.server_activate()
            self._serve(srv)
        self._outage_over.set()

    @property
    def outage_mode(self):
        return self._outage

    def close_watches(self, abrupt=False):
        """Ends every open watch: cleanly (the terminating chunk) or abruptly (connection
        closed mid-stream)."""
        with self._lock:
            hs = [h for h in self._handlers if h.watching]
            for h in hs:
                h.end_watch = "abrupt" if abrupt else "clean"
            self._cond.notify_all()
        return len(hs)

    def _register(self, h):
        h._thread = threading.current_thread()
        with self._lock:
            self._handlers.add(h)
            if not h.server.control:
                self._stats["connections"] += 1

    def _unregister(self, h):
        with self._lock:
            self._handlers.discard(h)

    def _drop_connections(self, control=False):
        with self._lock:
            hs = [h for h in self._handlers
                  if control or not (h.server.control or h.fake_control)]
            for h in hs:
                h.killed = True
            self._cond.notify_all()
        for h in hs:
            try:
                socket.socket.shutdown(h.connection, socket.SHUT_RDWR)
            except (OSError, ValueError):
                pass

    @property
    def watches(self):
        """The number of watch streams open now."""
        with self._lock:
            return self._watches

    def wait_watches(self, n, timeout=10):
        """Waits until at least n watches are open; returns the number (raises on timeout)."""
        with self._lock:
            if not self._cond.wait_for(lambda: self._watches >= n, timeout):
                raise TimeoutError("%d watches open, waited for %d" % (self._watches, n))
            return self._watches

    # --- request accounting ---

    def _log_start(self, handler, verb, path, query, params):
        e = {"time": time.time(), "mono": time.monotonic(), "verb": verb,
             "method": handler.command, "path": path, "query": query, "params": params,
             "status": None, "fault": None, "user_agent": handler.headers.get("User-Agent"),
             "client": "%s:%s" % handler.client_address[:2], "duration": None}
        if verb == "watch":
            e["events"] = 0
        with self._lock:
            self._log_seq += 1
            e["seq"] = self._log_seq
            self._log.append(e)
        return e

    def requests(self, verb=None, path=None, since=None, status=None):
        """The logged API requests (dicts, oldest first), filtered by verb (a string or a list),
        path prefix, since (a time.time() value, or a dict from this log: strictly after it)
        and status."""
        verbs = {verb} if isinstance(verb, str) else (set(verb) if verb else None)
        with self._lock:
            out = []
            for e in self._log:
                if verbs and e["verb"] not in verbs:
                    continue
                if path and not e["path"].startswith(path):
                    continue
                if since is not None:
                    if isinstance(since, dict):
                        if e["seq"] <= since["seq"]:
                            continue
                    elif e["time"] < since:
                        continue
                if status is not None and e["status"] != status:
                    continue
                out.append(dict(e, params=dict(e["params"])))
            return out

    def count(self, verb=None, path=None, since=None, status=None):
        return len(self.requests(verb, path, since, status))

    def counts(self):
        """{verb: n} over the log."""
        with self._lock:
            c = {}
            for e in self._log:
                c[e["verb"]] = c.get(e["verb"], 0) + 1
            return c

    def reset_counts(self):
        with self._lock:
            self._log = []

    def wait_requests(self, n, verb=None, path=None, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            got = self.count(verb, path)
            if got >= n:
                return got
            if time.monotonic() > deadline:
                raise TimeoutError("%d %s requests, waited for %d" % (got, verb or "", n))
            time.sleep(0.02)

    def state(self):
        with self._lock:
            return {"resourceVersion": str(self._rv), "compacted": str(self._compacted),
                    "watches": self._watches, "outage": self._outage,
                    "pods": len(self._objects["pods"]), "nodes": len(self._objects["nodes"]),
                    "history": len(self._history), "faults": [f.to_json() for f in self._faults],
                    "counts": self.counts(), "url": self.url, "ca_file": self.ca_file,
                    "port": self.port, "bookmark_interval": self.bookmark_interval,
                    "watch_chunk_size": self.watch_chunk_size,
                    "rv0_ignores_limit": self.rv0_ignores_limit, "stats": dict(self._stats)}

    # --- the API ---

    def _route(self, method, path, params):
        """-> (verb, resource|None, namespace, name) or raises ApiError 404."""
        watch_prefix = False
        parts = [p for p in path.split("/") if p]
        if parts[:2] != ["api", "v1"]:
            return ("get" if method in ("GET", "HEAD") else method.lower()), None, None, None
        rest = parts[2:]
        if rest[:1] == ["watch"]:
            watch_prefix = True
            rest = rest[1:]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns = rest[1]
            rest = rest[2:]
        if not rest or rest[0] not in RESOURCES or len(rest) > 2:
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           details={})
        res = RESOURCES[rest[0]]
        if ns is not None and not res.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           details={})
        name = rest[1] if len(rest) == 2 else None
        if method not in ("GET", "HEAD"):
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                    "DELETE": "delete"}.get(method, method.lower())
        elif watch_prefix or _parse_bool(params.get("watch", ""), "watch"):
            verb = "watch"
        else:
            verb = "get" if name else "list"
        return verb, res, ns, name

    def _serve_api(self, h, path, query, params):
        try:
            verb, res, ns, name = self._route(h.command, path, params)
        except ApiError as e:
            verb, res = "get", None
            early = e
        else:
            early = None
        h.entry = e = self._log_start(h, verb, path, query, params)
        t0 = time.monotonic()
        try:
            self._serve_api_logged(h, path, params, verb, res, ns, name, early)
        except (OSError, ValueError):
            h.close_connection = True
        finally:
            e["duration"] = time.monotonic() - t0

    def _serve_api_logged(self, h, path, params, verb, res, ns, name, early):
        e = h.entry
        if self._outage == "hang":
            e["fault"] = "hang"
            while not self._outage_over.wait(0.1) and not self._stopping:
                pass
            h.abort()
            return
        fault = self._take_fault(verb, path)
        if fault is not None:
            e["fault"] = fault.kind
            if fault.delay and self._stop_event.wait(fault.delay):
                h.abort()
                return
            if fault.kind.isdigit():
                code = int(fault.kind)
                headers = {}
                details = None
                if fault.retry_after is not None:
                    headers["Retry-After"] = str(int(fault.retry_after))
                    details = {"retryAfterSeconds": int(fault.retry_after)}
                err = ApiError(code, REASONS.get(code, ""), fault.message or
                               DEFAULT_MESSAGES.get(code, "injected failure %d" % code),
                               details=details, headers=headers)
                h.send_error_status(err)
                return
            if fault.kind == "close":
                e["status"] = 0
                h.abort(fault.rst)
                return
            if fault.kind == "delay":
                fault = None
        if not self._authenticated(h):
            h.send_error_status(ApiError(401, "Unauthorized", "Unauthorized"), fault=fault)
            return
        if self._serve_csr(h, path, params):  # certificates.k8s.io block above
            return
        if early is not None:
            if res is None and early.code == 404 and not path.startswith("/api/"):
                h.send_body(404, b"404 page not found\n", ctype="text/plain; charset=utf-8")
            else:
                h.send_error_status(early, fault=fault)
            return
        try:
            if res is None:
                self._serve_nonresource(h, path, fault)
            elif verb == "watch":
                self._serve_watch(h, res, ns, name, params, fault)
            elif verb == "list":
                h.send_json(200, self._list(res, ns, params), fault=fault)
            elif verb == "get":
                h.send_json(200, self._get(res, ns or "", name), fault=fault)
            else:
                raise ApiError(405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource",
                               details={})
        except ApiError as err:
            h.send_error_status(err, fault=fault)

    def _serve_nonresource(self, h, path, fault):
        if path in ("/healthz", "/livez", "/readyz"):
            h.send_body(200, b"ok", ctype="text/plain; charset=utf-8", fault=fault)
        elif path == "/version":
            h.send_json(200, {"major": "1", "minor": "29", "gitVersion": "v1.29.0-pinion-fake",
                              "platform": "linux/amd64"}, fault=fault)
        elif path == "/api":
            h.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                              "serverAddressByClientCIDRs": [
                                  {"clientCIDR": "0.0.0.0/0",
                                   "serverAddress": "%s:%d" % (self.host, self.port)}]},
                        fault=fault)
        elif path == "/api/v1":
            h.send_json(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": r.name, "singularName": r.kind.lower(), "namespaced": r.namespaced,
                 "kind": r.kind, "verbs": ["get", "list", "watch"]}
                for r in RESOURCES.values()]}, fault=fault)
        else:
            h.send_body(404, b"404 page not found\n", ctype="text/plain; charset=utf-8",
                        fault=fault)

    def _get(self, res, ns, name):
        key = "%s/%s" % (ns, name) if res.namespaced else name
        with self._lock:
            obj = self._objects[res.name].get(key)
        if obj is None:
            raise ApiError(404, "NotFound", '%s "%s" not found' % (res.name, name),
                           details={"name": name, "kind": res.name})
        return obj

    @staticmethod
    def _encode_continue(rv, start):
        raw = _dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    @staticmethod
    def _decode_continue(token):
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            d = json.loads(raw)
            if d.get("v") != "meta.k8s.io/v1" or not isinstance(d.get("rv"), int) \
                    or not isinstance(d.get("start"), str):
                raise ValueError("incorrect encoded start resourceVersion (version %s)"
                                 % d.get("v"))
            return d["rv"], d["start"]
        except (ValueError, TypeError, AttributeError) as err:
            raise ApiError(400, "BadRequest", "continue key is not valid: %s" % err)

    @staticmethod
    def _invalid(field, message):
        return ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: %s: '
                        'Forbidden: %s' % (field, message),
                        details={"group": "meta.k8s.io", "kind": "ListOptions",
                                 "causes": [{"reason": "FieldValueForbidden",
                                             "message": "Forbidden: " + message,
                                             "field": field}]})

    def _list(self, res, ns, params):
        rv_s = params.get("resourceVersion", "")
        match_s = params.get("resourceVersionMatch", "")
        cont = params.get("continue", "")
        limit = _parse_int(params.get("limit") or "0", "limit")
        matcher = _Matcher(res, ns, None, params.get("fieldSelector", ""),
                           params.get("labelSelector", ""))
        if match_s not in ("", "Exact", "NotOlderThan"):
            raise ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: '
                           'resourceVersionMatch: Unsupported value: "%s": supported values: '
                           '"Exact", "NotOlderThan"' % match_s)
        if match_s and cont:
            raise self._invalid("resourceVersionMatch",
                                "resourceVersionMatch is forbidden when continue is provided")
        if match_s and not rv_s:
            raise self._invalid("resourceVersionMatch", "resourceVersionMatch is forbidden "
                                "unless resourceVersion is provided")
        if match_s == "Exact" and rv_s == "0":
            raise self._invalid("resourceVersionMatch", 'resourceVersionMatch "exact" is '
                                'forbidden for resourceVersion "0"')
        start = ""
        with self._lock:
            if cont:
                if rv_s:
                    raise ApiError(400, "BadRequest", "specifying resource version is not "
                                   "allowed when using continue")
                tok_rv, start = self._decode_continue(cont)
                if tok_rv == -1:
                    at = self._rv
                elif tok_rv < self._compacted:
                    raise ApiError(410, "Expired", CONTINUE_INCONSISTENT,
                                   meta={"continue": self._encode_continue(-1, start)})
                else:
                    at = tok_rv
            elif rv_s in ("", "0"):
                at = self._rv
                if rv_s == "0" and self.rv0_ignores_limit:
                    limit = 0
            else:
                n = _parse_int(rv_s, "resourceVersion")
                if n > self._rv:
                    self._cond.wait_for(lambda: self._rv >= n or self._stopping, FRESHNESS_WAIT)
                    if n > self._rv:
                        raise _too_large_rv(n, self._rv)
                exact = match_s == "Exact" or (match_s == "" and limit > 0)
                if exact:
                    if n < self._compacted:
                        raise ApiError(410, "Expired", LIST_EXPIRED)
                    at = n
                else:
                    at = self._rv
            state = self._state_at(res.name, at) if at < self._rv else self._objects[res.name]
            keys = sorted(k for k in state if k >= start)
            items = [(k, state[k]) for k in keys if matcher(state[k])]
        meta = {"resourceVersion": str(at)}
        if limit > 0 and len(items) > limit:
            meta["continue"] = self._encode_continue(at, items[limit - 1][0] + "\x00")
            if matcher.empty:
                meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        return {"kind": res.list_kind, "apiVersion": "v1", "metadata": meta,
                "items": [_untyped(obj) for _, obj in items]}

    def _convert(self, ev, matcher):
        """A history event as this watcher sees it: (type, object) or None (the watch
        cache's translation of selector transitions)."""
        if ev.type == "ADDED":
            return ("ADDED", ev.obj) if matcher(ev.obj) else None
        if ev.type == "DELETED":
            return ("DELETED", ev.obj) if matcher(ev.prev) else None
        cur, old = matcher(ev.obj), matcher(ev.prev)
        if cur and old:
            return ("MODIFIED", ev.obj)
        if cur:
            return ("ADDED", ev.obj)
        if old:
            obj = copy.deepcopy(ev.prev)
            obj["metadata"]["resourceVersion"] = str(ev.rv)
            return ("DELETED", obj)
        return None

    @staticmethod
    def _bookmark_object(res, rv):
        """An empty object of the watched kind carrying only the resourceVersion, serialized
        as Go serializes an empty struct (what the real server sends)."""
        obj = {"kind": res.kind, "apiVersion": "v1",
               "metadata": {"resourceVersion": str(rv), "creationTimestamp": None}}
        if res.name == "pods":
            obj.update({"spec": {"containers": None}, "status": {}})
        else:
            obj.update({"spec": {}, "status": {}})
        return obj

    def _serve_watch(self, h, res, ns, name, params, fault):
        rv_s = params.get("resourceVersion", "")
        if params.get("resourceVersionMatch"):
            raise self._invalid("resourceVersionMatch",
                                "resourceVersionMatch is forbidden for watch")
        timeout = params.get("timeoutSeconds")
        timeout = (_parse_int(timeout, "timeoutSeconds") if timeout not in (None, "")
                   else self.default_watch_timeout)
        bookmarks = _parse_bool(params.get("allowWatchBookmarks", ""), "allowWatchBookmarks")
        matcher = _Matcher(res, ns, name, params.get("fieldSelector", ""),
                           params.get("labelSelector", ""))
        error = None
        initial = []
        with self._lock:
            if rv_s in ("", "0"):
                last = self._rv
                objs = self._objects[res.name]
                initial = [("ADDED", objs[k]) for k in sorted(objs) if matcher(objs[k])]
            else:
                n = _parse_int(rv_s, "resourceVersion")
                if n < self._compacted:
                    error = status_object(410, "Expired", "too old resource version: %d (%d)"
                                          % (n, self._compacted))
                last = n
        h._headers(200, chunked=True)
        entry = h.entry
        state = {"sent": 0, "fault": fault, "done": False}

        def flush(batch):
            if not batch:
                return
            if self.watch_chunk_size:
                h.write_chunks(b"".join(batch))  # re-chunked across event boundaries
            else:
                for line in batch:  # one chunk per event, as the real server flushes them
                    h.write_chunks(line)

        def fault_due():
            f = state["fault"]
            return (f is not None and f.kind in ("drop", "malformed", "truncate")
                    and state["sent"] >= f.after_events)

        def apply_fault(batch):
            """Writes what is pending, then the fault. False: the stream is gone."""
            f, state["fault"] = state["fault"], None
            flush(batch)
            if f.kind == "malformed":
                h.write_chunks((f.line or '{"type":"MODIFIED","object":{"kind":"Pod",,'
                                '"apiVersion":"v1"').encode() + b"\n")
                return True
            if f.kind == "truncate":
                h.wfile.write(b"%x\r\n" % 4096 + b'{"type":"MODIFIED","object":'
                              b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":')
            h.abort(f.rst)
            return False

        def emit(lines):
            """Writes event lines, applying a stream fault after K events. False: stop."""
            if fault_due() and not apply_fault([]):
                return False
            batch = []
            for etype, line in lines:
                batch.append(line)
                if etype not in ("BOOKMARK", "ERROR"):
                    state["sent"] += 1
                    entry["events"] += 1
                if fault_due():
                    ok = apply_fault(batch)
                    batch = []
                    if not ok:
                        return False
            flush(batch)
            return True

        with self._lock:
            self._watches += 1
            h.watching = True
            h.end_watch = None
            self._cond.notify_all()
        try:
            if not emit([]):
                return
            if error is not None:
                emit([("ERROR", _event_line("ERROR", error))])
                h.wfile.write(b"0\r\n\r\n")
                return
            if not emit([(t, _event_line(t, o)) for t, o in initial]):
                return
            start = time.monotonic()
            deadline = start + timeout

            def next_bookmark(now):
                if not bookmarks:
                    return None
                t = now + self.bookmark_interval if self.bookmark_interval else None
                pre = deadline - 2
                if pre >= now and (t is None or pre < t):
                    t = pre
                return t

            next_bm = next_bookmark(start)
            while True:
                with self._lock:
                    while True:
                        now = time.monotonic()
                        if self._stopping or h.killed or h.end_watch:
                            break
                        if last < self._compacted:
                            break  # fell out of the history window: the server ends the watch
                        if self._outage == "hang":
                            self._cond.wait(0.1)
                            continue
                        if self._rv > last:
                            break
                        wake = deadline if next_bm is None else min(deadline, next_bm)
                        if now >= wake:
                            break
                        self._cond.wait(min(wake - now, 1.0))
                    if self._stopping or h.killed:
                        h.abort()
                        return
                    if h.end_watch == "abrupt":
                        h.abort()
                        return
                    if h.end_watch == "clean" or last < self._compacted:
                        break
                    i = bisect.bisect_right(self._history_rvs, last)
                    evs = [c for c in (self._convert(ev, matcher) for ev in self._history[i:]
                                       if ev.resource == res.name) if c is not None]
                    last = max(last, self._rv)
                lines = [(t, _event_line(t, o)) for t, o in evs]
                now = time.monotonic()
                if next_bm is not None and now >= next_bm:
                    lines.append(("BOOKMARK", _event_line("BOOKMARK",
                                                          self._bookmark_object(res, last))))
                    next_bm = next_bookmark(now)
                if lines and not emit(lines):
                    return
                if now >= deadline:
                    break
            h.wfile.write(b"0\r\n\r\n")
        finally:
            with self._lock:
                self._watches -= 1
                h.watching = False
                self._cond.notify_all()

    # --- the control API (/_fake/...) ---

    def _control(self, h, method, path, params, body):
        try:
            data = json.loads(body) if body.strip() else {}
        except ValueError as err:
            h.send_json(400, {"error": "bad JSON: %s" % err})
            return
        try:
            code, out = self._control_route(method, path, params, data)
        except (KeyError, ValueError, TypeError, RuntimeError) as err:
            msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            h.send_json(404 if isinstance(err, KeyError) else 400, {"error": msg})
            return
        h.send_json(code, out)

    def _control_route(self, method, path, params, data):
        p = path[len("/_fake/"):].strip("/") if path.startswith("/_fake/") else ""
        if method == "GET":
            if p in ("", "state"):
                return 200, self.state()
            if p == "requests":
                since = params.get("since")
                reqs = self.requests(verb=params.get("verb") or None,
                                     path=params.get("path") or None,
                                     since=float(since) if since else None,
                                     status=int(params["status"]) if params.get("status")
                                     else None)
                return 200, {"count": len(reqs), "counts": self.counts(), "requests": reqs}
            if p == "pods":
                return 200, {"resourceVersion": str(self.resource_version),
                             "items": self.pods()}
            if p == "faults":
                return 200, {"faults": self.faults()}
            if p.startswith("nodes/"):
                node = self.get_node(p[len("nodes/"):])
                if node is None:
                    raise KeyError("no such node")
                return 200, node
            raise KeyError("no such control endpoint: GET %s" % path)
        if method not in ("POST", "PUT", "DELETE"):
            raise ValueError("use GET or POST")
        if p == "pods/add":
            pod = data.get("pod", data)
            pad = int(data.get("pad_bytes") or params.get("pad_bytes") or 0)
            if pad:
                pod = _json_copy(pod)
                pod.setdefault("metadata", {}).setdefault("annotations", {})[
                    "pinion.test/padding"] = "x" * pad
            return 201, self.add_pod(pod)
        if p == "pods/update":
            return 200, self.update_pod(data.get("pod", data))
        if p == "pods/delete":
            return 200, self.delete_pod(data.get("namespace") or "default", data["name"])
        if p == "nodes/set":
            return 200, self.set_node(data["name"], pod_cidr=data.get("podCIDR"),
                                      labels=data.get("labels"), node=data.get("node"))
        if p == "compact":
            rv = data.get("resourceVersion")
            return 200, {"compacted": str(self.compact(int(rv) if rv else None))}
        if p == "inject":
            kw = dict(data)
            fault = kw.pop("fault")
            return 201, self.inject(fault, **kw).to_json()
        if p == "clear-faults":
            self.clear_faults()
            return 200, {"faults": []}
        if p == "outage":
            self.outage(data.get("mode", "refuse"), drop_existing=data.get("drop_existing", True))
            return 200, {"outage": self._outage}
        if p == "recover":
            self.recover()
            return 200, {"outage": None}
        if p == "reset-counts":
            self.reset_counts()
            return 200, {"count": 0}
        if p == "token":
            self.set_token(data.get("token"))
            return 200, {}
        if p == "close-watches":
            return 200, {"closed": self.close_watches(bool(data.get("abrupt")))}
        if p == "config":
            for k in ("bookmark_interval", "watch_chunk_size", "rv0_ignores_limit",
                      "default_watch_timeout", "history_limit"):
                if k in data:
                    setattr(self, k, data[k])
            return 200, self.state()
        raise KeyError("no such control endpoint: POST %s" % path)


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="A Kubernetes API server emulator (pods, nodes; list/watch/bookmarks/410/"
                    "faults) for pinion's tests. Control it through the /_fake/ endpoints "
                    "(see tests/fakes/README.md).")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="API port (default 0: ephemeral)")
    ap.add_argument("--control-port", type=int, default=0,
                    help="plain-HTTP port for /_fake/ only, up during outages (default 0)")
    ap.add_argument("--tls", action="store_true", help="HTTPS with a throwaway CA")
    ap.add_argument("--token", help="the bearer token to require")
    ap.add_argument("--token-file", help="a file with the token, re-read on every request")
    ap.add_argument("--no-client-certs", action="store_true",
                    help="do not accept client certificates signed by the fake CA")
    ap.add_argument("--print-url", action="store_true",
                    help='print "URL CAFILE" and then "CONTROL URL" on stdout once serving')
    ap.add_argument("--bookmark-interval", type=float, default=1.0, help="seconds (default 1)")
    ap.add_argument("--initial-rv", type=int, default=1000)
    ap.add_argument("--rv0-ignores-limit", action="store_true",
                    help="resourceVersion=0 lists ignore limit, as the watch cache does")
    ap.add_argument("--watch-chunk-size", type=int, default=None,
                    help="cut watch streams into chunks of N bytes (default: one per event)")
    ap.add_argument("--history-limit", type=int, default=None,
                    help="keep only the last N events (older ones are compacted)")
    ap.add_argument("--default-watch-timeout", type=int, default=1800)
    ap.add_argument("--node", action="append", default=[], metavar="NAME[=PODCIDR]",
                    help="create a Node (repeatable)")
    ap.add_argument("--pods", metavar="FILE",
                    help="a JSON file with a Pod, a list of Pods or a PodList to start with")
    ap.add_argument("--workdir", help="where the certificates go (default: a temp dir)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    fake = FakeApiserver(tls=args.tls, token=args.token, token_file=args.token_file,
                         client_certs=not args.no_client_certs, host=args.host, port=args.port,
                         control_port=args.control_port, bookmark_interval=args.bookmark_interval,
                         initial_rv=args.initial_rv, rv0_ignores_limit=args.rv0_ignores_limit,
                         watch_chunk_size=args.watch_chunk_size,
                         history_limit=args.history_limit,
                         default_watch_timeout=args.default_watch_timeout,
                         workdir=args.workdir, verbose=args.verbose)
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fake.start()
    try:
        for spec in args.node:
            name, _, cidr = spec.partition("=")
            fake.set_node(name, pod_cidr=cidr or None)
        if args.pods:
            with open(args.pods) as f:
                data = json.load(f)
            pods = data.get("items", [data]) if isinstance(data, dict) else data
            for pod in pods:
                fake.add_pod(pod)
        if args.print_url:
            sys.stdout.write("%s %s\nCONTROL %s\n" % (fake.url, fake.ca_file or "-",
                                                     fake.control_url or "-"))
            sys.stdout.flush()
        while not done.wait(1):
            pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
