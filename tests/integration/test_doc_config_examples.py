# SPDX-License-Identifier: MIT
"""Every configuration example the documentation shows is one `piniond --check-config` accepts:
the INI blocks of docs/*.md (```ini fences, and bare fences that open with a [section] line),
the .EX/.EE and .nf/.fi blocks of man/pinion.conf.5 that open with one, and conf/pinion.conf.
An operator copies them verbatim, so an example the agent refuses (an end-of-line comment, a
key that was renamed) is a bug in the documentation.

Examples name files that --check-config requires to exist (ca-file, token-file, public-key...).
Their absolute /etc/ paths are rewritten, all of them and consistently, into a temp root where
those files are created with plausible contents (a real Ed25519 public key, a one-line token),
and groups an example names are added to /etc/group inside a private mount namespace: the
examples are checked by the same rules as any config, nothing in check-config is relaxed."""

import glob
import os
import re
import subprocess

import pytest

from pinion_testlib import EXIT_CONFIG, PINIOND, SRCDIR, require_binary
from configsync_testlib import ed25519_keypair

SECTION = re.compile(r"^\[[A-Za-z][A-Za-z0-9._-]*\]\s*$")
INI_LANGS = {"ini", "conf", "cfg", "dosini", "toml"}


def _opens_with_section(lines):
    first = next((l for l in lines if l.strip()), "")
    return bool(SECTION.match(first.strip()))


def markdown_blocks(path):
    """(name, text) of every INI block of a markdown file."""
    blocks, lang, start, body = [], None, 0, None
    for n, line in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
        m = re.match(r"^\s*```\s*([A-Za-z0-9_+-]*)\s*$", line)
        if m and body is None:
            lang, start, body = m.group(1).lower(), n, []
        elif m and body is not None:
            if lang in INI_LANGS or (not lang and _opens_with_section(body)):
                blocks.append(("%s:%d" % (os.path.relpath(path, SRCDIR), start), "\n".join(body) + "\n"))
            body = None
        elif body is not None:
            body.append(line)
    return blocks


def _unroff(line):
    for a, b in (("\\-", "-"), ("\\(aq", "'"), ("\\(dq", '"'), ("\\e", "\\"), ("\\&", ""), ("\\~", " ")):
        line = line.replace(a, b)
    return line


def man_blocks(path):
    """(name, text) of every example block (.EX/.EE, .nf/.fi) of a man page that is INI."""
    blocks, start, body = [], 0, None
    for n, line in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
        if line.startswith((".EX", ".nf")) and body is None:
            start, body = n, []
        elif line.startswith((".EE", ".fi")) and body is not None:
            if _opens_with_section(body):
                blocks.append(("%s:%d" % (os.path.relpath(path, SRCDIR), start), "\n".join(body) + "\n"))
            body = None
        elif body is not None and not line.startswith("."):
            body.append(_unroff(line))
    return blocks


def examples():
    found = []
    for md in sorted(glob.glob(os.path.join(SRCDIR, "docs", "*.md"))) + [os.path.join(SRCDIR, "README.md")]:
        found += markdown_blocks(md)
    found += man_blocks(os.path.join(SRCDIR, "man", "pinion.conf.5"))
    sample = os.path.join(SRCDIR, "conf", "pinion.conf")
    found.append((os.path.relpath(sample, SRCDIR), open(sample, encoding="utf-8").read()))
    return found


EXAMPLES = examples()

KEY_VALUE = re.compile(r"^(\s*)([A-Za-z0-9_.-]+)(\s*=\s*)(.*?)\s*$")


def _file_content(key, root):
    """What a file named by key holds: enough for what --check-config reads of it."""
    if key == "public-key":
        _, pub = ed25519_keypair(root, "example-%d" % len(os.listdir(root)))
        return open(pub, "rb").read()
    if key.endswith("token-file"):
        return b"example-token\n"
    return b"-----BEGIN EXAMPLE-----\n-----END EXAMPLE-----\n"


def materialize(text, root):
    """The example with every value that is an absolute path under /etc/ moved below root; files
    named by *-file and public-key keys are created there."""
    out = []
    for line in text.splitlines():
        m = KEY_VALUE.match(line)
        if not m or line.lstrip().startswith(("#", ";")) or not m.group(4).startswith("/etc/"):
            out.append(line)
            continue
        key, value = m.group(2), m.group(4)
        moved = root + value
        if key.endswith("-file") or key == "public-key":
            os.makedirs(os.path.dirname(moved), exist_ok=True)
            if not os.path.exists(moved):
                content = _file_content(key, root)
                with open(moved, "wb") as f:
                    f.write(content)
                os.chmod(moved, 0o600)
        out.append(m.group(1) + key + m.group(3) + moved)
    return "\n".join(out) + "\n"


def groups_named(text):
    return sorted(set(m.group(1) for m in re.finditer(r"^\s*(?:socket-)?group\s*=\s*([A-Za-z_][A-Za-z0-9_-]*)\s*$",
                                                        text, re.M)))


def check_config(config, root, groups):
    """piniond --check-config on config, in a mount namespace whose /etc/group has groups."""
    group_file = os.path.join(root, "group")
    with open("/etc/group") as f:
        existing = f.read()
    have = {l.split(":")[0] for l in existing.splitlines() if l}
    with open(group_file, "w") as f:
        f.write(existing)
        for i, g in enumerate(g for g in groups if g not in have):
            f.write("%s:x:%d:\n" % (g, 64000 + i))
    script = 'mount --bind "$1" /etc/group && exec "$2" --config "$3" --check-config'
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", group_file,
                        require_binary(PINIOND), config],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"})
    return p.returncode, p.stdout, p.stderr


def test_examples_are_found():
    """The extraction finds the documented examples (a test that sees none proves nothing)."""
    names = [n for n, _ in EXAMPLES]
    assert any(n.startswith("docs/reclaim.md:") for n in names), names
    assert any(n.startswith("docs/configsync.md:") for n in names), names
    assert any(n.startswith("docs/configuration.md:") for n in names), names
    assert any(n.startswith("man/pinion.conf.5:") for n in names), names


@pytest.mark.parametrize("name,text", EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_documented_example_passes_check_config(tmp_dir, name, text):
    if os.geteuid() != 0:
        pytest.skip("needs root for a private mount namespace")
    root = os.path.join(tmp_dir, "root")
    os.makedirs(root)
    config = os.path.join(tmp_dir, "example.conf")
    with open(config, "w") as f:
        f.write(materialize(text, root))
    rc, out, err = check_config(config, tmp_dir, groups_named(text))
    assert rc == 0, "%s is refused by --check-config (exit %d):\n%s\nthe example:\n%s" % (name, rc, err, text)
    assert out.startswith("configuration OK ("), out
    assert rc != EXIT_CONFIG
