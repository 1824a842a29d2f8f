# SPDX-License-Identifier: MIT
"""Logging targets (DESIGN.md style rule 8): JSON lines on stderr, the journal with structured
fields (MODULE=, POD_UID=, POD=, PRIORITY=, CODE_*), `auto` choosing the journal when
JOURNAL_STREAM says stderr goes there, and text when the journal is unreachable.

This machine runs no journald, so the journal tests bind the journal's native socket
(/run/systemd/journal/socket) themselves and decode what libsystemd's sd_journal_sendv()
writes to it: the same bytes journald would receive. Where a real journald owns that socket,
they are skipped (journalctl would be the reader there)."""

import datetime
import json
import os
import re
import socket
import struct
import threading

import pytest

from pinion_testlib import LOG_TIME, make_pod, wait_until

JOURNAL_DIR = "/run/systemd/journal"
JOURNAL_SOCKET = JOURNAL_DIR + "/socket"


def parse_native(datagram):
    """Decodes the journal's native protocol: KEY=VALUE lines, or KEY\\n<le64 size><value>\\n
    for values that contain a newline."""
    fields, i = {}, 0
    while i < len(datagram):
        nl = datagram.index(b"\n", i)
        line = datagram[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (size,) = struct.unpack("<Q", datagram[nl + 1:nl + 9])
            v = datagram[nl + 9:nl + 9 + size]
            i = nl + 9 + size + 1
        fields[k.decode()] = v.decode("utf-8", "replace")
    return fields


class FakeJournal:
    """Owns /run/systemd/journal/socket for one test and collects every entry sent to it."""

    def __init__(self):
        self.created_dirs = []
        for d in ("/run/systemd", JOURNAL_DIR):
            if not os.path.isdir(d):
                os.mkdir(d, 0o755)
                self.created_dirs.append(d)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(JOURNAL_SOCKET)
        self.sock.settimeout(0.2)
        self.entries = []
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.entries.append(parse_native(data))

    def find(self, **want):
        with self.lock:
            return [e for e in self.entries if all(e.get(k) == v for k, v in want.items())]

    def close(self):
        self.stopping = True
        self.thread.join(2)
        self.sock.close()
        os.unlink(JOURNAL_SOCKET)
        for d in reversed(self.created_dirs):
            os.rmdir(d)


@pytest.fixture
def fake_journal():
    if os.path.exists(JOURNAL_SOCKET):
        pytest.skip("a journald owns %s here; read it with journalctl instead" % JOURNAL_SOCKET)
    j = FakeJournal()
    yield j
    j.close()


def test_json_lines(agent_factory):
    a = agent_factory(config={"agent": {"log-format": "json"}})
    a.write_pod("web", make_pod("web", uid="3f1c8a52-0000-4000-8000-000000000001"))
    a.wait_log(r'"msg":"Pod added')
    assert a.stop() == 0
    lines = [l for l in a.log_text().splitlines() if l.strip()]
    assert lines
    objects = [json.loads(l) for l in lines]  # every line is one JSON object
    assert all({"time", "level", "msg"} <= set(o) for o in objects), objects
    added = [o for o in objects if o["msg"].startswith("Pod added")]
    assert added and added[0]["pod_uid"] == "3f1c8a52-0000-4000-8000-000000000001"
    assert added[0]["pod"] == "default/web"
    modules = {o.get("module") for o in objects if "→" in o["msg"]}
    assert {"apiserver", "identity", "configsync", "zkreg", "podnet", "reclaim"} <= modules


def test_journal_structured_fields(agent_factory, fake_journal):
    a = agent_factory(config={"agent": {"log-format": "journal"}})
    a.write_pod("web", make_pod("web", uid="3f1c8a52-0000-4000-8000-000000000002"))
    wait_until(lambda: fake_journal.find(POD_UID="3f1c8a52-0000-4000-8000-000000000002"), 5,
               desc="the pod-added entry in the journal")
    assert a.stop() == 0
    pod = fake_journal.find(POD_UID="3f1c8a52-0000-4000-8000-000000000002")[0]
    assert pod["MESSAGE"].startswith("Pod added"), pod
    assert pod["POD"] == "default/web"
    assert pod["PRIORITY"] == "6"  # info
    assert pod["CODE_FILE"].endswith(".c") and int(pod["CODE_LINE"]) > 0 and pod["CODE_FUNC"]
    # MESSAGE reads as the text line does: whose it is, without the fields.
    assert pod["MESSAGE"].endswith(" (pod default/web)"), pod
    zk = fake_journal.find(MODULE="zkreg")
    assert zk and "no [zookeeper] servers configured" in zk[0]["MESSAGE"], zk
    assert zk[0]["MESSAGE"].startswith("[zkreg] "), zk
    assert fake_journal.find(MESSAGE="Exiting")
    # Nothing went to stderr: the journal took it all.
    assert "Pod added" not in a.log_text()


def test_auto_picks_journal_from_journal_stream(agent_factory, fake_journal):
    a = agent_factory(config={"agent": {"log-format": "auto"}}, start=False)
    # The harness sends stderr to a.log_file: make JOURNAL_STREAM name exactly that file, as
    # systemd does for a service whose stderr is connected to the journal.
    open(a.log_file, "a").close()
    st = os.stat(a.log_file)
    a.env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
    a.start()
    wait_until(lambda: fake_journal.find(MESSAGE="Local API listening on %s" % a.socket), 5,
               desc="startup lines in the journal")
    assert a.stop() == 0
    assert "Local API listening" not in a.log_text()


def test_journal_unreachable_falls_back_to_text(agent_factory):
    if os.path.exists(JOURNAL_SOCKET):
        pytest.skip("a journald is reachable here")
    a = agent_factory(config={"agent": {"log-format": "journal"}})
    assert a.stop() == 0
    # No line is lost when the journal is gone: it is written to stderr as text instead.
    assert "info: Local API listening on %s" % a.socket in a.log_text()


def test_text_lines_are_stamped_when_stderr_is_not_the_journal(agent_factory):
    a = agent_factory(config={"agent": {"log-format": "text"}})
    assert a.stop() == 0
    lines = [l for l in a.log_text().splitlines() if l.strip()]
    assert lines
    rx = re.compile(r"^(%s) (debug|info|notice|warning|error|crit|alert|emerg): " % LOG_TIME)
    unstamped = [l for l in lines if not rx.match(l)]
    assert not unstamped, unstamped
    # The stamp is this run's wall-clock time, in UTC.
    first = datetime.datetime.strptime(rx.match(lines[0]).group(1), "%Y-%m-%dT%H:%M:%S.%fZ")
    first = first.replace(tzinfo=datetime.timezone.utc)
    age = datetime.datetime.now(datetime.timezone.utc) - first
    assert datetime.timedelta(0) <= age < datetime.timedelta(minutes=2), (first, age)


def test_text_into_the_journal_stream_is_not_stamped(agent_factory):
    # log-format=text with stderr connected to the journal (JOURNAL_STREAM names it): the
    # journal stamps the lines itself, so they stay as they were.
    a = agent_factory(config={"agent": {"log-format": "text"}}, start=False)
    open(a.log_file, "a").close()
    st = os.stat(a.log_file)
    a.env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
    a.start()
    assert a.stop() == 0
    assert "\ninfo: Local API listening on %s\n" % a.socket in "\n" + a.log_text(), a.log_text()
    assert not re.search(r"^%s " % LOG_TIME, a.log_text(), re.M), a.log_text()
