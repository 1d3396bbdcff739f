"""torch_loader.py over a pfs-sim mount: a real DataLoader with 2 workers
reads and decodes every JPEG once per epoch, and the PFS counters of each
epoch show one open and the file's bytes per image. With --hint-order
(tierfs_hint.HintedSampler) the order appended to ROOT/.tierfs/order, read
back from a regular file, is each epoch's shuffle and the order the loader
read. Skips (77) without FUSE or python3-torch."""
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

        # --hint-order on a plain directory whose .tierfs/order is a regular
        # file (ImageFolder must not take .tierfs for a class); 0 workers, so
        # the read log is the read order.
        order_file = os.path.join(data, ".tierfs", "order")
        os.makedirs(os.path.dirname(order_file))
        open(order_file, "w").close()
        out2, log = os.path.join(tmp, "hint.jsonl"), os.path.join(tmp, "reads.log")
        proc = subprocess.run(["/usr/bin/python3", loader, data, "--epochs", "2", "--workers", "0",
                               "--batch", "5", "--json", out2, "--hint-order", "--read-log", log],
                              capture_output=True, text=True, timeout=100)
        print(proc.stdout, proc.stderr[-2000:])
        marked = open(order_file).read().splitlines()
        checks.check(marked.count("//epoch") == 2 and marked[0] == "//epoch",
                     "each epoch's declaration starts with //epoch (tierfs_hint)")
        lines = [line for line in marked if line != "//epoch"]
        reads = open(log).read().splitlines() if os.path.exists(log) else []
        names = sorted(os.path.relpath(os.path.join(d, f), data) for d, _, fs in os.walk(data)
                       for f in fs if not d.startswith(os.path.dirname(order_file)))
        checks.check(proc.returncode == 0, "torch_loader --hint-order exits 0")
        checks.check(len(lines) == 48 and sorted(lines[:24]) == names and sorted(lines[24:]) == names
                     and lines[:24] != lines[24:], "each epoch declares its own shuffle of the 24 files")
        checks.check(lines == reads, "the declared order is the order the DataLoader read")
        rows = [json.loads(line) for line in open(out2)] if os.path.exists(out2) else []
        checks.check([r.get("hinted") for r in rows if r["phase"] == "epoch"] == [1, 1],
                     "both epoch rows say the order was declared")
    checks.exit()


if __name__ == "__main__":
    main()
