"""-o idle_exit=SECONDS: a daemon shared by a node's jobs unmounts itself and
exits 0 once, for SECONDS in a row, no bind mount of its mount exists and no
process read the dataset through it. Each case lasts longer than the timer
(and than its check period) while something keeps the mount in use."""
import os
import subprocess
import time
import unittest

import harness

IDLE = 2  # seconds; checked every 0.5 s


def read_now_and_then(path, seconds, every):
    """Reads `path` every `every` seconds for `seconds` (page cache dropped:
    each read reaches the daemon)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        harness.read_file(path)
        time.sleep(every)


class IdleExitTest(unittest.TestCase):
    def setUp(self):
        self.base, self.src, self.mnt = harness.shared_workdir("tierfs-idle-")
        self.other = os.path.join(self.base, "job-mnt")
        os.mkdir(self.other)
        with open(os.path.join(self.src, "a"), "wb") as f:
            f.write(b"x" * 4096)
        self.mount = None

    def tearDown(self):
        if harness.is_mounted(self.other):
            subprocess.run(["umount", "-l", self.other], capture_output=True)
        harness.tear_down([self.mount] if self.mount else [], self.base)

    def start(self):
        self.mount = harness.Mount(self.src, self.mnt, [f"idle_exit={IDLE}"])

    def wait_exit(self, within):
        start = time.monotonic()
        rc = self.mount.proc.wait(timeout=within)
        waited = time.monotonic() - start
        self.assertEqual(rc, 0, self.mount.output())
        self.assertFalse(harness.is_mounted(self.mnt), "the mount is left behind")
        self.assertIn("no job has used this mount for", self.mount.output())
        return waited

    @unittest.skipUnless(os.geteuid() == 0, "bind mounts need root")
    def test_a_bind_mount_keeps_it_until_removed(self):
        self.start()
        subprocess.run(["mount", "--bind", self.mnt, self.other], check=True)
        # Readers through the bind now and then, with pauses longer than the
        # timer: the bind alone keeps the daemon.
        read_now_and_then(os.path.join(self.other, "a"), 1.0, 0.3)
        time.sleep(2 * IDLE + 1)
        self.assertTrue(self.mount.alive(), self.mount.output())
        with open(os.path.join(self.other, "a"), "rb") as f:
            self.assertEqual(f.read(), b"x" * 4096)
        subprocess.run(["umount", self.other], check=True)
        waited = self.wait_exit(within=IDLE + 5)
        self.assertGreaterEqual(waited, IDLE - 0.6)  # not at once: a job may come back

    def test_readers_keep_it_without_a_bind(self):
        self.start()
        read_now_and_then(os.path.join(self.mnt, "a"), 2 * IDLE, 0.5)
        self.assertTrue(self.mount.alive(), self.mount.output())
        self.wait_exit(within=IDLE + 5)

    def test_off_by_default(self):
        self.mount = harness.Mount(self.src, self.mnt)
        time.sleep(IDLE + 1.5)
        self.assertTrue(self.mount.alive(), self.mount.output())
        self.assertTrue(harness.is_mounted(self.mnt))


if __name__ == "__main__":
    harness.main()
