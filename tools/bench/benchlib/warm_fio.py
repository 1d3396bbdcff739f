"""The dataset and the fio runs of tools/bench/warm: one big file and many
small ones in four directories, with a tree of the small files alone (hard
links) for mode small (make_dataset), read whole (read_all); the fio job
file of each job (fio_job), a job's median of --repeat runs, after a drop
of the page cache when it is dropped (run_fio), and a run's figure
(key_of: bandwidth or IOPS; fmt_figure). Used by tools/bench/warm and
benchlib/warm_mounts.py."""
import json
import os
import shutil
import subprocess

MiB = 1 << 20
GiB = 1 << 30
SMALL_DIRS = 4


def drop_caches():
    """The page cache only (1): dentries and inodes stay, so the mount's
    names need no new LOOKUP."""
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")


def make_dataset(root, big_mib, files, file_kib):
    """Writes the dataset once (kept between runs of the same shape)."""
    stamp = os.path.join(root, f".made-{big_mib}-{files}-{file_kib}")
    if os.path.exists(stamp) and os.path.isdir(small_only(root)):
        return
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "big"))
    chunk = os.urandom(MiB)
    with open(os.path.join(root, "big", "big.bin"), "wb") as f:
        for i in range(big_mib):
            f.write(chunk[i % 7:] + chunk[:i % 7])
    for d in range(SMALL_DIRS):
        os.makedirs(os.path.join(root, "small", f"d{d}"))
    for i in range(files):
        with open(os.path.join(root, "small", f"d{i % SMALL_DIRS}", f"f{i:06d}"), "wb") as f:
            f.write(os.urandom(file_kib * 1024))
    # Mode small's SOURCE: the small files alone, the same inodes.
    only = small_only(root)
    shutil.rmtree(only, ignore_errors=True)
    for d in range(SMALL_DIRS):
        os.makedirs(os.path.join(only, "small", f"d{d}"))
    for path in dataset_files(os.path.join(root, "small")):
        os.link(path, os.path.join(only, os.path.relpath(path, root)))
    open(stamp, "w").close()


def small_only(root):
    return root + "-small"


def dataset_files(root):
    out = []
    for dirpath, _, names in os.walk(root):
        out += [os.path.join(dirpath, n) for n in names if not n.startswith(".")]
    return sorted(out)


def read_all(root):
    for path in dataset_files(root):
        with open(path, "rb", buffering=0) as f:
            while f.read(4 * MiB):
                pass


def fio_job(name, root, args):
    """The fio job file text of job `name` over the dataset at `root`."""
    small = os.path.join(root, "small")
    big = os.path.join(root, "big", "big.bin")
    size = os.path.getsize(big) if os.path.exists(big) else 0  # mode small has none
    common = ("[global]\nthread\ninvalidate=0\nfadvise_hint=1\ngroup_reporting\n"
              "loops=1\n")
    if name == "seq1m":
        return common + f"[seq]\nioengine=psync\nrw=read\nbs=1M\nfilename={big}\n"
    if name == "seq1m-4":
        part = size // 4
        return common + (f"[seq]\nioengine=psync\nrw=read\nbs=1M\nfilename={big}\n"
                         f"numjobs=4\nsize={part}\noffset_increment={part}\n")
    if name == "files128k":
        # An epoch's pattern: open a file, read it whole, close it, then the next.
        return common + (f"[files]\nioengine=psync\nrw=read\nbs=128k\nopendir={small}\n"
                         "file_service_type=sequential\nopenfiles=1\n")
    if name == "rand4k-big":
        return common + f"[rand]\nioengine=psync\nrw=randread\nbs=4k\nfilename={big}\n"
    if name == "rand4k":
        return common + f"[rand]\nioengine=psync\nrw=randread\nbs=4k\nopendir={small}\n"
    if name == "rand4k-4":
        text = common
        for d in range(SMALL_DIRS):
            text += (f"[rand{d}]\nioengine=psync\nrw=randread\nbs=4k\n"
                     f"opendir={os.path.join(small, f'd{d}')}\n")
        return text
    if name == "mmap4k":
        return common + f"[mmap]\nioengine=mmap\nrw=randread\nbs=4k\nopendir={small}\n"
    raise SystemExit(f"unknown job {name}")


def run_fio(name, root, args, workdir):
    """The median of --repeat runs of job `name` (by its figure: bandwidth
    or IOPS), each after its own drop when the page cache is dropped: one
    pass over a 1 GiB file lasts a tenth of a second, and one stall of the
    host moves a single run's figure by half."""
    runs = sorted((run_fio_once(name, root, args, workdir) for _ in range(args.repeat)),
                  key=lambda r: key_of(name, r))
    median = dict(runs[len(runs) // 2])
    median["runs"] = [key_of(name, r) for r in runs]
    return median


def run_fio_once(name, root, args, workdir):
    if args.dropped:
        drop_caches()
    job = os.path.join(workdir, f"{name}.fio")
    with open(job, "w") as f:
        f.write(fio_job(name, root, args))
    r = subprocess.run(["fio", "--output-format=json", job], capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"fio {name} failed: {r.stderr.strip()}")
    jobs = json.loads(r.stdout[r.stdout.index("{"):])["jobs"]  # after "opendir added N files"
    read = {"bw_bytes": 0.0, "iops": 0.0, "lat_ns": 0.0}
    for j in jobs:
        read["bw_bytes"] += j["read"]["bw_bytes"]
        read["iops"] += j["read"]["iops"]
        read["lat_ns"] += j["read"]["lat_ns"]["mean"] / len(jobs)
    return read


def fmt_figure(job, r):
    if job.startswith(("seq", "files")):
        return f"{r['bw_bytes'] / 1e9:.2f} GB/s"
    return f"{r['iops'] / 1e3:.0f} k IOPS, {r['lat_ns'] / 1e3:.1f} us"


def key_of(job, r):
    return r["bw_bytes"] if job.startswith(("seq", "files")) else r["iops"]
