#!/usr/bin/python3
"""Benchmark of the identity module, each figure beside a peer doing the same work in this run.

  node bootstrap   piniond started → node certificate on disk (key, CSR, signature, atomic
                   write), with the local CA and with a real `cfssl serve` on loopback.
                   Peers: `openssl req -x509 -newkey ec -CA` (key + certificate from a local
                   CA, one process) and `openssl req` + a Python authsign POST to the same
                   server.
  workload certs   N pods (pods-dir) annotated pinion.io/identity=true → all issued, with the
                   local CA; while it runs, /v1/status is polled to measure how long the loop
                   makes an API caller wait. Peer: `openssl req -x509 -newkey ec -CA` per
                   certificate (the same SPIFFE URI + IP SANs), timed for a sample and scaled.

Goals: node bootstrap < 50 ms on loopback; 1,000 workload certificates < 0.3 s, the slowest
/v1/status answer meanwhile < 10 ms.
Usage: identity-bench.py [--pods 1000] [--runs 5]   (PINION_BUILDDIR: where piniond was built)
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from identity_testlib import CfsslServer, run  # noqa: E402
from pinion_testlib import Agent, make_pod, unix_request  # noqa: E402
from benchjson import BenchJson  # noqa: E402


def shm_dir(prefix):
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def time_to_file(a, path, timeout=30):
    """Starts the agent and returns seconds from exec to `path` existing (polled every 0.5 ms)."""
    t0 = time.perf_counter()
    a.start(wait=False)
    deadline = t0 + timeout
    while not os.path.exists(path):
        if time.perf_counter() > deadline:
            raise AssertionError("no %s after %ds: %s" % (path, timeout, a.log_tail()))
        time.sleep(0.0005)
    return time.perf_counter() - t0


def time_agent_start(identity=None):
    """exec → socket answers, without identity: the daemon's own start, to subtract."""
    a = Agent(config={"agent": {"log-level": "info"}, **({"identity": identity} if identity else {})})
    try:
        t0 = time.perf_counter()
        a.start(wait=False)
        while True:
            try:
                if unix_request(a.socket, "GET", "/v1/health", timeout=1).status in (200, 503):
                    break
            except OSError:
                pass
            time.sleep(0.0005)
        return time.perf_counter() - t0
    finally:
        a.close()


def bench_node_local(runs):
    out = []
    for _ in range(runs):
        a = Agent(config={"agent": {"log-level": "info"}})
        try:
            ca = os.path.join(a.dir, "ca")
            # The CA exists already (as on any boot but the first): this measures bootstrap.
            a.sections["identity"] = {"signer": "local", "trust-domain": "example.org", "ca-dir": ca}
            a.write_config()
            run("sh", "-c", "mkdir -p %s && openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | "
                "openssl pkcs8 -topk8 -nocrypt -out %s/ca.key && openssl req -x509 -new -key %s/ca.key "
                "-subj /CN=bench -days 2 -out %s/ca.crt" % (ca, ca, ca, ca))
            out.append(time_to_file(a, os.path.join(a.state_dir, "identity", "node", "cert.pem")))
        finally:
            a.close()
    return out


def bench_node_cfssl(runs, srv):
    out = []
    for _ in range(runs):
        a = Agent(config={"agent": {"log-level": "info"}, "identity": srv.config()})
        try:
            out.append(time_to_file(a, os.path.join(a.state_dir, "identity", "node", "cert.pem")))
        finally:
            a.close()
    return out


def peer_openssl_node(runs, ca_dir):
    out = []
    for i in range(runs):
        t0 = time.perf_counter()
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", os.path.join(ca_dir, "n.key"), "-out", os.path.join(ca_dir, "n.crt"),
            "-subj", "/O=system:nodes/CN=system:node:bench", "-days", "1",
            "-CA", os.path.join(ca_dir, "ca.crt"), "-CAkey", os.path.join(ca_dir, "ca.key"))
        out.append(time.perf_counter() - t0)
    return out


def peer_cfssl_node(runs, srv, work):
    """The same exchange without the agent: `openssl req` makes the key and CSR, Python signs
    the authsign envelope (HMAC-SHA256) and posts it. (Debian's cfssl 1.2 client cannot reach
    an authsign server by address, so `cfssl gencert -remote` is not usable as the peer.)"""
    import base64
    import hashlib
    import hmac
    import urllib.request
    key = bytes.fromhex(open(srv.key_file).read().strip())
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        csr = run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-keyout", os.path.join(work, "p.key"), "-subj", "/O=system:nodes/CN=system:node:bench").stdout
        body = json.dumps({"certificate_request": csr, "profile": "pinion-node"}).encode()
        env = {"token": base64.b64encode(hmac.new(key, body, hashlib.sha256).digest()).decode(),
               "request": base64.b64encode(body).decode()}
        with urllib.request.urlopen(srv.url + "/api/v1/cfssl/authsign", json.dumps(env).encode()) as r:
            cert = json.load(r)["result"]["certificate"]
        with open(os.path.join(work, "p.crt"), "w") as f:
            f.write(cert)
        out.append(time.perf_counter() - t0)
    return out


def bench_workloads(n):
    a = Agent(config={"agent": {"log-level": "info"}})
    tls = shm_dir("identity-bench-tls-")
    try:
        a.sections["identity"] = {"signer": "local", "trust-domain": "example.org",
                                  "ca-dir": os.path.join(a.dir, "ca"), "pod-tls-dir": tls}
        a.write_config()
        a.start()
        # Wait for the node certificate, then add all pods at once (one directory rescan).
        while unix_request(a.socket, "GET", "/v1/identity").body["node"].get("state") != "valid":
            time.sleep(0.01)
        stage = tempfile.mkdtemp(dir=a.dir)
        for i in range(n):
            pod = make_pod("p%d" % i, namespace="bench", uid="00000000-0000-4000-8000-%012d" % i,
                           service_account="sa%d" % (i % 10), ip="10.%d.%d.%d" % (i >> 16, (i >> 8) & 255, i & 255),
                           annotations={"pinion.io/identity": "true"})
            with open(os.path.join(stage, "p%d.json" % i), "w") as f:
                json.dump(pod, f)
        t0 = time.perf_counter()
        for name in os.listdir(stage):
            os.rename(os.path.join(stage, name), os.path.join(a.pods_dir, name))
        worst = 0.0
        polls = 0
        while True:
            t = time.perf_counter()
            st = unix_request(a.socket, "GET", "/v1/status").body
            worst = max(worst, time.perf_counter() - t)
            polls += 1
            ident = [m for m in st["modules"] if m["name"] == "identity"][0]["details"]
            if ident.get("workloadsIssued") == n:
                break
            if time.perf_counter() - t0 > 120:
                raise AssertionError("only %s of %d issued after 120s" % (ident.get("workloadsIssued"), n))
        elapsed = time.perf_counter() - t0
        return elapsed, worst, polls
    finally:
        a.close()
        shutil.rmtree(tls, ignore_errors=True)


def peer_openssl_workloads(sample, ca_dir):
    t0 = time.perf_counter()
    for i in range(sample):
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", os.path.join(ca_dir, "w.key"), "-out", os.path.join(ca_dir, "w.crt"),
            "-subj", "/CN=p%d.bench" % i, "-days", "1",
            "-addext", "subjectAltName=URI:spiffe://example.org/ns/bench/sa/sa%d,IP:10.0.0.%d" % (i % 10, i % 250),
            "-CA", os.path.join(ca_dir, "ca.crt"), "-CAkey", os.path.join(ca_dir, "ca.key"))
    return (time.perf_counter() - t0) / sample


def ms(x):
    return "%.1f ms" % (x * 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--peer-sample", type=int, default=50)
    ap.add_argument("--json", help="the figures in the common schema (tests/bench/benchjson.py)")
    args = ap.parse_args()
    bj = BenchJson("identity", "Identity: node bootstrap and workload certificates")

    work = tempfile.mkdtemp(prefix="identity-bench-")
    try:
        run("sh", "-c", "openssl ecparam -name prime256v1 -genkey -noout -out %s/ca.key 2>/dev/null && "
            "openssl req -x509 -new -key %s/ca.key -subj /CN=bench -days 2 -out %s/ca.crt" % (work, work, work))
        start = statistics.median(time_agent_start() for _ in range(args.runs))
        local = bench_node_local(args.runs)
        peer_local = peer_openssl_node(args.runs, work)
        srv = CfsslServer(expiry="24h")
        try:
            srv.start()
            cf = bench_node_cfssl(args.runs, srv)
            peer_cf = peer_cfssl_node(args.runs, srv, work)
        finally:
            srv.close()
        elapsed, worst, polls = bench_workloads(args.pods)
        per_peer = peer_openssl_workloads(args.peer_sample, work)

        ml, mpl, mc, mpc = (statistics.median(x) for x in (local, peer_local, cf, peer_cf))
        print("identity benchmark (medians of %d runs; peers in the same run)" % args.runs)
        print("")
        print("| measure | piniond | peer | ratio |")
        print("|---|---|---|---|")
        print("| daemon start alone (exec → API answers) | %s | | |" % ms(start))
        print("| node certificate, local CA (exec → cert.pem) | %s | openssl req -x509 -CA: %s | %.2f |"
              % (ms(ml), ms(mpl), ml / mpl))
        print("| node certificate, local CA, minus daemon start | %s | | %.2f |" % (ms(max(0, ml - start)), max(0, ml - start) / mpl))
        print("| node certificate, cfssl serve (exec → cert.pem) | %s | openssl req + authsign POST: %s | %.2f |"
              % (ms(mc), ms(mpc), mc / mpc))
        print("| %d workload certificates, local CA | %.3f s (%.0f/s) | openssl per cert x %d: %.3f s | %.3f |"
              % (args.pods, elapsed, args.pods / elapsed, args.pods, per_peer * args.pods, elapsed / (per_peer * args.pods)))
        print("| slowest /v1/status answer while issuing (%d polls) | %s | | |" % (polls, ms(worst)))
        print("")
        print("goals: node bootstrap < 50 ms: %s; %d workload certificates < 0.3 s: %s; slowest /v1/status < 10 ms: %s"
              % ("met" if ml < 0.05 else "NOT met", args.pods, "met" if elapsed < 0.3 else "NOT met",
                 "met" if worst < 0.01 else "NOT met"))
        ms1 = lambda v: round(v * 1000, 2)  # noqa: E731
        bj.row("daemon start alone (exec → API answers)", ms1(start), unit="ms")
        bj.row("node certificate, local CA (exec → cert.pem)", ms1(ml), ms1(mpl), "openssl req -x509 -CA", "ms",
               goal="< 50 ms", met=ml < 0.05)
        bj.row("node certificate, local CA, minus daemon start", ms1(max(0, ml - start)), ms1(mpl),
               "openssl req -x509 -CA", "ms")
        bj.row("node certificate, cfssl serve (exec → cert.pem)", ms1(mc), ms1(mpc), "openssl req + authsign POST", "ms",
               goal="< 50 ms", met=mc < 0.05)
        bj.row("%d workload certificates, local CA" % args.pods, round(elapsed, 3), round(per_peer * args.pods, 3),
               "openssl req -x509 -CA per certificate (%d timed, scaled)" % args.peer_sample, "s",
               goal="< 0.3 s", met=elapsed < 0.3)
        bj.row("slowest /v1/status answer while issuing (%d polls)" % polls, ms1(worst), unit="ms",
               goal="< 10 ms", met=worst < 0.01)
        bj.note("Medians of %d runs. The peers are one process per certificate, so they pay a process start-up "
                "the agent does not; the fair reading of the node figure is the row minus daemon start." % args.runs)
        bj.series("node certificate, local CA: every run", "run", "ms",
                  [("piniond", range(1, len(local) + 1), [v * 1000 for v in local]),
                   ("openssl req -x509 -CA", range(1, len(peer_local) + 1), [v * 1000 for v in peer_local]),
                   ("piniond, cfssl serve", range(1, len(cf) + 1), [v * 1000 for v in cf]),
                   ("openssl req + authsign", range(1, len(peer_cf) + 1), [v * 1000 for v in peer_cf])])
        bj.write(args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
