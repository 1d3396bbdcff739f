"""The daemon detaches after the mount is ready and unmounts cleanly on
SIGTERM, SIGINT and fusermount3 -u."""
import os
import signal
import subprocess
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
