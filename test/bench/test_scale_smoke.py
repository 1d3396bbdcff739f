"""tools/bench/scale end to end on a small tree, local and behind pfs-sim, so
the namespace benchmark cannot rot: every row is printed, the listings
through the mount see every entry SOURCE has, a mount from the saved index
sends about one stat per directory to the PFS (and far fewer operations than
the scan), a mount with changed directories lists those again, and no mount
is left behind."""
import json
import os
import subprocess
import tempfile

import mounts

FILES, DIRS, CHANGED = 3000, 12, 3


def main():
    args = mounts.parse_args()
    mounts.require_fuse(os.path.join(args.bin_dir, "pfs-sim"), os.path.join(args.bin_dir, "tierfs"))
    checks = mounts.Checks()
    with tempfile.TemporaryDirectory(prefix="scale-smoke-", dir="/var/tmp") as work:
        out = os.path.join(work, "scale.json")
        cmd = ["/usr/bin/python3", os.path.join(args.source_dir, "tools", "bench", "scale"),
               "--files", str(FILES), "--dirs", str(DIRS), "--scan-threads", "8",
               "--changed", str(CHANGED), "--readdir-modes", "plus,plain",
               "--pfs-opts", "meta_ms=0.2,meta_parallel=16", "--bin-dir", args.bin_dir,
               "--work", work, "--json", out]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=100)
        print(proc.stdout[-4000:], proc.stderr[-2000:])
        checks.check(proc.returncode == 0, f"scale exits 0 (got {proc.returncode})")
        with open(out) as f:
            rows = json.load(f)["rows"]
        by = {(r["where"], r["row"]): r for r in rows}
        entries = FILES + DIRS + 1  # find prints the root too
        for where in ("local", "pfs"):
            for name in ("scan+index, 8 threads", "mount from index", "mount, no index (scan)",
                         "first find", "second find", "python walk (ImageFolder)",
                         "RSS per file (B)", "first find, readdir=plus",
                         "first find, readdir=plain", f"validate, {CHANGED} changed dirs"):
                r = by.get((where, name))
                checks.check(r is not None and r["seconds"] is not None and r["seconds"] > 0,
                             f"{where}: row '{name}' measured")
            finds = [r for r in rows if r["where"] == where and r["row"].startswith("first find")]
            checks.check(all(r["note"].startswith(f"{entries} entries") for r in finds),
                         f"{where}: every first find through the mount lists {entries} entries: "
                         f"{[r['note'] for r in finds]}")
            walk = by.get((where, "python walk (ImageFolder)"), {})
            checks.check(walk.get("note") == f"{FILES} files", f"{where}: the ImageFolder walk "
                         f"finds {FILES} files ({walk.get('note')})")
        ops = {name: (by.get(("pfs", name)) or {}).get("pfs_meta_ops") or 0
               for name in ("scan+index, 8 threads", "mount from index",
                            f"validate, {CHANGED} changed dirs")}
        scan, index, validate = ops.values()
        # One stat per directory: a LOOKUP and a GETATTR each in pfs-sim, a few more for the root.
        checks.check(DIRS + 1 <= index <= 2 * (DIRS + 1) + 8,
                     f"pfs: the mount from the index sends ~one stat per directory ({index} ops)")
        checks.check(scan >= 2 * FILES, f"pfs: the scan stats every file ({scan} ops)")
        per_dir = FILES // DIRS
        checks.check(validate >= index + CHANGED * per_dir,
                     f"pfs: {CHANGED} changed directories are listed and stated again "
                     f"({validate} ops against {index})")
        left = subprocess.run(["grep", "-c", work, "/proc/mounts"], capture_output=True, text=True)
        checks.check(left.stdout.strip() == "0", "no mount left behind")
    checks.exit()


if __name__ == "__main__":
    main()
