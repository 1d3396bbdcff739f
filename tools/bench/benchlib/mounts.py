"""FUSE mount helpers shared by the benchmark driver and its tests.

Contract: every mount made here is unmounted by the caller's `finally` via
unmount(), which falls back to a lazy unmount so no stale mount is left."""
import json
import os
import subprocess
import time


class MountError(RuntimeError):
    """A mount command failed; the message carries its stderr."""


def is_mounted(mountpoint):
    real = os.path.realpath(mountpoint)
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == real for line in mounts)


def unmount(mountpoint):
    """Unmounts if mounted; lazy unmount when the regular one fails."""
    if not is_mounted(mountpoint):
        return
    if subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True).returncode != 0:
        time.sleep(0.5)
        if subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True).returncode != 0:
            subprocess.run(["fusermount3", "-uz", mountpoint], capture_output=True)


def mount(cmd, mountpoint, log_path, timeout=60):
    """Runs a daemonizing mount command (its output goes to `log_path`) and
    waits until `mountpoint` is mounted. Raises MountError with the log's
    tail on failure."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_mounted(mountpoint):
            return
        code = proc.poll()
        if code is not None and code != 0:
            break
        time.sleep(0.02)
    else:
        proc.kill()
    with open(log_path) as log:
        lines = log.read().strip().splitlines() or ["(no output)"]
    raise MountError(f"{os.path.basename(cmd[0])} did not mount: {lines[0][:100]}")


def pfs_sim_stats(mountpoint):
    """pfs-sim's {"params": ..., "ops": ...} of a mounted pfs-sim."""
    with open(os.path.join(mountpoint, ".pfs-sim", "stats")) as f:
        return json.load(f)


def daemon_pid(mountpoint, program=None):
    """Pid of a live process whose command line names `mountpoint` (newest
    first), or None; with `program`, only one whose argv[0] has that
    basename (pfs-sim's mountpoint is also tierfs's SOURCE)."""
    names = {os.path.realpath(mountpoint).encode(), mountpoint.encode()}
    for pid in sorted(os.listdir("/proc"), key=lambda p: -int(p) if p.isdigit() else 0):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if program is not None and os.path.basename(args[0]) != program.encode():
            continue
        if names.intersection(args) and rss_mb(int(pid)) is not None:  # alive, not a zombie
            return int(pid)
    return None


def cpu_seconds(pid):
    """User + system CPU seconds of `pid`, all its threads, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, TypeError, ValueError, IndexError):
        return None


def rss_mb(pid):
    """Resident set size of `pid` in MB (10^6 B), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except (OSError, TypeError):
        pass
    return None
