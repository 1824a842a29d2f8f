# SPDX-License-Identifier: MIT
"""The man pages (man/*.[158]) against the programs they describe.

Every list a page documents is compared, in both directions, with what the binaries or their
sources really have: the config keys with `piniond --list-config-keys` (and each documented key
with what `--check-config` accepts), pinionctl's commands and options with its --help and the
command table it prints on a usage error, piniond's options with its --help, pinion-cni's
commands, environment, network config keys and error codes with modules/podnet/cni.[ch]. Then
each page must render without a groff warning and `make install` must put it in its section.

The pages follow a few conventions for this (stated at the top of each): list entries are
".TP" paragraphs whose tag line names the entry; pinion.conf(5) has one ".SS [section]" per
section, each key tagged ".BI key= VALUE" with "Default: \\fBvalue\\fR." (or "Default: none.")."""

import os
import re
import shutil
import subprocess
import tempfile

import pytest

from pinion_testlib import (BUILDDIR, EXIT_CONFIG, PINIOND, PINIONCTL, SRCDIR, T, build_directory, clean_env,
                            require_binary, run_piniond, run_pinionctl)

MAN_DIR = os.path.join(SRCDIR, "man")
PAGES = {"piniond.8": "man8", "pinionctl.1": "man1", "pinion-cni.8": "man8",
         "pinion.conf.5": "man5"}
PINION_CNI = os.path.join(BUILDDIR, "pinion-cni")


# ---- reading roff ----

def unroff(text):
    """The plain text of a roff fragment: font escapes dropped, the usual glyphs resolved."""
    text = re.sub(r"\\f[BIRP]|\\f\(..|\\&|\\c|\\%", "", text)
    for esc, plain in ((r"\-", "-"), (r"\(aq", "'"), (r"\(dq", '"'), (r"\(lq", '"'),
                       (r"\(rq", '"'), (r"\(mu", "x"), (r"\(+-", "+-"), (r"\(em", "-"),
                       (r"\(bu", "*"), (r"\~", " "), (r"\e", "\\")):
        text = text.replace(esc, plain)
    return text


def macro_args(line):
    """The words of a macro line such as `.BR \\-c ", " \\-\\-config =FILE`, joined as the
    macro would print them (alternating fonts join without spaces)."""
    parts = re.findall(r'"((?:[^"]|"")*)"|(\S+)', line.split(None, 1)[1] if " " in line else "")
    words = [q if q or not w else w for q, w in parts]
    macro = line.split()[0]
    joiner = "" if macro in (".BR", ".BI", ".IB", ".IR", ".RB", ".RI") else " "
    return unroff(joiner.join(words))


def read_page(name):
    with open(os.path.join(MAN_DIR, name), encoding="utf-8") as f:
        return f.read()


def sh_sections(text):
    """{.SH title: [lines]} (titles unquoted)."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith(".SH "):
            current = unroff(line[4:].strip().strip('"'))
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out


def tp_entries(lines):
    """[(tag, body lines)] for the .TP paragraphs among lines; the tag is the line after .TP,
    rendered to text."""
    entries = []
    for i, line in enumerate(lines):
        if line.strip() == ".TP" and i + 1 < len(lines):
            tag = lines[i + 1]
            tag_text = macro_args(tag) if tag.startswith(".") else unroff(tag)
            body = []
            for rest in lines[i + 2:]:
                if rest.startswith((".TP", ".SS", ".SH")):
                    break
                body.append(rest)
            entries.append((tag_text.strip(), body))
    return entries


def options_in(text):
    """The long and short options named in a piece of text."""
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", text))


def page_section(page, title):
    sections = sh_sections(read_page(page))
    assert title in sections, "%s has no section %s (it has %s)" % (page, title, list(sections))
    return sections[title]


# ---- (1) pinion.conf(5): every key the agent accepts, and only those ----

def agent_keys():
    """{section: {key: default}} from `piniond --list-config-keys`."""
    require_binary(PINIOND)
    rc, out, err = run_piniond("--list-config-keys")
    assert rc == 0, (rc, out, err)
    keys, section = {}, None
    for line in out.splitlines():
        if not line.strip():
            continue
        m = re.fullmatch(r"\[([^\]]+)\]", line)
        if m:
            section = m.group(1)
            assert section not in keys, "section [%s] listed twice" % section
            keys[section] = {}
            continue
        assert section and "=" in line, "unexpected line in --list-config-keys: %r" % line
        key, default = line.split("=", 1)
        keys[section][key] = default
    return keys


def page_keys():
    """{section: {key: documented default or None}} from pinion.conf.5."""
    lines = page_section("pinion.conf.5", "SECTIONS AND KEYS")
    out, section, chunk = {}, None, []

    def flush():
        if section is None:
            return
        for tag, body in tp_entries(chunk):
            m = re.fullmatch(r"([a-z][a-z0-9-]*)=\S.*", tag)
            assert m, "[%s]: a .TP entry that is no key=VALUE tag: %r" % (section, tag)
            key = m.group(1)
            assert key not in out[section], "[%s] %s documented twice" % (section, key)
            raw = "\n".join(body)
            d = re.search(r"Default: \\fB(.*?)\\fR", raw)
            if d:
                out[section][key] = unroff(d.group(1))
            else:
                assert re.search(r"Default: none\b", raw), \
                    "[%s] %s: no 'Default: \\fBvalue\\fR' nor 'Default: none'" % (section, key)
                out[section][key] = ""
    for line in lines:
        if line.startswith(".SS "):
            flush()
            m = re.fullmatch(r'\.SS "?\[([^\]]+)\]"?', line.strip())
            assert m, "an .SS that is no [section]: %r" % line
            section, chunk = m.group(1), []
            assert section not in out, "[%s] documented twice" % section
            out[section] = {}
        else:
            chunk.append(line)
    flush()
    return out


def as_documented(value):
    """A default as the page spells it: the page documents a node's directories (/etc, /var,
    /run, as the .deb and the image have them); this build may be configured for others."""
    for var, node_dir in (("runstatedir", "/run"), ("localstatedir", "/var"), ("sysconfdir", "/etc")):
        built = build_directory(var)
        if value == built or value.startswith(built + "/"):
            return node_dir + value[len(built):]
    return value


def test_pinion_conf_documents_every_key_the_agent_accepts():
    agent, page = agent_keys(), page_keys()
    agent = {s: {k: as_documented(v) for k, v in keys.items()} for s, keys in agent.items()}
    assert agent and all(agent.values()), agent
    missing = sorted("[%s] %s" % (s, k) for s in agent for k in agent[s] if k not in page.get(s, {}))
    extra = sorted("[%s] %s" % (s, k) for s in page for k in page[s] if k not in agent.get(s, {}))
    assert not missing, "keys the agent accepts that pinion.conf.5 leaves out: %s" % missing
    assert not extra, "keys pinion.conf.5 documents that the agent does not have: %s" % extra
    wrong = sorted("[%s] %s: page says %r, agent %r" % (s, k, page[s][k], agent[s][k])
                   for s in agent for k in agent[s] if page[s][k] != agent[s][k])
    assert not wrong, "documented defaults differ from the built-in ones: %s" % wrong


def _check_config(tmp, text):
    path = os.path.join(tmp, "pinion.conf")
    with open(path, "w") as f:
        f.write(text)
    return run_piniond("--config", path, "--check-config", timeout=T(30))


def test_every_documented_key_is_accepted_by_check_config():
    """The page's keys against the parser itself, not only against the listing: each key alone
    in its section must not be 'unknown' to --check-config (its value may still be refused, e.g.
    an instance section without its required keys), and an undocumented key must be."""
    require_binary(PINIOND)
    tmp = tempfile.mkdtemp(prefix="pinion-man-")
    try:
        checked = 0
        for section, keys in page_keys().items():
            real = section.replace(".NAME", ".man-test")
            for key, default in keys.items():
                rc, out, err = _check_config(tmp, "[%s]\n%s=%s\n" % (real, key, default))
                assert "unknown key" not in err and "unknown section" not in err, \
                    "[%s] %s is documented but --check-config says: %s" % (section, key, err)
                checked += 1
            rc, out, err = _check_config(tmp, "[%s]\nno-such-key-man-test=1\n" % real)
            assert rc == EXIT_CONFIG and "unknown key 'no-such-key-man-test'" in err, (rc, err)
        rc, out, err = _check_config(tmp, "[no-such-section-man-test]\nx=1\n")
        assert rc == EXIT_CONFIG and "unknown section" in err, (rc, err)
        assert checked >= 60, checked
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_list_config_keys_is_a_template_of_the_defaults():
    """--list-config-keys, without its [*.NAME] templates, is itself a valid configuration."""
    require_binary(PINIOND)
    rc, out, err = run_piniond("--list-config-keys")
    assert rc == 0, (rc, err)
    plain = re.split(r"\n(?=\[)", out.strip())
    kept = "\n".join(block for block in plain if ".NAME]" not in block.splitlines()[0]) + "\n"
    tmp = tempfile.mkdtemp(prefix="pinion-man-")
    try:
        rc, _, err = _check_config(tmp, kept)
        assert rc == 0, "the listed defaults are not a valid configuration: %s\n%s" % (err, kept)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- (2) pinionctl(1): commands and options ----

def _help_block(text, start, end):
    m = re.search(r"^%s\n(.*?)^%s" % (start, end), text, re.M | re.S)
    assert m, "no %r ... %r block in:\n%s" % (start, end, text)
    return m.group(1)


def pinionctl_help():
    require_binary(PINIONCTL)
    rc, out, err = run_pinionctl("--help")
    assert rc == 0, (rc, out, err)
    return out


def test_pinionctl_page_names_every_command():
    out = pinionctl_help()
    helped = {line.split()[0] for line in _help_block(out, "Commands:", "Options:").splitlines()
              if line.strip()}
    # The command table itself, as pinionctl prints it after a usage error.
    rc, _, err = run_pinionctl()
    assert rc == 2, (rc, err)
    m = re.search(r"^Commands:(.*)$", err, re.M)
    assert m, err
    table = set(m.group(1).split())
    assert helped == table, "--help lists %s, the command table has %s" % (sorted(helped), sorted(table))
    page = {tag.split()[0] for tag, _ in tp_entries(page_section("pinionctl.1", "COMMANDS"))}
    assert table - page == set(), "pinionctl.1 leaves out commands %s" % sorted(table - page)
    assert page - table == set(), "pinionctl.1 documents commands pinionctl lacks: %s" % sorted(page - table)


def test_pinionctl_page_names_every_option():
    helped = options_in(_help_block(pinionctl_help(), "Options:", "Exit status:"))
    page = set()
    for tag, _ in tp_entries(page_section("pinionctl.1", "OPTIONS")):
        page |= options_in(tag)
    assert helped and helped == page, \
        "pinionctl --help has %s, pinionctl.1 %s" % (sorted(helped), sorted(page))
    for opt in sorted(page):
        arg = {"-s": ["/nonexistent"], "--socket": ["/nonexistent"], "-t": ["1s"],
               "--timeout": ["1s"]}.get(opt, [])
        rc, out, err = run_pinionctl(opt, *arg, "--help")
        assert rc == 0 and "unknown option" not in err, (opt, rc, err)


def test_pinionctl_exit_statuses():
    m = re.search(r"^Exit status: (.*)$", pinionctl_help(), re.M)
    assert m
    helped = set(re.findall(r"\b(\d+) ", m.group(1)))
    page = {tag for tag, _ in tp_entries(page_section("pinionctl.1", "EXIT STATUS"))}
    assert helped == page, (helped, page)


# ---- (3) piniond(8): options, exit status ----

def test_piniond_page_names_every_option():
    require_binary(PINIOND)
    rc, out, err = run_piniond("--help")
    assert rc == 0, (rc, out, err)
    helped = options_in("\n".join(line for line in out.splitlines() if line.startswith("  ")))
    page = set()
    for tag, _ in tp_entries(page_section("piniond.8", "OPTIONS")):
        page |= options_in(tag)
    assert helped and helped == page, "piniond --help has %s, piniond.8 %s" % (sorted(helped), sorted(page))
    for opt in sorted(page):
        arg = ["/nonexistent.conf"] if opt in ("-c", "--config") else []
        rc, out, err = run_piniond(opt, *arg, "--help")
        assert rc == 0 and "unrecognized" not in err and "invalid option" not in err, (opt, rc, err)
    rc, out, err = run_piniond("--no-such-option-man-test")
    assert rc == 2, (rc, err)


def test_piniond_page_exit_status_and_signals():
    statuses = {tag for tag, _ in tp_entries(page_section("piniond.8", "EXIT STATUS"))}
    assert {"0", "1", "2", str(EXIT_CONFIG)} <= statuses, statuses
    signals = set()
    for tag, _ in tp_entries(page_section("piniond.8", "SIGNALS")):
        signals |= set(re.findall(r"SIG[A-Z]+", tag))
    # The signals the agent handles, from the source.
    with open(os.path.join(SRCDIR, "agent", "manager.c")) as f:
        m = re.search(r"signals\[\] = \{([^}]*)\}", f.read())
    assert m
    handled = set(re.findall(r"SIG[A-Z]+", m.group(1)))
    assert handled and handled == signals, "handled %s, documented %s" % (handled, signals)


# ---- (4) pinion-cni(8): commands, environment, network config, error codes ----

def _source(*parts):
    with open(os.path.join(SRCDIR, *parts)) as f:
        return f.read()


def _tags(page, title):
    return {tag.split()[0] for tag, _ in tp_entries(page_section(page, title))}


def _run_cni(command):
    env = clean_env({k: None for k in os.environ if k.startswith("CNI_")})
    env["CNI_COMMAND"] = command
    return subprocess.run([PINION_CNI], input="", capture_output=True, text=True, env=env,
                          timeout=T(30))


def test_pinion_cni_page_names_every_command():
    require_binary(PINION_CNI)
    table = re.search(r"command_table\[[^\]]*\] = \{(.*?)\};", _source("modules", "podnet", "cni.c"), re.S)
    assert table
    commands = set(re.findall(r'= "([A-Z]+)"', table.group(1)))
    assert len(commands) >= 6, commands
    page = _tags("pinion-cni.8", "COMMANDS")
    assert commands == page, "the plugin handles %s, pinion-cni.8 documents %s" % (sorted(commands), sorted(page))
    # And the binary takes each of them (an unknown one is refused before anything else).
    for c in sorted(commands):
        p = _run_cni(c)
        assert "unknown CNI_COMMAND" not in p.stdout, (c, p.stdout)
    p = _run_cni("NO-SUCH")
    assert p.returncode == 1 and "unknown CNI_COMMAND" in p.stdout, p.stdout


def test_pinion_cni_page_names_every_variable_key_and_code():
    # The protocol's checks: cni.c (environment, the config's top-level strings, shared with
    # the plugin) and cni-json.c (the rest of the config, the agent's).
    cni_c = _source("modules", "podnet", "cni-json.c") + _source("modules", "podnet", "cni.c")
    cni_h = _source("modules", "podnet", "cni.h")
    plugin = _source("modules", "podnet", "pinion-cni.c")
    env = set(re.findall(r'getenv_fn\("([A-Z_]+)"', cni_c)) | set(re.findall(r'getenv\("([A-Z_]+)"\)', plugin))
    # The socket check it shares with pinionctl (agent/lib/socket-trust.c) reads one more.
    env |= set(re.findall(r'#define SOCKET_OWNER_ENV "([A-Z_]+)"', _source("agent", "lib", "socket-trust.h")))
    assert {"CNI_COMMAND", "CNI_NETNS", "PINION_SOCKET_OWNER"} <= env, env
    assert env == _tags("pinion-cni.8", "ENVIRONMENT"), (env, _tags("pinion-cni.8", "ENVIRONMENT"))

    keys = set(re.findall(r'field\(obj, "([^"]+)"\)', cni_c))
    assert {"cniVersion", "prevResult"} <= keys, keys
    page_keys_ = _tags("pinion-cni.8", "NETWORK CONFIGURATION")
    assert keys == page_keys_, "the plugin reads %s, pinion-cni.8 documents %s" % (sorted(keys), sorted(page_keys_))

    enum = re.search(r"enum cni_error_code \{(.*?)\};", cni_h, re.S)
    assert enum
    codes = set(re.findall(r"= (\d+),", enum.group(1)))
    page_codes = _tags("pinion-cni.8", "ERRORS")
    assert len(codes) >= 10 and codes == page_codes, \
        "cni.h has codes %s, pinion-cni.8 documents %s" % (sorted(codes, key=int), sorted(page_codes, key=int))


# ---- (5) every page renders without a warning ----

@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_renders_without_warnings(page):
    groff = shutil.which("groff")
    if not groff:
        pytest.skip("groff not installed (Debian package groff-base)")
    p = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", os.path.join(MAN_DIR, page)],
                       capture_output=True, text=True, timeout=T(60))
    assert p.returncode == 0 and not p.stderr.strip(), "%s: rc=%d\n%s" % (page, p.returncode, p.stderr)
    text = read_page(page)
    sections = sh_sections(text)
    for title in ("NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"):
        assert title in sections, "%s has no %s section" % (page, title)
    name, section = page.rsplit(".", 1)
    assert re.search(r"^\.TH %s %s " % (re.escape(name.upper().replace("-", r"\-")), section), text, re.M), \
        "%s: .TH does not name %s(%s)" % (page, name, section)


# ---- (6) make install puts each page in its section ----

def test_make_install_puts_pages_in_their_sections():
    from test_install import _make_install
    require_binary(PINIOND)
    dest = tempfile.mkdtemp(prefix="pinion-man-install-")
    try:
        _make_install(dest, "prefix=/usr", "sysconfdir=/etc")
        mandir = os.path.join(dest, "usr", "share", "man")
        found = sorted(os.path.relpath(os.path.join(d, f), mandir)
                       for d, _, files in os.walk(mandir) for f in files) if os.path.isdir(mandir) else []
        expected = sorted(os.path.join(sub, page) for page, sub in PAGES.items())
        assert found == expected, "installed man pages %s, expected %s" % (found, expected)
        for page, sub in PAGES.items():
            path = os.path.join(mandir, sub, page)
            assert not os.access(path, os.X_OK), path
            with open(path, encoding="utf-8") as f:
                assert f.read() == read_page(page), "%s differs from man/%s" % (path, page)
    finally:
        shutil.rmtree(dest, ignore_errors=True)
