"""Issue 11, "Proving it": what a second, unprivileged user on the node can do
to root's tierfs. That user cannot
- write the control files (.tierfs/order, stage, prefetch, stats) of root's
  mount with allow_other, also when the kernel does not check permissions
  (fstab's drop_privileges), nor break the owner's open control files by
  holding many opens of .tierfs/stats;
- read a root-only file of SOURCE through the mount once it is in the RAM or
  the directory tier, nor read or plant chunk files in the tier directory;
- make a root daemon use a tier directory it controls;
- plant a tier, mount or state directory, or a mount name, that the root
  Slurm prolog or epilog will use: the prolog replaces what it finds, the
  daemon never serves the user's bytes.

The user is harness.OTHER_USER, made with useradd if missing (and deleted
afterwards); commands run as that user through setpriv with no
supplementary groups. Skipped unless root with useradd and setpriv.
"""
import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness
import slurm_fixture
from slurm_fixture import JOB, OTHER_JOB

USER = None  # (uid, gid) of the second user

# Run as the user: each argument "OP:PATH"; prints one [outcome, sha256 or
# null] per argument, outcome "ok" or the errno's name. A write carries what
# would steer the mount if it were taken.
PROBE = r"""
import errno, hashlib, json, os, sys
PAYLOAD = {"order": b"d0/f00000\n", "stage": b".\n", "prefetch": b"stage-in\n"}
def payload(p):
    return PAYLOAD.get(os.path.basename(p), b"x\n")
def write(p, flags):
    fd = os.open(p, os.O_WRONLY | flags)
    try:
        os.write(fd, payload(p))
    finally:
        os.close(fd)
def read(p):
    with open(p, "rb") as f:
        return f.read()
def plant(p):  # replace p (if it is there) by a file of the same size, "E" bytes
    size = os.lstat(p).st_size if os.path.lexists(p) else 4096
    if os.path.lexists(p):
        os.unlink(p)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, b"E" * size)
    finally:
        os.close(fd)
OPS = {
    "read": read, "stat": os.stat, "list": os.listdir,
    "append": lambda p: write(p, os.O_APPEND), "overwrite": lambda p: write(p, os.O_TRUNC),
    "truncate": lambda p: os.truncate(p, 0), "chmod": lambda p: os.chmod(p, 0o666),
    "mkdir": os.mkdir, "symlink": lambda p: os.symlink("/", p), "plant": plant,
}
out = []
for arg in sys.argv[1:]:
    op, path = arg.split(":", 1)
    try:
        r = OPS[op](path)
        out.append(["ok", hashlib.sha256(r).hexdigest() if isinstance(r, bytes) else None])
    except OSError as e:
        out.append([errno.errorcode.get(e.errno, str(e.errno)), None])
print(json.dumps(out))
"""

# Run as the user: opens argv[1] argv[2] times, prints how many, holds them
# until stdin is closed.
HOLD_OPEN = r"""
import os, sys
fds = [os.open(sys.argv[1], os.O_RDONLY) for _ in range(int(sys.argv[2]))]
print(len(fds), flush=True)
sys.stdin.read()
"""

REFUSED = {"EACCES", "EPERM"}
CONTROL_FILES = ("order", "stage", "prefetch", "stats")
WRITES = ("append", "overwrite", "truncate", "chmod")


def probe(*ops):
    """Runs (op, path) pairs as the user: {(op, path): outcome}, outcome "ok",
    "ok:<sha256>" for a read, or the errno's name."""
    r = harness.as_user(USER, sys.executable, "-c", PROBE, *[f"{op}:{p}" for op, p in ops])
    if r.returncode != 0:
        raise AssertionError(f"the probe failed: {r.stderr.decode(errors='replace')}")
    outcomes = json.loads(r.stdout)
    return {op: (f"ok:{digest}" if digest else outcome)
            for op, (outcome, digest) in zip(ops, outcomes)}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


MOUNT_FUSE3 = shutil.which("mount.fuse3") or "/sbin/mount.fuse3"


def mount_with_fstab_helper(source, mnt, options):
    """`mount -t fuse.tierfs SOURCE MNT -o OPTIONS` as mount(8) runs it: via
    mount.fuse3, which with drop_privileges mounts itself (with the kernel
    options it was given, nothing more) and hands tierfs /dev/fd/N. The
    CompletedProcess; the daemon runs detached."""
    env = {"PATH": f"{harness.BIN_DIR}:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    return subprocess.run([MOUNT_FUSE3, source, mnt, "-t", "tierfs", "-o", ",".join(options)],
                          env=env, capture_output=True, text=True, timeout=60)


def setUpModule():
    global USER
    USER = harness.unprivileged_user()


def tearDownModule():
    harness.remove_made_users()


class SecondUser(unittest.TestCase):
    """A dataset in a tree the second user may enter; mounts cleared afterwards."""

    def setUp(self):
        if USER is None:
            self.skipTest(f"cannot make or use a second user ({harness.OTHER_USER})")
        self.base = tempfile.mkdtemp(prefix="tierfs-users-")
        os.chmod(self.base, 0o755)
        self.src = os.path.join(self.base, "src")
        self.mnt = os.path.join(self.base, "mnt")
        self.tier = os.path.join(self.base, "tier")
        for d in (self.src, self.mnt, self.tier):
            os.mkdir(d, 0o755)
        self.mounts = []

    def tearDown(self):
        harness.tear_down(self.mounts, self.base)

    def mount(self, options, **kwargs):
        m = harness.Mount(self.src, self.mnt, options, **kwargs)
        self.mounts.append(m)
        return m

    def mount_by_fstab_helper(self, options):
        """Mounts with mount.fuse3 -o drop_privileges; skips if that cannot be done here."""
        if not os.path.exists(MOUNT_FUSE3):
            self.skipTest("mount.fuse3 is not installed (Debian package fuse3)")
        r = mount_with_fstab_helper(self.src, self.mnt, ["drop_privileges", *options])
        self.assertEqual(r.returncode, 0, r.stderr)
        harness.wait_for(lambda: harness.is_mounted(self.mnt), timeout=20, what="the mount")

    def write_file(self, rel, data, mode=0o644):
        path = os.path.join(self.src, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        return data


class ControlFiles(SecondUser):
    def setUp(self):
        super().setUp()
        self.files = harness.make_files(self.src, 8, 4096, subdirs=2)

    def assert_cannot_steer(self):
        control = os.path.join(self.mnt, ".tierfs")
        ops = [(op, os.path.join(control, name)) for name in CONTROL_FILES for op in WRITES]
        outcomes = probe(*ops, ("read", os.path.join(self.mnt, "d0", "f00000")))
        taken = {f"{op} {os.path.basename(p)}": o for (op, p), o in outcomes.items()
                 if op != "read" and o not in REFUSED}
        self.assertEqual(taken, {}, "the second user changed root's control files")
        self.assertEqual(outcomes[("read", os.path.join(self.mnt, "d0", "f00000"))],
                         "ok:" + sha256(self.files["d0/f00000"]), "the user cannot read the mount")
        s = harness.mount_stats(self.mnt)["prefetch"]
        self.assertEqual(s["mode"], "on-access")
        self.assertEqual((s["order"]["valid_lines"], s["order"]["rejected_lines"]), (0, 0))
        self.assertEqual((s["stage"]["valid_lines"], s["stage"]["rejected_lines"]), (0, 0))
        # The owner can: the refusals above were the user's, not the files'.
        with open(os.path.join(control, "prefetch"), "w") as f:
            f.write("stage-in\n")
        self.assertEqual(harness.mount_stats(self.mnt)["prefetch"]["mode"], "stage-in")

    def test_cannot_write_the_control_files_of_roots_mount(self):
        self.mount(["allow_other", "ram=16M"])
        self.assert_cannot_steer()

    def test_cannot_write_the_control_files_of_a_mount_without_default_permissions(self):
        # fstab's drop_privileges: the kernel does not check permission bits,
        # so the daemon's own check is all there is.
        self.mount_by_fstab_helper(["allow_other", "ram=16M"])
        self.assert_cannot_steer()

    def test_the_users_stats_opens_do_not_break_the_owners_open_control_files(self):
        self.mount(["allow_other", "ram=16M"])
        control = os.path.join(self.mnt, ".tierfs")
        stats = os.path.join(control, "stats")
        fds = {name: os.open(os.path.join(control, name), os.O_WRONLY | os.O_APPEND)
               for name in ("order", "stage")}
        lines = {"order": "d0/f00000\n", "stage": "d1/f00001\n"}
        failures = []
        holders = []

        def owner_writes(when):
            for name, fd in fds.items():
                try:
                    os.write(fd, lines[name].encode())
                except OSError as e:
                    failures.append(f"{name}, {when}: {e}")

        try:
            owner_writes("first")
            r = harness.as_user(USER, sys.executable, "-c",
                                "import os, sys\nfor _ in range(1100): os.stat(sys.argv[1])",
                                stats, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            owner_writes("after the user's 1100 lookups of stats")
            # 1200 opens held at once, in three processes (below any open-file limit).
            for _ in range(3):
                holders.append(subprocess.Popen(
                    harness.user_command(USER, sys.executable, "-c", HOLD_OPEN, stats, "400"),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            for p in holders:
                ready, _, _ = select.select([p.stdout], [], [], 30)
                self.assertTrue(ready, "the user's opens of stats did not finish within 30 s")
                if p.stdout.readline().strip() != b"400":
                    p.kill()
                    self.fail(f"the user's opens of stats failed: {p.communicate(timeout=10)[1]}")
            owner_writes("while the user holds 1200 opens of stats")
        finally:
            for p in holders:
                p.stdin.close()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                p.stdout.close()
                p.stderr.close()
            owner_writes("after the user closed them")
            for fd in fds.values():
                os.close(fd)
        self.assertEqual(failures, [], "the owner's open control files stopped working")
        s = harness.mount_stats(self.mnt)["prefetch"]
        self.assertEqual((s["order"]["valid_lines"], s["stage"]["valid_lines"]), (4, 4))


class TierCopies(SecondUser):
    """Root-only files on SOURCE stay root-only through the mount, in the RAM
    tier and in the directory tier."""

    def setUp(self):
        super().setUp()
        os.chmod(self.tier, 0o755)  # accepted by the daemon: only root may write to it
        self.public = self.write_file("public", os.urandom(30_000))
        # RAM is 1 MiB, first-fit: secret_ram and then the small files go to
        # RAM, secret_dir (900 KB) no longer fits there and goes to the tier.
        self.secrets = {"secret_ram": self.write_file("secret_ram", os.urandom(700_000), 0o600),
                        "secret_dir": self.write_file("secret_dir", os.urandom(900_000), 0o600),
                        "private/note": self.write_file("private/note", os.urandom(20_000))}
        os.chmod(os.path.join(self.src, "private"), 0o700)
        self.options = ["allow_other", "ram=1M", f"tier={self.tier}:64M"]

    def promote_as_root(self):
        for rel in ("secret_ram", "secret_dir", "private/note", "public"):
            data = self.secrets.get(rel, self.public)
            self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), data, rel)
        harness.wait_for(lambda: harness.mount_stats(self.mnt)["promotions"]["files_resident"] == 4,
                         what="the four files in the tiers")
        used = [t["used"] for t in harness.mount_stats(self.mnt)["tiers"]]
        self.assertEqual(used, [750_000, 900_000], "not one secret in each tier")

    def assert_user_cannot_read_them(self, daemon_pid, kernel_checks=True):
        mnt_ops = [("read", os.path.join(self.mnt, rel)) for rel in self.secrets]
        mnt_ops += [("read", os.path.join(self.mnt, "public"))]
        if kernel_checks:
            # Without default_permissions the kernel walks entries it has
            # cached (root looked them up) without asking the daemon: names
            # and attributes may show there; contents never (checked at open).
            mnt_ops += [("stat", os.path.join(self.mnt, "private", "note"))]
        data_dir = os.path.join(self.tier, "data")
        chunks = sorted(os.listdir(data_dir))
        self.assertEqual(len(chunks), 1, chunks)
        tier_ops = [("read", os.path.join(data_dir, c)) for c in chunks]
        tier_ops += [("read", os.path.join(self.tier, n)) for n in os.listdir(self.tier)
                     if n != "data"]
        tier_ops += [("plant", os.path.join(data_dir, "c999")),
                     ("mkdir", os.path.join(self.tier, "x"))]
        ram_ops = [("read", f"/proc/{daemon_pid}/mem")]
        outcomes = probe(*mnt_ops, *tier_ops, *ram_ops)
        self.assertEqual(outcomes.pop(("read", os.path.join(self.mnt, "public"))),
                         "ok:" + sha256(self.public), "the user cannot read the mount at all")
        leaks = {f"{op} {p}": o for (op, p), o in outcomes.items() if o not in REFUSED}
        self.assertEqual(leaks, {}, "the second user got at root-only bytes or wrote to the tier")

    def test_root_only_files_stay_root_only_in_every_tier(self):
        m = self.mount(self.options)
        self.promote_as_root()
        self.assert_user_cannot_read_them(m.proc.pid)

    def test_root_only_files_stay_root_only_when_mounted_from_fstab(self):
        # mount.fuse3 -o drop_privileges passes only the kernel options given:
        # default_permissions is not among them unless fstab says so.
        self.mount_by_fstab_helper(self.options)
        self.promote_as_root()
        pids = harness.tierfs_pids(self.base + "/")
        self.assertEqual(len(pids), 1, pids)
        self.assert_user_cannot_read_them(pids[0], kernel_checks=False)

    def test_a_daemon_with_umask_0_keeps_its_tier_unwritable_by_others(self):
        m = self.mount(self.options, umask=0)
        self.promote_as_root()
        data_dir = os.path.join(self.tier, "data")
        chunks = sorted(os.listdir(data_dir))
        outcomes = probe(*[("plant", os.path.join(data_dir, c)) for c in chunks])
        m.close()
        # Whatever the user managed, the next mount serves SOURCE's bytes.
        self.mount([f"tier={self.tier}:64M"])
        files = dict(self.secrets, public=self.public)
        served = {rel: harness.read_file(os.path.join(self.mnt, rel)) == data
                  for rel, data in files.items()}
        self.assertEqual(served, dict.fromkeys(files, True), "planted bytes were served")
        mode = os.stat(data_dir).st_mode & 0o7777
        planted = {c: o for (_, c), o in outcomes.items() if o not in REFUSED}
        self.assertEqual((oct(mode & 0o022), planted), (oct(0), {}),
                         f"{data_dir} (mode {mode:o}) lets others plant chunks")

    def test_a_root_daemon_refuses_a_tier_the_user_controls(self):
        self.write_file("f", b"data")
        shared = os.path.join(self.base, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o1777)  # like /tmp
        roots = os.path.join(self.base, "roots-tier")
        os.mkdir(roots, 0o700)
        open_dir = os.path.join(self.base, "open")
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)
        os.mkdir(os.path.join(open_dir, "tier"), 0o700)
        r = harness.as_user(USER, "sh", "-c", 'mkdir -m 700 "$1/users-tier" &&'
                            ' mkdir "$1/userdir" && ln -s "$2" "$1/link"', "sh", shared, roots)
        self.assertEqual(r.returncode, 0, r.stderr)
        os.mkdir(os.path.join(shared, "userdir", "tier"), 0o700)  # root's, in the user's directory
        cases = {"owned by the user": os.path.join(shared, "users-tier"),
                 "in a directory of the user's": os.path.join(shared, "userdir", "tier"),
                 "a symlink of the user's": os.path.join(shared, "link"),
                 "in a directory anyone may change": os.path.join(open_dir, "tier")}
        for why, path in cases.items():
            with self.subTest(why):
                r = harness.run_tierfs(self.src, self.mnt, "-o", f"tier={path}:16M")
                mounted = harness.is_mounted(self.mnt)
                harness.force_unmount(self.mnt)
                self.assertFalse(mounted, f"mounted with tier={path}")
                # 5: a tier path the command line names that cannot be used (before the
                # scan for a symlink, at the tier's open for the rest).
                self.assertEqual(r.returncode, 5, r.stderr)
                self.assertIn(f"tier '{path}' is refused", r.stderr)


class PlantedSlurmPaths(slurm_fixture.SlurmFixture):
    """The root prolog makes directories where the second user may have been
    first; what the user planted there is never used, the daemon never serves
    the user's bytes."""

    def setUp(self):
        super().setUp()
        self.user = self.user_or_skip()
        os.chmod(self.scratch, 0o1777)  # like /tmp
        self.doctored = ""

    def doctored_tier(self):
        """A real tier of the dataset (journal and all) whose data files then got
        "E" bytes: what a user who knows the dataset can build. Readable by all."""
        tier = os.path.join(self.root, "doctored")
        os.mkdir(tier, 0o700)
        mnt = os.path.join(self.root, "doctor-mnt")
        os.mkdir(mnt)
        with harness.Mount(self.dataset, mnt, [f"tier={tier}:64M"]) as m:
            for rel in self.files:
                harness.read_file(os.path.join(mnt, rel))
            # Committed on a pool thread after the reads (fdatasync, journal
            # line): a commit still queued at unmount is dropped.
            harness.wait_for(
                lambda: m.stats()["promotions"]["files_resident"] == len(self.files),
                what="every file resident")
        os.rmdir(mnt)
        data = os.path.join(tier, "data")
        chunks = os.listdir(data)
        self.assertEqual(len(chunks), len(self.files))
        for c in chunks:
            path = os.path.join(data, c)
            with open(path, "r+b") as f:
                f.write(b"E" * os.path.getsize(path))
        subprocess.run(["chmod", "-R", "a+rX", tier], check=True, timeout=30)
        return tier

    def plant(self, script, *args):
        """Runs a shell script as the user; $D is the doctored tier, if made."""
        r = harness.as_user(self.user, "sh", "-c", f'D="$1"; shift; {script}', "sh",
                            self.doctored, *args)
        self.assertEqual(r.returncode, 0, r.stderr)

    def clear(self, *paths):
        """After a case: what the user planted at paths, the job's epilog
        (whatever state it left), then the rest of paths."""
        for p in paths:
            if os.path.islink(p) or os.path.isfile(p):
                os.unlink(p)
        self.epilog()
        for p in paths:
            if os.path.exists(p):
                shutil.rmtree(p)

    def assert_mounted_with_sources_bytes(self):
        self.assertTrue(harness.is_mounted(self.mnt))
        stats = harness.mount_stats(self.mnt)
        self.assertEqual([t["path"] for t in stats["tiers"] if t["kind"] == "directory"],
                         [self.tier])
        wrong = [rel for rel, data in self.files.items()
                 if harness.read_file(os.path.join(self.mnt, rel)) != data]
        self.assertEqual(wrong, [], "files served with other bytes than SOURCE's")

    def assert_roots(self, *dirs):
        """Each of dirs is a real directory of root's that the user cannot add to."""
        for d in dirs:
            st = os.lstat(d)
            self.assertEqual((st.st_uid, st.st_mode & 0o022, os.path.islink(d)), (0, 0, False), d)
        outcomes = probe(*[(op, os.path.join(d, OTHER_JOB)) for d in dirs
                           for op in ("mkdir", "symlink")])
        taken = {f"{op} {p}": o for (op, p), o in outcomes.items() if o not in REFUSED}
        self.assertEqual(taken, {}, "the user made a name the next job's prolog will use")

    def test_a_planted_tier_root_is_replaced(self):
        self.doctored = self.doctored_tier()
        tier_root = os.path.dirname(self.tier)
        victim = os.path.join(self.root, "victim")  # root's, the target of a planted symlink
        os.makedirs(os.path.join(victim, JOB))
        with open(os.path.join(victim, JOB, "precious"), "w") as f:
            f.write("keep me")
        plants = {
            "a directory": f'mkdir -m 777 "$1" && cp -r "$D" "$1/{JOB}" && chmod -R a+rwX "$1"',
            "a symlink to the user's tiers": f'mkdir -m 777 "$2" && cp -r "$D" "$2/{JOB}" && '
                                             f'chmod -R a+rwX "$2" && ln -s "$2" "$1"',
            "a symlink to root's directory": f'ln -s "{victim}" "$1"',
            "a file": 'cp "$D/journal" "$1"',
        }
        bait = os.path.join(self.scratch, "bait")
        for what, script in plants.items():
            with self.subTest(what):
                try:
                    self.plant(script, tier_root, bait)
                    r = self.prolog()
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertIn("not by root: removing it", r.stderr)
                    self.assert_mounted_with_sources_bytes()
                    self.assert_roots(tier_root)
                    st = os.lstat(self.tier)
                    self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o700))
                    self.assertEqual(self.epilog().returncode, 0)
                    self.assert_nothing_left()
                finally:
                    self.clear(tier_root, bait)
        with open(os.path.join(victim, JOB, "precious")) as f:
            self.assertEqual(f.read(), "keep me")

    def test_an_epilog_follows_no_planted_symlink(self):
        # Slurm runs the epilog after every job, also one whose prolog did
        # nothing (no dataset): the roots may then still be what the user made.
        state_root = os.path.join(self.scratch, "tierfs-state")
        self.write_config(STATE_ROOT=state_root)
        victim = os.path.join(self.root, "victim")  # root's, with an entry named as the job
        precious = os.path.join(victim, JOB, "precious")
        for name, root_dir in (("TIER_ROOT", os.path.dirname(self.tier)),
                               ("STATE_ROOT", state_root)):
            with self.subTest(name):
                os.makedirs(os.path.dirname(precious), exist_ok=True)
                with open(precious, "w") as f:
                    f.write("keep me")
                try:
                    self.plant('ln -s "$1" "$2"', victim, root_dir)
                    self.assertEqual(self.prolog(TIERFS_DATASET=None).returncode, 0)
                    r = self.epilog()
                    self.assertTrue(os.path.exists(precious),
                                    f"the epilog deleted {precious} through {root_dir}: {r.stderr}")
                finally:
                    if os.path.islink(root_dir):
                        os.unlink(root_dir)

    def test_planted_mount_and_state_roots_are_replaced(self):
        # A site that keeps them in a directory anyone may write to (sticky, as /tmp).
        mount_root = os.path.join(self.scratch, "tierfs-mnt")
        state_root = os.path.join(self.scratch, "tierfs-state")
        self.write_config(MOUNT_ROOT=mount_root, STATE_ROOT=state_root)
        self.mnt = os.path.join(mount_root, JOB)
        self.state = os.path.join(state_root, JOB)
        # Another mount of root's, which a planted state record points to.
        other = os.path.join(self.root, "other-mnt")
        os.mkdir(other)
        other_mount = harness.Mount(self.dataset, other)
        try:
            plants = {
                "directories": 'for d in "$1" "$2"; do mkdir -m 777 "$d" "$d/$4" || exit 1; done;'
                               ' : > "$1/$4/squatter"; echo 1 > "$2/$4/pid";'
                               ' echo "$3" > "$2/$4/mount"',
                "symlinks": 'mkdir -m 777 "$5" "$5/m" "$5/s" "$5/m/$4" "$5/s/$4" &&'
                            ' echo "$3" > "$5/s/$4/mount" && ln -s "$5/m" "$1" &&'
                            ' ln -s "$5/s" "$2"',
            }
            bait = os.path.join(self.scratch, "bait")
            for what, script in plants.items():
                with self.subTest(what):
                    try:
                        self.plant(script, mount_root, state_root, other, JOB, bait)
                        r = self.prolog()
                        self.assertEqual(r.returncode, 0, r.stderr)
                        self.assertIn("not by root: removing it", r.stderr)
                        self.assert_mounted_with_sources_bytes()
                        self.assert_roots(mount_root, state_root)
                        if os.path.exists(bait):  # the prolog wrote nothing there
                            self.assertEqual(harness.mounts_below(bait), [])
                            self.assertEqual(sorted(os.listdir(os.path.join(bait, "s", JOB))),
                                             ["mount"])
                        self.assertEqual(self.epilog().returncode, 0)
                        self.assertTrue(harness.is_mounted(other),
                                        "the epilog unmounted another mount")
                        self.assert_nothing_left(other_mount.proc.pid)
                    finally:
                        self.clear(mount_root, state_root, bait)
        finally:
            other_mount.close()

    def test_the_users_job_cannot_take_another_jobs_mount_name(self):
        uid, gid = self.user
        self.write_config(RUN_AS_USER="no")  # root's daemon, allow_other for the job's user
        job = {"SLURM_JOB_USER": harness.OTHER_USER, "SLURM_JOB_UID": str(uid),
               "SLURM_JOB_GID": str(gid)}
        r = self.prolog(TIERFS_MOUNT=OTHER_JOB, **job)
        self.assertEqual(r.returncode, 0, r.stderr)
        theirs = os.path.join(self.mount_root, OTHER_JOB)
        self.assertFalse(harness.is_mounted(theirs))
        rel, data = next(iter(self.files.items()))
        mine = os.path.join(self.mnt, OTHER_JOB)
        self.assertEqual(probe(("read", os.path.join(mine, rel))),
                         {("read", os.path.join(mine, rel)): "ok:" + sha256(data)})
        self.assert_roots(self.mount_root, os.path.dirname(self.tier), os.path.dirname(self.state))
        r = self.prolog(job=OTHER_JOB)  # root's job
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("stale", r.stderr)
        self.assertEqual(self.epilog(**job).returncode, 0)
        self.assertTrue(harness.is_mounted(theirs), "the user's epilog unmounted another job")
        self.assertEqual(harness.read_file(os.path.join(theirs, rel)), data)
        self.assertEqual(self.epilog(job=OTHER_JOB).returncode, 0)
        self.assert_nothing_left()


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIPPED: the second user is made with useradd and run with setpriv: needs root")
        sys.exit(harness.SKIP)
    os.umask(0o022)  # what the tests make must be readable by the second user unless chmodded
    harness.main()
