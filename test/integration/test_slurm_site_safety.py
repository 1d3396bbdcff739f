"""The prolog and epilog against a job's user who wants the node drained
or the scripts hung, and a node whose PFS hangs.

Played here, each failing on the scripts before these fixes:
- `--extra` holding a glob (`/*/*/*/*/*/*/*/*`): the prolog used to expand
  it as root, without bound (hundreds of MB, no progress);
- TIER_ROOT's name in a sticky directory taken by the user, with her
  FUSE mount inside it or on it (a hung one): the prolog drained the node
  or hung on an lstat;
- her hung FUSE mount on the tier directory she was given: the epilog hung;
- another user's process named tierfs that names the job's mount point:
  the epilog killed it (and drained the node if it survived);
- a umask of slurmd's making the mount point unreachable;
- a hung PFS: every job cancelled and the node left up for the next one;
  now the site's canary (PFS_CHECK) drains it at once, and without one the
  failures of a second user's job do;
- a name service that does not know the job's user: cancelled (its groups
  lost), now drained.

The module runs in a private mount namespace whose /dev/fuse any user may
open, as test_slurm_failures.py does. Skipped unless root with useradd,
setpriv and unshare."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import harness
import slurm_fixture
import test_slurm_failures
from slurm_fixture import JOB, OTHER_JOB, THIRD_JOB, SlurmFixture

USER = None


def setUpModule():
    global USER
    USER = harness.unprivileged_user()
    if USER is None or shutil.which("unshare") is None:
        return
    test_slurm_failures.fuse_for_every_user()
    # Users may mount with allow_other, as on sites that allow it: then root
    # entering her hung mount waits (without it the kernel refuses root at
    # once). In this module's mount namespace only.
    fd, conf = tempfile.mkstemp(prefix="tierfs-fuse-conf-")
    with os.fdopen(fd, "w") as f:
        f.write("user_allow_other\n")
    os.chmod(conf, 0o644)
    subprocess.run(["mount", "--bind", conf, "/etc/fuse.conf"], check=True, timeout=30)
    os.remove(conf)  # the bind mount keeps it


def tearDownModule():
    harness.remove_made_users()


class SiteSafety(SlurmFixture):
    def setUp(self):
        super().setUp()
        if USER is None:
            self.skipTest(f"cannot make the job's user ({harness.OTHER_USER}) with useradd")
        self.user_or_skip()
        self.uid, self.gid = USER
        os.chmod(self.scratch, 0o1777)  # as /tmp
        self.procs = []

    def tearDown(self):
        for p in self.procs:  # stopped FUSE daemons first: the checks below would wait on them
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
            p.wait(timeout=20)
        for mnt in sorted(harness.mounts_below(self.root), reverse=True):
            harness.force_unmount(mnt)
        super().tearDown()

    def user_job(self, **extra):
        return dict({"SLURM_JOB_USER": harness.OTHER_USER, "SLURM_JOB_UID": str(self.uid),
                     "SLURM_JOB_GID": str(self.gid)}, **extra)

    def bounded(self, script, seconds, job=JOB, **extra):
        """The script run as slurmd runs it; fails the test if it outlives `seconds`."""
        env = self.env(job, SLURM_SCRIPT_CONTEXT="prolog_slurmd" if script == slurm_fixture.PROLOG
                       else "epilog_slurmd", **extra)
        start = time.monotonic()
        p = subprocess.Popen([script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            self.fail(f"{os.path.basename(script)} still running after {seconds}s")
        r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        r.seconds = time.monotonic() - start
        return r

    def users_fuse_mount(self, mnt, stopped=False):
        """The job's user's own FUSE mount at mnt (pfs-sim over a directory of
        hers); stopped: its daemon SIGSTOPped, so that anything entering the
        mount waits for good."""
        src = os.path.join(self.root, f"her-src-{len(self.procs)}")
        os.mkdir(src)
        os.chown(src, self.uid, self.gid)
        p = subprocess.Popen(harness.user_command(
            USER, os.path.join(harness.BIN_DIR, "pfs-sim"), src, mnt, "-f", "-o",
            "meta_ms=0,read_ms=0,allow_other"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        harness.wait_for(lambda: harness.is_mounted(mnt), what="the user's FUSE mount")
        if stopped:
            os.kill(p.pid, signal.SIGSTOP)
        return p

    # ---- the job's text is never expanded ----

    def test_a_glob_in_sbatch_extra_is_not_expanded_by_the_prolog(self):
        r = self.bounded(slurm_fixture.PROLOG, 15, SLURM_JOB_EXTRA="/*/*/*/*/*/*/*/*",
                         **self.user_job())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(r.seconds, 5)
        self.assertFalse(os.path.exists(self.state), "a job without a dataset got a mount")
        # A dataset named with a star is taken as written, not matched.
        star = self.dataset[:-2] + "*"
        r = self.bounded(slurm_fixture.PROLOG, 30, SLURM_JOB_EXTRA=f"x=/*/*,tierfs={star}",
                         **self.user_job())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"dataset '{star}' does not exist", r.stderr)

    # ---- TIER_ROOT's name taken in a sticky directory ----

    def tier_root(self):
        return os.path.join(self.scratch, "tierfs-slurm")

    def assert_mounted_then_cleared(self, r, before_checks=lambda: None):
        self.assertEqual(r.returncode, 0, f"the node would be drained: {r.stderr}")
        self.assertFalse(os.path.exists(self.cancelled), r.stderr)
        self.assertTrue(harness.is_mounted(self.mnt), r.stderr)
        listed = harness.as_user(USER, "ls", self.mnt).stdout.split()  # her daemon's mount
        self.assertEqual(len(listed), len(os.listdir(self.dataset)))
        r = self.bounded(slurm_fixture.EPILOG, 60, **self.user_job())
        self.assertEqual(r.returncode, 0, r.stderr)
        before_checks()
        self.assert_nothing_left(*[p.pid for p in self.procs])

    def test_a_tier_root_taken_by_a_user_with_her_mount_inside_is_moved_aside(self):
        harness.as_user(USER, "mkdir", "-p", os.path.join(self.tier_root(), "m"))
        self.users_fuse_mount(os.path.join(self.tier_root(), "m"))
        r = self.bounded(slurm_fixture.PROLOG, 60, TIERFS_DATASET=self.dataset, **self.user_job())
        self.assertIn("moved aside", r.stderr)
        st = os.lstat(self.tier_root())
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o711))
        self.assertTrue(os.path.isdir(self.tier), "the job has its directory tier")
        self.assert_mounted_then_cleared(r)

    def test_a_tier_root_that_is_a_users_hung_mount_neither_hangs_nor_drains(self):
        harness.as_user(USER, "mkdir", self.tier_root())
        self.users_fuse_mount(self.tier_root(), stopped=True)
        out = os.path.join(self.root, "out")
        os.mkdir(out)
        os.chown(out, self.uid, self.gid)
        r = self.bounded(slurm_fixture.PROLOG, 60, TIERFS_DATASET=self.dataset,
                         SLURM_JOB_STDOUT=os.path.join(out, "job.out"), **self.user_job())
        self.assertIn("no directory tier: TIER_ROOT=", r.stderr)
        with open(self.scontrol_calls) as f:  # said to the job's srun
            self.assertIn("no directory tier", f.read())

        def her_mount_gone():  # else the checks below would wait on it
            self.procs[0].send_signal(signal.SIGCONT)
            self.procs[0].kill()
            harness.force_unmount(self.tier_root())
        self.assert_mounted_then_cleared(r, her_mount_gone)

    # ---- the epilog: her mount, another user's process ----

    def test_the_epilog_ends_within_its_bound_with_a_hung_mount_on_the_users_tier(self):
        r = self.bounded(slurm_fixture.PROLOG, 60, TIERFS_DATASET=self.dataset, **self.user_job())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.stat(self.tier).st_uid, self.uid)  # hers: she may mount on it
        self.users_fuse_mount(self.tier, stopped=True)
        r = self.bounded(slurm_fixture.EPILOG, 60, **self.user_job())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("detached", r.stderr)
        self.assert_nothing_left(*[p.pid for p in self.procs])

    def test_the_epilog_leaves_another_users_process_that_names_the_mount_point_alone(self):
        r = self.bounded(slurm_fixture.PROLOG, 60, TIERFS_DATASET=self.dataset)  # root's job
        self.assertEqual(r.returncode, 0, r.stderr)
        # Another user's process called tierfs with the job's mount point as an argument.
        code = ("import ctypes, time; ctypes.CDLL(None).prctl(15, b'tierfs', 0, 0, 0); "
                "time.sleep(120)")
        # Debian's python3: another user may not reach root's own interpreters.
        other = subprocess.Popen(harness.user_command(USER, "/usr/bin/python3", "-c", code,
                                                      self.mnt))
        self.procs.append(other)
        def named_tierfs():
            with open(f"/proc/{other.pid}/comm") as f:
                return f.read().strip() == "tierfs"
        harness.wait_for(named_tierfs, what="the other user's process named tierfs")
        r = self.bounded(slurm_fixture.EPILOG, 60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(other.poll(), "the epilog killed another user's process")
        self.assert_nothing_left(other.pid)

    def test_slurmds_umask_leaves_nothing_the_prolog_makes_writable_by_others(self):
        env = self.env(SLURM_SCRIPT_CONTEXT="prolog_slurmd", TIERFS_DATASET=self.dataset)
        r = subprocess.run([slurm_fixture.PROLOG], env=env, capture_output=True, text=True,
                           timeout=60, preexec_fn=lambda: os.umask(0))
        self.assertEqual(r.returncode, 0, r.stderr)
        for top in (self.state, self.tier, os.path.dirname(self.state)):
            for d, dirs, files in os.walk(top):
                for name in [d] + [os.path.join(d, f) for f in files]:
                    mode = os.lstat(name).st_mode
                    self.assertEqual(mode & 0o022, 0, f"{name}: {oct(mode)}")
        self.assertEqual(self.epilog().returncode, 0)

    # ---- whose node is sick ----

    def hung_pfs(self):
        """A dataset on a FUSE 'PFS' (root's, allow_other) whose daemon is stopped."""
        src = os.path.join(self.root, "pfs-src")
        harness.make_files(os.path.join(src, "data"), 4, 1024)
        with open(os.path.join(src, "canary"), "w") as f:
            f.write("ok\n")
        mnt = os.path.join(self.root, "pfs")
        pfs = harness.PfsSim(src, mnt, "meta_ms=0,allow_other")
        self.procs.append(pfs.proc)  # continued and ended before anything looks below root
        os.kill(pfs.proc.pid, signal.SIGSTOP)
        return mnt

    def test_a_hung_pfs_with_a_site_canary_drains_the_node_at_the_first_job(self):
        pfs = self.hung_pfs()
        self.write_config(PFS_CHECK=os.path.join(pfs, "canary"))
        r = self.bounded(slurm_fixture.PROLOG, 60, TIERFS_DATASET=os.path.join(pfs, "data"),
                         **self.user_job())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("the PFS canary PFS_CHECK=", r.stderr)
        self.assertIn("did not answer", r.stderr)
        self.assertFalse(os.path.exists(self.cancelled), "drained, not cancelled")

    def test_a_hung_pfs_without_a_canary_drains_at_a_second_users_job(self):
        pfs = self.hung_pfs()
        data = os.path.join(pfs, "data")
        r = self.bounded(slurm_fixture.PROLOG, 60, TIERFS_DATASET=data, **self.user_job())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("is the PFS hanging?", r.stderr)
        # The same user again: her dataset alone never drains the node.
        r = self.bounded(slurm_fixture.PROLOG, 60, OTHER_JOB, TIERFS_DATASET=data,
                         **self.user_job())
        self.assertEqual(r.returncode, 0, r.stderr)
        # Another user's job (root's here) on the same PFS: the node's.
        r = self.bounded(slurm_fixture.PROLOG, 60, THIRD_JOB, TIERFS_DATASET=data)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("the jobs of 2 users failed on this node's PFS", r.stderr)

    def test_a_name_service_that_does_not_know_the_jobs_user_drains_the_node(self):
        r = self.bounded(slurm_fixture.PROLOG, 60, TIERFS_DATASET=self.dataset,
                         **self.user_job(SLURM_JOB_USER="tierfs-nobody-here"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("the name service does not know the job's user", r.stderr)
        self.assertFalse(harness.is_mounted(self.mnt))


if __name__ == "__main__":
    slurm_fixture.main()
