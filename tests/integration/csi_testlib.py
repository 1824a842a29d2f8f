"""Helpers for the CSI node plugin tests: the CSI spec's messages (proto/csi.proto, package
csi.v1) and the kubelet's plugin registration messages (proto/pluginregistration.proto)
generated for Python with protoc, a python3-grpcio client that calls the plugin as the kubelet
does, and the mounts a test leaves behind taken away again."""

import importlib
import os
import shutil
import subprocess
import sys
import tempfile

import grpc

from pinion_testlib import SRCDIR

DRIVER = "csi.pinion.dev"


def generate_messages():
    """(directory, csi_pb2, pluginregistration_pb2): made by protoc from our .proto files; the
    caller removes the directory."""
    d = tempfile.mkdtemp(prefix="csi-pb-")
    try:
        subprocess.run(["protoc", "-I", os.path.join(SRCDIR, "proto"), "--python_out", d, "csi.proto",
                        "pluginregistration.proto"], check=True, capture_output=True)
        sys.path.insert(0, d)
        try:
            csi = importlib.import_module("csi_pb2")
            reg = importlib.import_module("pluginregistration_pb2")
        finally:
            sys.path.remove(d)
    except (OSError, subprocess.CalledProcessError, ImportError):
        shutil.rmtree(d, ignore_errors=True)
        raise
    return d, csi, reg


class Client:
    """Unary calls on a Unix socket: call("/csi.v1.Node/NodeGetInfo", request, ResponseType)."""

    def __init__(self, socket_path):
        self.channel = grpc.insecure_channel("unix:" + socket_path)

    def call(self, path, req, resp_type, timeout=10):
        fn = self.channel.unary_unary(path, request_serializer=lambda m: m if isinstance(m, bytes)
                                      else m.SerializeToString(), response_deserializer=resp_type.FromString)
        return fn(req, timeout=timeout)

    def code(self, path, req, resp_type):
        """The status code of a call expected to fail, and its details."""
        try:
            self.call(path, req, resp_type)
        except grpc.RpcError as e:
            return e.code(), e.details()
        raise AssertionError("%s succeeded" % path)

    def close(self):
        self.channel.close()


def mount_roots_below(path):
    """The mount points at or below path, deepest first (from /proc/self/mountinfo)."""
    path = os.path.realpath(path)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == path or point.startswith(path + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def unmount_all_below(path):
    """Takes away every mount at or below path (what a failed test left)."""
    for _ in range(16):
        points = mount_roots_below(path)
        if not points:
            return
        for p in points:
            subprocess.run(["umount", "-l", p], capture_output=True)
    raise AssertionError("mounts left below %s: %s" % (path, mount_roots_below(path)))
