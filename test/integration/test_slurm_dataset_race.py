"""A job's user races the prolog of a root daemon (RUN_AS_USER=no) for
another user's files, and loses.

Three parties: root (the prolog, the daemon), the job's user (the
attacker) and a third user, whose home is 0700 with a world-readable
project below it (proj/ 0755, secret.txt 0644): reachable by root, not by
the attacker. The attacker's dataset is a symlink she owns, ds, that she
flips between her own directory and the third user's project:

- deterministically: the site's TIERFS_BIN is a wrapper that, when the
  prolog starts the job's daemon (after its check of the dataset, as the
  job's user), flips ds to the other user's project as the attacker, then
  runs tierfs;
- by racing: a process of hers flips ds every 2 ms while the prolog runs,
  many times over.

Either way the mount never shows the other user's secret: the daemon opens
the dataset once, as the job's user, and works from what it opened; a flip
that wins makes the job's own open fail (the job is cancelled, the node is
not drained: exit 0). On a prolog that handed the daemon the path string,
which root resolved again, the deterministic case mounted the other user's
project every time.

Skipped unless root with useradd and setpriv."""
import os
import shutil
import subprocess
import sys

import harness
import slurm_fixture
from slurm_fixture import JOB, SlurmFixture

# The wrapper that stands for the site's tierfs: the job's daemon (-f) gets
# its dataset flipped first, as the attacker, after the prolog's check.
FLIP_HOOK = """#!/bin/sh
case " $* " in
  *" -f "*) setpriv --reuid={uid} --regid={gid} --clear-groups -- ln -sfn {target} {link} ;;
esac
exec {tierfs} "$@"
"""

# The attacker's flipper: ds alternates between her dataset and the other
# user's project every 2 ms until the file `stop` appears.
FLIPPER = r"""
import os, sys, time
link, mine, theirs, stop = sys.argv[1:]
tmp = link + ".new"
n = 0
while not os.path.exists(stop):
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    os.symlink(theirs if n % 2 else mine, tmp)
    os.rename(tmp, link)
    n += 1
    time.sleep(0.002)
"""

SECRET = b"the third user's secret\n"


def tearDownModule():
    harness.remove_made_users()


class DatasetRace(SlurmFixture):
    def setUp(self):
        super().setUp()
        self.user = self.user_or_skip()
        self.third = harness.unprivileged_user("tierfs-t-third")
        if self.third is None:
            self.skipTest("cannot make a third user (tierfs-t-third) with useradd")
        # The third user's home, 0700, with a world-readable project in it.
        home = os.path.join(self.root, "home-third")
        self.proj = os.path.join(home, "proj")
        os.makedirs(self.proj)
        with open(os.path.join(self.proj, "secret.txt"), "wb") as f:
            f.write(SECRET)
        for path, mode in ((home, 0o700), (self.proj, 0o755),
                           (os.path.join(self.proj, "secret.txt"), 0o644)):
            os.chown(path, *self.third)
            os.chmod(path, mode)
        # The attacker's directory: her dataset (the fixture's files) and ds.
        self.mine = os.path.join(self.root, "attacker")
        os.makedirs(self.mine)
        shutil.copytree(self.dataset, os.path.join(self.mine, "data"))
        subprocess.run(["chown", "-R", f"{self.user[0]}:{self.user[1]}", self.mine], check=True)
        self.link = os.path.join(self.mine, "ds")
        harness.as_user(self.user, "ln", "-s", os.path.join(self.mine, "data"), self.link)
        self.write_config(RUN_AS_USER="no")
        self.job_env = {"TIERFS_DATASET": self.link, "SLURM_JOB_USER": harness.OTHER_USER,
                        "SLURM_JOB_UID": str(self.user[0]), "SLURM_JOB_GID": str(self.user[1])}

    def secret_shown(self):
        """What of the third user's project the job's mount shows ('' if nothing)."""
        if not harness.is_mounted(self.mnt):
            return ""
        names = os.listdir(self.mnt)
        if "secret.txt" in names:
            return f"the mount lists {names}: the third user's project"
        return ""

    def test_a_symlink_flipped_after_the_prologs_check_mounts_nothing_of_another_user(self):
        hook = os.path.join(self.root, "tierfs-hook")
        with open(hook, "w") as f:
            f.write(FLIP_HOOK.format(uid=self.user[0], gid=self.user[1], target=self.proj,
                                     link=self.link, tierfs=harness.tierfs_bin()))
        os.chmod(hook, 0o755)
        self.write_config(RUN_AS_USER="no", TIERFS_BIN=hook)
        r = self.prolog(**self.job_env)
        try:
            self.assertEqual(self.secret_shown(), "", r.stderr)
            self.assertFalse(harness.is_mounted(self.mnt), r.stderr)
            # The job's failure, not the node's: cancelled, and told why.
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(self.cancelled) as f:
                self.assertEqual(f.read().split(), [JOB])
            self.assertIn(f"cannot be read as uid {self.user[0]}", r.stderr)
        finally:
            self.epilog()
        self.assert_nothing_left()

    def test_a_symlink_flipping_every_2_ms_never_mounts_another_users_files(self):
        stop = os.path.join(self.root, "stop-flipping")
        flipper = subprocess.Popen(harness.user_command(
            self.user, sys.executable, "-c", FLIPPER, self.link, os.path.join(self.mine, "data"),
            self.proj, stop))
        outcomes = {"mounted": 0, "cancelled": 0}
        try:
            for attempt in range(24):
                if os.path.exists(self.cancelled):
                    os.unlink(self.cancelled)
                r = self.prolog(**self.job_env)
                try:
                    self.assertEqual(self.secret_shown(), "", f"run {attempt}: {r.stderr}")
                    self.assertEqual(r.returncode, 0, f"run {attempt}: {r.stderr}")
                    if harness.is_mounted(self.mnt):  # her own dataset, then
                        self.assertEqual(sorted(os.listdir(self.mnt)),
                                         sorted(os.listdir(self.dataset)))
                        outcomes["mounted"] += 1
                    else:
                        self.assertTrue(os.path.exists(self.cancelled), r.stderr)
                        outcomes["cancelled"] += 1
                finally:
                    self.assertEqual(self.epilog().returncode, 0)
        finally:
            open(stop, "w").close()
            flipper.wait(timeout=10)
        sys.stderr.write(f"race outcomes over 24 prologs: {outcomes}\n")
        self.assert_nothing_left()


if __name__ == "__main__":
    slurm_fixture.main()
