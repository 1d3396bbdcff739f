"""RAM and directory tiers over a real mount: a second pass reads nothing
from SOURCE when the tiers hold the dataset and exactly the non-resident
bytes when they do not; budgets hold; concurrent readers of a cold file
read SOURCE once; restarts reuse only valid, complete copies."""
import errno
import hashlib
import os
import signal
import subprocess
import threading
import time
import unittest

import harness

MiB = 1 << 20


def tier_data_bytes(tier_dir):
    """Bytes the tier's data files take on the device (they are sparse: their
    sizes are the SOURCE files'), less the rounding of each file's last
    chunk up to a whole block (at most 4 KiB a file)."""
    data = os.path.join(tier_dir, "data")
    names = os.listdir(data)
    held = sum(os.stat(os.path.join(data, f)).st_blocks * 512 for f in names)
    return max(0, held - 4096 * len(names))


def journal_chunks(tier_dir):
    """The chunks the tier's journal names (published, not removed)."""
    live = set()
    with open(os.path.join(tier_dir, "journal")) as f:
        for line in f.read().split("\n")[1:-1]:  # a torn last line has no newline
            parts = line.split(" ")
            if parts[0] == "P":
                live.add(parts[1])
            elif parts[0] == "R":
                live.discard(parts[1])
    return live


class TierTest(unittest.TestCase):
    def setUp(self):
        self._work = harness.workdir()
        self.src, self.mnt = self._work.__enter__()
        self.tier = os.path.join(os.path.dirname(self.src), "tier")
        os.mkdir(self.tier)

    def tearDown(self):
        self._work.__exit__(None, None, None)

    def read_pass(self, files):
        for rel, data in files.items():
            self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), data, rel)

    def test_second_pass_reads_nothing_from_source(self):
        files = harness.make_files(self.src, 300, 20_000)
        big = os.urandom(20 * MiB + 3)
        with open(os.path.join(self.src, "big.bin"), "wb") as f:
            f.write(big)
        files["big.bin"] = big
        total = sum(map(len, files.values()))
        with harness.Mount(self.src, self.mnt, ["ram=64M", "chunk_size=4M"]) as m:
            self.read_pass(files)
            first = m.stats()
            self.assertEqual(first["source"]["read_bytes"], total)  # each byte once
            self.read_pass(files)
            second = m.stats()
            self.assertEqual(second["source"]["read_bytes"], total)
            self.assertEqual(second["source"]["meta_ops"], first["source"]["meta_ops"])
            ram = second["tiers"][0]
            self.assertEqual(ram["used"], total)
            # The second pass from the tier's finished copies; in the first,
            # pieces read while their copy was being made are SOURCE's
            # (reads.early), not the tier's. A file the kernel reads from the
            # tier's file itself (passthrough, a root daemon) counts at open.
            passed = (second["passthrough"]["opened_bytes"] -
                      first["passthrough"]["opened_bytes"])
            self.assertGreaterEqual(
                ram["bytes_served"] - first["tiers"][0]["bytes_served"] + passed, total)
            self.assertEqual(second["promotions"]["files_resident"], len(files))
            self.assertEqual(second["promotions"]["failed"], 0)

    def test_tiers_too_small_read_exactly_the_rest(self):
        files = harness.make_files(self.src, 400, 20_000)
        total = sum(map(len, files.values()))
        ram, disk = 2 * MiB, 3 * MiB
        with harness.Mount(self.src, self.mnt, [f"ram={ram}", f"tier={self.tier}:{disk}"]) as m:
            self.read_pass(files)
            first = m.stats()
            resident = sum(t["used"] for t in first["tiers"])
            self.assertLessEqual(first["tiers"][0]["used"], ram)
            self.assertLessEqual(first["tiers"][1]["used"], disk)
            self.assertLessEqual(tier_data_bytes(self.tier), disk)
            self.assertGreater(first["tiers"][0]["used"], ram - 30_000)  # first-fit fills it
            self.assertGreater(first["promotions"]["no_room"], 0)
            self.read_pass(files)
            second = m.stats()
            self.assertEqual(second["source"]["read_bytes"] - first["source"]["read_bytes"],
                             total - resident)
            self.assertLessEqual(tier_data_bytes(self.tier), disk)

    def test_ram_budget_bounds_daemon_memory(self):
        files = harness.make_files(self.src, 200, 500_000)  # ~100 MB
        budget = 32 * MiB
        with harness.Mount(self.src, self.mnt, [f"ram={budget}"]) as m:
            self.read_pass(files)
            s = m.stats()
            self.assertLessEqual(s["tiers"][0]["used"], budget)
            rss = harness.rss_bytes(m.proc.pid)
            # The budget plus the daemon's own working memory (buffers, stacks),
            # and a 1 MiB copy buffer per promotion thread (32 by default).
            threads = s["promotions"]["threads"]
            self.assertLess(rss, budget + 48 * MiB + threads * MiB, f"RSS {rss}, {threads} threads")

    def test_concurrent_readers_of_a_cold_file_read_source_once(self):
        data = os.urandom(48 * MiB)
        with open(os.path.join(self.src, "shard.bin"), "wb") as f:
            f.write(data)
        digest = hashlib.sha256(data).hexdigest()
        with harness.Mount(self.src, self.mnt, ["ram=128M", "chunk_size=8M"]) as m:
            results = []

            def reader():
                with open(os.path.join(self.mnt, "shard.bin"), "rb") as f:
                    results.append(hashlib.sha256(f.read()).hexdigest())

            threads = [threading.Thread(target=reader) for _ in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(results, [digest] * 16)
            self.assertEqual(m.stats()["source"]["read_bytes"], len(data))

    def test_restart_reuses_valid_copies_and_drops_stale_ones(self):
        files = harness.make_files(self.src, 100, 30_000)
        opts = [f"tier={self.tier}:64M"]
        with harness.Mount(self.src, self.mnt, opts) as m:
            self.read_pass(files)
            # A reader's copy into a directory tier is committed (fdatasync,
            # rename) on a pool thread after the read returns.
            harness.wait_for(lambda: m.stats()["promotions"]["files_resident"] == 100,
                             what="100 files resident")
        # Change one file on SOURCE between mounts (size and mtime change).
        changed = "d1/f00001"
        files[changed] = b"changed between mounts"
        with open(os.path.join(self.src, changed), "wb") as f:
            f.write(files[changed])
        with harness.Mount(self.src, self.mnt, opts) as m:
            self.assertIn("reused 99 chunks", m.output())
            self.read_pass(files)
            s = m.stats()
            self.assertEqual(s["source"]["read_bytes"], len(files[changed]))
        with harness.Mount(self.src, self.mnt, opts + ["tier_reset"]) as m:
            self.assertEqual(m.stats()["tiers"][0]["used"], 0)

    def test_kill9_during_promotion_then_remount_is_bit_exact(self):
        data = os.urandom(256 * MiB)
        with open(os.path.join(self.src, "shard.bin"), "wb") as f:
            f.write(data)
        digest = hashlib.sha256(data).hexdigest()
        opts = [f"tier={self.tier}:1G", "chunk_size=16M", "promote_threads=2"]
        m = harness.Mount(self.src, self.mnt, opts)
        try:
            with open(os.path.join(self.mnt, "shard.bin"), "rb") as f:
                f.read(1 * MiB)  # starts the promotion of every chunk
            harness.wait_for(lambda: m.stats()["promotions"]["done"] >= 2, what="2 chunks")
            m.proc.send_signal(signal.SIGKILL)
            m.proc.wait()
        finally:
            m.close()
        self.assertLess(len(journal_chunks(self.tier)), 16, "killed mid-way")
        self.assertEqual(len(os.listdir(os.path.join(self.tier, "data"))), 1)  # one file's
        with harness.Mount(self.src, self.mnt, opts) as m:
            names = os.listdir(os.path.join(self.tier, "data"))
            self.assertEqual(len(names), 1, names)
            with open(os.path.join(self.mnt, "shard.bin"), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest)
            self.assertIn("reused", m.output())

    def test_source_error_during_promotion_publishes_nothing(self):
        files = harness.make_files(self.src, 10, 10_000)
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            os.unlink(os.path.join(self.src, "d0/f00000"))
            with self.assertRaises(OSError) as cm:
                harness.read_file(os.path.join(self.mnt, "d0/f00000"))
            self.assertEqual(cm.exception.errno, errno.EIO)
            del files["d0/f00000"]
            self.read_pass(files)
            s = m.stats()
            self.assertGreaterEqual(s["promotions"]["failed"], 1)
            self.assertEqual(s["promotions"]["files_resident"], 9)
            self.assertEqual(s["tiers"][0]["used"], sum(map(len, files.values())))
            self.assertTrue(m.alive())

    @unittest.skipUnless(os.geteuid() == 0, "needs root to mount a small tmpfs")
    def test_full_tier_device_falls_back_to_source(self):
        files = harness.make_files(self.src, 200, 40_000)  # ~8 MB
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", self.tier], check=True)
        try:
            with harness.Mount(self.src, self.mnt, [f"tier={self.tier}:100M"]) as m:
                self.read_pass(files)  # no reader sees an error
                self.read_pass(files)
                s = m.stats()
                self.assertGreaterEqual(s["promotions"]["failed"], 1)
                self.assertLess(s["tiers"][0]["limit"], 100 * MiB)
                self.assertEqual(s["requests"]["errors"], 0)
                self.assertIn("is full", m.output())
        finally:
            subprocess.run(["umount", "-l", self.tier])

    def test_bad_tier_options(self):
        def fails(opts, phrase, code):
            r = harness.run_tierfs(self.src, self.mnt, "-o", opts)
            self.assertEqual(r.returncode, code, r.stderr)
            self.assertIn(phrase, r.stderr)
            self.assertFalse(harness.is_mounted(self.mnt))

        fails(f"tier={self.tier}/missing:1G", "No such file or directory", 5)
        fails(f"tier={self.tier}", "PATH:SIZE", 2)
        fails("ram=lots", "not a size", 2)
        fails("policy=random", "next-use, lru", 2)
        fails("chunk_size=1K", "between 1M and 4G", 2)
        with harness.Mount(self.src, self.mnt, [f"tier={self.tier}:1G"]):
            other = os.path.join(os.path.dirname(self.mnt), "mnt2")
            os.mkdir(other)
            r = harness.run_tierfs(self.src, other, "-o", f"tier={self.tier}:1G,shutdown_timeout=1")
            self.assertEqual(r.returncode, 5, r.stderr)  # the tier's, refused before the scan
            self.assertIn("in use by another tierfs", r.stderr)


if __name__ == "__main__":
    harness.main()
