# SPDX-License-Identifier: MIT
"""The house rules of docs/design.md ("Layout" and "Style"), checked on the tree and the build:

- the layout section lists exactly the folders and files that are there;
- a room includes only its own headers and those of the rooms below it (lib < socket, pods <
  api, grpc < the spine < modules), so no gRPC file sees the HTTP server;
- every exported name begins with the name of the file that defines it (read from the
  libraries with nm, so it is what the linker sees);
- a module's model files never call its API files (views subscribe to models), and the module
  contract (agent/module.c) knows no manager;
- every integration test file is one `make check-integration` runs;
- no function in a handler file (agent/manager-api.c, modules/*/*-api*.c) is longer than 80
  lines."""

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
            sym = line.split()[2]
            # names the compiler makes (AddressSanitizer's __odr_asan.*) are the implementation's
            if not sym.startswith("__"):
                syms.append((obj, sym))
    return syms


def name_violations(builddir=BUILDDIR):
    """Exported names that do not begin with their file's name (dashes as underscores, in the
    singular or the plural: pods.c -> pod_*, metrics.c -> metric_*, service.c -> services_*)."""
    bad = []
    libs = sorted(n for n in os.listdir(builddir)
                  if n.startswith("libpinion-") and n.endswith(".a") and n != "libpinion-proto.a")
    assert "libpinion-lib.a" in libs and "libpinion-identity.a" in libs, libs
    for lib in libs:
        for stem, sym in _exported(os.path.join(builddir, lib)):
            prefix = stem.replace("-", "_")
            prefixes = {prefix + "_", prefix + "s_"} | ({prefix[:-1] + "_"} if prefix.endswith("s") else set())
            if not any(sym.startswith(p) for p in prefixes):
                bad.append(f"{lib} {stem}.c: {sym}")
    return bad


def test_exported_names_say_where_they_live():
    bad = name_violations()
    assert not bad, f"{len(bad)} names:\n" + "\n".join(bad)


if __name__ == "__main__":
    import sys
    print("\n".join(name_violations(sys.argv[1] if len(sys.argv) > 1 else BUILDDIR)))


# ---- docs/design.md's layout section against the tree ----

def _layout_block():
    with open(os.path.join(SRCDIR, "docs", "design.md")) as f:
        text = f.read()
    section = text.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


FILE_ENTRY = re.compile(r"^[\w.+-]+\.(c|h|\[ch\]|mk)$")


def _names(word):
    return [word.replace(".[ch]", ".c"), word.replace(".[ch]", ".h")] if ".[ch]" in word else [word]


def _layout_entries():
    """{folder: {entries}} of the layout block: a line's first word is a folder (ending in /)
    or a file (x.c, x.h, x.[ch], x.mk) of the folder above it with less indentation; the
    description after it is prose. A line whose words after a folder, or all of whose words,
    are files is a listing: every word is a file (of that folder, or of the one above)."""
    stack, entries = [(-1, "")], {}
    for line in _layout_block().splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        word = words[0]
        if not (word.endswith("/") or FILE_ENTRY.match(word)):
            continue
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        listing = all(FILE_ENTRY.match(w) for w in words[1:])
        if word.endswith("/"):
            path = os.path.join(parent, word.rstrip("/"))
            entries.setdefault(parent, set()).add(word)
            stack.append((indent, path))
            if words[1:] and listing:
                for w in words[1:]:
                    entries.setdefault(path, set()).update(_names(w))
        else:
            for w in words if listing else [word]:
                entries.setdefault(parent, set()).update(_names(w))
    return entries


def _documented_and_actual(top):
    """(files and folders below top as the layout lists them, as the tree has them)."""
    documented, actual = set(), set()
    for folder, names in _layout_entries().items():
        # modules/<name>/ describes every module's files by pattern; the listing names them
        if (folder == top or folder.startswith(top + "/")) and "<" not in folder:
            documented |= {os.path.join(folder, n.rstrip("/")) for n in names}
    for dirpath, dirs, files in os.walk(os.path.join(SRCDIR, top)):
        rel = os.path.relpath(dirpath, SRCDIR)
        actual |= {os.path.join(rel, d) for d in dirs} | {os.path.join(rel, f) for f in files}
    return documented, actual


@pytest.mark.parametrize("top", ["agent", "modules"])
def test_design_layout_is_the_tree(top):
    """Every file and folder of agent/ and modules/ is in the layout, and nothing else is."""
    documented, actual = _documented_and_actual(top)
    assert len(actual) > 50, actual
    assert sorted(actual - documented) == [], "in the tree, not in docs/design.md's layout"
    assert sorted(documented - actual) == [], "in docs/design.md's layout, not in the tree"


def test_layout_reader_sees_listings_and_descriptions():
    """The reader counts a listing's every word and only the first word of a described entry,
    so that neither a listing nor prose can pass for the other."""
    entries = _layout_entries()
    assert {"reflector.c", "reflector.h", "local.mk"} <= entries["modules/apiserver"]
    assert "module.c" in entries["agent"] and "main" not in str(entries["agent"])


def test_design_layout_names_every_module_and_top_folder():
    block = _layout_block()
    line = block.split("modules/<name>/", 1)[1].split("\n  <name>.c", 1)[0]
    named = set(re.findall(r"[a-z]+", line.split("per job:", 1)[1]))
    assert named == set(os.listdir(MODULES))
    top = {w.split("/", 1)[0] + "/" for w in _layout_entries()[""]}  # modules/<name>/ -> modules/
    top_files = block.rstrip("\n").splitlines()[-1].split()
    assert all(os.path.isfile(os.path.join(SRCDIR, f)) for f in top_files), top_files
    tracked = subprocess.run(["git", "-C", SRCDIR, "ls-files"], capture_output=True, text=True).stdout.split()
    if tracked:  # a checkout (a dist tarball has generated files besides)
        folders = {p.split("/", 1)[0] + "/" for p in tracked if "/" in p and not p.startswith(".")}
        assert folders - {"build-aux/", "m4/"} <= top, folders - top
        assert top <= folders, top - folders
        assert sorted(p for p in tracked if "/" not in p and not p.startswith(".")) == sorted(top_files)


# ---- models announce, views subscribe; handlers only map ----

DEFINITION = re.compile(r"^(?!static\b)[a-z][\w\s*]*?\b(\w+)\((?:[^;]*)$", re.M)


def _functions(path):
    """[(name, first line, number of lines, exported)] of the function definitions of a C file
    (house style: the head starts in column 0, the body ends with a '}' in column 0)."""
    out, lines = [], open(path).read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(static\s+)?(?:[\w*]+\s+)*\**(\w+)\(", line)
        if m and not line.rstrip().endswith(";") and not line.startswith(("#", " ", "\t", "}")):
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith("{") and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{"):
                k = j + 1
                while k < len(lines) and lines[k] != "}":
                    k += 1
                out.append((m.group(2), i + 1, k - i + 1, not m.group(1) and not line.startswith("_")))
                i = k
        i += 1
    return out


def _module_files(module):
    folder = os.path.join(MODULES, module)
    cs = sorted(f for f in os.listdir(folder) if f.endswith(".c"))
    # views: the API files, and the file that starts and stops them (identity-views.c)
    views = [f for f in cs if re.search(r"-api(-[\w-]+)?\.c$|-views\.c$", f)]
    return folder, views, [f for f in cs if f not in views]


def test_models_call_no_view():
    bad = []
    for module in sorted(os.listdir(MODULES)):
        folder, views, models = _module_files(module)
        view_functions = {name for v in views for name, _, _, exported in _functions(os.path.join(folder, v))
                          if exported}
        for mf in models:
            with open(os.path.join(folder, mf)) as f:
                text = f.read()
            for name in sorted(view_functions):
                # The module's entry (<module>.c) wires its views in: it may start and stop them.
                if mf == module + ".c" and re.search(r"_(register|unregister|start|stop)$", name):
                    continue
                if re.search(r"\b%s\(" % name, text):
                    bad.append(f"modules/{module}/{mf} calls {name}() of an API file")
    assert not bad, "\n".join(bad)


def test_module_contract_knows_no_manager():
    with open(os.path.join(AGENT, "module.c")) as f:
        text = f.read()
    assert '#include "manager.h"' not in text and "manager_" not in text


def test_handlers_only_map():
    handler_files = [os.path.join(AGENT, "manager-api.c")]
    for module in sorted(os.listdir(MODULES)):
        folder, views, _ = _module_files(module)
        handler_files += [os.path.join(folder, v) for v in views]
    assert len(handler_files) > 8
    long = [f"{os.path.relpath(p, SRCDIR)}:{line}: {name}() is {n} lines"
            for p in handler_files for name, line, n, _ in _functions(p) if n > 80]
    assert not long, "\n".join(long)


def test_function_scanner_sees_functions():
    """The scanner the two tests above rely on finds a known long function and a known
    exported one, so a change of style cannot make them pass vacuously."""
    found = {name: (n, exported) for name, _, n, exported in _functions(os.path.join(AGENT, "manager.c"))}
    assert found["manager_new"][1] and found["manager_new"][0] > 20
    assert any(not exported for _, exported in found.values())


def test_every_integration_test_file_is_run_by_make_check():
    """A test file nobody lists in INTEGRATION_TESTS (Makefile.am or a module's local.mk) is never
    run by `make check-integration`, so never by CI."""
    with open(os.path.join(BUILDDIR, "Makefile")) as f:
        makefile = f.read()
    listed = set(re.findall(r"tests/integration/(test_\w+\.py)", makefile))
    files = {n for n in os.listdir(os.path.join(SRCDIR, "tests", "integration"))
             if re.fullmatch(r"test_\w+\.py", n)}
    assert not files - listed, "integration tests that make check does not run: %s" % sorted(files - listed)
