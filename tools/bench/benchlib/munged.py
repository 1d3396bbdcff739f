"""A private munged for one run: the peers of a benchmark (tools/bench/peers)
or of an integration test authenticate with MUNGE credentials, and a run
must not depend on (or disturb) the machine's own munged and its key.

  with Munged() as m:            # started, its socket accepts connections
      run(["tierfs", ..., "-o", f"munge_socket={m.socket}"])
  # stopped, its directory removed

What it makes, as test/unit/support/munge_daemon.h does for the C++ tests: a
temporary directory of mode 0755 (munged wants its socket's directory
searchable by all and writable by its owner only), a 1024-byte random key of
mode 0400 (munged refuses a key others can read), and munged in the
foreground as our child with its socket, pid, log and seed files in that
directory. It is ready once its socket accepts a connection; the wait is
bounded and a failure says why, with munged's log. By default the child is
killed with its parent (PR_SET_PDEATHSIG), so a crashed run leaves no munged
behind; the signal follows the creating *thread*, so create it from a thread
that outlives its use (the main thread), or pass die_with_parent=False.

Standard library only and no import of the rest of benchlib: the integration
tests import it by putting tools/bench on sys.path."""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

CANDIDATES = ("/usr/sbin/munged", "/usr/bin/munged", "/sbin/munged")
_PR_SET_PDEATHSIG = 1


class MungedError(RuntimeError):
    """munged could not be started; the message says why."""


class MungedMissing(MungedError):
    """munged is not installed here (callers usually skip)."""


def find_munged():
    """Path of an executable munged, or None."""
    return next((p for p in CANDIDATES if os.access(p, os.X_OK)), None)


def die_with_parent():
    """preexec_fn for any child: it gets SIGTERM when the thread that forked
    it ends (PR_SET_PDEATHSIG), so a crashed or killed parent leaves it not
    running on."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux or no prctl: close() still stops it


def accepts(path):
    """True if a process listens on the Unix socket `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
            return True
        except OSError:
            return False


class Munged:
    """One private munged; start() (or `with`) runs it, close() stops it.

    `munged`: the binary (default: the first of CANDIDATES that exists).
    `parent`: where the temporary directory goes (default: the system's,
    /tmp; munged refuses a socket below a directory others cannot search,
    e.g. one made by mkdtemp, and a socket path must stay under 108 bytes). `timeout`: seconds to wait for the
    socket. `args`: extra munged arguments (e.g. ["--num-threads=4"])."""

    def __init__(self, munged=None, parent=None, timeout=10.0, args=(), die_with_parent=True):
        self.binary = munged or find_munged()
        self.parent, self.timeout, self.args = parent, timeout, list(args)
        self.die_with_parent = die_with_parent
        self.dir = self.socket = self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False

    def path(self, name):
        return os.path.join(self.dir, name)

    def log(self):
        """munged's log so far ('' when there is none)."""
        try:
            with open(self.path("log"), errors="replace") as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def start(self):
        """Starts munged and waits until its socket accepts a connection.
        Raises MungedMissing or MungedError (and leaves nothing behind)."""
        if self.proc is not None:
            return self
        if not self.binary or not os.access(self.binary, os.X_OK):
            raise MungedMissing(f"munged is not installed ({self.binary or ', '.join(CANDIDATES)} "
                                "not found; Debian: apt-get install munge)")
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self):
        self.dir = tempfile.mkdtemp(prefix="tierfs-munge-", dir=self.parent)
        os.chmod(self.dir, 0o755)
        self.socket = self.path("socket")
        if len(self.socket.encode()) >= 108:
            raise MungedError(f"socket path too long for a Unix socket: {self.socket}")
        fd = os.open(self.path("key"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as key:
            key.write(os.urandom(1024))
        os.chmod(self.path("key"), 0o400)  # whatever the umask
        cmd = [self.binary, "--foreground", f"--socket={self.socket}",
               f"--key-file={self.path('key')}", f"--pid-file={self.path('pid')}",
               f"--log-file={self.path('log')}", f"--seed-file={self.path('seed')}"] + self.args
        with open(self.path("stderr"), "w") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                         preexec_fn=die_with_parent if self.die_with_parent else None)
        deadline = time.monotonic() + self.timeout
        while not accepts(self.socket):
            code = self.proc.poll()
            if code is not None or time.monotonic() > deadline:
                what = f"exited {code}" if code is not None else f"no socket after {self.timeout:g} s"
                with open(self.path("stderr"), errors="replace") as f:
                    text = (self.log() + f.read()).strip().splitlines()
                raise MungedError(f"munged would not start ({what}): "
                                  + (" | ".join(text[-5:]) or "no output"))
            time.sleep(0.02)

    def close(self):
        """Stops munged (SIGTERM, then SIGKILL after 5 s) and removes its
        directory. Safe to call twice or after a failed start()."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
            self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
