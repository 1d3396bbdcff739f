"""The daemon detaches after the mount is ready and unmounts cleanly on
SIGTERM, SIGINT and fusermount3 -u."""
import os
import signal
import subprocess
import tempfile
import time
import unittest

import harness


def daemon_pid(mnt):
    """The pid of the tierfs process serving mnt."""
    pids = harness.tierfs_pids(mnt)
    return pids[0] if len(pids) == 1 else None


def gone(pid):
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True


class LifecycleTest(unittest.TestCase):
    def test_daemon_mode_and_sigterm(self):
        with harness.workdir() as (src, mnt):
            with open(os.path.join(src, "a"), "w") as f:
                f.write("alpha")
            r = harness.run_tierfs(src, mnt)
            self.assertEqual(r.returncode, 0, r.stderr)
            # The mount is ready when the command returns.
            self.assertTrue(harness.is_mounted(mnt))
            with open(os.path.join(mnt, "a")) as f:
                self.assertEqual(f.read(), "alpha")
            pid = daemon_pid(mnt)
            self.assertIsNotNone(pid)
            os.kill(pid, signal.SIGTERM)
            harness.wait_for(lambda: gone(pid), what="the daemon to exit")
            self.assertFalse(harness.is_mounted(mnt))

    def test_foreground_sigint(self):
        with harness.workdir() as (src, mnt):
            m = harness.Mount(src, mnt)
            m.proc.send_signal(signal.SIGINT)
            self.assertEqual(m.proc.wait(timeout=20), 0)
            self.assertFalse(harness.is_mounted(mnt))
            self.assertIn("unmounted", m.output())

    def test_sigint_a_script_ignored_stays_ignored(self):
        """A script's `tierfs ... &` runs it with SIGINT ignored (so that
        Ctrl-C stops the script, not its background jobs): SIGINT then
        leaves the mount alone, past shutdown_timeout (no forced shutdown,
        no status 1), and SIGTERM still unmounts it cleanly."""
        with harness.workdir() as (src, mnt):
            log = tempfile.TemporaryFile(mode="w+")
            script = subprocess.Popen(
                ["sh", "-c", '"$0" "$1" "$2" -f -o shutdown_timeout=1 & echo $!; wait $!',
                 harness.tierfs_bin(), src, mnt],
                stdout=subprocess.PIPE, stderr=log, text=True)
            try:
                pid = int(script.stdout.readline())
                harness.wait_for(lambda: harness.is_mounted(mnt), what="the mount")
                os.kill(pid, signal.SIGINT)
                time.sleep(2.5)  # outlives shutdown_timeout=1
                self.assertFalse(gone(pid), "SIGINT ended a daemon that was started ignoring it")
                self.assertTrue(harness.is_mounted(mnt))
                os.kill(pid, signal.SIGTERM)
                self.assertEqual(script.wait(timeout=20), 0)
                self.assertFalse(harness.is_mounted(mnt))
                log.seek(0)
                said = log.read()
                self.assertNotIn("shutdown forced", said)
                self.assertIn("SIGINT is ignored, as this daemon was started", said)
            finally:
                if script.poll() is None:
                    script.kill()
                harness.force_unmount(mnt)

    def test_fusermount_unmount_ends_the_daemon(self):
        with harness.workdir() as (src, mnt):
            m = harness.Mount(src, mnt)
            subprocess.run(["fusermount3", "-u", mnt], check=True)
            self.assertEqual(m.proc.wait(timeout=20), 0)
            self.assertFalse(harness.is_mounted(mnt))

    def test_busy_reader_during_unmount(self):
        """A lazy unmount with a reader inside still ends the daemon once it leaves."""
        with harness.workdir() as (src, mnt):
            with open(os.path.join(src, "a"), "w") as f:
                f.write("alpha")
            m = harness.Mount(src, mnt)
            f = open(os.path.join(mnt, "a"))
            subprocess.run(["fusermount3", "-uz", mnt], check=True)
            self.assertEqual(f.read(), "alpha")
            f.close()
            self.assertEqual(m.proc.wait(timeout=20), 0)


if __name__ == "__main__":
    harness.main()
