"""The clients of a benchmark: the C++ epoch loader (tierfs-bench), a real
PyTorch DataLoader (torch_loader.py), and R PyTorch ranks on one mount
(torch_ranks.py). All take the same flags and append the same JSON lines
(phase "list" and one "epoch" row per epoch); torch_ranks adds --ranks and
--sync-every, and per-rank figures to its rows."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"


def torch_available():
    probe = subprocess.run([PYTHON, "-c", "import torch, PIL"], capture_output=True)
    return probe.returncode == 0


def torch_only_available():
    """torch_ranks.py needs torch alone (no torchvision, no PIL)."""
    return subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


def command(kind, bin_dir, root, label, json_path, pfs_stats, load):
    """argv of loader `kind` ('bench', 'torch' or 'torch-ranks') reading `root`.
    `load` holds epochs, workers, batch, compute_ms, seed, drop_caches,
    hint_order, and for 'torch-ranks' ranks and sync_every."""
    if kind == "bench":
        cmd = [os.path.join(bin_dir, "tierfs-bench"), root]
    elif kind == "torch":
        cmd = [PYTHON, os.path.join(HERE, "torch_loader.py"), root]
    elif kind == "torch-ranks":
        cmd = [PYTHON, os.path.join(HERE, "torch_ranks.py"), root, "--ranks", str(load["ranks"]),
               "--sync-every", str(load.get("sync_every", 0))]
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
