"""The node cache: one root daemon per dataset and node, shared by the jobs
of every user that read the dataset there and kept between them.

The prolog and epilog run as slurmd runs them (slurm_fixture), for jobs of
root and of a second user: the second job attaches to the first one's
daemon (same pid, nothing read from SOURCE again); the second user is
refused a file an ACL denies her; one job's epilog leaves another's reads
and the daemon alone; a daemon killed between jobs is started again by the
next job, which is served from its recovered directory tier; a user
cannot signal the daemon; three datasets over a budget that holds one and
a half take turns, the least recently used giving room first; a file
rewritten on SOURCE between jobs is read as it is now.

Before the node cache, each of these jobs mounted a daemon of its own:
the "same daemon" checks fail there. Needs root, useradd and setfacl."""
import os
import shutil
import signal
import subprocess
import time

import harness
import slurm_fixture
from slurm_fixture import JOB, OTHER_JOB, THIRD_JOB, SlurmFixture

USER = None


def setUpModule():
    global USER
    USER = harness.unprivileged_user()


def tearDownModule():
    harness.remove_made_users()


class NodeCache(SlurmFixture):
    def setUp(self):
        super().setUp()
        if USER is None:
            self.skipTest(f"cannot make a second user ({harness.OTHER_USER}) with useradd")
        self.user_or_skip()
        self.uid, self.gid = USER
        os.chmod(self.scratch, 0o755)
        self.node_root = os.path.join(self.root, "node")
        self.node_config()

    def node_config(self, **settings):
        conf = dict(NODE_CACHE="yes", NODE_CACHE_DATASETS=os.path.join(self.root, "lustre"),
                    NODE_CACHE_ROOT=self.node_root, NODE_CACHE_RAM_MB=64, NODE_CACHE_TIER_MB=64,
                    NODE_CACHE_IDLE=600)
        conf.update(settings)
        self.write_config(**conf)

    def tearDown(self):
        for d in os.listdir(self.node_root) if os.path.isdir(self.node_root) else ():
            mnt = os.path.join(self.node_root, d, "mnt")
            if harness.is_mounted(mnt):
                harness.force_unmount(mnt)
        super().tearDown()

    def user_job(self, **extra):
        return dict({"SLURM_JOB_USER": harness.OTHER_USER, "SLURM_JOB_UID": str(self.uid),
                     "SLURM_JOB_GID": str(self.gid)}, **extra)

    def job_mnt(self, job):
        return os.path.join(self.mount_root, job)

    def caches(self):
        """{key: pid} of the node caches whose daemon runs."""
        out = {}
        for key in os.listdir(self.node_root):
            pid_file = os.path.join(self.node_root, key, "pid")
            if os.path.exists(pid_file):
                with open(pid_file) as f:
                    pid = int(f.read())
                if os.path.exists(f"/proc/{pid}"):
                    out[key] = pid
        return out

    def started(self, r):
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(self.cancelled), r.stderr)

    def source_bytes(self, key):
        stats = harness.mount_stats(os.path.join(self.node_root, key, "mnt"))
        return stats["source"]["read_bytes"]

    def read_all(self, mnt, user=None):
        for rel, data in self.files.items():
            path = os.path.join(mnt, rel)
            if user:
                got = harness.as_user(user, "cat", path).stdout
            else:
                got = harness.read_file(path)
            self.assertEqual(got, data, rel)

    # ---- jobs one after another, side by side ----

    def test_a_second_users_job_attaches_to_the_first_jobs_cache(self):
        self.started(self.prolog())
        [(key, pid)] = self.caches().items()
        self.read_all(self.job_mnt(JOB))
        first = self.source_bytes(key)
        self.assertGreaterEqual(first, sum(len(d) for d in self.files.values()))
        # Another user's job beside it: the same daemon, nothing read again.
        self.started(self.prolog(OTHER_JOB, **self.user_job()))
        self.assertEqual(self.caches(), {key: pid}, "a second daemon for the same dataset")
        self.read_all(self.job_mnt(OTHER_JOB), USER)
        self.assertEqual(self.source_bytes(key), first, "the second job read SOURCE again")
        # Job A's epilog while B reads: B's mount and the daemon stay.
        self.assertEqual(self.epilog().returncode, 0)
        self.assertFalse(harness.is_mounted(self.job_mnt(JOB)))
        self.assertEqual(self.caches(), {key: pid})
        self.read_all(self.job_mnt(OTHER_JOB), USER)
        self.assertEqual(self.epilog(OTHER_JOB, **self.user_job()).returncode, 0)
        self.assertEqual(self.caches(), {key: pid}, "the cache outlives its jobs")
        # A later job, one after another.
        self.started(self.prolog(THIRD_JOB, **self.user_job()))
        self.assertEqual(self.caches(), {key: pid})
        self.read_all(self.job_mnt(THIRD_JOB), USER)
        self.assertEqual(self.source_bytes(key), first)
        self.assertEqual(self.epilog(THIRD_JOB, **self.user_job()).returncode, 0)

    def test_a_file_an_acl_denies_the_second_user_is_refused_to_her(self):
        rel = sorted(self.files)[0]
        subprocess.run(["setfacl", "-m", f"u:{self.uid}:---", os.path.join(self.dataset, rel)],
                       check=True, timeout=30)
        self.started(self.prolog())
        self.read_all(self.job_mnt(JOB))  # root's job promotes everything
        self.started(self.prolog(OTHER_JOB, **self.user_job()))
        r = harness.as_user(USER, "cat", os.path.join(self.job_mnt(OTHER_JOB), rel))
        self.assertNotEqual(r.returncode, 0, "the cached file was served to a user SOURCE refuses")
        self.assertIn(b"Permission denied", r.stderr)
        other = sorted(self.files)[1]
        r = harness.as_user(USER, "cat", os.path.join(self.job_mnt(OTHER_JOB), other))
        self.assertEqual(r.stdout, self.files[other])

    def test_a_user_cannot_signal_or_trace_the_node_daemon(self):
        self.started(self.prolog(**self.user_job()))
        [(key, pid)] = self.caches().items()
        for sig in ("TERM", "KILL", "STOP"):
            r = harness.as_user(USER, "kill", f"-{sig}", str(pid))
            self.assertNotEqual(r.returncode, 0, f"her kill -{sig} was taken")
        r = harness.as_user(USER, "/usr/bin/python3", "-c", (  # PTRACE_ATTACH
            "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
            f"print('ATTACHED' if libc.ptrace(16, {pid}, 0, 0) == 0 else "
            "'REFUSED %d' % ctypes.get_errno())"))
        self.assertIn(b"REFUSED 1", r.stdout, f"she attached to the daemon: {r.stderr}")  # EPERM
        self.assertEqual(self.caches(), {key: pid})

    def test_a_job_that_pauses_past_the_idle_time_keeps_its_cache_which_leaves_after_it(self):
        self.node_config(NODE_CACHE_IDLE=2, NODE_CACHE_RAM_MB=0)
        self.started(self.prolog(**self.user_job()))
        [(key, pid)] = self.caches().items()
        time.sleep(5)  # start-up of a training job: longer than the idle time, nothing read
        self.assertEqual(self.caches(), {key: pid}, "the cache left while a job was attached")
        self.read_all(self.job_mnt(JOB), USER)
        self.assertEqual(self.epilog(**self.user_job()).returncode, 0)
        harness.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), timeout=15,
                         what="the unused cache to leave after NODE_CACHE_IDLE")
        self.assertFalse(harness.is_mounted(os.path.join(self.node_root, key, "mnt")))
        tier = os.path.join(self.scratch, "tierfs-node", key)
        self.assertTrue(os.path.isdir(tier), "the directory tier went with the daemon")
        # The next job starts it again from the tier it kept.
        self.started(self.prolog(OTHER_JOB))
        self.read_all(self.job_mnt(OTHER_JOB))
        self.assertEqual(self.source_bytes(key), 0, "the kept tier was not used")
        self.assertEqual(self.epilog(OTHER_JOB).returncode, 0)

    def test_a_users_stage_requests_fill_no_more_than_her_share(self):
        self.node_config(NODE_CACHE_RAM_MB=0, NODE_CACHE_TIER_MB=4, NODE_CACHE_USER_SHARE=25)
        self.started(self.prolog(**self.user_job()))
        [(key, pid)] = self.caches().items()
        names = "\n".join(sorted(self.files)) + "\n"
        r = harness.as_user(USER, "sh", "-c", 'printf "%s" "$1" > "$2"', "sh", names,
                            os.path.join(self.job_mnt(JOB), ".tierfs", "stage"))
        self.assertEqual(r.returncode, 0, r.stderr)
        stats = harness.mount_stats(os.path.join(self.node_root, key, "mnt"))
        budget = sum(t["budget"] for t in stats["tiers"])
        stage = stats["prefetch"]["stage"] if "stage" in stats["prefetch"] else stats["stage"]
        self.assertGreater(stage["over_share_files"], 0, stage)
        self.assertLessEqual(stage["requested_bytes"], budget * 25 // 100)
        self.assertEqual(self.epilog(**self.user_job()).returncode, 0)

    def test_a_datasets_long_scan_keeps_no_other_datasets_job_waiting(self):
        # Dataset A behind a slow PFS (a scan of seconds); B's job starts
        # while A's prolog scans, and is mounted before A's prolog ends.
        src = os.path.join(self.root, "slow-src")
        harness.make_files(src, 400, 1024)
        slow = os.path.join(self.root, "slow")
        pfs = harness.PfsSim(src, slow, "meta_ms=20,meta_parallel=1,allow_other")
        self.addCleanup(lambda: (harness.force_unmount(slow), pfs.proc.wait(timeout=20)))
        self.node_config(NODE_CACHE_DATASETS=f'"{os.path.join(self.root, "lustre")} {slow}"')
        env = self.env(SLURM_SCRIPT_CONTEXT="prolog_slurmd", TIERFS_DATASET=slow)
        first = subprocess.Popen([slurm_fixture.PROLOG], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            def scanning():
                if first.poll() is not None:
                    self.fail(f"A's prolog ended at once: {first.communicate()[1]}")
                for pid in harness.tierfs_pids(slow):  # `tierfs index SLOW FILE` runs
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if f.read().split(b"\0")[1:3] == [b"index", slow.encode()]:
                            return True
                return False
            harness.wait_for(scanning, what="A's prolog scanning its dataset")
            time.sleep(0.5)  # A scanning
            r = self.prolog(OTHER_JOB)  # dataset B (the fixture's)
            self.started(r)
            self.assertIsNone(first.poll(), "A's scan ended first: the test shows nothing")
            self.read_all(self.job_mnt(OTHER_JOB))
        finally:
            out, err = first.communicate(timeout=120)
        self.assertEqual(first.returncode, 0, err)
        self.assertEqual(len(self.caches()), 2)
        for job in (JOB, OTHER_JOB):
            self.assertEqual(self.epilog(job).returncode, 0)

    # ---- failures ----

    def test_a_daemon_killed_between_jobs_is_started_again_from_its_tier(self):
        self.node_config(NODE_CACHE_RAM_MB=0)  # the directory tier holds it all
        self.started(self.prolog())
        [(key, pid)] = self.caches().items()
        self.read_all(self.job_mnt(JOB))
        self.assertEqual(self.epilog().returncode, 0)
        os.kill(pid, signal.SIGKILL)
        harness.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), what="the daemon gone")
        self.started(self.prolog(OTHER_JOB, **self.user_job()))
        [(key2, pid2)] = self.caches().items()
        self.assertEqual(key2, key)
        self.assertNotEqual(pid2, pid)
        self.read_all(self.job_mnt(OTHER_JOB), USER)
        self.assertEqual(self.source_bytes(key), 0, "the recovered tier was not used")

    def test_a_file_rewritten_on_source_between_jobs_is_read_fresh(self):
        self.started(self.prolog())
        [(key, pid)] = self.caches().items()
        self.read_all(self.job_mnt(JOB))
        self.assertEqual(self.epilog().returncode, 0)
        rel = sorted(self.files)[0]
        fresh = os.urandom(len(self.files[rel]) + 4096)
        with open(os.path.join(self.dataset, rel), "wb") as f:  # in place: same name, same dir
            f.write(fresh)
        self.files[rel] = fresh
        self.started(self.prolog(OTHER_JOB, **self.user_job()))
        self.read_all(self.job_mnt(OTHER_JOB), USER)

    # ---- one budget across datasets ----

    def test_datasets_over_the_budget_take_turns_least_recently_used_first(self):
        # Three datasets of 2.5 MiB; RAM and tier budgets of 4 MiB: one fits
        # with room to spare, two do not.
        sets = []
        for name in ("a", "b", "c"):
            path = os.path.join(self.root, "lustre", name)
            sets.append((path, harness.make_files(path, 10, 256 * 1024, seed=len(sets))))
        self.node_config(NODE_CACHE_RAM_MB=4, NODE_CACHE_TIER_MB=4, RAM_MIN_MB=1, TIER_MIN_MB=1)
        jobs = [str(int(JOB) + 100000 * 4 * (i + 1)) for i in range(5)]  # this process's own
        order = [0, 1, 2, 0, 1]
        for job, i in zip(jobs, order):
            path, files = sets[i]
            self.started(self.prolog(job, TIERFS_DATASET=path))
            for rel, data in files.items():
                self.assertEqual(harness.read_file(os.path.join(self.job_mnt(job), rel)), data)
            self.assertEqual(self.epilog(job).returncode, 0)
            ram = tier = 0
            for key in self.caches():
                with open(os.path.join(self.node_root, key, "ram_kb")) as f:
                    ram += int(f.read())
            for key in os.listdir(self.node_root):
                if os.path.isdir(os.path.join(self.scratch, "tierfs-node", key)):
                    with open(os.path.join(self.node_root, key, "tier_kb")) as f:
                        tier += int(f.read())
            self.assertLessEqual(ram, 4 * 1024, "the RAM budget was exceeded")
            self.assertLessEqual(tier, 4 * 1024, "the tier budget was exceeded")
            time.sleep(1.1)  # the 'used' times one second apart
        # The last job (b) took room from the least recently used (c, then a's
        # turn came before): the running caches are the two most recent.
        running = set()
        for key in self.caches():
            with open(os.path.join(self.node_root, key, "dataset")) as f:
                running.add(f.read().strip())
        self.assertIn(sets[1][0], running)
        self.assertNotIn(sets[2][0], running, "the least recently used dataset kept its room")


if __name__ == "__main__":
    slurm_fixture.main()
