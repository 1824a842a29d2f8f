# SPDX-License-Identifier: MIT
"""A small filesystem that a test fills to the last block: a tmpfs with size= (root only), mounted
over a directory the agent uses (its state dir, pod-tls-dir, a config dest). fill() writes a
filler file until the filesystem refuses one more byte; free() removes it. The mount is always
undone at teardown (the small_fs fixture), also when the test fails."""

import errno
import os
import subprocess

import pytest


class SmallFs:
    def __init__(self, path, size="4m"):
        self.path = path
        self.filler = os.path.join(path, ".filler")
        os.makedirs(path, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "pinion-test-small", path],
                       check=True, capture_output=True)
        self.mounted = True

    def fill(self):
        """Writes until not one more byte fits; returns the bytes written."""
        written = 0
        with open(self.filler, "ab", buffering=0) as f:
            for chunk in (1 << 20, 64 << 10, 4 << 10, 512, 1):
                block = b"\0" * chunk
                while True:
                    try:
                        n = f.write(block)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
                    written += n
                    if n < chunk:
                        break
        st = os.statvfs(self.path)
        assert st.f_bavail == 0, "%s still has %d blocks free" % (self.path, st.f_bavail)
        return written

    def free(self):
        if os.path.exists(self.filler):
            os.unlink(self.filler)

    def full(self):
        return os.statvfs(self.path).f_bavail == 0

    def close(self):
        if self.mounted:
            subprocess.run(["umount", "-l", self.path], capture_output=True)
            self.mounted = False


@pytest.fixture
def small_fs():
    """small_fs(path, size="4m") -> SmallFs mounted at path; every one is unmounted at teardown."""
    made = []

    def make(path, size="4m"):
        fs = SmallFs(path, size)
        made.append(fs)
        return fs
    try:
        yield make
    finally:
        for fs in reversed(made):
            fs.close()
