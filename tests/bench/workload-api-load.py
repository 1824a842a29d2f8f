#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The client side of workload-api-bench.py, run as a process of a pod (its cgroup, another
user): python3-grpcio on the spec's workload.proto (through workload_api_client.py) against
the agent's Workload API socket, and plain HTTP/1.1 against its local API socket, from the same
process, so both routes pay the same client-side costs except their protocol's own.

    workload-api-load.py latency --calls N --http SOCK [--jwt]
        N rounds, each: a fresh gRPC channel (its own connection) → first FetchX509SVID
        response, the same call in HTTP/2 frames written by hand (the server's share without a
        client library), and connect → full reply of GET /v1/identity; the order alternates
        per round.
        --jwt adds FetchJWTSVID against POST /v1/identity/jwt the same way. One JSON line:
        {"grpc": [seconds...], "http": [...], "h2": [...], "grpc_jwt": [...], "http_jwt": [...]}
    workload-api-load.py hold KIND --http SOCK
        Reads "open N" lines on stdin: opens N more of KIND and prints {"open": total} once each
        of them is established; "close" ends them all and exits. KIND:
        grpc-mux     FetchX509SVID streams on one channel (one HTTP/2 connection), each answered
        grpc-conn    one channel (connection) per FetchX509SVID stream, each answered
        http-poll    GET /v1/identity?wait=10m, one connection each, the request sent (held)
        http-watch   GET /v1/pods?watch=1, one connection each, read up to SYNCED (root only)

The gRPC target is SPIFFE_ENDPOINT_SOCKET, as every SPIFFE client finds it."""

import argparse
import json
import os
import socket
import sys
import time

import grpc

import workload_api_client as wac
import workload_pb2 as pb
from workload_api_testlib import h2_first_message

MD = [("workload.spiffe.io", "true")]
# Each channel its own subchannel, hence its own connection: no sharing through grpcio's
# global subchannel pool between a closed channel and the next one.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def new_channel():
    return grpc.insecure_channel(os.environ["SPIFFE_ENDPOINT_SOCKET"], options=OWN_CONNECTION)


def http_exchange(path, request):
    """connect → the whole reply (Connection: close, read to EOF); returns (status, body)."""
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        s.sendall(request)
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    finally:
        s.close()
    data = b"".join(chunks)
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def http_request(method, target, body=b""):
    return ("%s %s HTTP/1.1\r\nHost: pinion\r\nConnection: close\r\nContent-Length: %d\r\n"
            "Content-Type: application/json\r\n\r\n" % (method, target, len(body))).encode() + body


def time_grpc_svid():
    t0 = time.perf_counter()
    with new_channel() as ch:
        fn, req = wac.stub(ch, "svid", None)
        it = fn(req(), metadata=MD, timeout=30)
        resp = next(it)
        t = time.perf_counter() - t0
        it.cancel()
    assert resp.svids and resp.svids[0].x509_svid_key, "no SVID in the response"
    return t


def time_h2_svid(path):
    t0 = time.perf_counter()
    msg = h2_first_message(path, "/SpiffeWorkloadAPI/FetchX509SVID")
    t = time.perf_counter() - t0
    resp = pb.X509SVIDResponse.FromString(msg)
    assert resp.svids and resp.svids[0].x509_svid_key, "no SVID in the response"
    return t


def time_http_svid(path):
    t0 = time.perf_counter()
    status, body = http_exchange(path, http_request("GET", "/v1/identity"))
    t = time.perf_counter() - t0
    assert status == 200 and b"private_key" in body, (status, body[:200])
    return t


def time_grpc_jwt():
    t0 = time.perf_counter()
    with new_channel() as ch:
        fn, _ = wac.stub(ch, "jwt-svid", None)
        resp = fn(pb.JWTSVIDRequest(audience=["svc"]), metadata=MD, timeout=30)
        t = time.perf_counter() - t0
    assert resp.svids and resp.svids[0].svid.count(".") == 2, "no JWT-SVID"
    return t


def time_http_jwt(path):
    t0 = time.perf_counter()
    status, body = http_exchange(path, http_request("POST", "/v1/identity/jwt", b'{"audience": ["svc"]}'))
    t = time.perf_counter() - t0
    assert status == 200 and b'"token"' in body, (status, body[:200])
    return t


# The agent paces each caller (docs/api.md: 100 requests/s after a burst of 200 on the local
# API, 512 on the Workload API): rounds at most every 25 ms keep this pod's calls inside that, so
# each call times the answer, not the pacing. The gap falls between the timed calls.
ROUND_MIN_SECONDS = 0.025


def latency(args):
    res = {"grpc": [], "http": [], "h2": [], "grpc_jwt": [], "http_jwt": []}
    wsock = os.environ["SPIFFE_ENDPOINT_SOCKET"][len("unix://"):]
    # One untimed round first: Python's and grpcio's lazy imports and first-use set-up.
    time_grpc_svid()
    time_http_svid(args.http)
    time_h2_svid(wsock)
    for i in range(args.calls):
        started = time.monotonic()
        pairs = [("grpc", time_grpc_svid), ("http", lambda: time_http_svid(args.http)),
                 ("h2", lambda: time_h2_svid(wsock))]
        if args.jwt:
            pairs += [("grpc_jwt", time_grpc_jwt), ("http_jwt", lambda: time_http_jwt(args.http))]
        if i % 2:
            pairs.reverse()
        for name, fn in pairs:
            res[name].append(fn())
        time.sleep(max(0.0, ROUND_MIN_SECONDS - (time.monotonic() - started)))
    out(res)


class Holder:
    """Open streams of one kind, kept until "close"."""

    def __init__(self, kind, http):
        self.kind, self.http = kind, http
        self.channels, self.calls, self.socks = [], [], []

    def open_grpc(self, n, mux):
        calls = []
        for _ in range(n):
            if not mux or not self.channels:
                self.channels.append(new_channel())
            fn, req = wac.stub(self.channels[-1], "svid", None)
            calls.append(fn(req(), metadata=MD, timeout=3600))
        for c in calls:  # all requested, then each answered
            assert next(c).svids, "no SVID"
        self.calls += calls

    def open_http(self, n, target, until):
        socks = []
        for _ in range(n):
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.http)
            s.sendall(("GET %s HTTP/1.1\r\nHost: pinion\r\n\r\n" % target).encode())
            socks.append(s)
        for s in socks:
            if until:
                buf = b""
                s.settimeout(30)
                while until not in buf:
                    b = s.recv(65536)
                    assert b, "stream closed before %r: %r" % (until, buf[-300:])
                    buf += b
        self.socks += socks

    def open(self, n):
        if self.kind in ("grpc-mux", "grpc-conn"):
            self.open_grpc(n, self.kind == "grpc-mux")
        elif self.kind == "http-poll":
            self.open_http(n, "/v1/identity?wait=10m", None)
        elif self.kind == "http-watch":
            self.open_http(n, "/v1/pods?watch=1", b'"SYNCED"')
        else:
            raise SystemExit("unknown kind %s" % self.kind)
        return len(self.calls) + len(self.socks)

    def close(self):
        for c in self.calls:
            c.cancel()
        for ch in self.channels:
            ch.close()
        for s in self.socks:
            s.close()


def hold(args):
    h = Holder(args.kind, args.http)
    try:
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["open"]:
                out({"open": h.open(int(words[1]))})
            elif words[:1] == ["close"]:
                break
    finally:
        h.close()
    out({"closed": True})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("op", choices=["latency", "hold"])
    p.add_argument("kind", nargs="?")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--http", required=True)
    p.add_argument("--jwt", action="store_true")
    args = p.parse_args()
    if args.op == "latency":
        latency(args)
    else:
        hold(args)


if __name__ == "__main__":
    main()
