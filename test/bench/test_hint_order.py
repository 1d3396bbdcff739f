"""tierfs-bench --hint-order: before each epoch the loader appends that
epoch's order to ROOT/.tierfs/order, and the order it writes is the order it
reads. Checked on a plain directory whose .tierfs/order is a regular file
(the written bytes are read back), on a real tierfs mount with
-o prefetch=order (the daemon's prefetch.order counters) and without the
control file (a warning, the epochs still run). Skips (77) without FUSE."""
import json
import os
import subprocess
import tempfile

import mounts
from benchlib import mounts as bench_mounts  # noqa: E402  (on sys.path via mounts)

FILES = 24
EPOCHS = 2


def bench(args, root, tmp, name, *extra):
    """Runs tierfs-bench; returns (process, json rows, read-log lines)."""
    rows, log = os.path.join(tmp, name + ".jsonl"), os.path.join(tmp, name + ".log")
    proc = subprocess.run([os.path.join(args.bin_dir, "tierfs-bench"), root, "--epochs", str(EPOCHS),
                           "--seed", "5", "--json", rows, "--read-log", log, *extra],
                          capture_output=True, text=True, timeout=60)
    print(proc.stdout, proc.stderr)
    data = [json.loads(line) for line in open(rows)] if os.path.exists(rows) else []
    reads = open(log).read().splitlines() if os.path.exists(log) else []
    return proc, [r for r in data if r["phase"] == "epoch"], reads


def main():
    args = mounts.parse_args()
    mounts.require_fuse(os.path.join(args.bin_dir, "tierfs"), os.path.join(args.bin_dir, "tierfs-bench"))
    checks = mounts.Checks()
    root = os.geteuid() == 0
    with tempfile.TemporaryDirectory(prefix="bench-hint-", dir="/var/tmp") as tmp:
        src = os.path.join(tmp, "src")
        names = sorted(f"c{i % 3}/f{i:02d}.bin" for i in range(FILES))
        for i, name in enumerate(names):
            mounts.write_file(os.path.join(src, name), 1000 + 997 * i, seed=i)

        # 1. A plain directory with a regular .tierfs/order: read the bytes back.
        order_file = os.path.join(src, ".tierfs", "order")
        os.makedirs(os.path.dirname(order_file))
        open(order_file, "w").close()
        proc, rows, reads = bench(args, src, tmp, "plain", "--hint-order", "--workers", "1", "--batch", "1")
        written = open(order_file).read()
        checks.check(proc.returncode == 0, f"tierfs-bench exits 0 ({proc.returncode})")
        checks.check(written.endswith("\n") and written.count("\n") == EPOCHS * (FILES + 1),
                     f"{EPOCHS} x (//epoch + {FILES}) lines written, each ending in a newline")
        marked = written.splitlines()
        checks.check(all(marked[e * (FILES + 1)] == "//epoch" for e in range(EPOCHS)),
                     "each epoch starts with an //epoch line")
        lines = [line for line in marked if line != "//epoch"]
        epochs = [lines[e * FILES:(e + 1) * FILES] for e in range(EPOCHS)]
        checks.check(all(sorted(block) == names for block in epochs),
                     "each epoch declares every file once, relative to ROOT")
        checks.check(epochs[0] != epochs[1], "the two epochs declare different orders")
        checks.check(lines == reads, "the declared order is the order the loader read (1 worker)")
        checks.check([r.get("hinted") for r in rows] == [FILES] * EPOCHS,
                     f"rows report {FILES} hinted lines per epoch: {[r.get('hinted') for r in rows]}")
        os.unlink(order_file)
        os.rmdir(os.path.dirname(order_file))

        # 2. No .tierfs/order: one warning, the epochs still run, nothing created.
        proc, rows, _ = bench(args, src, tmp, "missing", "--hint-order")
        checks.check(proc.returncode == 0 and len(rows) == EPOCHS and all(r["files"] == FILES for r in rows),
                     "without .tierfs/order every epoch still runs")
        checks.check(proc.stderr.count("warning: cannot declare the read order") == 1,
                     "one warning names the missing control file")
        checks.check([r.get("hinted") for r in rows] == [-1] * EPOCHS, "rows report hinted -1")
        checks.check(not os.path.exists(os.path.join(src, ".tierfs")), "nothing was created")

        # 3. A real mount in order mode: the daemon saw every line, in that order.
        mnt = os.path.join(tmp, "mnt")
        os.makedirs(mnt)
        cmd = [os.path.join(args.bin_dir, "tierfs"), src, mnt, "-o", "ram=64M,prefetch=order"]
        try:
            bench_mounts.mount(cmd, mnt, os.path.join(tmp, "tierfs.log"))
            # Caches dropped before each epoch, so that every read reaches the
            # daemon (a page-cache hit is invisible to it).
            proc, rows, mount_reads = bench(args, mnt, tmp, "mount", "--hint-order", "--workers", "1",
                                            "--batch", "1", *(["--drop-caches"] if root else []))
            with open(os.path.join(mnt, ".tierfs", "stats")) as f:
                order = json.load(f)["prefetch"]["order"]
        finally:
            mounts.unmount(mnt)
        print("prefetch.order:", order)
        checks.check(proc.returncode == 0 and all(r["errors"] == 0 and r["files"] == FILES for r in rows),
                     "the loader read every file through the mount")
        checks.check(mount_reads == lines, "same seed: the mount run read the order read back in step 1")
        checks.check(order["declared"] == EPOCHS * FILES and order["valid_lines"] == EPOCHS * (FILES + 1)
                     and order["rejected_lines"] == 0,
                     f"the daemon accepted {EPOCHS} x {FILES} declared lines, none rejected")
        want = EPOCHS * FILES if root else FILES
        checks.check(order["consumed"] >= want and order["position"] >= want,
                     f"the daemon's reader consumed the declared order up to {want}")
    checks.exit()


if __name__ == "__main__":
    main()
