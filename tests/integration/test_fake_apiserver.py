# SPDX-License-Identifier: MIT
"""The test apiserver (tests/fakes/kube_apiserver.py) checked against code we did not write:
the official Kubernetes Python client (Debian python3-kubernetes) lists, paginates, watches,
reads nodes and meets 401/410/429 through it; raw HTTP checks the wire format and every fault
the C client's tests inject (drops, bad JSON, truncated chunks, outages, request log)."""

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

import pytest

from pinion_testlib import SRCDIR, T, wait_until

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver, huge_pod, make_pod  # noqa: E402

try:
    import kubernetes
    import urllib3
    from kubernetes.client.rest import ApiException
except ImportError:  # the raw tests still run
    kubernetes = None

TOKEN = "s3cret-token"
needs_client = pytest.mark.skipif(
    kubernetes is None, reason="the official client is not installed (Debian package "
    "python3-kubernetes, for /usr/bin/python3)")


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture
def fakes():
    """make(**kw) -> a started FakeApiserver; all are stopped (threads joined, temp dirs
    removed) at teardown."""
    made = []

    def make(**kw):
        kw.setdefault("token", TOKEN)
        f = FakeApiserver(**kw)
        made.append(f)
        return f.start()

    yield make
    for f in made:
        f.stop()
        assert not os.path.exists(f.workdir), "the fake left its temp dir behind"
        assert f.watches == 0


@pytest.fixture
def fake(fakes):
    """HTTPS with a token, bookmarks every second."""
    return fakes(tls=True)


@pytest.fixture
def clients():
    """make(fake, token=TOKEN, ca=True, cert=None) -> kubernetes CoreV1Api; closed at teardown."""
    made = []

    def make(fake, token=TOKEN, ca=True, cert=None):
        cfg = kubernetes.client.Configuration()
        cfg.host = fake.url
        cfg.verify_ssl = True
        cfg.ssl_ca_cert = fake.ca_file if ca else None
        cfg.retries = 0
        if token is not None:
            cfg.api_key = {"authorization": "Bearer " + token}
        if cert:
            cfg.cert_file, cfg.key_file = cert
        api = kubernetes.client.ApiClient(cfg)
        made.append(api)
        return kubernetes.client.CoreV1Api(api)

    yield make
    for api in made:
        api.rest_client.pool_manager.clear()
        api.close()


def _names(items):
    return [p.metadata.name for p in items]


def _status_body(exc):
    return json.loads(exc.body)


# ---------------------------------------------------------------------------------------------
# The official client: list


@needs_client
def test_list_with_field_selector(fake, clients):
    v1 = clients(fake)
    for i in range(4):
        fake.add_pod(make_pod("web-%d" % i, node="n1" if i % 2 == 0 else "n2"))
    fake.add_pod(make_pod("db-0", node="n1", namespace="prod", labels={"app": "db"}))
    rv = fake.resource_version

    lst = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    assert lst.kind == "PodList" and lst.api_version == "v1"
    assert lst.metadata.resource_version == str(rv)
    assert _names(lst.items) == ["web-0", "web-2", "db-0"], "etcd key order: default/... < prod/..."
    assert lst.metadata._continue is None
    for p in lst.items:
        assert isinstance(p, kubernetes.client.V1Pod)
        assert p.spec.node_name == "n1"
        assert p.metadata.uid and int(p.metadata.resource_version) <= rv
    # namespaced list, label selectors, several field terms
    assert _names(v1.list_namespaced_pod("prod").items) == ["db-0"]
    assert _names(v1.list_pod_for_all_namespaces(label_selector="app=db").items) == ["db-0"]
    assert _names(v1.list_pod_for_all_namespaces(label_selector="app notin (db)",
                                                 field_selector="spec.nodeName=n1").items) \
        == ["web-0", "web-2"]
    assert _names(v1.list_pod_for_all_namespaces(
        field_selector="spec.nodeName=n1,metadata.namespace!=prod").items) == ["web-0", "web-2"]
    assert _names(v1.list_pod_for_all_namespaces(label_selector="").items) \
        == ["web-0", "web-1", "web-2", "web-3", "db-0"]
    # single object
    p = v1.read_namespaced_pod("web-1", "default")
    assert p.kind == "Pod" and p.spec.node_name == "n2"


@needs_client
def test_unsupported_field_selector_is_400(fake, clients):
    v1 = clients(fake)
    with pytest.raises(ApiException) as ei:
        v1.list_pod_for_all_namespaces(field_selector="spec.foo=bar")
    assert ei.value.status == 400
    st = _status_body(ei.value)
    assert st["kind"] == "Status" and st["reason"] == "BadRequest"
    assert st["message"] == "field label not supported: spec.foo"


@needs_client
def test_missing_pod_is_404_status(fake, clients):
    v1 = clients(fake)
    with pytest.raises(ApiException) as ei:
        v1.read_namespaced_pod("nope", "default")
    assert ei.value.status == 404
    st = _status_body(ei.value)
    assert st["reason"] == "NotFound" and st["message"] == 'pods "nope" not found'
    assert st["details"] == {"name": "nope", "kind": "pods"}


@needs_client
def test_pagination_is_a_consistent_snapshot(fake, clients):
    v1 = clients(fake)
    for i in range(5):
        fake.add_pod(make_pod("p%d" % i, node="n1"))
    rv = str(fake.resource_version)
    page = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1", limit=2)
    seen = _names(page.items)
    assert seen == ["p0", "p1"] and page.metadata.resource_version == rv
    assert page.metadata._continue
    # Changes after the first page are not in the later pages (all at the first page's RV).
    fake.add_pod(make_pod("p5", node="n1"))
    fake.delete_pod("default", "p4")
    pages = 1
    while page.metadata._continue:
        page = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1", limit=2,
                                              _continue=page.metadata._continue)
        assert page.metadata.resource_version == rv
        seen += _names(page.items)
        pages += 1
    assert seen == ["p0", "p1", "p2", "p3", "p4"] and pages == 3
    # Without selectors the server also says how many items remain.
    first = v1.list_pod_for_all_namespaces(limit=2)
    assert first.metadata.remaining_item_count == 3


@needs_client
def test_expired_continue_token_is_410(fake, clients):
    v1 = clients(fake)
    for i in range(3):
        fake.add_pod(make_pod("p%d" % i, node="n1"))
    page = v1.list_pod_for_all_namespaces(limit=1)
    fake.update_pod(make_pod("p0", node="n1", phase="Succeeded"))
    fake.compact()
    with pytest.raises(ApiException) as ei:
        v1.list_pod_for_all_namespaces(limit=1, _continue=page.metadata._continue)
    assert ei.value.status == 410
    st = _status_body(ei.value)
    assert st["reason"] == "Expired"
    assert st["message"].startswith("The provided continue parameter is too old")
    # The real server hands out a token to continue inconsistently (at the latest RV).
    nxt = v1.list_pod_for_all_namespaces(limit=5, _continue=st["metadata"]["continue"])
    assert _names(nxt.items) == ["p1", "p2"]
    assert nxt.metadata.resource_version == str(fake.resource_version)


@needs_client
def test_list_resource_version_semantics(fake, clients):
    v1 = clients(fake)
    fake.add_pod(make_pod("a", node="n1"))
    old = fake.resource_version
    fake.add_pod(make_pod("b", node="n1"))
    # Exact: the state at that RV.
    lst = v1.list_pod_for_all_namespaces(resource_version=str(old), resource_version_match="Exact")
    assert _names(lst.items) == ["a"] and lst.metadata.resource_version == str(old)
    # Not older than: the latest state.
    lst = v1.list_pod_for_all_namespaces(resource_version=str(old))
    assert _names(lst.items) == ["a", "b"]
    assert lst.metadata.resource_version == str(fake.resource_version)
    lst = v1.list_pod_for_all_namespaces(resource_version="0")
    assert _names(lst.items) == ["a", "b"]
    fake.compact()
    # An RV older than the compaction point: 410 for an exact list and for the legacy
    # "limit + resourceVersion" list; a not-older-than list still answers.
    for kw in ({"resource_version_match": "Exact"}, {"limit": 10}):
        with pytest.raises(ApiException) as ei:
            v1.list_pod_for_all_namespaces(resource_version=str(old), **kw)
        assert ei.value.status == 410, kw
        st = _status_body(ei.value)
        assert st["reason"] == "Expired" and st["code"] == 410
        assert st["message"] == "The resourceVersion for the provided list is too old."
    assert _names(v1.list_pod_for_all_namespaces(resource_version=str(old)).items) == ["a", "b"]
    # Bad combinations are refused like the real server does.
    with pytest.raises(ApiException) as ei:
        v1.list_pod_for_all_namespaces(resource_version_match="Exact")
    assert ei.value.status == 422
    with pytest.raises(ApiException) as ei:
        v1.list_pod_for_all_namespaces(resource_version="5", _continue="abc")
    assert ei.value.status == 400


@needs_client
def test_list_from_the_future_is_504_after_waiting(fake, clients):
    v1 = clients(fake)
    future = fake.resource_version + 100
    t0 = time.monotonic()
    with pytest.raises(ApiException) as ei:
        v1.list_pod_for_all_namespaces(resource_version=str(future))
    assert time.monotonic() - t0 >= 2.5
    assert ei.value.status == 504
    st = _status_body(ei.value)
    assert st["message"].startswith("Too large resource version: %d" % future)
    assert st["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


# ---------------------------------------------------------------------------------------------
# The official client: watch


@needs_client
def test_watch_events_in_order(fake, clients):
    v1 = clients(fake)
    fake.add_pod(make_pod("before", node="n1"))
    rv = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").metadata.resource_version
    fake.add_pod(make_pod("replayed", node="n1"))        # after rv: replayed from history
    fake.add_pod(make_pod("elsewhere", node="n2"))       # filtered out
    got = []
    w = kubernetes.watch.Watch()
    for ev in w.stream(v1.list_pod_for_all_namespaces, field_selector="spec.nodeName=n1",
                       resource_version=rv, timeout_seconds=3, _request_timeout=T(10)):
        if ev["type"] == "BOOKMARK":
            continue
        obj = ev["object"]
        assert isinstance(obj, kubernetes.client.V1Pod), ev
        got.append((ev["type"], obj.metadata.name, int(obj.metadata.resource_version)))
        # Live changes, made while the stream is open:
        if obj.metadata.name == "replayed" and ev["type"] == "ADDED":
            fake.add_pod(make_pod("live", node="n1"))
        elif obj.metadata.name == "live" and ev["type"] == "ADDED":
            fake.patch_pod("default", "live",
                           lambda p: p["status"].update(phase="Succeeded"))
        elif ev["type"] == "MODIFIED":
            assert obj.status.phase == "Succeeded"
            fake.delete_pod("default", "live")
        elif ev["type"] == "DELETED":
            w.stop()
    assert [(t, n) for t, n, _ in got] == [("ADDED", "replayed"), ("ADDED", "live"),
                                           ("MODIFIED", "live"), ("DELETED", "live")], got
    rvs = [r for _, _, r in got]
    assert rvs == sorted(rvs) and len(set(rvs)) == 4, "resourceVersions strictly increase"
    assert rvs[-1] == fake.resource_version, "DELETED carries the deletion's resourceVersion"


@needs_client
def test_watch_without_rv_starts_with_the_current_state(fake, clients):
    v1 = clients(fake)
    for n in ("b", "a"):
        fake.add_pod(make_pod(n, node="n1"))
    evs = [(e["type"], e["object"].metadata.name)
           for e in kubernetes.watch.Watch().stream(
               v1.list_namespaced_pod, "default", timeout_seconds=1, _request_timeout=T(10))]
    assert evs == [("ADDED", "a"), ("ADDED", "b")]


@needs_client
def test_watch_selector_transitions(fake, clients):
    """A pod that stops matching the field selector is DELETED for that watch, one that
    starts matching is ADDED (the watch cache's translation)."""
    v1 = clients(fake)
    fake.add_pod(make_pod("mover", node="n1"))
    rv = str(fake.resource_version)
    fake.patch_pod("default", "mover", lambda p: p["spec"].update(nodeName="n2"))
    moved_rv = fake.resource_version
    fake.patch_pod("default", "mover", lambda p: p["spec"].update(nodeName="n1"))
    evs = list(kubernetes.watch.Watch().stream(
        v1.list_pod_for_all_namespaces, field_selector="spec.nodeName=n1", resource_version=rv,
        timeout_seconds=1, _request_timeout=T(10)))
    assert [e["type"] for e in evs] == ["DELETED", "ADDED"], evs
    gone = evs[0]["object"]
    assert gone.spec.node_name == "n1", "the DELETED object is the last one that matched"
    assert gone.metadata.resource_version == str(moved_rv)


@needs_client
def test_watch_bookmarks(fakes, clients):
    fake = fakes(tls=True, bookmark_interval=0.5)
    v1 = clients(fake)
    fake.add_pod(make_pod("a", node="n1"))
    rv = str(fake.resource_version)
    evs = list(kubernetes.watch.Watch().stream(
        v1.list_pod_for_all_namespaces, field_selector="spec.nodeName=n1", resource_version=rv,
        timeout_seconds=2, allow_watch_bookmarks=True, _request_timeout=T(10)))
    assert evs and all(e["type"] == "BOOKMARK" for e in evs), evs
    # The client leaves bookmarks undecoded: the raw object is the real server's empty Pod.
    assert evs[0]["raw_object"] == {"kind": "Pod", "apiVersion": "v1",
                                    "metadata": {"resourceVersion": rv, "creationTimestamp": None},
                                    "spec": {"containers": None}, "status": {}}
    assert len(evs) >= 3, "every 0.5 s for 2 s, plus one 2 s before the timeout"
    # No bookmarks unless asked for.
    evs = list(kubernetes.watch.Watch().stream(
        v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=2,
        _request_timeout=T(10)))
    assert evs == []
    # A bookmark's RV moves on with changes the selector hides.
    fake.add_pod(make_pod("other", node="n2"))
    evs = list(kubernetes.watch.Watch().stream(
        v1.list_pod_for_all_namespaces, field_selector="spec.nodeName=n1", resource_version=rv,
        timeout_seconds=1, allow_watch_bookmarks=True, _request_timeout=T(10)))
    assert evs and {e["type"] for e in evs} == {"BOOKMARK"}, evs
    assert evs[0]["raw_object"]["metadata"]["resourceVersion"] == str(fake.resource_version)


@needs_client
def test_watch_from_compacted_rv_is_410(fake, clients):
    v1 = clients(fake)
    fake.add_pod(make_pod("a", node="n1"))
    old = fake.resource_version
    fake.add_pod(make_pod("b", node="n1"))
    compacted = fake.compact()
    # With timeout_seconds the client does not retry: the ERROR event becomes ApiException.
    with pytest.raises(ApiException) as ei:
        list(kubernetes.watch.Watch().stream(
            v1.list_pod_for_all_namespaces, resource_version=str(old), timeout_seconds=5,
            _request_timeout=T(10)))
    assert ei.value.status == 410
    assert ei.value.reason == "Expired: too old resource version: %d (%d)" % (old, compacted)
    # Without it, the client retries once from the same RV, then raises.
    fake.reset_counts()
    with pytest.raises(ApiException) as ei:
        list(kubernetes.watch.Watch().stream(v1.list_pod_for_all_namespaces,
                                             resource_version=str(old), _request_timeout=T(10)))
    assert ei.value.status == 410
    assert [r["params"]["resourceVersion"] for r in fake.requests(verb="watch")] \
        == [str(old), str(old)]
    # From the compaction point itself the watch is fine.
    assert list(kubernetes.watch.Watch().stream(
        v1.list_pod_for_all_namespaces, resource_version=str(compacted), timeout_seconds=1,
        _request_timeout=T(10))) == []


@needs_client
def test_watch_huge_object(fake, clients):
    """A 5 MiB object in a watch and in a list."""
    v1 = clients(fake)
    rv = str(fake.resource_version)
    fake.add_pod(huge_pod("big", node="n1"))
    fake.add_pod(make_pod("small", node="n1"))
    evs = list(kubernetes.watch.Watch().stream(
        v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1,
        _request_timeout=T(30)))
    assert [(e["type"], e["object"].metadata.name) for e in evs] == [("ADDED", "big"),
                                                                    ("ADDED", "small")]
    assert len(evs[0]["object"].metadata.annotations["pinion.test/padding"]) == 5 * 1024 * 1024
    assert _names(v1.list_pod_for_all_namespaces().items) == ["big", "small"]


@needs_client
def test_watch_small_chunks(fakes, clients):
    """Events cut across chunk boundaries (and sharing chunks) still decode."""
    fake = fakes(tls=True, watch_chunk_size=7)
    v1 = clients(fake)
    rv = str(fake.resource_version)
    for n in ("a", "b", "c"):
        fake.add_pod(make_pod(n, node="n1", annotations={"note": "x" * 1000}))
    evs = list(kubernetes.watch.Watch().stream(
        v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1,
        _request_timeout=T(30)))
    assert [(e["type"], e["object"].metadata.name) for e in evs] == [
        ("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]


# ---------------------------------------------------------------------------------------------
# The official client: auth, TLS, nodes, errors


@needs_client
def test_wrong_or_missing_token_is_401(fake, clients):
    for token in ("wrong", None):
        with pytest.raises(ApiException) as ei:
            clients(fake, token=token).list_pod_for_all_namespaces()
        assert ei.value.status == 401
        assert _status_body(ei.value) == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                          "status": "Failure", "message": "Unauthorized",
                                          "reason": "Unauthorized", "code": 401}
    assert fake.count(status=401) == 2


@needs_client
def test_token_file_is_reread(fakes, clients, tmp_path):
    tf = tmp_path / "token"
    tf.write_text("first\n")
    fake = fakes(tls=True, token_file=str(tf))
    clients(fake, token="first").list_pod_for_all_namespaces()
    tf.write_text("second\n")
    with pytest.raises(ApiException) as ei:
        clients(fake, token="first").list_pod_for_all_namespaces()
    assert ei.value.status == 401
    clients(fake, token="second").list_pod_for_all_namespaces()


@needs_client
def test_tls_verification(fake, clients):
    assert clients(fake).list_pod_for_all_namespaces().items == []
    with pytest.raises(urllib3.exceptions.MaxRetryError) as ei:
        clients(fake, ca=False).list_pod_for_all_namespaces()
    assert isinstance(ei.value.reason, urllib3.exceptions.SSLError), ei.value.reason
    assert "CERTIFICATE_VERIFY_FAILED" in str(ei.value.reason)
    wait_until(lambda: fake.state()["stats"]["tls_handshake_failures"] >= 1)
    # The CA really is the fake's own: the system store does not know it, openssl agrees.
    r = subprocess.run(["openssl", "verify", "-CAfile", fake.ca_file, fake.cert_file],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@needs_client
def test_client_certificate_authenticates(fake, clients):
    cert = fake.client_cert(cn="system:node:n1")
    assert clients(fake, token=None, cert=cert).list_pod_for_all_namespaces().items == []


@needs_client
def test_read_node_pod_cidr(fake, clients):
    v1 = clients(fake)
    fake.set_node("n1", pod_cidr="10.244.7.0/24")
    node = v1.read_node("n1")
    assert node.spec.pod_cidr == "10.244.7.0/24" and node.spec.pod_cid_rs == ["10.244.7.0/24"]
    fake.set_node("n1", pod_cidr="10.244.9.0/24")
    assert v1.read_node("n1").spec.pod_cidr == "10.244.9.0/24"
    with pytest.raises(ApiException) as ei:
        v1.read_node("n2")
    assert ei.value.status == 404


@needs_client
def test_429_with_retry_after(fake, clients):
    v1 = clients(fake)
    f = fake.inject("429", count=1, verbs=["list"], retry_after=7)
    with pytest.raises(ApiException) as ei:
        v1.list_pod_for_all_namespaces()
    assert ei.value.status == 429
    assert ei.value.headers["Retry-After"] == "7"
    st = _status_body(ei.value)
    assert st["reason"] == "TooManyRequests" and st["details"] == {"retryAfterSeconds": 7}
    assert f.hits == 1 and fake.faults() == []
    v1.list_pod_for_all_namespaces()  # count=1: the next one is fine
    assert [r["status"] for r in fake.requests(verb="list")] == [429, 200]
    assert fake.requests(verb="list")[0]["fault"] == "429"


@needs_client
def test_5xx_faults_match_verbs_and_paths(fake, clients):
    v1 = clients(fake)
    fake.set_node("n1", pod_cidr="10.0.0.0/24")
    fake.inject("503", count=None, verbs="list", path="/api/v1/pods", retry_after=2)
    fake.inject("500", count=1, verbs=["get"])
    for _ in range(2):
        with pytest.raises(ApiException) as ei:
            v1.list_pod_for_all_namespaces()
        assert ei.value.status == 503 and ei.value.headers["Retry-After"] == "2"
        assert _status_body(ei.value)["reason"] == "ServiceUnavailable"
    assert v1.list_namespaced_pod("default").items == [], "another path: no fault"
    with pytest.raises(ApiException) as ei:
        v1.read_node("n1")
    assert ei.value.status == 500 and _status_body(ei.value)["reason"] == "InternalError"
    assert v1.read_node("n1").spec.pod_cidr == "10.0.0.0/24"
    fake.clear_faults()
    v1.list_pod_for_all_namespaces()


# ---------------------------------------------------------------------------------------------
# Raw HTTP: the wire format and the faults


class Raw:
    """One HTTP/1.1 request on a fresh socket, read until the server closes it."""

    def __init__(self, status, headers, body, elapsed):
        self.status, self.headers, self.body, self.elapsed = status, headers, body, elapsed

    def chunks(self):
        """-> (list of chunk payloads, complete: the terminating chunk was seen,
        truncated: a chunk announced more bytes than arrived)."""
        out, data = [], self.body
        while data:
            line, sep, rest = data.partition(b"\r\n")
            if not sep:
                return out, False, True
            size = int(line, 16)
            if size == 0:
                return out, True, False
            if len(rest) < size + 2:
                return out, False, True
            out.append(rest[:size])
            data = rest[size + 2:]
        return out, False, False

    def lines(self):
        return b"".join(self.chunks()[0]).split(b"\n")


def raw(fake, path, token=TOKEN, timeout=10, method="GET"):
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", fake.port), timeout=T(timeout))
    try:
        if fake.tls:
            ctx = ssl.create_default_context(cafile=fake.ca_file)
            s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
        hdrs = "Host: 127.0.0.1\r\nConnection: close\r\n"
        if token:
            hdrs += "Authorization: Bearer %s\r\n" % token
        s.sendall(("%s %s HTTP/1.1\r\n%s\r\n" % (method, path, hdrs)).encode())
        data = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            data += b
    finally:
        s.close()
    elapsed = time.monotonic() - t0
    if not data:
        return Raw(None, {}, b"", elapsed)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        headers[k.strip().lower()] = v.strip()
    return Raw(int(lines[0].split()[1]), headers, body, elapsed)


def _three_pods(fake):
    rv = fake.resource_version
    for n in ("a", "b", "c"):
        fake.add_pod(make_pod(n, node="n1"))
    return rv


def test_raw_watch_wire_format(fakes):
    fake = fakes(bookmark_interval=0.4)
    rv = _three_pods(fake)
    r = raw(fake, "/api/v1/pods?watch=1&resourceVersion=%d&allowWatchBookmarks=true"
            "&timeoutSeconds=1" % rv)
    assert r.status == 200
    assert r.headers["transfer-encoding"] == "chunked"
    assert r.headers["content-type"] == "application/json"
    assert "content-length" not in r.headers
    chunks, complete, truncated = r.chunks()
    assert complete and not truncated, "the stream ends cleanly at timeoutSeconds"
    assert 0.9 <= r.elapsed < T(3)
    evs = [json.loads(c) for c in chunks]
    assert all(c.endswith(b"\n") and c.count(b"\n") == 1 for c in chunks), "one event per chunk"
    assert [e["type"] for e in evs[:3]] == ["ADDED"] * 3
    assert [e["object"]["metadata"]["name"] for e in evs[:3]] == ["a", "b", "c"]
    assert evs[0]["object"]["kind"] == "Pod" and evs[0]["object"]["apiVersion"] == "v1"
    assert {e["type"] for e in evs[3:]} == {"BOOKMARK"} and len(evs) >= 4
    # list items carry no kind/apiVersion; Go-style escaping of <>&
    fake.add_pod(make_pod("esc", node="n1", annotations={"x": "<a&b>"}))
    r = raw(fake, "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Desc")
    assert r.status == 200 and int(r.headers["content-length"]) == len(r.body)
    assert b"\\u003ca\\u0026b\\u003e" in r.body
    item = json.loads(r.body)["items"][0]
    assert "kind" not in item and "apiVersion" not in item


def test_raw_watch_compacted_is_an_error_event(fakes):
    fake = fakes()
    rv = _three_pods(fake)
    fake.compact()
    r = raw(fake, "/api/v1/pods?watch=true&resourceVersion=%d" % rv)
    assert r.status == 200, "a watch answers 410 inside the stream, not as the HTTP status"
    chunks, complete, _ = r.chunks()
    assert complete and len(chunks) == 1
    assert json.loads(chunks[0]) == {"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "too old resource version: %d (%d)" % (rv, fake.compacted_rv),
        "reason": "Expired", "code": 410}}


def test_raw_drop_mid_stream(fakes):
    fake = fakes()
    rv = _three_pods(fake)
    f = fake.inject("drop", verbs="watch", after_events=2)
    r = raw(fake, "/api/v1/pods?watch=1&resourceVersion=%d&timeoutSeconds=5" % rv)
    assert r.status == 200 and r.elapsed < T(3)
    chunks, complete, truncated = r.chunks()
    assert not complete and not truncated
    assert [json.loads(c)["object"]["metadata"]["name"] for c in chunks] == ["a", "b"]
    assert f.hits == 1
    e = fake.requests(verb="watch")[-1]
    assert e["fault"] == "drop" and e["events"] == 2 and e["status"] == 200
    # A list can be dropped too: headers, half the body, gone.
    fake.inject("drop", verbs="list")
    r = raw(fake, "/api/v1/pods")
    assert r.status == 200 and len(r.body) < int(r.headers["content-length"])


def test_raw_malformed_line(fakes):
    fake = fakes()
    rv = _three_pods(fake)
    fake.inject("malformed", verbs=["watch"], after_events=1)
    r = raw(fake, "/api/v1/pods?watch=1&resourceVersion=%d&timeoutSeconds=1" % rv)
    chunks, complete, _ = r.chunks()
    assert complete, "the stream goes on after the bad line"
    lines = [l for l in r.lines() if l]
    assert len(lines) == 4
    assert json.loads(lines[0])["object"]["metadata"]["name"] == "a"
    with pytest.raises(ValueError):
        json.loads(lines[1])
    assert [json.loads(l)["object"]["metadata"]["name"] for l in lines[2:]] == ["b", "c"]
    fake.inject("malformed", verbs=["list"])
    r = raw(fake, "/api/v1/pods")
    assert r.status == 200
    with pytest.raises(ValueError):
        json.loads(r.body)


def test_raw_truncated_chunk(fakes):
    fake = fakes()
    rv = _three_pods(fake)
    fake.inject("truncate", verbs=["watch"], after_events=1)
    r = raw(fake, "/api/v1/pods?watch=1&resourceVersion=%d&timeoutSeconds=5" % rv)
    chunks, complete, truncated = r.chunks()
    assert truncated and not complete and len(chunks) == 1
    assert r.elapsed < T(3)


def test_raw_close_delay_and_status_faults(fakes):
    fake = fakes()
    fake.inject("close", verbs="list")
    r = raw(fake, "/api/v1/pods")
    assert r.status is None and r.body == b"", "closed without a response"
    fake.inject("delay", delay=0.6)
    r = raw(fake, "/api/v1/pods")
    assert r.status == 200 and r.elapsed >= 0.6
    fake.inject("503", delay=0.3, message="etcd leader changed")
    r = raw(fake, "/api/v1/pods")
    assert r.status == 503 and r.elapsed >= 0.3 and "retry-after" not in r.headers
    assert json.loads(r.body)["message"] == "etcd leader changed"
    assert [e["status"] for e in fake.requests()] == [0, 200, 503]
    with pytest.raises(ValueError):
        fake.inject("explode")


def test_outage_refuse_and_recover_on_the_same_port(fakes):
    fake = fakes(tls=True)
    port = fake.port
    rv = fake.resource_version
    result = {}

    def watcher():
        result["r"] = raw(fake, "/api/v1/pods?watch=1&resourceVersion=%d" % rv, timeout=20)

    t = threading.Thread(target=watcher)
    t.start()
    try:
        fake.wait_watches(1, timeout=T(5))
        fake.outage("refuse")
        t.join(T(5))
        assert not t.is_alive(), "the open watch was dropped"
        _, complete, _ = result["r"].chunks()
        assert result["r"].status == 200 and not complete
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        # The control port stays up through the outage.
        c = http.client.HTTPConnection("127.0.0.1", fake.control_port, timeout=T(5))
        c.request("GET", "/_fake/state")
        assert json.loads(c.getresponse().read())["outage"] == "refuse"
        c.close()
        fake.recover()
        assert fake.port == port
        r = raw(fake, "/api/v1/pods")
        assert r.status == 200
    finally:
        fake.recover()
        t.join(T(5))


def test_outage_hang(fakes):
    fake = fakes()
    fake.outage("hang")
    s = socket.create_connection(("127.0.0.1", fake.port), timeout=1)
    try:
        s.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                  % TOKEN.encode())
        with pytest.raises(socket.timeout):
            s.recv(1)
        e = wait_until(lambda: fake.requests(verb="list"))[0]
        assert e["fault"] == "hang" and e["status"] is None
        fake.recover()
        s.settimeout(T(5))
        assert s.recv(1) == b"", "closed unanswered at recovery"
    finally:
        s.close()
    assert raw(fake, "/api/v1/pods").status == 200


def test_request_log(fakes):
    fake = fakes(bookmark_interval=None)
    fake.add_pod(make_pod("a", node="n1"))
    t0 = time.time()
    assert raw(fake, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&limit=500").status == 200
    assert raw(fake, "/api/v1/namespaces/default/pods/a").status == 200
    assert raw(fake, "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1").status == 200
    assert raw(fake, "/api/v1/pods", token="bad").status == 401
    reqs = fake.requests()
    assert [(e["verb"], e["path"], e["status"]) for e in reqs] == [
        ("list", "/api/v1/pods", 200), ("get", "/api/v1/namespaces/default/pods/a", 200),
        ("watch", "/api/v1/pods", 200), ("list", "/api/v1/pods", 401)]
    assert reqs[0]["params"] == {"fieldSelector": "spec.nodeName=n1", "limit": "500"}
    assert reqs[0]["query"] == "fieldSelector=spec.nodeName%3Dn1&limit=500"
    assert reqs[2]["events"] == 1 and 0.9 <= reqs[2]["duration"] < T(3)
    assert all(t0 <= e["time"] <= time.time() for e in reqs)
    assert fake.counts() == {"list": 2, "get": 1, "watch": 1}
    assert fake.count(verb=["list", "get"], status=200) == 2
    assert fake.requests(since=reqs[1]) == reqs[2:]
    # The same over HTTP, from the control port and from the API port (not logged itself).
    for port in (fake.control_port, fake.port):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=T(5))
        c.request("GET", "/_fake/requests?verb=watch")
        body = json.loads(c.getresponse().read())
        c.close()
        assert body["count"] == 1 and body["requests"][0]["params"]["watch"] == "1"
    fake.reset_counts()
    assert fake.requests() == [] and fake.counts() == {}


# ---------------------------------------------------------------------------------------------
# The command line and the out-of-process control API


def _ctl(control_url, method, path, body=None):
    host, port = control_url.rsplit("/", 1)[1].rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=T(10))
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def test_command_line(tmp_path):
    tf = tmp_path / "token"
    tf.write_text("tok1\n")
    script = os.path.join(SRCDIR, "tests", "fakes", "kube_apiserver.py")
    r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True,
                       timeout=T(30))
    assert r.returncode == 0 and "--print-url" in r.stdout
    proc = subprocess.Popen([sys.executable, script, "--port", "0", "--tls", "--token-file",
                             str(tf), "--print-url", "--node", "n1=10.244.3.0/24"],
                            stdout=subprocess.PIPE, text=True)
    try:
        url, ca = proc.stdout.readline().split()
        tag, control = proc.stdout.readline().split()
        assert url.startswith("https://127.0.0.1:") and os.path.isfile(ca) and tag == "CONTROL"
        st, pod = _ctl(control, "POST", "/_fake/pods/add", make_pod("cli", node="n1"))
        assert st == 201 and pod["metadata"]["resourceVersion"]
        st, f = _ctl(control, "POST", "/_fake/inject", {"fault": "429", "verbs": ["list"],
                                                        "retry_after": 3})
        assert st == 201 and f["retry_after"] == 3

        def get(path, token="tok1"):
            ctx = ssl.create_default_context(cafile=ca)
            u = url.rsplit(":", 1)
            c = http.client.HTTPSConnection("127.0.0.1", int(u[1]), context=ctx, timeout=T(10))
            c.request("GET", path, headers={"Authorization": "Bearer " + token})
            resp = c.getresponse()
            out = (resp.status, resp.getheader("Retry-After"), json.loads(resp.read()))
            c.close()
            return out

        assert get("/api/v1/pods")[:2] == (429, "3")
        status, _, body = get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
        assert status == 200 and [p["metadata"]["name"] for p in body["items"]] == ["cli"]
        assert get("/api/v1/nodes/n1")[2]["spec"]["podCIDR"] == "10.244.3.0/24"
        tf.write_text("tok2\n")
        assert get("/api/v1/pods")[0] == 401
        assert get("/api/v1/pods", token="tok2")[0] == 200
        st, out = _ctl(control, "POST", "/_fake/outage", {"mode": "refuse"})
        assert st == 200 and out["outage"] == "refuse"
        with pytest.raises(ConnectionRefusedError):
            get("/api/v1/pods", token="tok2")
        _ctl(control, "POST", "/_fake/recover", {})
        assert get("/api/v1/pods", token="tok2")[0] == 200
        st, reqs = _ctl(control, "GET", "/_fake/requests?verb=list")
        assert [e["status"] for e in reqs["requests"]] == [429, 200, 401, 200, 200]
        st, err = _ctl(control, "POST", "/_fake/pods/update", make_pod("ghost"))
        assert st == 404 and "not found" in err["error"]
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(T(10))
        proc.stdout.close()
    assert rc == 0
    assert not os.path.exists(os.path.dirname(ca)), "the CA's temp dir is removed on SIGTERM"


def test_many_watchers(fakes):
    """One fake serves many clients at once (the 100-daemon checks rely on it)."""
    fake = fakes(bookmark_interval=None)
    rv = fake.resource_version
    results = []

    def one():
        results.append(raw(fake, "/api/v1/pods?watch=1&resourceVersion=%d&timeoutSeconds=3"
                           % rv, timeout=20))

    threads = [threading.Thread(target=one) for _ in range(50)]
    for t in threads:
        t.start()
    fake.wait_watches(50, timeout=T(10))
    fake.add_pod(make_pod("x", node="n1"))
    for t in threads:
        t.join(T(20))
    assert len(results) == 50
    for r in results:
        chunks, complete, _ = r.chunks()
        assert complete and [json.loads(c)["type"] for c in chunks] == ["ADDED"]


def test_keep_alive_across_list_and_watch(fakes):
    """Like libcurl and urllib3 do: list, watch and list again on one connection."""
    fake = fakes()
    fake.add_pod(make_pod("a", node="n1"))
    c = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=T(10))
    auth = {"Authorization": "Bearer " + TOKEN}
    try:
        c.request("GET", "/api/v1/pods", headers=auth)
        r = c.getresponse()
        rv = json.loads(r.read())["metadata"]["resourceVersion"]
        c.request("GET", "/api/v1/pods?watch=1&timeoutSeconds=1&resourceVersion=" + rv,
                  headers=auth)
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"" and not r.will_close
        c.request("GET", "/api/v1/pods", headers=auth)
        assert c.getresponse().read()
    finally:
        c.close()
    assert len({e["client"] for e in fake.requests()}) == 1, "one connection"


def test_rv0_ignores_limit_like_the_watch_cache(fakes):
    fake = fakes(rv0_ignores_limit=True)
    for n in ("a", "b", "c"):
        fake.add_pod(make_pod(n, node="n1"))
    body = json.loads(raw(fake, "/api/v1/pods?resourceVersion=0&limit=1").body)
    assert len(body["items"]) == 3 and "continue" not in body["metadata"]
    body = json.loads(raw(fake, "/api/v1/pods?limit=1").body)
    assert len(body["items"]) == 1 and body["metadata"]["continue"]


# ---------------------------------------------------------------------------------------------
# certificates.k8s.io/v1 CertificateSigningRequests (the identity module's kubernetes signer)


def test_csr_create_get_approve_with_the_official_client(fake):
    """The fake's CSR endpoints as the official client sees them: create, AlreadyExists on a
    second create with the same name, get, 404, and an approved request carrying a certificate
    the fake's CA signed for the CSR's key and subject."""
    import base64 as b64
    cfg = kubernetes.client.Configuration()
    cfg.host = fake.url
    cfg.ssl_ca_cert = fake.ca_file
    cfg.retries = 0
    cfg.api_key = {"authorization": "Bearer " + TOKEN}
    api_client = kubernetes.client.ApiClient(cfg)
    try:
        certs = kubernetes.client.CertificatesV1Api(api_client)
        csr_pem = subprocess.run(
            ["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "/dev/null", "-subj", "/O=system:nodes/CN=system:node:n1"],
            capture_output=True, check=True).stdout
        body = kubernetes.client.V1CertificateSigningRequest(
            metadata=kubernetes.client.V1ObjectMeta(name="node-csr-test"),
            spec=kubernetes.client.V1CertificateSigningRequestSpec(
                request=b64.b64encode(csr_pem).decode(),
                signer_name="kubernetes.io/kube-apiserver-client-kubelet",
                usages=["digital signature", "client auth"], expiration_seconds=600))
        created = certs.create_certificate_signing_request(body)
        assert created.metadata.name == "node-csr-test" and created.metadata.uid
        with pytest.raises(ApiException) as e:
            certs.create_certificate_signing_request(body)
        assert e.value.status == 409 and _status_body(e.value)["reason"] == "AlreadyExists"
        got = certs.read_certificate_signing_request("node-csr-test")
        assert got.spec.signer_name == "kubernetes.io/kube-apiserver-client-kubelet"
        assert not got.status.certificate and not got.status.conditions
        with pytest.raises(ApiException) as e:
            certs.read_certificate_signing_request("nope")
        assert e.value.status == 404
        fake.approve_csr("node-csr-test")
        got = certs.read_certificate_signing_request("node-csr-test")
        assert [c.type for c in got.status.conditions] == ["Approved"]
        pem = b64.b64decode(got.status.certificate)
        p = subprocess.run(["openssl", "verify", "-CAfile", fake.ca_file], input=pem, capture_output=True)
        assert p.returncode == 0, p.stderr
        subj = subprocess.run(["openssl", "x509", "-noout", "-subject", "-nameopt", "RFC2253"], input=pem,
                              capture_output=True, text=False).stdout.decode()
        assert "CN=system:node:n1,O=system:nodes" in subj
        assert [i.metadata.name for i in certs.list_certificate_signing_request().items] == ["node-csr-test"]
        # A malformed request is 422 Invalid, as the real apiserver answers.
        body.metadata.name = "bad"
        body.spec.signer_name = "example.com/nope"
        with pytest.raises(ApiException) as e:
            certs.create_certificate_signing_request(body)
        assert e.value.status == 422
    finally:
        api_client.rest_client.pool_manager.clear()
        api_client.close()
