"""End to end: four data-parallel PyTorch ranks share one tierfs mount, as
on a GPU node: each rank is its own process with a DataLoader of 2 worker
processes, DistributedSampler(num_replicas=4, rank=r, shuffle=True) wrapped
in HintedSampler (tools/python/tierfs_hint.py), a compute time per batch, two
epochs, over a simulated slow PFS (tools/bench/torch_ranks.py runs them).

Checks: every sample is read exactly once per epoch across the ranks
(torch_ranks.py fails otherwise); the daemon holds one stream per rank, and
every rank's reads found files promoted ahead of it (look-ahead hits for
every rank, not only the one furthest ahead).
Exit 77 (skipped) without python3-torch or a usable /dev/fuse.
"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness  # noqa: E402

RANKS, FILES = 4, 160


class TorchRanksTest(unittest.TestCase):
    def test_four_ranks_each_get_lookahead(self):
        with harness.workdir() as (src, mnt):
            files = harness.make_files(src, FILES, 30_000, subdirs=4)
            pfs = os.path.join(os.path.dirname(src), "pfs")
            sim = harness.PfsSim(src, pfs, "read_ms=10,meta_ms=1")
            try:
                with harness.Mount(pfs, mnt, ["ram=64M", "prefetch=order"]) as m:
                    out = os.path.join(os.path.dirname(src), "ranks.json")
                    r = subprocess.run(
                        ["/usr/bin/python3", os.path.join(REPO, "tools", "bench", "torch_ranks.py"),
                         mnt, "--ranks", str(RANKS), "--workers", "2", "--batch", "8",
                         "--compute-ms", "20", "--epochs", "2", "--hint-order", "--json", out]
                        # The page cache would serve epoch 2 unseen (then only //epoch
                        # tells the daemon the epoch is past): drop it, as root can.
                        + (["--drop-caches"] if os.geteuid() == 0 else []),
                        capture_output=True, text=True, timeout=240)
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    with open(out) as f:
                        rows = [json.loads(line) for line in f if line.strip()]
                    epochs = [row for row in rows if row.get("phase") == "epoch"]
                    self.assertEqual(len(epochs), 2, rows)
                    self.assertTrue(all(row["missing"] == 0 for row in epochs), epochs)
                    s = m.stats()
                    streams = s["prefetch"]["order"]["streams"]
                    self.assertEqual(len(streams), RANKS, streams)
                    for st in streams:
                        seen = 2 if os.geteuid() == 0 else 1  # epochs whose reads reached us
                        self.assertEqual(st["consumed"], seen * FILES // RANKS, st)
                        self.assertGreater(st["lookahead_hits"], 0, st)
                        self.assertEqual(st["epochs"], 2, st)
                    self.assertEqual(s["source"]["read_bytes"], sum(map(len, files.values())))
            finally:
                sim.close()


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIPPED: python3-torch is not installed")
        sys.exit(harness.SKIP)
    harness.main()


if __name__ == "__main__":
    main()
