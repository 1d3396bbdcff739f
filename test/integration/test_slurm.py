"""tools/slurm: the prolog mounts the job's dataset, the epilog leaves nothing.

The scripts run as slurmd runs them: as root, with no PATH, with the
variables Slurm sets for a prolog/epilog, and a site config file pointing
every directory into a temporary tree. Skipped unless root.
"""
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROLOG = os.path.join(REPO, "tools", "slurm", "tierfs-prolog")
EPILOG = os.path.join(REPO, "tools", "slurm", "tierfs-epilog")
JOB = "8675309"


class SlurmScripts(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="tierfs-slurm-")
        self.dataset = os.path.join(self.root, "lustre", "imagenet")
        self.files = harness.make_files(self.dataset, 40, 64 * 1024)
        self.mount_root = os.path.join(self.root, "mnt")
        self.scratch = os.path.join(self.root, "scratch")
        os.mkdir(self.scratch)
        self.mnt = os.path.join(self.mount_root, JOB)
        self.tier = os.path.join(self.scratch, f"tierfs-{JOB}")
        self.state = os.path.join(self.root, "state", JOB)
        self.cancelled = os.path.join(self.root, "cancelled")
        scancel = os.path.join(self.root, "scancel")
        with open(scancel, "w") as f:
            f.write(f'#!/bin/sh\necho "$@" >> {self.cancelled}\n')
        os.chmod(scancel, 0o755)
        self.conf = os.path.join(self.root, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(f"TIERFS_BIN={harness.tierfs_bin()}\nMOUNT_ROOT={self.mount_root}\n"
                    f"LOCAL_SCRATCH={self.scratch}\nSTATE_ROOT={self.root}/state\n"
                    f"TIER_MIN_MB=1\nRAM_MIN_MB=1\nMOUNT_TIMEOUT=20\nSTEP_TIMEOUT=3\n"
                    f"SCANCEL={scancel}\n")
        os.chmod(self.conf, 0o644)

    def tearDown(self):
        for pid in harness.tierfs_pids(self.root + "/"):
            os.kill(pid, signal.SIGKILL)
        for dirpath in (self.mnt, os.path.join(self.mount_root, "custom")):
            harness.force_unmount(dirpath)
        shutil.rmtree(self.root, ignore_errors=True)

    def env(self, **extra):
        """What slurmd gives a prolog/epilog (no PATH), plus the job's request."""
        env = {
            "SLURM_JOB_ID": JOB, "SLURM_JOBID": JOB, "SLURM_JOB_USER": "root",
            "SLURM_JOB_UID": "0", "SLURM_JOB_GID": "0", "SLURM_JOB_NODELIST": "node001",
            "SLURM_JOB_PARTITION": "gpu", "SLURM_JOB_ACCOUNT": "ml", "SLURM_CLUSTER_NAME": "test",
            "SLURMD_NODENAME": "node001", "TIERFS_SLURM_CONF": self.conf,
        }
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def run_script(self, script, **extra):
        context = "prolog_slurmd" if script == PROLOG else "epilog_slurmd"
        start = time.monotonic()
        r = subprocess.run([script], env=self.env(SLURM_SCRIPT_CONTEXT=context, **extra),
                           capture_output=True, text=True, timeout=60)
        r.seconds = time.monotonic() - start
        return r

    def prolog(self, **extra):
        extra.setdefault("TIERFS_DATASET", self.dataset)
        return self.run_script(PROLOG, **extra)

    def epilog(self):
        return self.run_script(EPILOG)

    def assert_nothing_left(self):
        self.assertFalse(harness.is_mounted(self.mnt), "the job's mount is still there")
        self.assertFalse(os.path.exists(self.tier), "the job's tier data is still there")
        self.assertFalse(os.path.exists(self.mnt), "the job's mount point is still there")
        self.assertFalse(os.path.exists(self.state), "the job's state is still there")
        self.assertEqual(harness.tierfs_pids(self.root + "/"), [], "a tierfs daemon is still running")

    def daemon_pid(self):
        with open(os.path.join(self.state, "pid")) as f:
            return int(f.read())

    def test_prolog_mounts_with_sized_tiers_then_epilog_clears_everything(self):
        r = self.prolog(TIERFS_OPTIONS="promote_threads=2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"mounted {self.dataset} at {self.mnt}", r.stderr)
        self.assertTrue(harness.is_mounted(self.mnt))
        for rel, data in list(self.files.items())[:10]:
            self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), data)
        stats = harness.Mount.stats(type("M", (), {"mnt": self.mnt})())
        tiers = {t["kind"]: t for t in stats["tiers"]}
        self.assertEqual(tiers["directory"]["path"], self.tier)
        # The directory tier is about 90% of the scratch space free at job start.
        st = os.statvfs(self.scratch)
        free = st.f_bavail * st.f_frsize
        self.assertAlmostEqual(tiers["directory"]["budget"] / free, 0.9, delta=0.05)
        with open("/proc/meminfo") as f:
            avail = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:"))
        self.assertAlmostEqual(tiers["memory"]["budget"] / avail, 0.25, delta=0.1)
        self.assertEqual(stats["promotions"]["threads"], 2)
        self.assertTrue(os.path.isdir(self.tier))

        r = self.epilog()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_nothing_left()
        self.assertLess(r.seconds, 10)

    def test_epilog_after_sigkill_clears_the_stale_mount_and_the_tier(self):
        r = self.prolog()
        self.assertEqual(r.returncode, 0, r.stderr)
        for rel in list(self.files)[:20]:
            harness.read_file(os.path.join(self.mnt, rel))
        os.kill(self.daemon_pid(), signal.SIGKILL)
        harness.wait_for(lambda: harness.tierfs_pids(self.root + "/") == [], what="the daemon's death")

        def stale():  # ECONNABORTED while the kernel tears the connection down
            try:
                os.listdir(self.mnt)
            except OSError as e:
                return e.errno == errno.ENOTCONN
            return False
        harness.wait_for(stale, timeout=10, what="ENOTCONN from the dead daemon's mount")
        r = self.epilog()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_nothing_left()

    def test_epilog_with_a_file_still_open_detaches_the_busy_mount(self):
        r = self.prolog()
        self.assertEqual(r.returncode, 0, r.stderr)
        held = open(os.path.join(self.mnt, next(iter(self.files))), "rb")
        try:
            r = self.epilog()
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assert_nothing_left()
        finally:
            held.close()

    def test_epilog_kills_a_daemon_that_does_not_answer(self):
        r = self.prolog()
        self.assertEqual(r.returncode, 0, r.stderr)
        os.kill(self.daemon_pid(), signal.SIGSTOP)  # hung: it answers nothing, exits never
        r = self.epilog()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("SIGKILL", r.stderr)
        self.assert_nothing_left()
        self.assertLess(r.seconds, 20)

    def test_prolog_with_a_missing_dataset_fails_clearly_and_mounts_nothing(self):
        missing = os.path.join(self.root, "lustre", "no-such-dataset")
        r = self.prolog(TIERFS_DATASET=missing)
        self.assertEqual(r.returncode, 0, r.stderr)  # the node is fine: the job is cancelled
        self.assertIn(f"dataset '{missing}' does not exist", r.stderr)
        with open(self.cancelled) as f:
            self.assertEqual(f.read().split(), [JOB])
        self.assert_nothing_left()
        self.assertEqual(self.epilog().returncode, 0)

    def test_prolog_with_a_file_as_dataset_drains_when_configured_to(self):
        a_file = os.path.join(self.dataset, next(iter(self.files)))
        with open(self.conf, "a") as f:
            f.write("USER_ERROR=drain\n")
        r = self.prolog(TIERFS_DATASET=a_file)
        self.assertEqual(r.returncode, 1)
        self.assertIn("is not a directory", r.stderr)
        self.assertFalse(os.path.exists(self.cancelled))
        self.assert_nothing_left()

    def test_prolog_with_options_tierfs_refuses_leaves_nothing(self):
        r = self.prolog(TIERFS_OPTIONS="no_such_option=1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("unknown option 'no_such_option=1'", r.stderr)
        self.assertIn("tierfs refused the options", r.stderr)
        self.assert_nothing_left()

    def test_prolog_refuses_a_mount_point_outside_the_mount_root(self):
        r = self.prolog(TIERFS_MOUNT="../../etc")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("is not a directory directly below", r.stderr)
        self.assert_nothing_left()

    def test_custom_mount_name_and_spank_variables(self):
        custom = os.path.join(self.mount_root, "custom")
        r = self.prolog(TIERFS_DATASET=None, SPANK_TIERFS_DATASET=self.dataset,
                        SPANK_TIERFS_MOUNT="custom", SPANK_TIERFS_OPTIONS="ram=64M,tier_reset")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(harness.is_mounted(custom))
        rel, data = next(iter(self.files.items()))
        self.assertEqual(harness.read_file(os.path.join(custom, rel)), data)
        r = self.epilog()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(harness.is_mounted(custom))
        self.assertFalse(os.path.exists(custom))
        self.assert_nothing_left()

    def test_dataset_from_sbatch_extra(self):
        r = self.prolog(TIERFS_DATASET=None, SLURM_JOB_EXTRA=f"rack=3,tierfs={self.dataset}")
        self.assertEqual(r.returncode, 0, r.stderr)
        rel, data = next(iter(self.files.items()))
        self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), data)
        self.assertEqual(self.epilog().returncode, 0)
        self.assert_nothing_left()

    def test_a_job_without_a_dataset_is_left_alone(self):
        r = self.prolog(TIERFS_DATASET=None)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertFalse(os.path.exists(self.mount_root))
        r = self.epilog()
        self.assertEqual((r.returncode, r.stderr), (0, ""))


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIPPED: the Slurm prolog/epilog run as root (slurmd's user); this is not root")
        sys.exit(harness.SKIP)
    harness.main()
