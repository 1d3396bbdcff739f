"""Mistakes on the command line are reported before SOURCE is scanned: exit
status 2 within a second (5 for a tier or index path it names that cannot be
used now), with SOURCE behind a slow pfs-sim (100 ms per
metadata operation, 200 files: a scan takes seconds), so a check made after
the scan would be caught by the clock. So is what the FUSE mount itself
needs, for a user other than root (/dev/fuse, a mount point the user may
write, allow_other permitted by /etc/fuse.conf); when the mount fails all
the same, libfuse's or fusermount3's own words are said, with no guess after
them. Doubtful values are warned about and mounted; a warning never comes
before an error."""
import os
import re
import shutil
import socket
import tempfile
import time
import unittest

import harness

FUSE_CONF = "/etc/fuse.conf"


def setUpModule():
    global USER
    USER = harness.unprivileged_user()


def tearDownModule():
    harness.remove_made_users()


USER = None


class EarlyMistakes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.base = tempfile.mkdtemp(prefix="tierfs-early-")
        os.chmod(cls.base, 0o755)  # the second user's mounts read SOURCE too
        cls.src = os.path.join(cls.base, "src")
        os.mkdir(cls.src)
        harness.make_files(cls.src, 200, 100, subdirs=20)
        cls.pfs = harness.PfsSim(cls.src, os.path.join(cls.base, "pfs"), "meta_ms=100,allow_other")
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

    def refused(self, options, says, user=None, code=2):
        """Runs a mount of the slow SOURCE with `options` (as `user`, or
        root): refused with exit `code` within a second, saying `says`,
        SOURCE never listed. Its stderr."""
        if harness.is_mounted(self.mnt):  # a case before this one was mounted after all
            harness.force_unmount(self.mnt)
        readdirs = self.pfs.stats()["ops"]["readdirs"]
        start = time.monotonic()
        if user is None:
            r = harness.run_tierfs(self.pfs.mnt, self.mnt, "-o", options)
            stderr = r.stderr
        else:
            r = harness.as_user(user, harness.tierfs_bin(), self.pfs.mnt, self.mnt, "-o", options)
            stderr = r.stderr.decode(errors="replace")
        took = time.monotonic() - start
        self.assertEqual(r.returncode, code, f"{options}: {stderr}")
        self.assertIn(says, stderr, options)
        self.assertLess(took, 1.0, f"{options}: refused only after {took:.1f} s (after a scan?)")
        self.assertFalse(harness.is_mounted(self.mnt))
        self.assertEqual(self.pfs.stats()["ops"]["readdirs"], readdirs, "SOURCE was listed")
        return stderr

    def test_each_mistake_is_refused_before_the_scan(self):
        with open("/proc/meminfo") as f:
            total_kib = int(f.readline().split()[1])
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            cases = [
                ("tier=/nonexistent-tierfs:10G", "No such file or directory", 5),
                ("tier=relative:10G", "absolute"),
                ("prefetch=order", "prefetch=order needs a tier"),
                ("prefetch=stage-in", "prefetch=stage-in needs a tier"),
                ("metrics=localhost:19101", "not a numeric IPv4 or IPv6 address"),
                ("metrics=0.0.0.0:99999", "is not [HOST:]PORT"),
                (f"metrics={busy.getsockname()[1]}", "cannot listen"),
                ("index=/proc/tierfs.index", "not writable", 5),
                ("index=/nonexistent-tierfs/x.index", "does not exist", 5),
                (f"ram={total_kib * 4}K", "more than this machine's memory"),
                ("ram=1", "too small"),
                # A misspelt option: the nearest one, not a list of them all.
                ("ram=1M,prefech=order", "unknown option 'prefech' (did you mean 'prefetch'?)"),
            ]
            for options, says, *code in cases:
                with self.subTest(options=options):
                    self.refused(options, says, code=code[0] if code else 2)

    def test_a_tier_others_may_write_is_refused_before_the_scan_with_the_fix(self):
        """/dev/shm itself (1777), a 0777 directory, another user's, one below
        a directory others may write: each is refused at once (status 5, a
        tier path that cannot be used), saying what to make instead."""
        made = []

        def directory(name, mode, owner=None, parent=None):
            path = os.path.join(parent or self.base, name)
            os.mkdir(path)
            os.chmod(path, mode)
            if owner is not None:
                os.chown(path, owner, -1)
            made.append(path)
            return path

        shared = directory("shared", 0o1777)
        world = directory("world", 0o777)
        theirs = directory("theirs", 0o700, owner=USER[0] if USER else 65534)
        open_parent = directory("open", 0o777)
        below = directory("below", 0o700, parent=open_parent)
        cases = [(shared, f"mkdir -m 700 {shared}/tierfs-$USER and tier={shared}/tierfs-$USER:SIZE"),
                 (world, f"chmod go-w '{world}'"),
                 (theirs, f"mkdir -m 700 {theirs}/tierfs-$USER"),
                 (below, "whose every parent only root or you may write")]
        if os.path.isdir("/dev/shm") and os.stat("/dev/shm").st_mode & 0o1777 == 0o1777:
            cases.append(("/dev/shm", "mkdir -m 700 /dev/shm/tierfs-$USER"))
        try:
            for tier, fix in cases:
                with self.subTest(tier=tier):
                    said = self.refused(f"tier={tier}:1G", fix, code=5)
                    self.assertIn(f"tier '{tier}' is refused", said)
        finally:
            for path in reversed(made):
                os.rmdir(path)

    def test_a_misspelt_option_is_said_in_one_line(self):
        said = self.refused("prefech=order", "did you mean 'prefetch'?")
        self.assertEqual(said, "tierfs: unknown option 'prefech' (did you mean 'prefetch'?)\n")

    def test_what_the_fuse_mount_needs_is_refused_before_the_scan_for_a_user(self):
        # A user's mount with allow_other, /etc/fuse.conf without
        # user_allow_other, on a mount point of root's (0755): fusermount3
        # would refuse both, after the scan.
        # The status says whose it is to fix, as for SOURCE and MOUNTPOINT:
        # 1 this machine's FUSE (the device here may be root's alone), 4 the
        # mount point, 2 an option the machine does not permit.
        if USER is None:
            self.skipTest(f"cannot make or use a second user ({harness.OTHER_USER})")
        device = user_can_open_fuse_device()
        os.chmod(self.mnt, 0o755)
        with without_user_allow_other():
            said = self.refused("allow_other,ram=1M", f"cannot mount on '{self.mnt}'", user=USER,
                                code=4 if device else 1)
        self.assertIn(f"MOUNTPOINT '{self.mnt}' is not writable by uid {USER[0]}", said)
        self.assertIn("allow_other is allowed to users other than root only if /etc/fuse.conf "
                      "has the line 'user_allow_other'", said)
        if not device:
            self.assertIn("/dev/fuse cannot be opened by uid", said)
        self.assertNotIn("is /dev/fuse usable", said)
        self.assertNotIn("warning", said)
        # The user's own mount point: only what remains is said.
        os.chown(self.mnt, *USER)
        with without_user_allow_other():
            said = self.refused("allow_other,ram=1M", "allow_other is allowed", user=USER,
                                code=2 if device else 1)
        self.assertNotIn("MOUNTPOINT", said)

    def test_a_failed_mount_says_why_in_libfuses_words_with_no_guess(self):
        # The kernel refuses an SELinux context where there is no SELinux: a
        # failure no check before the scan foresees.
        if os.geteuid() != 0:
            self.skipTest("needs root (mount(2) without fusermount3)")
        if os.path.exists("/sys/fs/selinux/enforce"):
            self.skipTest("SELinux is on here: the context would be taken")
        r = harness.run_tierfs(self.src, self.mnt, "-o", "context=system_u:object_r:tmp_t:s0")
        if harness.is_mounted(self.mnt):
            self.skipTest("the kernel took the context option")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"tierfs: cannot mount on '{self.mnt}': fuse: mount failed: ", r.stderr)
        self.assertNotIn("is /dev/fuse usable", r.stderr)

    def test_a_missing_source_is_said_alone(self):
        r = harness.run_tierfs(os.path.join(self.base, "missing"), self.mnt)
        self.assertEqual(r.returncode, 3, r.stderr)  # SOURCE's state: exit 3
        self.assertEqual(r.stderr, f"tierfs: SOURCE '{os.path.join(self.base, 'missing')}': "
                                   "No such file or directory\n")

    def test_ram_and_a_tmpfs_tier_above_memory_are_warned_about(self):
        if not os.path.isdir("/dev/shm") or os.statvfs("/dev/shm").f_blocks == 0:
            self.skipTest("no /dev/shm here")
        meminfo = {}
        with open("/proc/meminfo") as f:
            for line in f:
                key, value = line.split(":")
                meminfo[key] = int(value.split()[0])
        shm = tempfile.mkdtemp(prefix="tierfs-early-", dir="/dev/shm")
        try:
            ram, shm_tier = meminfo["MemAvailable"] // 2, meminfo["MemTotal"]
            said = self.mount_detached([f"ram={ram}K", f"tier={shm}:{shm_tier}K"])
            self.assertRegex(said, rf"ram=[0-9.]+ GiB and the memory-backed tier '{re.escape(shm)}' "
                                   r"\([0-9.]+ GiB\) together are more than this machine's memory")
            # A tier on a disk is not memory.
            said = self.mount_detached([f"ram={ram}K", f"tier={self.tier}:{shm_tier}K"])
            self.assertNotIn("memory-backed", said)
        finally:
            shutil.rmtree(shm, ignore_errors=True)

    def test_a_tier_in_use_is_refused_at_once_naming_its_daemon(self):
        other_mnt = tempfile.mkdtemp(prefix="mnt-other-", dir=self.base)
        with harness.Mount(self.src, other_mnt, [f"tier={self.tier}:1G"]) as other:
            lock = os.path.join(self.tier, "lock")
            harness.wait_for(lambda: "state=mounted" in open(lock).read(),
                             what="the daemon noting itself in the tier's lock file")
            self.refused(f"tier={self.tier}:1G",
                         f"in use by another tierfs daemon (pid {other.proc.pid}, "
                         f"mounted on {other_mnt})", code=5)  # the tier path's
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

    def test_ro_is_warned_about_the_control_files(self):
        # tierfs does not pass ro itself (its mount is read-only without it):
        # on a read-only mount the kernel refuses the control files' writes.
        said = self.mount_detached(["ram=1M", "ro"])
        self.assertIn("ro: the kernel refuses every write to a read-only mount, the control "
                      "files' too", said)
        self.assertNotIn("ro:", self.mount_detached(["ram=1M"]))

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


class without_user_allow_other:
    """/etc/fuse.conf with no active user_allow_other line while inside
    (restored afterwards, as it was)."""

    def __enter__(self):
        try:
            with open(FUSE_CONF) as f:
                self.saved = f.read()
        except FileNotFoundError:
            self.saved = None
        lines = (self.saved or "").splitlines(keepends=True)
        kept = ["#" + line if line.split("#")[0].strip() == "user_allow_other" else line
                for line in lines]
        if kept != lines:
            with open(FUSE_CONF, "w") as f:
                f.write("".join(kept))
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            with open(FUSE_CONF) as f:
                changed = f.read() != self.saved
            if changed:
                with open(FUSE_CONF, "w") as f:
                    f.write(self.saved)


def user_can_open_fuse_device():
    r = harness.as_user(USER, "sh", "-c", "exec 3<>/dev/fuse")
    return r.returncode == 0


if __name__ == "__main__":
    harness.main()
