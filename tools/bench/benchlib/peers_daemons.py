"""The processes of tools/bench/peers and how it reaches them: a FUSE daemon
run as our child and always stopped (Daemon), a command or a control file
read with a bound (run_bounded, read_json), the mount table (mount_entry),
free TCP ports for the peer services (free_ports), the page cache dropped
(drop_caches), and the two ways a contender ends early (Failed, Skip).
Used by tools/bench/peers and the other benchlib/peers_*.py."""
import json
import os
import random
import signal
import socket
import subprocess
import time

from . import munged as munge

PYTHON = "/usr/bin/python3"


class Failed(RuntimeError):
    """A contender failed while running; the message says how."""


class Skip(Exception):
    """A contender cannot run here; the message says why."""


def run_bounded(cmd, timeout, **kw):
    """Runs cmd; returns (returncode or None on timeout, stdout). Never waits
    past timeout + 5 s, even for a child stuck in a FUSE request."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, **kw)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return None, b""


def read_json(path, timeout=15):
    """A control file's JSON (a FUSE file: read by a child, so a hung daemon
    costs a timeout, not the run)."""
    code, out = run_bounded(["cat", path], timeout)
    if code != 0:
        raise Failed(f"cannot read {path}" + (" (timed out)" if code is None else ""))
    return json.loads(out)


def mount_entry(mountpoint):
    """(major:minor) of the mount at mountpoint, or None if not mounted."""
    real = os.path.realpath(mountpoint)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4].encode().decode("unicode_escape") == real:
                return fields[2]
    return None


class Daemon:
    """A FUSE daemon run in the foreground as our child (-f), so its pid is
    ours to wait for and no daemon outlives the run. stop() unmounts, waits
    a bounded time, then kills, aborts the FUSE connection and unmounts
    lazily: it always returns, and leaves no mount behind."""

    def __init__(self, name, cmd, mountpoint, log_path, env=None):
        self.name, self.cmd, self.mnt, self.log_path = name, cmd, mountpoint, log_path
        self.env, self.proc = env, None

    def log_tail(self, lines=3):
        try:
            with open(self.log_path, errors="replace") as f:
                text = f.read().strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(no output)"

    def start(self, timeout=60):
        os.makedirs(self.mnt, exist_ok=True)
        with open(self.log_path, "w") as log:
            # Its own session: a ^C reaches us, and our finally unmounts it.
            # SIGTERM if we die (SIGKILL, a crash): it unmounts itself then.
            self.proc = subprocess.Popen(self.cmd + ["-f"], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, env=self.env, start_new_session=True,
                                         preexec_fn=munge.die_with_parent)
        deadline = time.monotonic() + timeout
        while mount_entry(self.mnt) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                why = (f"exited {self.proc.returncode}" if self.proc.poll() is not None
                       else f"not mounted after {timeout} s")
                raise Failed(f"{self.name} did not mount ({why}): {self.log_tail()}")
            time.sleep(0.02)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, wait=20):
        if self.proc is None:
            return
        if mount_entry(self.mnt) is not None:
            code, _ = run_bounded(["fusermount3", "-u", self.mnt], 20)
            if code != 0:
                time.sleep(0.5)
                run_bounded(["fusermount3", "-u", self.mnt], 20)
        for sig, grace in ((None, wait), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            if sig is not None and self.proc.poll() is None:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        dev = mount_entry(self.mnt)
        if dev is not None:  # the daemon is gone or wedged: cut the connection
            abort = f"/sys/fs/fuse/connections/{dev.split(':')[1]}/abort"
            try:
                with open(abort, "w") as f:
                    f.write("1")
            except OSError:
                pass
            run_bounded(["fusermount3", "-uz", self.mnt], 20)
        self.proc = None


def free_ports(n):
    """n distinct TCP ports that were free a moment ago, below the ephemeral
    range: the daemons are started one after another, and UCX's TCP
    transport listens on ephemeral ports of its own, one of which could
    otherwise be a port a later daemon is to listen on."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    rng = random.Random()
    ports = []
    for _ in range(100 * n):
        if len(ports) == n:
            return ports
        port = rng.randrange(max(1024, low - 20000), low)
        if port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        ports.append(port)
    if len(ports) == n:
        return ports
    raise RuntimeError("no free ports below the ephemeral range")


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
