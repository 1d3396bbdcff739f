"""Helpers for the benchmark suite's integration tests: real FUSE mounts in
temporary directories, always unmounted, and a clean skip (exit 77) when FUSE
is unusable on this machine."""
import argparse
import contextlib
import json
import mmap
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench"))
from benchlib.mounts import is_mounted, unmount  # noqa: E402  (shared with tools/bench/run)

SKIP = 77


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    return parser.parse_args()


def require_fuse(*binaries):
    """Exits 77 (skip) with a message if FUSE mounts cannot work here."""
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        print("SKIP: /dev/fuse is missing or not accessible")
        sys.exit(SKIP)
    if shutil.which("fusermount3") is None:
        print("SKIP: fusermount3 not found")
        sys.exit(SKIP)
    for binary in binaries:
        if not os.access(binary, os.X_OK):
            print(f"SKIP: {binary} is not built")
            sys.exit(SKIP)


@contextlib.contextmanager
def pfs_sim(bin_dir, source, options="", check_start=True):
    """Mounts pfs-sim over `source`; yields the mountpoint."""
    mnt = tempfile.mkdtemp(prefix="pfs-sim-mnt-")
    cmd = [os.path.join(bin_dir, "pfs-sim"), source, mnt]
    if options:
        cmd += ["-o", options]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if check_start and proc.returncode != 0:
            raise RuntimeError(f"pfs-sim failed: {proc.stderr.strip()}")
        yield mnt
    finally:
        if is_mounted(mnt):
            unmount(mnt)
        os.rmdir(mnt)


def sim_stats(mountpoint):
    with open(os.path.join(mountpoint, ".pfs-sim", "stats")) as f:
        return json.load(f)


def read_file(path, chunk=1 << 20):
    """Reads a whole file with `chunk`-byte reads into a page-aligned buffer
    (the kernel splits an unaligned 1 MiB direct read into two requests);
    returns the byte count."""
    total = 0
    buf = mmap.mmap(-1, chunk)
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            n = os.readv(fd, [buf])
            if n == 0:
                return total
            total += n
    finally:
        os.close(fd)
        buf.close()


def write_file(path, size, seed=0):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    block = bytes((seed + i) % 251 for i in range(65536))
    with open(path, "wb") as f:
        left = size
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)


class Checks:
    """Collects failed checks so one run reports all of them."""

    def __init__(self):
        self.failures = []

    def check(self, ok, message):
        print(("ok   " if ok else "FAIL ") + message, flush=True)
        if not ok:
            self.failures.append(message)

    def exit(self):
        sys.exit(1 if self.failures else 0)


def elapsed(fn):
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def unittest_main(argv0):
    """Runs this module's unittest cases; exits 0, 1 on a failure, or 77 when
    every test was skipped (a skip in setUpClass is not printed by the
    runner: printed here)."""
    import unittest
    result = unittest.main(argv=[argv0], exit=False, verbosity=2).result
    for _, reason in result.skipped:
        print(f"SKIPPED: {reason}")
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(SKIP if result.skipped and len(result.skipped) >= result.testsRun else 0)
