# SPDX-License-Identifier: MIT
"""The house rules of docs/design.md ("Layout" and "Style"), checked on the tree and the build:

- the layout section lists exactly the folders and files that are there;
- a room includes only its own headers and those of the rooms below it (lib < socket, pods <
  api, grpc < the spine < modules), so no gRPC file sees the HTTP server;
- every exported name begins with the name of the file that defines it (read from the
  libraries with nm, so it is what the linker sees);
- a module's model files never call its API files (views subscribe to models);
- no function in a handler file (agent/api/, modules/*/*-api*.c) is longer than 80 lines."""

import os
import re
import subprocess

import pytest

from pinion_testlib import BUILDDIR, SRCDIR

AGENT = os.path.join(SRCDIR, "agent")
MODULES = os.path.join(SRCDIR, "modules")

# The rooms of agent/ from the bottom up, and which rooms' headers each may include.
ROOM_MAY_INCLUDE = {
    "lib": {"lib"},
    "socket": {"lib", "socket"},
    "pods": {"lib", "pods"},
    "api": {"lib", "socket", "api"},
    "grpc": {"lib", "socket", "grpc"},
    "ctl": {"lib", "ctl"},
    ".": {"lib", "socket", "pods", "api", "grpc", "."},
}


def _files(top, exts=(".c", ".h")):
    for dirpath, _, names in os.walk(top):
        for n in sorted(names):
            if n.endswith(exts):
                yield os.path.join(dirpath, n)


def _header_rooms():
    """{header file name: room} for every header of agent/."""
    rooms = {}
    for path in _files(AGENT, (".h",)):
        room = os.path.relpath(os.path.dirname(path), AGENT)
        assert os.path.basename(path) not in rooms, f"two headers named {os.path.basename(path)}"
        rooms[os.path.basename(path)] = room
    return rooms


def _includes(path):
    with open(path) as f:
        return re.findall(r'^#include "([^"]+)"', f.read(), re.M)


def test_rooms_include_only_what_lies_below():
    rooms = _header_rooms()
    bad = []
    for path in _files(AGENT):
        room = os.path.relpath(os.path.dirname(path), AGENT)
        for inc in _includes(path):
            if inc not in rooms:
                continue  # a system or generated header (workload.pb-c.h)
            if rooms[inc] not in ROOM_MAY_INCLUDE[room]:
                bad.append(f"{os.path.relpath(path, SRCDIR)} includes {rooms[inc]}/{inc}")
    assert not bad, "\n".join(bad)


def test_no_grpc_file_sees_the_http_server():
    api_headers = {os.path.basename(p) for p in _files(os.path.join(AGENT, "api"), (".h",))}
    for path in _files(os.path.join(AGENT, "grpc")):
        assert not set(_includes(path)) & api_headers, path


def test_modules_do_not_include_each_other():
    own = {m: {os.path.basename(p) for p in _files(os.path.join(MODULES, m), (".h",))}
           for m in os.listdir(MODULES)}
    for m in own:
        others = set().union(*(h for n, h in own.items() if n != m)) - own[m]
        for path in _files(os.path.join(MODULES, m)):
            assert not set(_includes(path)) & others, path


def _exported(archive):
    """[(object file stem, symbol)] of the functions and data an archive defines for others."""
    out = subprocess.run(["nm", "-g", "--defined-only", archive], capture_output=True, text=True,
                         check=True).stdout
    obj, syms = None, []
    for line in out.splitlines():
        if line.endswith(".o:"):
            # automake names a library's objects <lib>_a-<file>.o
            obj = re.sub(r"^lib[\w]+_a-", "", line[:-3])
        elif re.match(r"^[0-9a-f]+ [TDBR] ", line):
            syms.append((obj, line.split()[2]))
    return syms


def name_violations(builddir=BUILDDIR):
    """Exported names that do not begin with their file's name (dashes as underscores, a plural
    file's name also in the singular: pods.c -> pod_*, metrics.c -> metric_*)."""
    bad = []
    libs = sorted(n for n in os.listdir(builddir)
                  if n.startswith("libpinion-") and n.endswith(".a") and n != "libpinion-proto.a")
    assert "libpinion-lib.a" in libs and "libpinion-identity.a" in libs, libs
    for lib in libs:
        for stem, sym in _exported(os.path.join(builddir, lib)):
            prefix = stem.replace("-", "_")
            prefixes = {prefix + "_"} | ({prefix[:-1] + "_"} if prefix.endswith("s") else set())
            if not any(sym.startswith(p) for p in prefixes):
                bad.append(f"{lib} {stem}.c: {sym}")
    return bad


def test_exported_names_say_where_they_live():
    bad = name_violations()
    assert not bad, f"{len(bad)} names:\n" + "\n".join(bad)


if __name__ == "__main__":
    import sys
    print("\n".join(name_violations(sys.argv[1] if len(sys.argv) > 1 else BUILDDIR)))
