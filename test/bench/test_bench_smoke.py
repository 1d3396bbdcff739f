"""The benchmark driver end to end in --smoke mode (tiny datasets, fast PFS),
so tools/bench/run cannot rot: every scenario runs, the reference contenders
read every file with no error, PFS traffic is attributed correctly, tierfs
either runs or is skipped with a note, and no mount is left behind."""
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
                               "--work", work], capture_output=True, text=True, timeout=110)
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        checks.check(proc.returncode == 0, f"run --smoke exits 0 (got {proc.returncode})")
        with open(os.path.join(work, "results", "summary.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        by = {(r["scenario"], r["contender"]): r for r in rows}
        scenarios = sorted({r["scenario"] for r in rows})
        checks.check(scenarios == ["shards-2x", "shards-fits", "small-2x", "small-fits"],
                     f"all four scenarios ran: {scenarios}")
        for sc in scenarios:
            files = 60 if sc.startswith("small") else 2
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
