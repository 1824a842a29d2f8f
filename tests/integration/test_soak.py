# SPDX-License-Identifier: MIT
"""The short version of the soak run (tests/bench/soak.py; `make bench-soak` is the long one):
a few thousand pod changes with server disturbances. The agent must converge on exactly the
server's and the pods-dir's pods, exit cleanly (under the ASan build: no LeakSanitizer report),
and end with no more descriptors than it had after warm-up. RSS figures are printed, not
asserted: they are the benchmark's to report."""

import argparse
import io
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))

import soak  # noqa: E402

from pinion_testlib import diag  # noqa: E402


def test_short_soak_converges_without_leaks():
    out = io.StringIO()
    modules = soak.available_modules()
    args = argparse.Namespace(events=4000, rate=1500, max_pods=150, bounce_every=600, seed=7,
                              modules=modules, valgrind=False, json=None)
    r = soak.run(args, out=out)
    diag(out.getvalue())
    assert r.get("converged"), out.getvalue()
    assert r["exit_problem"] is None, r["exit_problem"]
    # 6 disturbances: the four of the apiserver, then nginx and ZooKeeper restarted.
    assert r["counts"]["bounce"] == 6 and r["counts"]["static"] == 80
    assert r["fds"]["end"] <= r["fds"]["warm"] + 2, r["fds"]
    # The other modules' end states were checked by run() (it raises when they do not converge).
    assert ("zkreg" in modules) == ("zookeeper_members" in r), r
    assert ("configsync" in modules) == ("config_versions" in r), r
    assert ("identity" in modules) == (r.get("certificates_issued", 0) > 0), r
