"""The benchmark driver end to end in --smoke mode (tiny datasets, fast PFS),
so tools/bench/run cannot rot: every scenario runs, the reference contenders
read every file with no error, PFS traffic is attributed correctly, tierfs
either runs or is skipped with a note, every scenario has its bound
(max(native's first epoch, the PFS floor)) in the table, and no mount is left
behind. With python3-torch, torch-ranks runs too: 2 ranks x 1 worker (not
the full run's 4 x 2: each contender pays a torch import and a fork per rank
and worker, too slow on CI's 2 cores) and only direct, tierfs-order, native;
every sample read once per epoch across the ranks."""
import json
import os
import subprocess
import tempfile

import mounts


def main():
    args = mounts.parse_args()
    mounts.require_fuse(os.path.join(args.bin_dir, "pfs-sim"))
    checks = mounts.Checks()
    with tempfile.TemporaryDirectory(prefix="bench-smoke-", dir="/var/tmp") as work:
        run = os.path.join(args.source_dir, "tools", "bench", "run")
        proc = subprocess.run(["/usr/bin/python3", run, "--smoke", "--bin-dir", args.bin_dir,
                               "--work", work], capture_output=True, text=True, timeout=200)
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        checks.check(proc.returncode == 0, f"run --smoke exits 0 (got {proc.returncode})")
        with open(os.path.join(work, "results", "summary.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        by = {(r["scenario"], r["contender"]): r for r in rows}
        scenarios = sorted({r["scenario"] for r in rows})
        torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                               capture_output=True).returncode == 0
        want = (["resnet50-like", "shards-2x", "shards-fits", "small-2x", "small-fits"]
                + (["torch-ranks"] if torch else []) + ["unet3d-like"])
        checks.check(scenarios == want, f"all scenarios ran: {scenarios} (torch: {torch})")
        with open(os.path.join(work, "results", "results.md")) as f:
            results = f.read()
        checks.check("| epoch 1 / bound | cold / bound |" in results, "results.md has the bound columns")
        # MLPerf Storage's terms: AU per epoch beside the epoch times, for the
        # two MLPerf-like scenarios (emulated compute), none elsewhere.
        checks.check("| epoch 2 s | AU per epoch |" in results, "results.md has the AU column")
        checks.check("AU (accelerator utilization, MLPerf Storage's definition)" in results,
                     "results.md defines AU")
        for (sc, name), r in sorted(by.items()):
            if r.get("skipped"):
                continue
            au = r.get("au") or []
            if sc in ("resnet50-like", "unet3d-like"):
                checks.check(len(au) == 2 and all(a is not None and 0 < a <= 1.05 for a in au),
                             f"{sc}/{name}: an AU per epoch, in (0, 1]: {au}")
            else:
                checks.check(all(a is None for a in au), f"{sc}/{name}: no AU without compute")
        checks.check("resnet50-like: MLPerf Storage resnet50, scaled down: 60 files" in results
                     and "unet3d-like: MLPerf Storage unet3d, scaled down: 4 files" in results,
                     "results.md says how the MLPerf workloads are scaled")
        for sc in scenarios:
            ran = [r for r in rows if r["scenario"] == sc and not r.get("skipped")]
            floor = (ran[0].get("pfs_floor") if ran else None) or {}
            parts = [floor.get(k, 0) for k in ("data_slots_s", "link_s", "meta_s")]
            native = by.get((sc, "native"), {}).get("epoch_s", [0])[0]
            limit = max(floor.get("floor_s", 0), native)
            checks.check(bool(ran) and floor.get("floor_s", 0) > 0 and floor["floor_s"] == max(parts)
                         and all(r.get("bound_s") == limit and r.get("pfs_floor") == floor for r in ran),
                         f"{sc}: every contender's bound is {limit:.3f} s = max(native's epoch 1 "
                         f"{native:.3f}, PFS floor {floor.get('floor_s', 0):.3f})")
        if torch:
            for name in ("direct", "tierfs-order", "native"):
                r = by.get(("torch-ranks", name), {})
                ranks = r.get("ranks") or []
                checks.check(not r.get("skipped") and r.get("files") == 60 and r.get("errors") == 0
                             and len(ranks) == 2
                             and all(len(e["rank_wall_s"]) == 2 and e["missing"] == 0
                                     and e["spread"] >= 0 for e in ranks),
                             f"torch-ranks/{name}: 2 epochs, 2 ranks, every one of 60 samples once")
            checks.check(("torch-ranks", "copy-first") not in by and ("torch-ranks", "rclone-full") not in by,
                         "torch-ranks runs only direct, tierfs-order, native in --smoke")
            order = by.get(("torch-ranks", "tierfs-order"), {})
            if order and not order.get("skipped"):
                checks.check(order.get("hinted") == [1, 1], f"every rank declared its order: {order.get('hinted')}")
            checks.check("| rank epochs s |" in results, "results.md has the per-rank table")
        for sc in [s for s in scenarios if s != "torch-ranks"]:
            files = {"unet3d-like": 4, "shards-fits": 2, "shards-2x": 2}.get(sc, 60)
            for name in ("direct", "copy-first", "native"):
                r = by.get((sc, name), {})
                checks.check(not r.get("skipped") and r.get("files") == files and r.get("errors") == 0
                             and len(r.get("epoch_s", [])) == 2,
                             f"{sc}/{name}: 2 epochs of {files} files, no errors")
            direct, native, copy = by[(sc, "direct")], by[(sc, "native")], by[(sc, "copy-first")]
            checks.check(direct["pfs_read_mb"] > 0 and native["pfs_read_mb"] == 0,
                         f"{sc}: direct reads the PFS ({direct['pfs_read_mb']:.1f} MB), native not")
            checks.check(abs(direct["pfs_read_mb"] - 2 * copy["pfs_read_mb"]) < 0.01 * direct["pfs_read_mb"] + 0.01,
                         f"{sc}: direct reads the dataset twice, copy-first once")
            tierfs = by.get((sc, "tierfs"), {})
            checks.check(bool(tierfs) and (not tierfs.get("skipped") or tierfs.get("note")),
                         f"{sc}/tierfs ran or was skipped with a note: {tierfs.get('note') or 'ran'}")
            if tierfs and not tierfs.get("skipped"):
                checks.check(tierfs["errors"] == 0 and tierfs["files"] == files,
                             f"{sc}/tierfs read every file")
        with open("/proc/self/mounts") as f:
            left = [line.split()[1] for line in f if work in line]
        checks.check(not left, f"no mount left behind: {left}")
    checks.exit()


if __name__ == "__main__":
    main()
