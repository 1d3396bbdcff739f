"""The two clients of a benchmark: the C++ epoch loader (tierfs-bench) and a
real PyTorch DataLoader (torch_loader.py). Both take the same flags and
append the same JSON lines (phase "list" and one "epoch" row per epoch)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"


def torch_available():
    probe = subprocess.run([PYTHON, "-c", "import torch, PIL"], capture_output=True)
    return probe.returncode == 0


def command(kind, bin_dir, root, label, json_path, pfs_stats, load):
    """argv of loader `kind` ('bench' or 'torch') reading `root`.
    `load` holds epochs, workers, batch, compute_ms, seed, drop_caches,
    hint_order."""
    if kind == "bench":
        cmd = [os.path.join(bin_dir, "tierfs-bench"), root]
    elif kind == "torch":
        cmd = [PYTHON, os.path.join(HERE, "torch_loader.py"), root]
    else:
        raise ValueError(kind)
    cmd += ["--epochs", str(load["epochs"]), "--workers", str(load["workers"]),
            "--batch", str(load["batch"]), "--compute-ms", str(load["compute_ms"]),
            "--seed", str(load["seed"]), "--label", label, "--json", json_path,
            "--allow-errors"]
    if pfs_stats:
        cmd += ["--pfs-stats", pfs_stats]
    if load.get("drop_caches"):
        cmd.append("--drop-caches")
    if load.get("hint_order"):
        cmd.append("--hint-order")
    return cmd


def run(cmd, json_path, timeout):
    """Runs a loader, echoing its human table; returns its JSON rows.
    Raises RuntimeError if it fails."""
    if os.path.exists(json_path):
        os.unlink(json_path)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)
    sys.stdout.write("".join("    " + line + "\n" for line in proc.stdout.splitlines()))
    sys.stdout.flush()
    if proc.returncode != 0:
        raise RuntimeError(f"loader exited {proc.returncode}")
    with open(json_path) as f:
        return [json.loads(line) for line in f if line.strip()]
