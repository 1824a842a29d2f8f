# SPDX-License-Identifier: MIT
"""What a test does to the test apiserver's serving: faults, outages, dropping connections and
watches, and the request log (every API request, reads and writes, with its verb)."""

import socket
import threading
import time

from kube_faults import Fault


class _OpsMixin:
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
        if verb in ("create", "patch", "update"):
            # What a write sent, for tests that check what the agent wrote.
            e["body"] = getattr(handler, "request_body", b"").decode("utf-8", "replace")
            e["content_type"] = handler.headers.get("Content-Type")
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
