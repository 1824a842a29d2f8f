# SPDX-License-Identifier: MIT
"""Faults a test injects into the test apiserver."""

import re

from kube_common import FAULT_KINDS, VERBS

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
