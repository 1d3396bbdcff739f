"""Where a detached daemon's log goes: syslog where there is one; where
there is none (containers, minimal nodes: no /dev/log) a file whose path
is printed at mount; or the file -o log= names. A warning must never go
nowhere."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import harness


class DetachedLog(unittest.TestCase):
    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="tierfs-log-")
        self.src = os.path.join(self.base, "src")
        self.mnt = os.path.join(self.base, "mnt")
        os.mkdir(self.src)
        os.mkdir(self.mnt)
        harness.make_files(self.src, 4, 1000)

    def tearDown(self):
        harness.force_unmount(self.mnt)
        harness.wait_for(lambda: not harness.tierfs_pids(self.mnt), timeout=20,
                         what="the daemon to exit")
        shutil.rmtree(self.base, ignore_errors=True)

    def test_log_file_named_on_the_command_line(self):
        log = os.path.join(self.base, "daemon.log")
        r = harness.run_tierfs(self.src, self.mnt, "-o", f"log={log}")
        self.assertEqual(r.returncode, 0, r.stderr)
        harness.wait_for(lambda: os.path.exists(log) and "serving" in open(log).read(),
                         what="the log file")
        text = open(log).read()
        self.assertRegex(text, r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d tierfs\[\d+\]: info: detached: "
                               r"serving ")
        self.assertEqual(os.stat(log).st_mode & 0o777, 0o640)

    def test_without_syslog_the_log_goes_to_a_file_said_at_mount(self):
        if os.path.exists("/dev/log"):
            self.skipTest("this machine has syslog (/dev/log): the fallback is not used")
        r = harness.run_tierfs(self.src, self.mnt)
        self.assertEqual(r.returncode, 0, r.stderr)
        found = re.search(r"the daemon logs to (\S+)", r.stderr)
        self.assertIsNotNone(found, r.stderr)
        path = found.group(1)
        self.addCleanup(lambda: os.path.exists(path) and os.unlink(path))
        if os.geteuid() == 0:
            self.assertTrue(path.startswith("/var/log/tierfs/"), path)
        harness.wait_for(lambda: os.path.exists(path) and self.mnt in open(path).read(),
                         what="the fallback log file")
        self.assertIn(f"serving {self.src} on {self.mnt}", open(path).read())

    def test_without_syslog_a_users_daemon_logs_under_its_home(self):
        # USAGE: ~/.local/state/tierfs/ (or $XDG_STATE_HOME/tierfs/) for a
        # daemon that is not root's, the file named after the mount point.
        if os.path.exists("/dev/log"):
            self.skipTest("this machine has syslog (/dev/log): the fallback is not used")
        user = harness.unprivileged_user() if os.geteuid() == 0 else None
        if os.geteuid() == 0:
            if user is None:
                self.skipTest("no unprivileged account can be made here (useradd, setpriv)")
            if os.stat("/dev/fuse").st_mode & 0o006 != 0o006:
                # A user's daemon needs /dev/fuse (0666 on Debian; some
                # containers make it root's only): opened up for this test.
                mode = os.stat("/dev/fuse").st_mode & 0o777
                os.chmod("/dev/fuse", 0o666)
                self.addCleanup(os.chmod, "/dev/fuse", mode)
        home = os.path.join(self.base, "home")
        os.mkdir(home)
        if user is not None:
            os.chmod(self.base, 0o755)
            for d in (home, self.mnt):
                os.chown(d, *user)
        env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
        env["HOME"] = home
        cmd = [harness.tierfs_bin(), self.src, self.mnt]
        r = subprocess.run(harness.user_command(user, *cmd) if user else cmd, env=env,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        mnt = os.path.realpath(self.mnt)
        log_dir = os.path.join(home, ".local", "state", "tierfs")
        path = os.path.join(log_dir, mnt.replace("/", "_").lstrip("_") + ".log")
        self.assertIn(f"no syslog here (/dev/log): the daemon logs to {path}\n", r.stderr)
        harness.wait_for(lambda: os.path.exists(path) and "serving" in open(path).read(),
                         what="the log file in the user's home")
        self.assertRegex(open(path).read(), rf"tierfs\[\d+\]: info: detached: serving "
                                            rf"{re.escape(self.src)} on {re.escape(mnt)} ")
        st = os.stat(log_dir)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (os.stat(home).st_uid, 0o750))
        # --help names the directory this daemon used, and root's.
        said = " ".join(harness.run_tierfs("--help").stdout.split())
        m = re.search(r"a file in (\S+) for root, in (\S+) for a user", said)
        self.assertIsNotNone(m, said)
        self.assertEqual(m.group(1), "/var/log/tierfs")
        self.assertEqual(m.group(2).replace("~", home, 1), log_dir)
        self.assertEqual(os.stat(path).st_uid, st.st_uid)

    def test_a_bad_log_option_is_refused_before_the_scan(self):
        for value, says in (("relative.log", "not syslog, stderr or an absolute path"),
                            ("/nonexistent-tierfs/x.log", "its directory does not exist")):
            r = harness.run_tierfs(self.src, self.mnt, "-o", f"log={value}")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(says, r.stderr)


def tearDownModule():
    harness.remove_made_users()


if __name__ == "__main__":
    harness.main()
