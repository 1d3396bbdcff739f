"""MLPerf Storage's terms: its two training workloads, resnet50 and unet3d
(mlcommons/storage, configs/dlio/workload/*_a100.yaml), scaled down to this
machine, and accelerator utilization (AU).

A scaled scenario keeps what AU depends on, the emulated accelerator's
compute time per byte it consumes (one A100 per loader), and shrinks the
dataset and the batch: its files are fewer (and unet3d's smaller), so a run
takes minutes on two cores instead of hours on a storage cluster. Its AU is
read against MLPerf Storage's threshold, not its published throughputs
(those are for many accelerators and datasets of 5x the client's memory)."""
import math

# MLPerf Storage's figures per workload: mean sample size (bytes), samples
# per batch, emulated compute time per batch on one A100 (s), reader threads,
# and the AU a run must reach to count.
WORKLOADS = {
    "resnet50": {"sample_bytes": 114660, "batch": 400, "compute_s": 0.435, "threads": 8,
                 "au_min": 0.90},
    "unet3d": {"sample_bytes": 146600628, "batch": 7, "compute_s": 0.636, "threads": 4,
               "au_min": 0.90},
}

DEFINITION = ("AU (accelerator utilization, MLPerf Storage's definition) = emulated compute "
              "time / wall time of the epoch; MLPerf Storage requires AU >= 0.90 for resnet50 "
              "and unet3d")


def compute_ms(workload, mean_bytes, batch):
    """Emulated compute per batch of `batch` samples of `mean_bytes` bytes:
    MLPerf's compute time per byte, for one A100."""
    w = WORKLOADS[workload]
    return w["compute_s"] / (w["batch"] * w["sample_bytes"]) * mean_bytes * batch * 1e3


def _size(n):
    return f"{n / 1e3:.0f} KB" if n < 1e6 else f"{n / 1e6:.1f} MB"


def describe(workload, files, mean_bytes, batch, compute):
    """One line saying what the scenario keeps of MLPerf's workload and what it scales."""
    w = WORKLOADS[workload]
    demand = mean_bytes * batch / (compute / 1e3) / 1e6
    return (f"MLPerf Storage {workload}, scaled down: {files} files of {_size(mean_bytes)} mean "
            f"(MLPerf: samples of {_size(w['sample_bytes'])}), batch {batch} (MLPerf: "
            f"{w['batch']}), {compute:.1f} ms of emulated compute per batch (MLPerf: "
            f"{w['compute_s'] * 1e3:.0f} ms): one A100's compute per byte, {demand:.0f} MB/s to "
            f"keep it busy; {w['threads']} reader threads; AU must reach {w['au_min']:.2f}")


def au(row):
    """AU of one epoch row of a loader (None without emulated compute, or for
    several ranks, whose compute overlaps): the trainer's compute time, one
    `compute_ms` per batch, over the epoch's wall time."""
    compute, batch, wall = row.get("compute_ms", 0), row.get("batch"), row.get("wall_s")
    if not compute or not batch or not wall or "ranks" in row:
        return None
    samples = row.get("files", 0) + row.get("errors", 0)
    return math.ceil(samples / batch) * compute / 1e3 / wall
