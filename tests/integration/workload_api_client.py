"""A SPIFFE Workload API client on python3-grpcio, run as its own process (inside a pod's cgroup,
as another user) by test_workload_api.py. It finds the agent as SPIFFE clients do, through
SPIFFE_ENDPOINT_SOCKET, and prints one JSON object per line: each response, or the error.

    workload_api_client.py OP [--no-header] [--count N] [--timeout S] [--streams N] [--raw HEX] [--raw-zeros N]
                              [--audience A]... [--spiffe-id ID] [--token JWT] [--seconds S]

OP: svid | bundles | jwt-svid | jwt-bundles | validate | many | flood (FetchJWTSVID pipelined:
--streams calls in flight on one channel for --seconds, then one line of counts by status)"""

import argparse
import json
import os
import sys
import time

import grpc
from google.protobuf.json_format import MessageToDict

import workload_pb2 as pb  # generated at test time (protoc --python_out)

METHODS = {
    "svid": ("/SpiffeWorkloadAPI/FetchX509SVID", pb.X509SVIDRequest, pb.X509SVIDResponse, True),
    "bundles": ("/SpiffeWorkloadAPI/FetchX509Bundles", pb.X509BundlesRequest, pb.X509BundlesResponse, True),
    "jwt-svid": ("/SpiffeWorkloadAPI/FetchJWTSVID", pb.JWTSVIDRequest, pb.JWTSVIDResponse, False),
    "jwt-bundles": ("/SpiffeWorkloadAPI/FetchJWTBundles", pb.JWTBundlesRequest, pb.JWTBundlesResponse, True),
    "validate": ("/SpiffeWorkloadAPI/ValidateJWTSVID", pb.ValidateJWTSVIDRequest, pb.ValidateJWTSVIDResponse, False),
}


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def describe(resp):
    if isinstance(resp, pb.X509SVIDResponse):
        return {"svids": [{"spiffe_id": s.spiffe_id, "x509_svid": s.x509_svid.hex(), "key": s.x509_svid_key.hex(),
                           "bundle": s.bundle.hex()} for s in resp.svids]}
    if isinstance(resp, pb.X509BundlesResponse):
        return {"bundles": {k: v.hex() for k, v in resp.bundles.items()}}
    if isinstance(resp, pb.JWTSVIDResponse):
        return {"svids": [{"spiffe_id": s.spiffe_id, "svid": s.svid} for s in resp.svids]}
    if isinstance(resp, pb.JWTBundlesResponse):
        return {"bundles": {k: json.loads(v) for k, v in resp.bundles.items()}}
    if isinstance(resp, pb.ValidateJWTSVIDResponse):
        return {"spiffe_id": resp.spiffe_id, "claims": MessageToDict(resp.claims)}
    return {"message": str(resp)}


def error(e):
    return {"error": e.code().name, "details": e.details()}


def channel():
    target = os.environ["SPIFFE_ENDPOINT_SOCKET"]  # unix:///path, as the spec spells it
    return grpc.insecure_channel(target)


def stub(ch, op, raw):
    path, req, resp, streaming = METHODS[op]
    ser = (lambda _: raw) if raw is not None else req.SerializeToString
    if streaming:
        return ch.unary_stream(path, request_serializer=ser, response_deserializer=resp.FromString), req
    return ch.unary_unary(path, request_serializer=ser, response_deserializer=resp.FromString), req


def request(args, req):
    """The request message, with what the JWT RPCs take from the command line."""
    if req is pb.JWTSVIDRequest:
        return req(audience=args.audience, spiffe_id=args.spiffe_id or "")
    if req is pb.ValidateJWTSVIDRequest:
        return req(audience=(args.audience or [""])[0], svid=args.token or "")
    return req()


def single(args):
    md = [] if args.no_header else [("workload.spiffe.io", "true")]
    raw = bytes.fromhex(args.raw) if args.raw is not None else None
    if args.raw_zeros is not None:
        raw = bytes(args.raw_zeros)  # larger than a command line's argument may be
    t0 = time.time()
    with channel() as ch:
        fn, req = stub(ch, args.op, raw)
        streaming = METHODS[args.op][3]
        try:
            if not streaming:
                out(describe(fn(request(args, req), metadata=md, timeout=args.timeout)))
                return
            it = fn(request(args, req), metadata=md, timeout=args.timeout)
            for n, resp in enumerate(it):
                d = describe(resp)
                d["t"] = time.time()
                d["elapsed"] = d["t"] - t0  # from connecting (the channel is lazy) to this response
                out(d)
                if n + 1 >= args.count:
                    it.cancel()
                    break
        except grpc.RpcError as e:
            out(error(e))


def many(args):
    """N concurrent FetchX509SVID streams on one channel (one HTTP/2 connection): all answered,
    then all cancelled."""
    md = [("workload.spiffe.io", "true")]
    with channel() as ch:
        fn, req = stub(ch, "svid", None)
        t0 = time.time()
        calls = [fn(req(), metadata=md, timeout=args.timeout) for _ in range(args.streams)]
        ids, errors = set(), []
        for c in calls:
            try:
                ids.add(next(c).svids[0].spiffe_id)
            except grpc.RpcError as e:
                errors.append(error(e))
        answered = time.time() - t0
        out({"answered": args.streams - len(errors), "ids": sorted(ids), "errors": errors[:5], "seconds": answered})
        sys.stdin.readline()  # the test looks at the agent while the streams are open
        for c in calls:
            c.cancel()
        out({"cancelled": len(calls)})


def flood(args):
    """Pipelines FetchJWTSVID as fast as the agent answers: --streams calls in flight at once."""
    import threading
    md = [("workload.spiffe.io", "true")]
    counts, lock, done = {}, threading.Lock(), threading.Event()
    with channel() as ch:
        fn, req = stub(ch, "jwt-svid", None)
        msg = request(args, req)
        end = time.time() + args.seconds
        slots = threading.Semaphore(args.streams)

        def finished(f):
            try:
                f.result()
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
            with lock:
                counts[code] = counts.get(code, 0) + 1
            slots.release()

        while time.time() < end:
            if not slots.acquire(timeout=0.5):
                continue
            fn.future(msg, metadata=md, timeout=args.timeout).add_done_callback(finished)
        for _ in range(args.streams):  # the calls still in flight end (or time out)
            slots.acquire(timeout=args.timeout + 5)
        done.set()
    out({"counts": counts})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("op")
    p.add_argument("--no-header", action="store_true")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--streams", type=int, default=500)
    p.add_argument("--raw")
    p.add_argument("--raw-zeros", type=int)
    p.add_argument("--audience", action="append", default=[])
    p.add_argument("--spiffe-id")
    p.add_argument("--token")
    p.add_argument("--seconds", type=float, default=5)
    args = p.parse_args()
    if args.op == "many":
        many(args)
    elif args.op == "flood":
        flood(args)
    else:
        single(args)


if __name__ == "__main__":
    main()
