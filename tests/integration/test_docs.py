# SPDX-License-Identifier: MIT
"""The docs against the binary, so that they cannot drift apart:

- metrics: every family docs/*.md and README.md name is on a live /metrics of one agent running
  every module, with the labels the docs give it, and every family that agent exposes is
  documented with exactly its label names;
- routes: the routes docs/api.md documents are the routes in the sources' route tables, each
  answers on that agent, and each route of a module answers 503 with the module's state when
  the module is switched off;
- the README's promises about scripts/test and the systemd unit.

How the docs name things (the convention these tests read):
- a metric is a backticked `pinion_NAME` or `pinion_NAME{label,label}`. Every family must be
  named at least once with all its label names and nothing else (`pinion_pods{source}`;
  `pinion_uptime_seconds` for one without labels): that is its definition. Other mentions
  may name some labels only, or give values (`pinion_api_requests_total{code="429"}`), but
  never a label the family lacks. Histograms are named without _bucket/_sum/_count; `le` is
  not a label. `pinion_x_*` (a wildcard) is prose, not a name.
- a route is a docs/api.md heading "### `METHOD /path`", path parameters in braces
  (`{namespace}`), optional parts in brackets or after "?" (`[?wait=DURATION]`); in the
  sources it is a row `{ "METHOD", "/path/{}", handler, ... }` of a `struct api_route` table."""

import contextlib
import glob
import json
import os
import re
import shutil
import sys
import tempfile

import pytest

from pinion_testlib import SRCDIR, Agent, make_pod, parse_metrics, wait_until
import configsync_testlib as cs
import reclaim_testlib as rt
import zkreg_testlib as zt
from configsync_testlib import test_ca  # noqa: F401 (fixture)
from podnet_testlib import free_pod_cidr
from zkreg_testlib import zk  # noqa: F401 (fixture)

sys.path.insert(0, os.path.join(SRCDIR, "tests", "fakes"))
from kube_apiserver import FakeApiserver  # noqa: E402

TOKEN = "docs-token"

# ---- what the docs say ----

DOC_FILES = sorted(glob.glob(os.path.join(SRCDIR, "docs", "*.md"))) + [os.path.join(SRCDIR, "README.md")]
# Measurements and reasoning: their mentions must be true, but they document nothing.
NOT_REFERENCE = {"benchmarks.md", "design-notes.md"}
METRIC_MENTION = re.compile(r"`(pinion_[a-z0-9_]*[a-z0-9])(?:\{([^}`]*)\})?`")


def documented_metrics():
    """[(file:line, family, [label names], exact)], exact when the mention names labels only
    (or none) in a reference doc: a definition candidate."""
    out = []
    for path in DOC_FILES:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                for m in METRIC_MENTION.finditer(line):
                    where = "%s:%d" % (os.path.relpath(path, SRCDIR), n)
                    reference = os.path.basename(path) not in NOT_REFERENCE
                    items = [i.strip() for i in (m.group(2) or "").split(",") if i.strip()]
                    names = [i.split("=", 1)[0].strip() for i in items]
                    out.append((where, m.group(1), names, reference and all("=" not in i for i in items)))
    return out


def documented_routes():
    """{(method, pattern)} of docs/api.md's route headings, parameters as {}."""
    routes = set()
    with open(os.path.join(SRCDIR, "docs", "api.md")) as f:
        for line in f:
            m = re.match(r"^#{2,4} `(GET|POST|PUT|DELETE|PATCH) (/[^`\s]*)`", line)
            if m:
                path = re.split(r"[\[?]", m.group(2), 1)[0]
                routes.add((m.group(1), re.sub(r"\{[^}]*\}", "{}", path)))
    return routes


def source_routes():
    """{(method, pattern): owner} of every struct api_route table in agent/ and modules/; the
    owner is the module's folder name, or None for the agent's core."""
    routes = {}
    for path in glob.glob(os.path.join(SRCDIR, "agent", "**", "*.c"), recursive=True) + \
            glob.glob(os.path.join(SRCDIR, "modules", "*", "*.c")):
        with open(path) as f:
            text = f.read()
        for table in re.findall(r"struct api_route \w+\[\] = \{(.*?)\n\s*\};", text, re.S):
            rel = os.path.relpath(path, SRCDIR).split(os.sep)
            owner = rel[1] if rel[0] == "modules" else None
            for method, pattern in re.findall(r'\{\s*"([A-Z]+)",\s*"([^"]+)"', table):
                routes[(method, pattern)] = owner
    return routes


def test_the_readers_see_the_docs():
    """The parsers above find what is there, so a change of format cannot pass vacuously."""
    defs = {(fam, tuple(labels)) for _, fam, labels, exact in documented_metrics() if exact}
    assert ("pinion_module_state", ("module", "state")) in defs
    assert ("pinion_uptime_seconds", ()) in defs
    assert ("GET", "/v1/pods/{}/{}") in documented_routes()
    assert source_routes()[("POST", "/v1/registrations/drain")] == "zkreg"
    assert source_routes()[("GET", "/v1/status")] is None


def test_documented_routes_are_the_route_tables():
    documented, actual = documented_routes(), set(source_routes())
    assert sorted(actual - documented) == [], "routes the agent serves that docs/api.md does not document"
    assert sorted(documented - actual) == [], "routes docs/api.md documents that no route table has"


# ---- one agent with every module ----

def _wait_started(a):
    def settled():
        mods = {m["name"]: m for m in a.status()["modules"]}
        pending = [n for n, m in mods.items() if m["state"] not in ("running", "degraded")]
        return not pending and mods
    try:
        return wait_until(settled, 20, desc="every module running")
    except AssertionError:
        raise AssertionError("not every module runs: %s\n%s" % (
            json.dumps(a.status()["modules"], indent=1), a.log_tail()))


@pytest.fixture(scope="module")
def every_module(request, test_ca):  # noqa: F811
    """One agent with every module running: the apiserver module on the test apiserver,
    identity's local signer, zkreg on a real ZooKeeper, a config from a real nginx, podnet on a
    free CIDR, reclaim on a cgroup v1 memory cgroup, and the CSI plugin. One static pod, so
    that the pod routes have one to answer for."""
    if not rt.v1_available():
        pytest.skip("no cgroup v1 memory hierarchy at %s" % rt.V1_ROOT)
    if not zt.zookeeper_available():
        pytest.skip("ZooKeeper (Debian zookeeper) is not installed")
    zk = request.getfixturevalue("zk")  # noqa: F811
    with contextlib.ExitStack() as stack:
        d = tempfile.mkdtemp(prefix="pinion-docs-")
        stack.callback(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        fake = FakeApiserver(tls=True, token=TOKEN).start()
        stack.callback(fake.stop)
        token_file = os.path.join(d, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.makedirs(os.path.join(d, "nginx"), mode=0o755)
        nginx = cs.Nginx(os.path.join(d, "nginx"), test_ca)
        stack.callback(nginx.stop)
        cs.write_bundle(nginx.root, "app", {"app.yaml": b"greeting: hi\n"}, "v1")
        g = rt.MemCgroup("/pinion-docs-%d" % os.getpid()).create(256 << 20)
        stack.callback(g.remove)
        for sub in ("ca", "csi-reg", "csi-pods"):
            os.makedirs(os.path.join(d, sub), mode=0o755)
        a = Agent(config={
            "apiserver": {"url": fake.url, "token-file": token_file, "ca-file": fake.ca_file,
                          "backoff-initial": "100ms", "backoff-max": "1s"},
            "identity": {"signer": "local", "trust-domain": "docs.test", "ca-dir": os.path.join(d, "ca")},
            "zookeeper": {"servers": zk.hosts, "session-timeout": "4s"},
            "config.app": cs.config_section(nginx.url("app/manifest.json"), os.path.join(d, "app"), test_ca,
                                            **{"on-change": "/bin/true"}),
            "network": {"pod-cidr": free_pod_cidr()},
            "reclaim.docs": {"cgroup": g.name, "high": "90%", "target": "80%", "interval": "1h"},
            "csi": {"enable": "yes", "socket": os.path.join(d, "csi.sock"),
                    "registration-dir": os.path.join(d, "csi-reg"), "pods-root": os.path.join(d, "csi-pods")},
        })
        stack.callback(a.close)
        a.write_pod("web", make_pod("web", ip="127.0.0.1", ports=[("http", 8080)],
                                    annotations={"pinion.io/serverset": "/docs/web", "pinion.io/port": "http"}))
        a.start()
        _wait_started(a)
        a.wait_pod("default", "web")
        # The first work of each module done, so that its series with event-given labels are
        # there: the pod registered in ZooKeeper, the config fetched and published.
        zt.wait_reg(a, "default/web", lambda r: r["state"] == "registered", 20)
        wait_until(lambda: cs.get_config(a, "app").get("present"), 20, desc="config app present")
        yield a


# ---- metrics ----

# Families that have no series until their first event, though their label names are known:
# a series needs label values, and these are values no agent can know before the event (a
# route's path, an error's kind, a gRPC method as the caller spelt it). Each lists the event.
SERIES_AFTER_AN_EVENT = {
    "pinion_api_connections_closed_total": (("reason",), "a connection closed past a deadline"),
    "pinion_api_connections_rejected_total": (("reason",), "a connection refused at accept"),
    "pinion_api_streams_dropped_total": (("route",), "a stream's reader cut off"),
    "pinion_apiserver_errors_total": (("resource", "kind"), "an error of that kind"),
    "pinion_grpc_calls_total": (("server", "method", "status"), "a call ended with that status"),
    "pinion_grpc_rejected_total": (("server", "reason"), "a connection or stream refused"),
    "pinion_memory_refused_total": (("work",), "work refused near the memory limit"),
    "pinion_podnet_ipv6_pool_addresses": (("state",), "an IPv6 pod-cidr (this agent's is IPv4)"),
}


def exposed(text):
    """{family: set of label names} of an exposition; a family without series has None."""
    families, labels = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            families[name] = kind.strip()
    for name, lbls, _ in parse_metrics(text).samples:
        fam = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and families.get(name[:-len(suffix)]) == "histogram":
                fam = name[:-len(suffix)]
        assert fam in families, "sample %s has no TYPE line" % name
        labels.setdefault(fam, set()).update(k for k in lbls if k != "le")
    return {f: labels.get(f) for f in families}


def test_documented_metrics_are_the_exposed_ones(every_module):
    live = exposed(every_module.metrics().text)
    mentions = documented_metrics()
    problems = []
    for where, fam, labels, _ in mentions:
        if fam not in live:
            problems.append("%s: %s is documented but not exposed" % (where, fam))
        elif live[fam] is not None and not set(labels) <= live[fam]:
            problems.append("%s: %s{%s}: the family's labels are {%s}" % (
                where, fam, ",".join(labels), ",".join(sorted(live[fam]))))
    # The manual pages and the shipped config name families in prose: each must exist.
    for path in sorted(glob.glob(os.path.join(SRCDIR, "man", "*.[0-9]"))) + [os.path.join(SRCDIR, "conf", "pinion.conf")]:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                for fam in re.findall(r"\b(pinion_[a-z0-9_]*[a-z0-9])\b", line.replace("\\", "")):
                    if fam not in live:
                        problems.append("%s:%d: %s is named but not exposed" % (os.path.relpath(path, SRCDIR), n, fam))
    definitions = {}
    for _, fam, labels, exact in mentions:
        if exact:
            definitions.setdefault(fam, set()).add(frozenset(labels))
    for fam, labels in sorted(live.items()):
        if fam not in definitions:
            problems.append("%s is exposed but no doc names it" % fam)
            continue
        if labels is None:
            if fam not in SERIES_AFTER_AN_EVENT:
                problems.append("%s has no series: expose it at zero, or list it in "
                                "SERIES_AFTER_AN_EVENT with the event" % fam)
                continue
            labels = set(SERIES_AFTER_AN_EVENT[fam][0])
        if frozenset(labels) not in definitions[fam]:
            problems.append("%s{%s} is exposed; the docs name it only as %s" % (
                fam, ",".join(sorted(labels)),
                " or ".join("{%s}" % ",".join(sorted(d)) for d in definitions[fam])))
    assert not problems, "\n".join(problems)


# ---- routes, live ----

def _concrete(pattern):
    """A documented route's path on the every-module agent: its parameters name things it has."""
    values = {"/v1/pods/{}/{}": "/v1/pods/default/web", "/v1/configs/{}": "/v1/configs/app",
              "/v1/configs/{}/refresh": "/v1/configs/app/refresh"}
    assert "{" not in pattern or pattern in values, "no value for the parameters of %s" % pattern
    return values.get(pattern, pattern)


def test_documented_routes_answer_with_every_module(every_module):
    """Each documented route is served (not 404 or 405) by an agent running every module; the
    drain route is followed by undrain (sorted: drain before undrain)."""
    wrong = []
    for method, pattern in sorted(documented_routes()):
        path = _concrete(pattern)
        body = b"{}" if method == "POST" else None
        r = every_module.request(method, path, body=body)
        if r.status in (404, 405):
            wrong.append("%s %s: %d %s" % (method, path, r.status, r.raw[:200]))
    every_module.request("POST", "/v1/registrations/undrain", body=b"{}")
    assert not wrong, "\n".join(wrong)


DISABLED_KEYS = {"error", "code", "module", "state", "reason"}


def test_a_switched_off_module_s_routes_answer_503(agent_factory):
    """With no module configured, every route a module owns answers 503 with which module,
    its state and why (docs/api.md); the core's routes still answer."""
    a = agent_factory()
    a.write_pod("web", make_pod("web"))
    a.wait_pod("default", "web")
    wrong = []
    for (method, pattern), owner in sorted(source_routes().items()):
        path = _concrete(pattern) if owner is None else pattern.replace("{}", "x")
        r = a.request(method, path, body=b"{}" if method == "POST" else None)
        if owner is None:
            if r.status in (404, 405, 503):
                wrong.append("%s %s (core): %d" % (method, path, r.status))
            continue
        doc = r.body
        if r.status != 503 or not isinstance(doc, dict) or not DISABLED_KEYS <= set(doc) or \
                doc.get("code") != 503 or doc.get("state") != "disabled" or not doc.get("reason"):
            wrong.append("%s %s (%s): %d %s" % (method, path, owner, r.status, r.raw[:200]))
    assert not wrong, "\n".join(wrong)


def test_the_pods_dir_example_has_the_fields_of_a_pods_dir_pod(every_module):
    """docs/api.md's POD example (a pods-dir pod) shows no field a pods-dir pod lacks, and lacks
    none it has."""
    with open(os.path.join(SRCDIR, "docs", "api.md")) as f:
        section = f.read().split("### `GET /v1/pods`", 1)[1]
    example = json.loads(section.split("```json", 1)[1].split("```", 1)[0])
    assert example["source"].startswith("pods-dir:")
    (live,) = [p for p in every_module.pods()["pods"] if p["name"] == "web"]
    assert live["source"].startswith("pods-dir:")
    assert sorted(example) == sorted(live), (example, live)


# ---- the README's promises ----

def _readme():
    with open(os.path.join(SRCDIR, "README.md")) as f:
        return f.read()


def test_the_readme_quotes_the_last_line_of_scripts_test():
    with open(os.path.join(SRCDIR, "scripts", "test")) as f:
        lines = re.findall(r'^echo "(\$passed passed[^"]*)"$', f.read(), re.M)
    assert len(lines) == 1, lines
    last = re.sub(r"\$\w+", "N", lines[0])
    quoted = re.search(r'scripts/test .*ends with "([^"]*)"', _readme())
    assert quoted and quoted.group(1) == last, (quoted and quoted.group(1), last)


def test_the_readme_names_every_cgroup_subtree_the_unit_lets_piniond_write():
    with open(os.path.join(SRCDIR, "units", "piniond.service.in")) as f:
        writable = re.findall(r"-?/sys/fs/cgroup/([\w.-]+)", "\n".join(
            l for l in f.read().splitlines() if l.startswith("ReadWritePaths=")))
    assert "system.slice" in writable, writable
    readme = _readme()
    claim = readme[readme.index("The cgroup tree is read-only except"):][:600]
    missing = [w for w in writable if "`%s`" % w not in claim and "`%s(.slice)`" % w.replace(".slice", "") not in claim]
    assert not missing, (missing, claim)


SECTION_REF = re.compile(r'see "(?P<a>[^"]{3,80})"(?:\s+in\s+\[[^\]]*\]\((?P<af>[\w./-]+\.md)\))?'
                         r'|"(?P<b>[A-Z][^"]{2,80})"\s+(?:below|above)'
                         r'|\((?P<c>[A-Z][^(),]{2,60}), (?:below|above)\)'
                         r'|(?P<df>[\w-]+\.md)\)?,? "(?P<d>[A-Z][^"]{2,80})"')


def _titles(path):
    """The headings of a Markdown file and its bold paragraph leads (**Who connected.**)."""
    with open(path) as f:
        text = f.read()
    titles = {" ".join(re.sub(r"[*]", "", h).split()) for h in re.findall(r"^#+ (.*)$", text, re.M)}
    return titles | {t.strip().rstrip(".:") for t in re.findall(r"\*\*([^*]{3,80})\*\*", text)}


def test_every_section_a_doc_points_to_exists():
    """A reference to a section by its title ("Connections and limits" below; see "X" in
    [f.md](f.md); design-notes.md, "X") names a heading that exists there."""
    wrong, seen = [], 0
    for path in DOC_FILES:
        with open(path) as f:
            text = f.read()
        for m in SECTION_REF.finditer(text):
            title = m.group("a") or m.group("b") or m.group("c") or m.group("d")
            other = m.group("af") or m.group("df")
            target = os.path.join(os.path.dirname(path), "docs" if path.endswith("README.md") and other
                                  and not other.startswith("docs/") else "", other) if other else path
            seen += 1
            title = " ".join(title.split()).rstrip(".")
            titles = _titles(target) if os.path.exists(target) else set()
            # a heading may go on after the title: "Routes between nodes (`[network] routing`)"
            if not any(t == title or t.startswith(title + " (") for t in titles):
                line = text[:m.start()].count("\n") + 1
                wrong.append('%s:%d: "%s" is no section of %s' % (os.path.relpath(path, SRCDIR), line, title,
                                                                 os.path.relpath(target, SRCDIR)))
    assert seen >= 4, seen
    assert not wrong, "\n".join(wrong)
