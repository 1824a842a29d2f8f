# SPDX-License-Identifier: MIT
"""reclaim's test helpers: real v1/v2 memory cgroups made for a test and always removed, the
workloads that run inside them, and the numbers they leave behind.

  MemCgroup        a cgroup under the memory hierarchy (v1 here, v2 in the VM guest):
                   create(limit), read(name),
                   write(name, value), run(argv) -> Popen inside it, kill_all(), remove().
  memcg_factory    fixture: make(suffix, limit) -> MemCgroup named pinion-test-<pid>-<suffix>;
                   at teardown every process in it is killed first, then the cgroup removed.
  writer_argv()    a page-cache streamer: writes files in a temp dir on a real disk file
                   system (not tmpfs: shmem is not reclaimable cache), fdatasync every chunk so
                   the cache it leaves is clean, keeps the files (the caller removes the directory), and prints
                   its throughput as JSON. Run as `python3 reclaim_testlib.py write DIR BYTES`.
  dd_argv()        the fastest writer: `dd if=/dev/zero of=FILE bs=1M count=N`, no fsync (its
                   cache is dirty: reclaim waits for writeback, and nothing throttles it but the
                   memory cgroup). dd(g, directory, total) runs it in g and returns dd's summary.
  anon_argv()      holds N bytes of touched anonymous memory until killed.
"""

import json
import os
import signal
import subprocess
import sys
import time

V1_ROOT = "/sys/fs/cgroup/memory"
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
MiB = 1 << 20


def v1_available():
    return os.path.exists(os.path.join(V1_ROOT, "memory.limit_in_bytes"))


def disk_tmpdir():
    """A directory on a real disk file system (tmpfs pages are shmem, not file cache)."""
    for d in ("/var/tmp", os.path.expanduser("~"), "/tmp"):
        try:
            st = os.statvfs(d)
        except OSError:
            continue
        if _fstype(d) not in ("tmpfs", "ramfs") and st.f_bavail * st.f_frsize > 2 << 30:
            return d
    raise RuntimeError("no disk-backed directory with 2 GiB free")


def _fstype(path):
    path = os.path.realpath(path)
    best, kind = "", None
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, kind = mnt, parts[2]
    return kind


class MemCgroup:
    def __init__(self, name, version=1, root=V1_ROOT):
        self.name = name            # relative path, "/pinion-test-123-x"
        self.version = version
        self.dir = root + name
        self.procs = []

    def create(self, limit=None):
        os.makedirs(self.dir, exist_ok=True)
        if limit is not None:
            self.write("memory.limit_in_bytes" if self.version == 1 else "memory.max", str(limit))
        return self

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def value(self, name):
        return int(self.read(name).split()[0])

    def stat(self):
        return {k: int(v) for k, v in (l.split() for l in self.read("memory.stat").splitlines())}

    def write(self, name, value):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(str(value))

    def reset_peak(self):
        if self.version == 1:
            self.write("memory.max_usage_in_bytes", "0")
            self.write("memory.failcnt", "0")

    def limit(self):
        return self.value("memory.limit_in_bytes" if self.version == 1 else "memory.max")

    def peak(self):
        return self.value("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")

    def failcnt(self):
        if self.version == 1:
            return self.value("memory.failcnt")
        return int(dict(l.split() for l in self.read("memory.events").splitlines()).get("max", 0))

    def exists(self):
        return os.path.isdir(self.dir)

    def run(self, argv, **kw):
        """Starts argv inside this cgroup (it joins before exec, so every page it touches is
        charged here)."""
        procs = os.path.join(self.dir, "cgroup.procs")

        def join():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        p = subprocess.Popen(argv, preexec_fn=join, **kw)
        self.procs.append(p)
        return p

    def pids(self):
        try:
            return [int(x) for x in self.read("cgroup.procs").split()]
        except OSError:
            return []

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def remove(self):
        if not self.exists():
            return
        self.kill_all()
        # Children first (a test may nest cgroups, e.g. kubepods/burstable/pod<uid>).
        for dirpath, dirnames, _ in sorted(os.walk(self.dir), key=lambda w: -w[0].count("/")):
            for _ in range(100):
                try:
                    os.rmdir(dirpath)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def writer_argv(directory, total, chunk=MiB, file_size=16 * MiB, sync_every=MiB):
    return [PYTHON, os.path.join(HERE, "reclaim_testlib.py"), "write", directory, str(total),
            str(chunk), str(file_size), str(sync_every)]


def dd_argv(path, total):
    return ["dd", "if=/dev/zero", "of=" + path, "bs=1M", "count=%d" % (total // MiB)]


def dd(g, directory, total):
    """Streams total bytes into one file under directory with dd at full speed, inside g; the
    file stays (deleting it would drop its cache, doing the agent's job). Returns dd's last
    line (bytes, seconds, rate)."""
    p = g.run(dd_argv(os.path.join(directory, "dd-%d" % time.monotonic_ns()), total),
              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return err.strip().splitlines()[-1]


def anon_argv(size):
    return [PYTHON, os.path.join(HERE, "reclaim_testlib.py"), "anon", str(size)]


def burster_argv():
    """A process that says "ready" (the interpreter's own memory charged by then), maps and
    touches (one memset, at C speed) the size given on its stdin's first line, says "done" and
    exits 0 once the burst is in."""
    return [PYTHON, os.path.join(HERE, "reclaim_testlib.py"), "burst"]


def _write(directory, total, chunk, file_size, sync_every):
    buf = os.urandom(chunk)
    os.makedirs(directory, exist_ok=True)
    written, n, t0 = 0, 0, time.monotonic()
    while written < total:
        path = os.path.join(directory, "stream-%d" % n)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            in_file, since_sync = 0, 0
            while in_file < file_size and written < total:
                os.write(fd, buf)
                in_file += chunk
                written += chunk
                since_sync += chunk
                if since_sync >= sync_every:
                    os.fdatasync(fd)   # the cache it leaves behind is clean, like a database's
                    since_sync = 0
            os.fdatasync(fd)
        finally:
            os.close(fd)
        # The files stay (unlinking one would drop its cache at once, doing the agent's job);
        # the caller removes the directory.
        n += 1
    elapsed = time.monotonic() - t0
    print(json.dumps({"bytes": written, "seconds": elapsed, "mib_per_s": written / MiB / elapsed}))


def _anon(size):
    b = bytearray(size)
    for i in range(0, size, 4096):
        b[i] = 1
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    signal.pause()


def _burst():
    import ctypes
    import mmap
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    size = int(sys.stdin.readline())
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf = ctypes.c_char.from_buffer(m)
    ctypes.memset(ctypes.addressof(buf), 1, size)
    sys.stdout.write("done\n")
    sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1] == "write":
        _write(sys.argv[2], *[int(x) for x in sys.argv[3:7]])
    elif sys.argv[1] == "anon":
        _anon(int(sys.argv[2]))
    elif sys.argv[1] == "burst":
        _burst()


# ---------------------------------------------------------------------------------------------
# pytest fixtures (imported by test_reclaim*.py)

try:
    import pytest
except ImportError:  # the module also runs as a workload script
    pytest = None

if pytest:
    @pytest.fixture
    def memcg_factory():
        """make(suffix, limit=None) -> MemCgroup /pinion-test-<pid>-<suffix> on the v1 memory
        hierarchy. Teardown kills its processes, then removes it (also after a failure)."""
        if not v1_available():
            pytest.skip("no cgroup v1 memory hierarchy at %s" % V1_ROOT)
        made = []

        def make(suffix, limit=None):
            g = MemCgroup("/pinion-test-%d-%s" % (os.getpid(), suffix))
            made.append(g)
            return g.create(limit)
        try:
            yield make
        finally:
            for g in reversed(made):
                g.remove()

    @pytest.fixture
    def stream_dir():
        """A fresh directory on a disk file system for the writer's files; removed after."""
        import shutil
        import tempfile
        d = tempfile.mkdtemp(prefix="pinion-reclaim-", dir=disk_tmpdir())
        try:
            yield d
        finally:
            shutil.rmtree(d, ignore_errors=True)
