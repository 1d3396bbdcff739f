"""tools/slurm: the prolog mounts the job's dataset, the epilog leaves nothing.

The scripts run as slurmd runs them: as root, with no PATH, with the
variables Slurm sets for a prolog/epilog, and a site config file pointing
every directory into a temporary tree. Skipped unless root.
"""
import errno
import os
import re
import shutil
import signal
import stat
import subprocess

import harness
import slurm_fixture
from slurm_fixture import JOB, OTHER_JOB, REPO, SlurmFixture

LIB = os.path.join(REPO, "tools", "slurm", "tierfs-slurm-lib.bash")


def tearDownModule():
    harness.remove_made_users()


class SlurmScripts(SlurmFixture):
    def test_prolog_mounts_with_sized_tiers_then_epilog_clears_everything(self):
        r = self.prolog(TIERFS_OPTIONS="promote_threads=2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"mounted {self.dataset} at {self.mnt}", r.stderr)
        self.assertTrue(harness.is_mounted(self.mnt))
        for rel, data in list(self.files.items())[:10]:
            self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), data)
        stats = harness.mount_stats(self.mnt)
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
        self.assertLess(r.seconds, 10, r.stderr)

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
        with open(self.scontrol_calls) as f:  # the job's user sees why in `scontrol show job`
            calls = f.read().splitlines()
        why = f"dataset '{missing}' does not exist or cannot be reached by uid 0; nothing mounted"
        self.assertIn(f"update JobId={JOB} AdminComment=tierfs: {why}", calls)
        # ... and on srun's or salloc's stderr.
        self.assertIn(f"notify {JOB} tierfs on node001: job {JOB} is cancelled: {why}", calls)
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
        r = self.prolog(TIERFS_OPTIONS="promote_threads=999")  # allowed, but above tierfs's 256
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("option 'promote_threads': '999' is not a whole number", r.stderr)
        self.assertIn("tierfs refused the job's options (promote_threads=999)", r.stderr)
        with open(self.cancelled) as f:
            self.assertEqual(f.read().split(), [JOB])
        self.assert_nothing_left()

    def test_prolog_refuses_a_mount_name_that_is_a_path(self):
        for name in ("../../etc", "/etc", "a/b", "..", ".hidden", "x" * 65, "a b"):
            with self.subTest(name=name):
                r = self.prolog(TIERFS_MOUNT=name)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(f"TIERFS_MOUNT '{name}' is not a name", r.stderr)
                self.assert_nothing_left()

    def test_custom_mount_name_and_spank_variables(self):
        custom = os.path.join(self.mnt, "custom")
        r = self.prolog(TIERFS_DATASET=None, SPANK_TIERFS_DATASET=self.dataset,
                        SPANK_TIERFS_MOUNT="custom", SPANK_TIERFS_OPTIONS="ram=64M,prefetch=stage-in")
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

    def test_the_example_config_changes_nothing_and_shows_the_defaults(self):
        example = os.path.join(REPO, "tools", "slurm", "slurm.conf.example")
        with open(example) as f:
            text = f.read()
        self.assertEqual(re.findall(r"(?m)^[A-Z_]+=.*", text), [], "a setting not commented out")
        shown = re.findall(r"(?m)^#([A-Z_]+)=(.*)$", text)
        self.assertGreater(len(shown), 20)
        uncommented = os.path.join(self.root, "uncommented.conf")
        with open(uncommented, "w") as f:
            f.write("".join(f"{name}={value}\n" for name, value in shown))
        names = " ".join(name for name, _ in shown)
        script = (f'set -euo pipefail; TIERFS_SCRIPT=test; source {LIB}; load_config; '
                  f'for v in {names}; do printf "%s=%s\\n" "$v" "${{!v}}"; done')
        values = []
        for conf in (os.path.join(self.root, "none.conf"), example, uncommented):
            r = subprocess.run(["bash", "-c", script], env={"TIERFS_SLURM_CONF": conf,
                                                            "PATH": os.environ["PATH"]},
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            values.append(r.stdout)
        self.assertEqual(values[1], values[0], "copying the example changed a setting")
        self.assertEqual(values[2], values[0], "a value the example shows is not the default")

    def test_the_packages_tmpfiles_entry_makes_the_default_roots_at_boot(self):
        boot = os.path.join(self.root, "boot")
        for d in ("tmp", "run", "mnt"):
            os.makedirs(os.path.join(boot, d))
        os.chmod(os.path.join(boot, "tmp"), 0o1777)
        entry = os.path.join(REPO, "tools", "slurm", "tierfs-slurm.tmpfiles")
        r = subprocess.run(["systemd-tmpfiles", "--create", f"--root={boot}", entry],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        script = (f'set -euo pipefail; TIERFS_SCRIPT=test; source {LIB}; load_config; '
                  'printf "%s\n" "$TIER_ROOT" "$STATE_ROOT" "$MOUNT_ROOT"')
        r = subprocess.run(["bash", "-c", script], env={"TIERFS_SLURM_CONF": "/nonexistent",
                                                        "PATH": os.environ["PATH"]},
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        for root, mode in zip(r.stdout.split(), (0o711, 0o755, 0o755)):
            st = os.lstat(boot + root)
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, mode), root)
        with open(entry) as f:
            self.assertIn("\nx /tmp/tierfs-slurm\n", f.read(), "exempt from age cleanup")

    def test_a_job_without_a_dataset_is_left_alone(self):
        r = self.prolog(TIERFS_DATASET=None)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertFalse(os.path.exists(self.mount_root))
        r = self.epilog()
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    # ---- issue 11: what a job or another user can make a root prolog do ----

    def daemon_options(self):
        with open(f"/proc/{self.daemon_pid()}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        return args[args.index(b"-o") + 1].decode().split(",")

    def memory_budget(self, mnt=None):
        stats = harness.mount_stats(mnt or self.mnt)
        return {t["kind"]: t["budget"] for t in stats["tiers"]}.get("memory")

    def test_hostile_job_options_are_refused(self):
        victim = os.path.join(self.root, "victim")  # stands for / in `tier=/:1G,tier_reset`
        os.makedirs(os.path.join(victim, "data"))
        with open(os.path.join(victim, "data", "precious"), "w") as f:
            f.write("keep me")
        for opts, why in [(f"tier={victim}:1G,tier_reset", "may not set 'tier'"),
                          ("tier_reset", "may not set 'tier_reset'"),
                          ("suid", "may not set 'suid'"), ("dev", "may not set 'dev'"),
                          ("allow_other", "may not set 'allow_other'"),
                          ("metrics=0.0.0.0:9100", "may not set 'metrics'"),
                          ("fsname=x", "may not set 'fsname'"),
                          ("lookahead=8,nonempty", "may not set 'nonempty'"),
                          (f"prefetch=order\\,tier={victim}:1G", "'prefetch=order\\' is not"),
                          ("ram=1G\\,tier_reset", "'ram=1G\\' is not ram=VALUE"),
                          (f"chunk_size={victim}", "is not chunk_size=VALUE"),
                          ("prefetch", "'prefetch' is not prefetch=VALUE"),
                          ("lookahead=8\ntier_reset", "more than one line")]:
            with self.subTest(opts=opts):
                if os.path.exists(self.cancelled):
                    os.unlink(self.cancelled)
                r = self.prolog(TIERFS_OPTIONS=opts)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("TIERFS_OPTIONS", r.stderr)
                self.assertIn(why, r.stderr)
                with open(self.cancelled) as f:
                    self.assertEqual(f.read().split(), [JOB])
                self.assert_nothing_left()
        self.assertTrue(os.path.exists(os.path.join(victim, "data", "precious")))

    def test_allowed_job_options_reach_the_daemon(self):
        r = self.prolog(TIERFS_OPTIONS="prefetch=order,lookahead=64,policy=lru,chunk_size=4M,"
                                       "promote_threads=3,log_level=debug")
        self.assertEqual(r.returncode, 0, r.stderr)
        opts = self.daemon_options()
        for o in ("prefetch=order", "lookahead=64", "policy=lru", "chunk_size=4M",
                  "promote_threads=3", "log_level=debug"):
            self.assertIn(o, opts)
        self.assertEqual(self.epilog().returncode, 0)
        self.assert_nothing_left()

    def test_a_multi_node_job_gets_its_nodes_as_peers(self):
        scontrol = os.path.join(self.root, "scontrol")
        with open(scontrol, "w") as f:  # expands node[001-003] as Slurm's would
            f.write('#!/bin/sh\n[ "$1 $2 $3" = "show hostnames node[001-003]" ] || exit 1\n'
                    'printf "node001\\nnode002\\nnode003\\n"\n')
        os.chmod(scontrol, 0o755)
        self.write_config(SCONTROL=scontrol, PEER_PORT_BASE=7100, PEER_PORT_COUNT=100)
        r = self.prolog(SLURM_JOB_NODELIST="node[001-003]", TIERFS_OPTIONS="prefetch=order")
        self.assertEqual(r.returncode, 0, r.stderr)
        opts = self.daemon_options()
        port = 7100 + int(JOB) % 100
        for o in ("peers=node001+node002+node003", "peer_name=node001", f"peer_port={port}",
                  f"peer_job=slurm:test:{JOB}", "peer_timeout=5"):
            self.assertIn(o, opts)
        self.assertIn(f"peers: 3 nodes, port {port}", r.stderr)
        self.assertEqual(self.epilog().returncode, 0)
        # A job may not set peers itself; a node list scontrol cannot expand
        # (or that does not name this node) leaves the job without peers.
        r = self.prolog(SLURM_JOB_NODELIST="node[001-003]", TIERFS_OPTIONS="peers=evil+node001")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("a job may not set 'peers'", r.stderr)
        self.assert_nothing_left()
        for nodes, says in (("other[1-2]", "cannot expand"), ("node[001-003]", "is not in")):
            r = self.prolog(SLURM_JOB_NODELIST=nodes, SLURMD_NODENAME="node009")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(says, r.stderr)
            self.assertNotIn("peers=", self.daemon_options())
            self.assertEqual(self.epilog().returncode, 0)
        self.assert_nothing_left()
        # The site's bad peer settings are the node's fault, found before anything is done.
        for bad in ({"PEER_PORT_COUNT": 0}, {"PEER_PORT_BASE": 65500, "PEER_PORT_COUNT": 100},
                    {"PEER_TIMEOUT": "0"}, {"PEERS": "yes"}, {"MUNGE_SOCKET": "rel/sock"}):
            self.write_config(SCONTROL=scontrol, **bad)
            r = self.prolog(SLURM_JOB_NODELIST="node[001-003]")
            self.assertEqual(r.returncode, 1, f"{bad}: {r.stderr}")
            self.assertIn("bad configuration", r.stderr)
            self.assert_nothing_left()

    def test_ram_above_the_job_memory_allocation_is_capped(self):
        r = self.prolog(TIERFS_OPTIONS="ram=1G", SLURM_MEM_PER_NODE="100")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ram=1G: the RAM tier is 100M, the job's memory on this node (--mem)",
                      r.stderr)
        self.assertEqual(self.memory_budget(), 100 << 20)
        self.assertEqual(self.epilog().returncode, 0)
        # The automatic size too: 10 MB per CPU on 3 CPUs is below 25% of MemAvailable.
        r = self.prolog(SLURM_MEM_PER_CPU="10", SLURM_CPUS_ON_NODE="3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.memory_budget(), 30 << 20)
        self.assertEqual(self.epilog().returncode, 0)
        # slurmd 22.05 gives a prolog no SLURM_MEM_*: the job's --mem comes from squeue.
        squeue = os.path.join(self.root, "squeue-mem")
        with open(squeue, "w") as f:
            f.write(f'#!/bin/sh\n[ "$*" = "--noheader --jobs={JOB} --format=%m" ] && echo " 80M"\n')
        os.chmod(squeue, 0o755)
        self.write_config(SQUEUE=squeue)
        r = self.prolog(TIERFS_OPTIONS="ram=1G")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ram=1G: the RAM tier is 80M", r.stderr)
        self.assertEqual(self.memory_budget(), 80 << 20)
        self.assertEqual(self.epilog().returncode, 0)
        self.write_config()
        # No allocation known: a job gets at most the automatic size.
        r = self.prolog(TIERFS_OPTIONS="ram=64T")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("of the memory available on this node (the job asked for no memory)",
                      r.stderr)
        with open("/proc/meminfo") as f:
            avail = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:"))
        self.assertLess(self.memory_budget(), avail * 0.35)
        self.assertEqual(self.epilog().returncode, 0)
        self.assert_nothing_left()

    def test_a_job_cannot_take_another_jobs_mount_name(self):
        r = self.prolog(TIERFS_MOUNT=OTHER_JOB)
        self.assertEqual(r.returncode, 0, r.stderr)
        theirs = os.path.join(self.mount_root, OTHER_JOB)
        self.assertFalse(harness.is_mounted(theirs))
        self.assertTrue(harness.is_mounted(os.path.join(self.mnt, OTHER_JOB)))
        r = self.prolog(job=OTHER_JOB)  # the other job's own prolog
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("stale", r.stderr)
        self.assertTrue(harness.is_mounted(theirs))
        self.assertEqual(self.epilog().returncode, 0)  # this job's epilog: only its own mount
        self.assertTrue(harness.is_mounted(theirs))
        rel, data = next(iter(self.files.items()))
        self.assertEqual(harness.read_file(os.path.join(theirs, rel)), data)
        self.assertEqual(self.epilog(job=OTHER_JOB).returncode, 0)
        self.assertFalse(harness.is_mounted(theirs))
        self.assert_nothing_left()

    def test_epilog_ignores_a_recorded_mount_point_that_is_not_its_jobs(self):
        r = self.prolog(job=OTHER_JOB)
        self.assertEqual(r.returncode, 0, r.stderr)
        os.makedirs(self.state)
        with open(os.path.join(self.state, "mount"), "w") as f:
            f.write(os.path.join(self.mount_root, OTHER_JOB))
        r = self.epilog()
        self.assertIn("not this job's", r.stderr)
        self.assertTrue(harness.is_mounted(os.path.join(self.mount_root, OTHER_JOB)))
        self.assertEqual(self.epilog(job=OTHER_JOB).returncode, 0)

    def test_a_second_user_cannot_plant_the_tier_directory(self):
        user = self.user_or_skip()
        os.chmod(self.scratch, 0o1777)  # like /tmp
        planted = [os.path.join(self.scratch, f"tierfs-{JOB}"), self.tier]  # old and new names
        r = harness.as_user(user, "sh", "-c", 'for d; do mkdir -p "$d/data" && echo 1 > "$d/journal" &&'
                    ' : > "$d/lock" && echo evil > "$d/data/f1" && : > "$d/squatter-was-here" &&'
                    ' chmod -R a+rwX "$d" || exit 1; done', "sh", *planted)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.prolog()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("not by root: removing it", r.stderr)
        stats = harness.mount_stats(self.mnt)
        tier = next(t["path"] for t in stats["tiers"] if t["kind"] == "directory")
        self.assertFalse(os.path.exists(os.path.join(tier, "squatter-was-here")))
        st = os.lstat(tier)
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o700))
        st = os.lstat(os.path.dirname(tier))
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o711))
        for rel, data in list(self.files.items())[:10]:
            self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), data)
        self.assertEqual(self.epilog().returncode, 0)
        self.assert_nothing_left()

    def test_prolog_refuses_a_tier_root_in_a_directory_anyone_may_change(self):
        os.chmod(self.scratch, 0o777)  # no sticky bit: anyone may rename what root makes there
        r = self.prolog()
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"refusing {self.scratch}", r.stderr)
        self.assertFalse(harness.is_mounted(self.mnt))
        self.assert_nothing_left()

    def test_a_root_daemon_job_cannot_mount_another_users_private_directory(self):
        # RUN_AS_USER=no: the daemon runs as root with allow_other. The job's
        # user names a dataset below root's 0700 directory: refused, as its
        # user cannot reach it, though root could.
        uid, gid = self.user_or_skip()
        self.write_config(RUN_AS_USER="no")
        private = os.path.join(self.root, "private")
        os.mkdir(private, 0o700)
        dataset = os.path.join(private, "dataset")
        shutil.copytree(self.dataset, dataset)
        r = self.prolog(TIERFS_DATASET=dataset, SLURM_JOB_USER=harness.OTHER_USER,
                        SLURM_JOB_UID=str(uid), SLURM_JOB_GID=str(gid))
        self.assertEqual(r.returncode, 0, r.stderr)  # the job is cancelled, the node is fine
        self.assertIn(f"dataset '{dataset}' does not exist or cannot be reached by uid {uid}",
                      r.stderr)
        with open(self.cancelled) as f:
            self.assertEqual(f.read().split(), [JOB])
        self.assert_nothing_left()
        # The same job on a dataset its user can read is mounted by root, and
        # the job's user steers it.
        os.remove(self.cancelled) if os.path.exists(self.cancelled) else None
        r = self.prolog(SLURM_JOB_USER=harness.OTHER_USER, SLURM_JOB_UID=str(uid),
                        SLURM_JOB_GID=str(gid))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("uid 0", r.stderr)
        self.assertIn(f"control_owner={uid}:{gid}", r.stderr)
        order = os.path.join(self.mnt, ".tierfs", "order")
        rel = next(iter(self.files))
        r = harness.as_user((uid, gid), "sh", "-c", f"echo {rel} >> {order}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.epilog().returncode, 0)
        self.assert_nothing_left()

    def test_the_daemon_runs_in_a_memory_cgroup_the_epilog_empties(self):
        r = self.prolog()
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = self.daemon_pid()
        with open(f"/proc/{pid}/cgroup") as f:
            groups = f.read()
        if f"tierfs/job_{JOB}" not in groups:
            self.assertIn("cannot make the memory cgroup", r.stderr)
            self.skipTest("no memory cgroup can be made here")
        cg = next(c for c in ("/sys/fs/cgroup/tierfs/job_" + JOB,
                              "/sys/fs/cgroup/memory/tierfs/job_" + JOB) if os.path.isdir(c))
        limit_file = "memory.max" if os.path.exists(cg + "/memory.max") else "memory.limit_in_bytes"
        with open(os.path.join(cg, limit_file)) as f:
            limit = int(f.read())
        ram = int(re.search(r"ram=(\d+)K", r.stderr).group(1)) * 1024
        # The RAM tier plus MEM_OVERHEAD_MB (the kernel rounds down to a page).
        self.assertLess(abs(limit - (ram + 1024 * 1024 * 1024)), 4096)
        # A process of another name in the daemon's cgroup (a child it
        # started, or one moved there): the epilog ends it too.
        other = subprocess.Popen(["bash", "-c", "exec -a not-tierfs sleep 300"])
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(other.pid))
        self.assertEqual(self.epilog().returncode, 0)
        self.assertIn(other.wait(timeout=10), (-signal.SIGTERM, -signal.SIGKILL), "it survived")
        self.assertFalse(os.path.exists(cg), "the cgroup is still there")
        self.assert_nothing_left()

    def test_a_job_of_an_ordinary_user_gets_a_tier_its_daemon_accepts(self):
        uid, gid = self.user_or_skip()
        r = self.prolog(SLURM_JOB_USER=harness.OTHER_USER, SLURM_JOB_UID=str(uid), SLURM_JOB_GID=str(gid))
        if harness.as_user((uid, gid), "test", "-w", "/dev/fuse").returncode != 0:
            # This machine lets only root mount (/dev/fuse 0600, some containers): the daemon
            # says so before it scans, and its options (the tier) were accepted.
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("/dev/fuse cannot be opened by uid", r.stderr)
            self.assertIn("Permission denied", r.stderr)
            self.assertNotIn("is refused", r.stderr)
            self.assert_nothing_left()
            self.skipTest(f"{harness.OTHER_USER} cannot open /dev/fuse: its options were accepted,"
                          " but the mount is not tested")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.lstat(self.tier).st_uid, uid)
        rel, data = next(iter(self.files.items()))
        r = harness.as_user((uid, gid), "cat", os.path.join(self.mnt, rel))
        self.assertEqual((r.returncode, r.stdout), (0, data), r.stderr)
        r = harness.as_user((uid, gid), "cat", os.path.join(self.mnt, ".tierfs", "stats"))
        self.assertIn(self.tier.encode(), r.stdout)
        self.assertEqual(self.epilog().returncode, 0)
        self.assert_nothing_left()


if __name__ == "__main__":
    slurm_fixture.main()
