# SPDX-License-Identifier: MIT
"""The HTTP side of the test apiserver: the threaded server and its request handler."""

import socket
import socketserver
import struct
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from kube_common import _dumps

# ---------------------------------------------------------------------------------------------
# The HTTP side


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, addr, handler, fake, control):
        self.fake, self.control = fake, control
        self.ssl_context = None
        super().__init__(addr, handler, bind_and_activate=False)

    def server_bind(self):
        # HTTPServer.server_bind would call getfqdn(), which can wait on DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request, client_address):
        if self.ssl_context is not None:
            try:
                request.settimeout(10)
                request = self.ssl_context.wrap_socket(request, server_side=True)
            except (OSError, ValueError):
                with self.fake._lock:
                    self.fake._stats["tls_handshake_failures"] += 1
                try:
                    request.close()
                except OSError:
                    pass
                return
        self.RequestHandlerClass(request, client_address, self)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (OSError, ValueError)) and not self.fake.verbose:
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120
    disable_nagle_algorithm = True

    # --- plumbing ---

    def setup(self):
        super().setup()
        self.fake = self.server.fake
        self.killed = False
        self.entry = None
        self.fake_control = False
        self.watching = False
        self.end_watch = None
        self.user = None  # the configured user a token names (kube_admission), else None
        self.request_body = b""
        self.fake._register(self)

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass
        self.fake._unregister(self)

    def log_message(self, fmt, *args):
        if self.fake.verbose:
            sys.stderr.write("fake-apiserver: %s - %s\n" % (self.address_string(), fmt % args))

    def send_response(self, code, message=None):
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())
        if self.entry is not None:
            self.entry["status"] = code

    def abort(self, rst=False):
        """Close the connection now, without a proper end of response."""
        self.close_connection = True
        conn = self.connection
        try:
            if rst:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                try:
                    self.rfile.close()
                except (OSError, ValueError):
                    pass
                conn.close()
            else:
                socket.socket.shutdown(conn, socket.SHUT_RDWR)
        except (OSError, ValueError):
            pass

    def _headers(self, code, ctype="application/json", length=None, extra=None, chunked=False):
        self.send_response(code)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", ctype)
        for k, v in (extra or {}).items():
            self.send_header(k, str(v))
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length or 0))
        self.end_headers()

    def send_body(self, code, body, ctype="application/json", extra=None, fault=None):
        if fault is not None and fault.kind in ("drop", "truncate"):
            self._headers(code, ctype, len(body), extra)
            self.wfile.write(body[:len(body) // 2])
            self.abort(fault.rst)
            return
        if fault is not None and fault.kind == "malformed":
            body = fault.line.encode() if fault.line else body[:len(body) // 2] + b"}}garbage{"
        self._headers(code, ctype, len(body), extra)
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, code, obj, extra=None, fault=None):
        self.send_body(code, _dumps(obj), extra=extra, fault=fault)

    def send_error_status(self, err, fault=None):
        self.send_json(err.code, err.status(), extra=err.headers, fault=fault)

    def write_chunks(self, data):
        size = self.fake.watch_chunk_size
        parts = [data] if not size else [data[i:i + size] for i in range(0, len(data), size)]
        self.wfile.write(b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in parts if p))

    # --- dispatch ---

    def do_GET(self):
        self._dispatch()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _dispatch(self):
        url = urlsplit(self.path)
        path, query = url.path, url.query
        params = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        length = self.headers.get("Content-Length")
        body = b""
        if length:
            try:
                body = self.rfile.read(int(length))
            except ValueError:
                self.send_error(400)
                return
        if path == "/_fake" or path.startswith("/_fake/"):
            self.fake_control = True  # not dropped by the outage it may be starting
            self.fake._control(self, self.command, path, params, body)
            self.fake_control = False
            return
        if self.server.control:
            self.send_body(404, b"404 page not found\n", ctype="text/plain; charset=utf-8")
            return
        self.request_body = body  # the CSR block reads POST bodies
        self.fake._serve_api(self, path, query, params)
