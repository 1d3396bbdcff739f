"""Shared helpers of the integration tests: they mount a real tierfs.

Each test script is run by ctest as `python3 test_x.py --bin-dir BUILD/bin`.
Exit status 77 means "skipped" (no usable /dev/fuse here).
"""
import argparse
import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

SKIP = 77
BIN_DIR = None


def tierfs_bin():
    return os.path.join(BIN_DIR, "tierfs")


def fuse_usable():
    """Returns '' if FUSE mounts can be made here, else the reason."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian package fuse3)"
    return ""


def main():
    """Parses --bin-dir, skips (exit 77) without FUSE, runs the unittest cases.
    Exits 77 too when no test ran because a setUpModule or setUpClass skipped
    them all (unittest would exit 0: ctest would say Passed), printing why."""
    global BIN_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    args, rest = parser.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin_dir)
    reason = fuse_usable()
    if reason:
        print(f"SKIPPED: FUSE is not usable here: {reason}")
        sys.exit(SKIP)
    result = unittest.main(argv=[sys.argv[0]] + rest, verbosity=2, exit=False).result
    if result.testsRun == 0 and result.skipped and result.wasSuccessful():
        for _, why in result.skipped:
            print(f"SKIPPED: {why}")
        sys.exit(SKIP)
    sys.exit(0 if result.wasSuccessful() else 1)


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == path:
                return True
    return False


def mounts_below(prefix):
    """The mount points in /proc/self/mountinfo at or below the directory prefix."""
    prefix = os.path.realpath(prefix)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].encode().decode("unicode_escape") for line in f]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def wait_for(predicate, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def force_unmount(mnt):
    if is_mounted(mnt):
        subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
    if is_mounted(mnt):
        subprocess.run(["fusermount3", "-uz", mnt], stderr=subprocess.DEVNULL)


def tear_down(mounts, base):
    """Closes `mounts`, unmounts whatever is still mounted below `base`, kills
    any tierfs left serving below it, and removes it."""
    for m in mounts:
        m.close()
    for mnt in sorted(mounts_below(base), reverse=True):
        force_unmount(mnt)
    for pid in tierfs_pids(base + "/"):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(base, ignore_errors=True)


class Mount:
    """A foreground tierfs process serving SOURCE at MNT; unmounts on exit."""

    def __init__(self, source, mnt, options=(), extra_args=(), umask=-1, prefix=(),
                 pass_fds=()):
        """umask: the daemon's (-1: this process's); prefix: a command that
        runs it (nsenter into a network namespace, say); pass_fds: this
        process's descriptors the command inherits."""
        self.source, self.mnt = source, mnt
        cmd = list(prefix) + [tierfs_bin(), source, mnt, "-f"]
        if options:
            cmd += ["-o", ",".join(options)]
        cmd += list(extra_args)
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, umask=umask,
                                     pass_fds=pass_fds)
        try:
            wait_for(lambda: is_mounted(mnt) or self.proc.poll() is not None, what="the mount")
            if self.proc.poll() is not None:
                raise AssertionError(f"tierfs exited {self.proc.returncode}: {self.output()}")
        except BaseException:
            self.close()
            raise

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def stats(self):
        return mount_stats(self.mnt)

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        force_unmount(self.mnt)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def mount_stats(mnt):
    """The parsed .tierfs/stats of the tierfs mount at mnt (whoever mounted it)."""
    with open(os.path.join(mnt, ".tierfs", "stats")) as f:
        return json.load(f)


@contextlib.contextmanager
def workdir():
    """A temporary directory with src/ and mnt/; removed afterwards."""
    d = tempfile.mkdtemp(prefix="tierfs-it-")
    src, mnt = os.path.join(d, "src"), os.path.join(d, "mnt")
    os.mkdir(src)
    os.mkdir(mnt)
    try:
        yield src, mnt
    finally:
        force_unmount(mnt)
        shutil.rmtree(d, ignore_errors=True)


def shared_workdir(prefix):
    """A temporary directory other users may enter, with src/ and mnt/ in it
    (all 0755): (base, src, mnt). The caller removes it (tear_down)."""
    base = tempfile.mkdtemp(prefix=prefix)
    os.chmod(base, 0o755)
    src, mnt = os.path.join(base, "src"), os.path.join(base, "mnt")
    for d in (src, mnt):
        os.mkdir(d, 0o755)
    return base, src, mnt


def run_tierfs(*args, timeout=30):
    return subprocess.run([tierfs_bin(), *args], capture_output=True, text=True, timeout=timeout)


def free_port():
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape_metrics(port):
    """The Prometheus text a mount's -o metrics=PORT serves."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def read_file(path, drop_cache=True):
    """Reads a whole file; drop_cache evicts its pages afterwards so the next
    read of it reaches the daemon again (POSIX_FADV_DONTNEED, no root needed)."""
    with open(path, "rb", buffering=0) as f:
        data = f.readall()
        if drop_cache:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return data


def make_files(root, count, size, subdirs=4, seed=0):
    """count files of about `size` bytes in `subdirs` directories; returns {rel: bytes}."""
    import random
    rnd = random.Random(seed)
    out = {}
    for i in range(count):
        rel = f"d{i % subdirs}/f{i:05d}"
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        data = rnd.randbytes(size + i % 97)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
        out[rel] = data
    return out


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def tierfs_pids(prefix):
    """PIDs of the live tierfs processes with an argument starting with prefix
    (a test's temporary directory: its own daemons, whoever started them)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                args = f.read().split(b"\0")  # empty for a zombie
        except OSError:
            continue
        if os.path.basename(args[0]) == b"tierfs" and any(
                a.startswith(prefix.encode()) for a in args[1:]):
            pids.append(int(name))
    return pids


class PfsSim:
    """A pfs-sim mount (the simulated slow PFS) of `src` at `mnt`, in the foreground."""

    def __init__(self, src, mnt, options):
        self.mnt = mnt
        os.makedirs(mnt, exist_ok=True)
        self.proc = subprocess.Popen(
            [os.path.join(BIN_DIR, "pfs-sim"), src, mnt, "-f", "-o", options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: is_mounted(mnt), what="pfs-sim")

    def stats(self):
        """pfs-sim's counters (JSON of <mnt>/.pfs-sim/stats)."""
        with open(os.path.join(self.mnt, ".pfs-sim", "stats")) as f:
            return json.load(f)

    def close(self):
        force_unmount(self.mnt)
        self.proc.wait(timeout=20)


# ---- a second, unprivileged user (for tests run as root) ----

OTHER_USER = "tierfs-t-other"
TEST_ACCOUNT = "tierfs integration tests"  # the comment (GECOS) of the accounts made here
_made_users = []


def unprivileged_user(name=OTHER_USER):
    """(uid, gid) of the unprivileged account `name`, made with useradd (a system
    account: no home, no login shell) if it does not exist; None if that is
    impossible here (not root, no useradd or setpriv). remove_made_users()
    deletes it if a test made it (this run, or one that was killed)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        if shutil.which("useradd") is None:
            return None
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", "--comment", TEST_ACCOUNT, name],
                           capture_output=True, timeout=30)
        if r.returncode != 0:
            return None
        pw = pwd.getpwnam(name)
    if pw.pw_gecos == TEST_ACCOUNT and name not in _made_users:
        _made_users.append(name)
    return None if pw.pw_uid == 0 else (pw.pw_uid, pw.pw_gid)


def remove_made_users():
    while _made_users:
        subprocess.run(["userdel", _made_users.pop()], capture_output=True, timeout=30)


def user_command(user, *cmd):
    """cmd run as `user` ((uid, gid)) with no supplementary groups, for Popen."""
    uid, gid = user
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *cmd]


def as_user(user, *cmd, timeout=30, **kwargs):
    """Runs cmd as `user`; the CompletedProcess, output captured (bytes)."""
    return subprocess.run(user_command(user, *cmd), capture_output=True, timeout=timeout, **kwargs)
