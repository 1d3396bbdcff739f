"""End to end: a real PyTorch DataLoader (2 worker processes) reads a
torchvision ImageFolder of real JPEGs through a tierfs mount with
`-o ram=...,prefetch=order`, declaring each epoch's order with
tools/python/tierfs_hint.py, for two epochs.

Checks: every sample is read exactly once per epoch; the daemon accepted
every hinted path; epoch 1 reads each SOURCE byte once and epoch 2 reads no
SOURCE byte at all, although its reads did reach the daemon (the files'
pages are evicted from the kernel's page cache between the epochs).
Exit 77 (skipped) without python3-torch, torchvision, PIL or a usable /dev/fuse.
"""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "python"))
import harness  # noqa: E402
import tierfs_hint  # noqa: E402

CLASSES, FILES = 4, 96


def drop_page_cache(paths):
    """Evicts the files' pages so the next reads reach the daemon (no root needed)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class TorchDataLoaderTest(unittest.TestCase):
    def setUp(self):
        self._work = harness.workdir()
        self.src, self.mnt = self._work.__enter__()
        self.addCleanup(self._work.__exit__, None, None, None)
        out = subprocess.run(
            [os.path.join(harness.BIN_DIR, "mkdataset"), "images", os.path.join(self.src, "train"),
             "--classes", str(CLASSES), "--files", str(FILES), "--mean-kb", "16", "--jpeg",
             "--seed", "3"], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)

    def make_loader(self, root):
        import torch
        from torch.utils.data import DataLoader, RandomSampler
        from torchvision import datasets, transforms

        shape = transforms.Compose([transforms.Resize((32, 32)), transforms.PILToTensor()])

        class IndexedImageFolder(datasets.ImageFolder):
            """Reads each file whole (so every byte reaches the daemon), decodes
            it and returns its index too, so the test can count samples."""

            def __getitem__(self, index):
                import io
                from PIL import Image
                path, target = self.samples[index]
                with open(path, "rb") as f:
                    data = f.read()
                with Image.open(io.BytesIO(data)) as img:
                    sample = shape(img.convert("RGB"))
                return sample, target, index, len(data)

        dataset = IndexedImageFolder(root)
        sampler = tierfs_hint.HintedSampler(
            RandomSampler(dataset, generator=torch.Generator().manual_seed(7)),
            dataset.samples, self.mnt)
        loader = DataLoader(dataset, sampler=sampler, batch_size=8, num_workers=2)
        return dataset, sampler, loader

    def run_epoch(self, loader):
        indices, nbytes = [], 0
        for images, targets, idx, sizes in loader:
            self.assertEqual(tuple(images.shape[1:]), (3, 32, 32))
            indices += idx.tolist()
            nbytes += int(sizes.sum())
        return indices, nbytes

    def test_two_epochs_with_order_hints(self):
        with harness.Mount(self.src, self.mnt, ["ram=64M", "prefetch=order"]) as m:
            dataset, sampler, loader = self.make_loader(os.path.join(self.mnt, "train"))
            self.assertEqual(len(dataset), FILES)
            paths = [p for p, _ in dataset.samples]
            total = sum(os.path.getsize(p) for p in paths)
            start = m.stats()
            self.assertEqual(start["prefetch"]["mode"], "order")
            self.assertEqual(start["source"]["read_bytes"], 0)

            first, first_bytes = self.run_epoch(loader)
            after1 = m.stats()
            drop_page_cache(paths)
            second, second_bytes = self.run_epoch(loader)
            after2 = m.stats()

            for epoch in (first, second):
                self.assertEqual(sorted(epoch), list(range(FILES)))  # each sample once
            self.assertNotEqual(first, second)  # reshuffled
            self.assertEqual(first_bytes, total)
            self.assertEqual(second_bytes, total)
            self.assertEqual(sampler.epochs_hinted, 2)
            order = after2["prefetch"]["order"]
            self.assertEqual(order["valid_lines"], 2 * FILES + 2)  # and two //epoch lines
            self.assertEqual(order["rejected_lines"], 0)
            # Epoch 1: each SOURCE byte once. Epoch 2: none, yet served by the daemon.
            self.assertEqual(after1["source"]["read_bytes"], total)
            self.assertEqual(after2["source"]["read_bytes"], total)
            served = after2["requests"]["read_bytes"] - after1["requests"]["read_bytes"]
            self.assertGreaterEqual(served, total)
            self.assertEqual(after2["tiers"][0]["used"], total)
            self.assertTrue(m.alive())


def main():
    missing = []
    for module in ("torch", "torchvision", "PIL"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        print(f"SKIPPED: python modules missing: {', '.join(missing)}")
        sys.exit(harness.SKIP)
    harness.main()


if __name__ == "__main__":
    main()
