"""Mistakes on the command line are reported before SOURCE is scanned: exit
status 2 within a second, with SOURCE behind a slow pfs-sim (100 ms per
metadata operation, 200 files: a scan takes seconds), so a check made after
the scan would be caught by the clock. Doubtful values are warned about
and mounted."""
import os
import shutil
import socket
import tempfile
import time
import unittest

import harness


class EarlyMistakes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.base = tempfile.mkdtemp(prefix="tierfs-early-")
        cls.src = os.path.join(cls.base, "src")
        os.mkdir(cls.src)
        harness.make_files(cls.src, 200, 100, subdirs=20)
        cls.pfs = harness.PfsSim(cls.src, os.path.join(cls.base, "pfs"), "meta_ms=100")
        cls.tier = os.path.join(cls.base, "tier")
        os.mkdir(cls.tier, 0o755)

    @classmethod
    def tearDownClass(cls):
        cls.pfs.close()
        shutil.rmtree(cls.base, ignore_errors=True)

    def setUp(self):
        self.mnt = tempfile.mkdtemp(prefix="mnt-", dir=self.base)

    def tearDown(self):
        harness.force_unmount(self.mnt)

    def refused(self, options, says):
        if harness.is_mounted(self.mnt):  # a case before this one was mounted after all
            harness.force_unmount(self.mnt)
        readdirs = self.pfs.stats()["ops"]["readdirs"]
        start = time.monotonic()
        r = harness.run_tierfs(self.pfs.mnt, self.mnt, "-o", options)
        took = time.monotonic() - start
        self.assertEqual(r.returncode, 2, f"{options}: {r.stderr}")
        self.assertIn(says, r.stderr, options)
        self.assertLess(took, 1.0, f"{options}: refused only after {took:.1f} s (after a scan?)")
        self.assertFalse(harness.is_mounted(self.mnt))
        self.assertEqual(self.pfs.stats()["ops"]["readdirs"], readdirs, "SOURCE was listed")

    def test_each_mistake_is_refused_before_the_scan(self):
        with open("/proc/meminfo") as f:
            total_kib = int(f.readline().split()[1])
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            cases = [
                ("tier=/nonexistent-tierfs:10G", "No such file or directory"),
                ("tier=relative:10G", "absolute"),
                ("prefetch=order", "prefetch=order needs a tier"),
                ("prefetch=stage-in", "prefetch=stage-in needs a tier"),
                ("metrics=localhost:19101", "not a numeric IPv4 or IPv6 address"),
                ("metrics=0.0.0.0:99999", "is not [HOST:]PORT"),
                (f"metrics={busy.getsockname()[1]}", "cannot listen"),
                ("index=/proc/tierfs.index", "not writable"),
                ("index=/nonexistent-tierfs/x.index", "does not exist"),
                (f"ram={total_kib * 4}K", "more than this machine's memory"),
                ("ram=1", "too small"),
            ]
            for options, says in cases:
                with self.subTest(options=options):
                    self.refused(options, says)

    def test_a_tier_in_use_is_refused_at_once_naming_its_daemon(self):
        other_mnt = tempfile.mkdtemp(prefix="mnt-other-", dir=self.base)
        with harness.Mount(self.src, other_mnt, [f"tier={self.tier}:1G"]) as other:
            lock = os.path.join(self.tier, "lock")
            harness.wait_for(lambda: "state=mounted" in open(lock).read(),
                             what="the daemon noting itself in the tier's lock file")
            self.refused(f"tier={self.tier}:1G",
                         f"in use by another tierfs daemon (pid {other.proc.pid}, "
                         f"mounted on {other_mnt})")
            self.assertTrue(other.alive())
        # Unmounted: the same tier mounts again (a holder that is stopping is waited for).
        with harness.Mount(self.src, other_mnt, [f"tier={self.tier}:1G"]):
            pass

    def mount_detached(self, options):
        """What a mount of SOURCE with `options` says on the terminal as a user
        runs it (the daemon detaches); unmounted afterwards."""
        log = os.path.join(self.base, "daemon.log")  # no syslog here: not /var/log/tierfs
        r = harness.run_tierfs(self.src, self.mnt, "-o", ",".join(options + [f"log={log}"]))
        self.assertEqual(r.returncode, 0, f"{options}: {r.stderr}")
        self.assertTrue(harness.is_mounted(self.mnt), options)
        harness.force_unmount(self.mnt)
        harness.wait_for(lambda: not harness.tierfs_pids(self.mnt), what="the daemon to exit")
        return r.stderr

    def test_a_mount_without_a_tier_says_it_caches_nothing(self):
        said = self.mount_detached([])
        self.assertIn("no tier (ram= or tier=): tierfs mirrors SOURCE and caches nothing beyond "
                      "the kernel's page cache", said)
        for options in (["ram=1M"], [f"tier={self.tier}:1M"]):
            self.assertNotIn("no tier", self.mount_detached(options), options)

    def test_ram_above_the_memory_available_is_warned_about_and_mounted(self):
        with open("/proc/meminfo") as f:
            total_kib = int(f.readline().split()[1])
        # Below MemTotal (refused above it), above MemAvailable: the kernel's
        # own memory and reserves are never available.
        said = self.mount_detached([f"ram={total_kib - 1024}K"])
        self.assertRegex(said, r"ram=[0-9.]+ GiB is more than the memory available now "
                               r"\([0-9.]+ GiB\): the RAM tier may push other programs out")

    def test_doubtful_values_are_warned_about_and_mounted(self):
        fs = os.statvfs(self.tier)
        device = fs.f_blocks * fs.f_frsize
        with harness.Mount(self.pfs.mnt, self.mnt, [f"tier={self.tier}:{device * 2 // 1024}K"]) as m:
            self.assertIn("more than its file system holds", m.output())


if __name__ == "__main__":
    harness.main()
