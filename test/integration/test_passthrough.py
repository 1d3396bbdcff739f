"""FUSE passthrough over a real mount (a root daemon, Linux 6.9 or later):
- a file wholly in one tier file (the RAM tier's memory file, a directory
  tier's sparse file; whatever its number of chunks, also after a remount
  reused it) is opened in passthrough mode: its reads and its mmap never
  reach the daemon and give SOURCE's bytes; its backing file stays
  registered for the next open;
- a file partly resident is opened as before and reads right; one evicted
  while open in passthrough mode still reads its bytes (descriptor, mapping);
- a file read before it was resident has its mount's cache dropped once a
  tier file holds it, then passes through; one changed on SOURCE before it
  was promoted fails its reads with EIO;
- passthrough=off keeps the zero-message open; a user's daemon says why it
  is off; passthrough=on refuses to mount there (exit 2);
- read requests grow to the kernel's max_pages_limit, and the readahead too.
Skipped (exit 77) unless root on Linux 6.9+ whose FUSE accepts passthrough."""
import errno
import mmap
import os
import platform
import subprocess
import sys
import unittest

import harness

MiB = 1 << 20


def shmem_huge_bytes():
    """Shared memory in huge pages, all of it (/proc/meminfo)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("ShmemHugePages:"):
                return int(line.split()[1]) * 1024
    return 0


def kernel_has_passthrough():
    try:
        major, minor = (int(x) for x in platform.release().split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (6, 9)


def read_through(path):
    """The bytes of path read through an open descriptor, and then through a
    mapping of it."""
    with open(path, "rb", buffering=0) as f:
        data = f.readall()
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            mapped = m[:]
    return data, mapped


class PassthroughTest(unittest.TestCase):
    def setUp(self):
        self._work = harness.workdir()
        self.src, self.mnt = self._work.__enter__()
        self.tier = os.path.join(os.path.dirname(self.src), "tier")
        os.mkdir(self.tier, 0o700)

    def tearDown(self):
        self._work.__exit__(None, None, None)

    def write(self, rel, data):
        path = os.path.join(self.src, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def write_files(self, files):
        for rel, data in files.items():
            self.write(rel, data)

    def mount(self, *options):
        try:  # on: these small datasets fit in memory twice, where auto leaves it off
            return harness.Mount(self.src, self.mnt, ["passthrough=on", *options])
        except AssertionError as e:
            if "passthrough=on is impossible here" not in str(e):
                raise
            self.skipTest(f"passthrough is not active here: {e}")

    def wait_resident(self, m, files):
        harness.wait_for(lambda: m.stats()["promotions"]["files_resident"] >= files,
                         what=f"{files} files resident")

    def check_served_without_daemon(self, m, files):
        before = m.stats()
        for rel, data in files.items():
            got, mapped = read_through(os.path.join(self.mnt, rel))
            self.assertEqual(got, data, rel)
            self.assertEqual(mapped, data, rel)
        after = m.stats()
        self.assertEqual(after["requests"]["read"], before["requests"]["read"],
                         "a read of a resident file reached the daemon")
        self.assertEqual(after["passthrough"]["opens"] - before["passthrough"]["opens"],
                         len(files))
        self.assertEqual(after["passthrough"]["opened_bytes"] -
                         before["passthrough"]["opened_bytes"], sum(map(len, files.values())))

    def test_a_file_in_the_ram_tier_is_read_and_mapped_without_the_daemon(self):
        files = {f"d/f{i}": os.urandom(100_000 + i) for i in range(20)}
        self.write_files(files)
        with self.mount("ram=64M", "prefetch=stage-in") as m:
            self.wait_resident(m, len(files))
            self.check_served_without_daemon(m, files)
            # Closed, their backing files stay registered: none registered anew.
            self.assertEqual((before := m.stats()["passthrough"])["backing_files"], len(files))
            self.check_served_without_daemon(m, files)
            after = m.stats()["passthrough"]
            self.assertEqual(after["registrations"], before["registrations"])
            self.assertEqual(after["reused_registrations"] - before["reused_registrations"],
                             len(files))
            # `tierfs stat --watch` shows the opens the kernel serves itself
            # (their reads never reach the daemon's counters).
            watch = subprocess.Popen([harness.tierfs_bin(), "stat", self.mnt, "--watch", "0.5",
                                      "--count", "1"], stdout=subprocess.PIPE, text=True)
            while watch.poll() is None:  # opens all through its interval
                for rel in files:
                    read_through(os.path.join(self.mnt, rel))
            out = watch.communicate(timeout=30)[0]
            self.assertEqual(watch.returncode, 0)
            self.assertRegex(out, r"passthrough opens [1-9][0-9]*/s \(\S+ \S+/s of files\)")

    def test_a_file_of_many_chunks_in_the_ram_tier_is_read_without_the_daemon(self):
        files = {"big.bin": os.urandom(5 * MiB - 5), "small": os.urandom(3000)}
        self.write_files(files)
        with self.mount("ram=64M", "prefetch=stage-in", "chunk_size=1M") as m:
            self.wait_resident(m, len(files))
            self.assertEqual(m.stats()["tiers"][0]["chunks"], 6)
            self.check_served_without_daemon(m, files)

    def test_a_large_file_in_the_ram_tier_is_in_huge_pages(self):
        # A root daemon's own tmpfs gives them, whatever shmem_enabled says short
        # of "deny": the test sets "never" (restored after) and counts them.
        knob = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
        try:
            before = open(knob).read()
        except OSError as e:
            self.skipTest(f"no {knob}: {e}")
        was = before[before.index("[") + 1:before.index("]")]
        data = os.urandom(6 * MiB)
        self.write("big.bin", data)
        try:
            with open(knob, "w") as f:
                f.write("never")
            huge0 = shmem_huge_bytes()
            with self.mount("ram=64M", "prefetch=stage-in", "chunk_size=1M") as m:
                self.wait_resident(m, 1)
                pt = m.stats()["passthrough"]
                self.assertEqual((pt["shmem_huge_pages"], pt["memory_files"]),
                                 ("never", "tmpfs with huge pages"))
                self.assertGreaterEqual(shmem_huge_bytes() - huge0, 4 * MiB,
                                        "the 6 MiB file is in huge pages")
                with open(os.path.join(self.mnt, "big.bin"), "rb") as f:
                    self.assertEqual(f.read(), data)
                stat = subprocess.run([harness.tierfs_bin(), "stat", self.mnt], text=True,
                                      capture_output=True, timeout=30, check=True).stdout
                self.assertIn("in huge pages", " ".join(stat.split()))
        finally:
            with open(knob, "w") as f:
                f.write(was)

    def test_a_file_in_a_directory_tier_is_read_from_its_tier_file(self):
        # Files of one chunk and one of three (1 MiB chunks); a remount reuses them.
        files = {"shard.tar": os.urandom(3 * MiB - 7), "f0": os.urandom(300_000), "f1": b"1"}
        self.write_files(files)
        options = (f"tier={self.tier}:64M", "chunk_size=1M", "prefetch=stage-in")
        with self.mount(*options) as m:
            self.wait_resident(m, len(files))
            self.assertEqual(len(os.listdir(os.path.join(self.tier, "data"))), len(files))
            self.check_served_without_daemon(m, files)
        with self.mount(*options) as m:
            self.assertIn("reused 5 chunks", m.output())
            self.check_served_without_daemon(m, files)

    def test_a_file_read_before_it_was_resident_drops_its_page_cache(self):
        # Read while it is copied in (on-access): through the page cache.
        # Once released and resident, the mount's pages of it are dropped
        # (the tier holds its bytes) and its next open passes through.
        data = os.urandom(300_000)
        self.write("f", data)
        with self.mount("ram=16M", "prefetch=on-access") as m:
            with open(os.path.join(self.mnt, "f"), "rb", buffering=0) as f:
                self.assertEqual(f.readall(), data)
            self.wait_resident(m, 1)
            harness.wait_for(lambda: m.stats()["passthrough"]["cache_drops"] == 1,
                             what="the page cache of f dropped")
            self.wait_released(m)
            self.check_served_without_daemon(m, {"f": data})

    def test_a_partly_resident_file_is_not_passed_through_and_reads_right(self):
        # 5 chunks of 1 MiB, a RAM tier of 4 MiB: at most four are resident.
        big = os.urandom(5 * MiB - 5)
        self.write("big.bin", big)
        with self.mount("ram=4M", "chunk_size=1M") as m:
            self.assertEqual(harness.read_file(os.path.join(self.mnt, "big.bin")), big)
            harness.wait_for(lambda: m.stats()["tiers"][0]["chunks"] > 0, what="a chunk resident")
            s = m.stats()
            self.assertLess(s["tiers"][0]["chunks"], 5)
            before = s["passthrough"]
            got, mapped = read_through(os.path.join(self.mnt, "big.bin"))
            self.assertEqual(got, big)
            self.assertEqual(mapped, big)
            after = m.stats()["passthrough"]
            self.assertEqual(after["opens"], before["opens"])
            self.assertEqual(after["cached_opens"] - before["cached_opens"], 1)

    def test_a_file_evicted_while_open_in_passthrough_keeps_its_bytes(self):
        # Five files of 400 kB, a RAM tier of 1 MiB (two fit), LRU eviction.
        files = {f"f{i}": os.urandom(400_000) for i in range(5)}
        self.write_files(files)
        for tiers in (["ram=1M"], [f"tier={self.tier}:1M"]):
            with self.subTest(tiers=tiers[0].split("=")[0]):
                with self.mount(*tiers, "policy=lru") as m:
                    self.evict_while_open(m, files)
                subprocess.run(["rm", "-rf", self.tier], check=True)
                os.mkdir(self.tier, 0o700)

    def evict_while_open(self, m, files):
        first = os.path.join(self.mnt, "f0")
        self.assertEqual(harness.read_file(first), files["f0"])
        self.wait_resident(m, 1)
        self.wait_released(m)
        with open(first, "rb", buffering=0) as f:
            self.assertEqual(m.stats()["passthrough"]["backing_files"], 1)
            view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            evicted = m.stats()["promotions"]["evicted"]
            for rel in ("f1", "f2", "f3", "f4"):
                self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), files[rel])
            harness.wait_for(lambda: m.stats()["promotions"]["evicted"] > evicted, what="evicted")
            # f0 was the least recently used: gone from the tier, still read right.
            self.assertEqual(os.pread(f.fileno(), 400_000, 0), files["f0"])
            self.assertEqual(view[:], files["f0"])
            view.close()
        # Closed: its backing file let go (it left the tier); opened again: right.
        harness.wait_for(lambda: m.stats()["passthrough"]["backing_files"] == 0, what="let go")
        self.assertEqual(harness.read_file(first), files["f0"])

    def wait_released(self, m):
        """Until the kernel's RELEASEs of earlier opens have come (they are
        sent in the background): a file open without passthrough is not
        passed through."""
        harness.wait_for(lambda: m.stats()["passthrough"]["cached_open_files"] == 0,
                         what="the earlier opens released")

    def test_a_source_change_is_detected_at_open(self):
        data = os.urandom(200_000)
        self.write("f", data)
        self.write("g", os.urandom(1000))
        with self.mount("ram=16M", "prefetch=on-access") as m:
            # The same size and a new mtime: no longer the snapshot's file.
            changed = os.urandom(len(data))
            self.write("f", changed)
            os.utime(os.path.join(self.src, "f"), ns=(0, 10**18))
            with self.assertRaises(OSError) as e:
                harness.read_file(os.path.join(self.mnt, "f"))
            self.assertEqual(e.exception.errno, errno.EIO)
            s = m.stats()
            self.assertGreater(s["open_files"]["changed"], 0)
            self.assertEqual(s["tiers"][0]["used"], 1000 if s["tiers"][0]["chunks"] else 0)
            # Still refused when opened again, never passed through.
            opens = s["passthrough"]["opens"]
            with self.assertRaises(OSError):
                harness.read_file(os.path.join(self.mnt, "f"))
            self.assertEqual(m.stats()["passthrough"]["opens"], opens)
            self.assertTrue(m.alive())

    def test_auto_leaves_it_off_for_small_files_that_fit_in_memory_twice(self):
        self.write("f", os.urandom(50_000))
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            why = m.stats()["passthrough"]["why_not"]
            if "passthrough=auto" not in why:
                self.skipTest(f"passthrough is not possible here: {why}")
            self.assertIn("a second time", why)
        self.write("big", os.urandom(2 * MiB))  # files of 1 MiB or more hold most of it: on
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            self.assertTrue(m.stats()["passthrough"]["active"])

    def test_passthrough_off_keeps_the_zero_message_open(self):
        self.write("f", os.urandom(50_000))
        with harness.Mount(self.src, self.mnt, ["ram=16M", "passthrough=off"]) as m:
            harness.read_file(os.path.join(self.mnt, "f"))
            s = m.stats()["passthrough"]
            self.assertFalse(s["active"])
            self.assertEqual(s["why_not"], "passthrough=off")
            self.assertEqual(s["opens"] + s["cached_opens"], 0)  # no OPEN was answered


class LargeRequestsTest(unittest.TestCase):
    """max_pages: as many pages per read request as the kernel allows."""

    LIMIT = "/proc/sys/fs/fuse/max_pages_limit"

    def test_read_requests_grow_to_the_kernels_limit(self):
        if not os.path.exists(self.LIMIT):
            self.skipTest("no /proc/sys/fs/fuse/max_pages_limit (Linux 6.13+)")
        with open(self.LIMIT) as f:
            old = f.read().strip()
        self.addCleanup(lambda: open(self.LIMIT, "w").write(old + "\n"))
        with open(self.LIMIT, "w") as f:
            f.write("1024\n")  # 4 MiB requests
        with harness.workdir() as (src, mnt):
            data = os.urandom(16 * MiB)
            with open(os.path.join(src, "big"), "wb") as f:
                f.write(data)
            with harness.Mount(src, mnt, ["passthrough=off"]) as m:
                self.assertEqual(m.stats()["max_request_bytes"], 4 * MiB)
                st = os.stat(mnt)
                bdi = f"/sys/class/bdi/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/read_ahead_kb"
                harness.wait_for(lambda: open(bdi).read().strip() == "4096",
                                 what="the mount's readahead at 4 MiB")
                with open(os.path.join(mnt, "big"), "rb", buffering=0) as f:
                    self.assertEqual(f.read(16 * MiB), data)
                s = m.stats()["requests"]
                self.assertEqual(s["read_bytes"], 16 * MiB)
                self.assertLessEqual(s["read"], 5)  # 4 MiB each, not 16 of 1 MiB


class UserDaemonTest(unittest.TestCase):
    """A daemon run as a user: no CAP_SYS_ADMIN."""

    def setUp(self):
        self.user = harness.unprivileged_user()
        if self.user is None:
            self.skipTest("needs root, useradd and setpriv")
        mode = os.stat("/dev/fuse").st_mode & 0o777
        if mode & 0o006 != 0o006:
            os.chmod("/dev/fuse", 0o666)
            self.addCleanup(os.chmod, "/dev/fuse", mode)
        self._work = harness.workdir()
        self.src, self.mnt = self._work.__enter__()
        base = os.path.dirname(self.src)
        for d in (base, self.src, self.mnt):
            os.chown(d, *self.user)
        self.data = os.urandom(70_000)
        with open(os.path.join(self.src, "f"), "wb") as f:
            f.write(self.data)
        os.chown(os.path.join(self.src, "f"), *self.user)

    def tearDown(self):
        harness.as_user(self.user, "fusermount3", "-u", self.mnt)
        self._work.__exit__(None, None, None)

    def test_a_users_daemon_says_passthrough_is_off_and_why(self):
        proc = subprocess.Popen(harness.user_command(self.user, harness.tierfs_bin(), self.src,
                                                     self.mnt, "-f", "-o",
                                                     "ram=8M"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            harness.wait_for(lambda: harness.is_mounted(self.mnt) or proc.poll() is not None,
                             what="the user's mount")
            self.assertIsNone(proc.poll(), "the user's daemon exited")
            probe = ("import json, os, sys\n"
                     "m = sys.argv[1]\n"
                     "for _ in range(2):\n"
                     "    with open(os.path.join(m, 'f'), 'rb', buffering=0) as f:\n"
                     "        data = f.readall()\n"
                     "s = json.load(open(os.path.join(m, '.tierfs', 'stats')))\n"
                     "print(json.dumps({'len': len(data), 'pt': s['passthrough']}))\n")
            r = harness.as_user(self.user, sys.executable, "-c", probe, self.mnt)
            self.assertEqual(r.returncode, 0, r.stderr)
            import json
            out = json.loads(r.stdout)
            self.assertEqual(out["len"], len(self.data))
            self.assertFalse(out["pt"]["active"])
            self.assertIn("CAP_SYS_ADMIN", out["pt"]["why_not"])
            self.assertEqual(out["pt"]["opens"] + out["pt"]["cached_opens"], 0)
            r = harness.as_user(self.user, harness.tierfs_bin(), "stat", self.mnt)
            self.assertEqual(r.returncode, 0, r.stderr)
            # Said once, in one line (wrapped): what warm reads cost, and why.
            self.assertRegex(" ".join(r.stdout.decode().split()),
                             r"warm reads through the daemon and the page cache \(passthrough "
                             r"off: the daemon lacks CAP_SYS_ADMIN")
        finally:
            harness.as_user(self.user, "fusermount3", "-u", self.mnt)
            proc.wait(timeout=20)

    def test_passthrough_on_refuses_to_mount_without_the_capability(self):
        r = harness.as_user(self.user, harness.tierfs_bin(), self.src, self.mnt, "-f", "-o",
                            "ram=8M,passthrough=on")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"passthrough=on is impossible here", r.stderr)
        self.assertIn(b"CAP_SYS_ADMIN", r.stderr)
        self.assertFalse(harness.is_mounted(self.mnt))


def tearDownModule():
    harness.remove_made_users()


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIPPED: FUSE passthrough needs a root daemon (CAP_SYS_ADMIN)")
        sys.exit(harness.SKIP)
    if not kernel_has_passthrough():
        print(f"SKIPPED: the kernel ({platform.release()}) has no FUSE passthrough (6.9+)")
        sys.exit(harness.SKIP)
    harness.main()
