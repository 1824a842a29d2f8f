# SPDX-License-Identifier: MIT
"""A small filesystem that a test fills to the last block: a tmpfs with size=, or an ext4 image
loop-mounted (root only), mounted over a directory the agent uses (its state dir, pod-tls-dir, a
config dest). fill() writes a
filler file until the filesystem refuses one more byte; free() removes it. The mount is always
undone at teardown (the small_fs fixture), also when the test fails."""

import errno
import os
import shutil
import subprocess
import tempfile

import pytest


class SmallFs:
    def __init__(self, path, size="4m", kind="tmpfs"):
        self.path = path
        self.filler = os.path.join(path, ".filler")
        self.image_dir = None
        self.mounted = False
        os.makedirs(path, exist_ok=True)
        if kind == "tmpfs":
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "pinion-test-small", path],
                           check=True, capture_output=True)
        else:
            # No blocks reserved for root (the agent is root): full means full.
            self.image_dir = tempfile.mkdtemp(prefix="pinion-small-fs-")
            image = os.path.join(self.image_dir, "fs.img")
            subprocess.run(["truncate", "-s", size.upper(), image], check=True)
            subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", image], check=True, capture_output=True)
            subprocess.run(["mount", "-o", "loop", image, path], check=True, capture_output=True)
            os.chmod(path, 0o755)
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
        if self.image_dir:
            shutil.rmtree(self.image_dir, ignore_errors=True)  # (the loop device goes with the last user)
            self.image_dir = None


@pytest.fixture
def small_fs():
    """small_fs(path, size="4m", kind="tmpfs"|"ext4") -> SmallFs mounted at path; every one is
    unmounted at teardown."""
    made = []

    def make(path, size="4m", kind="tmpfs"):
        fs = SmallFs(path, size, kind)
        made.append(fs)
        return fs
    try:
        yield make
    finally:
        for fs in reversed(made):
            fs.close()
