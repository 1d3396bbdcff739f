"""The tierfs mounts of tools/bench/warm and what they cost: a mount run in
the foreground (Mount), its options for each mode (mount_options), the
cost of an open and close of a small file, also with the reader and the
daemon pinned (open_cost_us, pinned_open_cost_us), and the memory a fresh
mount holds after an epoch, counted in a memory cgroup of its own
(MemoryGroup, measure_memory). Used by tools/bench/warm."""
import json
import os
import subprocess
import time

from .warm_fio import GiB, MiB, dataset_files, drop_caches, read_all, small_only


class Mount:
    def __init__(self, bin_dir, source, mnt, options, log_path):
        self.mnt = mnt
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([os.path.join(bin_dir, "tierfs"), source, mnt, "-f", "-o",
                                      options], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(mnt, ".tierfs", "stats")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"tierfs did not mount (see {log_path})")
            time.sleep(0.05)

    def stats(self):
        with open(os.path.join(self.mnt, ".tierfs", "stats")) as f:
            return json.load(f)

    def wait_staged(self, files):
        deadline = time.monotonic() + 600
        while self.stats()["promotions"]["files_resident"] < files:
            if time.monotonic() > deadline:
                raise SystemExit("the dataset was not staged within 600 s")
            time.sleep(0.2)

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def mount_options(args, mode, total):
    """Modes "default" and "small": the default options and ram= only (the
    dataset is then staged by reading it once); "dir": the default options
    and a directory tier only; else passthrough=MODE, staged in, the big
    file in one chunk."""
    chunk = min(4 * GiB, max(8 * MiB, args.big_mib * MiB))
    ram = total + total // 4 + 64 * MiB
    extra = f",{args.tierfs_opts}" if args.tierfs_opts else ""
    if mode in ("default", "small"):
        return f"ram={ram}{extra}"
    if mode == "dir":
        return f"tier={tier_dir(args)}:{ram},tier_reset{extra}"
    return f"ram={ram},chunk_size={chunk},prefetch=stage-in,passthrough={mode}{extra}"


def tier_dir(args):
    return os.path.join(args.work, "tier")


def source_of(mode, source):
    return small_only(source) if mode == "small" else source


def open_cost_us(root):
    """Microseconds per open and close of each small file (the second of
    two passes: names and attributes cached)."""
    paths = [f for f in dataset_files(root) if "/small/" in f]
    for _ in range(2):
        t0 = time.perf_counter()
        for path in paths:
            os.close(os.open(path, os.O_RDONLY))
        took = time.perf_counter() - t0
    return took / len(paths) * 1e6


def pinned_open_cost_us(root, daemon_pid):
    """open_cost_us with this process and the daemon's threads on one CPU,
    then on two: what an answered open costs the reader beyond the daemon's
    work is mostly waking the daemon's thread and then the reader again,
    dearer when the other CPU must be woken from idle. Affinities restored
    after; {} on a machine of one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return {}
    out = {}
    try:
        for label, reader_cpu in (("same CPU", cpus[0]), ("two CPUs", cpus[1])):
            subprocess.run(["taskset", "-a", "-p", "-c", str(cpus[0]), str(daemon_pid)],
                           check=True, stdout=subprocess.DEVNULL)
            os.sched_setaffinity(0, {reader_cpu})
            out[label] = open_cost_us(root)
    finally:
        os.sched_setaffinity(0, set(cpus))
        subprocess.run(["taskset", "-a", "-p", "-c", ",".join(map(str, cpus)), str(daemon_pid)],
                       check=False, stdout=subprocess.DEVNULL)
    return out


def memfd_bytes(pid):
    total = 0
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
            # memfds, and the unnamed files of the daemon's own tmpfs
            if link.startswith("/memfd:") or link.endswith(" (deleted)"):
                total += os.stat(os.path.join(fd_dir, fd)).st_blocks * 512
        except OSError:
            pass
    return total


def rss_anon(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def evict_source(root):
    """SOURCE's own pages out of the page cache (the daemon read them)."""
    for path in dataset_files(root):
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


class MemoryGroup:
    """A memory cgroup (v1 or v2) of its own for the daemon and the reader,
    so that what the mount holds is counted apart from the rest of the
    machine: page cache is charged to the group of the process that brought
    it in (the reader's pages of the mount, the daemon's memory files)."""

    def __init__(self):
        with open("/proc/self/cgroup") as f:
            lines = [line.strip().split(":", 2) for line in f]
        v1 = [path for _, ctrl, path in lines if "memory" in ctrl.split(",")]
        if v1:
            self.root, self.v1 = "/sys/fs/cgroup/memory" + v1[0], True
        else:
            self.root, self.v1 = "/sys/fs/cgroup" + [p for _, c, p in lines if c == ""][0], False
        self.path = os.path.join(self.root, f"tierfs-warm-{os.getpid()}")
        os.mkdir(self.path)

    def enter(self):
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(f"{os.getpid()}\n")

    def leave(self):
        with open(os.path.join(self.root, "cgroup.procs"), "w") as f:
            f.write(f"{os.getpid()}\n")

    def stat(self):
        """(page cache incl. shared memory, anonymous memory, shared memory) in bytes."""
        out = {}
        with open(os.path.join(self.path, "memory.stat")) as f:
            for line in f:
                key, value = line.split()
                out[key] = int(value)
        if self.v1:
            return out["cache"], out["rss"], out["shmem"]
        return out["file"], out["anon"], out["shmem"]

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def measure_memory(args, mode, source, mnt, workdir, total, nfiles):
    """An epoch with on-access promotion (files read while they are copied
    in), then what the daemon and the reader hold once all of it is in the
    RAM tier (their memory cgroup's page cache and anonymous memory)."""
    drop_caches()
    options = mount_options(args, mode, total).replace("prefetch=stage-in", "prefetch=on-access")
    group = MemoryGroup()
    group.enter()  # the daemon is started inside it, and the epoch is read from it
    try:
        m = Mount(args.bin_dir, source, mnt, options, os.path.join(workdir, f"mem-{mode}.log"))
        try:
            read_all(mnt)  # an epoch
            m.wait_staged(nfiles)
            time.sleep(1)  # the last RELEASEs
            evict_source(source)  # SOURCE's pages the daemon read
            cache, anon, shmem = group.stat()
            s = m.stats()
            used = s["tiers"][0]["used"]
            held = cache + anon
            return {"tier_used": used, "daemon_anon": rss_anon(m.proc.pid),
                    "memory_files": memfd_bytes(m.proc.pid), "anon": anon,
                    "page_cache": cache, "shmem": shmem,
                    "mount_page_cache": max(0, cache - shmem),
                    "held": held, "held_per_gib": held / used if used else 0.0,
                    "passthrough": s["passthrough"]["active"],
                    "cache_drops": s["passthrough"].get("cache_drops", 0)}
        finally:
            m.close()
    finally:
        group.leave()
        drop_caches()
        group.remove()
