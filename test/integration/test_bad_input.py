"""Bad input gets a clear message and a non-zero exit, leaving nothing
mounted; every write-type operation on the mount returns EROFS."""
import errno
import os
import signal
import subprocess
import unittest

import harness


class CommandLineTest(unittest.TestCase):
    def check_fails(self, args, *phrases, code=None):
        r = harness.run_tierfs(*args)
        self.assertNotEqual(r.returncode, 0, r.stderr)
        if code is not None:
            self.assertEqual(r.returncode, code)
        for p in phrases:
            self.assertIn(p, r.stderr)
        return r

    def test_help_and_version(self):
        r = harness.run_tierfs("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: tierfs SOURCE MOUNTPOINT", r.stdout)
        self.assertIn("max_open_files", r.stdout)
        r = harness.run_tierfs("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^tierfs \d+\.\d+\.\d+")

    def test_missing_arguments(self):
        self.check_fails([], "expected SOURCE and MOUNTPOINT", code=2)
        self.check_fails(["/tmp"], "expected SOURCE and MOUNTPOINT", code=2)

    def test_unknown_and_malformed_options(self):
        with harness.workdir() as (src, mnt):
            self.check_fails([src, mnt, "-o", "allow_other,bogus=1"], "unknown option 'bogus'",
                                 "tierfs --help lists the options", code=2)
            self.check_fails([src, mnt, "-o", "prefech=order"],
                             "unknown option 'prefech' (did you mean 'prefetch'?)", code=2)
            self.check_fails([src, mnt, "-o", "threads=abc"], "threads", "'abc'", code=2)
            self.check_fails([src, mnt, "-o", "threads=0"], "threads", code=2)
            self.check_fails([src, mnt, "-o", "threads"], "needs a value", code=2)
            self.check_fails([src, mnt, "-o", "nonempty=yes"], "takes no value", code=2)
            self.check_fails([src, mnt, "-o", "log_level=loud"], "log_level", code=2)
            self.check_fails([src, mnt, "--frobnicate"], "unknown argument", code=2)
            self.check_fails([src, mnt, "-o"], "-o needs", code=2)
            self.assertFalse(harness.is_mounted(mnt))

    def test_bad_source(self):
        with harness.workdir() as (src, mnt):
            # Exit 3: SOURCE's state, which its owner controls.
            self.check_fails([src + "/missing", mnt], "SOURCE", "No such file or directory", code=3)
            f = os.path.join(src, "file")
            open(f, "w").close()
            self.check_fails([f, mnt], "SOURCE", "is not a directory", code=3)
            self.check_fails([mnt, mnt], "is MOUNTPOINT", "itself", code=3)
            self.assertFalse(harness.is_mounted(mnt))

    def test_bad_mountpoint(self):
        with harness.workdir() as (src, mnt):
            # Exit 4: MOUNTPOINT's state, which its owner controls.
            self.check_fails([src, mnt + "/missing"], "MOUNTPOINT", "No such file or directory",
                             code=4)
            f = os.path.join(src, "file")
            open(f, "w").close()
            self.check_fails([src, f], "MOUNTPOINT", "is not a directory", code=4)
            # Non-empty: refused unless -o nonempty.
            self.check_fails([mnt + "/..", src], "not empty", "nonempty", code=4)
            # Busy: something is mounted there already.
            with harness.Mount(src, mnt):
                r = self.check_fails([src, mnt], "busy", code=4)
                self.assertIn("fusermount3 -u", r.stderr)
            self.assertFalse(harness.is_mounted(mnt))

    def test_open_as_refuses_what_its_user_cannot_reach(self):
        user = harness.unprivileged_user() if os.geteuid() == 0 else None
        if user is None:
            self.skipTest("needs root and a second user (useradd, setpriv)")
        with harness.workdir() as (src, mnt):
            base = os.path.dirname(src)
            os.chmod(base, 0o755)
            as_user = f"open_as={user[0]}:{user[1]}"
            private = os.path.join(base, "private")
            os.mkdir(private, 0o700)  # root's: the user may not search it
            os.mkdir(os.path.join(private, "data"), 0o755)
            self.check_fails([os.path.join(private, "data"), mnt, "-f", "-o", as_user],
                             f"cannot be read as uid {user[0]}", "Permission denied", code=3)
            link = os.path.join(base, "link")
            os.symlink(mnt, link)
            self.check_fails([src, link, "-f", "-o", as_user], "is a symbolic link", code=4)
            os.rmdir(os.path.join(private, "data"))
            os.rmdir(private)
            os.unlink(link)
            self.assertFalse(harness.is_mounted(mnt))
        r = harness.as_user(user, harness.tierfs_bin(), "/", "/tmp", "-f", "-o", as_user)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"needs a root daemon", r.stderr)

    def test_stale_mount_is_explained(self):
        with harness.workdir() as (src, mnt):
            m = harness.Mount(src, mnt)
            m.proc.send_signal(signal.SIGKILL)
            m.proc.wait()
            try:
                self.check_fails([src, mnt], "stale", "fusermount3 -u")
            finally:
                m.close()
            self.assertFalse(harness.is_mounted(mnt))


class ReadOnlyTest(unittest.TestCase):
    def assertErrno(self, err, fn, *args):
        with self.assertRaises(OSError) as cm:
            fn(*args)
        self.assertEqual(cm.exception.errno, err, f"{fn.__name__}{args}")

    def test_every_write_is_erofs(self):
        with harness.workdir() as (src, mnt):
            os.mkdir(os.path.join(src, "dir"))
            with open(os.path.join(src, "file"), "w") as f:
                f.write("data")
            with harness.Mount(src, mnt) as m:
                p = lambda *a: os.path.join(mnt, *a)
                E = errno.EROFS
                self.assertErrno(E, os.open, p("new"), os.O_CREAT | os.O_WRONLY, 0o644)
                self.assertErrno(E, os.open, p("file"), os.O_WRONLY | os.O_TRUNC)
                self.assertErrno(E, os.mkdir, p("newdir"))
                self.assertErrno(E, os.unlink, p("file"))
                self.assertErrno(E, os.rmdir, p("dir"))
                self.assertErrno(E, os.rename, p("file"), p("renamed"))
                self.assertErrno(E, os.symlink, "file", p("sym"))
                self.assertErrno(E, os.link, p("file"), p("hard"))
                self.assertErrno(E, os.chmod, p("file"), 0o777)
                self.assertErrno(E, os.chown, p("file"), 1, 1)
                self.assertErrno(E, os.utime, p("file"), (1, 1))
                self.assertErrno(E, os.truncate, p("file"), 0)
                self.assertErrno(E, os.mkfifo, p("fifo"))
                self.assertErrno(E, os.setxattr, p("file"), "user.k", b"v")
                self.assertErrno(E, os.removexattr, p("file"), "user.k")
                if m.stats()["passthrough"]["active"]:  # opens are answered: refused there
                    self.assertErrno(E, os.open, p("file"), os.O_WRONLY)
                else:
                    fd = os.open(p("file"), os.O_WRONLY)  # opens cost no request...
                    try:
                        self.assertErrno(E, os.write, fd, b"x")  # ...but writes are refused
                    finally:
                        os.close(fd)
                with open(p("file")) as f:
                    self.assertEqual(f.read(), "data")
                self.assertEqual(sorted(os.listdir(src)), ["dir", "file"])
                self.assertGreaterEqual(m.stats()["requests"]["rejected_writes"], 14)
                self.assertTrue(m.alive())


if __name__ == "__main__":
    harness.main()
