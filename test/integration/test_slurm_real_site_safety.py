"""Site safety under a real Slurm (test_slurm_real.py's cluster: a private
slurmctld, two slurmd, munged, the repository's prolog and epilog).

Played: a node whose PFS hangs (a FUSE "PFS" whose daemon is stopped)
with a site canary on it drains at the first job that asks for a dataset
there, with the canary's reason, and the next job sent to that node stays
pending instead of being cancelled too (before, every job was cancelled and
the node stayed up for the next). (The `--extra` glob is played by
test_slurm_site_safety.py: Debian 12's Slurm 22.05 has no `sbatch --extra`,
its prologs no SLURM_JOB_EXTRA.)

Skipped (77) as test_slurm_real.py is."""
import os
import signal
import unittest

import harness
import test_slurm_real as real

CLUSTER = None
NODE = "tfs-node2"


class PfsCheckCluster(real.Cluster):
    def write_site_config(self, node, cgroup):
        super().write_site_config(node, cgroup)
        with open(self.path(f"site-{node}.conf"), "a") as f:
            f.write(f"PFS_CHECK={self.path('pfs', 'canary')}\n")


def setUpModule():
    global CLUSTER
    CLUSTER = real.start_cluster(PfsCheckCluster)


def tearDownModule():
    if CLUSTER is not None:
        CLUSTER.close()


class SiteSafetyUnderSlurm(unittest.TestCase):
    def setUp(self):
        self.c = CLUSTER
        self.c.wait_idle()

    def test_a_hung_pfs_drains_the_node_at_the_first_job_and_no_second_job_lands(self):
        c = self.c
        src = c.path("pfs-src")
        harness.make_files(os.path.join(src, "data"), 4, 1024)
        with open(os.path.join(src, "canary"), "w") as f:
            f.write("ok\n")
        pfs = harness.PfsSim(src, c.path("pfs"), "meta_ms=0,allow_other")
        try:
            os.kill(pfs.proc.pid, signal.SIGSTOP)
            first = c.sbatch("-N1", "-w", NODE, f"--tierfs={c.path('pfs', 'data')}",
                             script="#!/bin/sh\necho RAN\n")
            self.assertEqual(first.returncode, 0, first.stderr)
            harness.wait_for(lambda: c.node_states().get(NODE, "").startswith("drain"),
                             timeout=90, what=f"{NODE} drained")
            second = c.sbatch("-N1", "-w", NODE, script="#!/bin/sh\necho RAN\n")
            self.assertEqual(second.returncode, 0, second.stderr)
            info = c.job(second.job)
            self.assertEqual(info.get("JobState"), "PENDING", info)
            with open(c.path(f"{NODE}.log")) as f:
                log = f.read()
            self.assertIn("the PFS canary PFS_CHECK=", log)
            c.run("scancel", str(first.job), str(second.job))
        finally:
            os.kill(pfs.proc.pid, signal.SIGCONT)
            harness.force_unmount(c.path("pfs"))
            pfs.proc.wait(timeout=20)
            c.run("scontrol", "update", f"nodename={NODE}", "state=resume")
        c.wait_idle(timeout=60)


if __name__ == "__main__":
    if real.why_not_here():
        print(f"SKIPPED: {real.why_not_here()}")
        raise SystemExit(harness.SKIP)
    harness.main()
