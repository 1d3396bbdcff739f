"""tools/bench/peers --kill-node: a daemon SIGKILLed in the middle of an
epoch (a node lost: OOM, a kernel panic, a reboot), and the job going on
with the survivors. Its rank stops with it (its reads after the kill fail:
not counted as the run's errors); from the next epoch on the survivors
split the dataset among themselves, as an elastic job restarted on the
nodes left does. The figures: per node, its PFS share (the bytes its
daemon read from SOURCE, as % of the dataset: source_bytes) in the steady epoch before
the kill, in the kill epoch and in each epoch after."""
import os
import signal
import time

from .peers_epochs import epoch_shares


class Kill:
    """What the killer did: when (CLOCK_MONOTONIC), or why not."""

    def __init__(self):
        self.at = None
        self.error = ""


def killer(daemon, after, kill):
    """A `during` for run_epoch: SIGKILL `daemon` `after` s into the epoch."""
    def run():
        time.sleep(after)
        if not daemon.alive():
            kill.error = "it had died already"
            return
        try:
            os.kill(daemon.proc.pid, signal.SIGKILL)
            kill.at = time.monotonic()
        except OSError as e:
            kill.error = str(e)
    return run


def shares_for(n_files, nodes, seed, epoch, gone):
    """Every rank's share of an epoch: the ranks of `gone` none, the others
    the DistributedSampler shares of that many ranks."""
    alive = [r for r in range(nodes) if r not in gone]
    split = epoch_shares(n_files, len(alive), seed, epoch)
    out = [[] for _ in range(nodes)]
    for rank, share in zip(alive, split):
        out[rank] = share
    return out


def source_bytes(node):
    """What a node's daemon read from SOURCE over an epoch (its counter
    deltas): reads it served from SOURCE, and promotions beyond what its
    peers sent it (a copy from a peer is promoted too). An estimate: a
    forwarded read (a peer's bytes not promoted) makes it low."""
    direct, promoted = node.get("source_bytes"), node.get("promoted_bytes")
    if direct is None or promoted is None:
        return None
    return direct + max(0, promoted - (node.get("peer_fetched_bytes") or 0))


def kill_summary(rows, node, epoch, dataset_bytes, kill):
    """Per node, its PFS share (% of the dataset) per epoch, from the
    steady epoch before the kill (epoch - 1, when there is one) on."""
    first = max(1, epoch - 1)
    nodes = []
    for i in range(len(rows[0]["nodes"]) if rows else 0):
        shares = {}
        for row in rows[first - 1:]:
            got = source_bytes(row["nodes"][i])
            shares[row["epoch"]] = (None if got is None or i == node and row["epoch"] > epoch
                                    else round(100.0 * got / dataset_bytes, 2))
        nodes.append({"node": i, "pfs_pct": shares})
    return {"node": node, "epoch": epoch, "killed": kill.at is not None, "error": kill.error,
            "nodes": nodes}


def kill_markdown(name, summary):
    """Lines for the report: per node its PFS share epoch by epoch."""
    if not summary["killed"]:
        return [f"{name}: node {summary['node']} was not killed: {summary['error']}"]
    epochs = sorted({e for n in summary["nodes"] for e in n["pfs_pct"]})
    head = (f"{name}: node {summary['node']} SIGKILLed in epoch {summary['epoch']}; PFS share "
            "per node (% of the dataset its daemon read from SOURCE, estimated), epoch by epoch "
            + ", ".join(f"{e}{' (kill)' if e == summary['epoch'] else ''}" for e in epochs) + ":")
    lines = [head]
    for n in summary["nodes"]:
        cells = ["-" if n["pfs_pct"].get(e) is None else f"{n['pfs_pct'][e]:.2f}"
                 for e in epochs]
        gone = " (killed)" if n["node"] == summary["node"] else ""
        lines.append(f"  node {n['node']}{gone}: " + " | ".join(cells))
    return lines
