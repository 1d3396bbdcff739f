"""What a user reads in a terminal fits in 100 columns: `tierfs --help` and
the man page as man renders it at 100 columns, the mount's info lines,
`tierfs stat` (a number never split from its unit) and `stat --watch` on a
pipe; the man page's footer names the version --version gives."""
import os
import re
import shutil
import subprocess
import unittest

import harness

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
WIDTH = 100


def too_wide(text):
    return [f"{len(line)}: {line}" for line in text.splitlines() if len(line) > WIDTH]


# A number at a line's end whose unit or noun begins the next line ("1 / MiB").
SPLIT_NUMBER = re.compile(r"[0-9]\n\s*(B|KiB|MiB|GiB|TiB|s|ms|files?|director(y|ies))\b")


class Widths(unittest.TestCase):
    def test_help_fits_in_100_columns(self):
        r = subprocess.run([harness.tierfs_bin(), "--help"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(too_wide(r.stdout), [])
        # The log line says where a user's daemon logs too.
        self.assertIn("~/.local/state/tierfs for a user", " ".join(r.stdout.split()))

    def test_the_man_page_fits_in_100_columns(self):
        if shutil.which("man") is None:
            self.skipTest("no man here")
        env = dict(os.environ, MANWIDTH=str(WIDTH), MAN_KEEP_FORMATTING="")
        r = subprocess.run(["man", "-l", os.path.join(ROOT, "docs", "tierfs.1")],
                           capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(too_wide(re.sub(r".\x08", "", r.stdout)), [])

    def test_the_man_page_footer_names_this_version(self):
        r = subprocess.run([harness.tierfs_bin(), "--version"], capture_output=True, text=True,
                           timeout=30)
        version = r.stdout.split()[-1]
        with open(os.path.join(ROOT, "docs", "tierfs.1")) as f:
            th = next(line for line in f if line.startswith(".TH "))
        self.assertIn(f'"tierfs {version}"', th)

    def test_messages_name_what_the_mount_has(self):
        """Without ram= the passthrough line says nothing of a RAM tier ("the
        RAM tier's 0 MiB")."""
        with harness.workdir() as (src, mnt):
            harness.make_files(src, 20, 1000)
            tier = os.path.join(os.path.dirname(src), "tier")
            os.mkdir(tier, 0o700)
            with harness.Mount(src, mnt, [f"tier={tier}:100M"]) as m:
                said = m.output()
            self.assertNotIn("RAM tier", said)
            self.assertNotIn("dir0", said)  # the tier's path, as the user named it

    def test_the_mount_stat_and_watch_fit_in_100_columns(self):
        """The scan line was about 155 columns, the mounted line with why
        passthrough is off about 270, `stat --watch` on a pipe about 130, and
        stat split "files under 1 / MiB"."""
        with harness.workdir() as (src, mnt):
            harness.make_files(src, 30, 3000)
            tier = os.path.join(os.path.dirname(src), "tier")
            os.mkdir(tier, 0o700)
            with harness.Mount(src, mnt, ["ram=16M", f"tier={tier}:100M", "prefetch=order"]) as m:
                # The mount's own info lines (a tier's recovery line is the store's).
                info = "\n".join(l for l in m.output().splitlines()
                                 if l.startswith("tierfs: info:") and "': reused " not in l)
                self.assertIn("metadata operations on SOURCE for it", " ".join(info.split()))
                self.assertEqual(too_wide(info), [])
                self.assertIsNone(SPLIT_NUMBER.search(info), info)
                r = subprocess.run([harness.tierfs_bin(), "stat", mnt], capture_output=True,
                                   text=True, timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(too_wide(r.stdout), [])
                self.assertIsNone(SPLIT_NUMBER.search(r.stdout), r.stdout)
                subprocess.run([harness.tierfs_bin(), "hint", mnt, "-"], input="d0/f00000\n",
                               capture_output=True, text=True, timeout=30)
                r = subprocess.run([harness.tierfs_bin(), "stat", mnt, "--watch", "0.2",
                                    "--count", "2"], capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(too_wide(r.stdout), [])
                self.assertEqual(r.stdout.count("\nreads ") + r.stdout.startswith("reads "), 2)
                # The `tierfs hint` that wrote the order has ended: no pid names its stream.
                self.assertIn("orders of ended writers", r.stdout)
                self.assertNotIn("pid", r.stdout)


if __name__ == "__main__":
    harness.main()
