"""The node cache under a real Slurm (test_slurm_real.py's cluster: a private
slurmctld, two slurmd, munged, the repository's prolog and epilog), with
NODE_CACHE=yes on every node.

Checked: an `sbatch --array` of the user's jobs on one node attaches every
task to one cache (one daemon, the dataset read from SOURCE once); a file
an ACL denies the user, which a root job's reads put in the cache, is
refused to her job; her job's attempts to signal the cache's daemon fail
and it stays up; the daemon killed between jobs is started again by the
next job, the node staying idle. Before the node cache every task mounted
a daemon of its own and the "one daemon" checks fail.

Skipped (77) as test_slurm_real.py is."""
import glob
import json
import os
import subprocess
import unittest

import harness
import test_slurm_real as real

CLUSTER = None
NODE = "tfs-node1"

READ_ONE = r"""#!/bin/bash
# Reads one file through the job's mount; says whether it was served.
mnt={mount_root}/$SLURM_JOB_ID
if cat -- "$mnt/{rel}" >/dev/null 2>{jobs}/$SLURM_JOB_ID.err; then echo SERVED; else echo DENIED; fi
"""

HOLD_AND_READ = r"""#!/bin/bash
# Holds a file of the mount open until the test releases it, then reads
# the whole dataset.
mnt={mount_root}/$SLURM_JOB_ID
exec 3<"$mnt/{rel}"
touch {jobs}/$SLURM_JOB_ID.holding
for _ in $(seq 600); do [ -e {release} ] && break; sleep 0.1; done
cmp -s /dev/fd/3 "{dataset}/{rel}" || {{ echo "DIFFERS: held {rel}"; exit 1; }}
n=0
while IFS= read -r f; do
  cmp -s -- "$mnt/$f" "{dataset}/$f" || {{ echo "DIFFERS: $f"; exit 1; }}
  n=$((n + 1))
done < <(cd "{dataset}" && find . -type f | sort)
echo "READ $n FILES"
"""

SIGNALS = r"""#!/bin/bash
# The job's user tries to stop the node cache's daemon.
for sig in TERM KILL STOP; do
  if kill -s $sig {pid} 2>/dev/null; then echo "SENT $sig"; else echo "REFUSED $sig"; fi
done
"""


class NodeCacheCluster(real.Cluster):
    def write_slurm_conf(self, prolog=None, epilog=None, plugstack=None):
        """Two CPUs a node, allocated one by one: two jobs can share a node."""
        super().write_slurm_conf(prolog, epilog, plugstack)
        with open(self.path("slurm.conf")) as f:
            text = f.read()
        text = text.replace("SelectType=select/linear",
                            "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU")
        text = text.replace(" CPUs=1 ", " CPUs=2 ")
        with open(self.path("slurm.conf"), "w") as f:
            f.write(text)

    def write_site_config(self, node, cgroup):
        super().write_site_config(node, cgroup)
        with open(self.path(f"site-{node}.conf"), "a") as f:
            f.write(f"NODE_CACHE=yes\nNODE_CACHE_DATASETS={self.path('lustre')}\n"
                    f"NODE_CACHE_ROOT={self.path(node, 'node')}\nNODE_CACHE_RAM_MB=64\n"
                    "NODE_CACHE_TIER_MB=64\nNODE_CACHE_IDLE=600\n")

    def caches(self, node=NODE):
        """{key: pid} of the node's caches whose daemon runs."""
        out = {}
        for pid_file in glob.glob(self.path(node, "node", "*", "pid")):
            with open(pid_file) as f:
                pid = int(f.read())
            if os.path.exists(f"/proc/{pid}"):
                out[os.path.basename(os.path.dirname(pid_file))] = pid
        return out

    def cache_stats(self, key, node=NODE):
        with open(self.path(node, "node", key, "mnt", ".tierfs", "stats")) as f:
            return json.load(f)


def setUpModule():
    global CLUSTER
    CLUSTER = real.start_cluster(NodeCacheCluster)


def tearDownModule():
    if CLUSTER is not None:
        CLUSTER.close()


class NodeCacheUnderSlurm(unittest.TestCase):
    def setUp(self):
        self.c = CLUSTER
        self.c.wait_idle()

    def tearDown(self):
        drained = {n: s for n, s in self.c.node_states().items() if s != "idle"}
        for node in drained:
            self.c.run("scontrol", "update", f"nodename={node}", "state=resume")
        self.assertEqual(drained, {}, f"nodes left not idle\n{self.c.logs()}")

    def submit(self, script, *args, user="job"):
        c = self.c
        if user == "job":
            r = c.sbatch("-N1", "-w", NODE, f"--tierfs={c.dataset}", *args, script=script)
        else:  # root's job
            path = c.path("jobs", f"root-{len(c.jobs)}.sh")
            with open(path, "w") as f:
                f.write(script)
            os.chmod(path, 0o755)
            r = c.run("sbatch", "--parsable", f"--chdir={c.path('jobs')}",
                      f"--output={c.path('jobs')}/%j.out", "-N1", "-w", NODE,
                      f"--tierfs={c.dataset}", *args, path)
            r.job = int(r.stdout.strip().split(";")[0]) if r.returncode == 0 else None
            if r.job is not None:
                c.jobs.append(r.job)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.job

    def output(self, job):
        with open(self.c.path("jobs", f"{job}.out")) as f:
            return f.read()

    def read_all_script(self):
        c = self.c
        return real.READ_ALL.format(mount_root=c.path(NODE, "mnt"), name="", dataset=c.dataset,
                                    jobs=c.path("jobs"))

    def test_an_array_of_jobs_attaches_to_one_cache_that_reads_the_pfs_once(self):
        c = self.c
        first = self.submit(self.read_all_script(), "--array=1-4")
        harness.wait_for(lambda: not c.run("squeue", "-h").stdout.strip(), timeout=180,
                         what="the array's tasks to end")
        for job in range(first, first + 4):
            info = c.wait_done(job)
            self.assertEqual(info["JobState"], "COMPLETED", f"{job}: {self.output(job)}")
            self.assertIn(f"READ {len(c.files)} FILES", self.output(job))
        caches = c.caches()
        self.assertEqual(len(caches), 1, f"one cache for one dataset: {caches}")
        [key] = caches
        stats = c.cache_stats(key)
        dataset_bytes = sum(len(d) for d in c.files.values())
        read = stats["source"]["read_bytes"]
        self.assertLessEqual(read, dataset_bytes * 1.05,
                             f"4 jobs read {read / dataset_bytes:.2f}x the dataset from SOURCE")
        for job in range(first, first + 4):
            self.assertFalse(harness.is_mounted(c.mnt(NODE, job)), f"job {job}'s bind is left")

    def test_a_file_an_acl_denies_her_is_refused_though_a_root_job_cached_it(self):
        c = self.c
        rel = sorted(c.files)[0]
        path = os.path.join(c.dataset, rel)
        subprocess.run(["setfacl", "-m", f"u:{c.user[0]}:---", path], check=True, timeout=30)
        try:
            root_job = self.submit(self.read_all_script(), user="root")
            self.assertEqual(c.wait_done(root_job)["JobState"], "COMPLETED",
                             self.output(root_job))
            job = self.submit(READ_ONE.format(mount_root=c.path(NODE, "mnt"), rel=rel,
                                              jobs=c.path("jobs")))
            c.wait_done(job)
            self.assertIn("DENIED", self.output(job), "the cache served her a file SOURCE denies")
            other = sorted(c.files)[1]
            job = self.submit(READ_ONE.format(mount_root=c.path(NODE, "mnt"), rel=other,
                                              jobs=c.path("jobs")))
            c.wait_done(job)
            self.assertIn("SERVED", self.output(job))
        finally:
            subprocess.run(["setfacl", "-b", path], timeout=30)

    def test_job_a_ending_while_job_b_reads_leaves_b_and_the_cache(self):
        c = self.c
        rel = sorted(c.files)[0]
        release = c.path("jobs", "release-b")
        b = self.submit(HOLD_AND_READ.format(mount_root=c.path(NODE, "mnt"), rel=rel,
                                             jobs=c.path("jobs"), release=release,
                                             dataset=c.dataset), "-n1")
        harness.wait_for(lambda: os.path.exists(c.path("jobs", f"{b}.holding")), timeout=60,
                         what="job B holding a file of its mount")
        a = self.submit(self.read_all_script(), "-n1")
        harness.wait_for(lambda: c.job(a).get("JobState") == "COMPLETED", timeout=90,
                         what="job A to end beside B")
        harness.wait_for(lambda: not harness.is_mounted(c.mnt(NODE, a)), timeout=30,
                         what="job A's epilog to remove its bind")
        [(key, pid)] = c.caches().items()
        with open(release, "w"):
            pass
        info = c.wait_done(b)
        self.assertEqual(info["JobState"], "COMPLETED", self.output(b))
        self.assertIn(f"READ {len(c.files)} FILES", self.output(b))
        self.assertEqual(c.caches(), {key: pid}, "an epilog stopped the node's cache")

    def test_a_file_rewritten_on_the_pfs_between_jobs_is_read_fresh(self):
        c = self.c
        job = self.submit(self.read_all_script())
        self.assertEqual(c.wait_done(job)["JobState"], "COMPLETED", self.output(job))
        rel = sorted(c.files)[2]
        fresh = os.urandom(len(c.files[rel]) + 100)
        with open(os.path.join(c.dataset, rel), "wb") as f:  # in place: its directory unchanged
            f.write(fresh)
        c.files[rel] = fresh
        job = self.submit(self.read_all_script())  # compares with the PFS file by file
        self.assertEqual(c.wait_done(job)["JobState"], "COMPLETED", self.output(job))
        self.assertIn(f"READ {len(c.files)} FILES", self.output(job))

    def test_her_job_cannot_signal_the_daemon_and_a_killed_one_is_started_again(self):
        c = self.c
        job = self.submit(self.read_all_script())
        self.assertEqual(c.wait_done(job)["JobState"], "COMPLETED", self.output(job))
        [(key, pid)] = c.caches().items()
        job = self.submit(SIGNALS.format(pid=pid))
        c.wait_done(job)
        out = self.output(job)
        for sig in ("TERM", "KILL", "STOP"):
            self.assertIn(f"REFUSED {sig}", out)
        self.assertEqual(c.caches(), {key: pid})
        # Killed by someone who may (root, the OOM killer): the next job starts it again.
        os.kill(pid, 9)
        harness.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), what="the daemon gone")
        job = self.submit(self.read_all_script())
        self.assertEqual(c.wait_done(job)["JobState"], "COMPLETED", self.output(job))
        [(key2, pid2)] = c.caches().items()
        self.assertEqual(key2, key)
        self.assertNotEqual(pid2, pid)


if __name__ == "__main__":
    if real.why_not_here():
        print(f"SKIPPED: {real.why_not_here()}")
        raise SystemExit(harness.SKIP)
    harness.main()
