#!/usr/bin/python3
"""example_train.py: a small PyTorch training loop over a tierfs mount, with
order hints (tools/python/tierfs_hint.py).

  example_train.py --mount /mnt/imagenet --data train [--epochs 2] [--workers 4]
                   [--batch-size 64] [--size 64] [--seed 1] [--no-hints]

Reads torchvision's ImageFolder at MOUNT/DATA through a DataLoader with worker
processes; each sample is decoded (PIL), resized and fed to a tiny
convolutional model for one SGD step per batch. Each epoch's shuffled order is
declared to the mount before the epoch starts, so a daemon mounted with
`-o prefetch=order` promotes files just ahead of the readers. Prints per epoch
the time, samples and samples/s, and (on a tierfs mount) the bytes read from
SOURCE during the epoch. Run with /usr/bin/python3 (Debian's python3-torch).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tierfs_hint  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mount", required=True, help="the tierfs mount point")
    p.add_argument("--data", required=True,
                   help="the ImageFolder root: a directory under the mount (relative to it)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--size", type=int, default=64, help="images are resized to SIZE x SIZE")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-hints", action="store_true", help="do not declare the read order")
    args = p.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.workers < 0 or args.size < 8:
        p.error("--epochs and --batch-size must be >= 1, --workers >= 0, --size >= 8")
    if not os.path.isdir(args.mount):
        p.error(f"--mount {args.mount!r} is not a directory")
    args.root = os.path.join(args.mount, args.data)
    if not os.path.isdir(args.root):
        p.error(f"--data: {args.root!r} is not a directory")
    return args


def source_bytes(mount):
    """SOURCE bytes the daemon has read so far, or None if this is not tierfs."""
    try:
        with open(os.path.join(mount, ".tierfs", "stats")) as f:
            return json.load(f)["source"]["read_bytes"]
    except (OSError, ValueError, KeyError):
        return None


def main():
    args = parse_args()
    try:
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, RandomSampler
        from torchvision import datasets, transforms
    except ImportError as e:
        sys.exit(f"example_train: needs python3-torch and python3-torchvision ({e})")
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    shape = transforms.Compose([transforms.Resize((args.size, args.size)),
                                transforms.ToTensor()])
    dataset = datasets.ImageFolder(args.root, transform=shape)
    if len(dataset) == 0:
        sys.exit(f"example_train: no images under {args.root}")
    sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(args.seed))
    if not args.no_hints:
        sampler = tierfs_hint.HintedSampler(sampler, dataset.samples, args.mount)
    loader = DataLoader(dataset, sampler=sampler, batch_size=args.batch_size,
                        num_workers=args.workers, persistent_workers=args.workers > 0)

    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(),
        nn.Linear(8 * 4 * 4, len(dataset.classes)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    print(f"{len(dataset)} images in {len(dataset.classes)} classes under {args.root}; "
          f"{args.workers} workers, batch {args.batch_size}, "
          f"hints {'off' if args.no_hints else 'on'}")
    for epoch in range(args.epochs):
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        before = source_bytes(args.mount)
        start = time.monotonic()
        samples, loss = 0, 0.0
        for images, targets in loader:
            optimizer.zero_grad()
            step = loss_fn(model(images), targets)
            step.backward()
            optimizer.step()
            samples += len(targets)
            loss = step.item()
        seconds = time.monotonic() - start
        after = source_bytes(args.mount)
        pfs = "" if before is None or after is None else \
            f", SOURCE read {(after - before) / 2**20:.1f} MiB"
        print(f"epoch {epoch + 1}: {seconds:.2f} s, {samples} samples, "
              f"{samples / seconds:.0f} samples/s, loss {loss:.3f}{pfs}", flush=True)


if __name__ == "__main__":
    main()
