"""The bound of a scenario: the lowest cold epoch its setup allows.

bound = max(native, PFS floor), where native is the same loader's first
epoch on a local copy in the page cache (what the loader needs when I/O
costs nothing), and the PFS floor is what pfs-sim's timing model
(tools/pfs-sim/service_model.h) needs at least to serve one epoch's files
once, whoever asks and however many requests are in flight:

  data slots = sum over files of (ceil(size / max_request) x read_ms
               + size / stream_mbps) / parallel
               each read request holds one of `parallel` object servers for
               its latency plus its bytes at the per-stream rate; the fewest
               requests are max_request bytes each (reads at end of file are
               free)
  link       = total bytes / total_mbps
               every byte passes the one aggregate link
  metadata   = files x m x meta_ms / meta_parallel
               m = 2 (a LOOKUP of the file's name and its OPEN, the fewest a
               client can open a file with while the kernel caches no entry,
               entry_timeout=0); m = 1 when entry_timeout > 0 (a cached entry)
  PFS floor  = max(data slots, link, metadata)
               the metadata pool and the data pool are separate servers, so
               their work can overlap; the slots and the link overlap too.

No fault injection (stalls, failures) is counted: a floor assumes none."""
import math
import os


def dataset_sizes(root):
    """Sizes of every regular file under root (dot entries skipped, as the loaders do)."""
    sizes = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        sizes += [os.path.getsize(os.path.join(dirpath, f)) for f in files if not f.startswith(".")]
    return sizes


def pfs_floor(sizes, params):
    """The PFS model's floor (seconds) for reading `sizes` once, and its parts.
    `params` is pfs-sim's params object (MNT/.pfs-sim/stats)."""
    max_request = params["max_request"]
    read_s = params["read_ms"] / 1e3
    stream = params["stream_mbps"] * 1e6
    slot_s = sum(math.ceil(s / max_request) * read_s + s / stream for s in sizes if s > 0)
    per_file_meta = 1 if params.get("entry_timeout", 0) > 0 else 2
    parts = {
        "data_slots_s": slot_s / params["parallel"],
        "link_s": sum(sizes) / (params["total_mbps"] * 1e6),
        "meta_s": len(sizes) * per_file_meta * params["meta_ms"] / 1e3 / params["meta_parallel"],
    }
    limit = max(parts, key=parts.get)
    return dict(parts, floor_s=parts[limit], limited_by=limit[:-2], files=len(sizes),
                bytes=sum(sizes), meta_per_file=per_file_meta)


def describe(floor):
    return (f"PFS floor {floor['floor_s']:.2f} s (data slots {floor['data_slots_s']:.2f}, "
            f"link {floor['link_s']:.2f}, metadata {floor['meta_s']:.2f})")


def bound(floor_s, native_epoch1_s):
    """The bound (seconds) and what sets it: 'native' or 'PFS'."""
    if native_epoch1_s is not None and native_epoch1_s > floor_s:
        return native_epoch1_s, "native"
    return floor_s, "PFS"
