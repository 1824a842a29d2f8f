#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A Kubernetes API server emulator for pinion's tests (pods and nodes, core/v1, JSON only;
pods/status PATCH in kube_writes.py, events in kube_events.py, CSRs in kube_csr.py, RBAC and
admission policies in kube_admission.py, discovery in kube_discovery.py).

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

import base64
import bisect
import copy
import ipaddress
import json
import os
import shutil
import ssl
import sys
import tempfile
import threading
import time
import uuid

from kube_common import (_dumps, _json_copy, _now_rfc3339, _parse_bool, _parse_int, _too_large_rv, _typed,
                         _untyped, ApiError, CONTINUE_INCONSISTENT, DEFAULT_MESSAGES, FRESHNESS_WAIT,
                         GROUP_RESOURCES, LIST_EXPIRED, REASONS, RESOURCES, all_resources,
                         status_object)
from kube_events import _EventsMixin
from kube_writes import _PodStatusMixin
from kube_admission import _AdmissionMixin
from kube_discovery import _DiscoveryMixin
from kube_certs import _CertsMixin
from kube_watch import _WatchMixin
from kube_control import _ControlMixin
from kube_ops import _OpsMixin
from kube_selectors import _Matcher
from kube_objects import _Event, _key, huge_pod, make_node, make_pod
from kube_faults import Fault  # noqa: F401 (re-exported)
from kube_http import _Handler, _Server
from kube_csr import _CsrMixin, CSR_PREFIX

# The test-facing names; CSR_PREFIX for tests that inject faults on the CSR routes.
__all__ = ["FakeApiserver", "ApiError", "make_pod", "huge_pod", "make_node", "status_object", "CSR_PREFIX"]

# ---------------------------------------------------------------------------------------------
# The emulator


class FakeApiserver(_CsrMixin, _EventsMixin, _PodStatusMixin, _AdmissionMixin, _DiscoveryMixin,
                    _CertsMixin, _WatchMixin, _ControlMixin, _OpsMixin):
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
    netns          the name of a network namespace (ip netns) whose `host` address the
                   listening sockets are bound to (then host need not be loopback); the rest
                   of the emulator runs in the caller's process as usual
    users          {token: {"username", "uid", "groups", "extra"}}: more bearer tokens, each
                   authenticating as that user (add_user() adds one later); these users, and
                   only they, are subject to rbac and admission_policy
    rbac           an RBAC manifest (a path, or a list of documents): its bindings' subjects
                   may do only what their roles allow (403 otherwise)
    admission_policy   a manifest (path or documents) of ValidatingAdmissionPolicies and
                   bindings, evaluated on writes with real CEL (node + @bufbuild/cel)
    cel_node_modules   where @bufbuild/cel is (default: scripts/npm-deps cel)
    """

    def __init__(self, tls=False, token=None, token_file=None, client_certs=True, host="127.0.0.1",
                 port=0, control_port=None, bookmark_interval=1.0, initial_rv=1000,
                 rv0_ignores_limit=False, watch_chunk_size=None, history_limit=None,
                 default_watch_timeout=1800, workdir=None, verbose=False, netns=None,
                 users=None, rbac=None, admission_policy=None, cel_node_modules=None):
        try:
            # Inside a network namespace the test made, any address is the test's own.
            if netns is None and not ipaddress.ip_address(host).is_loopback:
                raise ValueError
        except ValueError:
            raise ValueError("the fake apiserver listens on loopback addresses only (or in a "
                             "netns), not %r" % host)
        self.tls, self.host, self.verbose = tls, host, verbose
        self.netns = netns
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
        self._objects = {r.store: {} for r in all_resources()}
        self._admission_args = (users, rbac, admission_policy, cel_node_modules)
        self.users = dict(users or {})
        self._rbac = self._policies = None
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
            self._setup_admission(*self._admission_args)
            self._httpd = self._in_netns(_Server, (self.host, self._want_port), _Handler, self,
                                         control=False)
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
                self._control_srv = self._in_netns(_Server, (self.host, self._want_control_port or 0),
                                                   _Handler, self, control=True)
                self._control_srv.server_bind()
                self._control_srv.server_activate()
                self.control_port = self._control_srv.server_address[1]
                self._serve(self._control_srv)
        except BaseException:
            self.stop()
            raise
        return self

    def _in_netns(self, fn, *args, **kw):
        """fn(*args, **kw), run where the listening sockets belong: in a thread that entered
        self.netns (a socket stays in the namespace it was made in; only that thread moves)."""
        if self.netns is None:
            return fn(*args, **kw)
        import ctypes
        out = {}

        def run():
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open("/var/run/netns/" + self.netns, os.O_RDONLY)
                try:
                    if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                        e = ctypes.get_errno()
                        raise OSError(e, "setns %s: %s" % (self.netns, os.strerror(e)))
                finally:
                    os.close(fd)
                out["value"] = fn(*args, **kw)
            except BaseException as e:
                out["error"] = e
        t = threading.Thread(target=run, name="fake-apiserver-netns", daemon=True)
        t.start()
        t.join()
        if "error" in out:
            raise out["error"]
        return out["value"]

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
        self._close_admission()
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
        handler.user = self._user_of(handler)
        if handler.user is not None:
            return True
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

    def _put(self, rname, obj, create=None, kind=None):
        """create=True: must be new; False: must exist; None: either. kind: (kind, apiVersion)
        of the stored form (default: the core/v1 resource's)."""
        res = RESOURCES[rname]
        obj = _typed(_json_copy(obj), *(kind or (res.kind, "v1")))
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

    # --- the API ---

    def _route(self, method, path, params):
        """-> (verb, resource|None, namespace, name, subresource) or raises ApiError 404.
        Resource paths: /api/v1/... and /apis/GROUP/VERSION/... of GROUP_RESOURCES (other
        /apis paths are the CSR block's or discovery)."""
        watch_prefix = False
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            table, rest = RESOURCES, parts[2:]
        elif parts[:1] == ["apis"] and tuple(parts[1:3]) in GROUP_RESOURCES:
            table, rest = GROUP_RESOURCES[tuple(parts[1:3])], parts[3:]
        else:
            rest = None
        if not rest:  # discovery (/api/v1, /apis/GROUP/VERSION) or another non-resource path
            return ("get" if method in ("GET", "HEAD") else method.lower()), None, None, None, None
        if rest[:1] == ["watch"]:
            watch_prefix = True
            rest = rest[1:]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns = rest[1]
            rest = rest[2:]
        not_found = ApiError(404, "NotFound", "the server could not find the requested resource",
                             details={})
        if not rest or rest[0] not in table or len(rest) > 3:
            raise not_found
        res = table[rest[0]]
        if ns is not None and not res.namespaced:
            raise not_found
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if sub is not None and (res.name, sub) != ("pods", "status"):
            raise not_found
        if method not in ("GET", "HEAD"):
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                    "DELETE": "delete"}.get(method, method.lower())
        elif watch_prefix or _parse_bool(params.get("watch", ""), "watch"):
            verb = "watch"
        else:
            verb = "get" if name else "list"
        return verb, res, ns, name, sub

    def _serve_api(self, h, path, query, params):
        try:
            verb, res, ns, name, sub = self._route(h.command, path, params)
        except ApiError as e:
            verb, res, ns, name, sub = "get", None, None, None, None
            early = e
        else:
            early = None
        h.entry = e = self._log_start(h, verb, path, query, params)
        t0 = time.monotonic()
        try:
            self._serve_api_logged(h, path, params, verb, res, ns, name, sub, early)
        except (OSError, ValueError):
            h.close_connection = True
        finally:
            e["duration"] = time.monotonic() - t0

    def _serve_api_logged(self, h, path, params, verb, res, ns, name, sub, early):
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
        try:
            self._authorize(h, path, params)
        except ApiError as err:
            h.send_error_status(err, fault=fault)
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
            elif sub == "status":
                code, obj = self._serve_pod_status(h, verb, ns or "", name, h.request_body)
                h.send_json(code, obj, fault=fault)
            elif verb in ("create", "patch") and res.store == "events" and res.group:
                if verb == "create" and ns and not name:
                    h.send_json(201, self._event_create(h, ns, h.request_body), fault=fault)
                elif verb == "patch" and ns and name:
                    h.send_json(200, self._event_patch(h, ns, name, h.request_body), fault=fault)
                else:
                    raise ApiError(405, "MethodNotAllowed", "the server does not allow this "
                                   "method on the requested resource", details={})
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

    def _get(self, res, ns, name):
        key = "%s/%s" % (ns, name) if res.namespaced else name
        with self._lock:
            obj = self._objects[res.store].get(key)
        if obj is None:
            raise ApiError(404, "NotFound", '%s "%s" not found' % (res.qualified(), name),
                           details={"name": name, "group": res.group or None, "kind": res.name})
        return res.show(obj)

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
            state = self._state_at(res.store, at) if at < self._rv else self._objects[res.store]
            keys = sorted(k for k in state if k >= start)
            items = [(k, v) for k, v in ((k, res.show(state[k])) for k in keys) if matcher(v)]
        meta = {"resourceVersion": str(at)}
        if limit > 0 and len(items) > limit:
            meta["continue"] = self._encode_continue(at, items[limit - 1][0] + "\x00")
            if matcher.empty:
                meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        return {"kind": res.list_kind, "apiVersion": res.api_version, "metadata": meta,
                "items": [_untyped(obj) for _, obj in items]}


if __name__ == "__main__":
    from kube_control import main
    sys.exit(main())
