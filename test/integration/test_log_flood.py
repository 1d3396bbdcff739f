"""A user cannot fill a root daemon's log: played as the attacker, a user
opens 20,000 times a file whose permission SOURCE cannot answer (removed
from SOURCE after the scan; perm_ttl=0.001, so SOURCE is asked again and
again). The
warning is written a few times, not 20,000 (sampling per call site), and
.tierfs/stats counts the lines left out (log.suppressed_lines). A log that
is a regular file stops at log_max, says so once, and counts the rest
(log.dropped_lines)."""
import os
import subprocess
import sys
import unittest

import harness

OPENS = 20000
WARNING = "could not be asked of SOURCE"

ATTACK = """
import os, sys
for _ in range(int(sys.argv[2])):
    try:
        os.close(os.open(sys.argv[1], os.O_RDONLY))
    except OSError:
        pass
"""


def setUpModule():
    global USER
    USER = harness.unprivileged_user()


def tearDownModule():
    harness.remove_made_users()


USER = None


class LogFlood(unittest.TestCase):
    def setUp(self):
        if USER is None:
            self.skipTest("needs root, useradd and setpriv")
        self.base, self.src, self.mnt = harness.shared_workdir("tierfs-flood-")
        for name in ("victim", "other"):
            with open(os.path.join(self.src, name), "wb") as f:
                f.write(b"x" * 4096)
            os.chmod(os.path.join(self.src, name), 0o644)
        self.mounts = []

    def tearDown(self):
        harness.tear_down(self.mounts, self.base)

    def attack(self, path, opens):
        r = harness.as_user(USER, sys.executable, "-c", ATTACK, path, str(opens), timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_user_opening_a_path_20000_times_writes_a_few_lines(self):
        m = harness.Mount(self.src, self.mnt,
                          ["allow_other", "ram=16M", "permissions=source", "perm_ttl=0.001"])
        self.mounts.append(m)
        os.unlink(os.path.join(self.src, "victim"))  # SOURCE cannot answer for it now
        before = m.stats()
        self.attack(os.path.join(self.mnt, "victim"), OPENS)
        asked = (m.stats()["permissions"]["asked_source"] -
                 before["permissions"]["asked_source"])
        self.assertGreater(asked, 1000, "the opens did not ask SOURCE again and again")
        said = m.output().count(WARNING)
        self.assertGreater(said, 0)
        self.assertLess(said, 100, "the warning was not sampled")
        suppressed = m.stats()["log"]["suppressed_lines"] - before["log"]["suppressed_lines"]
        self.assertEqual(suppressed, asked - said)

    def test_a_log_file_stops_at_log_max(self):
        m = harness.Mount(self.src, self.mnt,
                          ["allow_other", "ram=16M", "permissions=source", "perm_ttl=0.001",
                           "log_max=1K"])
        self.mounts.append(m)
        os.unlink(os.path.join(self.src, "victim"))
        # Many call sites' worth: the sampled warning's first lines pass the cap.
        self.attack(os.path.join(self.mnt, "victim"), 2000)
        out = m.output()
        self.assertLessEqual(len(out.encode()), 1024)
        self.assertIn("the log reached its cap (log_max=1024 bytes)", out)
        self.assertGreater(m.stats()["log"]["dropped_lines"], 0)


if __name__ == "__main__":
    harness.main()
