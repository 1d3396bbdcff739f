"""tools/bench/sweep --quick end to end (the real Slurm prolog and epilog,
as root, over 200 files of ~20 KB behind pfs-sim; both contenders, every
scenario; under 2 minutes), so the node cache benchmark cannot rot and the
node cache keeps its promise in the issue 41 scenario: jobs one after
another on one node read the dataset from the PFS once in all (x1.05),
where per-job mounts read it once per job; the caches never hold more than
the node's budgets; no read fails; nothing is left mounted or running and
the second user made for the run is gone.

Skipped (exit 77) unless root (slurmd runs the scripts as root), with FUSE,
the tools built, setpriv and useradd. A tierfs that refuses the node
cache's daemon options (idle_exit, control_owner=any) fails here, loudly."""
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import unittest

import mounts  # test/bench/mounts.py: --bin-dir/--source-dir

SKIP = 77
ARGS = None
JOBS = 3  # sweep --quick's sequential jobs
USER = "tierfs-t-sweep"  # the second user sweep makes (benchlib/sweep_site.py)


def skip_reason():
    if os.geteuid() != 0:
        return "the Slurm prolog and epilog run as root; this is not root"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK) or shutil.which("fusermount3") is None:
        return "/dev/fuse or fusermount3 is missing"
    for tool in ("pfs-sim", "tierfs", "mkdataset", "tierfs-bench"):
        if not os.access(os.path.join(ARGS.bin_dir, tool), os.X_OK):
            return f"{tool} is not built"
    for tool in ("setpriv", "useradd", "userdel", "flock"):
        if shutil.which(tool) is None:
            return f"{tool} is missing"
    return ""


def sweep(*argv, timeout=200):
    script = os.path.join(ARGS.source_dir, "tools", "bench", "sweep")
    return subprocess.run(["/usr/bin/python3", script, "--bin-dir", ARGS.bin_dir, *argv],
                          capture_output=True, text=True, timeout=timeout)


def user_exists():
    try:
        pwd.getpwnam(USER)
        return True
    except KeyError:
        return False


class SweepSmoke(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)
        cls.user_before = user_exists()
        cls.tmp = tempfile.TemporaryDirectory(prefix="sweep-smoke-", dir="/var/tmp")
        cls.work = cls.tmp.name
        cls.proc = sweep("--quick", "--work", cls.work)
        print(cls.proc.stdout[-5000:], cls.proc.stderr[-3000:], flush=True)
        try:
            with open(os.path.join(cls.work, "results", "sweep.json")) as f:
                cls.doc = json.load(f)
        except (OSError, ValueError):
            cls.doc = {}
        cls.sc = cls.doc.get("scenarios", {})

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "tmp"):
            cls.tmp.cleanup()

    def result(self, scenario, contender):
        r = self.sc.get(scenario, {}).get(contender)
        self.assertIsNotNone(r, f"{scenario}/{contender} missing from sweep.json; failures: "
                             f"{self.doc.get('failures')}")
        return r

    def test_exits_zero_and_writes_results(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-2000:])
        self.assertEqual(self.doc.get("failures"), [], "no prolog, epilog or reader failed")
        self.assertTrue(os.path.exists(os.path.join(self.work, "results", "results.md")))
        for key in ("command", "commit", "machine", "pfs_params", "figures"):
            self.assertIn(key, self.doc)

    def test_figures_of_every_scenario_and_contender(self):
        for contender in ("baseline", "node-cache"):
            with self.subTest(contender=contender):
                seq = self.result("sequential", contender)
                self.assertEqual(len(seq["first_epoch_s"]), JOBS)
                self.assertIsNotNone(seq["second_job_vs_warm"])
                side = self.result("side-by-side", contender)
                self.assertEqual(len(side["first_vs_direct"]), 4)
                self.assertGreater(side["rss_bytes"], 0, "the daemons' resident memory")
                budget = self.result("budget", contender)
                self.assertEqual(len(budget["jobs"]), 6, "jobs a b c a b c")
        self.assertEqual(len(self.result("side-by-side", "direct")["epoch_s"]), 4)

    def test_every_file_read_without_error(self):
        size = self.doc["datasets"]["a"]["bytes"]
        for scenario, by in self.sc.items():
            for contender, r in by.items():
                with self.subTest(scenario=scenario, contender=contender):
                    self.assertEqual(r["errors"], 0)
                    for job in r.get("jobs", []):
                        epochs = len(job["epoch_s"])
                        self.assertEqual(job["files"], 200 * epochs, f"job {job['job']}")
                        if job["dataset"] == "a":
                            self.assertEqual(job["bytes"], size * epochs, f"job {job['job']}")

    def test_per_job_mounts_read_the_pfs_once_per_job(self):
        seq = self.result("sequential", "baseline")
        self.assertGreaterEqual(seq["pfs_x"], JOBS * 0.95, "pfs-sim counts every job's reads")

    def test_node_cache_reads_the_pfs_once_across_jobs(self):
        seq = self.result("sequential", "node-cache")
        self.assertLessEqual(seq["pfs_x"], 1.05, f"{JOBS} jobs one after another read "
                             f"{seq['pfs_x']:.2f}x the dataset from the PFS")

    def test_node_cache_stays_within_its_budgets(self):
        budget = self.result("budget", "node-cache")
        self.assertAlmostEqual(budget["datasets_x_budget"], 2.0, delta=0.3)
        self.assertTrue(budget["within_budget"], [c for c in budget["checks"] if not c["ok"]])
        self.assertTrue(budget["stopped_for_room"], "a cache no job used gave room")

    def test_nothing_left_behind(self):
        with open("/proc/self/mountinfo") as f:
            left = [line.split()[4] for line in f if self.work in line]
        self.assertEqual(left, [], "mounts left behind")
        daemons = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if self.work.encode() in f.read():
                        daemons.append(pid)
            except OSError:
                pass
        self.assertEqual(daemons, [], "processes of the run left running")
        self.assertEqual(user_exists(), self.user_before, f"the user {USER} made is removed")


class SweepUsage(unittest.TestCase):
    def test_bad_arguments_exit_2(self):
        proc = sweep("--scenarios", "sequential,nonsense", timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("unknown scenarios ['nonsense']", proc.stderr)
        proc = sweep("--jobs", "1", timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)


def main():
    global ARGS
    ARGS = mounts.parse_args()
    result = unittest.main(argv=[sys.argv[0]], exit=False, verbosity=2).result
    for _, reason in result.skipped:  # a skip in setUpClass is not printed by the runner
        print(f"SKIPPED: {reason}")
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(SKIP if result.skipped and len(result.skipped) >= result.testsRun - 1 else 0)


if __name__ == "__main__":
    main()
