"""mount(8) compatibility: `mount -t fuse.tierfs SOURCE MNT -o ...` and fstab lines.

mount(8) runs /sbin/mount.fuse3, which runs `tierfs SOURCE MNT -o OPTIONS`
through /bin/sh with mount's sanitized environment (no PATH: the shell's
default one, which has /usr/local/bin). So the test works in a private mount
namespace where /usr/local/bin is a directory holding only the built tierfs:
the real system (its /usr/local/bin, its /etc/fstab) is never touched, and
fstab lines come from a temporary file (mount -T). Skipped unless root with
mount.fuse3 installed.
"""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import harness

CLONE_NEWNS = 0x00020000
MOUNT_FUSE3 = "/sbin/mount.fuse3"
BASE_ENV = {"LANG": "C.UTF-8"}  # mount(8) drops PATH for its helpers anyway


def enter_private_mount_namespace(bin_dir):
    """From here on this process (and its children) see /usr/local/bin = bin_dir."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    subprocess.run(["mount", "--bind", bin_dir, "/usr/local/bin"], check=True)


def mount(*args):
    return subprocess.run(["/usr/bin/mount", *args], env=BASE_ENV, capture_output=True,
                          text=True, timeout=30)


def mount_fields(mnt):
    """(fstype, source, mount options, super options) of mnt from mountinfo."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == mnt:
                sep = fields.index("-")
                return fields[sep + 1], fields[sep + 2], fields[5], fields[sep + 3]
    return None


class MountHelper(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bin = tempfile.mkdtemp(prefix="tierfs-usrlocalbin-")
        os.symlink(harness.tierfs_bin(), os.path.join(cls.bin, "tierfs"))
        enter_private_mount_namespace(cls.bin)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["umount", "/usr/local/bin"])
        shutil.rmtree(cls.bin, ignore_errors=True)

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="tierfs-mh-")
        self.src = os.path.join(self.root, "src")
        self.files = harness.make_files(self.src, 12, 32 * 1024)
        self.tier = os.path.join(self.root, "nvme")
        os.mkdir(self.tier)
        self.mnts = []

    def mountpoint(self, name="mnt"):
        path = os.path.join(self.root, name)
        os.mkdir(path)
        self.mnts.append(path)
        return path

    def tearDown(self):
        for mnt in self.mnts:
            harness.force_unmount(mnt)
        for pid in harness.tierfs_pids(self.root + "/"):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)

    def assert_serves(self, mnt):
        for rel, data in self.files.items():
            self.assertEqual(harness.read_file(os.path.join(mnt, rel)), data)

    def assert_unmounts(self, mnt):
        r = subprocess.run(["umount", mnt], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(harness.is_mounted(mnt))
        harness.wait_for(lambda: harness.tierfs_pids(mnt) == [],
                         what="the daemon to exit after umount")

    def test_mount_t_fuse_tierfs_with_tiers_and_fstab_words(self):
        mnt = self.mountpoint()
        opts = (f"ram=16M,tier={self.tier}:64M,chunk_size=1M,"
                "nofail,_netdev,x-systemd.automount,x-systemd.idle-timeout=60,noauto,"
                "comment=dataset,defaults")
        r = mount("-t", "fuse.tierfs", self.src, mnt, "-o", opts)
        self.assertEqual(r.returncode, 0, r.stderr)
        fstype, source, _, _ = mount_fields(mnt)
        self.assertEqual((fstype, source), ("fuse.tierfs", self.src))
        self.assert_serves(mnt)
        stats = harness.mount_stats(mnt)
        self.assertEqual(sorted((t["kind"], t["budget"]) for t in stats["tiers"]),
                         [("directory", 64 << 20), ("memory", 16 << 20)])
        self.assert_unmounts(mnt)

    def test_kernel_options_pass_through(self):
        mnt = self.mountpoint()
        r = mount("-t", "fuse.tierfs", "-o", "ro,noatime,nodev,nosuid,allow_other",
                  self.src, mnt)
        self.assertEqual(r.returncode, 0, r.stderr)
        _, _, mount_opts, super_opts = mount_fields(mnt)
        for o in ("ro", "noatime", "nodev", "nosuid"):
            self.assertIn(o, mount_opts.split(","))
        self.assertIn("allow_other", super_opts.split(","))
        self.assert_serves(mnt)
        self.assert_unmounts(mnt)

    def test_fstab_lines(self):
        on_demand, at_boot = self.mountpoint("on-demand"), self.mountpoint("at-boot")
        fstab = os.path.join(self.root, "fstab")
        with open(fstab, "w") as f:
            f.write("# a test fstab, never /etc/fstab\n"
                    f"{self.src} {on_demand} fuse.tierfs "
                    "ram=1G,nofail,_netdev,x-systemd.automount,noauto 0 0\n"
                    f"{self.src} {at_boot} fuse.tierfs "
                    f"defaults,tier={self.tier}:1G,_netdev,nofail 0 0\n")
        r = mount("-T", fstab, on_demand)  # `mount MOUNTPOINT` with this fstab
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(harness.is_mounted(on_demand))
        self.assertFalse(harness.is_mounted(at_boot))
        r = mount("-a", "-T", fstab)  # what boot does; skips noauto and what is mounted
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(harness.is_mounted(at_boot))
        self.assert_serves(on_demand)
        self.assert_serves(at_boot)
        self.assert_unmounts(on_demand)
        self.assert_unmounts(at_boot)

    def test_a_bad_option_fails_the_mount_and_says_why(self):
        mnt = self.mountpoint()
        r = mount("-t", "fuse.tierfs", self.src, mnt, "-o", "ram=lots")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("option 'ram': 'lots' is not a size", r.stderr)
        self.assertFalse(harness.is_mounted(mnt))
        self.assertEqual(harness.tierfs_pids(self.root + "/"), [])

    def test_cmake_install_puts_tierfs_where_mount_fuse3_looks(self):
        build = os.path.dirname(harness.BIN_DIR)
        prefix = os.path.join(self.root, "prefix")
        r = subprocess.run(["cmake", "--install", build, "--prefix", prefix],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for rel in ("bin/tierfs", "share/man/man1/tierfs.1.gz", "lib/tierfs/slurm/tierfs-prolog",
                    "lib/tierfs/slurm/tierfs-epilog", "lib/systemd/system/tierfs@.service",
                    "lib/tierfs/python/tierfs_hint.py", "share/doc/tierfs/copyright"):
            self.assertTrue(os.path.exists(os.path.join(prefix, rel)), rel)
        self.assertTrue(os.access(os.path.join(prefix, "bin/tierfs"), os.X_OK))


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIPPED: mount -t fuse.tierfs and fstab mounts are made by root; this is not root")
        sys.exit(harness.SKIP)
    if not os.path.exists(MOUNT_FUSE3):
        print(f"SKIPPED: {MOUNT_FUSE3} is missing (Debian package fuse3)")
        sys.exit(harness.SKIP)
    harness.main()
