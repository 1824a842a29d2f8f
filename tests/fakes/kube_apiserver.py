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
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from kube_common import (_dumps, _json_copy, _now_rfc3339, _parse_bool, _parse_int, _too_large_rv, _typed,
                         _untyped, ApiError, CONTINUE_INCONSISTENT, DEFAULT_MESSAGES, FRESHNESS_WAIT,
                         LIST_EXPIRED, REASONS, RESOURCES, status_object)
from kube_selectors import _Matcher
from kube_objects import _Event, _event_line, _key, huge_pod, make_node, make_pod
from kube_faults import Fault
from kube_http import _Handler, _Server
from kube_csr import _CsrMixin, CSR_PREFIX

# The test-facing names; CSR_PREFIX for tests that inject faults on the CSR routes.
__all__ = ["FakeApiserver", "ApiError", "make_pod", "huge_pod", "make_node", "status_object", "CSR_PREFIX"]

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
    netns          the name of a network namespace (ip netns) whose `host` address the
                   listening sockets are bound to (then host need not be loopback); the rest
                   of the emulator runs in the caller's process as usual
    """

    def __init__(self, tls=False, token=None, token_file=None, client_certs=True, host="127.0.0.1",
                 port=0, control_port=None, bookmark_interval=1.0, initial_rv=1000,
                 rv0_ignores_limit=False, watch_chunk_size=None, history_limit=None,
                 default_watch_timeout=1800, workdir=None, verbose=False, netns=None):
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
        cnf = self._OPENSSL_CNF
        if self.host not in ("127.0.0.1", "::1"):
            cnf = cnf.replace("subjectAltName = IP:127.0.0.1,", "subjectAltName = IP:%s,IP:127.0.0.1," % self.host)
        with open(self._cnf, "w") as f:
            f.write(cnf)
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
            srv.socket = self._in_netns(socket.socket, srv.address_family, srv.socket_type)
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
