"""Whose failure is it: what the job's user controls cancels the job (the
prolog exits 0: Slurm keeps the node), and says why where the user looks;
only what the node causes drains it (exit 1).

The job's user plays the attacker who wants nodes drained: her dataset
turns into a dangling symlink after the prolog's check, is her own FUSE
mount that root may not read, her processes SIGKILL or SIGSTOP her daemon
during its scan, she puts a file in her mount point. Each used to drain the
node (exit 1). The node's own failures still drain it: tierfs missing, a
tierfs that cannot mount anything, a site option tierfs refuses.

The reason of a cancelled job reaches its user: on srun's/salloc's stderr
(`scontrol notify`, recorded by the fake scontrol) and in a batch job's
output file, written as the job's user (never as root: a path that user
cannot write stays unwritten); what the prolog changed in the request (a
ram= capped at --mem) too, the output file's line appended by the epilog.

The module runs in a private mount namespace whose /dev/fuse any user may
open (a copy of the device node), so that the job's daemon runs as the
job's user (RUN_AS_USER=yes, the default) as on a site that allows it;
the real system is not changed. Skipped unless root with useradd, setpriv
and unshare."""
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile

import harness
import slurm_fixture
from slurm_fixture import JOB, SlurmFixture

CLONE_NEWNS = 0x00020000
USER = None

# The site's tierfs, wrapped: for the job's daemon (-f), the attacker's move
# first, as the job's user (uid and gid substituted), then tierfs itself.
HOOK = """#!/bin/sh
case " $* " in
  *" -f {dataset} "*)
    if [ "$(id -u)" = {uid} ]; then sh -c '{move}' sh "$@"
    else setpriv --reuid={uid} --regid={gid} --clear-groups -- sh -c '{move}' sh "$@"
    fi ;;
esac
exec {tierfs} "$@"
"""


def fuse_for_every_user():
    """From here on this process and its children see a /dev/fuse that any
    user may open (the real device, 0666, in a mount namespace of their own)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True, timeout=30)
    dev = tempfile.mkdtemp(prefix="tierfs-dev-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tierfs-dev", dev], check=True,
                   timeout=30)
    st = os.stat("/dev/fuse")
    os.mknod(os.path.join(dev, "fuse"), 0o666 | 0o020000, st.st_rdev)
    os.chmod(os.path.join(dev, "fuse"), 0o666)
    subprocess.run(["mount", "--bind", os.path.join(dev, "fuse"), "/dev/fuse"], check=True,
                   timeout=30)


def setUpModule():
    global USER
    USER = harness.unprivileged_user()
    if USER is None or shutil.which("unshare") is None:
        return
    fuse_for_every_user()


def tearDownModule():
    harness.remove_made_users()


class WhoseFailure(SlurmFixture):
    def setUp(self):
        super().setUp()
        if USER is None:
            self.skipTest(f"cannot make the job's user ({harness.OTHER_USER}) with useradd")
        self.user_or_skip()
        self.uid, self.gid = USER
        # The job's user's own dataset (hers: she may change it at will).
        self.home = os.path.join(self.root, "home")
        shutil.copytree(self.dataset, os.path.join(self.home, "data"))
        subprocess.run(["chown", "-R", f"{self.uid}:{self.gid}", self.home], check=True)
        self.link = os.path.join(self.home, "ds")
        harness.as_user(USER, "ln", "-s", os.path.join(self.home, "data"), self.link)
        os.chmod(self.scratch, 0o755)

    def job(self, **extra):
        return dict({"TIERFS_DATASET": self.link, "SLURM_JOB_USER": harness.OTHER_USER,
                     "SLURM_JOB_UID": str(self.uid), "SLURM_JOB_GID": str(self.gid)}, **extra)

    def hook(self, move, dataset=None):
        """TIERFS_BIN becomes a wrapper that runs `move` (sh, as the job's user,
        with tierfs's arguments as $@) before the job's daemon starts."""
        path = os.path.join(self.root, "tierfs-hook")
        with open(path, "w") as f:
            f.write(HOOK.format(dataset=dataset or self.link, uid=self.uid, gid=self.gid,
                                move=move, tierfs=harness.tierfs_bin()))
        os.chmod(path, 0o755)
        return path

    def assert_cancelled_not_drained(self, r, says):
        self.assertEqual(r.returncode, 0, f"the node would be drained: {r.stderr}")
        self.assertTrue(os.path.exists(self.cancelled), f"not cancelled: {r.stderr}")
        with open(self.cancelled) as f:
            self.assertEqual(f.read().split(), [JOB], r.stderr)
        self.assertIn(says, r.stderr)
        with open(self.scontrol_calls) as f:  # what srun or salloc prints
            notified = [line for line in f if line.startswith(f"notify {JOB} ")]
        self.assertEqual(len(notified), 1, notified)
        self.assertIn(f"job {JOB} is cancelled", notified[0])
        self.assertIn(says, notified[0])
        self.assertFalse(harness.is_mounted(self.mnt))
        self.assertEqual(self.epilog().returncode, 0)
        self.assert_nothing_left()

    # ---- the job's: cancelled, the node kept ----

    def test_a_dataset_that_becomes_a_dangling_symlink_after_the_check_cancels_the_job(self):
        self.write_config(TIERFS_BIN=self.hook(f"ln -sfn {self.root}/nowhere {self.link}"))
        r = self.prolog(**self.job())
        self.assert_cancelled_not_drained(r, "No such file or directory")

    def test_a_dataset_of_the_users_own_fuse_mount_root_cannot_read_cancels_the_job(self):
        # Her own FUSE mount (no allow_other): root may not read it, she may.
        mnt = os.path.join(self.home, "fuse")
        harness.as_user(USER, "mkdir", mnt)
        pfs = subprocess.Popen(harness.user_command(
            USER, os.path.join(harness.BIN_DIR, "pfs-sim"), os.path.join(self.home, "data"), mnt,
            "-f", "-o", "meta_ms=0,read_ms=0"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            harness.wait_for(lambda: harness.is_mounted(mnt), what="the user's own FUSE mount")
            self.write_config(RUN_AS_USER="no")
            r = self.prolog(**self.job(TIERFS_DATASET=mnt))
            self.assert_cancelled_not_drained(r, "Permission denied")
        finally:
            harness.force_unmount(mnt)
            pfs.wait(timeout=20)

    def slow_dataset(self):
        """A dataset of 400 files behind pfs-sim (root's, allow_other) with
        20 ms per metadata request, one at a time: a scan of seconds."""
        src = os.path.join(self.root, "slow-src")
        harness.make_files(src, 400, 1024)
        mnt = os.path.join(self.root, "slow")
        pfs = harness.PfsSim(src, mnt, "meta_ms=20,meta_parallel=1,allow_other")
        self.addCleanup(lambda: (harness.force_unmount(mnt), pfs.proc.wait(timeout=20)))
        return mnt

    def attack_during_scan(self, sig, **config):
        dataset = self.slow_dataset()
        self.write_config(**config)
        # Her processes: wait for her daemon to start on the dataset, then signal it.
        attacker = subprocess.Popen(harness.user_command(
            USER, "sh", "-c", f'until pkill -{sig} -u {self.uid} -f "[ ]{dataset} "; do '
                              'sleep 0.05; done'))
        try:
            r = self.prolog(**self.job(TIERFS_DATASET=dataset))
        finally:
            attacker.kill()
            attacker.wait(timeout=10)
        for pid in harness.tierfs_pids(self.root + "/"):
            os.kill(pid, signal.SIGKILL)
        return r

    def test_the_users_processes_killing_her_daemon_during_the_scan_cancel_the_job(self):
        r = self.attack_during_scan("KILL")
        self.assert_cancelled_not_drained(r, "killed by signal 9")

    def test_the_users_processes_stopping_her_daemon_during_the_scan_cancel_the_job(self):
        r = self.attack_during_scan("STOP", MOUNT_TIMEOUT=4)
        self.assert_cancelled_not_drained(r, "was stopped (SIGSTOP) by a process of the job's user")

    def test_a_file_the_user_puts_in_her_mount_point_cancels_the_job(self):
        # The daemon runs as the job's user: the mount point is hers.
        self.write_config(TIERFS_BIN=self.hook('touch "$3/mine"'))  # -f SOURCE MOUNTPOINT
        r = self.prolog(**self.job())
        self.assert_cancelled_not_drained(r, "is not empty")

    def test_a_dataset_symlink_turned_to_the_mount_point_cancels_a_root_daemons_job(self):
        # RUN_AS_USER=no: her link is pointed at the job's mount point just
        # before the daemon opens it. That is SOURCE's failure (3), hers; it
        # was reported as the mount point's (4), which a root daemon drains on.
        self.write_config(RUN_AS_USER="no", TIERFS_BIN=self.hook(f'ln -sfn "$3" {self.link}'))
        r = self.prolog(**self.job())
        self.assert_cancelled_not_drained(r, "tierfs exited with status 3")

    def test_a_dataset_on_a_file_system_with_no_inodes_left_cancels_the_job(self):
        # Her dataset's file system is full of files (as at quota): the index
        # beside it cannot be written. A path she controls (5), not the
        # site's options (2, which drained the node).
        fs = os.path.join(self.root, "full")
        os.mkdir(fs)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=4M,nr_inodes=64,uid={self.uid},"
                        f"gid={self.gid},mode=0755", "tierfs-full", fs], check=True, timeout=30)
        self.addCleanup(lambda: subprocess.run(["umount", "-l", fs], timeout=30))
        harness.as_user(USER, "cp", "-r", os.path.join(self.home, "data"), f"{fs}/ds")
        filler = 'i=0; while : > "$1/f$i" 2>/dev/null; do i=$((i+1)); done'
        harness.as_user(USER, "sh", "-c", filler, "sh", fs)
        r = self.prolog(**self.job(TIERFS_DATASET=f"{fs}/ds"))
        self.assert_cancelled_not_drained(r, "tierfs exited with status 5")

    # ---- the node's: drained ----

    def test_the_nodes_own_failures_still_drain_it(self):
        failing = os.path.join(self.root, "tierfs-that-cannot-mount")
        with open(failing, "w") as f:  # parses options, mounts nothing
            f.write(f'#!/bin/sh\ncase " $* " in *" --version "*) exec {harness.tierfs_bin()} "$@";;'
                    f' esac\necho "tierfs: cannot mount" >&2\nexit 1\n')
        os.chmod(failing, 0o755)
        for settings, says in (
                ({"TIERFS_BIN": os.path.join(self.root, "no-tierfs")}, "is not an executable"),
                ({"TIERFS_BIN": failing}, "this node fails without the job too"),
                ({"DEFAULT_OPTIONS": "promote_threads=999"}, "tierfs refuses the site's options")):
            with self.subTest(settings=settings):
                self.write_config(**settings)
                r = self.prolog(**self.job())
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(says, r.stderr)
                self.assertFalse(os.path.exists(self.cancelled), r.stderr)
                self.assert_nothing_left()

    # ---- what the job's user is told ----

    def test_the_reason_reaches_a_batch_jobs_output_file_written_as_its_user(self):
        out = os.path.join(self.home, "slurm-%s.out" % JOB)
        r = self.prolog(**self.job(TIERFS_DATASET=os.path.join(self.home, "missing"),
                                   SLURM_JOB_STDOUT=out))
        self.assertEqual(r.returncode, 0, r.stderr)
        st = os.stat(out)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (self.uid, 0o600))
        with open(out) as f:
            text = f.read()
        self.assertIn(f"tierfs on node001: job {JOB} is cancelled: dataset", text)
        self.assertIn("does not exist or cannot be reached by uid", text)
        self.assert_nothing_left()
        # An output file the job's user may not write is not written (not as root).
        root_only = os.path.join(self.root, "root-only")
        os.mkdir(root_only, 0o700)
        os.remove(self.cancelled)
        r = self.prolog(**self.job(TIERFS_DATASET=os.path.join(self.home, "missing"),
                                   SLURM_JOB_STDOUT=os.path.join(root_only, "x.out")))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(root_only), [])
        self.assertIn("could not write to the job's output file", r.stderr)
        self.assert_nothing_left()

    def test_a_ram_capped_at_the_jobs_memory_is_said_to_srun_and_in_the_output_file(self):
        out = os.path.join(self.home, "capped.out")
        r = self.prolog(**self.job(TIERFS_OPTIONS="ram=8G", SLURM_MEM_PER_NODE="500",
                                   SLURM_JOB_STDOUT=out))
        self.assertEqual(r.returncode, 0, r.stderr)
        says = "ram=8G: the RAM tier is 500M, the job's memory on this node (--mem)"
        with open(self.scontrol_calls) as f:
            self.assertIn(f"notify {JOB} tierfs on node001: {says}\n", f.read())
        self.assertTrue(harness.is_mounted(self.mnt))
        self.assertEqual(self.epilog(SLURM_JOB_STDOUT=out, SLURM_JOB_UID=str(self.uid),
                                     SLURM_JOB_GID=str(self.gid)).returncode, 0)
        with open(out) as f:
            self.assertEqual(f.read(), f"tierfs on node001: {says}\n")
        self.assert_nothing_left()


if __name__ == "__main__":
    slurm_fixture.main()
