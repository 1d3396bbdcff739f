#!/usr/bin/python3
"""torch_loader.py: a real PyTorch client for the benchmark.

  torch_loader.py ROOT [--epochs 3] [--workers 2] [--batch 32] [--compute-ms 0]
                  [--seed 1] [--label NAME] [--json FILE|-] [--pfs-stats FILE]
                  [--allow-errors] [--drop-caches] [--hint-order] [--read-log FILE]

A torch.utils.data.DataLoader over torchvision's ImageFolder (Debian's
python3-torch and python3-torchvision): worker processes open, read and
JPEG-decode every image (PIL), resize to 64x64 and batch them; each epoch is
shuffled with a generator seeded by (seed, epoch). Reports the same table and
JSON lines as tierfs-bench: wall time, files/s, MB/s of encoded bytes, per
sample read+decode latency p50/p99, and the epoch's PFS operations from
pfs-sim's counters. Run it with /usr/bin/python3.

--hint-order wraps the sampler in tools/python/tierfs_hint.py's HintedSampler:
before each epoch, the epoch's shuffled files (relative to ROOT) are appended
to ROOT/.tierfs/order in one write, for tierfs -o prefetch=order; without that
file the helper warns once and the epoch goes on. The epoch's row carries
"hinted": 1 if that epoch's order was declared, else 0. --read-log FILE appends
each sample's path relative to ROOT as its read starts (in read order with
--workers 0). Entries whose name starts with '.' are skipped, as tierfs-bench
does (control directories are not classes).
"""
import argparse
import io
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_HELPERS = os.path.join(os.path.dirname(HERE), "python")  # tools/python: tierfs_hint


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("root")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--compute-ms", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--label", default="torch")
    p.add_argument("--json")
    p.add_argument("--pfs-stats")
    p.add_argument("--allow-errors", action="store_true")
    p.add_argument("--drop-caches", action="store_true")
    p.add_argument("--hint-order", action="store_true",
                   help="declare each epoch's order to ROOT/.tierfs/order (tierfs_hint.HintedSampler)")
    p.add_argument("--read-log", help="append each sample's path (relative to ROOT) as its read starts")
    args = p.parse_args()
    if args.epochs < 1 or args.workers < 0 or args.batch < 1 or args.compute_ms < 0:
        p.error("--epochs and --batch must be >= 1, --workers and --compute-ms >= 0")
    if not os.path.isdir(args.root):
        p.error(f"{args.root} is not a directory")
    return args


def pfs_counters(path):
    if not path:
        return {}
    with open(path) as f:
        return json.load(f)["ops"]


def quantile_ms(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1e3


def main():
    args = parse_args()
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, RandomSampler
    try:
        from torchvision import datasets, transforms
    except ImportError:
        sys.exit("torch_loader: python3-torchvision is missing")
    torch.set_num_threads(1)

    shape = transforms.Compose([transforms.Resize((64, 64)), transforms.PILToTensor()])

    root_prefix = os.path.join(args.root, "")

    class TimedImageFolder(datasets.ImageFolder):
        """ImageFolder whose samples also carry bytes read, latency, error."""

        def find_classes(self, directory):
            classes = sorted(e.name for e in os.scandir(directory)
                             if e.is_dir() and not e.name.startswith("."))
            if not classes:
                raise FileNotFoundError(f"no class directory in {directory}")
            return classes, {name: i for i, name in enumerate(classes)}

        def __getitem__(self, index):
            path, target = self.samples[index]
            if args.read_log:
                fd = os.open(args.read_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, (path[len(root_prefix):] + "\n").encode("utf-8", "surrogateescape"))
                finally:
                    os.close(fd)
            start = time.monotonic()
            try:
                with open(path, "rb") as f:
                    data = f.read()
                image = shape(Image.open(io.BytesIO(data)).convert("RGB"))
                return image, target, len(data), time.monotonic() - start, 0
            except OSError:
                if not args.allow_errors:
                    raise
                return torch.zeros(3, 64, 64, dtype=torch.uint8), target, 0, time.monotonic() - start, 1

    out = sys.stdout if args.json == "-" else (open(args.json, "a") if args.json else None)
    base = {"label": args.label, "workers": args.workers, "batch": args.batch,
            "compute_ms": args.compute_ms, "seed": args.seed, "loader": "torch"}

    def emit(row):
        if out:
            out.write(json.dumps(dict(base, **row)) + "\n")
            out.flush()

    def delta(before, after):
        return {"pfs_" + k: after[k] - before.get(k, 0)
                for k in ("meta_ops", "opens", "reads", "read_bytes", "read_errors") if k in after}

    before = pfs_counters(args.pfs_stats)
    start = time.monotonic()
    dataset = TimedImageFolder(args.root)
    listed = time.monotonic() - start
    pfs = delta(before, pfs_counters(args.pfs_stats)) if args.pfs_stats else {}
    print(f"{args.label}: {len(dataset)} files listed in {listed:.3f} s (torch DataLoader)")
    emit(dict({"phase": "list", "files": len(dataset), "wall_s": listed}, **pfs))
    generator = torch.Generator()
    sampler = RandomSampler(dataset, generator=generator)
    if args.hint_order:
        sys.path.insert(0, PYTHON_HELPERS)
        from tierfs_hint import HintedSampler
        sampler = HintedSampler(sampler, dataset.samples, args.root)
    loader = DataLoader(dataset, batch_size=args.batch, num_workers=args.workers,
                        sampler=sampler, persistent_workers=args.workers > 0)
    print(f"{'label':<16} {'epoch':>5} {'wall_s':>8} {'files/s':>9} {'MB/s':>8} {'p50_ms':>8} "
          f"{'p99_ms':>8} {'errors':>6} {'pfs_meta':>9} {'pfs_reads':>9} {'pfs_MB':>9}")
    failed = False
    for epoch in range(1, args.epochs + 1):
        if args.drop_caches:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        generator.manual_seed(args.seed * 1000003 + epoch)
        before = pfs_counters(args.pfs_stats)
        latencies, files, nbytes, errors = [], 0, 0, 0
        hinted_before = getattr(sampler, "epochs_hinted", 0)
        start = time.monotonic()
        for _, _, sizes, lat, errs in loader:
            files += len(sizes) - int(errs.sum())
            nbytes += int(sizes.sum())
            errors += int(errs.sum())
            latencies += lat.tolist()
            if args.compute_ms > 0:
                time.sleep(args.compute_ms / 1e3)
        wall = time.monotonic() - start
        pfs = delta(before, pfs_counters(args.pfs_stats)) if args.pfs_stats else {}
        row = {"phase": "epoch", "epoch": epoch, "wall_s": wall, "files": files, "errors": errors,
               "bytes": nbytes, "files_per_s": files / wall, "mb_per_s": nbytes / 1e6 / wall,
               "lat_p50_ms": quantile_ms(latencies, 0.5), "lat_p99_ms": quantile_ms(latencies, 0.99)}
        if args.hint_order:
            row["hinted"] = sampler.epochs_hinted - hinted_before
        emit(dict(row, **pfs))
        print(f"{args.label:<16} {epoch:>5} {wall:>8.3f} {row['files_per_s']:>9.1f} "
              f"{row['mb_per_s']:>8.1f} {row['lat_p50_ms']:>8.2f} {row['lat_p99_ms']:>8.2f} "
              f"{errors:>6} {pfs.get('pfs_meta_ops', '-'):>9} {pfs.get('pfs_reads', '-'):>9} "
              f"{pfs.get('pfs_read_bytes', 0) / 1e6:>9.1f}", flush=True)
        failed |= errors > 0 and not args.allow_errors
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
