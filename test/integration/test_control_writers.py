"""The control files are checked as their writer. On a root daemon with
allow_other whose control files the job's user owns (control_owner=, as the
Slurm prolog mounts), that user (bob) writes paths of a third user (carol)
to .tierfs/stage and .tierfs/order:
- a file in carol's 0700 directory, a file of mode 0600, and a file whose
  ACL refuses bob on SOURCE (mode 0644 in the snapshot) are refused exactly
  as a name that does not exist (the same errno, the same reason), and
  .tierfs/stats shows no more about them than about the missing name;
- a directory given to stage counts only the files bob could open;
- root, writing the same paths, is accepted (the files are there).

Each is played twice: permissions=source (the default of such a mount: the
snapshot's mode bits, then SOURCE asked as bob) and permissions=snapshot
(the mode bits only; the ACL case then does not apply).

Skipped unless root with useradd, setpriv and setfacl."""
import os
import shutil
import subprocess
import sys
import unittest

import harness

BOB = CAROL = None  # (uid, gid)

# Run as a user: each argument "FILE:LINE", LINE written with its newline
# in one write to a fresh open of FILE; prints "ok" or the errno's name.
WRITE = r"""
import errno, os, sys
for arg in sys.argv[1:]:
    path, line = arg.split(":", 1)
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, line.encode() + b"\n")
        finally:
            os.close(fd)
        print("ok")
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))
"""

# What a line may change in a control file's group of .tierfs/stats (the
# rest are clocks and rates).
STAGE_FIGURES = ("requested_files", "requested_bytes", "queued_files", "valid_lines",
                 "rejected_lines")
ORDER_FIGURES = ("valid_lines", "rejected_lines", "declared")


def setUpModule():
    global BOB, CAROL
    if shutil.which("setfacl") is None:
        return
    BOB = harness.unprivileged_user()
    CAROL = harness.unprivileged_user("tierfs-t-third")


def tearDownModule():
    harness.remove_made_users()


class ControlWriters(unittest.TestCase):
    def setUp(self):
        if BOB is None or CAROL is None:
            self.skipTest("needs root, useradd, setpriv and setfacl (Debian package acl)")
        self.base, self.src, self.mnt = harness.shared_workdir("tierfs-writers-")
        self.sizes = {}
        # carol's home: 0700, a private file and a subdirectory.
        self.write("carol/salary.xlsx", 12345, CAROL)
        self.write("carol/sub/plans.txt", 777, CAROL)
        for d in ("carol", "carol/sub"):
            os.chown(os.path.join(self.src, d), *CAROL)
        os.chmod(os.path.join(self.src, "carol"), 0o700)
        # A shared directory: one file for all, carol's 0600 file, carol's
        # 0700 directory, and a file whose ACL refuses bob.
        self.write("shared/open.bin", 1000)
        self.write("shared/closed.bin", 2222, CAROL, mode=0o600)
        self.write("shared/private/hidden.bin", 3333, CAROL)
        os.chown(os.path.join(self.src, "shared/private"), *CAROL)
        os.chmod(os.path.join(self.src, "shared/private"), 0o700)
        self.write("shared/refused.bin", 4444)
        subprocess.run(["setfacl", "-m", f"u:{BOB[0]}:---",
                        os.path.join(self.src, "shared/refused.bin")], check=True, timeout=10)
        self.mounts = []

    def tearDown(self):
        harness.tear_down(self.mounts, self.base)

    def write(self, rel, size, owner=None, mode=0o644):
        path = os.path.join(self.src, rel)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        os.chmod(path, mode)
        if owner:
            os.chown(path, *owner)
        self.sizes[rel] = size

    def mount(self, *options, owner=None):
        owner = owner or f"control_owner={BOB[0]}:{BOB[1]}"
        m = harness.Mount(self.src, self.mnt, ["allow_other", "ram=16M", owner, *options])
        self.mounts.append(m)
        return m

    def write_as_bob(self, name, line):
        """bob writes LINE to .tierfs/NAME: "ok" or the errno's name."""
        path = os.path.join(self.mnt, ".tierfs", name)
        r = harness.as_user(BOB, sys.executable, "-c", WRITE, f"{path}:{line}")
        if r.returncode != 0:
            raise AssertionError(f"the writer failed: {r.stderr.decode(errors='replace')}")
        return r.stdout.decode().strip()

    def group(self, name):
        return harness.mount_stats(self.mnt)["prefetch"][name]

    def effect(self, name, line):
        """bob writes `line` to .tierfs/NAME: (outcome, what changed in the
        file's figures of the stats, the reason shown for the last line refused)."""
        figures = STAGE_FIGURES if name == "stage" else ORDER_FIGURES
        before = self.group(name)
        outcome = self.write_as_bob(name, line)
        after = self.group(name)
        changed = {k: after[k] - before[k] for k in figures if after[k] != before[k]}
        return outcome, changed, after.get("last_rejected", {}).get("reason")

    def assert_refused_as_missing(self, name, line):
        missing = line + ".nope"
        self.assertEqual(self.effect(name, line), self.effect(name, missing),
                         f"bob's '{line}' in .tierfs/{name} is not refused as a missing name")
        outcome, changed, _ = self.effect(name, line)
        self.assertEqual((outcome, changed), ("EINVAL", {"rejected_lines": 1}), line)

    def check_writers(self, acl_applies):
        unreachable = ["carol/salary.xlsx", "carol/sub/plans.txt", "carol/sub", "carol",
                       "shared/closed.bin", "shared/private/hidden.bin", "shared/private"]
        if acl_applies:
            unreachable.append("shared/refused.bin")
        for line in unreachable:
            self.assert_refused_as_missing("stage", line)
        for line in unreachable:
            self.assert_refused_as_missing("order", line)
        stage = self.group("stage")
        self.assertEqual((stage["requested_files"], stage["requested_bytes"]), (0, 0))
        # A directory stages only what bob could open.
        reachable = ["shared/open.bin"] + ([] if acl_applies else ["shared/refused.bin"])
        outcome, changed, _ = self.effect("stage", "shared")
        self.assertEqual(outcome, "ok")
        self.assertEqual((changed.get("requested_files"), changed.get("requested_bytes")),
                         (len(reachable), sum(self.sizes[r] for r in reachable)))
        # The whole mount: the same files, nothing of carol's.
        outcome = self.write_as_bob("stage", ".")
        self.assertEqual(outcome, "ok")
        stage = self.group("stage")
        self.assertEqual((stage["requested_files"], stage["requested_bytes"]),
                         (len(reachable), sum(self.sizes[r] for r in reachable)))
        # bob's own name for a file he may read is taken in the order too.
        self.assertEqual(self.write_as_bob("order", "shared/open.bin"), "ok")
        # Root writes the same paths: taken (they exist, and root reads all).
        with open(os.path.join(self.mnt, ".tierfs", "stage"), "w") as f:
            f.write("carol/salary.xlsx\n")
        self.assertEqual(self.group("stage")["requested_files"], len(reachable) + 1)

    def test_a_root_daemon_asking_source_refuses_what_the_writer_could_not_open(self):
        m = self.mount()
        self.assertEqual(m.stats()["permissions"]["decided_by"], "source")
        self.check_writers(acl_applies=True)

    def test_a_root_daemon_on_mode_bits_refuses_what_the_writer_could_not_open(self):
        m = self.mount("permissions=snapshot")
        self.assertNotIn("permissions", m.stats())
        self.check_writers(acl_applies=False)

    def read_as_bob(self, name):
        """bob reads .tierfs/NAME: "ok" or the errno's name."""
        code = ("import errno, sys\ntry:\n    open(sys.argv[1]).read()\n    print('ok')\n"
                "except OSError as e:\n    print(errno.errorcode[e.errno])")
        r = harness.as_user(BOB, sys.executable, "-c", code,
                            os.path.join(self.mnt, ".tierfs", name))
        return r.stdout.decode().strip()

    def test_control_owner_any_lets_every_user_hint_as_herself(self):
        m = self.mount(owner="control_owner=any")
        self.assertEqual(m.stats()["permissions"]["decided_by"], "source")
        # bob's lines are taken (stats show them) and checked as bob: what he
        # could not open is refused as a missing name, as for an owner.
        self.check_writers(acl_applies=True)
        self.assertGreaterEqual(self.group("order")["valid_lines"], 1)
        # The mount's mode, permission answers and the SOURCE check stay root's.
        self.assertEqual(self.write_as_bob("prefetch", "stage-in"), "EACCES")
        self.assertEqual(self.write_as_bob("revalidate", "1"), "EACCES")
        self.assertEqual(self.read_as_bob("changes"), "EACCES")
        self.assertEqual(m.stats()["prefetch"]["mode"], "on-access")

    def test_without_control_owner_another_user_may_not_hint(self):
        self.mount(owner="ram=16M")  # the control files are root's
        for name in ("order", "stage", "prefetch", "revalidate"):
            self.assertEqual(self.write_as_bob(name, "shared/open.bin"), "EACCES", name)
        self.assertEqual(self.read_as_bob("changes"), "EACCES")
        self.assertEqual(self.read_as_bob("stats")[:2], "ok")
        # `tierfs stage` says who may write the control files and what to do
        # (it said "writing ...: Permission denied").
        r = harness.as_user(BOB, harness.tierfs_bin(), "stage", self.mnt, "shared/open.bin")
        self.assertEqual(r.returncode, 1, r.stderr)
        said = " ".join(r.stderr.decode().split())
        self.assertIn("Permission denied: only root and uid 0 may write it", said)
        self.assertIn(f"mount with control_owner={BOB[0]}", said)

    def test_root_is_told_why_a_users_mount_shuts_it_out(self):
        """A FUSE mount lets no other user in, root neither, without
        allow_root: root's `tierfs stat` says so and what to do (it said
        "Permission denied")."""
        if os.stat("/dev/fuse").st_mode & 0o006 != 0o006:
            # A user's daemon needs /dev/fuse (0666 on Debian; some
            # containers make it root's only): opened up for this test.
            mode = os.stat("/dev/fuse").st_mode & 0o777
            os.chmod("/dev/fuse", 0o666)
            self.addCleanup(os.chmod, "/dev/fuse", mode)
        os.chown(self.mnt, *BOB)
        m = harness.Mount(self.src, self.mnt, ["ram=16M"], prefix=harness.user_command(BOB))
        self.mounts.append(m)
        r = subprocess.run([harness.tierfs_bin(), "stat", self.mnt], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        said = " ".join(r.stderr.split())
        self.assertIn(f"is a FUSE mount of uid {BOB[0]}, and FUSE lets no other user in, root "
                      "neither, unless it was mounted with -o allow_root", said)


if __name__ == "__main__":
    harness.main()
