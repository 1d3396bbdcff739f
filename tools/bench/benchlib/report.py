"""Summaries of a benchmark run: one row per (scenario, contender), ratios
against direct (time), native (the physical limit) and the bound (the lowest
cold epoch the setup allows, benchlib/bound.py), as Markdown; per-rank
figures of multi-rank loaders (torch_ranks.py)."""
import json

from . import bound as bounds
from . import mlperf


def summarize(scenario, contender, setup_s, setup_pfs, rows, rss_mb, note, cpu=None):
    """One summary dict from a contender's loader rows; `cpu`: CPU seconds
    of "pfs" (pfs-sim), "daemon" and "loader" over the loader's run."""
    epochs = [r for r in rows if r.get("phase") == "epoch"]
    listing = [r for r in rows if r.get("phase") == "list"]
    def pfs(key):
        return setup_pfs.get(key, 0) + sum(r.get("pfs_" + key, 0) for r in listing + epochs)
    return {
        "scenario": scenario, "contender": contender, "setup_s": setup_s,
        "list_s": listing[0]["wall_s"] if listing else 0.0,
        "epoch_s": [r["wall_s"] for r in epochs],
        "au": [mlperf.au(r) for r in epochs],
        "total_s": setup_s + sum(r["wall_s"] for r in listing + epochs),
        "files": epochs[-1]["files"] if epochs else 0,
        "errors": sum(r["errors"] for r in epochs),
        "last_mb_per_s": epochs[-1]["mb_per_s"] if epochs else 0.0,
        "last_files_per_s": epochs[-1]["files_per_s"] if epochs else 0.0,
        "p50_ms": epochs[-1]["lat_p50_ms"] if epochs else 0.0,
        "p99_ms": max((r["lat_p99_ms"] for r in epochs), default=0.0),
        "pfs_meta_ops": pfs("meta_ops"), "pfs_read_mb": pfs("read_bytes") / 1e6,
        "pfs_meta_epochs_after_first": sum(r.get("pfs_meta_ops", 0) for r in epochs[1:]),
        "cold_s": setup_s + sum(r["wall_s"] for r in listing + epochs[:1]),
        "last_pfs_mb": epochs[-1].get("pfs_read_bytes", 0) / 1e6 if epochs else 0.0,
        "last_pfs_meta_ops": epochs[-1].get("pfs_meta_ops", 0) if epochs else 0,
        "hinted": [r["hinted"] for r in epochs if "hinted" in r],
        "rss_mb": rss_mb, "note": note, "cpu": cpu or {},
        "ranks": [_rank_epoch(r) for r in epochs if "rank_wall_s" in r],
    }


def _rank_epoch(row):
    """The per-rank figures of one torch_ranks epoch row."""
    keys = ("epoch", "wall_s", "rank_wall_s", "rank_wait_s", "spread", "files_per_s", "missing",
            "rank_hinted", "order")
    out = {k: row[k] for k in keys if k in row}
    out.update(pfs_read_mb=row.get("pfs_read_bytes", 0) / 1e6,
               pfs_meta_ops=row.get("pfs_meta_ops", 0), pfs_reads=row.get("pfs_reads", 0))
    return out


def add_bound(summaries, floor):
    """Adds the scenario's bound to each of its summaries (all of one scenario):
    max(native's first epoch, the PFS floor); nothing if `floor` is None."""
    if floor is None:
        return
    native = next((s for s in summaries if s["contender"] == "native" and not s.get("skipped")
                   and s.get("epoch_s")), None)
    native_s = native["epoch_s"][0] if native else None
    value, by = bounds.bound(floor["floor_s"], native_s)
    for s in summaries:
        s.update(pfs_floor=floor, native_epoch1_s=native_s, bound_s=value, bound_by=by)


def skipped(scenario, contender, note):
    return {"scenario": scenario, "contender": contender, "skipped": True, "note": note}


def _fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def markdown(summaries):
    """A Markdown table with absolute figures and ratios per scenario."""
    max_epochs = max((len(s.get("epoch_s", [])) for s in summaries), default=0)
    head = (["scenario", "contender", "setup s"] + [f"epoch {i + 1} s" for i in range(max_epochs)]
            + ["AU per epoch", "total s", "total / direct", "last epoch / native", "last MB/s", "p99 ms",
               "PFS meta ops", "PFS MB read", "RSS MB", "CPU s: PFS / daemon / loader"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_scenario = {}
    for s in summaries:
        by_scenario.setdefault(s["scenario"], []).append(s)
    for scenario, group in by_scenario.items():
        ran = {s["contender"]: s for s in group if not s.get("skipped")}
        direct = ran.get("direct")
        native = ran.get("native")
        for s in group:
            if s.get("skipped"):
                lines.append(f"| {scenario} | {s['contender']} | skipped: {s['note']} |"
                             + " |" * (len(head) - 3))
                continue
            epochs = s["epoch_s"] + [None] * (max_epochs - len(s["epoch_s"]))
            vs_direct = s["total_s"] / direct["total_s"] if direct else None
            vs_native = (s["epoch_s"][-1] / native["epoch_s"][-1]
                         if native and s["epoch_s"] and native["epoch_s"] else None)
            au = [a for a in s.get("au") or [] if a is not None]
            cells = ([scenario, s["contender"], _fmt(s["setup_s"])] + [_fmt(e) for e in epochs]
                     + [" ".join(_fmt(a) for a in au) or "-", _fmt(s["total_s"]), _fmt(vs_direct), _fmt(vs_native, 1),
                        _fmt(s["last_mb_per_s"], 1), _fmt(s["p99_ms"], 1),
                        str(s["pfs_meta_ops"]), _fmt(s["pfs_read_mb"], 1), _fmt(s["rss_mb"], 0),
                        " / ".join(_fmt(s.get("cpu", {}).get(k), 1)
                                   for k in ("pfs", "daemon", "loader"))])
            if s["errors"]:
                cells[1] += f" ({s['errors']} errors)"
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _ratio(value, ref):
    return _fmt(value / ref) if ref else "-"


def cold_steady_markdown(summaries):
    """Per scenario and contender: the cold epoch (setup + listing + epoch 1:
    the time until one epoch is done, from nothing) and the steady state (the
    last epoch), each against direct and copy-first."""
    head = ["scenario", "contender", "epoch 1 s", "cold s", "bound s", "epoch 1 / bound",
            "cold / bound", "cold / direct", "cold / copy-first", "steady s",
            "steady / direct", "steady / copy-first", "steady PFS MB", "steady PFS meta ops",
            "order declared"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_scenario = {}
    for s in summaries:
        if not s.get("skipped") and s.get("epoch_s"):
            by_scenario.setdefault(s["scenario"], {})[s["contender"]] = s
    for scenario, ran in by_scenario.items():
        direct, copy = ran.get("direct"), ran.get("copy-first")
        for name, s in ran.items():
            if name == "native":
                continue
            steady = s["epoch_s"][-1]
            hinted = s.get("hinted") or []
            declared = ("-" if not hinted else
                        "yes" if all(h > 0 for h in hinted) else "NO (see the loader's warning)")
            limit = s.get("bound_s")
            limit_cell = f"{limit:.2f} ({s['bound_by']})" if limit else "-"
            lines.append("| " + " | ".join([
                scenario, name, _fmt(s["epoch_s"][0]), _fmt(s["cold_s"]), limit_cell,
                _ratio(s["epoch_s"][0], limit), _ratio(s["cold_s"], limit),
                _ratio(s["cold_s"], direct and direct["cold_s"]),
                _ratio(s["cold_s"], copy and copy["cold_s"]), _fmt(steady),
                _ratio(steady, direct and direct["epoch_s"][-1]),
                _ratio(steady, copy and copy["epoch_s"][-1]),
                _fmt(s["last_pfs_mb"], 1), str(s["last_pfs_meta_ops"]), declared]) + " |")
    return "\n".join(lines) + "\n"


def _streams_cell(order):
    """The daemon's per-stream look-ahead figures, one 'who: k=v ...' per stream."""
    if not order:
        return "-"
    streams = order.get("streams")
    if streams is None:  # a daemon without per-stream figures: its global ones
        keys = ("position", "lookahead", "lead")
        return " ".join(f"{k}={order[k]}" for k in keys if k in order) or "-"
    parts = []
    for st in streams:
        who = f"r{st['rank']}" if "rank" in st else str(st.get("name", st.get("id", "?")))
        figures = " ".join(f"{k}={v}" for k, v in st.items()
                           if k not in ("rank", "name", "pid") and isinstance(v, (int, float)))
        parts.append(f"{who}: {figures}")
    return "; ".join(parts) or "no streams"


def ranks_markdown(summaries):
    """Per epoch of every multi-rank contender: the epoch (slowest rank), each
    rank's epoch and data wait, the spread, files/s, PFS traffic and the
    daemon's look-ahead per stream. Empty string when no contender has ranks."""
    head = ["scenario", "contender", "epoch", "epoch s", "rank epochs s", "rank data wait s",
            "spread", "files/s", "PFS MB", "PFS meta ops", "PFS reads", "look-ahead (daemon)"]
    lines = []
    for s in summaries:
        for e in s.get("ranks") or []:
            lines.append("| " + " | ".join([
                s["scenario"], s["contender"], str(e["epoch"]), _fmt(e["wall_s"]),
                " ".join(_fmt(x) for x in e["rank_wall_s"]),
                " ".join(_fmt(x) for x in e.get("rank_wait_s", [])),
                _fmt(e["spread"]), _fmt(e["files_per_s"], 0), _fmt(e["pfs_read_mb"], 1),
                str(e["pfs_meta_ops"]), str(e["pfs_reads"]),
                _streams_cell(e.get("order"))]) + " |")
    if not lines:
        return ""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + lines) + "\n"


def save(summaries, path):
    with open(path, "w") as f:
        for s in summaries:
            f.write(json.dumps(s) + "\n")
