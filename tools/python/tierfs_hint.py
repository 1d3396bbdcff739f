"""tierfs_hint: tell a tierfs mount the order in which a training job will read.

With `-o prefetch=order`, tierfs promotes files into its RAM/NVMe tiers just
ahead of the reader when it knows the coming read order. This module declares
that order from PyTorch (or any loop) by writing paths to MOUNT/.tierfs/order.

    from tierfs_hint import HintedSampler
    dataset = torchvision.datasets.ImageFolder("/mnt/imagenet/train")
    sampler = HintedSampler(RandomSampler(dataset), dataset.samples, "/mnt/imagenet")
    loader = DataLoader(dataset, sampler=sampler, batch_size=256, num_workers=8)

Each time an epoch's iterator starts (`iter(loader)`), the wrapper draws the
sampler's indices for the whole epoch, appends their files to the declared
order in one write, then yields the same indices unchanged. It wraps any
sampler: with `DistributedSampler` each rank hints exactly the files it will
read; `set_epoch` and `len` pass through.

What it sends: one write per epoch to MOUNT/.tierfs/order, the line
"//epoch" and then one mount-relative path per line, in the order the
sampler yields them. The daemon keeps one stream per writing process (each
rank is one), so ranks sharing a mount each get look-ahead; "//epoch" tells
it that whatever the rank declared before and did not read (the page cache
served it) is past. Set `stream=` to name the stream explicitly ("//stream
NAME" is sent first), e.g. when several processes feed one order.

Hints never break training: if the mount has no `.tierfs/order` (not tierfs,
or an older tierfs) or a write fails, a RuntimeWarning is issued once and the
job goes on without hints. A mount that is not in prefetch mode `order`
keeps the hints but does not follow them: a RuntimeWarning says so once,
with how to switch (`echo order > MOUNT/.tierfs/prefetch`). Standard
library only; torch is not imported.
"""
import errno
import json
import os
import sys
import warnings

__all__ = ["HintedSampler", "hint", "clear", "relative_paths"]
# The tierfs release this helper ships with (CMakeLists.txt project VERSION;
# pyproject.toml reads it from here; test_pip_install.py checks they agree).
__version__ = "0.1.0"

ORDER_FILE = os.path.join(".tierfs", "order")
MODE_FILE = os.path.join(".tierfs", "prefetch")
# Errors after which no later write can succeed: stop trying.
_PERMANENT = {errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS}


def _warn(message):
    """A RuntimeWarning attributed to the first caller outside this module."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame, level = frame.f_back, level + 1
    warnings.warn(f"tierfs_hint: {message}", RuntimeWarning, stacklevel=level)


def _sample_path(sample):
    """A dataset entry as a path: 'p', b'p', Path, or (path, target) as in ImageFolder.samples."""
    if isinstance(sample, (tuple, list)):
        sample = sample[0]
    return os.fsdecode(os.fspath(sample))


def relative_paths(mount, paths):
    """Returns (rel, outside): rel[i] is paths[i] relative to the mount root, or
    None when it is not under the mount (or contains a newline); outside counts
    those. Relative paths are taken relative to the current directory; a
    path's directory may reach the mount through symlinks."""
    roots = []
    for root in (os.path.abspath(mount), os.path.realpath(mount)):
        root = root.rstrip(os.sep) + os.sep
        if root not in roots:
            roots.append(root)
    real_dirs = {}  # directory -> its realpath, for paths that reach the mount via a symlink

    def under_mount(p):
        for root in roots:
            if p.startswith(root):
                return p[len(root):]
        return None

    rel, outside = [], 0
    for sample in paths:
        p = os.path.abspath(_sample_path(sample))
        r = under_mount(p)
        if r is None:
            d, name = os.path.split(p)
            if d not in real_dirs:
                real_dirs[d] = os.path.realpath(d)
            r = under_mount(os.path.join(real_dirs[d], name))
        if not r or "\n" in r:
            r = None
            outside += 1
        rel.append(r)
    return rel, outside


class _Writer:
    """Appends lines to MOUNT/.tierfs/order; warns once per kind of failure and
    gives up for good after a failure that will not go away."""

    def __init__(self, mount):
        self.path = os.path.join(mount, ORDER_FILE)
        self.stats_path = os.path.join(mount, ".tierfs", "stats")
        self.mode_path = os.path.join(mount, MODE_FILE)
        self.disabled = False
        self._warned = set()
        self._mode_checked = False

    def write(self, rel_paths, truncate=False):
        """Writes the paths (one line each) in one open/write/close; returns True on success."""
        if self.disabled:
            return False
        data = "".join(p + "\n" for p in rel_paths).encode("utf-8", "surrogateescape")
        flags = os.O_WRONLY | os.O_CLOEXEC | (os.O_TRUNC if truncate else os.O_APPEND)
        try:
            fd = os.open(self.path, flags)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as e:
            self._fail(e)
            return False
        if rel_paths and not self._mode_checked:  # clearing leaves no order to follow
            self._mode_checked = True
            self._check_mode()
        return True

    def _check_mode(self):
        """Warns if the mount's prefetch mode is not `order` (the hints are kept, not followed)."""
        try:
            with open(self.mode_path) as f:
                mode = f.read().strip()
        except OSError:
            return  # an older tierfs: nothing to tell
        if mode and mode != "order":
            _warn(f"{os.path.dirname(os.path.dirname(self.path))} is in prefetch mode {mode}: "
                  "the declared order is kept but not followed; to follow it: "
                  f"echo order > {self.mode_path}")

    def _fail(self, e):
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            why = "it has no .tierfs/order (not a tierfs mount, or a tierfs without order hints)"
        elif e.errno == errno.EINVAL:
            why = "the daemon rejected every path (none names a file in the mount)"
            why += self._first_rejected()
        else:
            why = os.strerror(e.errno or 0)
        if e.errno in _PERMANENT:
            self.disabled = True
            why += "; continuing without hints"
        if e.errno not in self._warned:
            self._warned.add(e.errno)
            _warn(f"cannot declare the read order to {self.path}: {why}")

    def _first_rejected(self):
        """"; first: 'LINE': REASON" from the daemon's stats (the first rejected
        line of the latest write that had one), or "" if it does not say."""
        try:
            with open(self.stats_path, "rb") as f:
                last = json.loads(f.read())["prefetch"]["order"]["last_rejected"]
            return f"; first: '{last['line']}': {last['reason']}"
        except (OSError, ValueError, KeyError, TypeError):
            return ""


def _order_counts(stats_path):
    """(valid_lines, rejected_lines) of the mount's declared order, or None
    if its stats do not say (an older tierfs, or not readable)."""
    try:
        with open(stats_path, "rb") as f:
            order = json.loads(f.read())["prefetch"]["order"]
        return int(order["valid_lines"]), int(order["rejected_lines"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def hint(mount, paths):
    """Appends `paths` (absolute under the mount, relative to the current
    directory, or (path, target) pairs) to the mount's declared read order in
    one write. Paths outside the mount are skipped with a warning. Returns the
    number of paths the daemon accepted (from its counters before and after;
    the number written if it does not report them); 0 if the write failed.
    A warning names the first rejected path and why."""
    rel, outside = relative_paths(mount, paths)
    if outside:
        _warn(f"{outside} of {len(rel)} paths are not under {mount}; they are not hinted")
    rel = [r for r in rel if r is not None]
    if not rel:
        return 0
    writer = _Writer(mount)
    before = _order_counts(writer.stats_path)
    if not writer.write(rel):
        return 0
    after = _order_counts(writer.stats_path)
    if before is None or after is None:
        return len(rel)
    # The counters are everyone's: never more than this write sent.
    valid = min(len(rel), max(0, after[0] - before[0]))
    rejected = min(len(rel) - valid, max(0, after[1] - before[1]))
    if rejected:
        _warn(f"the daemon at {mount} rejected {rejected} of {len(rel)} paths"
              + writer._first_rejected())
    return valid


def clear(mount):
    """Forgets the mount's declared order (e.g. left by an earlier job). Returns True on success."""
    return _Writer(mount).write([], truncate=True)


class HintedSampler:
    """Wraps `sampler`; every epoch it declares the files of the indices the
    sampler yields (in that order) to the tierfs at `mount`, then yields them.

    `paths[i]` is the file of dataset index i: a list of paths, or of
    (path, target) pairs such as ImageFolder.samples. Paths must lie under
    `mount` (others are skipped, with one warning)."""

    def __init__(self, sampler, paths, mount, stream=None):
        self.sampler = sampler
        self.mount = mount
        self._head = (["//stream " + stream] if stream else []) + ["//epoch"]
        self._rel, outside = relative_paths(mount, paths)
        if outside:
            _warn(f"{outside} of {len(self._rel)} dataset paths are not under {mount}; "
                  "their reads are not hinted")
        self._writer = _Writer(mount)
        self.epochs_hinted = 0

    def __iter__(self):
        indices = list(iter(self.sampler))
        if not self._writer.disabled:
            try:
                rel = self._rel
                order = [rel[i] for i in indices if rel[i] is not None]
            except (IndexError, TypeError) as e:  # an index the paths do not cover
                _warn(f"the sampler yielded an index with no path ({e}); "
                      "continuing without hints")
                self._writer.disabled = True
                order = []
            if order and self._writer.write(self._head + order):
                self.epochs_hinted += 1
        return iter(indices)

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch):
        """Passed to the wrapped sampler (DistributedSampler reshuffles per epoch)."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
