"""The fixture of the tools/slurm tests: a temporary tree with a dataset, a
site config file pointing every directory into it, and the prolog and epilog
run as slurmd runs them (as root, no PATH, Slurm's variables).

Shared by test_slurm.py (the scripts' behaviour) and test_security_users.py
(what a second user on the node can make them do). Needs root.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROLOG = os.path.join(REPO, "tools", "slurm", "tierfs-prolog")
EPILOG = os.path.join(REPO, "tools", "slurm", "tierfs-epilog")
# Job ids of this process's own: the prolog names the daemon's cgroup after
# the job (tierfs/job_ID), and test modules that ctest runs side by side
# must not end each other's daemons in their epilogs.
JOB = str(8000000 + os.getpid() % 100000 * 4)
OTHER_JOB = str(int(JOB) + 1)
THIRD_JOB = str(int(JOB) + 2)


class SlurmFixture(unittest.TestCase):
    """No tests of its own: test classes derive from it."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="tierfs-slurm-")
        self.dataset = os.path.join(self.root, "lustre", "imagenet")
        self.files = harness.make_files(self.dataset, 40, 64 * 1024)
        self.mount_root = os.path.join(self.root, "mnt")
        self.scratch = os.path.join(self.root, "scratch")
        os.mkdir(self.scratch)
        self.mnt = os.path.join(self.mount_root, JOB)
        self.tier = os.path.join(self.scratch, "tierfs-slurm", JOB)
        self.state = os.path.join(self.root, "state", JOB)
        self.cancelled = os.path.join(self.root, "cancelled")
        scancel = os.path.join(self.root, "scancel")
        with open(scancel, "w") as f:
            f.write(f'#!/bin/sh\necho "$@" >> {self.cancelled}\n')
        os.chmod(scancel, 0o755)
        # scontrol records what it is asked (AdminComment); squeue knows no job.
        self.scontrol_calls = os.path.join(self.root, "scontrol-calls")
        fakes = {"scontrol": f'#!/bin/sh\nprintf "%s\\n" "$*" >> {self.scontrol_calls}\n',
                 "squeue": "#!/bin/sh\nexit 1\n"}
        for name, text in fakes.items():
            with open(os.path.join(self.root, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(self.root, name), 0o755)
        self.conf = os.path.join(self.root, "slurm.conf")
        self.write_config()

    def write_config(self, **settings):
        """The site config; `settings` (NAME=value) are added to or override the defaults."""
        conf = {"TIERFS_BIN": harness.tierfs_bin(), "MOUNT_ROOT": self.mount_root,
                "LOCAL_SCRATCH": self.scratch, "STATE_ROOT": os.path.dirname(self.state),
                "TIER_MIN_MB": 1, "RAM_MIN_MB": 1, "MOUNT_TIMEOUT": 20, "STEP_TIMEOUT": 3,
                "SCANCEL": os.path.join(self.root, "scancel"),
                "SCONTROL": os.path.join(self.root, "scontrol"),
                "SQUEUE": os.path.join(self.root, "squeue")}
        conf.update(settings)
        with open(self.conf, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in conf.items()))
        os.chmod(self.conf, 0o644)

    def tearDown(self):
        for pid in harness.tierfs_pids(self.root + "/"):
            os.kill(pid, signal.SIGKILL)
        for mnt in sorted(harness.mounts_below(self.root), reverse=True):  # innermost first
            harness.force_unmount(mnt)
        shutil.rmtree(self.root, ignore_errors=True)

    def env(self, job=JOB, **extra):
        """What slurmd gives a prolog/epilog (no PATH), plus the job's request."""
        env = {
            "SLURM_JOB_ID": job, "SLURM_JOBID": job, "SLURM_JOB_USER": "root",
            "SLURM_JOB_UID": "0", "SLURM_JOB_GID": "0", "SLURM_JOB_NODELIST": "node001",
            "SLURM_JOB_PARTITION": "gpu", "SLURM_JOB_ACCOUNT": "ml", "SLURM_CLUSTER_NAME": "test",
            "SLURMD_NODENAME": "node001", "TIERFS_SLURM_CONF": self.conf,
        }
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def run_script(self, script, job=JOB, **extra):
        context = "prolog_slurmd" if script == PROLOG else "epilog_slurmd"
        start = time.monotonic()
        r = subprocess.run([script], env=self.env(job, SLURM_SCRIPT_CONTEXT=context, **extra),
                           capture_output=True, text=True, timeout=60)
        r.seconds = time.monotonic() - start
        return r

    def prolog(self, job=JOB, **extra):
        extra.setdefault("TIERFS_DATASET", self.dataset)
        return self.run_script(PROLOG, job, **extra)

    def epilog(self, job=JOB, **extra):
        return self.run_script(EPILOG, job, **extra)

    def assert_nothing_left(self, *other_pids):
        """No trace of the job is left; other_pids: the test's own daemons in the tree."""
        self.assertFalse(harness.is_mounted(self.mnt), "the job's mount is still there")
        self.assertFalse(os.path.exists(self.tier), "the job's tier data is still there")
        self.assertFalse(os.path.exists(self.mnt), "the job's mount point is still there")
        self.assertFalse(os.path.exists(self.state), "the job's state is still there")
        daemons = set(harness.tierfs_pids(self.root + "/")) - set(other_pids)
        self.assertEqual(daemons, set(), "a tierfs daemon is still running")

    def daemon_pid(self):
        with open(os.path.join(self.state, "pid")) as f:
            return int(f.read())

    def user_or_skip(self):
        """The second user; the tree is opened to it (it must reach scratch/ and the dataset)."""
        user = harness.unprivileged_user()
        if user is None:
            self.skipTest(f"cannot make a second user ({harness.OTHER_USER}) with useradd")
        os.chmod(self.root, 0o755)
        return user


def main():
    """harness.main(), skipped (77) unless root: slurmd runs the scripts as root."""
    if os.geteuid() != 0:
        print("SKIPPED: the Slurm prolog/epilog run as root (slurmd's user); this is not root")
        raise SystemExit(harness.SKIP)
    harness.main()
