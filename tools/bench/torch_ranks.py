#!/usr/bin/python3
"""torch_ranks.py: R data-parallel PyTorch ranks reading one mount at once.

  torch_ranks.py ROOT [--ranks 4] [--workers 2] [--batch 16] [--compute-ms 20]
                 [--epochs 3] [--seed 1] [--sync-every 0] [--label NAME]
                 [--json FILE|-] [--pfs-stats FILE] [--allow-errors]
                 [--drop-caches] [--hint-order]

What a DDP job on one node does to its data, without GPUs or a process
group: one process per rank (forked together from this one after torch is
imported, so the import is paid once), each with its own
torch.utils.data.DataLoader of --workers worker processes over a plain bytes
Dataset (a worker opens and reads the whole file; the bytes go to the rank),
sampled by DistributedSampler(num_replicas=R, rank=r, shuffle=True, seed),
set_epoch(epoch) each epoch. Each rank sleeps --compute-ms per batch (the
training step). --hint-order wraps each rank's sampler in
HintedSampler (tools/python/tierfs_hint.py), so every rank appends its own 1/R of
the epoch's order to ROOT/.tierfs/order when its epoch starts (R declarers).

Lockstep: every epoch starts with all ranks released by one barrier (the
previous epoch's last all-reduce); --sync-every N also makes the ranks meet
at a barrier after every N batches, as DDP's per-step all-reduce does with
N=1. With the default 0 each rank's epoch time is its own I/O experience, and
the slowest rank's is a lower bound of the lockstep job's epoch.

Per epoch it prints and writes (JSON lines, as torch_loader.py) the epoch
time (first rank's start to the last rank's end: the slowest rank), each
rank's epoch time and time waiting for data, the spread (slowest / fastest
rank - 1), files/s, read latency p50/p99, the PFS operations and bytes of the
epoch (pfs-sim's counters), and, on a tierfs mount, the daemon's
prefetch.order figures after the epoch, with per-stream figures when the
daemon's stats have prefetch.order.streams[] (streams that name a rank's pid
are shown as that rank). Checks every sample is read once per epoch.
Run it with /usr/bin/python3 (Debian's python3-torch).
"""
import argparse
import json
import multiprocessing as mp
import os
import queue
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_HELPERS = os.path.join(os.path.dirname(HERE), "python")  # tools/python: tierfs_hint
BARRIER_TIMEOUT_S = 1800


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("root")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    p.add_argument("--batch", type=int, default=16, help="samples per batch per rank")
    p.add_argument("--compute-ms", type=float, default=20.0, help="training step per batch")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sync-every", type=int, default=0,
                   help="ranks meet at a barrier after every N batches (0: at epoch start only)")
    p.add_argument("--label", default="torch-ranks")
    p.add_argument("--json")
    p.add_argument("--pfs-stats")
    p.add_argument("--allow-errors", action="store_true")
    p.add_argument("--drop-caches", action="store_true")
    p.add_argument("--hint-order", action="store_true",
                   help="each rank declares its order to ROOT/.tierfs/order (HintedSampler)")
    args = p.parse_args()
    if (args.ranks < 1 or args.epochs < 1 or args.batch < 1 or args.workers < 0
            or args.compute_ms < 0 or args.sync_every < 0):
        p.error("--ranks, --epochs, --batch must be >= 1; --workers, --compute-ms, --sync-every >= 0")
    if not os.path.isdir(args.root):
        p.error(f"{args.root} is not a directory")
    return args


def list_files(root):
    """Every regular file under root, sorted, dot entries skipped (as tierfs-bench)."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [os.path.join(dirpath, f) for f in sorted(files) if not f.startswith(".")]
    return out


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def pfs_counters(path):
    return (read_json(path) or {}).get("ops", {}) if path else {}


def order_figures(root, rank_pids):
    """The daemon's prefetch.order group after an epoch, or None if ROOT is not
    a tierfs mount. Tolerant of the layout: streams may be absent, a list of
    objects, or an object keyed by stream name; a stream naming a rank's pid
    gets "rank"."""
    stats = read_json(os.path.join(root, ".tierfs", "stats"))
    if not isinstance(stats, dict):
        return None
    prefetch = stats.get("prefetch")
    order = prefetch.get("order") if isinstance(prefetch, dict) else None
    if not isinstance(order, dict):
        return None
    out = {k: v for k, v in order.items() if isinstance(v, (int, float, str))}
    streams = order.get("streams")
    if isinstance(streams, dict):
        streams = [dict(v, name=k) if isinstance(v, dict) else {"name": k, "value": v}
                   for k, v in streams.items()]
    if isinstance(streams, list):
        pid_rank = {pid: r for r, pid in enumerate(rank_pids)}
        out["streams"] = []
        for s in streams:
            if not isinstance(s, dict):
                continue
            s = dict(s)
            if s.get("pid") in pid_rank:
                s["rank"] = pid_rank[s["pid"]]
            out["streams"].append(s)
    return out


def stream_line(s):
    who = f"rank {s['rank']}" if "rank" in s else str(s.get("name", s.get("id", s.get("pid", "?"))))
    figures = " ".join(f"{k}={v}" for k, v in s.items()
                       if k not in ("rank", "name") and isinstance(v, (int, float, str)))
    return f"{who}: {figures}"


def quantile_ms(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1e3


def rank_main(args, rank, paths, barriers, results):
    """One rank: a DataLoader over its DistributedSampler share, epoch by epoch."""
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data.distributed import DistributedSampler
    torch.set_num_threads(1)
    start_barrier, step_barrier = barriers

    class BytesDataset(Dataset):
        """Sample i: file i's bytes, with its index, read latency and error flag."""

        def __len__(self):
            return len(paths)

        def __getitem__(self, index):
            start = time.monotonic()
            try:
                with open(paths[index], "rb") as f:
                    data = f.read()
                return index, data, time.monotonic() - start, 0
            except OSError:
                if not args.allow_errors:
                    raise
                return index, b"", time.monotonic() - start, 1

    dataset = BytesDataset()
    sampler = DistributedSampler(dataset, num_replicas=args.ranks, rank=rank, shuffle=True,
                                 seed=args.seed)
    if args.hint_order:
        sys.path.insert(0, PYTHON_HELPERS)
        from tierfs_hint import HintedSampler
        sampler = HintedSampler(sampler, paths, args.root)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, num_workers=args.workers,
                        persistent_workers=args.workers > 0, collate_fn=list)
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        hinted_before = getattr(sampler, "epochs_hinted", 0)
        start_barrier.wait(BARRIER_TIMEOUT_S)
        start = time.monotonic()
        indices, latencies, nbytes, errors, waited, batches = [], [], 0, 0, 0.0, 0
        it = iter(loader)
        while True:
            asked = time.monotonic()
            batch = next(it, None)
            waited += time.monotonic() - asked
            if batch is None:
                break
            for index, data, latency, err in batch:
                indices.append(index)
                latencies.append(latency)
                nbytes += len(data)
                errors += err
            if args.compute_ms > 0:
                time.sleep(args.compute_ms / 1e3)
            batches += 1
            if step_barrier is not None and batches % args.sync_every == 0:
                asked = time.monotonic()
                step_barrier.wait(BARRIER_TIMEOUT_S)
                waited += time.monotonic() - asked
        end = time.monotonic()
        results.put({"rank": rank, "epoch": epoch, "start": start, "end": end, "indices": indices,
                     "latencies": latencies, "bytes": nbytes, "errors": errors, "wait_s": waited,
                     "hinted": getattr(sampler, "epochs_hinted", 0) - hinted_before})


def collect(results, procs, count):
    """`count` rank results; raises RuntimeError if a rank dies first."""
    out = []
    while len(out) < count:
        try:
            out.append(results.get(timeout=1.0))
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"rank exited {dead[0].exitcode}")
    return sorted(out, key=lambda r: r["rank"])


def main():
    args = parse_args()
    import torch  # noqa: F401  (imported once here; the ranks are forked from this process)
    torch.set_num_threads(1)
    out = sys.stdout if args.json == "-" else (open(args.json, "a") if args.json else None)
    base = {"label": args.label, "workers": args.workers, "batch": args.batch, "ranks": args.ranks,
            "sync_every": args.sync_every, "compute_ms": args.compute_ms, "seed": args.seed,
            "loader": "torch-ranks"}

    def emit(row):
        if out:
            out.write(json.dumps(dict(base, **row)) + "\n")
            out.flush()

    def delta(before, after):
        return {"pfs_" + k: after[k] - before.get(k, 0)
                for k in ("meta_ops", "opens", "reads", "read_bytes", "read_errors") if k in after}

    before = pfs_counters(args.pfs_stats)
    start = time.monotonic()
    paths = list_files(args.root)
    listed = time.monotonic() - start
    emit(dict({"phase": "list", "files": len(paths), "wall_s": listed},
              **delta(before, pfs_counters(args.pfs_stats))))
    print(f"{args.label}: {len(paths)} files listed in {listed:.3f} s; {args.ranks} ranks x "
          f"{args.workers} workers, batch {args.batch}, {args.compute_ms:g} ms per batch, "
          f"barrier {'every %d batches' % args.sync_every if args.sync_every else 'per epoch'}")
    if not paths:
        sys.exit("torch_ranks: no files")

    ctx = mp.get_context("fork")
    barriers = (ctx.Barrier(args.ranks + 1),  # this process joins: it reads counters in between
                ctx.Barrier(args.ranks) if args.sync_every else None)
    results = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(args, r, paths, barriers, results))
             for r in range(args.ranks)]  # not daemonic: a rank has worker children
    for p in procs:
        p.start()
    rank_pids = [p.pid for p in procs]
    print(f"{'label':<16} {'epoch':>5} {'wall_s':>8} {'spread':>7} {'files/s':>9} {'p99_ms':>8} "
          f"{'errors':>6} {'pfs_meta':>9} {'pfs_reads':>9} {'pfs_MB':>8}  rank epoch s (data wait s)")
    failed = False
    try:
        for epoch in range(1, args.epochs + 1):
            if args.drop_caches:
                os.sync()
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
            before = pfs_counters(args.pfs_stats)
            barriers[0].wait(BARRIER_TIMEOUT_S)
            ranks = collect(results, procs, args.ranks)
            pfs = delta(before, pfs_counters(args.pfs_stats)) if args.pfs_stats else {}
            wall = max(r["end"] for r in ranks) - min(r["start"] for r in ranks)
            rank_wall = [r["end"] - r["start"] for r in ranks]
            seen = [i for r in ranks for i in r["indices"]]
            missing = len(set(range(len(paths))) - set(seen))
            files = len(seen) - sum(r["errors"] for r in ranks)
            latencies = [x for r in ranks for x in r["latencies"]]
            nbytes = sum(r["bytes"] for r in ranks)
            row = {"phase": "epoch", "epoch": epoch, "wall_s": wall, "files": files,
                   "errors": sum(r["errors"] for r in ranks), "bytes": nbytes,
                   "files_per_s": files / wall, "mb_per_s": nbytes / 1e6 / wall,
                   "lat_p50_ms": quantile_ms(latencies, 0.5),
                   "lat_p99_ms": quantile_ms(latencies, 0.99),
                   "rank_wall_s": rank_wall, "rank_wait_s": [r["wait_s"] for r in ranks],
                   "spread": max(rank_wall) / min(rank_wall) - 1 if min(rank_wall) > 0 else 0.0,
                   "missing": missing}
            if args.hint_order:
                row["hinted"] = int(all(r["hinted"] > 0 for r in ranks))
                row["rank_hinted"] = [r["hinted"] for r in ranks]
            order = order_figures(args.root, rank_pids)
            if order is not None:
                row["order"] = order
            emit(dict(row, **pfs))
            per_rank = " ".join(f"{w:.2f}({r['wait_s']:.2f})" for w, r in zip(rank_wall, ranks))
            print(f"{args.label:<16} {epoch:>5} {wall:>8.3f} {row['spread']:>7.2f} "
                  f"{row['files_per_s']:>9.1f} {row['lat_p99_ms']:>8.2f} {row['errors']:>6} "
                  f"{pfs.get('pfs_meta_ops', '-'):>9} {pfs.get('pfs_reads', '-'):>9} "
                  f"{pfs.get('pfs_read_bytes', 0) / 1e6:>8.1f}  {per_rank}", flush=True)
            for s in (order or {}).get("streams", []):
                print(f"{'':<16}   stream {stream_line(s)}")
            if missing:
                print(f"{args.label}: epoch {epoch}: {missing} samples were not read", flush=True)
            failed |= missing > 0 or (row["errors"] > 0 and not args.allow_errors)
    except (RuntimeError, threading.BrokenBarrierError) as e:
        print(f"{args.label}: FAILED: {e}", file=sys.stderr)
        failed = True
    finally:
        for p in procs:
            p.join(timeout=0 if failed else 30)
            if p.is_alive():
                p.terminate()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
