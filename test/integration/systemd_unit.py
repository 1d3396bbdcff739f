"""What systemd does with tierfs@.service, without systemd: read the unit's
ExecStart, expand ${SOURCE} ${MOUNTPOINT} ${OPTIONS} as EnvironmentFile= would,
run it with NOTIFY_SOCKET set to a socket of ours (as for Type=notify), and
read the daemon's sd_notify messages. Used by test_systemd_notify.py (the
build's unit and daemon) and test/package/test_deb.py (the installed ones)."""
import os
import re
import socket
import subprocess
import tempfile
import time


def unit_fields(path):
    """{key: [values]} of the unit file's assignments (comments skipped)."""
    fields = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", ";", "[")) and "=" in line:
                key, value = line.split("=", 1)
                fields.setdefault(key.strip(), []).append(value.strip())
    return fields


def exec_start(path, env, binary=None):
    """The unit's ExecStart as argv, ${VAR} expanded from env (each a single
    word, as systemd splits an unquoted ${VAR}); binary replaces argv[0]."""
    (line,) = unit_fields(path)["ExecStart"]
    argv = [re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], w) for w in line.split()]
    if binary:
        argv[0] = binary
    return argv


class NotifySocket:
    """The NOTIFY_SOCKET a service manager listens on: a datagram socket."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tierfs-notify-")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages = []  # each a {key: value} dict, in arrival order

    def wait_for(self, key, timeout=30.0):
        """The first message (already received or arriving within timeout)
        with `key`, or None."""
        deadline = time.monotonic() + timeout
        while True:
            for m in self.messages:
                if key in m:
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096).decode()
            except socket.timeout:
                return None
            self.messages.append(dict(kv.split("=", 1) for kv in data.splitlines() if "=" in kv))

    def close(self):
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def start(argv, notify, log):
    """Runs argv as the service's main process (stdout/stderr to log)."""
    env = dict(os.environ, NOTIFY_SOCKET=notify.path)
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
