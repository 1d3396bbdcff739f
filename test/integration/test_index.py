"""The saved namespace index through real mounts: `tierfs index` builds it,
-o index=FILE mounts from it with one stat per directory, a bad index is
refused and replaced by a scan, a changed directory shows its change,
index=auto keeps the index in the first directory tier, and two mounts
racing on one index file scan once. A mount's scan shows a progress line
on a terminal (a pty), nothing more on a pipe."""
import os
import pty
import select
import subprocess
import time
import unittest

import harness


def make_dataset(src, classes=6, files=30):
    for c in range(classes):
        d = os.path.join(src, f"class{c:02d}")
        os.mkdir(d)
        for i in range(files):
            with open(os.path.join(d, f"img{i:03d}.jpg"), "wb") as f:
                f.write(b"x" * (100 + i))
    os.symlink("class00/img000.jpg", os.path.join(src, "link"))
    # Directories changed within 2 s of an index's scan are listed again
    # (coarse timestamps): let the dataset age past that.
    time.sleep(2.2)
    return classes + 1


def listing(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out.append((os.path.relpath(p, root), st.st_mode, st.st_size if not os.path.isdir(p) else 0))
    return out


class IndexTest(unittest.TestCase):
    def test_build_mount_refuse_and_change(self):
        with harness.workdir() as (src, mnt):
            dirs = make_dataset(src)
            index = os.path.join(os.path.dirname(src), "ns.index")
            r = harness.run_tierfs("index", src, index)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("index written", r.stdout)
            self.assertIn("180 files", r.stdout)

            with harness.Mount(src, mnt, ["index=" + index]) as m:
                self.assertEqual(listing(mnt), listing(src))
                source = m.stats()["source"]
                self.assertEqual(source["lists"], 0)
                self.assertLessEqual(source["meta_ops"], dirs + 2)  # a stat per directory
                self.assertIn("index loaded", m.output())
                self.assertEqual(m.stats()["namespace"]["mapped_index"], 1)

            with harness.Mount(src, mnt, ["index=" + index, "index_check=none"]) as m:
                self.assertEqual(m.stats()["source"]["lists"], 0)
                self.assertEqual(listing(mnt), listing(src))

            # A changed directory is listed again and the index rewritten.
            with open(os.path.join(src, "class03", "added.jpg"), "wb") as f:
                f.write(b"new")
            os.unlink(os.path.join(src, "class04", "img000.jpg"))
            os.rename(os.path.join(src, "class05", "img001.jpg"),
                      os.path.join(src, "class05", "renamed.jpg"))
            with harness.Mount(src, mnt, ["index=" + index]) as m:
                self.assertEqual(listing(mnt), listing(src))
                self.assertTrue(os.path.exists(os.path.join(mnt, "class03", "added.jpg")))
                self.assertFalse(os.path.exists(os.path.join(mnt, "class04", "img000.jpg")))
                self.assertTrue(os.path.exists(os.path.join(mnt, "class05", "renamed.jpg")))
                self.assertEqual(m.stats()["source"]["lists"], 3)
                self.assertIn("3 of 7 directories changed", m.output())

            # A damaged index is refused with a message; the mount scans.
            with open(index, "r+b") as f:
                f.seek(9000)
                b = f.read(1)
                f.seek(9000)
                f.write(bytes([b[0] ^ 0xff]))
            with harness.Mount(src, mnt, ["index=" + index]) as m:
                self.assertEqual(listing(mnt), listing(src))
                self.assertIn("refused: it is corrupted (checksum)", m.output())
                self.assertIn("scanned, index written", m.output())
            r = harness.run_tierfs("index", src, index, "--check", "dirs")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("index loaded", r.stdout)

            # Another SOURCE's index is refused.
            other = os.path.join(os.path.dirname(src), "other")
            os.mkdir(other)
            with harness.Mount(other, mnt, ["index=" + index]) as m:
                self.assertEqual(os.listdir(mnt), [])
                self.assertIn("describes SOURCE", m.output())

    def test_auto_index_in_first_tier(self):
        with harness.workdir() as (src, mnt):
            make_dataset(src, classes=3, files=5)
            tier = os.path.join(os.path.dirname(src), "tier")
            os.mkdir(tier, 0o700)
            opts = ["index=auto", f"tier={tier}:64M"]
            with harness.Mount(src, mnt, opts) as m:
                self.assertIn("scanned, index written", m.output())
            self.assertTrue(os.path.exists(os.path.join(tier, "namespace.index")))
            with harness.Mount(src, mnt, opts) as m:
                self.assertIn("index loaded", m.output())
                self.assertEqual(m.stats()["source"]["lists"], 0)
                self.assertEqual(listing(mnt), listing(src))
            # A tier directory others can write is not trusted at all (neither
            # with chunks nor with the index): the mount is refused.
            os.chmod(tier, 0o777)
            r = harness.run_tierfs(src, mnt, "-o", ",".join(opts))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("is refused: group or others may write to it", r.stderr + r.stdout)

    def test_bad_index_options(self):
        with harness.workdir() as (src, mnt):
            r = harness.run_tierfs(src, mnt, "-f", "-o", "index=relative/path")
            self.assertEqual(r.returncode, 2)
            self.assertIn("not an absolute path", r.stderr)
            r = harness.run_tierfs(src, mnt, "-f", "-o", "index_check=sometimes")
            self.assertEqual(r.returncode, 2)
            self.assertIn("not one of full, dirs, none", r.stderr)
            r = harness.run_tierfs(src, mnt, "-f", "-o", "index=auto")
            self.assertEqual(r.returncode, 2)  # a combination the command line says alone
            self.assertIn("index=auto keeps the index in the first directory tier", r.stderr)
            r = harness.run_tierfs("index", src)
            self.assertEqual(r.returncode, 2)
            r = harness.run_tierfs("index", os.path.join(src, "missing"), "/tmp/x.index")
            self.assertEqual(r.returncode, 1)
            self.assertIn("No such file", r.stderr)

    def test_two_mounts_race_to_build_one_index(self):
        """Two nodes of a job (two mounts of one SOURCE behind a slow pfs-sim)
        start together on one shared index file: one scans, the other waits
        and loads what it wrote."""
        with harness.workdir() as (src, mnt):
            make_dataset(src, classes=8, files=40)
            base = os.path.dirname(src)
            pfs = harness.PfsSim(src, os.path.join(base, "pfs"), "meta_ms=5,entry_timeout=0,attr_timeout=0")
            try:
                index = os.path.join(base, "shared.index")
                mnts = [os.path.join(base, f"node{i}") for i in range(2)]
                for d in mnts:
                    os.mkdir(d)
                procs = [subprocess.Popen([harness.tierfs_bin(), pfs.mnt, d, "-f", "-o",
                                           f"index={index}"], stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True) for d in mnts]
                try:
                    for d in mnts:
                        harness.wait_for(lambda d=d: harness.is_mounted(d), timeout=60,
                                         what="the mount")
                    for d in mnts:
                        self.assertEqual(listing(d), listing(src))
                finally:
                    for d in mnts:
                        harness.force_unmount(d)
                    outs = [p.communicate(timeout=30)[0] for p in procs]
                built = [o for o in outs if "scanned, index written" in o]
                loaded = [o for o in outs if "index loaded" in o]
                self.assertEqual(len(built), 1, outs)
                self.assertEqual(len(loaded), 1, outs)
                self.assertFalse(os.path.exists(index + ".lock"))
            finally:
                pfs.close()


class ScanProgressTest(unittest.TestCase):
    """The scan of a slow SOURCE (pfs-sim, 150 ms per metadata operation)
    showed nothing on a terminal until its "scanned" line."""

    def test_the_scan_shows_progress_on_a_terminal_only(self):
        with harness.workdir() as (src, mnt):
            harness.make_files(src, 20, 100)
            pfs = harness.PfsSim(src, os.path.join(os.path.dirname(src), "pfs"), "meta_ms=150")
            try:
                master, slave = pty.openpty()
                proc = subprocess.Popen([harness.tierfs_bin(), pfs.mnt, mnt, "-f"],
                                        stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
                os.close(slave)
                said = b""
                deadline = time.monotonic() + 60
                while b"mounted " not in said and time.monotonic() < deadline:
                    if select.select([master], [], [], 1)[0]:
                        try:
                            said += os.read(master, 4096)
                        except OSError:
                            break
                harness.force_unmount(mnt)
                proc.wait(timeout=30)
                os.close(master)
                text = said.decode(errors="replace")
                self.assertIn("mounted ", text)
                self.assertRegex(text, r"\r\x1b\[Kscanning SOURCE: [0-9.]+ s, \d+ director(y|ies) "
                                       r"listed, \d+ entr(y|ies) \([0-9,]+/s\), [0-9,]+ metadata "
                                       r"operations")
                # Erased before the figures of the scan are said.
                self.assertRegex(text, r"\r\x1b\[Ktierfs: info: scanned")
                # On a pipe: no progress line, no escape sequences.
                with harness.Mount(pfs.mnt, mnt) as m:
                    out = m.output()
                self.assertNotIn("scanning SOURCE", out)
                self.assertNotIn("\x1b", out)
            finally:
                pfs.close()


if __name__ == "__main__":
    harness.main()
