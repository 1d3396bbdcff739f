#!/usr/bin/python3
"""plot.py RESULTS_DIR: PNG charts from a tools/bench/run results directory
(summary.jsonl): epochs.png, per scenario the setup and each epoch's time of
every contender (log scale); totals.png, total time per scenario relative to
direct. Needs python3-matplotlib."""
import json
import os
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot.py RESULTS_DIR")
    out = sys.argv[1]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py: python3-matplotlib is not installed")
    with open(os.path.join(out, "summary.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if not r.get("skipped")]
    if not rows:
        sys.exit("plot.py: no results to plot")
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    contenders = list(dict.fromkeys(r["contender"] for r in rows))
    epochs = max(len(r["epoch_s"]) for r in rows)
    phases = ["setup"] + [f"epoch {i + 1}" for i in range(epochs)]

    fig, axes = plt.subplots(len(scenarios), 1, figsize=(10, 3.2 * len(scenarios)), squeeze=False)
    width = 0.8 / len(phases)
    for ax, sc in zip(axes[:, 0], scenarios):
        group = {r["contender"]: r for r in rows if r["scenario"] == sc}
        names = [c for c in contenders if c in group]
        for p, phase in enumerate(phases):
            values = []
            for c in names:
                r = group[c]
                v = r["setup_s"] if p == 0 else (r["epoch_s"][p - 1] if p - 1 < len(r["epoch_s"]) else 0)
                values.append(max(v, 1e-3))
            ax.bar([i + (p - (len(phases) - 1) / 2) * width for i in range(len(names))], values,
                   width, label=phase, hatch="//" if p == 0 else None)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
        ax.set_yscale("log")
        ax.set_ylabel("seconds (log)")
        ax.set_title(sc)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(ncol=len(phases), fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "epochs.png"), dpi=90)

    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(contenders)
    for k, c in enumerate(contenders):
        values = []
        for sc in scenarios:
            group = {r["contender"]: r for r in rows if r["scenario"] == sc}
            direct = group.get("direct")
            values.append(group[c]["total_s"] / direct["total_s"] if c in group and direct else 0)
        ax.bar([i + (k - (len(contenders) - 1) / 2) * width for i in range(len(scenarios))], values,
               width, label=c)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(scenarios)))
    ax.set_xticklabels(scenarios)
    ax.set_ylabel("total time / direct (lower is better)")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "totals.png"), dpi=90)
    print(f"plots: {out}/epochs.png {out}/totals.png")


if __name__ == "__main__":
    main()
