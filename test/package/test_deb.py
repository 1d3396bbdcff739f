"""The Debian package, end to end on this machine: tools/package builds it
from a clean Release build (lintian: no error), `dpkg -i` installs it, then
  - `mount -t fuse.tierfs SRC MNT -o ram=...` mounts through /usr/bin/tierfs
    (in a private mount namespace whose /usr/local/bin is empty, so neither a
    developer's `tools/install` nor anything else shadows the package),
  - the installed tierfs@.service's command line runs as systemd would run it
    (Type=notify: READY=1 once mounted; SIGTERM stops it cleanly),
  - /usr/bin/python3 imports tierfs_hint from dist-packages (with torch too,
    when python3-torch is installed),
and `dpkg -r` removes it leaving nothing behind (no /usr/bin/tierfs, no file
of the package, no byte code, no plugstack line) but the Slurm prolog and
epilog hooks, configuration files that then do nothing (exit 0), which
`dpkg --purge` removes. The package is purged even when a check fails.

Slow (a full Release build) and it installs a package on the machine, so it
runs only when asked: TIERFS_PACKAGE_TEST=1 (ctest -L package). Skipped (77)
otherwise, and when not root, without dpkg or FUSE, or when a package named
tierfs is already installed (it is never replaced). --deb PATH tests a built
package instead of building one.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness  # noqa: E402
import systemd_unit  # noqa: E402

DEB = None
UNIT = "/lib/systemd/system/tierfs@.service"
CLONE_NEWNS = 0x00020000


def sh(*cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def installed(package="tierfs", state="installed"):
    r = sh("dpkg-query", "-W", "-f=${Status}", package, check=False)
    return r.stdout.endswith(f" {state}")


def private_usr_local_bin():
    """From here on this process sees an empty /usr/local/bin: mount.fuse3
    finds the package's /usr/bin/tierfs (the real system is not changed)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    sh("mount", "--make-rprivate", "/")
    empty = tempfile.mkdtemp(prefix="tierfs-empty-bin-")
    sh("mount", "--bind", empty, "/usr/local/bin")


class DebianPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tierfs-deb-")
        deb = DEB
        if deb is None:
            jobs = os.environ.get("TIERFS_PACKAGE_JOBS", str(os.cpu_count() or 1))
            r = sh(os.path.join(ROOT, "tools", "package"), "--build-dir",
                   os.path.join(cls.tmp, "build"), "-j", jobs)
            deb = r.stdout.strip().splitlines()[-1]
            sys.stderr.write(r.stderr[-3000:])
        cls.deb = deb
        r = sh("dpkg-deb", "-c", deb)
        # "./usr/..." -> "/usr/..."; a symlink's line ends "NAME -> TARGET"
        cls.contents = [line.split(" -> ")[0].split()[-1][1:] for line in r.stdout.splitlines()]
        sh("dpkg", "-i", deb)
        cls.addClassCleanup(cls.remove)
        cls.files = [p for p in sh("dpkg", "-L", "tierfs").stdout.split() if os.path.isfile(p)]
        private_usr_local_bin()

    @classmethod
    def remove(cls):
        if installed() or installed("tierfs", "config-files"):
            sh("dpkg", "--purge", "tierfs", check=False)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.work = harness.workdir()
        self.src, self.mnt = self.work.__enter__()
        self.addCleanup(self.work.__exit__, None, None, None)
        self.data = harness.make_files(self.src, 12, 16 * 1024)

    def check_mount_serves(self):
        self.assertTrue(harness.is_mounted(self.mnt))
        for rel, data in self.data.items():
            with open(os.path.join(self.mnt, rel), "rb") as f:
                self.assertEqual(f.read(), data)

    def test_files_where_debian_looks(self):
        for path in ("/usr/bin/tierfs", "/usr/share/man/man1/tierfs.1.gz", UNIT,
                     "/usr/lib/tierfs/slurm/tierfs-prolog", "/usr/lib/tierfs/slurm/tierfs-epilog",
                     "/usr/lib/tierfs/slurm/tierfs_spank.so",
                     "/usr/lib/tierfs/slurm/plugstack-tierfs.conf",
                     "/etc/slurm/prolog.d/tierfs", "/etc/slurm/epilog.d/tierfs",
                     "/etc/slurm/plugstack.conf.d/tierfs.conf",
                     "/usr/lib/tmpfiles.d/tierfs-slurm.conf",
                     "/usr/share/doc/tierfs/copyright", "/usr/share/doc/tierfs/README.md",
                     "/usr/lib/python3/dist-packages/tierfs_hint.py"):
            self.assertIn(path, self.contents)
        r = sh("/usr/bin/tierfs", "--version")
        self.assertRegex(r.stdout, r"^tierfs \d+\.\d+")
        # Not readable by others: the kernel makes a user's daemon not dumpable at exec.
        self.assertEqual(os.stat("/usr/bin/tierfs").st_mode & 0o7777, 0o711)
        depends = sh("dpkg-deb", "-f", self.deb, "Depends").stdout
        for dep in ("fuse3", "libfuse3-3", "libsystemd0"):
            self.assertIn(dep, depends)
        # The SPANK plugin uses the symbols of the Slurm program loading it: a
        # site without Slurm installs the package without Slurm's library.
        self.assertNotIn("slurm", depends)
        # The installed units and scripts name the installed daemon.
        for path, text in ((UNIT, "ExecStart=/usr/bin/tierfs "),
                           ("/usr/lib/tierfs/slurm/tierfs-slurm-lib.bash", "TIERFS_BIN=/usr/bin/tierfs"),
                           ("/usr/lib/tierfs/slurm/slurm.conf.example",
                            "\n#TIERFS_BIN=/usr/bin/tierfs\n"),
                           ("/etc/slurm/prolog.d/tierfs", "exec /usr/lib/tierfs/slurm/tierfs-prolog"),
                           ("/etc/slurm/epilog.d/tierfs", "exec /usr/lib/tierfs/slurm/tierfs-epilog"),
                           ("/etc/slurm/plugstack.conf.d/tierfs.conf",
                            "\noptional /usr/lib/tierfs/slurm/tierfs_spank.so\n"),
                           ("/usr/lib/tierfs/slurm/plugstack-tierfs.conf",
                            "\noptional /usr/lib/tierfs/slurm/tierfs_spank.so\n")):
            with open(path) as f:
                self.assertIn(text, f.read())

    def test_mount_t_fuse_tierfs(self):
        r = sh("/usr/bin/mount", "-t", "fuse.tierfs", self.src, self.mnt, "-o", "ram=64M",
               check=False, env={"LANG": "C.UTF-8"})
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            self.check_mount_serves()
            pids = harness.tierfs_pids(self.mnt)
            self.assertEqual(len(pids), 1)
            self.assertEqual(os.readlink(f"/proc/{pids[0]}/exe"), "/usr/bin/tierfs")
        finally:
            sh("umount", self.mnt, check=False)

    def test_the_installed_unit_command_line(self):
        notify = systemd_unit.NotifySocket()
        self.addCleanup(notify.close)
        env = {"SOURCE": self.src, "MOUNTPOINT": self.mnt, "OPTIONS": "ram=64M"}
        argv = systemd_unit.exec_start(UNIT, env)
        self.assertEqual(argv[0], "/usr/bin/tierfs")
        log = tempfile.TemporaryFile(mode="w+")
        self.addCleanup(log.close)
        proc = systemd_unit.start(argv, notify, log)
        try:
            self.assertIsNotNone(notify.wait_for("READY"), "no READY=1")
            self.check_mount_serves()
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=60), 0)
            self.assertFalse(harness.is_mounted(self.mnt))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def test_debians_python3_imports_the_helper(self):
        code = "import tierfs_hint; print(tierfs_hint.__file__, tierfs_hint.__version__)"
        r = sh("/usr/bin/python3", "-c", code, cwd="/")
        self.assertTrue(r.stdout.startswith("/usr/lib/python3/dist-packages/tierfs_hint.py"))
        if sh("/usr/bin/python3", "-c", "import torch", check=False).returncode == 0:
            sh("/usr/bin/python3", "-c", "import torch, tierfs_hint", cwd="/")

    def test_z_dpkg_r_leaves_only_hooks_that_do_nothing(self):  # last: tests run by name
        hooks = ["/etc/slurm/prolog.d/tierfs", "/etc/slurm/epilog.d/tierfs"]
        sh("dpkg", "-r", "tierfs")
        self.assertFalse(installed())
        self.assertFalse(os.path.exists("/usr/bin/tierfs"))
        left = [p for p in self.files if os.path.lexists(p)]
        self.assertEqual(sorted(left), sorted(hooks))  # configuration files: kept until --purge
        self.assertFalse(os.path.lexists("/etc/slurm/plugstack.conf.d/tierfs.conf"))
        for hook in hooks:  # as slurmd runs them: no PATH, a job's variables
            r = subprocess.run([hook], env={"SLURM_JOB_ID": "1", "SLURM_JOB_UID": "0"},
                               capture_output=True, text=True, timeout=30)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""), hook)
        pycache = "/usr/lib/python3/dist-packages/__pycache__"
        if os.path.isdir(pycache):
            self.assertEqual([f for f in os.listdir(pycache) if f.startswith("tierfs_hint.")], [])
        sh("dpkg", "--purge", "tierfs")
        self.assertEqual([p for p in hooks if os.path.lexists(p)], [])


def skip_reason():
    if os.environ.get("TIERFS_PACKAGE_TEST") != "1":
        return ("set TIERFS_PACKAGE_TEST=1 to run it (slow: a Release build; installs and "
                "removes the package tierfs on this machine)")
    if os.geteuid() != 0:
        return "needs root (dpkg -i, mount)"
    for tool in ("dpkg", "dpkg-deb", "/sbin/mount.fuse3"):
        if shutil.which(tool) is None:
            return f"{tool} is missing"
    if installed():
        return "a package named tierfs is installed already; this test never replaces it"
    return harness.fuse_usable()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir")  # accepted for ctest's uniform command line
    parser.add_argument("--deb", help="test this .deb instead of building one")
    args, rest = parser.parse_known_args()
    DEB = os.path.abspath(args.deb) if args.deb else None
    reason = skip_reason()
    if reason:
        print(f"SKIPPED: {reason}")
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
