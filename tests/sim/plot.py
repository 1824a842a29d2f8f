#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Plots fleet-sim's CSV time series: offered cost, requests and synced agents per second for
each policy, with the apiserver's capacity and its outages; for the policies that write
(naive-writes, pinion-writes) their write requests per second too, dashed.

Usage: plot.py FLEET.CSV OUT.PNG [--xmax SECONDS]
Needs Debian's python3-matplotlib (run it with /usr/bin/python3)."""

import argparse
import csv
import math
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"legacy": "#d62728", "client-go": "#1f77b4", "pinion": "#2ca02c",
          "naive-writes": "#ff7f0e", "pinion-writes": "#9467bd"}
# client-go and pinion share their backoff: a wider line underneath keeps both visible where they
# coincide (during the outage, in steady state).
WIDTHS = {"client-go": 2.8}


def read(path):
    series = OrderedDict()
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            s = series.setdefault(row["policy"], {k: [] for k in
                                                  ("t", "offered", "requests", "synced", "up",
                                                   "writes")})
            s["t"].append(float(row["t"]))
            s["offered"].append(float(row["offered_cost"]))
            s["requests"].append(int(row["requests"]))
            s["synced"].append(int(row["synced"]))
            s["up"].append(row["server_up"] == "1")
            s["writes"].append(int(row.get("writes") or 0))
            capacity = float(row["capacity"])
    if not series:
        sys.exit("plot.py: %s has no rows" % path)
    return series, capacity


def down_spans(s):
    """[start, end) of every stretch of windows in which the apiserver was down."""
    spans, start = [], None
    for t, up in zip(s["t"], s["up"]):
        if not up and start is None:
            start = t
        elif up and start is not None:
            spans.append((start, t))
            start = None
    if start is not None:
        spans.append((start, s["t"][-1] + 1))
    return spans


def nonzero(values):
    return [v if v > 0 else math.nan for v in values]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--xmax", type=float, help="last second shown (default: fits the recoveries)")
    args = ap.parse_args()

    series, capacity = read(args.csv)
    first = next(iter(series.values()))
    outage = down_spans(first)[0]
    agents = max(max(s["synced"]) for s in series.values())
    xmin = min(s["t"][0] for s in series.values())
    xmax = args.xmax or max(180.0, min(max(s["t"][-1] for name, s in series.items()
                                           if name != "legacy") + 30, 600.0))

    fig, (ax_cost, ax_req, ax_sync) = plt.subplots(3, 1, sharex=True, figsize=(11, 9.5),
                                                   gridspec_kw={"height_ratios": [3, 2, 2]})
    for ax in (ax_cost, ax_req, ax_sync):
        ax.axvspan(*outage, color="0.85", zorder=0)
        ax.grid(True, which="major", color="0.9", linewidth=0.6)
    ax_cost.text((outage[0] + outage[1]) / 2, 0.97, "outage", transform=ax_cost.get_xaxis_transform(),
                 ha="center", va="top", color="0.35")

    for name, s in series.items():
        color = COLORS.get(name, None)
        for i, (a, b) in enumerate(down_spans(s)[1:]):
            for ax in (ax_cost, ax_req, ax_sync):
                ax.axvspan(a, b, color=color, alpha=0.08, zorder=0,
                           label=("%s: apiserver down again" % name) if ax is ax_cost and i == 0 else None)
        lw = WIDTHS.get(name, 1.3)
        ax_cost.plot(s["t"], nonzero(s["offered"]), color=color, lw=lw, label=name, drawstyle="steps-post")
        ax_req.plot(s["t"], nonzero(s["requests"]), color=color, lw=lw, drawstyle="steps-post")
        if name.endswith("-writes"):
            ax_req.plot(s["t"], nonzero(s["writes"]), color=color, lw=1.0, ls="--", drawstyle="steps-post",
                        label="%s: writes" % name)
        ax_sync.plot(s["t"], s["synced"], color=color, lw=lw, drawstyle="steps-post")

    ax_cost.axhline(capacity, color="black", ls="--", lw=1.2, label="capacity (%g/s)" % capacity)
    ax_cost.set_yscale("log")
    ax_cost.set_ylabel("offered cost per second")
    fig.suptitle("Fleet of %d agents through a %g s apiserver outage" % (agents, outage[1] - outage[0]))
    ax_cost.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=5, fontsize=9, frameon=False)

    ax_req.set_yscale("log")
    ax_req.set_ylabel("requests sent per second")
    if any(name.endswith("-writes") for name in series):
        ax_req.legend(loc="center right", fontsize=8, frameon=False)

    ax_sync.set_ylabel("agents synced")
    ax_sync.set_ylim(0, agents * 1.05)
    ax_sync.set_xlabel("seconds since the outage began")
    ax_sync.set_xlim(xmin, xmax)

    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
