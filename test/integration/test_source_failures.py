"""A file that vanishes or shrinks on SOURCE after the scan fails its reads
with EIO (never short or wrong data); the daemon keeps serving the rest."""
import errno
import os
import unittest

import harness


class SourceFailureTest(unittest.TestCase):
    def test_vanished_and_shrunk_files_fail_with_eio(self):
        with harness.workdir() as (src, mnt):
            data = {}
            for i in range(20):
                data[f"f{i}"] = os.urandom(10_000 + i)
                with open(os.path.join(src, f"f{i}"), "wb") as f:
                    f.write(data[f"f{i}"])
            with harness.Mount(src, mnt) as m:
                os.unlink(os.path.join(src, "f3"))
                os.truncate(os.path.join(src, "f7"), 100)
                for name in ("f3", "f7"):
                    with self.assertRaises(OSError) as cm:
                        with open(os.path.join(mnt, name), "rb") as f:
                            f.read()
                    self.assertEqual(cm.exception.errno, errno.EIO, name)
                for name, content in data.items():
                    if name in ("f3", "f7"):
                        continue
                    with open(os.path.join(mnt, name), "rb") as f:
                        self.assertEqual(f.read(), content, name)
                self.assertTrue(m.alive())
                s = m.stats()
                self.assertGreaterEqual(s["source"]["failed_reads"], 2)
                self.assertGreaterEqual(s["requests"]["errors"], 2)
                self.assertIn("f3", m.output())  # the failure is logged with the file


if __name__ == "__main__":
    harness.main()
