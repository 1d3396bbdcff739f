"""Summaries of a benchmark run: one row per (scenario, contender), ratios
against direct (time) and native (the physical limit), as Markdown."""
import json


def summarize(scenario, contender, setup_s, setup_pfs, rows, rss_mb, note):
    """One summary dict from a contender's loader rows."""
    epochs = [r for r in rows if r.get("phase") == "epoch"]
    listing = [r for r in rows if r.get("phase") == "list"]
    def pfs(key):
        return setup_pfs.get(key, 0) + sum(r.get("pfs_" + key, 0) for r in listing + epochs)
    return {
        "scenario": scenario, "contender": contender, "setup_s": setup_s,
        "list_s": listing[0]["wall_s"] if listing else 0.0,
        "epoch_s": [r["wall_s"] for r in epochs],
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
        "rss_mb": rss_mb, "note": note,
    }


def skipped(scenario, contender, note):
    return {"scenario": scenario, "contender": contender, "skipped": True, "note": note}


def _fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def markdown(summaries):
    """A Markdown table with absolute figures and ratios per scenario."""
    max_epochs = max((len(s.get("epoch_s", [])) for s in summaries), default=0)
    head = (["scenario", "contender", "setup s"] + [f"epoch {i + 1} s" for i in range(max_epochs)]
            + ["total s", "total / direct", "last epoch / native", "last MB/s", "p99 ms",
               "PFS meta ops", "PFS MB read", "RSS MB"])
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
            cells = ([scenario, s["contender"], _fmt(s["setup_s"])] + [_fmt(e) for e in epochs]
                     + [_fmt(s["total_s"]), _fmt(vs_direct), _fmt(vs_native, 1),
                        _fmt(s["last_mb_per_s"], 1), _fmt(s["p99_ms"], 1),
                        str(s["pfs_meta_ops"]), _fmt(s["pfs_read_mb"], 1), _fmt(s["rss_mb"], 0)])
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
    head = ["scenario", "contender", "cold s", "cold / direct", "cold / copy-first", "steady s",
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
            lines.append("| " + " | ".join([
                scenario, name, _fmt(s["cold_s"]), _ratio(s["cold_s"], direct and direct["cold_s"]),
                _ratio(s["cold_s"], copy and copy["cold_s"]), _fmt(steady),
                _ratio(steady, direct and direct["epoch_s"][-1]),
                _ratio(steady, copy and copy["epoch_s"][-1]),
                _fmt(s["last_pfs_mb"], 1), str(s["last_pfs_meta_ops"]), declared]) + " |")
    return "\n".join(lines) + "\n"


def save(summaries, path):
    with open(path, "w") as f:
        for s in summaries:
            f.write(json.dumps(s) + "\n")
