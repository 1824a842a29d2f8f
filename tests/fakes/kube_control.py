# SPDX-License-Identifier: MIT
"""The test apiserver's control API (/_fake/..., JSON over plain HTTP) and its command line."""

import argparse
import json
import signal
import sys
import threading

from kube_common import _json_copy


class _ControlMixin:

    def _control(self, h, method, path, params, body):
        try:
            data = json.loads(body) if body.strip() else {}
        except ValueError as err:
            h.send_json(400, {"error": "bad JSON: %s" % err})
            return
        try:
            code, out = self._control_route(method, path, params, data)
        except (KeyError, ValueError, TypeError, RuntimeError) as err:
            msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            h.send_json(404 if isinstance(err, KeyError) else 400, {"error": msg})
            return
        h.send_json(code, out)

    def _control_route(self, method, path, params, data):
        p = path[len("/_fake/"):].strip("/") if path.startswith("/_fake/") else ""
        if method == "GET":
            if p in ("", "state"):
                return 200, self.state()
            if p == "requests":
                since = params.get("since")
                reqs = self.requests(verb=params.get("verb") or None,
                                     path=params.get("path") or None,
                                     since=float(since) if since else None,
                                     status=int(params["status"]) if params.get("status")
                                     else None)
                return 200, {"count": len(reqs), "counts": self.counts(), "requests": reqs}
            if p == "pods":
                return 200, {"resourceVersion": str(self.resource_version),
                             "items": self.pods()}
            if p == "events":
                items = self.events(namespace=params.get("namespace") or None,
                                    regarding_uid=params.get("regarding_uid") or None,
                                    regarding_name=params.get("regarding_name") or None,
                                    reason=params.get("reason") or None)
                return 200, {"count": len(items), "items": items}
            if p.startswith("pods/") and p.count("/") == 2:
                _, ns, name = p.split("/")
                pod = self.get_pod(ns, name)
                if pod is None:
                    raise KeyError("no such pod")
                return 200, pod
            if p == "faults":
                return 200, {"faults": self.faults()}
            if p.startswith("nodes/"):
                node = self.get_node(p[len("nodes/"):])
                if node is None:
                    raise KeyError("no such node")
                return 200, node
            raise KeyError("no such control endpoint: GET %s" % path)
        if method not in ("POST", "PUT", "DELETE"):
            raise ValueError("use GET or POST")
        if p == "pods/add":
            pod = data.get("pod", data)
            pad = int(data.get("pad_bytes") or params.get("pad_bytes") or 0)
            if pad:
                pod = _json_copy(pod)
                pod.setdefault("metadata", {}).setdefault("annotations", {})[
                    "pinion.test/padding"] = "x" * pad
            return 201, self.add_pod(pod)
        if p == "users/add":
            self.add_user(data["token"], data["username"], groups=data.get("groups"),
                          extra=data.get("extra"))
            return 200, {}
        if p == "pods/update":
            return 200, self.update_pod(data.get("pod", data))
        if p == "pods/delete":
            return 200, self.delete_pod(data.get("namespace") or "default", data["name"])
        if p == "nodes/set":
            return 200, self.set_node(data["name"], pod_cidr=data.get("podCIDR"),
                                      labels=data.get("labels"), node=data.get("node"))
        if p == "compact":
            rv = data.get("resourceVersion")
            return 200, {"compacted": str(self.compact(int(rv) if rv else None))}
        if p == "inject":
            kw = dict(data)
            fault = kw.pop("fault")
            return 201, self.inject(fault, **kw).to_json()
        if p == "clear-faults":
            self.clear_faults()
            return 200, {"faults": []}
        if p == "outage":
            self.outage(data.get("mode", "refuse"), drop_existing=data.get("drop_existing", True))
            return 200, {"outage": self._outage}
        if p == "recover":
            self.recover()
            return 200, {"outage": None}
        if p == "reset-counts":
            self.reset_counts()
            return 200, {"count": 0}
        if p == "token":
            self.set_token(data.get("token"))
            return 200, {}
        if p == "close-watches":
            return 200, {"closed": self.close_watches(bool(data.get("abrupt")))}
        if p == "config":
            for k in ("bookmark_interval", "watch_chunk_size", "rv0_ignores_limit",
                      "default_watch_timeout", "history_limit"):
                if k in data:
                    setattr(self, k, data[k])
            return 200, self.state()
        raise KeyError("no such control endpoint: POST %s" % path)


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="A Kubernetes API server emulator (pods, nodes; list/watch/bookmarks/410/"
                    "faults) for pinion's tests. Control it through the /_fake/ endpoints "
                    "(see tests/fakes/README.md).")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="API port (default 0: ephemeral)")
    ap.add_argument("--control-port", type=int, default=0,
                    help="plain-HTTP port for /_fake/ only, up during outages (default 0)")
    ap.add_argument("--tls", action="store_true", help="HTTPS with a throwaway CA")
    ap.add_argument("--token", help="the bearer token to require")
    ap.add_argument("--token-file", help="a file with the token, re-read on every request")
    ap.add_argument("--no-client-certs", action="store_true",
                    help="do not accept client certificates signed by the fake CA")
    ap.add_argument("--print-url", action="store_true",
                    help='print "URL CAFILE" and then "CONTROL URL" on stdout once serving')
    ap.add_argument("--bookmark-interval", type=float, default=1.0, help="seconds (default 1)")
    ap.add_argument("--initial-rv", type=int, default=1000)
    ap.add_argument("--rv0-ignores-limit", action="store_true",
                    help="resourceVersion=0 lists ignore limit, as the watch cache does")
    ap.add_argument("--watch-chunk-size", type=int, default=None,
                    help="cut watch streams into chunks of N bytes (default: one per event)")
    ap.add_argument("--history-limit", type=int, default=None,
                    help="keep only the last N events (older ones are compacted)")
    ap.add_argument("--default-watch-timeout", type=int, default=1800)
    ap.add_argument("--node", action="append", default=[], metavar="NAME[=PODCIDR]",
                    help="create a Node (repeatable)")
    ap.add_argument("--pods", metavar="FILE",
                    help="a JSON file with a Pod, a list of Pods or a PodList to start with")
    ap.add_argument("--workdir", help="where the certificates go (default: a temp dir)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    from kube_apiserver import FakeApiserver
    fake = FakeApiserver(tls=args.tls, token=args.token, token_file=args.token_file,
                         client_certs=not args.no_client_certs, host=args.host, port=args.port,
                         control_port=args.control_port, bookmark_interval=args.bookmark_interval,
                         initial_rv=args.initial_rv, rv0_ignores_limit=args.rv0_ignores_limit,
                         watch_chunk_size=args.watch_chunk_size,
                         history_limit=args.history_limit,
                         default_watch_timeout=args.default_watch_timeout,
                         workdir=args.workdir, verbose=args.verbose)
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fake.start()
    try:
        for spec in args.node:
            name, _, cidr = spec.partition("=")
            fake.set_node(name, pod_cidr=cidr or None)
        if args.pods:
            with open(args.pods) as f:
                data = json.load(f)
            pods = data.get("items", [data]) if isinstance(data, dict) else data
            for pod in pods:
                fake.add_pod(pod)
        if args.print_url:
            sys.stdout.write("%s %s\nCONTROL %s\n" % (fake.url, fake.ca_file or "-",
                                                     fake.control_url or "-"))
            sys.stdout.flush()
        while not done.wait(1):
            pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
