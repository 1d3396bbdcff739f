""".tierfs/changes: the mounted snapshot compared with SOURCE now, for a
daemon kept across jobs. Unchanged: all zero. A file rewritten with its
size, a file added to a directory and one removed are counted (changed
files, changed directories, missing), and the mount keeps serving meanwhile.
Only root and the control files' owner may read it."""
import json
import os
import sys
import time
import unittest

import harness

ZERO = {"changed_files": 0, "changed_dirs": 0, "missing": 0, "errors": 0}


def changes(mnt):
    with open(os.path.join(mnt, ".tierfs", "changes")) as f:
        text = f.read()
    assert text.endswith("\n") and text.count("\n") == 1, text
    return json.loads(text)


class ChangesTest(unittest.TestCase):
    def setUp(self):
        self.base, self.src, self.mnt = harness.shared_workdir("tierfs-changes-")
        self.files = harness.make_files(self.src, 40, 1000, subdirs=4)
        self.mounts = []

    def tearDown(self):
        harness.tear_down(self.mounts, self.base)

    def test_counts_what_changed_on_source(self):
        m = harness.Mount(self.src, self.mnt)
        self.mounts.append(m)
        first = changes(self.mnt)
        self.assertEqual({k: first[k] for k in ZERO}, ZERO)
        self.assertEqual((first["checked_files"], first["checked_dirs"]), (40, 5))
        self.assertGreaterEqual(first["seconds"], 0)
        time.sleep(0.05)
        rewritten = os.path.join(self.src, "d1/f00001")
        with open(rewritten, "r+b") as f:  # the same size, new bytes
            f.write(b"z" * 10)
        with open(os.path.join(self.src, "d2/added"), "wb") as f:
            f.write(b"new")
        os.unlink(os.path.join(self.src, "d3/f00003"))
        now = changes(self.mnt)
        self.assertEqual((now["changed_files"], now["changed_dirs"], now["missing"],
                          now["errors"]), (1, 2, 1, 0), now)
        self.assertIn("d1/f00001", m.output())  # the first changed paths are logged
        # Reads of unchanged files go on.
        self.assertEqual(harness.read_file(os.path.join(self.mnt, "d0/f00000")),
                         self.files["d0/f00000"])

    def test_only_root_and_the_owner_may_read_it(self):
        user = harness.unprivileged_user()
        if user is None:
            self.skipTest("needs root, useradd and setpriv")
        self.mounts.append(harness.Mount(self.src, self.mnt, ["allow_other"]))
        code = ("import errno, sys\ntry:\n    open(sys.argv[1]).read()\n    print('ok')\n"
                "except OSError as e:\n    print(errno.errorcode[e.errno])")
        path = os.path.join(self.mnt, ".tierfs", "changes")
        r = harness.as_user(user, sys.executable, "-c", code, path)
        self.assertEqual(r.stdout.decode().strip(), "EACCES", r.stderr)
        self.assertEqual({k: changes(self.mnt)[k] for k in ZERO}, ZERO)  # root's read works


def tearDownModule():
    harness.remove_made_users()


if __name__ == "__main__":
    harness.main()
