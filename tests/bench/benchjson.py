# SPDX-License-Identifier: MIT
"""The small JSON schema every benchmark in tests/bench writes with --json, read by report.py.

    {"name": "zkreg", "title": "...", "argv": [...], "started": "2026-...Z", "seconds": 61.2,
     "ok": true,
     "rows": [{"figure": "creates/s", "pinion": 15528, "peer": 3349, "peer_name": "kazoo async",
               "ratio": 4.64, "unit": "/s", "goal": "ratio >= 2", "met": true}, ...],
     "notes": ["free text, one paragraph each"],
     "series": [{"title": "...", "xlabel": "...", "ylabel": "...", "kind": "line|step|hist",
                 "marks": [{"x": 12.5, "label": "end of warm-up"}],
                 "lines": [{"label": "pinion", "x": [...], "y": [...]}, ...]}]}

A row's pinion and peer are numbers (or null when there is none); ratio is pinion / peer unless
the benchmark gives its own; goal is the issue's goal in words (null if the issue sets none) and
met whether this run met it (null without a goal). A benchmark whose peer is the agent itself
earlier in the run (soak) names that peer in peer_name.
"""

import datetime
import json
import sys
import time


class BenchJson:
    def __init__(self, name, title):
        self.doc = {"name": name, "title": title, "argv": list(sys.argv),
                    "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "seconds": None, "ok": None, "rows": [], "notes": [], "series": []}
        self._t0 = time.monotonic()

    def row(self, figure, pinion, peer=None, peer_name=None, unit="", goal=None, met=None, ratio=None):
        if ratio is None and isinstance(pinion, (int, float)) and isinstance(peer, (int, float)) and peer:
            ratio = pinion / peer
        self.doc["rows"].append({"figure": figure, "pinion": pinion, "peer": peer, "peer_name": peer_name,
                                 "ratio": None if ratio is None else round(ratio, 4), "unit": unit,
                                 "goal": goal, "met": None if met is None else bool(met)})

    def note(self, text):
        self.doc["notes"].append(text)

    def series(self, title, xlabel, ylabel, lines, kind="line", marks=()):
        """lines: [(label, xs, ys)]; kind: line, step or hist (ys ignored for hist); marks:
        [(x, label)] drawn as vertical lines (the end of warm-up, an outage's bounds)."""
        self.doc["series"].append({"title": title, "xlabel": xlabel, "ylabel": ylabel, "kind": kind,
                                   "marks": [{"x": x, "label": lbl} for x, lbl in marks],
                                   "lines": [{"label": lbl, "x": list(xs), "y": list(ys)} for lbl, xs, ys in lines]})

    def write(self, path, ok=True, extra=None):
        """Writes the file (no-op without a path). extra: more keys to keep in the same document
        (a benchmark's own older JSON fields)."""
        if not path:
            return
        doc = dict(extra or {})
        doc.update(self.doc)
        doc["seconds"] = round(time.monotonic() - self._t0, 1)
        doc["ok"] = bool(ok)
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
