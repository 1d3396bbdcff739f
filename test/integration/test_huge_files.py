"""A user who can write into SOURCE cannot exhaust the daemon's memory with a
file that claims a huge size: a sparse file of 1 EiB (tmpfs allows it)
costs the daemon no per-chunk state (it is larger than any tier, so it is
read from SOURCE, not tiered), and its first and last bytes read correctly
through the mount."""
import os
import shutil
import tempfile
import unittest

import harness

EiB = 1 << 60


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class HugeFiles(unittest.TestCase):
    def setUp(self):
        parent = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.base = tempfile.mkdtemp(prefix="tierfs-huge-", dir=parent)
        self.src = os.path.join(self.base, "src")
        self.mnt = os.path.join(self.base, "mnt")
        os.mkdir(self.src)
        os.mkdir(self.mnt)
        self.huge = os.path.join(self.src, "huge.bin")
        with open(self.huge, "wb") as f:
            f.write(b"first")
        try:
            os.truncate(self.huge, EiB)
        except OSError as e:
            shutil.rmtree(self.base, ignore_errors=True)
            self.skipTest(f"this file system holds no 1 EiB sparse file ({e})")
        with open(self.huge, "r+b") as f:
            f.seek(EiB - 4)
            f.write(b"last")
        with open(os.path.join(self.src, "small.bin"), "wb") as f:
            f.write(b"s" * 100000)

    def tearDown(self):
        harness.force_unmount(self.mnt)
        shutil.rmtree(self.base, ignore_errors=True)

    def test_a_file_claiming_an_exbibyte_costs_no_memory_and_reads_right(self):
        with harness.Mount(self.src, self.mnt, ["ram=64M"]) as m:
            path = os.path.join(self.mnt, "huge.bin")
            self.assertEqual(os.stat(path).st_size, EiB)
            with open(path, "rb") as f:
                self.assertEqual(f.read(5), b"first")
                f.seek(EiB - 4)
                self.assertEqual(f.read(), b"last")
                f.seek(EiB // 2)
                self.assertEqual(f.read(4096), bytes(4096))  # a hole
            with open(os.path.join(self.mnt, "small.bin"), "rb") as f:
                self.assertEqual(f.read(), b"s" * 100000)
            stats = m.stats()
            self.assertEqual(stats["promotions"]["untiered_files"], 1)
            # A byte per 8 MiB chunk would be 128 GiB; the whole daemon stays
            # well under 200 MiB.
            self.assertLess(rss_kib(m.proc.pid), 200 * 1024)
            self.assertEqual(m.proc.poll(), None)


if __name__ == "__main__":
    harness.main()
