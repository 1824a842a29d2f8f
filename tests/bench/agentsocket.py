# SPDX-License-Identifier: MIT
"""The agent's local API from a benchmark: one GET over its Unix socket, with no dependency
beyond the standard library (the benchmarks run outside pytest and pinion_testlib)."""

import socket


def dechunk(text):
    """The body of a chunked HTTP/1.1 response."""
    out, rest = [], text
    while rest:
        size_s, _, rest = rest.partition("\r\n")
        size = int(size_s.split(";")[0] or "0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2:]
    return "".join(out)


def unix_get(path, url, timeout=5):
    """GET url over the Unix socket at path -> (status, body text). HTTP/1.0: the server closes."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(("GET %s HTTP/1.0\r\nHost: pinion\r\n\r\n" % url).encode())
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    finally:
        s.close()
    raw = b"".join(chunks).decode("utf-8", "replace")
    head, _, body = raw.partition("\r\n\r\n")
    status = int(head.split(None, 2)[1]) if head.startswith("HTTP/") else 0
    if "transfer-encoding: chunked" in head.lower():
        body = dechunk(body)
    return status, body
