"""A root daemon with allow_other serves every user of the node as SOURCE
would serve each (permissions=source, its default there), played with a
second and a third user:
- an ACL entry that refuses one user a file of mode 0644 refuses it through
  the mount too, while the third user reads it;
- a chmod 600 on SOURCE is honoured once the answers are revalidated
  (.tierfs/revalidate), within perm_ttl when that is set, and within the
  default perm_ttl (an answer that allowed is not kept forever);
- a user's supplementary groups are part of the answer: an ACL entry that
  refuses group proj refuses the user's processes that are in proj, even
  after the same user read the file from a process that is not;
- a caller whose groups cannot be read (no pid in the daemon's pid
  namespace) is refused, since such an ACL entry could not be applied;
- a directory's ACL refuses a listing as on SOURCE;
- control_owner= lets the job's user steer the root daemon (write
  .tierfs/order) and nobody else;
- a daemon run as a user is not dumpable: that user's other processes cannot
  read its memory (its /proc entries are root's), nor its environment nor
  attach to it with ptrace while it scans a slow SOURCE.

Skipped unless root with useradd, setpriv and setfacl."""
import grp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import harness

BOB = CAROL = None  # (uid, gid)
PROJ = None  # gid of a group made for the tests
PROJ_NAME = "tierfs-t-proj"

# Run as a user against process argv[1]: its environment, its open files,
# and PTRACE_ATTACH (detached at once if taken); prints {what: "ok" or the
# errno's name}.
ATTACH = r"""
import ctypes, errno, json, os, sys
pid = int(sys.argv[1])
out = {}
for what, probe in (("environ", lambda: open(f"/proc/{pid}/environ", "rb").read()),
                    ("fd", lambda: os.listdir(f"/proc/{pid}/fd"))):
    try:
        probe()
        out[what] = "ok"
    except OSError as e:
        out[what] = errno.errorcode.get(e.errno, str(e.errno))
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
    os.waitpid(pid, 0x40000000)  # __WALL
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    out["ptrace"] = "ok"
else:
    out["ptrace"] = errno.errorcode.get(ctypes.get_errno(), "?")
print(json.dumps(out))
"""

# Run as a user: each argument "OP:PATH"; prints "ok" or the errno's name per line.
PROBE = r"""
import errno, os, sys
for arg in sys.argv[1:]:
    op, path = arg.split(":", 1)
    try:
        if op == "read":
            with open(path, "rb") as f:
                f.read()
        elif op == "list":
            os.listdir(path)
        elif op == "order":
            with open(path, "a") as f:
                f.write("f0\n")
        print("ok")
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))
"""


def probe(user, *ops, groups=()):
    """Runs PROBE as `user`, with the supplementary `groups` (gids) only."""
    cmd = [sys.executable, "-c", PROBE, *[f"{op}:{p}" for op, p in ops]]
    if groups:
        uid, gid = user
        r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}",
                            "--groups=" + ",".join(str(g) for g in groups), "--", *cmd],
                           capture_output=True, timeout=30)
    else:
        r = harness.as_user(user, *cmd)
    if r.returncode != 0:
        raise AssertionError(f"the probe failed: {r.stderr.decode(errors='replace')}")
    return r.stdout.decode().split()


def setUpModule():
    global BOB, CAROL, PROJ
    if shutil.which("setfacl") is None:
        return
    BOB = harness.unprivileged_user()
    CAROL = harness.unprivileged_user("tierfs-t-third")
    if BOB is not None and shutil.which("groupadd") is not None:
        try:
            PROJ = grp.getgrnam(PROJ_NAME).gr_gid
        except KeyError:
            subprocess.run(["groupadd", "--system", PROJ_NAME], capture_output=True, timeout=30)
            try:
                PROJ = grp.getgrnam(PROJ_NAME).gr_gid
            except KeyError:
                PROJ = None


def tearDownModule():
    harness.remove_made_users()
    if PROJ is not None:
        subprocess.run(["groupdel", PROJ_NAME], capture_output=True, timeout=30)


class RootMount(unittest.TestCase):
    def setUp(self):
        if BOB is None or CAROL is None:
            self.skipTest("needs root, useradd, setpriv and setfacl (Debian package acl)")
        self.base, self.src, self.mnt = harness.shared_workdir("tierfs-perm-")
        for name in ("f0", "f1", "dir/f2"):
            path = os.path.join(self.src, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(os.urandom(8192))
            os.chmod(path, 0o644)
        self.mounts = []

    def tearDown(self):
        harness.tear_down(self.mounts, self.base)

    def mount(self, *options):
        m = harness.Mount(self.src, self.mnt, ["allow_other", "ram=16M", *options])
        self.mounts.append(m)
        return m

    def acl(self, *args):
        subprocess.run(["setfacl", *args], check=True, timeout=10)

    def test_an_acl_that_refuses_a_user_refuses_it_through_the_mount(self):
        self.acl("-m", f"u:{BOB[0]}:---", os.path.join(self.src, "f0"))
        src_f0, mnt_f0 = os.path.join(self.src, "f0"), os.path.join(self.mnt, "f0")
        self.assertEqual(probe(BOB, ("read", src_f0)), ["EACCES"], "SOURCE refuses bob")
        self.assertEqual(probe(CAROL, ("read", src_f0)), ["ok"])
        m = self.mount()
        with open(mnt_f0, "rb") as f:  # root reads it: now in the page cache and the tier
            f.read()
        self.assertEqual(probe(BOB, ("read", mnt_f0), ("read", os.path.join(self.mnt, "f1"))),
                         ["EACCES", "ok"])
        self.assertEqual(probe(CAROL, ("read", mnt_f0)), ["ok"])
        perms = m.stats()["permissions"]
        self.assertEqual(perms["decided_by"], "source")
        self.assertGreaterEqual(perms["denied"], 1)
        # A directory bob may not read is not listed for him either.
        self.acl("-m", f"u:{BOB[0]}:--x", os.path.join(self.src, "dir"))
        os.listdir(os.path.join(self.mnt, "dir"))
        self.assertEqual(probe(BOB, ("list", os.path.join(self.src, "dir")),
                               ("list", os.path.join(self.mnt, "dir"))), ["EACCES", "EACCES"])
        self.assertEqual(probe(CAROL, ("list", os.path.join(self.mnt, "dir"))), ["ok"])

    def test_a_chmod_is_honoured_after_revalidation(self):
        m = self.mount("perm_ttl=0")
        mnt_f1 = os.path.join(self.mnt, "f1")
        self.assertEqual(probe(BOB, ("read", mnt_f1)), ["ok"])
        os.chmod(os.path.join(self.src, "f1"), 0o600)
        # Kept until revalidated (perm_ttl=0): the answer bob had stands.
        self.assertEqual(probe(BOB, ("read", mnt_f1)), ["ok"])
        with open(os.path.join(self.mnt, ".tierfs", "revalidate"), "w") as f:
            f.write("1\n")
        self.assertEqual(probe(BOB, ("read", mnt_f1)), ["EACCES"])
        self.assertEqual(m.stats()["permissions"]["revalidations"], 1)

    def test_a_chmod_is_honoured_within_perm_ttl(self):
        self.mount("perm_ttl=1")
        mnt_f1 = os.path.join(self.mnt, "f1")
        self.assertEqual(probe(BOB, ("read", mnt_f1)), ["ok"])
        os.chmod(os.path.join(self.src, "f1"), 0o600)
        time.sleep(1.5)
        self.assertEqual(probe(BOB, ("read", mnt_f1)), ["EACCES"])
        os.chmod(os.path.join(self.src, "f1"), 0o644)
        time.sleep(1.5)
        self.assertEqual(probe(BOB, ("read", mnt_f1)), ["ok"])

    def test_an_allowed_answer_expires_by_default(self):
        m = self.mount()  # as the Slurm prolog mounts: no perm_ttl given
        ttl = m.stats()["permissions"]["ttl_seconds"]
        self.assertGreater(ttl, 0, "SOURCE's answers are kept until revalidated by default")
        self.assertLessEqual(ttl, 60)
        mnt_f1 = os.path.join(self.mnt, "f1")
        self.assertEqual(probe(BOB, ("read", mnt_f1)), ["ok"])
        os.chmod(os.path.join(self.src, "f1"), 0o600)  # bob's access revoked
        time.sleep(ttl + 1)
        self.assertEqual(probe(BOB, ("read", mnt_f1)), ["EACCES"])

    def test_a_callers_groups_are_part_of_the_answer(self):
        if PROJ is None:
            self.skipTest("needs groupadd")
        # Mode 0644, and an ACL entry that refuses the members of proj.
        for name in ("f0", "f1"):
            self.acl("-m", f"g:{PROJ}:---", os.path.join(self.src, name))
        src_f0, mnt_f0, mnt_f1 = (os.path.join(self.src, "f0"), os.path.join(self.mnt, "f0"),
                                  os.path.join(self.mnt, "f1"))
        self.assertEqual(probe(BOB, ("read", src_f0)), ["ok"], "SOURCE lets bob read")
        self.assertEqual(probe(BOB, ("read", src_f0), groups=[PROJ]), ["EACCES"],
                         "SOURCE refuses bob in proj")
        self.mount()
        # Without proj first (allowed, and the answer kept), then in proj.
        self.assertEqual(probe(BOB, ("read", mnt_f0)), ["ok"])
        self.assertEqual(probe(BOB, ("read", mnt_f0), groups=[PROJ]), ["EACCES"])
        # The other way round: refused in proj, then allowed without it.
        self.assertEqual(probe(BOB, ("read", mnt_f1), groups=[PROJ]), ["EACCES"])
        self.assertEqual(probe(BOB, ("read", mnt_f1)), ["ok"])
        # proj among other groups, in any order, is still proj.
        self.assertEqual(probe(BOB, ("read", mnt_f0), groups=[BOB[1], PROJ]), ["EACCES"])
        self.assertEqual(probe(BOB, ("read", mnt_f0), groups=[PROJ, BOB[1]]), ["EACCES"])
        self.assertEqual(probe(BOB, ("read", mnt_f0), groups=[BOB[1]]), ["ok"])

    def test_a_caller_whose_groups_cannot_be_read_is_refused(self):
        if PROJ is None or shutil.which("unshare") is None:
            self.skipTest("needs groupadd and unshare")
        self.acl("-m", f"g:{PROJ}:---", os.path.join(self.src, "f0"))
        # The daemon in a pid namespace of its own (as in a container): a
        # caller outside it has no pid there (FUSE gives 0), so its groups
        # cannot be read from /proc.
        log = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", harness.tierfs_bin(),
                                 self.src, self.mnt, "-f", "-o", "allow_other,ram=16M"],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            harness.wait_for(lambda: harness.is_mounted(self.mnt) or proc.poll() is not None,
                             what="the mount")
            log.seek(0)
            self.assertIsNone(proc.poll(), f"tierfs exited: {log.read()}")
            mnt_f0, mnt_f1 = os.path.join(self.mnt, "f0"), os.path.join(self.mnt, "f1")
            # Was: read without her groups, so the entry refusing proj was not applied.
            self.assertEqual(probe(BOB, ("read", mnt_f0), groups=[PROJ]), ["EACCES"])
            # Unknown groups refuse whatever they would have decided.
            self.assertEqual(probe(BOB, ("read", mnt_f1)), ["EACCES"])
            perms = harness.mount_stats(self.mnt)["permissions"]
            self.assertEqual(perms["groups_unknown"], 2)
        finally:
            harness.force_unmount(self.mnt)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()

    def test_the_job_user_steers_a_root_daemon_and_nobody_else(self):
        self.mount(f"control_owner={BOB[0]}:{BOB[1]}")
        order = os.path.join(self.mnt, ".tierfs", "order")
        self.assertEqual(probe(BOB, ("order", order)), ["ok"])
        self.assertEqual(probe(CAROL, ("order", order)), ["EACCES"])
        self.assertEqual(harness.mount_stats(self.mnt)["prefetch"]["order"]["valid_lines"], 1)


class UserDaemon(unittest.TestCase):
    def setUp(self):
        if BOB is None:
            self.skipTest("needs root, useradd and setpriv")
        self.base = tempfile.mkdtemp(prefix="tierfs-dump-")
        os.chmod(self.base, 0o755)
        self.src = os.path.join(self.base, "src")
        self.mnt = os.path.join(self.base, "mnt")
        os.mkdir(self.src, 0o755)
        os.mkdir(self.mnt, 0o755)
        os.chown(self.mnt, BOB[0], BOB[1])
        harness.make_files(self.src, 2, 4096)

    def tearDown(self):
        harness.force_unmount(self.mnt)
        shutil.rmtree(self.base, ignore_errors=True)

    def start(self, source, options):
        """bob's daemon serving `source` at self.mnt in the foreground. A
        user's daemon needs /dev/fuse (0666 on Debian; some containers make
        it root's only: opened up for the test, and restored)."""
        mode = os.stat("/dev/fuse").st_mode & 0o777
        if mode & 0o006 != 0o006:
            os.chmod("/dev/fuse", 0o666)
            self.addCleanup(os.chmod, "/dev/fuse", mode)
        return subprocess.Popen(harness.user_command(BOB, harness.tierfs_bin(), source, self.mnt,
                                                     "-f", "-o", options),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self, proc):
        harness.as_user(BOB, "fusermount3", "-u", self.mnt)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def wait_for_mount(self, proc, timeout=20):
        harness.wait_for(lambda: harness.is_mounted(self.mnt) or proc.poll() is not None,
                         timeout=timeout, what="bob's mount")
        self.assertIsNone(proc.poll(), "bob's daemon exited")

    def test_a_daemon_run_as_a_user_is_not_dumpable(self):
        proc = self.start(self.src, "ram=8M")
        try:
            self.wait_for_mount(proc)
            # Non-dumpable: its /proc entries belong to root, so bob's other
            # processes can neither ptrace it nor read its memory.
            self.assertEqual(os.stat(f"/proc/{proc.pid}/mem").st_uid, 0)
            r = harness.as_user(BOB, sys.executable, "-c",
                                f"open('/proc/{proc.pid}/mem', 'rb')")
            self.assertNotEqual(r.returncode, 0, "bob opened his daemon's memory")
        finally:
            self.stop(proc)

    def test_a_daemon_run_as_a_user_is_not_dumpable_during_its_scan(self):
        # SOURCE behind a slow pfs-sim (root's, allow_other: bob reads it):
        # 40 ms per metadata operation, one scan thread, 240 entries: the
        # scan takes seconds.
        harness.make_files(self.src, 200, 64, subdirs=40)
        pfs = harness.PfsSim(self.src, os.path.join(self.base, "pfs"), "meta_ms=40,allow_other")
        proc = self.start(pfs.mnt, "ram=8M,scan_threads=1")
        try:
            # The scan has begun (SOURCE is being listed), the mount is not made.
            harness.wait_for(lambda: pfs.stats()["ops"]["readdirs"] >= 2 or proc.poll() is not None,
                             what="the scan")
            self.assertIsNone(proc.poll(), "bob's daemon exited")
            r = harness.as_user(BOB, sys.executable, "-c", ATTACH, str(proc.pid))
            self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
            self.assertFalse(harness.is_mounted(self.mnt), "the scan was over before the probe")
            outcomes = json.loads(r.stdout)
            self.assertEqual({k: v for k, v in outcomes.items() if v == "ok"}, {},
                             "bob's other process reached his daemon during its scan")
            self.wait_for_mount(proc, timeout=60)
        finally:
            self.stop(proc)
            pfs.close()

if __name__ == "__main__":
    harness.main()
