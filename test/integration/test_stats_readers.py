"""What each reader of .tierfs/stats sees on a node cache (a root daemon
with allow_other shared by several users): the node's totals, and in "you"
her own data reads and bytes, never another user's.

The second user is harness.OTHER_USER (made with useradd if missing, deleted
afterwards); skipped unless root with useradd and setpriv.
"""
import json
import os
import tempfile
import unittest

import harness

USER = None  # (uid, gid) of the second user

ROOT_FILES = {"a/root0": 5000, "a/root1": 7000, "b/root2": 11000}
USER_FILES = {"b/user0": 13000, "c/user1": 17000}


def setUpModule():
    global USER
    USER = harness.unprivileged_user()


def tearDownModule():
    harness.remove_made_users()


class StatsForEachReader(unittest.TestCase):
    def setUp(self):
        if USER is None:
            self.skipTest(f"cannot make or use a second user ({harness.OTHER_USER})")
        self.base = tempfile.mkdtemp(prefix="tierfs-readers-")
        os.chmod(self.base, 0o755)
        self.src = os.path.join(self.base, "src")
        self.mnt = os.path.join(self.base, "mnt")
        for d in (self.src, self.mnt):
            os.mkdir(d, 0o755)
        for rel, size in {**ROOT_FILES, **USER_FILES}.items():
            path = os.path.join(self.src, rel)
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            with open(path, "wb") as f:
                f.write(os.urandom(size))
            os.chmod(path, 0o644)
        self.mounts = [harness.Mount(self.src, self.mnt, ["allow_other", "ram=16M",
                                                          "control_owner=any",
                                                          "permissions=source"])]

    def tearDown(self):
        harness.tear_down(self.mounts, self.base)

    def user_stats(self):
        r = harness.as_user(USER, "cat", os.path.join(self.mnt, ".tierfs", "stats"))
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode()

    def test_each_reader_sees_her_own_reads_in_you_and_nobody_elses(self):
        for rel in ROOT_FILES:
            harness.read_file(os.path.join(self.mnt, rel))
        for rel, size in USER_FILES.items():
            r = harness.as_user(USER, "cat", os.path.join(self.mnt, rel))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(r.stdout), size)

        text = self.user_stats()
        mine = json.loads(text)["you"]
        self.assertEqual(mine["uid"], USER[0])
        self.assertEqual(mine["read_bytes"], sum(USER_FILES.values()))
        self.assertGreaterEqual(mine["reads"], len(USER_FILES))
        self.assertTrue(mine["counted"])
        self.assertNotIn('"uid": 0', text, "root's figures in another user's stats")

        root = harness.mount_stats(self.mnt)
        self.assertEqual(root["you"]["uid"], 0)
        self.assertEqual(root["you"]["read_bytes"], sum(ROOT_FILES.values()))
        self.assertGreaterEqual(root["you"]["reads"], len(ROOT_FILES))
        # The node's totals are everyone's, and the same for both readers.
        total = sum(ROOT_FILES.values()) + sum(USER_FILES.values())
        self.assertEqual(root["requests"]["read_bytes"], total)
        self.assertEqual(json.loads(self.user_stats())["requests"]["read_bytes"], total)
        self.assertEqual(root["requests"]["reader_uids"], 2)

    def test_a_listing_of_the_control_directory_makes_no_one_s_figures(self):
        # ls -l (readdirplus) makes a snapshot for no reader; a cat after it
        # still gets the reader's own.
        harness.read_file(os.path.join(self.mnt, "a/root0"))
        r = harness.as_user(USER, "ls", "-l", os.path.join(self.mnt, ".tierfs"))
        self.assertEqual(r.returncode, 0, r.stderr)
        mine = json.loads(self.user_stats())["you"]
        self.assertEqual((mine["uid"], mine["reads"], mine["read_bytes"]), (USER[0], 0, 0))

    def test_declared_streams_are_not_named_after_their_declarer(self):
        # Every user may read the stats of this mount: a stream is its slot.
        order = os.path.join(self.mnt, ".tierfs", "order")
        lines = 'printf "//stream alice-secret\\nb/user0\\n" >> "$1"'
        r = harness.as_user(USER, "sh", "-c", lines, "sh", order)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(order, "a") as f:  # root's own stream, by process
            f.write("a/root0\n")
        text = self.user_stats()
        self.assertNotIn("alice-secret", text)
        self.assertNotIn("pid:", text)
        streams = json.loads(text)["prefetch"]["order"]["streams"]
        self.assertEqual(sorted(st["name"] for st in streams), ["stream-0", "stream-1"])


if __name__ == "__main__":
    harness.main()
