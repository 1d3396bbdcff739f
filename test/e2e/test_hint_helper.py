"""tools/python/tierfs_hint.py without a mount: a directory with a regular
file `.tierfs/order` stands in for the daemon's control file, so what the
helper writes (order, framing, one write per epoch) can be read back exactly.
The DistributedSampler case needs python3-torch (skipped without it).

With --installed the module is imported as installed (pip into a venv, or
the Debian package), not from tools/python: test_pip_install.py runs it so."""
import argparse
import errno
import os
import shutil
import sys
import tempfile
import unittest
import warnings
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
INSTALLED = "--installed" in sys.argv
if not INSTALLED:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "python"))
import tierfs_hint  # noqa: E402


class FakeMount:
    """MNT/.tierfs/order as a plain file, and n files MNT/c{k}/f{i}."""

    def __init__(self, n, control=True):
        self.root = tempfile.mkdtemp(prefix="tierfs-hint-")
        if control:
            os.mkdir(os.path.join(self.root, ".tierfs"))
            open(self.order_path, "w").close()
        self.rel = [f"c{i % 3}/f{i:03d}.jpg" for i in range(n)]
        self.samples = [(os.path.join(self.root, r), i % 3) for i, r in enumerate(self.rel)]

    @property
    def order_path(self):
        return os.path.join(self.root, ".tierfs", "order")

    def order(self):
        with open(self.order_path, "rb") as f:
            return f.read()

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def lines(*groups):
    return b"".join(p.encode() + b"\n" for g in groups for p in g)


def hinted(*groups):
    """What HintedSampler writes: each epoch's paths after an "//epoch" line."""
    return lines(*[["//epoch"] + list(g) for g in groups])


class HintedSamplerTest(unittest.TestCase):
    def setUp(self):
        self.m = FakeMount(10)
        self.addCleanup(self.m.close)

    def test_yields_indices_unchanged_and_appends_each_epoch_in_order(self):
        epochs = [[3, 1, 4, 0, 9], [2, 7, 1, 8]]
        sampler = tierfs_hint.HintedSampler(iter_per_epoch(epochs), self.m.samples, self.m.root)
        self.assertEqual(list(sampler), epochs[0])
        self.assertEqual(self.m.order(), hinted([self.m.rel[i] for i in epochs[0]]))
        self.assertEqual(list(sampler), epochs[1])
        self.assertEqual(self.m.order(), hinted([self.m.rel[i] for i in epochs[0]],
                                                [self.m.rel[i] for i in epochs[1]]))
        self.assertEqual(sampler.epochs_hinted, 2)
        self.assertEqual(len(sampler), 5)

    def test_hints_when_the_iterator_starts_with_one_open_and_one_write(self):
        sampler = tierfs_hint.HintedSampler(list(range(10)), self.m.samples, self.m.root)
        with mock.patch("os.open", wraps=os.open) as op, mock.patch("os.write", wraps=os.write) as wr:
            it = iter(sampler)
            self.assertEqual(self.m.order(), hinted(self.m.rel))  # before the first index
            self.assertEqual(next(it), 0)
        opens = [c for c in op.call_args_list if c.args[0] == self.m.order_path]
        self.assertEqual(len(opens), 1)
        self.assertTrue(opens[0].args[1] & os.O_APPEND)
        self.assertEqual(wr.call_count, 1)

    def test_relative_and_plain_paths_and_a_symlinked_mount(self):
        link = self.m.root + "-link"
        os.symlink(self.m.root, link)
        self.addCleanup(os.unlink, link)
        paths = [os.path.join(link, r) for r in self.m.rel[:3]]
        self.assertEqual(tierfs_hint.hint(self.m.root, paths), 3)
        cwd = os.getcwd()
        os.chdir(self.m.root)
        self.addCleanup(os.chdir, cwd)
        self.assertEqual(tierfs_hint.hint(link, self.m.rel[3:5]), 2)
        self.assertEqual(self.m.order(), lines(self.m.rel[:5]))

    def test_paths_outside_the_mount_are_skipped_with_one_warning(self):
        samples = list(self.m.samples)
        samples[2] = ("/elsewhere/x.jpg", 0)
        samples[5] = (self.m.root + "-sibling/y.jpg", 1)  # a prefix of the mount is not under it
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            sampler = tierfs_hint.HintedSampler(list(range(10)), samples, self.m.root)
            self.assertEqual(list(sampler), list(range(10)))
        self.assertEqual(len(w), 1)
        self.assertIn("2 of 10", str(w[0].message))
        self.assertEqual(self.m.order(), hinted([r for i, r in enumerate(self.m.rel)
                                                 if i not in (2, 5)]))

    def test_no_control_file_warns_once_and_training_goes_on(self):
        plain = FakeMount(10, control=False)
        self.addCleanup(plain.close)
        sampler = tierfs_hint.HintedSampler(list(range(10)), plain.samples, plain.root)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in range(3):
                self.assertEqual(list(sampler), list(range(10)))
        self.assertEqual(len(w), 1)
        self.assertIn("no .tierfs/order", str(w[0].message))
        self.assertEqual(sampler.epochs_hinted, 0)
        self.assertFalse(os.path.exists(os.path.join(plain.root, ".tierfs")))

    def test_a_rejected_write_warns_once_and_is_retried_next_epoch(self):
        sampler = tierfs_hint.HintedSampler(list(range(10)), self.m.samples, self.m.root)
        with warnings.catch_warnings(record=True) as w, \
                mock.patch("os.write", side_effect=OSError(errno.EINVAL, "Invalid argument")):
            warnings.simplefilter("always")
            self.assertEqual(list(sampler), list(range(10)))
            self.assertEqual(list(sampler), list(range(10)))
        self.assertEqual(len(w), 1)
        self.assertIn("rejected every path", str(w[0].message))
        self.assertNotIn("first:", str(w[0].message))  # the stats (here none) do not say
        self.assertEqual(list(sampler), list(range(10)))  # works again
        self.assertEqual(self.m.order(), hinted(self.m.rel))

    def test_a_rejected_write_names_the_daemons_reason(self):
        with open(os.path.join(self.m.root, ".tierfs", "stats"), "w") as f:
            f.write('{"prefetch": {"order": {"last_rejected": '
                    '{"line": "c0/f000.jpg", "reason": "not in the mount"}}}}')
        with warnings.catch_warnings(record=True) as w, \
                mock.patch("os.write", side_effect=OSError(errno.EINVAL, "Invalid argument")):
            warnings.simplefilter("always")
            self.assertEqual(tierfs_hint.hint(self.m.root, self.m.samples), 0)
        self.assertEqual(len(w), 1)
        self.assertIn("rejected every path (none names a file in the mount); "
                      "first: 'c0/f000.jpg': not in the mount", str(w[0].message))

    def test_a_mount_not_in_order_mode_is_hinted_with_one_warning_saying_how_to_switch(self):
        mode = os.path.join(self.m.root, ".tierfs", "prefetch")
        with open(mode, "w") as f:
            f.write("on-access\n")
        sampler = tierfs_hint.HintedSampler(list(range(10)), self.m.samples, self.m.root)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in range(3):
                self.assertEqual(list(sampler), list(range(10)))
        self.assertEqual([str(x.message) for x in w], [
            f"tierfs_hint: {self.m.root} is in prefetch mode on-access: the declared order is "
            f"kept but not followed; to follow it: echo order > {mode}"])
        self.assertEqual(sampler.epochs_hinted, 3)  # hinted all the same
        with open(mode, "w") as f:
            f.write("order\n")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            list(tierfs_hint.HintedSampler(list(range(10)), self.m.samples, self.m.root))
        self.assertEqual(w, [])

    def test_an_index_without_a_path_disables_hints_not_training(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            sampler = tierfs_hint.HintedSampler([0, 99], self.m.samples, self.m.root)
            self.assertEqual(list(sampler), [0, 99])
        self.assertEqual(len(w), 1)
        self.assertEqual(self.m.order(), b"")

    def test_a_named_stream_is_declared_before_each_epoch(self):
        sampler = tierfs_hint.HintedSampler([1, 0], self.m.samples, self.m.root, stream="rank-3")
        list(sampler)
        self.assertEqual(self.m.order(),
                         lines(["//stream rank-3", "//epoch", self.m.rel[1], self.m.rel[0]]))

    def test_clear_truncates(self):
        tierfs_hint.hint(self.m.root, self.m.samples)
        self.assertTrue(tierfs_hint.clear(self.m.root))
        self.assertEqual(self.m.order(), b"")

    def test_clear_in_another_mode_does_not_warn_of_an_order_kept(self):
        # Clearing leaves no order to keep: it said "kept but not followed".
        with open(os.path.join(self.m.root, ".tierfs", "prefetch"), "w") as f:
            f.write("on-access\n")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertTrue(tierfs_hint.clear(self.m.root))
        self.assertEqual([str(x.message) for x in w], [])

    def test_distributed_sampler_each_rank_hints_only_its_files(self):
        try:
            from torch.utils.data import DistributedSampler
        except ImportError:
            self.skipTest("python3-torch is not installed")
        dataset = list(range(10))
        seen = []
        for rank in range(2):
            open(self.m.order_path, "w").close()
            inner = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=True, seed=5)
            sampler = tierfs_hint.HintedSampler(inner, self.m.samples, self.m.root)
            self.assertEqual(len(sampler), 5)
            expected = []
            for epoch in range(2):
                sampler.set_epoch(epoch)
                inner_copy = DistributedSampler(dataset, num_replicas=2, rank=rank,
                                                shuffle=True, seed=5)
                inner_copy.set_epoch(epoch)
                want = list(inner_copy)
                self.assertEqual(list(sampler), want)
                expected.append([self.m.rel[i] for i in want])
                if epoch == 0:
                    seen += want
            self.assertEqual(self.m.order(), hinted(*expected))
            self.assertNotEqual(expected[0], expected[1])  # set_epoch reached the sampler
        self.assertEqual(sorted(seen), dataset)  # the ranks split the data


def iter_per_epoch(epochs):
    """A sampler that yields epochs[k] on its k-th iteration (len = first epoch's)."""
    class Sampler:
        def __init__(self):
            self.k = 0

        def __iter__(self):
            self.k += 1
            return iter(epochs[self.k - 1])

        def __len__(self):
            return len(epochs[0])
    return Sampler()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir")  # accepted for ctest's uniform command line
    parser.add_argument("--installed", action="store_true",
                        help="test the tierfs_hint found on sys.path, not tools/python's")
    _, rest = parser.parse_known_args()
    print(f"tierfs_hint {tierfs_hint.__version__} from {tierfs_hint.__file__}", flush=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
