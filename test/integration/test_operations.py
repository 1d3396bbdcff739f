"""Operations: the Prometheus endpoint (scraped and parsed, agreeing with
.tierfs/stats, loopback by default, clear errors), and graceful shutdown
(SIGTERM during promotion leaves a consistent tier; a second SIGTERM or the
timeout forces the exit when a PFS read hangs)."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import unittest
import urllib.error
import urllib.request

import harness

MiB = 1 << 20
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"'
                    r'(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*)?\})? (?P<value>-?[0-9.e+-]+|[+-]Inf|NaN)$')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port, path="/metrics"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def parse(text):
    """{(name, labels): value}; fails the test on any malformed line."""
    samples, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            typed.add(name)
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, f"malformed sample line: {line!r}"
        name = m.group(1)
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or family in typed, f"no TYPE for {name}"
        samples[(name, m.group(3) or "")] = float(m.group("value"))
    return samples


class MetricsTest(unittest.TestCase):
    def test_scrape_parse_and_agree_with_stats(self):
        with harness.workdir() as (src, mnt):
            files = harness.make_files(src, 50, 20_000)
            port = free_port()
            with harness.Mount(src, mnt, ["ram=64M", f"metrics={port}"]) as m:
                for rel in files:
                    harness.read_file(os.path.join(mnt, rel))
                status, ctype, text = scrape(port)
                stats = m.stats()
                self.assertEqual(status, 200)
                self.assertTrue(ctype.startswith("text/plain; version=0.0.4"))
                samples = parse(text)
                self.assertEqual(samples[("tierfs_source_read_bytes_total", "")],
                                 stats["source"]["read_bytes"])
                self.assertEqual(samples[("tierfs_namespace_files", "")], 50)
                ram = 'tier="ram",kind="memory",path=""'
                self.assertEqual(samples[("tierfs_tiers_used_bytes", ram)],
                                 stats["tiers"][0]["used"])
                self.assertEqual(samples[("tierfs_tiers_budget_bytes", ram)], 64 * MiB)
                self.assertEqual(samples[("tierfs_promotions_done_total", "")],
                                 stats["promotions"]["done"])
                count = samples[("tierfs_requests_read_latency_seconds_count", "")]
                self.assertGreaterEqual(count, 50)
                self.assertEqual(
                    samples[("tierfs_requests_read_latency_seconds_bucket", 'le="+Inf"')], count)
                self.assertIn(("tierfs_prefetch_order_lead_files", ""), samples)
                # Which SOURCE and mount: two mounts on a node are told apart.
                info = [labels for name, labels in samples if name == "tierfs_info"]
                self.assertEqual(len(info), 1, info)
                self.assertEqual(samples[("tierfs_info", info[0])], 1)
                self.assertTrue(info[0].startswith(f'version="0.1.0",source="{src}",mount="{mnt}",'),
                                info[0])
                for label in ('promotions_policy="next-use"', 'prefetch_mode="on-access"',
                              'passthrough_shmem_huge_pages="'):
                    self.assertIn(label, info[0])
                self.assertEqual((stats["source_path"], stats["mountpoint"]), (src, mnt))
                with self.assertRaises(urllib.error.HTTPError) as cm:
                    scrape(port, "/other")
                self.assertEqual(cm.exception.code, 404)
                # Loopback only unless told otherwise.
                with open("/proc/net/tcp") as f:
                    listening = [l.split()[1] for l in f if l.split()[3] == "0A"]
                self.assertIn(f"0100007F:{port:04X}", listening)
                # Clients that connect and say nothing do not hold the server:
                # connections are served concurrently.
                idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
                try:
                    t0 = time.monotonic()
                    self.assertEqual(scrape(port)[0], 200)
                    self.assertLess(time.monotonic() - t0, 1)
                finally:
                    for s in idle:
                        s.close()
                # Keep-alive, as Prometheus scrapes: two scrapes on one connection.
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                for _ in range(2):
                    conn.request("GET", "/metrics")
                    r = conn.getresponse()
                    self.assertEqual(r.status, 200)
                    self.assertIn("tierfs_namespace_files 50", r.read().decode())
                conn.close()

    def test_bad_metrics_option(self):
        with harness.workdir() as (src, mnt):
            r = harness.run_tierfs(src, mnt, "-o", "metrics=notaport")
            self.assertEqual(r.returncode, 2)
            self.assertIn("not [HOST:]PORT", r.stderr)
            with socket.socket() as busy:
                busy.bind(("127.0.0.1", 0))
                busy.listen()
                r = harness.run_tierfs(src, mnt, "-o", f"metrics={busy.getsockname()[1]}")
                self.assertEqual(r.returncode, 2)
                self.assertIn("cannot listen", r.stderr)
            self.assertFalse(harness.is_mounted(mnt))


class ShutdownTest(unittest.TestCase):
    def tier_is_consistent(self, tier):
        """Every journaled chunk's range is whole (no hole) in a tier file of
        its SOURCE file's size; no other file in data/."""
        data = os.path.join(tier, "data")
        with open(os.path.join(tier, "journal")) as f:
            lines = f.read().splitlines()[1:]
        live = {}
        for line in lines:
            parts = line.split(" ")
            if parts[0] == "P":  # P rec file offset length file_size ...
                live[parts[1]] = (parts[2], int(parts[3]), int(parts[4]), int(parts[5]))
            elif parts[0] == "R":
                live.pop(parts[1], None)
        files = {file for file, _, _, _ in live.values()}
        self.assertEqual(set(os.listdir(data)), {f"f{file}" for file in files})
        for file, offset, length, size in live.values():
            path = os.path.join(data, f"f{file}")
            self.assertEqual(os.path.getsize(path), size)
            fd = os.open(path, os.O_RDONLY)
            try:
                self.assertGreaterEqual(os.lseek(fd, offset, os.SEEK_HOLE), offset + length)
            finally:
                os.close(fd)
        return len(live)

    def test_sigterm_during_promotion_leaves_a_consistent_tier(self):
        with harness.workdir() as (src, mnt):
            data = os.urandom(64 * MiB)
            with open(os.path.join(src, "shard.bin"), "wb") as f:
                f.write(data)
            pfs = os.path.join(os.path.dirname(src), "pfs")
            tier = os.path.join(os.path.dirname(src), "tier")
            os.mkdir(tier)
            sim = harness.PfsSim(src, pfs, "read_ms=1,stream_mbps=40,parallel=4")
            try:
                opts = [f"tier={tier}:1G", "chunk_size=8M", "promote_threads=2"]
                m = harness.Mount(pfs, mnt, opts)
                with open(os.path.join(mnt, ".tierfs", "stage"), "w") as f:
                    f.write("shard.bin\n")
                harness.wait_for(lambda: m.stats()["promotions"]["done"] >= 1, what="a chunk")
                m.proc.send_signal(signal.SIGTERM)
                self.assertEqual(m.proc.wait(timeout=30), 0)
                self.assertFalse(harness.is_mounted(mnt))
                kept = self.tier_is_consistent(tier)
                self.assertGreaterEqual(kept, 1)
                self.assertLess(kept, 8, "stopped mid-way")
                with harness.Mount(pfs, mnt, opts) as m2:
                    self.assertIn(f"reused {kept} chunks", m2.output())
                    with open(os.path.join(mnt, "shard.bin"), "rb") as f:
                        self.assertEqual(f.read(), data)
            finally:
                sim.close()

    def test_hung_pfs_read_second_sigterm_and_timeout_force_exit(self):
        with harness.workdir() as (src, mnt):
            with open(os.path.join(src, "f"), "wb") as f:
                f.write(os.urandom(MiB))
            pfs = os.path.join(os.path.dirname(src), "pfs")
            # Every read stalls 4 s. The kernel lets a process exit only once its
            # thread blocked in a FUSE read has an answer, so the exit itself
            # waits for the stall; the mount must be gone long before.
            sim = harness.PfsSim(src, pfs, "stall_rate=1,stall_ms=4000")
            try:
                for second_signal in (True, False):
                    opts = ["ram=16M", "shutdown_timeout=2"]
                    m = harness.Mount(pfs, mnt, opts)
                    with open(os.path.join(mnt, ".tierfs", "stage"), "w") as f:
                        f.write("f\n")
                    harness.wait_for(lambda: m.stats()["promotions"]["running"] == 1,
                                     what="a promotion stuck on the PFS")
                    t0 = time.monotonic()
                    m.proc.send_signal(signal.SIGTERM)
                    if second_signal:
                        time.sleep(0.3)
                        m.proc.send_signal(signal.SIGTERM)
                    harness.wait_for(lambda: not harness.is_mounted(mnt), timeout=3.5,
                                     what="the forced unmount")
                    self.assertEqual(m.proc.wait(timeout=20), 1)
                    self.assertLess(time.monotonic() - t0, 12)
                    self.assertIn("shutdown forced", m.output())
                    m.close()
            finally:
                sim.close()

    def test_reader_blocked_in_pfs_read_does_not_hold_the_unmount(self):
        # Issue 11 item 10: libfuse's loop joins its workers before it
        # returns, so a FUSE worker stuck in a PFS read used to keep the
        # daemon (and the mount) alive past shutdown_timeout.
        with harness.workdir() as (src, mnt):
            with open(os.path.join(src, "f"), "wb") as f:
                f.write(os.urandom(64 * 1024))
            pfs = os.path.join(os.path.dirname(src), "pfs")
            sim = harness.PfsSim(src, pfs, "stall_rate=1,stall_ms=8000")
            try:
                m = harness.Mount(pfs, mnt, ["shutdown_timeout=1"])  # no tier: reads go to SOURCE
                errors = []

                def read():
                    try:
                        with open(os.path.join(mnt, "f"), "rb") as f:
                            f.read()
                    except OSError as e:
                        errors.append(e.errno)

                reader = threading.Thread(target=read)
                reader.start()
                harness.wait_for(lambda: sim.stats()["ops"]["stalls"] >= 1,
                                 what="a FUSE worker stuck in a PFS read")
                t0 = time.monotonic()
                m.proc.send_signal(signal.SIGTERM)
                harness.wait_for(lambda: not harness.is_mounted(mnt), timeout=4,
                                 what="the unmount, before the 8 s stall ends")
                self.assertLess(time.monotonic() - t0, 4)
                self.assertEqual(m.proc.wait(timeout=30), 1)
                self.assertIn("shutdown forced (shutdown_timeout)", m.output())
                reader.join(timeout=30)
                self.assertFalse(reader.is_alive())
                m.close()
            finally:
                sim.close()

    def test_remount_right_after_unmount_waits_for_the_old_daemon(self):
        # Issue 11: the old daemon holds its tiers while it finishes a
        # promotion after `fusermount3 -u`; a remount at once used to fail
        # ("in use by another tierfs daemon").
        with harness.workdir() as (src, mnt):
            data = os.urandom(MiB)
            with open(os.path.join(src, "f"), "wb") as f:
                f.write(data)
            pfs = os.path.join(os.path.dirname(src), "pfs")
            tier = os.path.join(os.path.dirname(src), "tier")
            os.makedirs(tier, mode=0o700)
            sim = harness.PfsSim(src, pfs, "stall_rate=1,stall_ms=3000")
            try:
                opts = [f"tier={tier}:64M", "shutdown_timeout=20"]
                old = harness.Mount(pfs, mnt, opts)
                with open(os.path.join(mnt, ".tierfs", "stage"), "w") as f:
                    f.write("f\n")
                harness.wait_for(lambda: old.stats()["promotions"]["running"] == 1,
                                 what="a promotion stuck on the PFS")
                subprocess.run(["fusermount3", "-u", mnt], check=True, timeout=10)
                self.assertTrue(old.alive(), "the old daemon is still finishing")
                with harness.Mount(pfs, mnt, opts) as new:
                    self.assertIn("waiting up to", new.output())
                    # The old daemon lets go of its tiers on its way out;
                    # the new one got them, so the old one ends soon after.
                    self.assertEqual(old.proc.wait(timeout=10), 0,
                                     "the old daemon exited cleanly")
                    with open(os.path.join(mnt, "f"), "rb") as f:
                        self.assertEqual(f.read(), data)
                old.close()
            finally:
                sim.close()


if __name__ == "__main__":
    harness.main()
