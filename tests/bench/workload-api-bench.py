#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark of the SPIFFE Workload API (gRPC, [identity] workload-socket) beside the local
HTTP/JSON API serving the same identities, both measured in this run against agents of one
configuration with the same pods.

  first SVID     a pod's process (python3-grpcio, as workload_api_client.py runs it): a new
                 channel → its first FetchX509SVID response, against connect → the full reply
                 of GET /v1/identity from the same process; --calls rounds, the order
                 alternating per round; p50 and p99 of each, and their ratio. Also the same RPC
                 in HTTP/2 frames written by hand: the server's share, without grpcio's.
  JWT-SVID       the same for FetchJWTSVID against POST /v1/identity/jwt.
  memory         the agent's Rss and Pss (/proc/PID/smaps_rollup) with 0, 100, 500 and 1000
                 streams open, spread over the pods: FetchX509SVID streams on one connection
                 (as one client process multiplexes them), FetchX509SVID streams on a
                 connection each, GET /v1/identity?wait=10m long-polls and /v1/pods?watch=1
                 streams (root). KiB per stream: (with N open − with none) / N, of the
                 anonymous memory's Pss (what a stream adds; Rss grows the same).

Each memory kind gets a fresh agent started from the same configuration and pod files: freed
heap memory stays in the process, so a kind measured after another would reuse what the first
left behind and look cheaper than it is. The latency rows share one agent.
Usage: workload-api-bench.py [--calls 200] [--pods 20] [--streams 100,500,1000]
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from identity_testlib import PodCgroup, new_uid  # noqa: E402
from pinion_testlib import Agent, make_pod, wait_until  # noqa: E402
from test_identity_jwt import key_pem, new_key, write_secret  # noqa: E402
from workload_api_testlib import PYTHON, PythonClient, generate_messages  # noqa: E402
from benchjson import BenchJson  # noqa: E402

LOAD = os.path.join(HERE, "workload-api-load.py")
TD = "example.org"
NOBODY = 65534
# The HTTP API's limits (docs/api.md): 32 connections per pod, 512 of limited callers (pod
# processes among them). A long-poll holds a connection, so pods hold at most 512 of them.
HTTP_POD_CONNECTIONS = 32
HTTP_LIMITED_CONNECTIONS = 512
GRPC_CALLER_CONNECTIONS = 64
LIMITS = {"http-poll": "the HTTP API allows 32 connections per pod and 512 of pod processes and other limited "
                       "callers in all, docs/api.md",
          "grpc-conn": "the Workload API allows a caller 64 connections, docs/workload-api.md"}


class Setup:
    """The configuration, pod files and cgroups every agent of the run shares."""

    def __init__(self, n_pods):
        self.work = tempfile.mkdtemp(prefix="workload-api-bench-")
        os.chmod(self.work, 0o755)
        self.pb = None
        self.pods = []
        self.cgroups = []
        try:
            self._make(n_pods)
        except BaseException:
            self.close()
            raise

    def _make(self, n_pods):
        write_secret(os.path.join(self.work, "jwt.key"), key_pem(new_key()))
        write_secret(os.path.join(self.work, "jwt-bundle"), b'{"keys": []}', 0o644)
        self.pb = generate_messages()
        for i in range(n_pods):
            uid = new_uid()
            self.pods.append(("w%d" % i, make_pod("w%d" % i, namespace="bench", uid=uid, service_account="sa%d" % i,
                                                  ip="10.7.%d.%d" % (i >> 8, i & 255),
                                                  annotations={"pinion.io/identity": "true"})))
            self.cgroups.append(PodCgroup(uid, hierarchy="pids"))

    def start_agent(self):
        a = Agent(config={"agent": {"log-level": "info", "socket-mode": "0666"}})
        a.sections["identity"] = {"signer": "local", "trust-domain": TD, "ca-dir": os.path.join(a.dir, "ca"),
                                  "pod-tls-dir": os.path.join(a.dir, "pods-tls"),
                                  "jwt-key-file": os.path.join(self.work, "jwt.key"),
                                  "jwt-bundle-file": os.path.join(self.work, "jwt-bundle")}
        a.write_config()
        try:
            for name, pod in self.pods:
                a.write_pod(name, pod)
            a.start()
            wait_until(lambda: os.path.exists(self.workload_socket(a)), desc="workload socket")
            wait_until(lambda: sum(1 for w in a.get_json("/v1/identity")["workloads"] if w.get("state") == "issued")
                       == len(self.pods), timeout=60, desc="every pod's certificate")
        except BaseException:
            a.close()
            raise
        return a

    @staticmethod
    def workload_socket(a):
        return os.path.join(a.runtime_dir, "workload.sock")

    def client(self, a, cg, *args, as_root=False):
        """The load client as a process of the pod of cg (nobody), or as root on the host."""
        def pre():
            if cg:
                cg.preexec(None if as_root else NOBODY)()
        return subprocess.Popen([PYTHON, LOAD] + [str(x) for x in args] + ["--http", a.socket],
                                env=PythonClient(self.pb).env(self.workload_socket(a)), preexec_fn=pre,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def close(self):
        for cg in self.cgroups:
            cg.close()
        if self.pb:
            shutil.rmtree(self.pb, ignore_errors=True)
        shutil.rmtree(self.work, ignore_errors=True)


def stop(a):
    """Stops the agent; a crash or a sanitizer's report at exit fails the benchmark."""
    a.check_alive()
    problem = a.close()
    assert problem is None, problem


def finish(p, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError("load client timed out: %s" % err[-2000:])
    assert p.returncode == 0, err[-3000:]
    return out


def smaps(pid):
    """{"Rss": KiB, "Pss": KiB, ...} of the whole process."""
    res = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                res[parts[0].rstrip(":")] = int(parts[1])
    return res


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def pct(xs, p):
    """The p-th percentile, nearest rank."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100.0 * len(s) + 0.5)) - 1))]


def quantiles(xs):
    """The x of a sorted series of len(xs) values: each value's percentile."""
    return [round(100.0 * (i + 0.5) / len(xs), 3) for i in range(len(xs))]


# ---- latency -------------------------------------------------------------------------------

def bench_latency(setup, calls):
    a = setup.start_agent()
    try:
        p = setup.client(a, setup.cgroups[0], "latency", "--calls", calls, "--jwt")
        res = json.loads(finish(p, timeout=60 + calls))
        stop(a)
        return res
    finally:
        a.close()


# ---- memory --------------------------------------------------------------------------------

KINDS = {
    # kind: (label, held by root on the host rather than by the pods)
    "grpc-mux": ("FetchX509SVID streams, one connection", False),
    "grpc-conn": ("FetchX509SVID streams, a connection each", False),
    "http-poll": ("GET /v1/identity?wait=10m long-polls", False),
    "http-watch": ("GET /v1/pods?watch=1 streams (root)", True),
}


def kind_limit(kind, n_pods):
    if kind == "http-poll":
        return min(HTTP_LIMITED_CONNECTIONS, n_pods * HTTP_POD_CONNECTIONS)
    if kind == "grpc-conn":
        return n_pods * GRPC_CALLER_CONNECTIONS
    return None


def split(n, parts):
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def settle(a, want_fds, timeout=30):
    """Waits until the agent holds want_fds descriptors and has been idle a moment."""
    wait_until(lambda: fds(a.pid) >= want_fds, timeout=timeout,
               desc="agent holding %d descriptors (has %d)" % (want_fds, fds(a.pid)))
    time.sleep(0.3)


def bench_memory(setup, kind, levels):
    """[(N, smaps)] for 0 and each level of open streams of kind, opened incrementally."""
    label, as_root = KINDS[kind]
    limit = kind_limit(kind, len(setup.pods))
    levels = [n for n in levels if limit is None or n <= limit]
    a = setup.start_agent()
    holders = []
    try:
        # Both APIs' first use (OpenSSL's decoders, libnghttp2's and libmicrohttpd's first
        # connection) before the baseline, so that the per-stream figure holds no one-off cost.
        finish(setup.client(a, setup.cgroups[0], "latency", "--calls", 2))
        a.get_json("/v1/pods")
        time.sleep(0.5)
        base_fds = fds(a.pid)
        rows = [(0, smaps(a.pid), base_fds)]
        if as_root:
            holders = [setup.client(a, None, "hold", kind, as_root=True)]
        elif kind == "grpc-mux":
            holders = [setup.client(a, setup.cgroups[0], "hold", kind)]
        else:
            holders = [setup.client(a, cg, "hold", kind) for cg in setup.cgroups]
        opened = [0] * len(holders)
        for n in levels:
            want = split(n, len(holders))
            for h, w, o in zip(holders, want, opened):
                h.stdin.write("open %d\n" % (w - o))
                h.stdin.flush()
            for i, h in enumerate(holders):
                line = h.stdout.readline()
                assert line, "holder %d of %s: %s" % (i, kind, h.stderr.read()[-2000:])
                opened[i] = json.loads(line)["open"]
            assert sum(opened) == n, (kind, opened)
            conns = n if kind != "grpc-mux" else 1
            settle(a, base_fds + conns)
            if kind.startswith("grpc"):
                assert a.metrics().value("pinion_grpc_streams_open", server="workload") == n
            rows.append((n, smaps(a.pid), fds(a.pid)))
        for h in holders:
            h.stdin.write("close\n")
            h.stdin.flush()
        for h in holders:
            finish(h)
        holders = []
        # What stays after every stream closed: the reason each kind has an agent of its own.
        wait_until(lambda: fds(a.pid) <= base_fds, timeout=30, desc="agent back to %d descriptors" % base_fds)
        time.sleep(0.3)
        after = smaps(a.pid)
        stop(a)
        return label, limit, rows, after
    finally:
        for h in holders:
            h.kill()
            h.wait()
        a.close()


# The anonymous memory's Pss (heap and anonymous maps: what a stream costs). The whole Pss also
# holds the agent's share of the library pages it maps, which moves with how many other
# processes (the load clients among them) map the same libraries.
ANON = "Pss_Anon"
PAIRS = (("grpc-mux", "http-poll"), ("grpc-conn", "http-poll"), ("grpc-mux", "http-watch"), ("grpc-conn", "http-watch"))


def per_stream(rows, key):
    """{N: KiB per stream} from the rows of one kind."""
    base = rows[0][1][key]
    return {n: (m[key] - base) / n for n, m, _ in rows[1:]}


# ---- report --------------------------------------------------------------------------------

def ms(x):
    return round(x * 1000, 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--pods", type=int, default=20)
    ap.add_argument("--streams", default="100,500,1000")
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    args = ap.parse_args()
    levels = [int(x) for x in args.streams.split(",")]
    bj = BenchJson("workload-api", "Workload API: gRPC against the HTTP/JSON API, first SVID and memory per stream")
    # 1,000 connections and then some on each side of every socket.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(soft, 8192)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))

    setup = Setup(args.pods)
    try:
        lat = bench_latency(setup, args.calls)
        mem = {kind: bench_memory(setup, kind, levels) for kind in KINDS}
    finally:
        setup.close()

    print("Workload API benchmark: %d rounds of each call from one pod's process; memory with streams "
          "spread over %d pods" % (args.calls, args.pods))
    print("")
    print("| measure | gRPC | HTTP/JSON | ratio gRPC / HTTP |")
    print("|---|---|---|---|")
    for name, what, peer in (("grpc", "first X509-SVID: FetchX509SVID, new grpcio channel → first response",
                              "GET /v1/identity"),
                             ("h2", "first X509-SVID: FetchX509SVID in hand-written HTTP/2 frames, connect → "
                              "first response", "GET /v1/identity"),
                             ("grpc_jwt", "JWT-SVID: FetchJWTSVID, new grpcio channel → response",
                              "POST /v1/identity/jwt")):
        g, h = lat[name], lat["http_jwt" if name.endswith("jwt") else "http"]
        for p in (50, 99):
            gp, hp = pct(g, p), pct(h, p)
            print("| %s, p%d | %.2f ms | %.2f ms | %.2f |" % (what, p, gp * 1000, hp * 1000, gp / hp))
            bj.row("%s, p%d (%d calls)" % (what, p, len(g)), ms(gp), ms(hp), peer + ", connect → full reply", "ms")
    print("")
    print("| streams open | " + " | ".join(KINDS[k][0] for k in KINDS) + " |")
    print("|---|" + "---|" * len(KINDS))
    anon = {k: per_stream(mem[k][2], ANON) for k in KINDS}
    rss = {k: per_stream(mem[k][2], "Rss") for k in KINDS}
    for n in [0] + levels:
        cells = []
        for k in KINDS:
            rows = {r[0]: r[1] for r in mem[k][2]}
            if n not in rows:
                cells.append("over the limits for these pods (%d)" % mem[k][1])
                continue
            m = rows[n]
            cells.append("Rss %d, Pss %d, anon %d KiB%s" % (m["Rss"], m["Pss"], m[ANON], "" if not n else
                                                          " (%.1f / %.1f KiB per stream)" % (anon[k][n], rss[k][n])))
        print("| %d | %s |" % (n, " | ".join(cells)))
    print("")
    print("KiB per stream (anonymous Pss), gRPC / HTTP:")
    for n in levels:
        for k, peer in PAIRS:
            if n in anon[k] and n in anon[peer]:
                print("  %4d open: %-40s %7.1f  %-38s %7.1f  ratio %.2f" % (
                    n, KINDS[k][0], anon[k][n], KINDS[peer][0], anon[peer][n], anon[k][n] / anon[peer][n]))
    # The report's rows: each gRPC kind beside the long-polls (the same wait for a new SVID), or
    # beside the watch streams where the pods cannot hold that many long-polls.
    for n in levels:
        for k in ("grpc-mux", "grpc-conn"):
            peer = "http-poll" if n in anon["http-poll"] else "http-watch"
            if n in anon[k] and n in anon[peer]:
                bj.row("agent memory per open stream (anonymous Pss), %d open: %s" % (n, KINDS[k][0]),
                       round(anon[k][n], 2), round(anon[peer][n], 2), KINDS[peer][0], "KiB")
    for n in levels:
        if n in anon["http-poll"] and n in anon["http-watch"]:
            bj.row("agent memory per open stream (anonymous Pss), %d open: %s" % (n, KINDS["http-watch"][0]),
                   round(anon["http-watch"][n], 2), round(anon["http-poll"][n], 2), KINDS["http-poll"][0], "KiB")
    top = levels[-1]
    for k in ("grpc-mux", "grpc-conn"):
        if top in rss[k] and top in rss["http-watch"]:
            bj.row("agent Rss per open stream, %d open: %s" % (top, KINDS[k][0]), round(rss[k][top], 2),
                   round(rss["http-watch"][top], 2), KINDS["http-watch"][0], "KiB")
    bj.note("After every stream of a kind closed, the agent kept (anonymous Pss, KiB, against before the "
            "first one): " + "; ".join("%s %d (%d)" % (KINDS[k][0], mem[k][3][ANON], mem[k][2][0][1][ANON])
                                        for k in KINDS) + ".")
    bj.note("The agent with no stream open (Rss / Pss / anonymous Pss, KiB), in the run of each kind: " + "; ".join(
        "%s %d / %d / %d" % (KINDS[k][0], mem[k][2][0][1]["Rss"], mem[k][2][0][1]["Pss"], mem[k][2][0][1][ANON])
        for k in KINDS) + ".")
    for k in KINDS:
        for n in levels:
            if n not in anon[k]:
                bj.note("%d %s: not measured, over what %d pods may hold (%d: %s)." % (
                    n, KINDS[k][0], len(setup.pods), mem[k][1], LIMITS[k]))
    bj.note("Latency: %d rounds from one process in a pod's cgroup (uid nobody), each a fresh connection: "
            "a new grpcio channel (own subchannel) until the first response, against a Unix socket "
            "connect, the HTTP/1.1 request and the reply read to its end; the order alternates per "
            "round and one untimed round goes first. The JWT rows do the same with FetchJWTSVID (audience "
            "svc) and POST /v1/identity/jwt." % args.calls)
    bj.note("Memory: each kind in a fresh agent of the same configuration and the same %d pods (freed heap "
            "stays in the process, so a kind measured after another would reuse it); the streams are "
            "opened in steps of the row counts, spread evenly over the pods (one pod for the multiplexed "
            "gRPC streams, root on the host for /v1/pods?watch=1), each answered (SVID received, watch "
            "SYNCED) or, for a long-poll, held by the agent, before Rss and Pss are read from "
            "/proc/PID/smaps_rollup. KiB per stream is (with N open − with none) / N, of the anonymous "
            "memory's Pss (Pss_Anon: heap and anonymous maps) and of Rss; the whole Pss also holds the "
            "agent's share of library pages, which moves with how many other processes (the load "
            "clients among them) map the same libraries." % args.pods)
    bj.series("first X509-SVID, every call sorted: connect → response", "percentile of the calls", "ms",
              [(label, quantiles(lat[key]), sorted(v * 1000 for v in lat[key]))
               for key, label in (("grpc", "gRPC FetchX509SVID (python3-grpcio, new channel)"),
                                  ("h2", "FetchX509SVID in hand-written HTTP/2 frames"),
                                  ("http", "GET /v1/identity"))])
    bj.series("agent anonymous Pss with N streams open", "streams open", "KiB",
              [(KINDS[k][0], [r[0] for r in mem[k][2]], [r[1][ANON] for r in mem[k][2]]) for k in KINDS])
    bj.write(args.json, extra={"latency_seconds": lat,
                               "memory": {k: [{"streams": n, "smaps_kib": m, "fds": f} for n, m, f in mem[k][2]]
                                          for k in KINDS},
                               "memory_after_close": {k: mem[k][3] for k in KINDS}})


if __name__ == "__main__":
    main()
