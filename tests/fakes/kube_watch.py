# SPDX-License-Identifier: MIT
"""The test apiserver's watch streams: initial state, history replay, live events, bookmarks,
selector transitions, and the stream faults (drop, malformed, truncate)."""

import bisect
import copy
import time

from kube_common import _parse_bool, _parse_int, status_object
from kube_objects import _Event, _event_line
from kube_selectors import _Matcher


class _WatchMixin:
    def _convert(self, ev, matcher, res):
        """A history event as this watcher sees it: (type, object) or None (the watch
        cache's translation of selector transitions)."""
        if res.view is not None:
            ev = _Event(ev.rv, ev.resource, ev.type, ev.key, res.show(ev.obj),
                        res.show(ev.prev) if ev.prev is not None else None)
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
        obj = {"kind": res.kind, "apiVersion": res.api_version,
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
                objs = self._objects[res.store]
                initial = [("ADDED", o) for o in (res.show(objs[k]) for k in sorted(objs))
                           if matcher(o)]
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
                    evs = [c for c in (self._convert(ev, matcher, res) for ev in self._history[i:]
                                       if ev.resource == res.store) if c is not None]
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
