"""The exit status of a mount that cannot be made says whose failure it is:
5 for a tier or index directory the command line names that cannot be used
now (a file system with no inodes left, one mounted read-only), not 2 (what
the command line says on its own); 3 for a SOURCE that leads to the mount
point (a dataset symlink pointing at it, SOURCE given as MOUNTPOINT), not 4;
6 for a SOURCE whose file system answers with EIO (pfs-sim failing the
root's listing), while a missing SOURCE stays 3. Needs root (tmpfs mounts)."""
import os
import shutil
import subprocess
import tempfile
import unittest

import harness


def mount_tmpfs(path, options):
    """A small tmpfs at `path` with `options`; True if mounted."""
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tierfs-test", path],
                       capture_output=True, timeout=30)
    return r.returncode == 0


def fill_inodes(path):
    """Makes empty files in `path` until its file system has no inode left;
    how many it made."""
    made = 0
    while True:
        try:
            with open(os.path.join(path, f"i{made}"), "w"):
                pass
        except OSError:
            return made
        made += 1


class WhoseFailure(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root (tmpfs mounts)")
        self.base = tempfile.mkdtemp(prefix="tierfs-whose-")
        self.src = os.path.join(self.base, "src")
        self.mnt = os.path.join(self.base, "mnt")
        os.mkdir(self.src)
        os.mkdir(self.mnt)
        harness.make_files(self.src, 10, 100, subdirs=2)
        self.mounts = []

    def tearDown(self):
        harness.force_unmount(self.mnt)
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-l", m], capture_output=True, timeout=30)
        shutil.rmtree(self.base, ignore_errors=True)

    def tmpfs(self, name, options):
        path = os.path.join(self.base, name)
        if not mount_tmpfs(path, options):
            self.skipTest(f"cannot mount a tmpfs ({options})")
        self.mounts.append(path)
        return path

    def full_of_inodes(self, name):
        """A directory on a tmpfs with no inode left (writable, not full of bytes)."""
        path = self.tmpfs(name, "size=1M,nr_inodes=16,mode=0700")
        self.assertGreater(fill_inodes(path), 0)
        with self.assertRaises(OSError):
            open(os.path.join(path, "one-more"), "w").close()
        return path

    def refused(self, code, says, *options, source=None):
        r = harness.run_tierfs(source or self.src, self.mnt, *options)
        self.assertEqual(r.returncode, code, r.stderr)
        self.assertIn(says, r.stderr)
        self.assertFalse(harness.is_mounted(self.mnt))
        return r.stderr

    def test_a_tier_on_a_file_system_with_no_inodes_left_is_the_paths_failure(self):
        tier = self.full_of_inodes("tier")
        self.refused(5, f"tier '{tier}'", "-o", f"tier={tier}:512K")

    def test_a_tier_on_a_read_only_file_system_is_the_paths_failure(self):
        tier = self.tmpfs("rotier", "size=1M,mode=0700,ro")
        self.refused(5, "not writable", "-o", f"tier={tier}:512K")

    def test_an_index_whose_directory_takes_no_file_is_the_paths_failure(self):
        where = self.full_of_inodes("idx")
        self.refused(5, f"index '{where}/x.index'", "-o", f"index={where}/x.index")

    def test_what_the_command_line_says_alone_is_still_status_2(self):
        self.refused(2, "not an absolute path", "-o", "tier=relative:1G")
        self.refused(2, "index=auto keeps the index", "-o", "index=auto")

    def test_source_that_is_the_mount_point_is_sources_failure(self):
        link = os.path.join(self.base, "dataset")
        os.symlink(self.mnt, link)
        said = self.refused(3, f"SOURCE '{self.mnt}' is MOUNTPOINT '{self.mnt}' itself",
                            source=link)
        self.assertNotIn("MOUNTPOINT '" + self.mnt + "' is SOURCE", said)
        self.refused(3, "is MOUNTPOINT", source=self.mnt)
        inside = os.path.join(self.mnt, "data")
        os.mkdir(inside)
        self.refused(3, "is inside MOUNTPOINT", "-o", "nonempty", source=inside)
        # Resolved as the open_as= user: the same.
        self.refused(3, "itself", "-f", "-o", "open_as=0:0", source=link)

    def test_a_source_whose_file_system_fails_with_eio_is_status_6(self):
        pfs = harness.PfsSim(self.src, os.path.join(self.base, "pfs"), "meta_ms=0,fail_dirs=.")
        try:
            said = self.refused(6, "Input/output error", source=pfs.mnt)
            self.assertIn("SOURCE", said)
        finally:
            pfs.close()
        self.refused(3, "No such file or directory", source=os.path.join(self.base, "missing"))


# That --help, the man page, USAGE and OPERATIONS give the same statuses,
# word for word, and that one case of every row exits as they say, is
# test_exit_status.py's.


if __name__ == "__main__":
    harness.main()
