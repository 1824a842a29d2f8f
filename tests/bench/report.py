#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""report: turns the benchmarks' --json files (tests/bench/benchjson.py) into one Markdown report
with a PNG plot per benchmark beside it.

    tests/bench/report.py --snapshot machine.json          # at the start: date, cores, kernel, load
    tests/bench/report.py --machine machine.json --out DIR [--status status.txt] A.json B.json ...

--out DIR gets REPORT.md and bench-<name>.png. --status names a file of "<name> <exit status>
<seconds>" lines (what `make bench` writes): a benchmark that failed or wrote no JSON is listed
as failed, with its exit status. Needs python3-matplotlib for the plots (without it the report
says so and has none). Exit status 0 when the report was written (failed benchmarks are in it),
2 on bad usage.
"""

import argparse
import datetime
import json
import os
import platform
import sys


def snapshot():
    """What the machine is and how busy it is, now."""
    with open("/proc/loadavg") as f:
        load = [float(x) for x in f.read().split()[:3]]
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "epoch": datetime.datetime.now(datetime.timezone.utc).timestamp(),
            "cores": os.cpu_count(), "cpu": cpu, "mem_gib": round(mem_kib / 1048576, 1),
            "kernel": "%s %s" % (platform.system(), platform.release()), "loadavg": load}


def fmt(v):
    """A number as a person reads it: thousands separated, about three significant digits."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return "{:,}".format(v)
    if isinstance(v, float):
        a = abs(v)
        if a >= 1000:
            return "{:,.0f}".format(v)
        if a >= 100:
            return "%.1f" % v
        if a >= 1:
            return "%.2f" % v
        if a == 0:
            return "0"
        return "%.3g" % v
    return str(v)


def with_unit(v, unit):
    s = fmt(v)
    return "%s %s" % (s, unit) if s and unit else s


def met_cell(row):
    if row.get("met") is None:
        return "" if not row.get("goal") else "—"
    return "**met**" if row["met"] else "**NOT met**"


def cell(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def rows_table(rows):
    out = ["| figure | pinion | peer | peer value | ratio (pinion / peer) | goal | met |",
           "|---|---:|---|---:|---:|---|---|"]
    for r in rows:
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            cell(r["figure"]), with_unit(r.get("pinion"), r.get("unit", "")), cell(r.get("peer_name") or ""),
            with_unit(r.get("peer"), r.get("unit", "")), "" if r.get("ratio") is None else "%.3g" % r["ratio"],
            cell(r.get("goal") or ""), met_cell(r)))
    return out


def plot(doc, path):
    """One PNG with a panel per series of the benchmark. False without matplotlib or series."""
    series = doc.get("series") or []
    if not series:
        return False
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(len(series), 1, figsize=(9, 3.2 * len(series)), squeeze=False)
    for ax, s in zip(axes[:, 0], series):
        kind = s.get("kind", "line")
        if kind == "hist":
            data = [ln["x"] for ln in s["lines"] if ln["x"]]
            labels = [ln["label"] for ln in s["lines"] if ln["x"]]
            if data:
                ax.hist(data, bins=40, label=labels, histtype="step", linewidth=1.5)
        else:
            for ln in s["lines"]:
                if kind == "step":
                    ax.step(ln["x"], ln["y"], where="post", label=ln["label"])
                else:
                    ax.plot(ln["x"], ln["y"], marker="." if len(ln["x"]) < 60 else None, label=ln["label"])
        for i, m in enumerate(s.get("marks") or []):
            ax.axvline(m["x"], color="grey", linestyle="--", linewidth=1)
            ax.annotate(m["label"], (m["x"], 1), xycoords=("data", "axes fraction"), xytext=(3, -12),
                        textcoords="offset points", fontsize=8, color="dimgrey")
        ax.set_title(s["title"], fontsize=10)
        ax.set_xlabel(s["xlabel"])
        ax.set_ylabel(s["ylabel"])
        ax.grid(alpha=0.3)
        if len(s["lines"]) > 1 or kind == "hist":
            ax.legend(fontsize=8)
    fig.suptitle(doc.get("title", doc["name"]), fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def load_status(path):
    """{name: (exit status, seconds)} from make bench's status file."""
    status = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2:
                    status[parts[0]] = (int(parts[1]), float(parts[2]) if len(parts) > 2 else None)
    return status


def machine_lines(start, end):
    out = []
    if start:
        out.append("- date: %s (start)%s" % (start["date"], "; report written %s" % end["date"] if end else ""))
        if end and start.get("epoch"):
            out.append("- wall time from start to report: %.1f min" % ((end["epoch"] - start["epoch"]) / 60))
        out.append("- machine: %d cores%s, %.1f GiB memory, %s" % (
            start["cores"], " (%s)" % start["cpu"] if start.get("cpu") else "", start["mem_gib"], start["kernel"]))
        out.append("- load average at the start (1 / 5 / 15 min): %s — the machine is shared (other builds, a "
                   "fuzzer); every figure is beside its peer measured in the same run, under the same load" %
                   " / ".join("%.2f" % x for x in start["loadavg"]))
    if end:
        out.append("- load average at the end: %s" % " / ".join("%.2f" % x for x in end["loadavg"]))
    return out


def summary(docs, status):
    """One line per benchmark: how it went and how many goals it met."""
    out = ["| benchmark | result | time | goals met |", "|---|---|---:|---|"]
    names = list(docs) + [n for n in status if n not in docs]
    for name in names:
        doc = docs.get(name)
        rc, secs = status.get(name, (None, None))
        if doc is None:
            out.append("| %s | **failed** (exit %s, no results) | %s | |" % (
                name, rc, "" if secs is None else "%.0f s" % secs))
            continue
        goals = [r for r in doc["rows"] if r.get("met") is not None]
        ok = doc.get("ok") and (rc in (None, 0))
        out.append("| [%s](#%s) | %s | %s | %d of %d |" % (
            name, anchor(doc), "ok" if ok else "**failed** (exit %s)" % rc,
            "%.0f s" % (secs if secs is not None else doc.get("seconds") or 0),
            sum(1 for r in goals if r["met"]), len(goals)))
    return out


def anchor(doc):
    """GitHub's anchor for the section heading of this benchmark."""
    text = heading(doc).lower()
    return "".join(c for c in text.replace(" ", "-") if c.isalnum() or c in "-_")


def heading(doc):
    return doc.get("title") or doc["name"]


def section(doc, png, status):
    out = ["## " + heading(doc), ""]
    rc, secs = status.get(doc["name"], (None, None))
    cmd = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(doc.get("argv") or []))
    out.append("Run: `%s`, started %s, %.0f s%s." % (
        cell(cmd), doc.get("started", "?"), secs if secs is not None else (doc.get("seconds") or 0),
        "" if doc.get("ok") and rc in (None, 0) else " — **the benchmark reported a failure (exit %s)**" % rc))
    out.append("")
    out += rows_table(doc["rows"])
    out.append("")
    for n in doc.get("notes") or []:
        out.append(n)
        out.append("")
    if png:
        out.append("![%s](%s)" % (doc["name"], png))
        out.append("")
    return out


def soak_lines(doc):
    """The soak's own summary: warm-up against the end and the leak check, in words."""
    r = doc
    if "rss_kib" not in r:
        return []
    m, f = r["rss_kib"], r["fds"]
    checker = r.get("leak_checker")
    return during_churn(r) + ["Soak in short: %s changes at %s/s; VmRSS %s KiB at the end of warm-up, %s KiB at the end "
            "(%.3f), max after warm-up %s KiB; descriptors %d → %d; leak check: %s." % (
                fmt(r["events"]), fmt(r.get("events_per_second")), fmt(m["warm"]), fmt(m["end"]),
                r["rss_end_over_warm"], fmt(m["max_after_warm"]), f["warm"], f["end"],
                ("%s, %s" % (checker, "no leak reported" if r.get("exit_problem") is None
                             else "**%s**" % r["exit_problem"])) if checker else
                "not in this run (the agent ran without LeakSanitizer or valgrind; see soak-leak)"), ""]


def during_churn(r):
    """From the soak's own samples (its series: VmRSS and changes made, sampled together): the RSS
    over the changes after warm-up, apart from the final sample taken after the convergence wait,
    so that a step at the end is told apart from a growth per change."""
    try:
        rss = next(x for x in r["series"] if x["title"].startswith("agent VmRSS"))["lines"][0]["y"]
        done = next(x for x in r["series"] if x["title"].startswith("changes made"))["lines"][0]["y"]
    except (KeyError, StopIteration, IndexError):
        return []
    warm_at = int(r["events"] * 0.2)
    during = [kib for kib, n in zip(rss, done) if warm_at <= n < r["events"]]
    if len(rss) != len(done) or not during:
        return []
    warm = r["rss_kib"]["warm"]
    return ["VmRSS while the changes were made after warm-up (%d samples): %s – %s KiB, the last one "
            "%s KiB (%.3f of warm-up); the final sample, after the changes stopped and the agent was "
            "checked for convergence, %s KiB (%.3f)." % (
                len(during), fmt(min(during)), fmt(max(during)), fmt(during[-1]), during[-1] / max(warm, 1),
                fmt(rss[-1]), rss[-1] / max(warm, 1)), ""]


def write_report(docs, out_dir, start, end, status):
    lines = ["# pinion benchmark report", "",
             "Written by `make bench` (`tests/bench/report.py` from each benchmark's `--json`). Every "
             "figure stands beside the peer it was measured against in the same run, with the ratio "
             "pinion / peer (below 1 is smaller: faster for times, less for sizes); goals are the "
             "issues' goals. What each benchmark does: the docstring at the top of its script and the "
             "docs/benchmarks.md. Rerun: `make bench` in a build directory (the settings are "
             "in `tests/bench/run-all.sh`).", ""]
    lines += machine_lines(start, end)
    lines.append("")
    lines += summary(docs, status)
    lines.append("")
    for name, doc in docs.items():
        png = None
        if plot(doc, os.path.join(out_dir, "bench-%s.png" % name)):
            png = "bench-%s.png" % name
        lines += section(doc, png, status)
        if name.startswith("soak"):
            lines += soak_lines(doc)
    with open(os.path.join(out_dir, "REPORT.md"), "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--snapshot", help="write the machine's snapshot here and exit")
    ap.add_argument("--machine", help="the snapshot taken at the start")
    ap.add_argument("--status", help="make bench's status file: name, exit status, seconds per line")
    ap.add_argument("--out", help="directory for REPORT.md and the PNGs")
    ap.add_argument("--end", help="the snapshot at the end of the run, to rewrite a report from the same "
                                  "results later (default: now; written to OUT/machine-end.json)")
    ap.add_argument("json", nargs="*")
    args = ap.parse_args(argv)
    if args.snapshot:
        with open(args.snapshot, "w") as f:
            json.dump(snapshot(), f, indent=1)
        return 0
    if not args.out:
        ap.error("--out is needed")
    os.makedirs(args.out, exist_ok=True)
    docs = {}
    for path in args.json:
        if not os.path.exists(path):
            continue  # a benchmark that died before writing; the status file names it
        with open(path) as f:
            doc = json.load(f)
        for key in ("name", "rows"):
            if key not in doc:
                sys.stderr.write("%s: not a benchmark result (no %s)\n" % (path, key))
                return 2
        docs[doc["name"]] = doc
    start = None
    if args.machine:
        with open(args.machine) as f:
            start = json.load(f)
    if args.end:
        with open(args.end) as f:
            end = json.load(f)
    else:
        end = snapshot()
        with open(os.path.join(args.out, "machine-end.json"), "w") as f:
            json.dump(end, f, indent=1)
    write_report(docs, args.out, start, end, load_status(args.status))
    print("report: %s (%d benchmarks)" % (os.path.join(args.out, "REPORT.md"), len(docs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
