"""The contenders of a benchmark: ways a training job can reach the dataset
that lives on the (simulated) PFS.

Each contender's prepare() returns the directory the loader reads, after
whatever setup it needs (a copy, a mount), and records that setup's time;
cleanup() undoes it and must be safe to call after a failed prepare().
A contender that cannot run here raises Skip with a note."""
import os
import shutil
import subprocess
import time

from . import mounts


class Skip(Exception):
    """The contender cannot run here; the message says why."""


class Contender:
    name = "?"
    reads_pfs = True      # False: the loader reads a local copy, PFS untouched
    drop_caches_ok = True  # whether 'memory cannot hold the dataset' applies
    hint_order = False     # the loader declares each epoch's order (.tierfs/order)

    def __init__(self, ctx):
        self.ctx = ctx  # the run's context: bin_dir, pfs_mnt, work, scenario
        self.setup_s = 0.0
        self.note = ""

    def prepare(self):
        raise NotImplementedError

    def cleanup(self):
        pass

    def rss_mb(self):
        """Resident memory of the contender's daemon, if it has one."""
        return None

    def daemon_stats(self):
        """The daemon's own counters after the run (JSON text), if it has any."""
        return None

    def daemon_pid(self):
        """The pid of the contender's daemon, if it has one."""
        return None


class Direct(Contender):
    """The loader reads the PFS mount itself."""
    name = "direct"

    def prepare(self):
        return self.ctx.pfs_mnt


class CopyFirst(Contender):
    """Copy the dataset to local disk (cp -r, the usual practice), then read
    the copy. The copy's time counts as setup."""
    name = "copy-first"

    def prepare(self):
        self.dest = os.path.join(self.ctx.work, "copy")
        shutil.rmtree(self.dest, ignore_errors=True)
        start = time.monotonic()
        subprocess.run(["cp", "-r", self.ctx.pfs_mnt + "/.", self.dest], check=True)
        self.setup_s = time.monotonic() - start
        return self.dest

    def cleanup(self):
        shutil.rmtree(os.path.join(self.ctx.work, "copy"), ignore_errors=True)


class MountContender(Contender):
    """A FUSE daemon mounted over the PFS mount; setup = time to mount."""

    def command(self, mountpoint):
        raise NotImplementedError

    def prepare(self):
        self.mnt = os.path.join(self.ctx.work, f"mnt-{self.name}")
        os.makedirs(self.mnt, exist_ok=True)
        start = time.monotonic()
        try:
            mounts.mount(self.command(self.mnt), self.mnt,
                         os.path.join(self.ctx.work, f"{self.name}.log"))
        except mounts.MountError as e:
            raise Skip(str(e))
        self.setup_s = time.monotonic() - start
        return self.mnt

    def rss_mb(self):
        # Looked up now: a daemonizing parent may still be exiting at mount time.
        return mounts.rss_mb(self.daemon_pid())

    def daemon_pid(self):
        return mounts.daemon_pid(self.mnt)

    def cleanup(self):
        if hasattr(self, "mnt"):
            mounts.unmount(self.mnt)


class Tierfs(MountContender):
    """tierfs in one mode: `options` is an -o string in which {tier} becomes
    the scenario's tier budget (e.g. 'ram={tier}') and {tierdir} a fresh
    directory on local disk for a directory tier. With prefetch=order the
    loader declares each epoch's order, as a training script would."""

    def __init__(self, ctx, name, options):
        super().__init__(ctx)
        self.name = name
        self.options = options
        self.hint_order = "prefetch=order" in options

    def command(self, mountpoint):
        binary = os.path.join(self.ctx.bin_dir, "tierfs")
        if not os.access(binary, os.X_OK):
            raise Skip(f"{binary} not built")
        cmd = [binary, self.ctx.pfs_mnt, mountpoint]
        self.tierdir = os.path.join(self.ctx.work, f"tier-{self.name}")
        shutil.rmtree(self.tierdir, ignore_errors=True)
        os.makedirs(self.tierdir)
        options = self.options.format(tier=self.ctx.tier_size, tierdir=self.tierdir)
        return cmd + (["-o", options] if options else [])

    def daemon_stats(self):
        try:
            with open(os.path.join(self.mnt, ".tierfs", "stats")) as f:
                return f.read()
        except (OSError, AttributeError):
            return None

    def cleanup(self):
        super().cleanup()
        if hasattr(self, "tierdir"):
            shutil.rmtree(self.tierdir, ignore_errors=True)


class Rclone(MountContender):
    """rclone mount of the PFS mount (a local-path remote) with its full VFS
    cache on local disk, bounded by the scenario's tier budget."""
    name = "rclone-full"

    def command(self, mountpoint):
        if shutil.which("rclone") is None:
            raise Skip("rclone not installed")
        self.cache = os.path.join(self.ctx.work, "rclone-cache")
        shutil.rmtree(self.cache, ignore_errors=True)
        config = os.path.join(self.ctx.work, "rclone.conf")
        open(config, "a").close()
        return ["rclone", "mount", self.ctx.pfs_mnt, mountpoint, "--daemon",
                "--config", config, "--cache-dir", self.cache,
                "--vfs-cache-mode", "full", "--vfs-cache-max-size", self.ctx.tier_size,
                "--read-only"]

    def cleanup(self):
        super().cleanup()
        if hasattr(self, "cache"):
            shutil.rmtree(self.cache, ignore_errors=True)


class Native(Contender):
    """The loader reads a local copy in the warm page cache: the physical
    limit. The copy is made and read once before timing; never dropped."""
    name = "native"
    reads_pfs = False
    drop_caches_ok = False

    def prepare(self):
        dest = self.ctx.native_copy
        if not os.path.isdir(dest):
            shutil.copytree(self.ctx.dataset, dest)
        for dirpath, _, files in os.walk(dest):
            for name in files:
                with open(os.path.join(dirpath, name), "rb") as f:
                    while f.read(1 << 20):
                        pass
        return dest


def build(ctx, names, tierfs_modes):
    """Contender objects for `names` (in order); 'tierfs' expands to every
    mode in `tierfs_modes` [(name, options, ...)]."""
    simple = {"direct": Direct, "copy-first": CopyFirst, "rclone": Rclone, "native": Native}
    out = []
    for name in names:
        if name == "tierfs":
            out += [Tierfs(ctx, mode[0], mode[1]) for mode in tierfs_modes]
        elif name in simple:
            out.append(simple[name](ctx))
        else:
            raise SystemExit(f"run: unknown contender {name!r} (known: {', '.join(list(simple) + ['tierfs'])})")
    return out
