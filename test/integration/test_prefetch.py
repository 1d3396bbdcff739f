"""Prefetch modes over real mounts: order hints drive look-ahead ahead of a
reader on a slow PFS, Belady eviction keeps steady-state SOURCE traffic at
what cannot be resident, hostile hint input is rejected and counted, and
stage-in yields to foreground reads."""
import errno
import os
import random
import subprocess
import threading
import time
import unittest

import harness

KB = 1000


def write_order(mnt, paths):
    with open(os.path.join(mnt, ".tierfs", "order"), "a") as f:
        f.write("".join(p + "\n" for p in paths))


class PrefetchTest(unittest.TestCase):
    def setUp(self):
        self._work = harness.workdir()
        self.src, self.mnt = self._work.__enter__()

    def tearDown(self):
        self._work.__exit__(None, None, None)

    def test_order_hints_prefetch_ahead_of_a_reader_on_a_slow_pfs(self):
        files = harness.make_files(self.src, 60, 50 * KB, subdirs=3)
        pfs = os.path.join(os.path.dirname(self.src), "pfs")
        sim = harness.PfsSim(self.src, pfs, "read_ms=20,meta_ms=1")
        try:
            order = sorted(files)
            random.Random(7).shuffle(order)
            with harness.Mount(pfs, self.mnt, ["ram=64M", "prefetch=order", "lookahead=16"]) as m:
                write_order(self.mnt, order)
                harness.wait_for(lambda: m.stats()["prefetch"]["order"]["lead"] >= 16,
                                 what="16 files promoted ahead of the reader")
                s0 = m.stats()
                before = s0["reads"]
                for rel in order[:16]:  # already promoted: served from RAM
                    self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), files[rel])
                s1 = m.stats()
                after = s1["reads"]
                self.assertEqual(after["from_source"] - before["from_source"], 0)
                self.assertEqual(after["waits"] - before["waits"], 0)
                # Or read by the kernel from the tier's file (passthrough: a root daemon).
                passed = s1["passthrough"]["opens"] - s0["passthrough"]["opens"]
                self.assertEqual(after["from_tiers"] - before["from_tiers"] + passed, 16)
                for rel in order[16:]:  # a reader with some compute per sample
                    self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), files[rel])
                    time.sleep(0.03)
                s = m.stats()
                self.assertEqual(s["reads"]["from_source"], 0)
                self.assertEqual(s["prefetch"]["order"]["consumed"], 60)
                self.assertEqual(s["source"]["read_bytes"], sum(map(len, files.values())))
        finally:
            sim.close()

    def test_four_concurrent_declarers_each_get_lookahead(self):
        # Four ranks on one mount, each its own process: declares its share
        # of the files (as tierfs_hint does: //epoch, then paths), then reads
        # it with some compute per sample. With one cursor only the rank
        # furthest ahead got look-ahead; with a stream per declarer each does.
        files = harness.make_files(self.src, 80, 40 * KB, subdirs=4)
        pfs = os.path.join(os.path.dirname(self.src), "pfs")
        sim = harness.PfsSim(self.src, pfs, "read_ms=20,meta_ms=1")
        rank_code = (
            "import os, sys, time\n"
            "mnt, paths = sys.argv[1], sys.argv[2:]\n"
            "with open(os.path.join(mnt, '.tierfs', 'order'), 'a') as f:\n"
            "    f.write('//epoch\\n' + ''.join(p + '\\n' for p in paths))\n"
            "time.sleep(0.3)\n"
            "for p in paths:\n"
            "    with open(os.path.join(mnt, p), 'rb', buffering=0) as f:\n"
            "        while f.read(1 << 20): pass\n"
            "    time.sleep(0.04)\n")
        try:
            order = sorted(files)
            random.Random(3).shuffle(order)
            with harness.Mount(pfs, self.mnt, ["ram=64M", "prefetch=order", "lookahead=8"]) as m:
                ranks = [subprocess.Popen(["/usr/bin/python3", "-c", rank_code, self.mnt]
                                          + order[r::4]) for r in range(4)]
                for p in ranks:
                    self.assertEqual(p.wait(timeout=60), 0)
                s = m.stats()
                streams = s["prefetch"]["order"]["streams"]
                self.assertEqual(len(streams), 4, streams)
                for st in streams:
                    self.assertTrue(st["name"].startswith("pid:"), st)
                    self.assertEqual(st["consumed"], 20, st)
                    # Most of each rank's reads found their file promoted ahead.
                    self.assertGreaterEqual(st["lookahead_hits"], 14, st)
                self.assertEqual(s["reads"]["from_source"], 0)
                self.assertEqual(s["source"]["read_bytes"], sum(map(len, files.values())))
        finally:
            sim.close()

    def test_belady_keeps_steady_state_traffic_at_what_cannot_be_resident(self):
        n, size = 100, 100 * KB
        for i in range(n):
            with open(os.path.join(self.src, f"f{i:03d}"), "wb") as f:
                f.write(os.urandom(size))
        names = sorted(os.listdir(self.src))
        capacity, lookahead = n // 2, 4
        epochs = []
        for e in range(4):
            order = names[:]
            random.Random(e).shuffle(order)
            epochs.append(order)
        opts = [f"ram={capacity * size}", "prefetch=order", f"lookahead={lookahead}"]
        with harness.Mount(self.src, self.mnt, opts) as m:
            for order in epochs:
                write_order(self.mnt, order)
            traffic = []
            for order in epochs:
                before = m.stats()["source"]["read_bytes"]
                for name in order:
                    harness.read_file(os.path.join(self.mnt, name))
                traffic.append(m.stats()["source"]["read_bytes"] - before)
            s = m.stats()
            self.assertLessEqual(s["tiers"][0]["used"], capacity * size)
            self.assertGreater(s["promotions"]["evicted"], 0)
            # Epochs 2 and 3 have a successor: steady state. What cannot be
            # resident must be read; the transient window may add a little.
            for e in (1, 2):
                self.assertGreaterEqual(traffic[e], (n - capacity) * size)
                self.assertLessEqual(traffic[e], (n - capacity + 3 * lookahead) * size,
                                     f"epoch {e + 1}: {traffic}")

    def test_hostile_hints_are_rejected_and_counted(self):
        files = harness.make_files(self.src, 20, 1000, subdirs=2)
        with harness.Mount(self.src, self.mnt, ["ram=16M", "prefetch=order", "allow_other"]) as m:
            order = os.path.join(self.mnt, ".tierfs", "order")
            valid = sorted(files)[:5]
            bad = ["no/such/file", "../etc/passwd", "d0/../../x", "/etc/passwd", "d0",
                   "\x01\x02binary\xff".encode("latin-1").decode("latin-1")]
            fd = os.open(order, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, "".join(p + "\n" for p in valid + bad).encode())
                # A write with nothing valid in it is refused.
                with self.assertRaises(OSError) as cm:
                    os.write(fd, b"nothing/here\n../../up\n")
                self.assertEqual(cm.exception.errno, errno.EINVAL)
                # A 10 MB line, written in pieces, is rejected without being kept.
                chunk = b"x" * (1 << 20)
                for _ in range(10):
                    os.write(fd, chunk)
                os.write(fd, b"\n" + valid[0].encode() + b"\n")
                with self.assertRaises(OSError) as cm:  # NUL bytes only
                    os.write(fd, b"\x00\x00\x00\n")
                self.assertEqual(cm.exception.errno, errno.EINVAL)
            finally:
                os.close(fd)

            def writer(k):
                with open(order, "a") as f:
                    for _ in range(50):
                        f.write(f"{valid[k % 5]}\nmissing{k}\n")
                        f.flush()

            threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            time.sleep(0.7)  # lines left without a newline are completed after 0.5 s
            o = m.stats()["prefetch"]["order"]
            self.assertEqual(o["valid_lines"], 5 + 1 + 8 * 50)
            self.assertEqual(o["rejected_lines"], len(bad) + 2 + 1 + 1 + 8 * 50)
            self.assertEqual(o["declared"], 5 + 1 + 8 * 50)
            self.assertTrue(m.alive())
            # Other users may not steer the mount.
            r = subprocess.run(
                ["/usr/bin/python3", "-c",
                 "import os,sys; os.setgid(65534); os.setuid(65534)\n"
                 "try:\n open(sys.argv[1],'a').write('x\\n')\n"
                 "except PermissionError: sys.exit(13)\n", order])
            self.assertEqual(r.returncode, 13)
            # Truncation clears the declared order.
            with open(order, "w"):
                pass
            self.assertEqual(m.stats()["prefetch"]["order"]["declared"], 0)

    def test_stage_in_yields_to_foreground_reads(self):
        files = harness.make_files(self.src, 120, 500 * KB, subdirs=4)
        pfs = os.path.join(os.path.dirname(self.src), "pfs")
        sim = harness.PfsSim(self.src, pfs, "read_ms=5,stream_mbps=20,parallel=4,total_mbps=40")
        try:
            with harness.Mount(pfs, self.mnt, ["ram=256M", "prefetch=stage-in"]) as m:
                total = m.stats()["prefetch"]["stage"]["requested_files"]
                self.assertEqual(total, 120)
                last = sorted(files)[-1]  # the last file of the stage-in order
                t0 = time.monotonic()
                self.assertEqual(harness.read_file(os.path.join(self.mnt, last)), files[last])
                latency = time.monotonic() - t0
                s = m.stats()["prefetch"]["stage"]
                self.assertLess(s["done_files"], total, "stage-in was not still running")
                self.assertLess(latency, 1.0, f"a foreground read waited {latency:.2f}s")
                harness.wait_for(lambda: m.stats()["prefetch"]["stage"]["done_files"] == total,
                                 timeout=60, what="stage-in to finish")
                s = m.stats()
                self.assertEqual(s["source"]["read_bytes"], sum(map(len, files.values())))
                self.assertGreater(s["prefetch"]["stage"]["rate_bytes_per_s"], 0)
        finally:
            sim.close()

    def test_mode_switch_at_runtime(self):
        files = harness.make_files(self.src, 30, 10 * KB)
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            mode = os.path.join(self.mnt, ".tierfs", "prefetch")
            with open(mode) as f:
                self.assertEqual(f.read(), "on-access\n")
            with open(mode, "w") as f:
                f.write("stage-in\n")
            with open(mode) as f:
                self.assertEqual(f.read(), "stage-in\n")
            harness.wait_for(lambda: m.stats()["promotions"]["files_resident"] == 30,
                             what="stage-in of every file")
            with self.assertRaises(OSError) as cm:
                with open(mode, "w") as f:
                    f.write("sideways\n")
            self.assertEqual(cm.exception.errno, errno.EINVAL)
        r = harness.run_tierfs(self.src, self.mnt, "-o", "prefetch=order")
        self.assertEqual(r.returncode, 2)  # a bad command line, found before the scan
        self.assertIn("needs a tier", r.stderr)


if __name__ == "__main__":
    harness.main()
