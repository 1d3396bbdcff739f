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
    def pfs_source(self, pfs_options):
        """40 files in 4 directories behind pfs-sim: (files, pfs, its mount, tierfs's mount)."""
        base = tempfile.mkdtemp(prefix="tierfs-fusesrc-")
        self.addCleanup(shutil.rmtree, base, True)
        src, pfs_mnt, mnt = (os.path.join(base, d) for d in ("src", "pfs", "mnt"))
        os.mkdir(src)
        os.mkdir(mnt)
        files = harness.make_files(src, 40, 20000, subdirs=4)
        pfs = harness.PfsSim(src, pfs_mnt, pfs_options)
        self.addCleanup(pfs.close)
        return files, pfs, pfs_mnt, mnt

    def test_renumbered_inodes_after_drop_caches_still_read_bit_exact(self):
        if os.geteuid() != 0:
            self.skipTest("dropping the kernel's caches needs root")
        files, pfs, pfs_mnt, mnt = self.pfs_source("meta_ms=0,read_ms=0,renumber=1")
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

    def test_an_open_costs_source_one_lookup_and_one_open(self):
        """A FUSE SOURCE with no entry or attribute caching (pfs-sim's
        default, like a PFS client without leases) is asked for every path
        component of every open. tierfs keeps SOURCE's directories open and
        takes the file's attributes from the open: one LOOKUP and one OPEN
        per file, no GETATTR (a direct open of dir/file costs two LOOKUPs
        and an OPEN, and a stat after it one GETATTR more)."""
        files, pfs, pfs_mnt, mnt = self.pfs_source("meta_ms=0,read_ms=0")
        for options in ([], ["ram=64M"]):
            with self.subTest(options=options), harness.Mount(pfs_mnt, mnt, options) as m:
                before = pfs.stats()["ops"]
                for rel, data in files.items():
                    with open(os.path.join(mnt, rel), "rb") as f:
                        self.assertEqual(f.read(), data, rel)
                after = pfs.stats()["ops"]
                d = {k: after.get(k, 0) - before.get(k, 0) for k in ("lookups", "getattrs", "opens")}
                self.assertEqual(d["opens"], len(files), d)
                self.assertEqual(d["getattrs"], 0, d)
                dirs = len({os.path.dirname(rel) for rel in files})
                self.assertLessEqual(d["lookups"], len(files) + dirs, d)
                self.assertEqual(m.stats()["open_files"]["changed"], 0)


if __name__ == "__main__":
    harness.main()
