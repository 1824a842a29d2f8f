# SPDX-License-Identifier: MIT
"""The apiserver module against the test apiserver (tests/fakes/kube_apiserver.py, itself
checked with the official client): pods follow the apiserver, 410 relists exactly once, a 5xx
outage costs a request count inside the backoff envelope, Retry-After is honoured, corrupt and
cut streams and huge objects are survived without losing the store, the token file rotates
without a restart, TLS is verified, and N local watchers cost the apiserver one watch."""

import json
import os
import socket
import sys
import threading
import time

import pytest

from pinion_testlib import SRCDIR, diag, wait_until

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver, huge_pod, make_pod  # noqa: E402

NODE = "test-node"
TOKEN = "s3cret-token-A"


@pytest.fixture
def fake():
    f = FakeApiserver(tls=True, token=TOKEN).start()
    yield f
    f.stop()


def agent_with(agent_factory, fake, tmp_dir, **keys):
    token_file = os.path.join(tmp_dir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    section = {
        "url": fake.url,
        "token-file": token_file,
        "ca-file": fake.ca_file,
        "backoff-initial": "100ms",
        "backoff-max": "1s",
        "watch-timeout-min": "30s",
    }
    section.update(keys)
    a = agent_factory(config={"apiserver": section})
    a.token_file = token_file
    return a


def pod_names(agent):
    return sorted(p["namespace"] + "/" + p["name"] for p in agent.get_json("/v1/pods")["pods"])


def apiserver_status(agent):
    return [m for m in agent.status()["modules"] if m["name"] == "apiserver"][0]


def wait_state(agent, state, timeout=10):
    wait_until(lambda: apiserver_status(agent)["state"] == state, timeout, desc="apiserver module %s" % state)


def test_pods_follow_the_apiserver(agent_factory, fake, tmp_dir):
    fake.add_pod(make_pod("web-1", node=NODE))
    fake.add_pod(make_pod("elsewhere", node="other-node"))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_until(lambda: pod_names(a) == ["default/web-1"], 10, desc="the listed pod")
    wait_state(a, "running")

    fake.add_pod(make_pod("web-2", node=NODE, ip="10.1.2.4"))
    wait_until(lambda: pod_names(a) == ["default/web-1", "default/web-2"], 10, desc="the added pod")
    pod = a.get_json("/v1/pods/default/web-2")
    assert pod["ips"] == ["10.1.2.4"] and pod["source"] == "apiserver", pod

    fake.patch_pod("default", "web-2", lambda p: p["metadata"].setdefault("labels", {}).update({"v": "2"}))
    wait_until(lambda: a.get_json("/v1/pods/default/web-2")["labels"].get("v") == "2", 10, desc="the update")
    fake.delete_pod("default", "web-1")
    wait_until(lambda: pod_names(a) == ["default/web-2"], 10, desc="the deletion")

    details = apiserver_status(a)["details"]
    assert details["synced"] is True and details["lists"] == 1, details
    assert fake.count(verb="list") == 1  # everything after the first list came by watch
    m = a.metrics()
    assert m.value("pinion_apiserver_requests_total", verb="list", code="200") == 1
    assert m.value("pinion_apiserver_cache_pods") == 1


def test_410_relists_exactly_once(agent_factory, fake, tmp_dir):
    fake.add_pod(make_pod("web-1", node=NODE))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_state(a, "running")
    fake.wait_watches(1)
    lists_before = fake.count(verb="list")

    # While the agent cannot see it, the apiserver moves on and compacts its history: the resume
    # from the agent's resourceVersion gets 410.
    fake.outage("refuse")
    fake.add_pod(make_pod("web-2", node=NODE))
    fake.compact()
    fake.recover()
    a.wait_log(r"too old for the apiserver, relisting")
    wait_until(lambda: fake.count(verb="list") == lists_before + 1, 10, desc="one relist")
    wait_until(lambda: fake.count(verb="watch", status=200) >= 2, 10, desc="watching again")
    time.sleep(1.5)
    assert fake.count(verb="list") == lists_before + 1, fake.requests()
    assert pod_names(a) == ["default/web-1", "default/web-2"]
    assert a.metrics().value("pinion_apiserver_relists_total") == 1
    wait_state(a, "running")


def envelope(window, initial, cap, factor=2.0, jitter=1.0):
    """How many retries a backoff of (initial, factor, cap, jitter) can fit in window seconds:
    (fewest, most): the slowest sequence takes the full jitter every time, the fastest none."""
    def fits(scale):
        t, base, n = 0.0, initial, 0
        while True:
            t += base * scale
            if t > window:
                return n
            n += 1
            base = min(base * factor, cap)
    return fits(1.0 + jitter), fits(1.0)


def test_outage_stays_inside_the_backoff_envelope(agent_factory, fake, tmp_dir):
    fake.add_pod(make_pod("web-1", node=NODE))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_state(a, "running")
    fake.wait_watches(1)

    window = 6.0
    fake.inject("503", count=None)
    t0 = time.time()
    fake.close_watches()
    time.sleep(window)
    fake.clear_faults()
    sent = len(fake.requests(since=t0, status=503))
    lo, hi = envelope(window, 0.1, 1.0)
    diag("5xx outage of %.0fs: %d requests (envelope %d..%d; a fixed 1 s retry sends %d)"
         % (window, sent, lo + 1, hi + 1, int(window)))
    # +1: the first attempt right after the cut comes before any backoff.
    assert lo + 1 - 1 <= sent <= hi + 1 + 1, (sent, lo, hi)
    # The store kept the pod all along, and the module said why it was degraded.
    assert pod_names(a) == ["default/web-1"]
    wait_state(a, "running", timeout=5)
    assert fake.count(verb="list") == 1  # resumed from its resourceVersion, no relist


def test_retry_after_is_honoured(agent_factory, fake, tmp_dir):
    fake.add_pod(make_pod("web-1", node=NODE))
    fake.inject("429", count=1, verbs=["list"], retry_after=2)
    a = agent_with(agent_factory, fake, tmp_dir, **{"backoff-max": "5s"})
    wait_until(lambda: pod_names(a) == ["default/web-1"], 10, desc="the pod after the 429")
    lists = fake.requests(verb="list")
    assert [r["status"] for r in lists] == [429, 200], lists
    gap = lists[1]["time"] - lists[0]["time"]
    assert gap >= 2.0, "retried %.2fs after a Retry-After: 2" % gap
    assert apiserver_status(a)["details"]["failures"] == 1


@pytest.mark.parametrize("fault", ["malformed", "truncate", "drop"])
def test_bad_streams_are_survived(agent_factory, fake, tmp_dir, fault):
    fake.add_pod(make_pod("web-1", node=NODE))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_state(a, "running")
    fake.wait_watches(1)
    fake.inject(fault, count=1, verbs=["watch"], after_events=1)
    fake.close_watches()  # the next watch carries the fault
    fake.add_pod(make_pod("web-2", node=NODE))
    fake.add_pod(make_pod("web-3", node=NODE))
    wait_until(lambda: pod_names(a) == ["default/web-1", "default/web-2", "default/web-3"], 15,
               desc="every pod despite the %s stream" % fault)
    assert a.running()
    wait_state(a, "running")


def test_huge_object_is_skipped_not_fatal(agent_factory, fake, tmp_dir):
    fake.add_pod(make_pod("web-1", node=NODE))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_state(a, "running")
    fake.add_pod(huge_pod("huge", node=NODE, size=10 * 1024 * 1024))
    a.wait_log(r"Skipped a watch event over")
    fake.add_pod(make_pod("web-2", node=NODE))
    wait_until(lambda: "default/web-2" in pod_names(a), 10, desc="later events")
    assert "default/web-1" in pod_names(a)
    assert a.metrics().value("pinion_apiserver_errors_total", kind="oversized-event") == 1


def test_token_file_rotates_without_restart(agent_factory, fake, tmp_dir):
    fake.add_pod(make_pod("web-1", node=NODE))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_state(a, "running")
    fake.wait_watches(1)
    pid = a.pid

    fake.set_token("rotated-token-B")
    fake.close_watches()
    wait_until(lambda: fake.count(status=401) >= 1, 10, desc="a 401 for the old token")
    wait_until(lambda: "401" in (apiserver_status(a)["reason"] or ""), 10, desc="degraded by the 401")
    with open(a.token_file + ".new", "w") as f:
        f.write("rotated-token-B\n")
    os.rename(a.token_file + ".new", a.token_file)
    wait_state(a, "running", timeout=10)
    assert a.pid == pid
    fake.add_pod(make_pod("web-2", node=NODE))
    wait_until(lambda: "default/web-2" in pod_names(a), 10, desc="events with the new token")
    assert "rotated-token-B" not in a.log_text() and TOKEN not in a.log_text()


def test_unreachable_apiserver_keeps_the_pods(agent_factory, fake, tmp_dir):
    fake.add_pod(make_pod("web-1", node=NODE))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_state(a, "running")
    fake.outage("refuse")
    wait_state(a, "degraded")
    assert pod_names(a) == ["default/web-1"]
    assert a.get("/v1/health").status == 200  # degraded is not unhealthy
    fake.recover()
    wait_state(a, "running", timeout=10)
    assert fake.count(verb="list") == 1


def test_tls_is_verified(agent_factory, fake, tmp_dir):
    other = FakeApiserver(tls=True, token=TOKEN).start()  # a CA that did not sign fake's cert
    try:
        fake.add_pod(make_pod("web-1", node=NODE))
        a = agent_with(agent_factory, fake, tmp_dir, **{"ca-file": other.ca_file})
        wait_state(a, "degraded")
        assert pod_names(a) == []
        assert fake.count() == 0  # no request got through the handshake
        assert a.status()["ready"] is True  # an unreachable apiserver does not hold up READY
    finally:
        other.stop()


class LocalWatch:
    """A client of GET /v1/pods?watch=1 on the agent's socket, reading NDJSON events out of the
    chunked response as they come."""

    def __init__(self, agent):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(agent.socket)
        self.sock.sendall(b"GET /v1/pods?watch=1 HTTP/1.1\r\nHost: pinion\r\n\r\n")
        self.buf = b""

    def events(self):
        # Chunk-size lines are hex digits; event lines are JSON objects.
        text = self.buf.replace(b"\r\n", b"\n")
        return [json.loads(l) for l in text.split(b"\n") if l.startswith(b"{") and l.endswith(b"}")]

    def wait_events(self, n, timeout=10):
        self.sock.settimeout(timeout)
        while len(self.events()) < n:
            data = self.sock.recv(65536)
            if not data:
                break
            self.buf += data
        return self.events()

    def quiet_for(self, seconds):
        """True if nothing at all arrives for that long."""
        self.sock.settimeout(seconds)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return True
        self.buf += data
        return not data

    def close(self):
        self.sock.close()


def test_local_watchers_share_one_apiserver_watch(agent_factory, fake, tmp_dir):
    fake.add_pod(make_pod("web-1", node=NODE))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_state(a, "running")
    fake.wait_watches(1)
    watches = [LocalWatch(a) for _ in range(20)]
    try:
        for w in watches:
            assert [e["type"] for e in w.wait_events(2)] == ["ADDED", "SYNCED"], w.events()
        fake.add_pod(make_pod("web-2", node=NODE))
        for w in watches:
            e = w.wait_events(3)[2]
            assert e["type"] == "ADDED" and e["pod"]["name"] == "web-2", w.events()
        assert fake.count(verb="watch") == 1  # twenty sidecars, one apiserver watch
    finally:
        for w in watches:
            w.close()


def test_relist_announces_no_spurious_updates(agent_factory, fake, tmp_dir):
    for i in range(5):
        fake.add_pod(make_pod("web-%d" % i, node=NODE))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_state(a, "running")
    w = LocalWatch(a)
    try:
        assert len(w.wait_events(6)) == 6  # 5 ADDED + SYNCED
        fake.outage("refuse")

        def annotate(p):
            p["metadata"].setdefault("annotations", {})["x"] = "1"

        def unannotate(p):
            del p["metadata"]["annotations"]["x"]

        fake.patch_pod("default", "web-0", annotate)
        fake.patch_pod("default", "web-0", unannotate)
        fake.compact()  # the pod changed and changed back while the agent could not see it
        fake.recover()
        wait_until(lambda: a.metrics().value("pinion_apiserver_relists_total") == 1, 15, desc="the relist")
        assert w.quiet_for(1.0), w.events()[6:]  # nothing changed, so nothing announced
        assert len(w.events()) == 6
    finally:
        w.close()


def test_large_list_is_paged(agent_factory, fake, tmp_dir):
    # The agent asks for pages of 500; a server that honours the limit answers with a continue
    # token, and the agent follows it before it applies the list as a whole.
    for i in range(620):
        fake.add_pod(make_pod("p-%03d" % i, node=NODE))
    a = agent_with(agent_factory, fake, tmp_dir)
    wait_until(lambda: a.get_json("/v1/pods")["count"] == 620, 20, desc="all 620 pods")
    lists = fake.requests(verb="list")
    assert len(lists) == 2, [r["params"] for r in lists]
    assert lists[0]["params"].get("limit") == "500" and "continue" not in lists[0]["params"]
    assert lists[1]["params"].get("continue") and "resourceVersion" not in lists[1]["params"]
    wait_state(a, "running")


def test_in_cluster_environment(agent_factory, fake, tmp_dir):
    # No url: the service environment a DaemonSet pod gets names the apiserver; token and CA
    # come from the config here (in a pod: the mounted service account).
    fake.add_pod(make_pod("web-1", node=NODE))
    token_file = os.path.join(tmp_dir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN)
    a = agent_factory(config={"apiserver": {"token-file": token_file, "ca-file": fake.ca_file}},
                      env={"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(fake.port)})
    wait_until(lambda: pod_names(a) == ["default/web-1"], 10, desc="pods via the service environment")
    assert apiserver_status(a)["details"]["url"] == "https://127.0.0.1:%d" % fake.port


def test_list_410_backs_off_and_does_not_block_ready(agent_factory, fake, tmp_dir):
    # A server that answers every list with 410 gets one consistent relist at once, then
    # backoff like any failure; READY=1 still comes (the module says why it is degraded).
    fake.inject("410", count=None, verbs=["list"])
    a = agent_with(agent_factory, fake, tmp_dir)
    assert a.status()["ready"] is True
    wait_state(a, "degraded")
    time.sleep(2)
    lists = fake.count(verb="list")
    lo, hi = envelope(2.0, 0.1, 1.0)
    assert lists <= hi + 3, lists  # not a tight loop (without backoff: ~10 per second)
    fake.clear_faults()
    fake.add_pod(make_pod("web-1", node=NODE))
    wait_until(lambda: pod_names(a) == ["default/web-1"], 10, desc="the list once 410s stop")
