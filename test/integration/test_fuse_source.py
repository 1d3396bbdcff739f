"""A SOURCE that is itself a FUSE file system (sshfs, rclone, s3fs,
gcsfuse) may give a file a new inode number each time the kernel forgets
and looks it up again. pfs-sim plays one (renumber=1): after the kernel's
caches are dropped, every SOURCE file has a new number. tierfs knows a FUSE
SOURCE and identifies files there by size, mtime and ctime: the mount
still reads every file bit-exact, where it used to fail every read with EIO
("replaced (another inode)") until a remount."""
import os
import shutil
import tempfile
import unittest

import harness


class FuseSource(unittest.TestCase):
    def test_renumbered_inodes_after_drop_caches_still_read_bit_exact(self):
        if os.geteuid() != 0:
            self.skipTest("dropping the kernel's caches needs root")
        base = tempfile.mkdtemp(prefix="tierfs-fusesrc-")
        self.addCleanup(shutil.rmtree, base, True)
        src, pfs_mnt, mnt = (os.path.join(base, d) for d in ("src", "pfs", "mnt"))
        os.mkdir(src)
        os.mkdir(mnt)
        files = harness.make_files(src, 40, 20000, subdirs=4)
        pfs = harness.PfsSim(src, pfs_mnt, "meta_ms=0,read_ms=0,renumber=1")
        self.addCleanup(pfs.close)
        with harness.Mount(pfs_mnt, mnt, ["max_open_files=16"]) as m:
            self.assertIn("identified by size, mtime and ctime", m.output())

            def read_all():
                for rel, data in files.items():
                    with open(os.path.join(mnt, rel), "rb") as f:
                        self.assertEqual(f.read(), data, rel)

            read_all()
            ino_before = os.stat(os.path.join(pfs_mnt, next(iter(files)))).st_ino
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            harness.wait_for(lambda: pfs.stats()["ops"].get("forgets", 0) > 0,
                             what="the kernel forgetting pfs-sim's inodes")
            self.assertNotEqual(os.stat(os.path.join(pfs_mnt, next(iter(files)))).st_ino,
                                ino_before, "pfs-sim did not renumber")
            read_all()
            self.assertEqual(m.stats()["open_files"]["changed"], 0)


if __name__ == "__main__":
    harness.main()
