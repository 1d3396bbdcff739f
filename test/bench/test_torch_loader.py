"""torch_loader.py over a pfs-sim mount: a real DataLoader with 2 workers
reads and decodes every JPEG once per epoch, and the PFS counters of each
epoch show one open and the file's bytes per image. Skips (77) without
FUSE or python3-torch."""
import json
import os
import subprocess
import sys
import tempfile

import mounts


def main():
    args = mounts.parse_args()
    mounts.require_fuse(os.path.join(args.bin_dir, "pfs-sim"))
    if subprocess.run(["/usr/bin/python3", "-c", "import torch, torchvision, PIL"],
                      capture_output=True).returncode != 0:
        print("SKIP: python3-torch / python3-torchvision / python3-pil not installed")
        sys.exit(mounts.SKIP)
    checks = mounts.Checks()
    with tempfile.TemporaryDirectory(prefix="torch-loader-") as tmp:
        data = os.path.join(tmp, "data")
        subprocess.run(["/usr/bin/python3", os.path.join(args.bin_dir, "mkdataset"), "images", data,
                        "--files", "24", "--classes", "3", "--jpeg"], check=True, capture_output=True)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(data) for f in fs)
        out = os.path.join(tmp, "rows.jsonl")
        loader = os.path.join(args.source_dir, "tools", "bench", "torch_loader.py")
        with mounts.pfs_sim(args.bin_dir, data, "meta_ms=0.1,read_ms=0.2") as mnt:
            proc = subprocess.run(["/usr/bin/python3", loader, mnt, "--epochs", "2", "--workers", "2",
                                   "--batch", "5", "--json", out,
                                   "--pfs-stats", os.path.join(mnt, ".pfs-sim", "stats")],
                                  capture_output=True, text=True, timeout=100)
        print(proc.stdout, proc.stderr[-2000:])
        checks.check(proc.returncode == 0, "torch_loader exits 0")
        rows = [json.loads(line) for line in open(out)] if os.path.exists(out) else []
        epochs = [r for r in rows if r["phase"] == "epoch"]
        checks.check(len(epochs) == 2, f"two epoch rows ({len(epochs)})")
        for r in epochs:
            checks.check(r["files"] == 24 and r["errors"] == 0 and r["bytes"] == size,
                         f"epoch {r['epoch']}: 24 files, {r['bytes']} of {size} bytes")
            checks.check(r["pfs_opens"] == 24 and r["pfs_read_bytes"] == size,
                         f"epoch {r['epoch']}: PFS saw {r['pfs_opens']} opens, {r['pfs_read_bytes']} bytes")
    checks.exit()


if __name__ == "__main__":
    main()
