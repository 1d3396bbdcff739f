"""The report of tools/bench/peers: an epoch's line as printed (row_line), the
results table with its notes (markdown), the machine, and OUT/results.md
and OUT/peers.json with the run's header (write_results). Used by
tools/bench/peers and benchlib/peers_contenders.py."""
import json
import os
import platform

from . import netcut
from .peers_kill import kill_markdown


def mb(v):
    return "-" if v is None else f"{v / 1e6:.1f}"


def row_line(r, run_netns=False):
    return (f"epoch {r['epoch']}: {r['time_s']:.2f} s (ranks {min(r['rank_s']):.2f}-"
            f"{max(r['rank_s']):.2f}"
            + (f"; the others {r['others_s']:.2f}" if r.get("others_s") is not None else "")
            + f"), {r['files']} files, PFS {mb(r['pfs_read_bytes'])} MB "
            f"({r['pfs_pct']:.1f}% of the dataset), {r['pfs_meta_ops']} metadata ops, "
            f"peers {mb(r['peer_bytes'])} MB"
            + (f" at {r['fetch_mb_s']:.0f} MB/s per fetch" if r.get("fetch_mb_s") else "")
            + (f", {r['job_fetch_mb_s']:.0f} MB/s for the job" if r.get("job_fetch_mb_s") else "")
            + (f" ({r['link_ratio']:.2f}x the link{' per node' if run_netns else ''})"
               if r.get("link_ratio") else "")
            + (f", CPU s: daemons {r['daemon_cpu_s']:.2f}, readers {r['reader_cpu_s']:.2f}"
               if r.get("daemon_cpu_s") is not None else "")
            + f", errors {r['errors']}")


def markdown(results):
    lines = ["| contender | epoch | time s (slowest rank) | ranks s | PFS MB | PFS % of dataset "
             "| PFS metadata ops | peers MB | fetch MB/s | handed to homes | files | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        for r in res["epochs"]:
            lines.append(f"| {res['contender']} | {r['epoch']} | {r['time_s']:.2f} | "
                         f"{min(r['rank_s']):.2f}-{max(r['rank_s']):.2f} | {mb(r['pfs_read_bytes'])} | "
                         f"{r['pfs_pct']:.1f} | {r['pfs_meta_ops']} | {mb(r['peer_bytes'])} | "
                         + (f"{r['fetch_mb_s']:.0f}" if r.get("fetch_mb_s") else "-")
                         + f" | {r['handed'] if r.get('handed') is not None else '-'}"
                         + f" | {r['files']} | {r['errors']} |")
        if res["status"] != "ok":  # skipped, or failed (after the epochs it finished)
            note = res["note"].replace("|", "/")
            lines.append(f"| {res['contender']} | {res['status']}: {note} ||||||||||")
    notes = []
    for res in results:
        e = res["epochs"]
        if res["contender"] == "direct" or not e:
            continue
        pct = ", ".join(f"{r['pfs_pct']:.1f}" for r in e)
        notes.append(f"- {res['contender']}: PFS bytes per epoch, % of the dataset: {pct}"
                     + ("; targets: cold <= 100%, steady <= 5%"
                        if res["contender"].startswith("tierfs-peers") else ""))
        if res.get("cut"):
            notes += netcut.cut_markdown(res["contender"], res["cut"]["link"], res["cut"])
            kill = res.get("kill")
            notes += cut_epochs(res["cut"]["epoch"], e,
                                (kill["epoch"], kill["epoch"] + 1) if kill else ())
        if res.get("kill"):
            notes += kill_markdown(res["contender"], res["kill"])
    return "\n".join(lines) + ("\n\n" + "\n".join(notes) if notes else "") + "\n"


def cut_epochs(cut_epoch, epochs, unsteady=()):
    """PFS bytes per steady epoch (after the first, but the cut's and the
    one after it, and `unsteady`: a kill's and the one after it), the cut
    epoch's and the next one's: what the cut cost, and whether the next
    epoch read more than that (the cut node not asked again yet)."""
    def pct(r):
        return r["pfs_pct"]
    steady = [r for r in epochs[1:]
              if r["epoch"] not in (cut_epoch, cut_epoch + 1) + tuple(unsteady)]
    cut = next((r for r in epochs if r["epoch"] == cut_epoch), None)
    after = next((r for r in epochs if r["epoch"] == cut_epoch + 1), None)
    if cut is None:
        return []
    base = sum(pct(r) for r in steady) / len(steady) if steady else None
    text = (f"  - PFS per steady epoch {base:.2f}% of the dataset (mean of epochs "
            f"{', '.join(str(r['epoch']) for r in steady)}); " if base is not None
            else "  - no steady epoch apart from the cut's; ")
    text += f"the cut epoch {cut['epoch']}: {pct(cut):.2f}%"
    if base is not None:
        text += f" (the cut cost {pct(cut) - base:.2f}%)"
    if after is not None:
        text += f"; the next epoch {after['epoch']}: {pct(after):.2f}%"
        if base is not None:
            extra = pct(after) - base
            text += (f" ({extra:+.2f}% beyond a steady one"
                     + ("; MORE than the cut cost" if extra > max(pct(cut) - base, 0) + 1 else "")
                     + ")")
    return [text]


def machine():
    with open("/proc/meminfo") as f:
        mem_gib = int(f.readline().split()[1]) / (1 << 20)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    return f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB RAM, Linux {platform.release()}"



def write_results(run, command, params, results, elapsed):
    """OUT/results.md and OUT/peers.json; returns the header and the table,
    as printed at the end."""
    args, out = run.args, run.out
    table = markdown(results)
    net_text = run.net_text
    header = (f"Command: `{command}`  \nMachine: {machine()}  \n"
              f"pfs-sim parameters: `{json.dumps(params)}`  \n"
              f"Dataset: {len(run.files)} files, {run.bytes / 1e6:.1f} MB; {args.nodes} nodes x "
              f"{args.threads} threads; RAM tier {args.tier_factor:g} x dataset per node; seed "
              f"{args.seed}; "
              + (f"pace {args.pace_ms:g} ms per file per thread; " if args.pace_ms else "")
              + (f"tierfs-peers-paused: {args.start_pause:g} s before the first read, "
                 f"{args.epoch_pause:g} s between epochs; "
                 if args.start_pause or args.epoch_pause else "")
              + (f"node {args.slow_node}'s PFS reads {args.slow_factor:g}x slower; "
                 if args.slow_node is not None else "")
              + (f"node {args.stop_node} stopped {args.stop_s:g} s from {args.stop_after:g} s "
                 f"into epoch {args.stop_epoch}; " if args.stop_node is not None else "")
              + (f"node {args.cut_node}'s link down {args.cut_s:g} s from {args.cut_after:g} s "
                 f"into epoch {args.cut_epoch}; " if args.cut_node is not None else "")
              + "network: "
              + (f"a namespace per node, {net_text}" if args.netns else "loopback")
              + (f"; link (ucx_perftest, 1 MiB messages): {run.link['mb_s']:.0f} MB/s, "
                 f"{run.link['cpu_s_per_gb']:.2f} CPU s per GB" if run.link.get("mb_s") else "")
              + f"; run took {elapsed:.0f} s.\n\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(header + table)
    doc = {"command": command, "machine": machine(), "pfs_params": params,
           "dataset": {"files": len(run.files), "bytes": run.bytes, "mean_kb": args.mean_kb},
           "nodes": args.nodes, "threads": args.threads, "epochs": args.epochs, "seed": args.seed,
           "tier_bytes": int(run.bytes * args.tier_factor), "tier_factor": args.tier_factor,
           "drop_caches": not args.keep_caches, "run_s": elapsed, "contenders": results,
           "link": run.link,
           "network": ({"netns": True, "delay_ms": args.net_delay_ms, "mbit": args.net_mbit,
                        "links": net_text} if args.netns else {"netns": False})}
    with open(os.path.join(out, "peers.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return header + table
